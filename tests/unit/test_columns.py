"""ext.columns (decode_columns) and ext.arrow_columns (to_arrow).

TestDecodeColumns runs against both the Cython kernel and ``reference_decode_columns``,
a Python model of the same contract written over ext.batch.decode_records (for tests
only: nothing falls back to it); hypothesis then checks that the two agree on random and
on damaged buffers. test_native_kernel_is_loaded asserts which one the package provides.
"""
import importlib.machinery
import random
import struct
import types

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ext import batch, columns
from ext.arrow_columns import spark_kafka_schema, to_arrow
from ext.batch import CorruptRecordError, TruncatedBatchError, build_batch
from ext.compress import compress
from tests.unit.test_batch import raw_batch, raw_record

CODECS = [0, 1, 2, 3, 4]
ALL = 2**62
ARRAYS = {"offsets": np.int64, "timestamps_us": np.int64, "timestamp_types": np.int32,
          "key_offsets": np.int32, "value_offsets": np.int32}
HEADER_ARRAYS = {"header_list_offsets": np.int32, "header_key_offsets": np.int32,
                 "header_value_offsets": np.int32}
SCALARS = ["count", "key_data", "key_validity", "key_null_count", "value_data", "value_validity",
           "value_null_count", "next_position", "last_offset", "include_headers", "header_count",
           "header_list_validity", "header_list_null_count", "header_key_data", "header_value_data",
           "header_value_validity", "header_value_null_count"]


# ---- the reference ----

def _bitmap(valid):
    if all(valid):
        return None, 0
    return np.packbits(np.array(valid, bool), bitorder="little").tobytes(), valid.count(False)


def _binary(blobs):
    lengths = [0 if b is None else len(b) for b in blobs]
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    validity, nulls = _bitmap([b is not None for b in blobs])
    return offsets, b"".join(b for b in blobs if b), validity, nulls


def _columns_of(rows, include_headers, next_position, last_offset):
    c = types.SimpleNamespace(count=len(rows), next_position=next_position, last_offset=last_offset,
                              include_headers=include_headers)
    c.offsets = np.array([r[0] for r in rows], np.int64)
    c.timestamps_us = np.array([r[1] for r in rows], np.int64) * 1000
    c.timestamp_types = np.array([r[2] for r in rows], np.int32)
    c.key_offsets, c.key_data, c.key_validity, c.key_null_count = _binary([r[3] for r in rows])
    c.value_offsets, c.value_data, c.value_validity, c.value_null_count = _binary([r[4] for r in rows])
    c.header_count = c.header_list_null_count = c.header_value_null_count = 0
    c.header_list_offsets = c.header_list_validity = c.header_key_offsets = None
    c.header_key_data = c.header_value_offsets = c.header_value_data = c.header_value_validity = None
    if include_headers:
        headers = [h for r in rows for h in r[5]]
        c.header_count = len(headers)
        c.header_list_offsets = np.concatenate([[0], np.cumsum([len(r[5]) for r in rows])]).astype(np.int32)
        c.header_list_validity, c.header_list_null_count = _bitmap([bool(r[5]) for r in rows])
        c.header_key_offsets, c.header_key_data, _, _ = _binary([k.encode() for k, _ in headers])
        (c.header_value_offsets, c.header_value_data, c.header_value_validity,
         c.header_value_null_count) = _binary([v for _, v in headers])
    return c


def reference_decode_columns(data, start_offset, end_offset, include_headers=False,
                             check_crc=False, base_position=0):
    """decode_columns' contract over ext.batch, one Record object at a time."""
    rows, pos, last_offset = [], 0, -1
    while pos < len(data):
        try:
            h = batch.read_header(data, pos)
        except TruncatedBatchError:
            break
        except CorruptRecordError as e:
            raise CorruptRecordError(str(e), base_position + pos) from e
        if (not h.is_control and h.records_count and h.last_offset >= start_offset
                and h.base_offset < end_offset):
            try:
                records = batch.decode_records(data, pos, check_crc)
            except CorruptRecordError as e:
                raise CorruptRecordError(str(e), base_position + pos) from e
            rows += [(r.offset, r.timestamp, h.timestamp_type, r.key, r.value, r.headers)
                     for r in records if start_offset <= r.offset < end_offset]
        pos += h.size
        last_offset = h.last_offset
    return _columns_of(rows, include_headers, pos, last_offset)


