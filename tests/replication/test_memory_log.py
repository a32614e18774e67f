"""MemoryPartitionLog: Kafka's leader-epoch cache semantics, HW and log start bounds, truncation."""
import pytest

from replication.errors import OffsetOutOfRange, UnexpectedAppendOffset
from replication.log import MemoryPartitionLog


def chapter_log() -> MemoryPartitionLog:
    """The chapter's leader: epoch 5 from 100, epoch 7 from 130, LEO 140."""
    log = MemoryPartitionLog(log_start_offset=100)
    log.append_as_leader(range(30), 5, 0)
    log.append_as_leader(range(10), 7, 0)
    return log


def test_leader_appends_stamp_the_epoch_and_cache_where_it_starts():
    log = chapter_log()
    assert log.epoch_entries() == [(5, 100), (7, 130)]
    assert log.entry_at(129)[:2] == (129, 5) and log.entry_at(130)[:2] == (130, 7)
    assert (log.log_end_offset, log.latest_epoch) == (140, 7)


def test_end_offset_of_the_latest_epoch_is_the_log_end_offset():
    assert chapter_log().end_offset_for_epoch(7) == (7, 140)


def test_end_offset_of_an_epoch_is_the_start_of_the_next_one():
    log = chapter_log()
    assert log.end_offset_for_epoch(5) == (5, 130)
    assert log.end_offset_for_epoch(6) == (5, 130)  # largest cached epoch <= 6


def test_end_offset_of_an_epoch_below_every_cached_one_is_the_first_start():
    assert chapter_log().end_offset_for_epoch(3) == (3, 100)


def test_end_offset_of_an_undefined_or_future_epoch_is_undefined():
    log = chapter_log()
    assert log.end_offset_for_epoch(-1) == (-1, -1)
    assert log.end_offset_for_epoch(8) == (-1, -1)
    assert MemoryPartitionLog().end_offset_for_epoch(0) == (-1, -1)


def test_assigning_an_epoch_drops_entries_that_would_break_monotonicity():
    log = MemoryPartitionLog()
    log.assign_epoch_start_offset(1, 0)
    log.assign_epoch_start_offset(3, 10)
    log.assign_epoch_start_offset(4, 10)  # epoch 3 never wrote anything
    assert log.epoch_entries() == [(1, 0), (4, 10)]
    log.assign_epoch_start_offset(2, 5)
    assert log.epoch_entries() == [(1, 0), (2, 5)]


def test_assigning_the_latest_epoch_again_at_a_later_offset_changes_nothing():
    log = MemoryPartitionLog()
    log.assign_epoch_start_offset(1, 0)
    log.assign_epoch_start_offset(1, 7)
    assert log.epoch_entries() == [(1, 0)]


def test_truncation_drops_the_tail_its_epochs_and_lowers_the_hw_to_the_new_end():
    log = chapter_log()
    log.maybe_increment_high_watermark(135)
    assert log.truncate_to(130)
    assert (log.log_end_offset, log.high_watermark, log.epoch_entries()) == (130, 130, [(5, 100)])
    assert not log.truncate_to(130)


def test_truncation_at_the_end_still_drops_an_epoch_that_wrote_nothing():
    log = chapter_log()
    log.assign_epoch_start_offset(9, 140)  # a leader elected, then deposed before writing
    assert not log.truncate_to(140)
    assert log.epoch_entries() == [(5, 100), (7, 130)]


def test_truncating_below_the_log_start_restarts_the_log_there():
    log = chapter_log()
    log.truncate_to(50)
    assert (log.log_start_offset, log.log_end_offset, log.epoch_entries()) == (50, 50, [])


def test_truncate_fully_and_start_at_empties_the_log_and_its_epoch_cache():
    log = chapter_log()
    log.truncate_fully_and_start_at(500)
    assert (log.log_start_offset, log.high_watermark, log.log_end_offset) == (500, 500, 500)
    assert log.latest_epoch == -1 and log.read(500) == ()


def test_high_watermark_is_monotonic_and_never_past_the_log_end_offset():
    log = chapter_log()
    assert log.maybe_increment_high_watermark(120)
    assert not log.maybe_increment_high_watermark(110)
    assert log.maybe_increment_high_watermark(10_000)
    assert log.high_watermark == 140


def test_log_start_offset_never_passes_the_high_watermark():
    log = chapter_log()
    log.maybe_increment_high_watermark(120)
    with pytest.raises(OffsetOutOfRange):
        log.maybe_increment_log_start_offset(121)
    assert log.log_start_offset == 100


def test_raising_the_log_start_offset_moves_the_first_epoch_entry_with_it():
    log = chapter_log()
    log.maybe_increment_high_watermark(140)
    assert log.maybe_increment_log_start_offset(135)
    assert log.epoch_entries() == [(7, 135)]
    assert log.read(135, max_entries=1)[0][:2] == (135, 7)
    assert not log.maybe_increment_log_start_offset(120)


def test_follower_appends_keep_the_leaders_offsets_and_epochs():
    leader, follower = chapter_log(), MemoryPartitionLog(log_start_offset=100)
    follower.append_as_follower(leader.read(100, max_entries=35), 0)
    assert follower.epoch_entries() == [(5, 100), (7, 130)]
    assert follower.read(100) == leader.read(100, max_offset=135)


def test_follower_append_must_start_at_the_log_end_offset():
    follower = MemoryPartitionLog()
    with pytest.raises(UnexpectedAppendOffset) as e:
        follower.append_as_follower([(3, 1, "x"), (4, 1, "y")], 0)
    assert (e.value.first_offset, e.value.last_offset) == (3, 4)


def test_reads_outside_the_log_are_out_of_range():
    log = chapter_log()
    with pytest.raises(OffsetOutOfRange):
        log.read(99)
    with pytest.raises(OffsetOutOfRange):
        log.read(141)
    assert log.read(140) == ()


def test_a_crash_loses_unflushed_records_and_restarts_from_the_checkpointed_hw():
    log = chapter_log()
    log.maybe_increment_high_watermark(125)
    log.checkpoint_high_watermark()
    log.maybe_increment_high_watermark(133)
    log.flush(128)
    log.crash()
    assert (log.log_end_offset, log.high_watermark, log.epoch_entries()) == (128, 125, [(5, 100)])
