"""Log: appends, offsets, rolls, reads, truncation (engine/log.py over ext)."""
import os

import pytest

from engine.config import LogConfig
from engine.errors import (
    InvalidRecordError,
    InvalidTimestampError,
    OffsetOutOfRangeError,
    RecordTooLargeError,
    UnexpectedAppendOffsetError,
)
from engine.log import FETCH_HIGH_WATERMARK, Log
from ext.batch import build_batch, decode_records, iter_batches, read_header, scan
from tests.engine.batches import BASE_TS, producer_batch, python_calls

NOW = BASE_TS + 1000


def offsets_in(data: bytes) -> list[int]:
    return [r.offset for h in iter_batches(data) for r in decode_records(data, h.position)]


def test_leader_append_assigns_contiguous_offsets_and_stamps_epoch(tmp_path):
    log = Log(str(tmp_path / "t-0"))
    infos = [log.append_as_leader(producer_batch(10, tag=i), leader_epoch=3, now_ms=NOW) for i in range(3)]
    assert [(i.first_offset, i.last_offset) for i in infos] == [(0, 9), (10, 19), (20, 29)]
    assert log.log_end_offset == 30
    data = log.read(0, 1 << 20).records.read()
    assert offsets_in(data) == list(range(30))
    assert {h.partition_leader_epoch for h in iter_batches(data, check_crc=True)} == {3}
    assert log.leader_epoch_cache.entries() == [(3, 0)]


def test_new_leader_epoch_starts_at_log_end_offset(tmp_path):
    log = Log(str(tmp_path / "t-0"))
    log.append_as_leader(producer_batch(5), 1, NOW)
    log.append_as_leader(producer_batch(5), 2, NOW)
    assert log.leader_epoch_cache.entries() == [(1, 0), (2, 5)]
    with open(tmp_path / "t-0" / "leader-epoch-checkpoint") as f:
        assert f.read() == "0\n2\n1 0\n2 5\n"


def test_segment_rolls_on_segment_bytes_with_kafka_file_names(tmp_path):
    log = Log(str(tmp_path / "t-0"), LogConfig(segment_bytes=4096))
    for i in range(20):
        log.append_as_leader(producer_batch(10, tag=i), 0, NOW)
    assert len(log.segments) > 3
    names = sorted(os.listdir(tmp_path / "t-0"))
    bases = [s.base_offset for s in log.segments]
    for b in bases:
        assert f"{b:020d}.log" in names and f"{b:020d}.index" in names and f"{b:020d}.timeindex" in names
    assert all(s.size <= 4096 for s in log.segments)
    everything = b""
    offset = 0
    while offset < log.log_end_offset:
        chunk = log.read(offset, 1 << 20).records.read()
        everything += chunk
        offset = read_header(chunk, max(h.position for h in iter_batches(chunk))).next_offset
    assert offsets_in(everything) == list(range(200))


def test_segment_rolls_when_segment_ms_passes_since_first_batch(tmp_path):
    log = Log(str(tmp_path / "t-0"), LogConfig(segment_ms=1000, message_timestamp_before_max_ms=2**62))
    log.append_as_leader(producer_batch(1, ts=BASE_TS), 0, NOW)
    log.append_as_leader(producer_batch(1, ts=BASE_TS + 500), 0, NOW)
    assert len(log.segments) == 1
    log.append_as_leader(producer_batch(1, ts=BASE_TS + 1500), 0, NOW)
    assert [s.base_offset for s in log.segments] == [0, 2]


def test_offset_index_is_sparse_by_index_interval_bytes(tmp_path):
    log = Log(str(tmp_path / "t-0"), LogConfig(index_interval_bytes=1000))
    for i in range(50):
        log.append_as_leader(producer_batch(3, value_size=100, tag=i), 0, NOW)
    index = log.active_segment.offset_index
    size = len(producer_batch(3, value_size=100))
    # an entry each time more than 1000 bytes passed since the last one
    assert index.entries == (50 - 1) // (1000 // size + 1)
    for n in range(index.entries):
        offset, position = index.entry(n)
        data = os.pread(log.active_segment.fd, size, position)
        assert read_header(data).last_offset == offset