IMPLEMENTATIONS = {"native": columns.decode_columns, "reference": reference_decode_columns}


def assert_same(got, want):
    for name, dtype in {**ARRAYS, **(HEADER_ARRAYS if want.include_headers else {})}.items():
        a, b = getattr(got, name), getattr(want, name)
        assert a.dtype == dtype, name
        assert np.array_equal(a, b), name
    for name in SCALARS:
        assert getattr(got, name) == getattr(want, name), name


def decode_both(*args, **kwargs):
    """The native result, after checking that the reference agrees (errors included)."""
    try:
        want = reference_decode_columns(*args, **kwargs)
    except CorruptRecordError as e:
        with pytest.raises(CorruptRecordError) as got:
            columns.decode_columns(*args, **kwargs)
        assert got.value.position == e.position
        return None
    got = columns.decode_columns(*args, **kwargs)
    assert_same(got, want)
    return got


def test_native_kernel_is_loaded():
    assert columns.__file__.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES))
    assert type(columns.decode_columns).__name__ == "cython_function_or_method"
    assert columns.Columns.__module__ == "ext.columns"


# ---- one test class, both implementations ----

def recs(n, ts=1_000, start=0):
    return [(b"k%d" % i, b"v%d" % i, [], ts + i) for i in range(start, start + n)]


@pytest.fixture(params=list(IMPLEMENTATIONS))
def decode(request):
    return IMPLEMENTATIONS[request.param]


