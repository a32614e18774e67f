"""ext.offset_map, the cleaner's key -> last offset map (Kafka's SkimpyOffsetMap), against
models in Python: a dict of the greatest offset per key for put/get, Kafka's
buildOffsetMapForSegment loop for add_batches (where it stops included) and Kafka's
shouldRetainRecord for retain_mask, over batches built by ext.batch in every codec."""
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.control import build_end_txn_marker_batch
from ext.batch import build_batch, decode_records, iter_batches
from ext.errors import CorruptRecordError
from ext.offset_map import BYTES_PER_ENTRY, OffsetMap, cleaner_map_memory, digest
from tests.unit.test_batch import raw_batch, raw_record

CODECS = [0, 1, 2, 3, 4]
ATTR_DELETE_HORIZON = 0x40

keys = st.one_of(
    st.binary(max_size=3),  # the empty key and many duplicates
    st.sampled_from([b"a", b"b", b"\x00", b"\xff" * 16, b"k" * 17]),
    st.binary(min_size=15, max_size=300),  # long, across the hash's 16-byte blocks
)


# ---- put / get ----

def test_digest_is_murmur3_x64_128_as_the_reference_gives():
    # mmh3.hash_bytes (the reference C implementation, seed 0) of each key.
    assert digest(b"").hex() == "00000000000000000000000000000000"
    assert digest(b"hello").hex() == "029bbd41b3a7d8cb191dae486a901e5b"
    assert digest(b"The quick brown fox jumps over the lazy dog").hex() == (
        "6c1b07bc7bbc4be347939ac4a93c437a")
    assert digest(bytes(range(17))).hex() == "0ec2e79f0ff4765c24a8da9e6b025fc1"


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(keys, st.integers(0, 2**63 - 1)), max_size=200),
       st.lists(keys, max_size=20))
def test_get_answers_the_greatest_offset_put_for_every_key(puts, probes):
    m = OffsetMap(slots=256)
    model: dict[bytes, int] = {}
    for key, offset in puts:
        m.put(key, offset)
        model[key] = max(offset, model.get(key, -1))
    for key in list(model) + probes:
        assert m.get(key) == model.get(key, -1)
    assert m.size == len(model)
    assert m.latest_offset == max(model.values(), default=-1)
    assert m.utilization == len(model) / 256


@settings(max_examples=100)
@given(st.lists(st.tuples(st.binary(max_size=8), st.integers(0, 10**9)), min_size=1,
                max_size=100), st.integers(1, 8))
def test_a_tiny_table_full_of_collisions_never_loses_the_newer_offset(puts, slots):
    m = OffsetMap(slots=slots)
    model: dict[bytes, int] = {}
    for key, offset in puts:
        if key not in model and len(model) == slots:
            with pytest.raises(OverflowError):
                m.put(key, offset)
            continue
        m.put(key, offset)
        model[key] = max(offset, model.get(key, -1))
    for key, offset in model.items():
        assert m.get(key) == offset
    assert m.size == len(model)


def test_a_null_key_is_skipped_and_a_negative_offset_refused():
    m = OffsetMap(slots=4)
    m.put(None, 7)
    assert m.size == 0 and m.latest_offset == -1
    with pytest.raises(ValueError):
        m.put(b"k", -1)
    m.put(b"", 3)  # the empty key is a key
    assert m.get(b"") == 3 and m.get(b"k") == -1


def test_clear_forgets_every_key():
    m = OffsetMap(slots=16)
    for i in range(10):
        m.put(b"%d" % i, i)
    m.clear()
    assert (m.size, m.latest_offset) == (0, -1)
    assert all(m.get(b"%d" % i) == -1 for i in range(10))


