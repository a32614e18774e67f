"""ListOffsets MAX_TIMESTAMP (-3) in the log: the first record holding the greatest timestamp,
as Kafka 3.8+ answers it (KAFKA-16310): the segment with the largest timestamp, its batch
through the time index, and a scan of that batch's records (engine/log.py, engine/segment.py)."""
import pytest

from engine.config import LogConfig
from engine.log import Log
from ext.batch import COMPRESSION_GZIP, COMPRESSION_LZ4, COMPRESSION_SNAPPY, COMPRESSION_ZSTD, build_batch
from tests.engine.batches import BASE_TS

NOW = BASE_TS + 10**6


def batch(*deltas: int, compression: int = 0) -> bytearray:
    """One producer batch whose records carry BASE_TS + each delta, in order."""
    return bytearray(build_batch([(b"k", b"v%d" % i, [], BASE_TS + d) for i, d in enumerate(deltas)],
                                 compression=compression))


def test_max_timestamp_is_the_record_in_the_middle_of_its_batch_not_the_batch_last_offset(tmp_path):
    log = Log(str(tmp_path / "t-0"))
    log.append_as_leader(batch(1, 2, 3), 0, NOW)  # 0..2
    log.append_as_leader(batch(4, 90, 5, 6), 0, NOW)  # 3..6: the greatest at 4
    log.append_as_leader(batch(7, 8), 0, NOW)  # 7..8
    assert log.offset_of_max_timestamp() == (4, BASE_TS + 90)


def test_max_timestamp_held_by_several_records_is_the_first_of_them(tmp_path):
    log = Log(str(tmp_path / "t-0"))
    log.append_as_leader(batch(1, 50, 2, 50), 0, NOW)  # 0..3: 50 at 1 and 3
    log.append_as_leader(batch(50, 3), 0, NOW)  # 4..5: 50 again, later
    assert log.offset_of_max_timestamp() == (1, BASE_TS + 50)


@pytest.mark.parametrize("codec", [COMPRESSION_GZIP, COMPRESSION_SNAPPY, COMPRESSION_LZ4, COMPRESSION_ZSTD])
def test_max_timestamp_in_a_compressed_batch_is_found_by_decompressing_that_batch(tmp_path, codec):
    log = Log(str(tmp_path / "t-0"))
    log.append_as_leader(batch(1, 2, compression=codec), 0, NOW)  # 0..1
    log.append_as_leader(batch(3, 4, 99, 5, 6, compression=codec), 0, NOW)  # 2..6: the greatest at 4
    log.append_as_leader(batch(7, compression=codec), 0, NOW)  # 7
    assert log.offset_of_max_timestamp() == (4, BASE_TS + 99)


def test_max_timestamp_with_log_append_time_is_the_first_record_of_the_latest_batch(tmp_path):
    """Every record of a LogAppendTime batch has the batch's time: the first record holds it."""
    log = Log(str(tmp_path / "t-0"), LogConfig(message_timestamp_type="LogAppendTime"))
    log.append_as_leader(batch(9, 8, 7), 0, NOW)  # 0..2 at NOW
    log.append_as_leader(batch(1, 2, 3), 0, NOW + 5)  # 3..5 at NOW + 5
    log.append_as_leader(batch(4), 0, NOW + 5)  # 6 at NOW + 5 too, later
    assert log.offset_of_max_timestamp() == (3, NOW + 5)


def test_max_timestamp_across_segments_is_in_the_first_segment_holding_the_greatest(tmp_path):
    log = Log(str(tmp_path / "t-0"), LogConfig(index_interval_bytes=1))
    log.append_as_leader(batch(1, 2), 0, NOW)  # 0..1
    log.roll(NOW)
    for i in range(5):  # 2..16, indexed batch by batch
        log.append_as_leader(batch(10 + i, 500, 20 + i), 0, NOW)
    log.roll(NOW)
    log.append_as_leader(batch(30, 500, 499), 0, NOW)  # 17..19: as great, in a later segment
    log.append_as_leader(batch(40), 0, NOW)  # 20
    assert len(log.segments) == 3
    assert log.offset_of_max_timestamp() == (3, BASE_TS + 500)


def test_max_timestamp_after_reopening_the_log_comes_from_the_time_index(tmp_path):
    path = str(tmp_path / "t-0")
    log = Log(path, LogConfig(index_interval_bytes=1))
    for i in range(4):
        log.append_as_leader(batch(i, 100 + i, i), 0, NOW)  # the greatest at 10
    log.roll(NOW)
    log.append_as_leader(batch(1, 2), 0, NOW)  # 12..13
    log.flush()
    log.close()
    again = Log(path, LogConfig(index_interval_bytes=1))
    assert again.offset_of_max_timestamp() == (10, BASE_TS + 103)


def test_max_timestamp_of_an_empty_log_is_none(tmp_path):
    assert Log(str(tmp_path / "t-0")).offset_of_max_timestamp() is None