class TestDecodeColumns:
    def test_empty_buffer(self, decode):
        c = decode(b"", 0, ALL, include_headers=True)
        assert (c.count, c.next_position, c.last_offset, c.header_count) == (0, 0, -1, 0)
        assert list(c.key_offsets) == list(c.header_list_offsets) == list(c.header_key_offsets) == [0]
        assert c.key_data == b"" and c.key_validity is c.value_validity is c.header_value_validity is None

    def test_fields_of_one_batch(self, decode):
        data = build_batch([(b"k0", b"v0", [], 1000), (None, b"", [("h", None)], 1500),
                            (b"k2", None, [("a", b"1"), ("b\u00fc", b"")], 900)], base_offset=10)
        c = decode(data, 0, ALL, include_headers=True)
        assert (c.count, c.next_position, c.last_offset) == (3, len(data), 12)
        assert list(c.offsets) == [10, 11, 12]
        assert list(c.timestamps_us) == [1_000_000, 1_500_000, 900_000]
        assert list(c.timestamp_types) == [0, 0, 0]
        assert (list(c.key_offsets), c.key_data, c.key_validity, c.key_null_count) == \
            ([0, 2, 2, 4], b"k0k2", bytes([0b101]), 1)
        assert (list(c.value_offsets), c.value_data, c.value_validity, c.value_null_count) == \
            ([0, 2, 2, 2], b"v0", bytes([0b011]), 1)
        assert (list(c.header_list_offsets), c.header_list_validity, c.header_list_null_count) == \
            ([0, 0, 1, 3], bytes([0b110]), 1)
        assert (c.header_count, list(c.header_key_offsets), c.header_key_data) == \
            (3, [0, 1, 2, 5], "hab\u00fc".encode())
        assert (list(c.header_value_offsets), c.header_value_data, c.header_value_validity) == \
            ([0, 0, 1, 1], b"1", bytes([0b110]))

    def test_without_headers(self, decode):
        c = decode(build_batch([(b"k", b"v", [("h", b"x")], 5)]), 0, ALL)
        assert not c.include_headers and c.header_count == 0
        assert c.header_list_offsets is None and c.header_key_data is None
        assert c.header_value_validity is None

    def test_log_append_time_is_the_batch_max_timestamp(self, decode):
        data = build_batch([(b"a", b"", [], 5), (b"b", b"", [], 9), (b"c", b"", [], 7)], timestamp_type=1)
        c = decode(data, 0, ALL)
        assert list(c.timestamps_us) == [9000] * 3 and list(c.timestamp_types) == [1] * 3
        assigned = bytearray(build_batch(recs(2)))  # a broker's LogAppendTime
        batch.assign_offsets(assigned, 40, 0, log_append_time=123_456)
        c = decode(bytes(assigned), 0, ALL)
        assert list(c.offsets) == [40, 41] and list(c.timestamps_us) == [123_456_000] * 2

    @pytest.mark.parametrize("codec", CODECS)
    def test_every_codec(self, decode, codec):
        records = [(b"key %d" % i, b"value %d " % i * (i % 17), [("i", b"%d" % i)] if i % 3 else [],
                    1_700_000_000_000 + i) for i in range(500)]
        plain = decode(build_batch(records, base_offset=7), 0, ALL, include_headers=True)
        c = decode(build_batch(records, base_offset=7, compression=codec), 0, ALL, include_headers=True)
        assert c.count == 500 and c.value_data == plain.value_data
        assert c.header_key_data == plain.header_key_data == b"i" * c.header_count
        assert list(c.value_offsets) == list(plain.value_offsets)

    def test_control_batches_are_skipped(self, decode):
        data = (build_batch(recs(2), base_offset=0)
                + build_batch([(b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x00", [], 5)],
                              base_offset=2, is_control=True, is_transactional=True)
                + build_batch(recs(2), base_offset=3, compression=3))
        c = decode(data, 0, ALL)
        assert list(c.offsets) == [0, 1, 3, 4] and c.last_offset == 4

    def test_offset_range_cuts_batches_and_skips_the_rest_unread(self, decode):
        first, second, third = (build_batch(recs(5), base_offset=b) for b in (0, 5, 10))
        damaged = bytearray(third)
        damaged[-3] ^= 0xFF  # records and CRC both bad: only decoding would notice
        data = first + second + bytes(damaged)
        c = decode(data, 3, 8, check_crc=True)
        assert list(c.offsets) == [3, 4, 5, 6, 7]
        assert c.value_data == b"v3v4v0v1v2"
        assert (c.next_position, c.last_offset) == (len(data), 14)
        assert decode(data, 100, 200).count == 0
        with pytest.raises(CorruptRecordError):
            decode(data, 3, 11, check_crc=True)

    def test_offset_gaps_of_a_compacted_batch(self, decode):
        section = b"".join(raw_record(offset_delta=d, key=b"k%d" % d, value=b"v") for d in (0, 2, 5))
        data = raw_batch(section, 3, base_offset=100, last_offset_delta=6)
        assert list(decode(data, 0, ALL).offsets) == [100, 102, 105]
        assert list(decode(data, 101, 105).offsets) == [102]
        assert decode(data, 103, 105).count == 0 and decode(data, 103, 105).last_offset == 106

    def test_torn_tail_is_left_for_the_next_call(self, decode):
        first = build_batch(recs(3))
        second = build_batch(recs(3, start=3), base_offset=3, compression=4)
        for cut in range(len(second)):
            c = decode(first + second[:cut], 0, ALL)
            assert (c.count, c.next_position, c.last_offset) == (3, len(first), 2), cut
        assert decode(second[:30], 0, ALL).next_position == 0

    @pytest.mark.parametrize("base_position", [0, 4096])
    def test_corrupt_batch_names_its_position(self, decode, base_position):
        good = build_batch(recs(2))
        records = raw_record(key=b"a") + raw_record(offset_delta=1)
        cases = {
            "crc": bytearray(build_batch(recs(2, start=2), base_offset=2)),
            "record length": raw_batch(b"\x7f" + records[1:], 2, base_offset=2),
            "records end early": raw_batch(records, 3, base_offset=2, last_offset_delta=2),
            "bytes after the records": raw_batch(records + b"\x00", 2, base_offset=2),
            "unknown codec": raw_batch(records, 2, base_offset=2, attributes=6),
            "lz4 cut short": raw_batch(compress(3, records)[:-4], 2,
                                       base_offset=2, attributes=3),
            "header key not utf-8": raw_batch(raw_record(headers=[(b"\xff", b"x")]), 1, base_offset=2),
            "magic": raw_batch(records, 2, base_offset=2, magic=1),
            "batch length": raw_batch(records, 2, base_offset=2, batch_length=20),
        }
        cases["crc"][-1] ^= 1
        for name, bad in cases.items():
            with pytest.raises(CorruptRecordError) as e:
                decode(good + bytes(bad), 0, ALL, check_crc=True, base_position=base_position,
                       include_headers=True)
            assert e.value.position == base_position + len(good), name
            assert not isinstance(e.value, TruncatedBatchError), name

    @pytest.mark.parametrize("codec", [0, 4])
    def test_columns_grow_past_their_first_size(self, decode, codec):
        # Past 1024 records and headers and 64 KiB of each data column; records cut short
        # by a full column are parsed again.
        rng = random.Random(codec)
        records = [(rng.randbytes(rng.randrange(40)), rng.randbytes(rng.randrange(400)),
                    [(f"key {j}", rng.randbytes(rng.randrange(60))) for j in range(i % 4)], i)
                   for i in range(3000)]
        data = b"".join(build_batch(records[i:i + 1000], base_offset=i, compression=codec)
                        for i in range(0, 3000, 1000))
        c = decode(data, 1, 2999, include_headers=True)
        assert c.count == 2998 and c.header_count == sum(len(r[2]) for r in records[1:2999])
        assert c.value_data == b"".join(r[1] for r in records[1:2999])
        assert c.header_value_data == b"".join(v for r in records[1:2999] for _, v in r[2])
        if decode is columns.decode_columns:
            assert_same(c, reference_decode_columns(data, 1, 2999, include_headers=True))

    def test_chunked_reads_continue_from_next_position(self, decode):
        rng = random.Random(5)
        data, offset = b"", 0
        for i in range(40):
            n = rng.randrange(1, 30)
            data += build_batch(recs(n, start=offset), base_offset=offset, compression=i % 5)
            offset += n
        whole = decode(data, 0, ALL)
        got, pos, chunk = [], 0, 700
        while pos < len(data):
            c = decode(data[pos:pos + chunk], 0, ALL, base_position=pos)
            if c.next_position == 0:
                chunk *= 2  # a batch larger than the read: read more
                continue
            got.append(c)
            pos += c.next_position
        assert np.array_equal(np.concatenate([c.offsets for c in got]), whole.offsets)
        assert b"".join(c.value_data for c in got) == whole.value_data
        assert got[-1].last_offset == whole.last_offset == offset - 1


# ---- native only ----

def test_error_message_names_the_batch_and_its_offsets():
    bad = bytearray(build_batch(recs(4), base_offset=50))
    bad[-1] ^= 1
    with pytest.raises(CorruptRecordError, match=r"batch at 1000 \(offsets 50\.\.53\): CRC32C"):
        columns.decode_columns(bytes(bad), 0, ALL, check_crc=True, base_position=1000)
    with pytest.raises(CorruptRecordError, match=r"batch at 1000: magic 1") as e:
        columns.decode_columns(raw_batch(b"", 0, magic=1), 0, ALL, base_position=1000)
    assert e.value.position == 1000


def test_any_buffer_and_writable_arrays():
    data = build_batch(recs(3))
    for buf in (data, bytearray(data), memoryview(b"xx" + data)[2:]):
        c = columns.decode_columns(buf, 0, ALL)
        assert list(c.offsets) == [0, 1, 2]
    assert c.offsets.flags.writeable and c.key_offsets.flags.c_contiguous
    assert type(c.key_data) is bytes and type(c.value_data) is bytes


@pytest.fixture
def column_limit():
    previous = columns._set_column_limit(2**31 - 1)
    yield columns._set_column_limit
    columns._set_column_limit(previous)


@pytest.mark.parametrize("codec", [0, 3])
def test_a_full_column_ends_the_call_at_a_batch_boundary(column_limit, codec):
    batches = [build_batch([(b"k", bytes([i]) * 300, [("h", b"x" * 50)], i)] * 4, base_offset=4 * i,
                           compression=codec) for i in range(10)]
    data = b"".join(batches)
    column_limit(2500)  # two batches' values (2 * 1200 bytes), not three
    got, pos = [], 0
    while pos < len(data):
        c = columns.decode_columns(data[pos:], 0, ALL, include_headers=True)
        assert c.next_position > 0 and len(c.value_data) <= 2500
        assert c.next_position in np.cumsum([len(b) for b in batches]) - pos
        got.append(c)
        pos += c.next_position
    assert [c.count for c in got] == [8] * 5
    assert b"".join(c.value_data for c in got) == b"".join(bytes([i]) * 1200 for i in range(10))
    assert got[1].header_count == 8 and got[1].header_key_data == b"h" * 8
    column_limit(1000)  # one batch alone is over: that cannot be split
    with pytest.raises(CorruptRecordError, match="1000 bytes in one column") as e:
        columns.decode_columns(data, 0, ALL)
    assert e.value.position == 0


# ---- hypothesis: native == reference ----

HEADER = st.tuples(st.text(max_size=6), st.one_of(st.none(), st.binary(max_size=8)))
RECORD = st.tuples(st.one_of(st.none(), st.binary(max_size=12)),
                   st.one_of(st.none(), st.just(b""), st.binary(max_size=80)),
                   st.lists(HEADER, max_size=3),
                   st.integers(-1, 2**42))
BATCH = st.tuples(st.lists(RECORD, min_size=1, max_size=6), st.sampled_from(CODECS),
                  st.booleans(), st.integers(0, 1), st.integers(0, 3), st.integers(0, 9))


def build_log(specs):
    """Batches from (records, codec, transactional, timestamp_type, gap, control_odds) specs."""
    data, offset = b"", 0
    for records, codec, txn, ts_type, gap, control_odds in specs:
        offset += gap
        data += build_batch(records, base_offset=offset, compression=codec, timestamp_type=ts_type,
                            is_transactional=txn, is_control=txn and control_odds == 0)
        offset += len(records)
    return data, offset


FUZZ = settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])


