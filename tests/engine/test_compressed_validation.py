"""A leader's append checks every record's framing, as Kafka's LogValidator does: a compressed
batch is decompressed and walked, an uncompressed one walked in place. A malformed record
anywhere refuses the whole append with CorruptRecordError (CORRUPT_MESSAGE on the wire) and
leaves the log and the request buffer as they were.

The corrupt batches are built by hand here, record by record, so that each one breaks exactly
one rule of the record format and still carries a correct CRC (a producer bug, not a bit flip).
"""
import asyncio
import struct

import pytest

from engine.errors import CorruptRecordError
from engine.log import Log
from ext.batch import assign_offsets, build_batch, decode_records, validate_records
from ext.compress import compress
from ext.crc import crc32c
from protocol import messages as M
from protocol.errors import Error
from tests.engine.batches import BASE_TS
from tests.unit.test_batch import zigzag

CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
NOW = BASE_TS + 1000


varint = zigzag  # Kafka's signed varints


def blob(b: bytes | None) -> bytes:
    return varint(-1) if b is None else varint(len(b)) + b


def record_body(offset_delta: int, key: bytes | None = b"k", value: bytes | None = b"value",
                headers=(), ts_delta: int = 0) -> bytes:
    """A record without its length prefix."""
    body = b"\x00" + varint(ts_delta) + varint(offset_delta) + blob(key) + blob(value)
    body += varint(len(headers)) + b"".join(blob(k) + blob(v) for k, v in headers)
    return body


def record(offset_delta: int, **kw) -> bytes:
    body = record_body(offset_delta, **kw)
    return varint(len(body)) + body


def batch_of(section: bytes, count: int, codec: int, last_offset_delta: int | None = None) -> bytearray:
    """A producer batch around a hand-built records section, compressed by ``codec``, with a
    correct CRC."""
    payload = compress(codec, section) if codec else section
    last = count - 1 if last_offset_delta is None else last_offset_delta
    header = struct.pack(">qiibIhiqqqhii", 0, 49 + len(payload), -1, 2, 0, codec, last,
                         BASE_TS, BASE_TS, -1, -1, -1, count)
    buf = bytearray(header + payload)
    struct.pack_into(">I", buf, 17, crc32c(bytes(buf[21:])))
    return buf


def good_section(n: int = 3) -> bytes:
    return b"".join(record(i, headers=[(b"h", b"v")], ts_delta=i) for i in range(n))


# Each corrupt section: (records section, recordsCount, the complaint expected).
def truncated_record():
    full = good_section(3)
    return full[:-4], 3, "bad record length"


def record_count_above_records():
    return good_section(2), 3, "the records end after 2 of the 3 counted"


def record_count_below_records():
    return good_section(3), 2, "bytes follow the 2 counted records"


def bad_varint():
    # offsetDelta as six continuation bytes: longer than a varint may be.
    body = b"\x00" + varint(0) + b"\xff\xff\xff\xff\xff\xff\x01" + blob(b"k") + blob(b"v") + varint(0)
    return varint(len(body)) + body, 1, "bad offsetDelta varint"


def key_length_past_the_end():
    body = b"\x00" + varint(0) + varint(0) + varint(50) + b"key" + blob(b"v") + varint(0)
    return varint(len(body)) + body, 1, "bad key length"


def garbage_after_the_last_record():
    return good_section(2) + b"\x07garbage", 2, "bytes follow the 2 counted records"


def value_length_past_the_record():
    # The value's length points past its record into the next one.
    body = b"\x00" + varint(0) + varint(0) + blob(b"k") + varint(9) + b"v" + varint(0)
    return varint(len(body)) + body + record(1), 2, "bad value length"


def offset_deltas_out_of_order():
    return record(0) + record(2) + record(1), 3, "offsetDelta 2, expected 1"


def negative_header_count():
    body = b"\x00" + varint(0) + varint(0) + blob(b"k") + blob(b"v") + varint(-2)
    return varint(len(body)) + body, 1, "bad header count"


def bytes_left_inside_a_record():
    body = record_body(0) + b"\x00\x00"
    return varint(len(body)) + body, 1, "2 bytes left over inside the record"


CORRUPT = [truncated_record, record_count_above_records, record_count_below_records, bad_varint,
           key_length_past_the_end, garbage_after_the_last_record, value_length_past_the_record,
           offset_deltas_out_of_order, negative_header_count, bytes_left_inside_a_record]


