"""ext.batch: header layout, build/decode round trips, scan, assign_offsets, corrupt input.

Batches built here by hand (``raw_batch``) use struct and the crc32c package directly,
so the header layout is checked against an encoder that shares no code with ext.batch.
"""
import os
import struct

import crc32c
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ext import batch
from ext.batch import CorruptRecordError, TruncatedBatchError

CODECS = [0, 1, 2, 3, 4]
HEADER = struct.Struct(">qiibIhiqqqhii")  # the 61-byte batch header


def zigzag(n: int) -> bytes:
    z = (n << 1) ^ (n >> 63)
    z &= (1 << 64) - 1
    out = bytearray()
    while z >= 0x80:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def raw_record(offset_delta=0, ts_delta=0, key=b"k", value=b"v", headers=()) -> bytes:
    body = b"\x00" + zigzag(ts_delta) + zigzag(offset_delta)
    for blob in (key, value):
        body += zigzag(-1) if blob is None else zigzag(len(blob)) + blob
    body += zigzag(len(headers))
    for hk, hv in headers:
        body += zigzag(len(hk)) + hk
        body += zigzag(-1) if hv is None else zigzag(len(hv)) + hv
    return zigzag(len(body)) + body


def raw_batch(section: bytes, count: int, *, base_offset=0, last_offset_delta=None,
              attributes=0, base_ts=1000, max_ts=1000, epoch=-1, magic=2,
              pid=-1, pepoch=-1, bseq=-1, crc=None, batch_length=None) -> bytes:
    if last_offset_delta is None:
        last_offset_delta = max(count - 1, 0)
    after_crc = struct.pack(">hiqqqhii", attributes, last_offset_delta, base_ts, max_ts,
                            pid, pepoch, bseq, count) + section
    if crc is None:
        crc = crc32c.crc32c(after_crc)
    if batch_length is None:
        batch_length = 4 + 1 + 4 + len(after_crc)
    return struct.pack(">qiibI", base_offset, batch_length, epoch, magic, crc) + after_crc


def recs(n, size=10, ts=1_000):
    return [(b"k%d" % i, os.urandom(size), [], ts + i) for i in range(n)]


def as_tuples(records):
    return [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in records]


# ---- constants and header ----

def test_constants():
    assert (batch.LOG_OVERHEAD, batch.BATCH_OVERHEAD, batch.MAGIC) == (12, 61, 2)
    assert batch.NO_PRODUCER_ID == batch.NO_SEQUENCE == batch.NO_TIMESTAMP == -1
    assert batch.NO_PRODUCER_EPOCH == batch.NO_PARTITION_LEADER_EPOCH == -1
    assert [batch.COMPRESSION_NONE, batch.COMPRESSION_GZIP, batch.COMPRESSION_SNAPPY,
            batch.COMPRESSION_LZ4, batch.COMPRESSION_ZSTD] == CODECS
    assert (batch.TIMESTAMP_CREATE_TIME, batch.TIMESTAMP_LOG_APPEND_TIME) == (0, 1)
    assert issubclass(TruncatedBatchError, CorruptRecordError)
    assert issubclass(CorruptRecordError, ValueError)


def test_header_fields_match_an_independent_parse():
    data = batch.build_batch(
        [(b"a", b"b", [], 5000), (b"c", b"d", [], 7000), (None, b"e", [], 6000)],
        base_offset=42, partition_leader_epoch=9, producer_id=123456789, producer_epoch=7,
        base_sequence=100, is_transactional=True)
    fields = HEADER.unpack_from(data)
    h = batch.read_header(data)
    assert (h.base_offset, h.batch_length, h.partition_leader_epoch, h.magic, h.crc,
            h.attributes, h.last_offset_delta, h.base_timestamp, h.max_timestamp,
            h.producer_id, h.producer_epoch, h.base_sequence, h.records_count) == fields
    assert fields[0] == 42 and fields[2] == 9 and fields[3] == 2
    assert h.crc == crc32c.crc32c(data[21:])
    assert h.batch_length == len(data) - 12 and h.size == len(data)
    assert (h.base_timestamp, h.max_timestamp) == (5000, 7000)
    assert (h.last_offset_delta, h.records_count) == (2, 3)
    assert (h.last_offset, h.next_offset) == (44, 45)
    assert (h.producer_id, h.producer_epoch, h.base_sequence, h.last_sequence) == (
        123456789, 7, 100, 102)
    assert h.is_transactional and not h.is_control
    assert (h.compression, h.timestamp_type, h.position) == (0, 0, 0)


