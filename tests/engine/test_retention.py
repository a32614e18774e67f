"""Retention: whole segments go by retention.ms, retention.bytes and the log start offset,
never at or above the high watermark."""
import os

import pytest

from engine.config import LogConfig
from engine.errors import OffsetOutOfRangeError
from engine.log import Log
from tests.engine.batches import BASE_TS, producer_batch

NOW = BASE_TS + 10_000


def filled(path, batches=20, **config) -> Log:
    log = Log(path, LogConfig(segment_bytes=3000, message_timestamp_before_max_ms=2**62, **config))
    for i in range(batches):
        log.append_as_leader(producer_batch(10, ts=BASE_TS + 1000 * i, tag=i), 0, NOW)
    log.update_high_watermark(log.log_end_offset)
    return log


def test_retention_ms_deletes_segments_whose_newest_record_is_too_old(tmp_path):
    log = filled(str(tmp_path / "t-0"), retention_ms=5000, file_delete_delay_ms=0)
    before = [(s.base_offset, s.max_timestamp_so_far) for s in log.segments]
    now = BASE_TS + 12_000
    deleted = log.delete_old_segments(now)
    expected = [b for b, ts in before[:-1] if now - ts > 5000]
    assert deleted == len(expected) > 0
    assert log.segments[0].base_offset == before[len(expected)][0]
    assert log.log_start_offset == log.segments[0].base_offset
    assert log.delete_pending_segments(now) == deleted
    assert not any(n.endswith(".deleted") for n in os.listdir(tmp_path / "t-0"))


def test_retention_bytes_keeps_the_newest_segments_within_the_limit(tmp_path):
    log = filled(str(tmp_path / "t-0"), retention_bytes=7000)
    segment_size = log.segments[0].size
    assert log.delete_old_segments(NOW) > 0
    # Kafka's rule: delete the oldest whole segments while what stays is >= retention.bytes,
    # so the log ends within one segment above the limit, never below it.
    assert 7000 <= log.size_in_bytes < 7000 + segment_size


def test_expired_active_segment_rolls_so_an_empty_one_remains(tmp_path):
    log = filled(str(tmp_path / "t-0"), batches=3, retention_ms=1)
    log.delete_old_segments(BASE_TS + 10**9)
    assert len(log.segments) == 1 and log.active_segment.size == 0
    assert log.log_start_offset == log.log_end_offset == 30
    assert log.append_as_leader(producer_batch(1), 0, NOW).first_offset == 30


def test_retention_never_deletes_at_or_above_the_high_watermark(tmp_path):
    log = filled(str(tmp_path / "t-0"), retention_ms=1)
    log.update_high_watermark(0)
    assert log.delete_old_segments(BASE_TS + 10**9) == 0
    log.update_high_watermark(log.segments[2].base_offset)
    assert log.delete_old_segments(BASE_TS + 10**9) == 2


def test_delete_records_raises_log_start_and_drops_segments_below_it(tmp_path):
    log = filled(str(tmp_path / "t-0"))
    third = log.segments[2].base_offset
    assert log.maybe_increment_log_start_offset(third + 3)
    assert log.log_start_offset == third + 3
    with pytest.raises(OffsetOutOfRangeError):
        log.read(third + 2, 100)
    assert log.delete_old_segments(NOW) == 2
    assert log.segments[0].base_offset == third and log.log_start_offset == third + 3
    with pytest.raises(OffsetOutOfRangeError):
        log.maybe_increment_log_start_offset(log.high_watermark + 1)


def test_deleted_segments_stay_readable_until_the_delete_delay_passes(tmp_path):
    log = filled(str(tmp_path / "t-0"), retention_ms=1, file_delete_delay_ms=60_000)
    info = log.read(0, 100)
    now = BASE_TS + 10**9
    deleted = log.delete_old_segments(now)
    assert any(n.endswith(".log.deleted") for n in os.listdir(tmp_path / "t-0"))
    assert len(info.records.read()) == info.size  # an in-flight read still works
    assert log.delete_pending_segments(now + 59_999) == 0
    assert log.delete_pending_segments(now + 60_000) == deleted
    assert not any(n.endswith(".deleted") for n in os.listdir(tmp_path / "t-0"))


def test_a_compacted_topic_is_not_trimmed_by_time_or_size(tmp_path):
    log = filled(str(tmp_path / "t-0"), retention_ms=1, retention_bytes=0, cleanup_policy="compact")
    assert log.delete_old_segments(BASE_TS + 10**9) == 0
    both = filled(str(tmp_path / "u-0"), retention_ms=1, cleanup_policy="compact,delete")
    assert both.delete_old_segments(BASE_TS + 10**9) > 0