def test_sized_as_kafka_sizes_its_md5_map():
    # 128 MiB (log.cleaner.dedupe.buffer.size's default) over one thread, 24 bytes an entry.
    assert BYTES_PER_ENTRY == 24
    assert cleaner_map_memory(128 * 1024 * 1024, 1) == 134217728
    assert cleaner_map_memory(128 * 1024 * 1024, 3) == 44739242
    assert cleaner_map_memory(10 * 2**30, 2) == 2**31 - 1
    # Kafka's Cleaner refuses a map that cannot take one key: slots * load factor must exceed 1
    assert cleaner_map_memory(2 * BYTES_PER_ENTRY, 1) == 2 * BYTES_PER_ENTRY
    with pytest.raises(ValueError, match="too small to fit in even a single message"):
        cleaner_map_memory(BYTES_PER_ENTRY, 1)
    with pytest.raises(ValueError, match="too small"):
        cleaner_map_memory(4 * BYTES_PER_ENTRY, 4)
    m = OffsetMap(1000)
    assert m.slots == 1000 // 24 and m.max_entries == int(41 * 0.9)
    assert OffsetMap(slots=10, load_factor=0.5).max_entries == 5
    for bad in (dict(), dict(memory=10), dict(memory=100, slots=4), dict(slots=4, load_factor=0)):
        with pytest.raises(ValueError):
            OffsetMap(**bad)


# ---- add_batches: Kafka's buildOffsetMapForSegment ----

def log_of(batches, codec=0):
    """batches: [(base_offset, [(key, value), ...])] -> the bytes of a log segment."""
    return b"".join(
        build_batch([(k, v, [], 1000 + i) for i, (k, v) in enumerate(recs)], base, codec)
        for base, recs in batches)


def kafka_build(batches, start, max_entries):
    """Cleaner.buildOffsetMapForSegment over the batches, record by record, with a dict:
    (map, latest offset, full, the offset it stopped at)."""
    model: dict[bytes, int] = {}
    latest = -1
    for base, recs in batches:
        for delta, (key, _) in enumerate(recs):
            offset = base + delta
            if key is not None and offset >= start:
                if len(model) >= max_entries:
                    return model, latest, True, offset
                model[key] = offset
                latest = offset
        if base + len(recs) - 1 >= start:
            latest = base + len(recs) - 1
    return model, latest, False, -1


@st.composite
def segments(draw):
    pool = draw(st.lists(keys, min_size=1, max_size=30, unique=True))
    record = st.tuples(st.one_of(st.none(), st.sampled_from(pool)),
                       st.one_of(st.none(), st.binary(max_size=20)))
    out, base = [], draw(st.integers(0, 1000))
    for recs in draw(st.lists(st.lists(record, min_size=1, max_size=20), min_size=1, max_size=12)):
        out.append((base, recs))
        base += len(recs) + draw(st.sampled_from([0, 0, 1, 50]))  # offsets keep their gaps
    return out


@pytest.mark.parametrize("codec", CODECS)
@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow,
                                                  HealthCheck.function_scoped_fixture])
@given(segment=segments(), slots=st.integers(1, 40), start=st.integers(0, 1200))
def test_add_batches_takes_what_kafka_takes_and_stops_where_it_stops(codec, segment, slots,
                                                                     start):
    buf = log_of(segment, codec)
    m = OffsetMap(slots=slots)
    fill = m.add_batches(buf, start)
    model, latest, full, stop = kafka_build(segment, start, m.max_entries)
    assert (fill.full, fill.stop_offset) == (full, stop)
    assert m.size == len(model) and fill.records <= sum(len(r) for _, r in segment)
    for _base, recs in segment:
        for key, _ in recs:
            if key is not None:
                assert m.get(key) == model.get(key, -1)
    assert m.latest_offset == latest
    positions = [h.position for h in iter_batches(buf)]
    if full:
        # the batch it stopped in: the one holding the stop offset
        i = next(i for i, (base, recs) in enumerate(segment) if base <= stop < base + len(recs))
        assert (fill.position, fill.batches) == (positions[i], i)
    else:
        assert (fill.position, fill.batches) == (len(buf), len(segment))