@pytest.mark.parametrize("target", [0, 1, 29, 30, 31, 149, 299])
def test_read_from_any_offset_starts_at_the_batch_holding_it(tmp_path, target):
    log = Log(str(tmp_path / "t-0"), LogConfig(index_interval_bytes=200, segment_bytes=8000))
    for i in range(30):
        log.append_as_leader(producer_batch(10, tag=i), 0, NOW)
    info = log.read(target, 10 ** 6)
    first = read_header(info.records.read())
    assert first.base_offset <= target <= first.last_offset


def test_a_read_from_where_a_recent_append_began_needs_no_index_lookup_or_scan(tmp_path, monkeypatch):
    """A follower (or a consumer at the log end) fetches from where an append began: the
    segment remembers the last appends' starts. The read is the one a scan finds, and a
    truncation forgets them, so a start that was cut off is never served from memory."""
    import engine.segment
    log = Log(str(tmp_path / "t-0"), LogConfig(index_interval_bytes=200))
    appends = [log.append_as_leader(producer_batch(10, tag=i) + producer_batch(3, tag=i), 0, NOW)
               for i in range(80)]
    starts = [info.first_offset for info in appends]
    scanned = {start: log.read(start, 1 << 20).records for start in starts}
    real_search = engine.segment.search_for_offset
    searches = []
    monkeypatch.setattr(engine.segment, "search_for_offset",
                        lambda *a: searches.append(a) or real_search(*a))
    remembered = starts[-engine.segment.RECENT_STARTS:]
    for start in remembered:
        records = log.read(start, 1 << 20).records
        assert (records.position, records.size) == (scanned[start].position, scanned[start].size)
    assert searches == []
    assert log.read(starts[0], 1 << 20).records.position == scanned[starts[0]].position
    assert len(searches) == 1  # an older start is found by a scan, as before
    log.truncate_to(starts[-3])
    assert log.log_end_offset == starts[-3]
    assert not log.active_segment._starts  # forgotten: the bytes at those positions will differ
    with pytest.raises(OffsetOutOfRangeError):
        log.read(starts[-2], 1 << 20)
    again = log.append_as_leader(producer_batch(7, tag=99), 0, NOW)
    assert again.first_offset == starts[-3]
    data = log.read(starts[-3], 1 << 20).records.read()
    assert offsets_in(data) == list(range(starts[-3], starts[-3] + 7))