RANGE = st.one_of(st.just((0, ALL)),
                  st.tuples(st.integers(-2, 40), st.integers(0, 45)).map(lambda r: (r[0], r[0] + r[1])))


@FUZZ
@given(st.lists(BATCH, min_size=1, max_size=6), RANGE, st.booleans(), st.booleans(),
       st.integers(0, 10**6), st.one_of(st.just(0), st.integers(1, 200)))
def test_random_logs_agree(specs, bounds, headers, check_crc, base_position, torn):
    data, _ = build_log(specs)
    data = data[:len(data) - torn]
    decode_both(data, *bounds, include_headers=headers, check_crc=check_crc,
                base_position=base_position)


@FUZZ
@given(st.lists(BATCH, min_size=1, max_size=4), st.lists(st.tuples(st.integers(0, 10**6),
                                                                  st.integers(1, 255)), max_size=3),
       st.booleans(), st.booleans())
def test_damaged_logs_agree(specs, flips, headers, check_crc):
    data = bytearray(build_log(specs)[0])
    for where, xor in flips:
        data[where % len(data)] ^= xor
    decode_both(bytes(data), 0, ALL, include_headers=headers, check_crc=check_crc)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.binary(max_size=6), st.text(max_size=3).map(str.encode)),
                min_size=1, max_size=4), st.booleans())