@pytest.mark.parametrize("codec", CODECS)
def test_add_batches_agrees_with_putting_record_by_record(codec):
    segment = [(b, [(b"key-%d" % ((b // 100 * 7 + i) % 50), b"v") for i in range(30)])
               for b in range(0, 3000, 100)]
    buf = log_of(segment, codec)
    bulk, one_by_one = OffsetMap(slots=128), OffsetMap(slots=128)
    fill = bulk.add_batches(buf)
    assert not fill.full and fill.records == 30 * 30
    for b in iter_batches(buf):
        for rec in decode_records(buf, b.position):
            one_by_one.put(rec.key, rec.offset)
    assert bulk.size == one_by_one.size == 50
    for k in range(50):
        assert bulk.get(b"key-%d" % k) == one_by_one.get(b"key-%d" % k) != -1


def test_add_batches_reads_the_offset_deltas_a_cleaned_batch_keeps():
    # A batch the cleaner wrote: offset deltas 0, 4, 9 (the records between were removed).
    section = (raw_record(0, key=b"a") + raw_record(4, key=b"b") + raw_record(9, key=b"a"))
    buf = raw_batch(section, 3, base_offset=100, last_offset_delta=9)
    m = OffsetMap(slots=8)
    assert m.add_batches(buf).records == 3
    assert (m.get(b"a"), m.get(b"b"), m.latest_offset) == (109, 104, 109)


def test_control_batches_and_aborted_transactions_are_not_mapped():
    pid = 7
    buf = (build_batch([(b"a", b"1", [], 1)], 0)
           + build_batch([(b"a", b"aborted", [], 2), (b"b", b"aborted", [], 2)], 1,
                         producer_id=pid, producer_epoch=0, base_sequence=0, is_transactional=True)
           + build_batch([(b"c", b"other", [], 3)], 3, producer_id=8, producer_epoch=0,
                         base_sequence=0, is_transactional=True)
           + build_end_txn_marker_batch(0, pid, 0, 0, 5, 4))
    m = OffsetMap(slots=8)
    fill = m.add_batches(buf, aborted=[(pid, 1, 4)])
    assert (m.get(b"a"), m.get(b"b"), m.get(b"c")) == (0, -1, 3)
    assert (fill.batches, m.latest_offset) == (4, 4)  # the marker's offset is read past
    m.clear()
    m.add_batches(buf)  # not told of the abort: the records are mapped
    assert (m.get(b"a"), m.get(b"b")) == (1, 2)


def test_a_batch_cut_by_the_buffer_end_is_left_for_the_next_read():
    buf = log_of([(0, [(b"a", b"1")]), (1, [(b"b", b"2"), (b"c", b"3")])])
    first = len(build_batch([(b"a", b"1", [], 1000)], 0))
    m = OffsetMap(slots=8)
    fill = m.add_batches(buf[:-3])
    assert (fill.full, fill.position, fill.batches) == (False, first, 1)
    assert m.get(b"b") == -1
    fill = m.add_batches(buf, pos=fill.position)
    assert (fill.position, m.get(b"c"), m.latest_offset) == (len(buf), 2, 2)


def test_a_record_that_does_not_parse_is_refused_with_its_batch():
    good = build_batch([(b"a", b"1", [], 1)], 0)
    bad = raw_batch(b"\x80", 1, base_offset=1)
    m = OffsetMap(slots=8)
    for call in (m.add_batches, m.retain_mask):
        with pytest.raises(CorruptRecordError, match=f"batch at {len(good)}: record 0"):
            call(good + bad)
    with pytest.raises(CorruptRecordError, match="magic"):
        m.add_batches(b"\x00" * 16 + b"\x01" + b"\x00" * 60)


# ---- retain_mask: Kafka's shouldRetainRecord ----

def kafka_retains(m_model, latest, offset, key, value, now, horizon):
    if offset > latest:
        return True
    if key is None:
        return False
    tombstone_dropped = value is None and horizon is not None and now >= horizon
    return offset >= m_model.get(key, -1) and not tombstone_dropped


@pytest.mark.parametrize("codec", CODECS)
@settings(max_examples=40, suppress_health_check=[HealthCheck.too_slow,
                                                  HealthCheck.function_scoped_fixture])
@given(segment=segments(), slots=st.integers(1, 40))
def test_retain_mask_keeps_what_kafka_keeps(codec, segment, slots):
    buf = log_of(segment, codec)
    m = OffsetMap(slots=slots)
    m.add_batches(buf)
    model, latest, _, _ = kafka_build(segment, 0, m.max_entries)
    want = [kafka_retains(model, latest, base + i, k, v, -1, None)
            for base, recs in segment for i, (k, v) in enumerate(recs)]
    assert list(m.retain_mask(buf)) == [int(w) for w in want]


@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow])
@given(segment=segments())
def test_a_full_clean_leaves_the_last_record_of_each_key_in_offset_order(segment):
    buf = log_of(segment)
    m = OffsetMap(slots=64)  # room for every key: the whole segment is taken
    assert not m.add_batches(buf).full
    kept = [(r.offset, r.key, r.value) for b in iter_batches(buf)
            for r, keep in zip(decode_records(buf, b.position),
                               m.retain_mask(buf, b.position)[:b.records_count]) if keep]
    last: dict[bytes, tuple] = {}
    for base, recs in segment:
        for i, (k, v) in enumerate(recs):
            if k is not None:
                last[k] = (base + i, k, v)
    assert kept == sorted(last.values())


def test_tombstones_go_once_their_batch_delete_horizon_has_passed():
    horizon = 5_000
    plain = build_batch([(b"a", None, [], horizon)], 0)
    # a batch the cleaner rewrote with a delete horizon: attribute bit 6, baseTimestamp = horizon
    attrs = struct.unpack_from(">h", plain, 21)[0] | ATTR_DELETE_HORIZON
    section = plain[61:]
    marked = raw_batch(section, 1, base_offset=1, attributes=attrs, base_ts=horizon,
                       max_ts=horizon)
    buf = plain + marked + build_batch([(b"b", b"live", [], 1)], 2)
    m = OffsetMap(slots=8)
    m.add_batches(buf)
    # offset 0 is an older "a"; offset 1 is its last occurrence, a tombstone
    assert list(m.retain_mask(buf)) == [0, 1, 1]
    assert list(m.retain_mask(buf, now_ms=horizon - 1)) == [0, 1, 1]
    assert list(m.retain_mask(buf, now_ms=horizon)) == [0, 0, 1]


def test_control_records_are_kept_and_records_past_the_map_are_kept():
    buf = (build_batch([(None, b"no key", [], 1), (b"a", b"1", [], 1)], 0)
           + build_end_txn_marker_batch(1, 9, 0, 0, 5, 2)
           + build_batch([(b"a", b"2", [], 1), (None, b"no key", [], 1)], 3))
    m = OffsetMap(slots=8)
    m.put(b"a", 1)  # a map that stops before offset 3
    assert m.latest_offset == 1
    assert list(m.retain_mask(buf)) == [0, 1, 1, 1, 1]


def test_bad_arguments_raise_before_anything_is_allocated():
    """A malformed aborted range, an offset beyond int64 or a buffer that is not one raise the
    Python error (and, since the checks come first, leave nothing allocated behind)."""
    m = OffsetMap(slots=16)
    with pytest.raises(ValueError):
        m.add_batches(b"", aborted=[(1, 2)])
    with pytest.raises(OverflowError):
        m.add_batches(b"", aborted=[(1, 2, 2**64)])
    with pytest.raises(TypeError):
        m.add_batches(object())
    with pytest.raises(TypeError):
        m.retain_mask(object())
    assert m.add_batches(b"", aborted=[(1, 2, 3)]).records == 0


def test_a_buffer_mixing_codecs_maps_and_masks_as_its_uncompressed_twin():
    # The walks run uncompressed batches without the GIL and hand each compressed one back to
    # it: a buffer alternating codecs gives what the same records in plain batches give,
    # including where a map that fills up stops.
    mixed, plain = bytearray(), bytearray()
    offset = 0
    for b in range(20):
        records = [(b"k%d" % ((b * 7 + i) % 30), None if i % 5 == 0 else b"v", [], 1000 + i)
                   for i in range(8)]
        mixed += build_batch(records, base_offset=offset, compression=CODECS[b % len(CODECS)])
        plain += build_batch(records, base_offset=offset)
        offset += len(records)
    for slots in (1000, 25):
        maps = []
        for buf in (mixed, plain):
            m = OffsetMap(slots=slots)
            fill = m.add_batches(bytes(buf))
            maps.append(((fill.full, fill.batches, fill.records, fill.stop_offset), m.latest_offset, m.size,
                         [m.get(b"k%d" % k) for k in range(30)], m.retain_mask(bytes(buf), 0, 0)))
        assert maps[0] == maps[1]
        assert maps[0][0][0] == (slots == 25)
