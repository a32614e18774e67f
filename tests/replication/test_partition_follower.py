"""The follower's fetch state: where it starts, and what applying the leader's records does."""
import pytest

from replication.follower import (
    PartitionFetchState,
    handle_records,
    initial_fetch_offset,
    initial_fetch_state,
)
from replication.log import MemoryPartitionLog
from tests.replication.partition_scenario import log_of as leader_log


def follower_copy(leader: MemoryPartitionLog, upto: int, hw: int = 0) -> MemoryPartitionLog:
    log = MemoryPartitionLog(log_start_offset=leader.log_start_offset)
    log.append_as_follower(leader.read(leader.log_start_offset, max_offset=upto), 0)
    log.maybe_increment_high_watermark(hw)
    return log


def test_follower_with_epochs_fetches_from_its_log_end_offset_with_its_latest_epoch():
    log = follower_copy(leader_log((1, 5), (3, 5)), 8, hw=2)
    assert initial_fetch_state(log, 4) == PartitionFetchState(8, 3, 4)
    assert initial_fetch_offset(log) == 8 and log.log_end_offset == 8


def test_follower_without_epochs_truncates_to_its_hw_and_fetches_from_there():
    log = MemoryPartitionLog()
    log.entries.extend((i, -1, "old") for i in range(6))   # records written before leader epochs
    log.log_end_offset = 6
    log.maybe_increment_high_watermark(4)
    assert initial_fetch_offset(log) == 4
    assert initial_fetch_state(log, 2) == PartitionFetchState(4, -1, 2)
    assert log.log_end_offset == 4


def test_records_move_the_follower_hw_to_the_leader_hw_capped_by_its_log_end_offset():
    leader = leader_log((1, 10))
    log = MemoryPartitionLog()
    state = initial_fetch_state(log, 1)
    state, info = handle_records(log, state, leader.read(0, max_entries=6), 8, 0, 0)
    assert (state.fetch_offset, state.last_fetched_epoch, log.high_watermark) == (6, 1, 6)
    state, _ = handle_records(log, state, leader.read(6), 8, 0, 0)
    assert log.high_watermark == 8
    assert (info.first_offset, info.last_offset) == (0, 5)


def test_follower_hw_never_moves_back():
    leader = leader_log((1, 10))
    log = follower_copy(leader, 10, hw=9)
    handle_records(log, initial_fetch_state(log, 2), (), 3, 0, 0)   # a new leader with a lagging HW
    assert log.high_watermark == 9


def test_records_carry_the_leaders_epochs_into_the_follower_epoch_cache():
    leader = leader_log((1, 3), (4, 3), (6, 2))
    log = MemoryPartitionLog()
    state, _ = handle_records(log, initial_fetch_state(log, 6), leader.read(0), 0, 0, 0)
    assert log.epoch_entries() == leader.epoch_entries() == [(1, 0), (4, 3), (6, 6)]
    assert state.last_fetched_epoch == 6


def test_empty_records_keep_the_last_fetched_epoch():
    log = follower_copy(leader_log((2, 4)), 4)
    state = PartitionFetchState(4, 2, 3)
    new_state, _ = handle_records(log, state, (), 4, 0, 0)
    assert new_state == state and log.high_watermark == 4


def test_follower_log_start_follows_the_leaders_once_within_its_hw():
    leader = leader_log((1, 10))
    log = follower_copy(leader, 10, hw=4)
    state = initial_fetch_state(log, 1)
    handle_records(log, state, (), 4, 6, 0)
    assert log.log_start_offset == 0                 # 6 is past our HW of 4
    handle_records(log, state, (), 10, 6, 0)
    assert log.log_start_offset == 6 and log.epoch_entries() == [(1, 6)]


def test_first_batch_straddling_the_leaders_log_start_restarts_the_follower_log():
    # The leader deleted records up to 5 mid-batch; a new follower at offset 5 gets the batch from 3.
    log = MemoryPartitionLog(log_start_offset=5)
    batch = ((3, 1, "a"), (4, 1, "b"), (5, 1, "c"), (6, 1, "d"))
    state, _ = handle_records(log, PartitionFetchState(5, -1, 1), batch, 7, 5, 0)
    assert (log.log_end_offset, state.fetch_offset, log.epoch_entries()) == (7, 7, [(1, 5)])
    assert log.log_start_offset == 5 and log.read(5) == batch[2:]    # then follows the leader's start


def test_records_must_be_applied_at_the_log_end_offset():
    log = follower_copy(leader_log((1, 4)), 4)
    with pytest.raises(ValueError):
        handle_records(log, PartitionFetchState(3, 1, 1), ((3, 1, "x"),), 4, 0, 0)
