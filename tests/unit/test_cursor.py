"""ext/cursor.pxd, the one read cursor over batch and record bytes, through each reader
built on it: batch decoding and validation, the column builder, the Python-facing
header readers (peek_header, peek_extent, read_prefix) and the wire's unsigned varints. Every bounds
failure is a clear error naming where it is, never a read past the buffer."""
import pytest

from ext import batch
from ext.batch import TruncatedBatchError
from ext.columns import decode_columns
from ext.errors import CorruptRecordError
from protocol import messages as M
from protocol.fastfetch_request import decode_fetch_request
from protocol.types import ProtocolError, Reader
from tests.unit.test_batch import raw_batch, raw_record, zigzag

# Records whose framing the cursor must refuse: (section, recordsCount).
_MALFORMED = [
    (b"\x80", 1),  # record length varint cut at the end of the section
    (b"\xff\xff\xff\xff\xff\xff", 1),  # record length varint longer than 5 bytes
    (zigzag(100) + b"\x00" * 5, 1),  # record length past the section
    (zigzag(5) + b"\x00" + b"\xff" * 4, 1),  # timestampDelta varlong cut by the record's end
    (zigzag(12) + b"\x00" + b"\xff" * 11, 1),  # varlong longer than 10 bytes
    (zigzag(6) + b"\x00\x00\x00" + zigzag(50) + b"ab", 1),  # key length past the record
    (zigzag(4) + b"\x00\x00\x00\x02", 1),  # key present, value length missing
    (zigzag(9) + b"\x00\x00\x00\x01\x01\x02" + zigzag(40) + b"hh", 1),  # header key past the record
    (zigzag(9) + b"\x00\x00\x00\x01\x01\x02" + zigzag(1) + b"h" + b"\x81", 1),  # header value cut
]


@pytest.mark.parametrize(("section", "count"), _MALFORMED)
def test_every_reader_refuses_a_record_that_runs_past_its_bounds(section, count):
    data = b"pad" + raw_batch(section, count)
    for read in (lambda: batch.decode_records(data, 3), lambda: batch.validate_records(data, 3)):
        with pytest.raises(CorruptRecordError, match="batch at 3: record 0") as e:
            read()
        assert e.value.position == 3
    with pytest.raises(CorruptRecordError, match="record 0") as e:
        decode_columns(data[3:], 0, 2**62, True, True, 3)
    assert e.value.position == 3


def test_the_same_bytes_decode_alike_everywhere():
    section = raw_record(0, 0, b"k" * 200, None, [(b"h", b"x" * 70)]) + raw_record(1, 5, None, b"v")
    data = raw_batch(section, 2)
    records = batch.decode_records(data)
    assert batch.validate_records(data).records_count == 2
    columns = decode_columns(data, 0, 2, True)
    assert columns.count == 2 and list(columns.offsets) == [r.offset for r in records]
    assert columns.key_data == records[0].key and columns.value_data == records[1].value
    assert columns.header_key_data == b"h" and columns.header_value_data == b"x" * 70


def test_peek_header_needs_the_header_not_the_whole_batch():
    data = raw_batch(raw_record() * 3, 3, base_offset=40)
    header = batch.peek_header(data[:batch.BATCH_OVERHEAD])
    assert (header.base_offset, header.last_offset, header.size) == (40, 42, len(data))
    with pytest.raises(TruncatedBatchError):
        batch.read_header(data[:batch.BATCH_OVERHEAD])
    with pytest.raises(TruncatedBatchError, match="61-byte header"):
        batch.peek_header(data[:batch.BATCH_OVERHEAD - 1])
    with pytest.raises(CorruptRecordError, match="magic"):
        batch.peek_header(data[:16] + b"\x01" + data[17:])
    with pytest.raises(CorruptRecordError, match="recordsCount"):
        batch.peek_header(raw_batch(b"", -1, last_offset_delta=0))
    with pytest.raises(ValueError):
        batch.peek_header(data, len(data) + 1)


def test_peek_extent_takes_offsets_and_size_from_the_header_and_checks_nothing_else():
    data = raw_batch(raw_record() * 3, 3, base_offset=40)
    assert batch.peek_extent(data[:27]) == (40, 42, len(data)), "lastOffsetDelta ends at byte 27"
    assert batch.peek_extent(b"pad" + data, 3) == (40, 42, len(data))
    assert batch.peek_extent(data[:16] + b"\x07" + data[17:]) == (40, 42, len(data)), "bad magic"
    assert batch.peek_extent(data[:26]) is None
    short = data[:8] + (48).to_bytes(4, "big") + data[12:]
    assert batch.peek_extent(short) is None, "batchLength below the minimum"
    with pytest.raises(ValueError):
        batch.peek_extent(data, len(data) + 1)


def test_read_prefix_reads_what_is_there_and_checks_nothing():
    data = raw_batch(raw_record(), 1, base_offset=7, attributes=4)
    length = len(data) - batch.LOG_OVERHEAD
    assert batch.read_prefix(data) == (7, length, 2, 4)
    assert batch.read_prefix(b"xx" + data, 2) == (7, length, 2, 4)
    assert batch.read_prefix(data[:batch.LOG_OVERHEAD - 1]) is None
    assert batch.read_prefix(data[:16]) == (7, length, None, None)
    assert batch.read_prefix(data[:22]) == (7, length, 2, None)
    legacy = data[:16] + b"\x01" + data[17:20]  # a magic 1 message: nothing is refused
    assert batch.read_prefix(legacy) == (7, length, 1, None)
    assert batch.MIN_BATCH_LENGTH == batch.BATCH_OVERHEAD - batch.LOG_OVERHEAD


_FETCH_V12_FIXED = b"\x00" * 25  # replica_id .. session_epoch; the topics array follows


@pytest.mark.parametrize(("tail", "message"), [
    (b"\x80", "need 1 bytes at position 26, have 0"),  # cut inside the varint
    (b"\xff" * 6, "unsigned varint longer than 5 bytes at 30"),
    (b"\xff" * 4 + b"\x7f", "array of 34359738366 elements"),  # 5 bytes, bits above 32 kept
])
def test_wire_uvarint_errors_are_the_generic_codecs(tail, message):
    body = _FETCH_V12_FIXED + tail
    with pytest.raises(ProtocolError) as fast:
        decode_fetch_request(12, body)
    with pytest.raises(ProtocolError) as generic:
        M.REQUESTS[1].decode(12, Reader(body))
    assert message in str(fast.value)
    assert str(fast.value) == str(generic.value)