def test_header_attribute_bits():
    data = raw_batch(raw_record(), 1, attributes=0x3B)  # lz4, LogAppendTime, txn, control
    h = batch.read_header(data)
    assert h.compression == 3
    assert h.timestamp_type == 1
    assert h.is_transactional and h.is_control


def test_header_is_read_only():
    h = batch.read_header(batch.build_batch(recs(1)))
    with pytest.raises(AttributeError):
        h.base_offset = 5


def test_last_sequence_wraps_and_none():
    h = batch.read_header(raw_batch(b"", 0, last_offset_delta=5, bseq=2**31 - 3))
    assert h.last_sequence == 2
    h = batch.read_header(raw_batch(b"", 0, last_offset_delta=5, bseq=-1))
    assert h.last_sequence == -1


def test_read_header_at_position_and_relative_fields():
    a = batch.build_batch(recs(2), base_offset=0)
    b = batch.build_batch(recs(3), base_offset=2)
    buf = memoryview(bytearray(b"junk" + a + b))
    h = batch.read_header(buf, 4 + len(a))
    assert (h.position, h.base_offset, h.records_count) == (4 + len(a), 2, 3)
    with pytest.raises(ValueError):
        batch.read_header(buf, -1)
    with pytest.raises(ValueError):
        batch.read_header(buf, len(buf) + 1)
    with pytest.raises(TruncatedBatchError):
        batch.read_header(buf, len(buf))


# ---- build / decode ----

ROUND_TRIP_CASES = {
    "plain": [(b"key", b"value", [], 1_600_000_000_000)],
    "null_key": [(None, b"value", [], 1)],
    "null_value": [(b"key", None, [], 2)],
    "both_null": [(None, None, [], 3)],
    "empty": [(b"", b"", [], 4)],
    "headers": [(b"k", b"v", [("a", b"1"), ("b", b""), ("c", None), ("ü", b"\xff")], 5)],
    "bytes_header_key": [(b"k", b"v", [(b"raw", b"x")], 5)],
    "big": [(b"k", os.urandom(3 << 20), [], 6), (None, os.urandom(70_000), [], 7)],
    "many": [(b"%d" % i, b"v" * (i % 50), [("i", b"%d" % i)] if i % 3 else [], 1000 + i)
             for i in range(5000)],
    "unordered_ts": [(b"a", b"1", [], 500), (b"b", b"2", [], 100), (b"c", b"3", [], 900)],
    "negative_ts": [(b"a", b"1", [], -1), (b"b", b"2", [], -1)],
}


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("case", list(ROUND_TRIP_CASES))
def test_round_trip(case, codec):
    records = ROUND_TRIP_CASES[case]
    data = batch.build_batch(records, base_offset=1000, compression=codec)
    h = batch.validate(data)
    assert h.compression == codec
    assert h.records_count == len(records)
    assert h.base_timestamp == records[0][3]
    assert h.max_timestamp == max(r[3] for r in records)
    out = batch.decode_records(data)
    expected = [
        (1000 + i, ts, k, v,
         [(hk.decode() if isinstance(hk, bytes) else hk, hv) for hk, hv in hs])
        for i, (k, v, hs, ts) in enumerate(records)
    ]
    assert as_tuples(out) == expected
    assert all(r.attributes == 0 for r in out)


