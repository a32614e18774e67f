"""The topic's compression.type on the leader's append, as Kafka's LogValidator applies it.

``producer`` stores the producer's batches as they came. Any other value names the codec
the log holds (``uncompressed`` = none): a batch in another codec is rebuilt in it on the
leader, keeping its offsets, producer id/epoch/base sequence, transactional bit, record
timestamps, keys, values and headers, under a fresh CRC; a batch already in it is stored
as it came. Control batches written by the broker stay as they are (Kafka's "do not
compress control records unless they are written compressed"). Followers store the
leader's batches byte for byte, whatever their own config says.
"""
import pytest

from engine.config import LogConfig
from engine.errors import CorruptRecordError, DuplicateSequenceError, RecordTooLargeError
from engine.log import ORIGIN_COORDINATOR, Log
from ext.batch import build_batch, decode_records, iter_batches, read_header, scan, validate_records
from tests.engine.batches import BASE_TS, producer_batch, python_calls

NOW = BASE_TS + 1000
CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
COMPRESSION_TYPE = {0: "uncompressed", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}


def log_with(tmp_path, compression_type: str, name: str = "t-0", **config) -> Log:
    return Log(str(tmp_path / name), LogConfig(compression_type=compression_type, **config))


def stored(log: Log) -> bytes:
    return log.read(0, 1 << 30).records.read()


def codecs_of(data: bytes) -> list[int]:
    return [h.compression for h in iter_batches(data, check_crc=True)]


def contents(data: bytes) -> list[tuple]:
    """Every record of ``data``: (offset, timestamp, key, value, headers)."""
    return [(r.offset, r.timestamp, r.key, r.value, r.headers)
            for h in iter_batches(data) for r in decode_records(data, h.position)]


def shifted(records: list[tuple], by: int) -> list[tuple]:
    return [(offset + by, *rest) for offset, *rest in records]


def test_a_topic_with_compression_type_lz4_stores_a_gzip_batch_as_lz4_with_the_same_records(tmp_path):
    log = log_with(tmp_path, "lz4")
    log.append_as_leader(producer_batch(5, tag=0), 0, NOW)
    batch = producer_batch(20, compression=CODECS["gzip"], tag=1)
    sent = contents(bytes(batch))
    info = log.append_as_leader(batch, 0, NOW)
    assert (info.first_offset, info.last_offset, info.records_count) == (5, 24, 20)
    data = stored(log)
    assert codecs_of(data) == [CODECS["lz4"], CODECS["lz4"]]
    assert contents(data)[5:] == shifted(sent, 5)


@pytest.mark.parametrize("source", ["gzip", "snappy", "lz4", "zstd"])
def test_compression_type_uncompressed_stores_records_uncompressed(tmp_path, source):
    log = log_with(tmp_path, "uncompressed")
    batch = producer_batch(10, compression=CODECS[source])
    sent = contents(bytes(batch))
    log.append_as_leader(batch, 0, NOW)
    data = stored(log)
    assert codecs_of(data) == [CODECS["none"]]
    assert contents(data) == sent