def test_header_keys_are_checked_as_utf8_like_python(keys, headers):
    section = b"".join(raw_record(offset_delta=i, headers=[(k, b"v")]) for i, k in enumerate(keys))
    data = raw_batch(section, len(keys))
    valid = all(_is_utf8(k) for k in keys)
    c = decode_both(data, 0, ALL, include_headers=headers)
    assert (c is not None) == valid


def _is_utf8(b):
    try:
        b.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


# ---- batches other clients wrote ----

def test_kafka_python_batches(monkeypatch):
    builder_module = pytest.importorskip("kafka.record.default_records")
    import cramjam
    import kafka.codec
    monkeypatch.setattr(kafka.codec, "snappy", types.SimpleNamespace(
        compress=lambda d: bytes(cramjam.snappy.compress_raw(bytes(d))),
        decompress=lambda d: bytes(cramjam.snappy.decompress_raw(bytes(d)))))
    data, offset = b"", 0
    for codec in CODECS:
        builder = builder_module.DefaultRecordBatchBuilder(
            magic=2, compression_type=codec, is_transactional=False, producer_id=-1,
            producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
        for i in range(50):
            builder.append(i, timestamp=1_700_000_000_000 + i, key=None if i % 4 else b"k%d" % i,
                           value=b"v" * i, headers=[("h", None), ("i", b"%d" % i)] if i % 2 else [])
        raw = bytearray(builder.build())
        struct.pack_into(">q", raw, 0, offset)
        data += raw
        offset += 50
    c = decode_both(data, 10, 240, include_headers=True, check_crc=True)
    assert c.count == 230 and c.header_count == 230 and c.header_value_null_count == 115


def test_librdkafka_batches():
    confluent_kafka = pytest.importorskip("confluent_kafka")
    from tests.oracle.mock_cluster import fetch_raw, mock_broker

    conf = {"test.mock.num.brokers": 1, "log_level": 3, "linger.ms": 5, "batch.num.messages": 40}
    producer = confluent_kafka.Producer({**conf, "compression.type": "lz4"})
    for i in range(200):
        producer.produce("t", key=None if i % 5 == 0 else b"k%d" % i, value=b"value %d" % i * (i % 9),
                         headers=[("trace", b"%d" % i), ("null", None)] if i % 2 else None,
                         partition=0, timestamp=1_700_000_000_000 + i)
    assert producer.flush(30) == 0
    raw = fetch_raw(*mock_broker(producer), "t")
    c = decode_both(raw, 0, ALL, include_headers=True, check_crc=True)
    assert list(c.offsets) == list(range(200)) and c.header_count == 200

    txn = confluent_kafka.Producer({**conf, "transactional.id": "strom-columns"})
    txn.init_transactions(30)
    for outcome in ("commit", "abort"):
        txn.begin_transaction()
        for i in range(3):
            txn.produce("txn", value=b"%s %d" % (outcome.encode(), i), partition=0)
        assert txn.flush(30) == 0
        if outcome == "commit":
            txn.commit_transaction(30)
        else:
            txn.abort_transaction(30)
    raw = fetch_raw(*mock_broker(txn), "txn")
    # The mock coordinator writes its markers with CRC 0: they are skipped, never checked.
    c = decode_both(raw, 0, ALL, check_crc=True)
    assert list(c.offsets) == [0, 1, 2, 4, 5, 6] and c.last_offset == 7


# ---- Arrow ----

def spark_rows(data, topic, partition, include_headers):
    out = []
    for h in batch.iter_batches(data):
        if h.is_control:
            continue
        for r in batch.decode_records(data, h.position):
            row = {"key": r.key, "value": r.value, "topic": topic, "partition": partition,
                   "offset": r.offset, "timestamp": r.timestamp * 1000, "timestampType": h.timestamp_type}
            if include_headers:
                row["headers"] = [{"key": k, "value": v} for k, v in r.headers] or None
            out.append(row)
    return out


def arrow_rows(rb):
    pa = pytest.importorskip("pyarrow")
    rb = rb.set_column(5, "timestamp", rb.column("timestamp").cast(pa.int64()))
    return rb.to_pylist()


@pytest.mark.parametrize("include_headers", [False, True])
def test_arrow_schema_is_what_pyspark_expects(include_headers):
    pa = pytest.importorskip("pyarrow")
    spark_types = pytest.importorskip("pyspark.sql.types")
    from pyspark.sql.pandas.types import to_arrow_schema

    t = spark_types
    fields = [t.StructField("key", t.BinaryType()), t.StructField("value", t.BinaryType()),
              t.StructField("topic", t.StringType()), t.StructField("partition", t.IntegerType()),
              t.StructField("offset", t.LongType()), t.StructField("timestamp", t.TimestampType()),
              t.StructField("timestampType", t.IntegerType())]
    if include_headers:
        fields.append(t.StructField("headers", t.ArrayType(t.StructType([
            t.StructField("key", t.StringType()), t.StructField("value", t.BinaryType())]))))
    expected = to_arrow_schema(t.StructType(fields), timezone="UTC")
    data = build_batch([(None, b"v", [("h", None)], 1), (b"k", None, [], 2)])
    rb = to_arrow(columns.decode_columns(data, 0, ALL, include_headers), "t", 0, include_headers)
    for schema in (rb.schema, spark_kafka_schema(include_headers)):
        assert expected.equals(schema)  # Spark's own check
        assert str(schema) == str(expected) and all(f.nullable for f in schema)
    assert rb.schema.field("timestamp").type == pa.timestamp("us", tz="UTC")
    empty = to_arrow(columns.decode_columns(b"", 0, ALL, include_headers), "t", 0, include_headers)
    assert empty.num_rows == 0 and expected.equals(empty.schema)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(BATCH, max_size=5), st.booleans(), st.text(max_size=10), st.integers(0, 2**31 - 1))
def test_arrow_values_are_the_records(specs, include_headers, topic, partition):
    data, _ = build_log(specs)
    c = decode_both(data, 0, ALL, include_headers=include_headers)
    rb = to_arrow(c, topic, partition, include_headers)
    rb.validate(full=True)
    assert arrow_rows(rb) == spark_rows(data, topic, partition, include_headers)


def test_to_arrow_refusals():
    c = columns.decode_columns(build_batch(recs(2)), 0, ALL)
    with pytest.raises(ValueError, match="without headers"):
        to_arrow(c, "t", 0, include_headers=True)
    with pytest.raises(ValueError, match="2 GiB"):
        to_arrow(types.SimpleNamespace(count=10**7, include_headers=False), "t" * 249, 0)