def test_read_returns_whole_batches_within_max_bytes(tmp_path):
    log = Log(str(tmp_path / "t-0"))
    size = len(producer_batch(10))
    for i in range(10):
        log.append_as_leader(producer_batch(10, tag=i), 0, NOW)
    assert log.read(0, size * 3 + size // 2).size == size * 3
    assert log.read(0, size * 3).size == size * 3


def test_read_min_one_message_returns_a_batch_larger_than_max_bytes(tmp_path):
    log = Log(str(tmp_path / "t-0"))
    log.append_as_leader(producer_batch(100), 0, NOW)
    big = len(producer_batch(100))
    assert log.read(0, 10).size == big
    assert log.read(0, 10, min_one_message=False).size == 0


def test_read_with_high_watermark_isolation_stops_at_the_high_watermark(tmp_path):
    log = Log(str(tmp_path / "t-0"))
    for i in range(5):
        log.append_as_leader(producer_batch(10, tag=i), 0, NOW)
    assert log.read(0, 1 << 20, FETCH_HIGH_WATERMARK).records is None
    log.update_high_watermark(30)
    assert offsets_in(log.read(0, 1 << 20, FETCH_HIGH_WATERMARK).records.read()) == list(range(30))
    assert log.read(30, 1 << 20, FETCH_HIGH_WATERMARK).records is None
    assert offsets_in(log.read(30, 1 << 20).records.read()) == list(range(30, 50))


def test_read_outside_the_log_is_offset_out_of_range(tmp_path):
    log = Log(str(tmp_path / "t-0"))
    log.append_as_leader(producer_batch(10), 0, NOW)
    assert log.read(10, 100).records is None
    with pytest.raises(OffsetOutOfRangeError):
        log.read(11, 100)


def test_fetch_offset_by_timestamp_finds_first_record_at_or_after(tmp_path):
    log = Log(str(tmp_path / "t-0"), LogConfig(index_interval_bytes=100, segment_bytes=5000))
    for i in range(40):
        log.append_as_leader(producer_batch(5, ts=BASE_TS + 100 * i, tag=i), 0, NOW + 10**6)
    assert log.fetch_offset_by_timestamp(BASE_TS) == (0, BASE_TS)
    assert log.fetch_offset_by_timestamp(BASE_TS + 102) == (7, BASE_TS + 102)
    assert log.fetch_offset_by_timestamp(BASE_TS + 150) == (10, BASE_TS + 200)
    assert log.fetch_offset_by_timestamp(BASE_TS + 3904) == (199, BASE_TS + 3904)
    assert log.fetch_offset_by_timestamp(BASE_TS + 3905) is None
    assert log.offset_of_max_timestamp() == (199, BASE_TS + 3904)


def test_log_append_time_replaces_timestamps(tmp_path):
    log = Log(str(tmp_path / "t-0"), LogConfig(message_timestamp_type="LogAppendTime"))
    info = log.append_as_leader(producer_batch(3, ts=5), 0, NOW)
    assert info.log_append_time == NOW
    data = log.read(0, 1 << 20).records.read()
    header = read_header(data)
    assert header.timestamp_type == 1 and header.max_timestamp == NOW
    assert [r.timestamp for r in decode_records(data)] == [NOW] * 3


def test_create_time_outside_the_allowed_window_is_rejected(tmp_path):
    log = Log(str(tmp_path / "t-0"), LogConfig(message_timestamp_after_max_ms=1000))
    with pytest.raises(InvalidTimestampError, match="message.timestamp.after.max.ms"):
        log.append_as_leader(producer_batch(1, ts=NOW + 5000), 0, NOW)
    assert log.log_end_offset == 0


def test_every_record_timestamp_is_checked_not_only_the_ones_the_header_names(tmp_path):
    """A record older than message.timestamp.before.max.ms in the middle of a batch whose
    first and max timestamps are fresh is refused, as LogValidator checks each record."""
    log = Log(str(tmp_path / "t-0"), LogConfig(message_timestamp_before_max_ms=60_000))
    stale = build_batch([(None, b"a", [], NOW), (None, b"b", [], NOW - 3_600_000), (None, b"c", [], NOW)])
    with pytest.raises(InvalidTimestampError, match="message.timestamp.before.max.ms"):
        log.append_as_leader(bytearray(stale), 0, NOW)
    assert log.log_end_offset == 0


def test_batch_over_max_message_bytes_is_rejected_and_nothing_written(tmp_path):
    log = Log(str(tmp_path / "t-0"), LogConfig(max_message_bytes=500))
    with pytest.raises(RecordTooLargeError, match="max.message.bytes"):
        log.append_as_leader(producer_batch(10), 0, NOW)
    assert log.log_end_offset == 0 and log.active_segment.size == 0


def test_client_control_batches_are_rejected(tmp_path):
    log = Log(str(tmp_path / "t-0"))
    marker = [(b"\x00\x00\x00\x00", b"\x00\x00\x00\x00\x00\x00", [], NOW)]
    control = bytearray(build_batch(marker, is_control=True, is_transactional=True,
                                    producer_id=1, producer_epoch=0))
    with pytest.raises(InvalidRecordError):
        log.append_as_leader(control, 0, NOW)


def test_corrupt_producer_batch_is_rejected(tmp_path):
    from ext.errors import CorruptRecordError
    log = Log(str(tmp_path / "t-0"))
    buf = producer_batch(3)
    buf[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError):
        log.append_as_leader(buf, 0, NOW)
    assert log.log_end_offset == 0


def test_follower_append_keeps_leader_offsets_and_epochs(tmp_path):
    leader = Log(str(tmp_path / "leader" / "t-0"))
    follower = Log(str(tmp_path / "follower" / "t-0"))
    leader.append_as_leader(producer_batch(5), 1, NOW)
    leader.append_as_leader(producer_batch(5), 4, NOW)
    data = leader.read(0, 1 << 20).records.read()
    info = follower.append_as_follower(data, NOW)
    assert (info.first_offset, info.last_offset) == (0, 9)
    assert follower.leader_epoch_cache.entries() == [(1, 0), (4, 5)]
    assert follower.read(0, 1 << 20).records.read() == data
    with pytest.raises(UnexpectedAppendOffsetError):
        follower.append_as_follower(data, NOW)


def test_truncate_to_drops_later_segments_and_epochs(tmp_path):
    log = Log(str(tmp_path / "t-0"), LogConfig(segment_bytes=3000))
    for i in range(20):
        log.append_as_leader(producer_batch(10, tag=i), i // 5, NOW)
    log.update_high_watermark(200)
    assert len(log.segments) > 2
    assert log.truncate_to(75)
    assert log.log_end_offset == 70  # the batch holding 70..79 straddles 75: it goes whole
    assert log.high_watermark == 70 and log.recovery_point <= 70
    assert log.leader_epoch_cache.entries() == [(0, 0), (1, 50)]
    assert offsets_in(b"".join(
        log.read(o, 1 << 20).records.read() for o in range(0, 70, 10)
    ))[-1] == 69
    info = log.append_as_leader(producer_batch(10), 7, NOW)
    assert info.first_offset == 70


def test_truncate_to_a_batch_boundary_keeps_everything_below(tmp_path):
    log = Log(str(tmp_path / "t-0"))
    for i in range(5):
        log.append_as_leader(producer_batch(10, tag=i), 0, NOW)
    log.truncate_to(30)
    assert log.log_end_offset == 30
    assert offsets_in(log.read(0, 1 << 20).records.read()) == list(range(30))


def test_truncate_fully_and_start_at(tmp_path):
    log = Log(str(tmp_path / "t-0"))
    log.append_as_leader(producer_batch(10), 2, NOW)
    log.truncate_fully_and_start_at(500)
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (500, 500, 500)
    assert log.leader_epoch_cache.entries() == []
    assert os.listdir(tmp_path / "t-0").count("00000000000000000500.log") == 1
    assert log.append_as_leader(producer_batch(1), 3, NOW).first_offset == 500


def test_reopen_after_clean_close_continues_where_it_left(tmp_path):
    path = str(tmp_path / "t-0")
    log = Log(path, LogConfig(segment_bytes=3000, index_interval_bytes=300))
    for i in range(30):
        log.append_as_leader(producer_batch(5, ts=BASE_TS + i, tag=i), i // 10, NOW)
    before = log.read(0, 1 << 30).records.read()
    entries = [(s.base_offset, s.offset_index.entries, s.max_timestamp_so_far) for s in log.segments]
    log.flush()
    log.close()
    again = Log(path, LogConfig(segment_bytes=3000, index_interval_bytes=300), had_clean_shutdown=True)
    assert again.log_end_offset == 150
    assert [
        (s.base_offset, s.offset_index.entries, s.max_timestamp_so_far) for s in again.segments
    ] == entries
    assert again.read(0, 1 << 30).records.read() == before
    assert again.leader_epoch_cache.entries() == [(0, 0), (1, 50), (2, 100)]
    assert again.append_as_leader(producer_batch(1), 2, NOW).first_offset == 150


def test_segments_are_readable_by_an_independent_decoder(tmp_path):
    """kafka-python decodes our segment file as a Kafka log: same offsets, keys, values."""
    from kafka.record import MemoryRecords

    log = Log(str(tmp_path / "t-0"))
    for i in range(4):
        log.append_as_leader(producer_batch(5, tag=i), 0, NOW)
    log.flush()
    with open(log.active_segment.log_path, "rb") as f:
        records = MemoryRecords(f.read())
    seen = []
    while (b := records.next_batch()) is not None:
        for r in b:
            seen.append((r.offset, r.value))
    assert [o for o, _ in seen] == list(range(20))
    assert seen[7][1].startswith(b"1-2-")


def test_empty_append_from_follower_is_a_no_op(tmp_path):
    log = Log(str(tmp_path / "t-0"))
    assert log.append_as_follower(b"").records_count == 0
    assert log.log_end_offset == 0
    assert scan(b"").count == 0



@pytest.mark.parametrize("few,many", [(10, 500), (2000, 20000)])
def test_append_and_read_do_no_python_work_per_record(tmp_path, few, many):
    """The produce and fetch paths cost the same Python calls whatever the record count
    (pairs of batches that both fit, or both exceed, the read-ahead chunk)."""
    warm = Log(str(tmp_path / "warm-0"))
    warm.append_as_leader(producer_batch(few, value_size=10), 0, NOW)
    warm.read(0, 1 << 20)
    warm.close()
    costs = []
    for n in (few, many):
        log = Log(str(tmp_path / f"t-{n}"))
        buf = producer_batch(n, value_size=10)
        appended = python_calls(lambda log=log, buf=buf: log.append_as_leader(buf, 0, NOW))
        read = python_calls(lambda log=log: log.read(0, 1 << 20))
        costs.append((appended, read))
        assert log.read(0, 1 << 20).size == len(buf)
        log.close()
    assert costs[0] == costs[1]


def test_empty_log_and_empty_active_segment_read_as_nothing(tmp_path):
    log = Log(str(tmp_path / "t-0"))
    assert log.read(0, 1 << 20).records is None
    assert log.fetch_offset_by_timestamp(0) is None and log.offset_of_max_timestamp() is None
    log.append_as_leader(producer_batch(3), 0, NOW)
    log.roll()
    assert [s.size for s in log.segments] == [len(producer_batch(3)), 0]
    assert log.read(3, 1 << 20).records is None
    assert offsets_in(log.read(0, 1 << 20).records.read()) == [0, 1, 2]
    log.close()
    again = Log(str(tmp_path / "t-0"))
    assert again.log_end_offset == 3 and [s.base_offset for s in again.segments] == [0, 3]


def test_segment_rolls_when_an_index_is_full(tmp_path):
    log = Log(str(tmp_path / "t-0"), LogConfig(segment_index_bytes=48, index_interval_bytes=0))
    for i in range(12):
        log.append_as_leader(producer_batch(2, ts=BASE_TS + i, tag=i), 0, NOW)
    assert len(log.segments) > 2
    for segment in log.segments[:-1]:
        # a 48-byte time index holds 4 entries; one stays free for the roll entry
        assert segment.offset_index.entries <= 6 and segment.time_index.entries <= 4
    assert offsets_in(b"".join(log.read(o, 1).records.read() for o in range(0, 24, 2))) == list(range(24))


def test_flush_messages_moves_the_recovery_point(tmp_path):
    log = Log(str(tmp_path / "t-0"), LogConfig(flush_messages=15))
    log.append_as_leader(producer_batch(10), 0, NOW)
    assert log.recovery_point == 0
    log.append_as_leader(producer_batch(10), 0, NOW)
    assert log.recovery_point == 20
    log.append_as_leader(producer_batch(10), 0, NOW)
    log.flush()
    assert log.recovery_point == 30


def test_segment_ms_counts_from_the_first_batch_after_a_reopen(tmp_path):
    config = LogConfig(segment_ms=1000, message_timestamp_before_max_ms=2**62)
    log = Log(str(tmp_path / "t-0"), config)
    log.append_as_leader(producer_batch(1, ts=BASE_TS), 0, NOW)
    log.append_as_leader(producer_batch(1, ts=BASE_TS + 900), 0, NOW)
    log.close()
    again = Log(str(tmp_path / "t-0"), config)
    again.append_as_leader(producer_batch(1, ts=BASE_TS + 950), 0, NOW)
    assert len(again.segments) == 1
    again.append_as_leader(producer_batch(1, ts=BASE_TS + 1001), 0, NOW)
    assert [s.base_offset for s in again.segments] == [0, 3]