@pytest.mark.parametrize("target", ["uncompressed", "gzip", "snappy", "lz4", "zstd"])
@pytest.mark.parametrize("source", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_a_batch_is_stored_in_the_topics_codec_whatever_the_producer_used(tmp_path, source, target):
    log = log_with(tmp_path, target)
    batch = producer_batch(7, compression=CODECS[source])
    sent = contents(bytes(batch))
    log.append_as_leader(batch, 0, NOW)
    data = stored(log)
    want = CODECS["none"] if target == "uncompressed" else CODECS[target]
    assert codecs_of(data) == [want]
    assert contents(data) == sent


@pytest.mark.parametrize("codec", list(CODECS))
def test_compression_type_producer_keeps_the_producers_codec_byte_for_byte(tmp_path, codec):
    log = log_with(tmp_path, "producer")
    batch = producer_batch(10, compression=CODECS[codec])
    log.append_as_leader(batch, 3, NOW)
    assert stored(log) == bytes(batch)  # the request buffer, offsets and epoch patched in place
    assert codecs_of(stored(log)) == [CODECS[codec]]


@pytest.mark.parametrize("codec", list(CODECS))
def test_a_batch_already_in_the_topics_codec_is_stored_byte_for_byte(tmp_path, codec):
    log = log_with(tmp_path, COMPRESSION_TYPE[CODECS[codec]])
    batch = producer_batch(10, compression=CODECS[codec])
    info = log.append_as_leader(batch, 3, NOW)
    assert stored(log) == bytes(batch)
    assert info.valid_bytes == len(batch)


def test_a_rewritten_idempotent_batch_keeps_its_producer_id_epoch_and_sequence(tmp_path):
    log = log_with(tmp_path, "zstd")
    records = [(b"k", b"v%d" % i, [], BASE_TS + i) for i in range(5)]
    first = build_batch(records, producer_id=42, producer_epoch=3, base_sequence=0)
    log.append_as_leader(bytearray(first), 0, NOW)
    h = read_header(stored(log))
    assert h.compression == CODECS["zstd"]
    assert (h.producer_id, h.producer_epoch, h.base_sequence, h.last_sequence) == (42, 3, 0, 4)
    # The producer state saw the same sequences: a retry is a duplicate with its original
    # offsets, the next sequence appends.
    with pytest.raises(DuplicateSequenceError) as dup:
        log.append_as_leader(bytearray(first), 0, NOW)
    assert (dup.value.first_offset, dup.value.last_offset) == (0, 4)
    following = build_batch(records, producer_id=42, producer_epoch=3, base_sequence=5)
    assert log.append_as_leader(bytearray(following), 0, NOW).first_offset == 5


def test_a_rewritten_transactional_batch_keeps_its_transactional_bit(tmp_path):
    log = log_with(tmp_path, "gzip")
    batch = build_batch([(b"k", b"v", [], BASE_TS)], producer_id=7, producer_epoch=0,
                        base_sequence=0, is_transactional=True)
    log.append_as_leader(bytearray(batch), 0, NOW)
    h = read_header(stored(log))
    assert h.compression == CODECS["gzip"]
    assert h.is_transactional and not h.is_control


def test_a_rewritten_batch_keeps_each_records_create_time(tmp_path):
    log = log_with(tmp_path, "lz4")
    stamps = [BASE_TS + 30, BASE_TS + 10, BASE_TS + 50, BASE_TS + 20]
    batch = build_batch([(None, b"v%d" % i, [], ts) for i, ts in enumerate(stamps)], compression=1)
    info = log.append_as_leader(bytearray(batch), 0, NOW)
    data = stored(log)
    h = read_header(data)
    assert h.timestamp_type == 0 and h.max_timestamp == BASE_TS + 50
    assert [r.timestamp for r in decode_records(data)] == stamps
    assert (info.max_timestamp, info.log_append_time) == (BASE_TS + 50, -1)


def test_a_rewritten_batch_under_log_append_time_carries_the_append_time(tmp_path):
    log = log_with(tmp_path, "snappy", message_timestamp_type="LogAppendTime")
    info = log.append_as_leader(producer_batch(3, ts=5, compression=CODECS["zstd"]), 0, NOW)
    data = stored(log)
    h = read_header(data)
    assert h.compression == CODECS["snappy"]
    assert h.timestamp_type == 1 and h.max_timestamp == NOW
    assert [r.timestamp for r in decode_records(data)] == [NOW] * 3
    assert info.log_append_time == NOW


def test_a_rewritten_batch_keeps_null_keys_null_values_and_headers(tmp_path):
    log = log_with(tmp_path, "zstd")
    records = [
        (None, b"value", [], BASE_TS),
        (b"key", None, [("a", b"1"), ("b", None)], BASE_TS + 1),
        (b"", b"", [("", b"")], BASE_TS + 2),
    ]
    log.append_as_leader(bytearray(build_batch(records)), 0, NOW)
    got = [(r.key, r.value, r.headers, r.timestamp) for r in decode_records(stored(log))]
    assert got == [(k, v, list(hs), ts) for k, v, hs, ts in records]


def test_a_rewritten_batch_carries_a_fresh_crc_and_valid_records(tmp_path):
    log = log_with(tmp_path, "gzip")
    batch = producer_batch(50)
    log.append_as_leader(batch, 0, NOW)
    data = stored(log)
    h = validate_records(data)  # CRC32C and every record's framing
    assert h.compression == CODECS["gzip"] and h.records_count == 50
    assert h.crc != read_header(bytes(batch)).crc


def test_the_append_info_and_the_segment_account_for_the_rewritten_size(tmp_path):
    log = log_with(tmp_path, "zstd")
    batch = producer_batch(200, value_size=300)  # compressible: zstd makes it much smaller
    info = log.append_as_leader(batch, 0, NOW)
    size = len(stored(log))
    assert size < len(batch) // 4
    assert info.valid_bytes == size == log.active_segment.size == log.size_in_bytes
    assert (info.first_offset, info.last_offset, info.records_count) == (0, 199, 200)
    assert log.log_end_offset == 200


def test_the_offset_index_points_at_the_rewritten_batches(tmp_path):
    log = log_with(tmp_path, "lz4", index_interval_bytes=1)
    for i in range(10):
        log.append_as_leader(producer_batch(10, tag=i), 0, NOW)
    data = stored(log)
    batches = {h.position: (h.base_offset, h.last_offset) for h in iter_batches(data)}
    index = log.active_segment.offset_index
    assert index.entries == 9  # every batch after the first (Kafka's bytesSinceLastIndexEntry)
    for n in range(index.entries):
        offset, position = index.entry(n)
        first, last = batches[position]  # a rewritten batch starts there, and holds offset
        assert first <= offset <= last
    for offset in range(0, 100, 7):
        found = log.read(offset, 1)
        assert found.first_batch_offset == offset - offset % 10
        assert contents(found.records.read())[offset % 10][0] == offset


def test_a_batch_that_grows_past_max_message_bytes_when_rewritten_is_rejected_and_nothing_written(tmp_path):
    """Kafka re-checks max.message.bytes after a recompression changed the sizes."""
    log = log_with(tmp_path, "uncompressed", max_message_bytes=2000)
    batch = producer_batch(50, value_size=100, compression=CODECS["zstd"])
    assert len(batch) < 2000
    with pytest.raises(RecordTooLargeError, match="max.message.bytes"):
        log.append_as_leader(batch, 0, NOW)
    assert log.log_end_offset == 0 and log.active_segment.size == 0
    assert log.producer_state.producers == {}


def test_the_producers_batch_size_is_checked_before_it_is_rewritten(tmp_path):
    """As Kafka's analyzeAndValidateRecords: the batch as sent must fit max.message.bytes,
    even when the topic's codec would shrink it."""
    log = log_with(tmp_path, "zstd", max_message_bytes=2000)
    with pytest.raises(RecordTooLargeError, match="max.message.bytes"):
        log.append_as_leader(producer_batch(50, value_size=100), 0, NOW)
    assert log.log_end_offset == 0


def test_a_corrupt_batch_is_refused_before_any_rewrite(tmp_path):
    log = log_with(tmp_path, "zstd")
    batch = producer_batch(3)
    batch[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError):
        log.append_as_leader(batch, 0, NOW)
    assert log.log_end_offset == 0 and log.active_segment.size == 0


def test_broker_written_control_batches_are_never_recompressed(tmp_path):
    log = log_with(tmp_path, "zstd")
    marker = [(b"\x00\x00\x00\x00", b"\x00\x00\x00\x00\x00\x00", [], NOW)]
    control = bytearray(build_batch(marker, is_control=True, is_transactional=True,
                                    producer_id=1, producer_epoch=0))
    log.append_as_leader(control, 0, NOW, origin=ORIGIN_COORDINATOR)
    assert stored(log) == bytes(control)
    assert read_header(stored(log)).compression == CODECS["none"]


def test_a_control_batch_written_compressed_keeps_its_codec(tmp_path):
    """Kafka would rebuild it through a builder that drops the control bit; a marker must
    stay a marker, so it is stored as it came."""
    log = log_with(tmp_path, "lz4")
    marker = [(b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x00", [], NOW)]
    control = bytearray(build_batch(marker, compression=CODECS["gzip"], is_control=True,
                                    is_transactional=True, producer_id=1, producer_epoch=0))
    log.append_as_leader(control, 0, NOW, origin=ORIGIN_COORDINATOR)
    assert stored(log) == bytes(control)
    h = read_header(stored(log))
    assert h.is_control and h.compression == CODECS["gzip"]


def test_a_coordinators_data_batches_follow_the_topics_codec(tmp_path):
    """Kafka's LogValidator applies the target codec whatever the append's origin."""
    log = log_with(tmp_path, "zstd")
    batch = build_batch([(b"group", b"offset", [], NOW)])
    log.append_as_leader(bytearray(batch), 0, NOW, origin=ORIGIN_COORDINATOR)
    assert codecs_of(stored(log)) == [CODECS["zstd"]]


def test_each_batch_of_an_append_is_rewritten_on_its_own(tmp_path):
    log = log_with(tmp_path, "zstd")
    parts = [
        build_batch([(b"a", b"1", [], BASE_TS), (b"a", b"2", [], BASE_TS)], compression=1,
                    producer_id=10, producer_epoch=1, base_sequence=0),
        build_batch([(b"b", b"3", [], BASE_TS)], compression=4),
        build_batch([(b"c", b"4", [], BASE_TS)] * 3, producer_id=11, producer_epoch=2, base_sequence=0),
    ]
    info = log.append_as_leader(bytearray(b"".join(parts)), 0, NOW)
    data = stored(log)
    headers = list(iter_batches(data, check_crc=True))
    assert [h.compression for h in headers] == [4, 4, 4]
    assert [(h.base_offset, h.last_offset) for h in headers] == [(0, 1), (2, 2), (3, 5)]
    assert [(h.producer_id, h.producer_epoch, h.base_sequence) for h in headers] == [
        (10, 1, 0), (-1, -1, -1), (11, 2, 0)]
    # The batch already in zstd is kept as it came: only baseOffset and the epoch differ.
    kept = data[headers[1].position:headers[2].position]
    assert kept[8:12] == parts[1][8:12] and kept[16:] == parts[1][16:]
    assert [r[3] for r in contents(data)] == [b"1", b"2", b"3", b"4", b"4", b"4"]
    assert info.valid_bytes == len(data)


def test_a_follower_stores_the_leaders_rewritten_batches_byte_for_byte(tmp_path):
    leader = log_with(tmp_path, "lz4", name="leader/t-0")
    follower = log_with(tmp_path, "gzip", name="follower/t-0")  # its own config plays no part
    leader.append_as_leader(producer_batch(10, compression=CODECS["zstd"]), 2, NOW)
    leader.append_as_leader(producer_batch(10), 2, NOW)
    data = stored(leader)
    info = follower.append_as_follower(data, NOW)
    assert (info.first_offset, info.last_offset, info.valid_bytes) == (0, 19, len(data))
    assert stored(follower) == data
    assert codecs_of(stored(follower)) == [CODECS["lz4"]] * 2


def test_a_rewritten_log_reopens_with_the_same_batches_and_producer_state(tmp_path):
    log = log_with(tmp_path, "snappy")
    batch = build_batch([(b"k", b"v", [], BASE_TS)] * 4, producer_id=5, producer_epoch=0, base_sequence=0)
    log.append_as_leader(bytearray(batch), 0, NOW)
    before = stored(log)
    log.close()
    again = Log(str(tmp_path / "t-0"), LogConfig(compression_type="snappy"), had_clean_shutdown=False)
    assert again.log_end_offset == 4 and stored(again) == before
    with pytest.raises(DuplicateSequenceError):
        again.append_as_leader(bytearray(batch), 0, NOW)


@pytest.mark.parametrize("target", ["gzip", "lz4", "zstd"])
def test_rewritten_segments_are_readable_by_an_independent_decoder(tmp_path, target):
    """kafka-python (no snappy here) reads the rewritten batches as a Kafka log."""
    from kafka.record import MemoryRecords

    log = log_with(tmp_path, target)
    for i in range(3):
        log.append_as_leader(producer_batch(5, tag=i), 0, NOW)
    log.flush()
    with open(log.active_segment.log_path, "rb") as f:
        records = MemoryRecords(f.read())
    seen = []
    while (b := records.next_batch()) is not None:
        assert b.compression_type == CODECS[target]
        seen.extend((r.offset, r.key, r.value, r.timestamp) for r in b)
    assert [o for o, *_ in seen] == list(range(15))
    assert seen[7][1:] == (b"k", b"1-2-".ljust(100, b"x"), BASE_TS + 2)



def test_a_rewrite_does_no_python_work_per_record(tmp_path):
    """The rebuild decompresses and compresses in the codec libraries and copies the
    records in C: the same Python calls for 10 records as for 20,000."""
    warm = log_with(tmp_path, "zstd", name="warm-0")
    warm.append_as_leader(producer_batch(10, value_size=10, compression=CODECS["gzip"]), 0, NOW)
    costs = []
    for n in (10, 20_000):
        log = log_with(tmp_path, "zstd", name=f"t-{n}")
        buf = producer_batch(n, value_size=10, compression=CODECS["gzip"])
        costs.append(python_calls(lambda log=log, buf=buf: log.append_as_leader(buf, 0, NOW)))
        assert scan(stored(log)).records_count == n
        assert codecs_of(stored(log)) == [CODECS["zstd"]]
    assert costs[0] == costs[1]