@pytest.mark.parametrize("codec", CODECS.values(), ids=CODECS.keys())
@pytest.mark.parametrize("case", CORRUPT, ids=[c.__name__ for c in CORRUPT])
def test_malformed_record_is_refused_and_nothing_is_patched(case, codec):
    section, count, complaint = case()
    buf = batch_of(section, count, codec)
    before = bytes(buf)
    with pytest.raises(CorruptRecordError, match=complaint):
        assign_offsets(buf, 100, 5)
    assert bytes(buf) == before
    with pytest.raises(CorruptRecordError, match=complaint):
        validate_records(buf)


@pytest.mark.parametrize("codec", CODECS.values(), ids=CODECS.keys())
def test_hand_built_valid_batch_passes_and_reads_back(codec):
    buf = batch_of(good_section(3) + record(3, key=None, value=None), 4, codec)
    summary = assign_offsets(buf, 100, 5)
    assert (summary.first_offset, summary.last_offset) == (100, 103)
    records = decode_records(buf)
    assert [r.offset for r in records] == [100, 101, 102, 103]
    assert records[3].key is None and records[3].value is None
    assert records[0].headers == [("h", b"v")]


@pytest.mark.parametrize("codec", CODECS.values(), ids=CODECS.keys())
def test_client_built_batches_of_every_shape_pass(codec):
    shapes = [
        [(None, b"", [], BASE_TS)],
        [(b"k" * 300, b"v" * 70_000, [("a", None), ("b", b"x" * 200)], BASE_TS + i) for i in range(5)],
        [(b"%d" % i, None, [], BASE_TS - i) for i in range(2000)],
    ]
    for recs in shapes:
        buf = bytearray(build_batch(recs, compression=codec))
        assert assign_offsets(buf, 0, 1).records_count == len(recs)


@pytest.mark.parametrize("codec", [1, 2, 3, 4], ids=["gzip", "snappy", "lz4", "zstd"])
def test_undecodable_compressed_section_is_corrupt(codec):
    payload = bytearray(compress(codec, good_section(3)))
    payload[len(payload) // 2:] = b"\x00" * (len(payload) - len(payload) // 2)
    buf = batch_of(b"", 3, 0)
    buf = bytearray(buf[:61]) + payload
    struct.pack_into(">ih", buf, 8, 49 + len(payload), 0)
    struct.pack_into(">h", buf, 21, codec)
    struct.pack_into(">I", buf, 17, crc32c(bytes(buf[21:])))
    with pytest.raises(CorruptRecordError, match="batch at 0"):
        assign_offsets(buf, 0, 1)


def test_corrupt_compressed_batch_after_a_good_one_leaves_the_log_untouched(tmp_path):
    log = Log(str(tmp_path / "t-0"))
    log.append_as_leader(bytearray(build_batch([(b"k", b"v", [], BASE_TS)], compression=3)), 1, NOW)
    good = build_batch([(b"k", b"v", [], BASE_TS)] * 3, compression=3)
    section, count, _ = key_length_past_the_end()
    bad = batch_of(section, count, 3)
    request = bytearray(good + bad)
    with pytest.raises(CorruptRecordError):
        log.append_as_leader(request, 1, NOW)
    assert log.log_end_offset == 1
    assert log.active_segment.size == len(build_batch([(b"k", b"v", [], BASE_TS)], compression=3))
    assert bytes(request) == good + bad  # no offsets patched into the good batch either
    log.close()


def test_produce_of_a_malformed_compressed_batch_is_answered_corrupt_message(tmp_path):
    from tests.broker.replica_nodes import TOPIC, TOPIC_ID, Cluster, Node

    async def main():
        cluster = Cluster(brokers=(1,))
        cluster.create_topic(replicas=(1,))
        leader = Node(tmp_path, 1, cluster)
        R = M.ProduceRequest
        section, count, _ = record_count_above_records()
        data = R.PartitionProduceData(index=0, records=memoryview(batch_of(section, count, 4)))
        request = R(transactional_id=None, acks=-1, timeout_ms=5000, topic_data=[
            R.TopicProduceData(name=TOPIC, topic_id=TOPIC_ID, partition_data=[data])])
        response = await leader.call(0, 11, request)
        pr = response.responses[0].partition_responses[0]
        assert pr.error_code == Error.CORRUPT_MESSAGE
        assert leader.log().log_end_offset == 0
    asyncio.run(main())