def test_compressed_section_is_compressed():
    records = [(None, b"a" * 1000, [], 1)] * 100
    for codec in (1, 2, 3, 4):
        assert len(batch.build_batch(records, compression=codec)) < 20_000


def test_accepts_buffer_keys_and_values():
    data = batch.build_batch([(bytearray(b"k"), memoryview(b"val"), [("h", bytearray(b"x"))], 1)])
    (r,) = batch.decode_records(data)
    assert (r.key, r.value, r.headers) == (b"k", b"val", [("h", b"x")])


def test_records_from_a_generator():
    data = batch.build_batch((b"k", b"%d" % i, [], i) for i in range(10))
    assert [r.value for r in batch.decode_records(data)] == [b"%d" % i for i in range(10)]


def test_control_and_transactional_flags():
    data = batch.build_batch([(b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x00", [], 9)],
                             producer_id=5, producer_epoch=1, is_transactional=True,
                             is_control=True)
    h = batch.validate(data)
    assert h.is_control and h.is_transactional
    assert h.attributes == 0x30
    (r,) = batch.decode_records(data)
    assert r.key == b"\x00\x00\x00\x01"


def test_log_append_time_batch_reports_max_timestamp_for_every_record():
    data = batch.build_batch([(b"a", b"1", [], 10), (b"b", b"2", [], 30), (b"c", b"3", [], 20)],
                             timestamp_type=1)
    h = batch.validate(data)
    assert h.timestamp_type == 1 and h.max_timestamp == 30
    assert [r.timestamp for r in batch.decode_records(data)] == [30, 30, 30]


def test_decode_at_position():
    a = batch.build_batch(recs(2), base_offset=0)
    b = batch.build_batch(recs(3), base_offset=2, compression=4)
    out = batch.decode_records(a + b, len(a))
    assert [r.offset for r in out] == [2, 3, 4]


def test_decode_reads_records_built_by_hand():
    section = (raw_record(0, 0, b"k0", b"v0", [(b"h", b"x")])
               + raw_record(1, -5, None, None)
               + raw_record(2, 10**12, b"", b"", [(b"n", None)]))
    data = raw_batch(section, 3, base_offset=10, base_ts=2000)
    assert as_tuples(batch.decode_records(data)) == [
        (10, 2000, b"k0", b"v0", [("h", b"x")]),
        (11, 1995, None, None, []),
        (12, 2000 + 10**12, b"", b"", [("n", None)]),
    ]


def test_record_equality_and_repr():
    data = batch.build_batch(recs(2))
    assert batch.decode_records(data) == batch.decode_records(data)
    assert batch.decode_records(data)[0] != batch.decode_records(data)[1]
    assert "Record(offset=0" in repr(batch.decode_records(data)[0])


@pytest.mark.parametrize("bad", [
    dict(records=[]),
    dict(records=recs(1), compression=5),
    dict(records=recs(1), timestamp_type=2),
])
def test_build_rejects(bad):
    with pytest.raises(ValueError):
        batch.build_batch(**bad)


def test_build_rejects_str_values():
    with pytest.raises(TypeError):
        batch.build_batch([(b"k", "text", [], 1)])
    with pytest.raises(TypeError):
        batch.build_batch([(b"k", 5, [], 1)])


# ---- scan / iter_batches ----

def log_of(*sizes, codec=0):
    out, offset = b"", 0
    for n in sizes:
        out += batch.build_batch(recs(n, ts=offset * 10), base_offset=offset, compression=codec,
                                 partition_leader_epoch=offset)
        offset += n
    return out


def test_scan_summary():
    data = log_of(3, 1, 5)
    s = batch.scan(data)
    headers = list(batch.iter_batches(data))
    assert s.count == 3 and len(headers) == 3
    assert s.valid_bytes == len(data)
    assert s.records_count == 9
    assert (s.first_offset, s.last_offset) == (0, 8)
    assert s.positions == [h.position for h in headers]
    assert s.sizes == [h.size for h in headers]
    assert s.last_offsets == [2, 3, 8]
    assert s.max_timestamps == [h.max_timestamp for h in headers]
    assert s.partition_leader_epochs == [0, 3, 4]
    assert s.max_timestamp == 44 and s.offset_of_max_timestamp == 8
    assert s.error is None and s.error_position == -1


def test_scan_empty_and_positions_relative_to_start():
    s = batch.scan(b"")
    assert (s.count, s.valid_bytes, s.first_offset, s.last_offset, s.max_timestamp,
            s.offset_of_max_timestamp) == (0, 0, -1, -1, -1, -1)
    data = log_of(2, 2)
    s = batch.scan(b"xyz" + data, 3)
    assert s.positions[0] == 0 and s.valid_bytes == len(data)


def test_scan_max_timestamp_tie_keeps_first_batch():
    a = batch.build_batch([(b"a", b"", [], 50)], base_offset=0)
    b = batch.build_batch([(b"b", b"", [], 50)], base_offset=1)
    s = batch.scan(a + b)
    assert (s.max_timestamp, s.offset_of_max_timestamp) == (50, 0)


def test_scan_rejects_offsets_that_do_not_increase():
    a = batch.build_batch(recs(3), base_offset=10)
    b = batch.build_batch(recs(1), base_offset=12)
    with pytest.raises(CorruptRecordError, match="does not follow") as e:
        batch.scan(a + b)
    assert e.value.position == len(a)
    s = batch.scan(a + b, stop_on_error=True)
    assert s.count == 1 and s.error_position == len(a) and s.valid_bytes == len(a)


def test_scan_stop_on_error_reports_good_prefix():
    data = log_of(2, 2, 2)
    torn = data[:-7]
    with pytest.raises(TruncatedBatchError):
        batch.scan(torn)
    s = batch.scan(torn, stop_on_error=True)
    assert s.count == 2 and s.last_offset == 3
    assert s.valid_bytes == s.error_position == s.positions[1] + s.sizes[1]
    assert "bytes left" in s.error


def test_scan_stop_on_error_records_what_scan_would_raise():
    """The torn tail is recorded without raising (the read path ends every chunk in one), in the
    raising path's words, for every cut; a bad magic or length after good batches likewise."""
    data = log_of(2, 3)
    bad_magic = bytearray(data)
    bad_magic[len(log_of(2)) + 16] = 1
    bad_length = bytearray(data)
    bad_length[len(log_of(2)) + 8:len(log_of(2)) + 12] = (48).to_bytes(4, "big")
    torn = [data[:cut] for cut in range(1, len(data)) if cut != len(log_of(2))]
    for buf in torn + [bytes(bad_magic), bytes(bad_length)]:
        with pytest.raises(CorruptRecordError) as e:
            batch.scan(buf, check_crc=False)
        s = batch.scan(buf, check_crc=False, stop_on_error=True)
        assert s.error == str(e.value) and s.error_position == e.value.position == s.valid_bytes


def test_scan_crc_check_can_be_skipped():
    data = bytearray(log_of(2, 2))
    data[-1] ^= 1
    with pytest.raises(CorruptRecordError, match="CRC"):
        batch.scan(data)
    assert batch.scan(data, check_crc=False).count == 2
    assert len(list(batch.iter_batches(data))) == 2
    with pytest.raises(CorruptRecordError, match="CRC"):
        list(batch.iter_batches(data, check_crc=True))


def test_iter_batches_raises_at_bad_batch_after_yielding_good_ones():
    data = log_of(1, 1) + batch.build_batch(recs(1), base_offset=2)[:20]
    it = batch.iter_batches(data)
    assert next(it).base_offset == 0
    assert next(it).base_offset == 1
    with pytest.raises(TruncatedBatchError):
        next(it)


def test_buffer_length_is_in_bytes_not_items():
    import array

    data = log_of(2, 3)
    pad = (-len(data)) % 4
    words = array.array("I", data + b"\x00" * pad)[: (len(data) + pad) // 4]
    if pad:
        with pytest.raises(CorruptRecordError):
            list(batch.iter_batches(words))
    else:
        assert len(list(batch.iter_batches(words))) == 2
    assert len(list(batch.iter_batches(memoryview(data).cast("B")))) == 2


def test_iter_batches_does_not_pin_the_buffer():
    data = bytearray(log_of(1, 1))
    it = batch.iter_batches(data)
    next(it)
    data += b"x"  # resizing a bytearray while an export is held raises BufferError
    del data[-1:]


# ---- assign_offsets ----

def test_assign_offsets_patches_offsets_and_epoch_only():
    a, b = batch.build_batch(recs(3)), batch.build_batch(recs(2), compression=2)
    buf = bytearray(a + b)
    s = batch.assign_offsets(buf, 100, 7)
    assert (s.count, s.first_offset, s.last_offset, s.records_count) == (2, 100, 104, 5)
    assert s.last_offsets == [102, 104]
    assert s.partition_leader_epochs == [7, 7]
    h1, h2 = batch.iter_batches(buf, check_crc=True)
    assert (h1.base_offset, h2.base_offset) == (100, 103)
    assert (h1.partition_leader_epoch, h2.partition_leader_epoch) == (7, 7)
    assert buf[21:len(a)] == a[21:] and buf[len(a) + 21:] == b[21:]
    assert [r.offset for r in batch.decode_records(buf, len(a))] == [103, 104]
    assert batch.scan(buf).last_offsets == [102, 104]


def test_assign_offsets_log_append_time():
    data = batch.build_batch(recs(3, ts=50), compression=1)
    buf = bytearray(data)
    s = batch.assign_offsets(memoryview(buf), 0, 1, log_append_time=999_999)
    h = batch.validate(buf)  # CRC recomputed
    assert h.timestamp_type == 1 and h.max_timestamp == 999_999
    assert h.base_timestamp == 50 and h.compression == 1
    assert s.max_timestamp == 999_999 and s.max_timestamps == [999_999]
    assert s.offset_of_max_timestamp == 2
    assert [r.timestamp for r in batch.decode_records(buf)] == [999_999] * 3


def forge_header(data: bytes, max_timestamp: int | None = None, attributes: int | None = None) -> bytearray:
    """A producer's lie in the header, with a CRC that matches it."""
    out = bytearray(data)
    if max_timestamp is not None:
        out[35:43] = struct.pack(">q", max_timestamp)
    if attributes is not None:
        out[21:23] = struct.pack(">h", attributes)
    out[17:21] = struct.pack(">I", crc32c.crc32c(bytes(out[21:])))
    return out


def test_assign_offsets_stores_the_greatest_record_timestamp_whatever_the_header_claims():
    """LogValidator's setMaxTimestamp: the time index and ListOffsets trust maxTimestamp."""
    records = [(None, b"a", [], 1_000), (None, b"b", [], 3_000), (None, b"c", [], 500)]
    for compression in (0, 1):
        buf = forge_header(batch.build_batch(records, compression=compression), max_timestamp=10)
        assert batch.validate(buf).max_timestamp == 10
        s = batch.assign_offsets(buf, 0, 0)
        h = batch.validate(buf)  # the CRC was recomputed
        assert h.max_timestamp == 3_000 and h.base_timestamp == 1_000
        assert s.max_timestamps == [3_000] and s.min_timestamps == [500]
        assert s.max_timestamp == 3_000 and s.offset_of_max_timestamp == 2


def test_assign_offsets_clears_a_log_append_time_flag_on_a_create_time_log():
    data = batch.build_batch(recs(2, ts=50))
    buf = forge_header(data, attributes=batch.read_header(data).attributes | 0x08)
    assert batch.validate(buf).timestamp_type == 1
    batch.assign_offsets(buf, 0, 0)
    h = batch.validate(buf)
    assert h.timestamp_type == 0 and h.max_timestamp == 51
    assert [r.timestamp for r in batch.decode_records(buf)] == [50, 51]


def test_assign_offsets_leaves_an_honest_create_time_batch_byte_for_byte():
    data = batch.build_batch([(None, b"a", [], 7), (None, b"b", [], 9)])
    buf = bytearray(data)
    s = batch.assign_offsets(buf, 40, 2)
    assert buf[21:] == data[21:] and buf[17:21] == data[17:21], "no rewrite, the CRC kept"
    assert s.min_timestamps == [7] and s.max_timestamps == [9]


def test_assign_offsets_patches_nothing_if_a_later_batch_is_bad():
    good = batch.build_batch(recs(2))
    bad = bytearray(batch.build_batch(recs(2)))
    bad[-1] ^= 0xFF
    buf = bytearray(good + bad)
    before = bytes(buf)
    with pytest.raises(CorruptRecordError, match="CRC") as e:
        batch.assign_offsets(buf, 500, 3, log_append_time=1)
    assert e.value.position == len(good)
    assert bytes(buf) == before
    with pytest.raises(TruncatedBatchError):
        batch.assign_offsets(bytearray(good + good[:30]), 500, 3)


def test_assign_offsets_rejects_count_mismatch_and_read_only_buffers():
    data = raw_batch(raw_record() * 2, 2, last_offset_delta=5)
    with pytest.raises(CorruptRecordError, match="recordsCount"):
        batch.assign_offsets(bytearray(data), 0, 0)
    with pytest.raises((BufferError, TypeError)):
        batch.assign_offsets(batch.build_batch(recs(1)), 0, 0)
    with pytest.raises(ValueError):
        batch.assign_offsets(bytearray(batch.build_batch(recs(1))), -1, 0)


def test_assign_offsets_empty_buffer():
    s = batch.assign_offsets(bytearray(), 10, 1)
    assert s.count == 0 and s.first_offset == -1


# ---- corrupt input ----

def test_bad_crc():
    data = bytearray(batch.build_batch(recs(3)))
    data[70] ^= 0x01
    with pytest.raises(CorruptRecordError, match="CRC") as e:
        batch.validate(data)
    assert e.value.position == 0
    with pytest.raises(CorruptRecordError, match="CRC"):
        batch.decode_records(data)
    batch.read_header(data)  # structure only
    assert len(batch.decode_records(data, check_crc=False)) == 3


def test_fields_outside_the_crc_are_not_checked_by_it():
    data = bytearray(batch.build_batch(recs(1)))
    data[0:8] = struct.pack(">q", 77)
    data[12:16] = struct.pack(">i", 5)
    assert batch.validate(data).base_offset == 77


@pytest.mark.parametrize("codec", [0, 4])
def test_truncated_at_every_byte(codec):
    data = batch.build_batch([(b"k", b"v", [("h", b"x")], 1), (None, b"w", [], 2)],
                             compression=codec)
    for cut in range(len(data)):
        for fn in (batch.read_header, batch.validate, batch.decode_records):
            with pytest.raises(TruncatedBatchError) as e:
                fn(data[:cut])
            assert e.value.position == 0
        if cut == 0:
            continue  # an empty log is a fine thing to scan
        with pytest.raises(TruncatedBatchError):
            batch.scan(data[:cut])
        with pytest.raises(TruncatedBatchError):
            batch.assign_offsets(bytearray(data[:cut]), 0, 0)
        s = batch.scan(data[:cut], stop_on_error=True)
        assert (s.count, s.valid_bytes, s.error_position) == (0, 0, 0)


@pytest.mark.parametrize("magic", [0, 1, 3, -1])
def test_wrong_magic(magic):
    data = raw_batch(raw_record(), 1, magic=magic)
    with pytest.raises(CorruptRecordError, match="magic") as e:
        batch.read_header(data)
    assert not isinstance(e.value, TruncatedBatchError)
    with pytest.raises(CorruptRecordError, match="magic"):
        batch.read_header(data[:20])


@pytest.mark.parametrize("length", [-1, -2**31, 0, 48])
def test_bad_batch_length(length):
    data = raw_batch(raw_record(), 1, batch_length=length)
    with pytest.raises(CorruptRecordError, match="batchLength") as e:
        batch.read_header(data)
    assert not isinstance(e.value, TruncatedBatchError)


def test_huge_batch_length_is_truncation_not_a_big_read():
    data = raw_batch(raw_record(), 1, batch_length=2**31 - 1)
    with pytest.raises(TruncatedBatchError):
        batch.read_header(data)
    s = batch.scan(data, stop_on_error=True)
    assert s.count == 0 and s.error_position == 0


def test_negative_count_and_offset_delta():
    with pytest.raises(CorruptRecordError, match="recordsCount"):
        batch.read_header(raw_batch(b"", -1, last_offset_delta=0))
    with pytest.raises(CorruptRecordError, match="lastOffsetDelta"):
        batch.read_header(raw_batch(b"", 0, last_offset_delta=-3))
    with pytest.raises(CorruptRecordError, match="overflows"):
        batch.read_header(raw_batch(b"", 0, base_offset=2**63 - 2, last_offset_delta=5))


@pytest.mark.parametrize(("section", "count", "match"), [
    (raw_record() * 2, 3, "end after 2"),  # fewer records than counted
    (raw_record() * 3, 2, "follow the 2 counted"),  # more bytes than counted
    (b"\xff\xff\xff\xff\xff\xff", 1, "record length"),  # varint longer than 5 bytes
    (b"\x80", 1, "record length"),  # varint cut at the end
    (b"\x03", 1, "record length"),  # negative record length (zigzag -2)
    (zigzag(100) + b"\x00" * 5, 1, "record length"),  # record past the section
    (zigzag(0), 1, "record length"),  # empty record
    (zigzag(3) + b"\x00\x00\x00", 1, "key length"),  # missing key length
    (zigzag(7) + b"\x00\x00\x00" + zigzag(-2) + b"\x00\x00\x00", 1, "key length"),
    (zigzag(6) + b"\x00\x00\x00" + zigzag(50) + b"ab", 1, "key length"),
    (zigzag(5) + b"\x00" + b"\xff" * 4, 1, "timestampDelta"),
    (zigzag(12) + b"\x00" + b"\xff" * 11, 1, "timestampDelta"),  # varlong > 10 bytes
    (zigzag(6) + b"\x00\x00\x00\x01\x01\x01", 1, "header count"),  # header count -1
    (zigzag(5) + b"\x00\x00\x00\x01\x01", 1, "header count"),  # header count missing
    (zigzag(6) + b"\x00\x00\x00\x01\x01\x02", 1, "header 0: bad key length"),
    (zigzag(9) + b"\x00\x00\x00\x01\x01\x02" + zigzag(2) + b"\xff\xfe", 1, "utf-8"),
    (zigzag(9) + b"\x00\x00\x00\x01\x01\x02" + zigzag(1) + b"h" + zigzag(-3), 1,
     "header 0: bad value length"),
    (zigzag(9) + raw_record()[1:] + b"\x00", 1, "left over"),  # record longer than its fields
])
def test_malformed_records(section, count, match):
    with pytest.raises(CorruptRecordError, match=match) as e:
        batch.decode_records(b"pad" + raw_batch(section, count), 3)
    assert e.value.position == 3
    batch.validate(raw_batch(section, count))  # the header itself is fine


def test_varint_fifth_byte_high_bits_are_dropped_like_kafka():
    body = raw_record()[1:]
    (low,) = zigzag(len(body))
    # the same length in 5 bytes, with junk in the bits past 32 that Java's int drops
    weird = bytes([low | 0x80, 0x80, 0x80, 0x80, 0x70]) + body
    (r,) = batch.decode_records(raw_batch(weird, 1))
    assert (r.key, r.value) == (b"k", b"v")


def test_unknown_codec_and_undecodable_compressed_section():
    with pytest.raises(CorruptRecordError, match="codec"):
        batch.decode_records(raw_batch(raw_record(), 1, attributes=5))
    for codec in (1, 2, 3, 4):
        with pytest.raises(CorruptRecordError, match="batch at 0") as e:
            batch.decode_records(raw_batch(b"definitely not compressed", 1, attributes=codec))
        assert e.value.position == 0


def test_empty_batch_after_compaction_is_valid():
    data = raw_batch(b"", 0, base_offset=10, last_offset_delta=4)
    h = batch.validate(data)
    assert (h.records_count, h.last_offset) == (0, 14)
    assert batch.decode_records(data) == []
    assert batch.scan(data).last_offset == 14


# ---- fuzzing ----

FUZZ = settings(max_examples=400, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def exercise(data: bytes) -> None:
    """Every reader on data: each must succeed or raise CorruptRecordError."""
    for call in (
        lambda: batch.read_header(data),
        lambda: batch.validate(data),
        lambda: batch.scan(data),
        lambda: list(batch.iter_batches(data)),
        lambda: batch.decode_records(data, check_crc=False),
        lambda: batch.assign_offsets(bytearray(data), 0, 0, 5),
    ):
        try:
            call()
        except CorruptRecordError:
            pass
    s = batch.scan(data, check_crc=False, stop_on_error=True)
    assert s.valid_bytes <= len(data)
    assert sum(s.sizes) == s.valid_bytes


@FUZZ
@given(st.binary(max_size=400))
def test_fuzz_random_bytes(data):
    exercise(data)


@FUZZ
@given(st.binary(max_size=300), st.integers(0, 20), st.integers(0, 7))
def test_fuzz_random_record_sections(section, count, codec):
    exercise(raw_batch(section, count, attributes=codec))


VALID = [
    batch.build_batch([(b"key", b"value", [("h", b"v"), ("n", None)], 10),
                       (None, b"x" * 40, [], 20), (b"", None, [], 15)],
                      compression=c, producer_id=3, base_sequence=0)
    for c in CODECS
]


@FUZZ
@given(st.sampled_from(VALID), st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)),
                                         min_size=1, max_size=6),
       st.integers(-1, 200))
def test_fuzz_mutated_valid_batch(valid, edits, cut):
    data = bytearray(valid)
    for where, value in edits:
        data[where % len(data)] = value
    if cut >= 0:
        del data[len(data) - cut:]
    exercise(bytes(data))
    # and again with the CRC made right, so the mutation reaches the record parser
    if len(data) >= 61:
        data[17:21] = struct.pack(">I", crc32c.crc32c(bytes(data[21:])))
        exercise(bytes(data))


@FUZZ
@given(st.lists(st.tuples(st.one_of(st.none(), st.binary(max_size=30)),
                          st.one_of(st.none(), st.binary(max_size=300)),
                          st.lists(st.tuples(st.text(max_size=8),
                                             st.one_of(st.none(), st.binary(max_size=8))),
                                   max_size=3),
                          st.integers(-2**40, 2**40)),
                min_size=1, max_size=20),
       st.sampled_from(CODECS), st.integers(0, 2**40))
def test_fuzz_round_trip(records, codec, base_offset):
    data = batch.build_batch(records, base_offset=base_offset, compression=codec)
    out = batch.decode_records(data)
    assert as_tuples(out) == [(base_offset + i, ts, k, v, list(hs))
                              for i, (k, v, hs, ts) in enumerate(records)]
