"""Epoch-based truncation (KIP-101, KIP-279) and offset-out-of-range recovery, alone and against a
leader Partition over several fetch rounds."""
from replication import errors
from replication.follower import (
    PartitionFetchState,
    handle_diverging_epoch,
    handle_offset_out_of_range,
    handle_records,
    initial_fetch_state,
    truncation_offset,
)
from replication.log import MemoryPartitionLog
from replication.partition import Partition
from tests.replication.partition_scenario import LAG, T0, Brokers, log_of, registration


def test_diverging_epoch_truncates_exactly_uncommitted_tail():
    # Leader: epoch 5 from 100, epoch 7 from 130. Follower: epoch 5 up to offset 142.
    follower = log_of((5, 43), start=100)
    state = initial_fetch_state(follower, 7)
    assert state == PartitionFetchState(143, 5, 7)
    state = handle_diverging_epoch(follower, state, 5, 130)
    assert (follower.log_end_offset, state.fetch_offset, state.last_fetched_epoch) == (130, 130, 5)
    assert follower.read(129)[0][:2] == (129, 5)


def test_truncation_takes_several_rounds_when_the_leader_epoch_is_unknown_to_the_follower():
    leader = log_of((1, 12), (2, 3), (4, 10), (6, 5))            # epochs 1@0 2@12 4@15 6@25
    follower = log_of((1, 10), (3, 10), (5, 10))                 # epochs 1@0 3@10 5@20, LEO 30
    state = initial_fetch_state(follower, 6)
    rounds = 0
    while True:
        epoch, end = leader.end_offset_for_epoch(state.last_fetched_epoch)
        if not (epoch < state.last_fetched_epoch or end < state.fetch_offset):
            break
        state = handle_diverging_epoch(follower, state, epoch, end)
        rounds += 1
    assert rounds == 2                                          # 30 -> 20 -> 10
    assert (state.fetch_offset, follower.epoch_entries()) == (10, [(1, 0)])
    state, _ = handle_records(follower, state, leader.read(10), 0, 0, 0)
    assert follower.read(0) == leader.read(0)


def test_intermediate_truncation_is_not_complete():
    follower = log_of((1, 10), (3, 10))
    assert truncation_offset(follower, 2, 15) == (10, False)   # end of epoch 1, ask again
    assert truncation_offset(follower, 1, 8) == (8, True)
    assert truncation_offset(follower, 3, 40) == (20, True)    # never past our own LEO


def test_offsets_for_leader_epoch_answer_uses_the_same_truncation_rule():
    follower = log_of((5, 43), start=100)
    state = PartitionFetchState(143, 5, 7)
    assert handle_diverging_epoch(follower, state, 5, 130).fetch_offset == 130


def test_undefined_end_offset_truncates_to_the_fetch_offset():
    follower = log_of((1, 10))
    follower.maybe_increment_high_watermark(6)
    assert truncation_offset(follower, -1, -1) == (6, True)
    assert truncation_offset(follower, 3, -1, fetch_offset=8) == (8, True)


def test_undefined_epoch_truncates_to_the_leaders_end_offset():
    assert truncation_offset(log_of((1, 10)), -1, 7) == (7, True)
    assert truncation_offset(log_of((1, 10)), -1, 70) == (10, True)


def test_leader_epoch_older_than_every_follower_epoch_truncates_to_the_follower_log_start():
    # Our log holds nothing of epoch 2 (it starts in epoch 4): nothing of it can be trusted.
    follower = log_of((4, 10), start=20)
    assert truncation_offset(follower, 2, 25) == (20, True)


def test_follower_without_epoch_information_truncates_to_the_leaders_offset():
    follower = MemoryPartitionLog()
    follower.entries.extend((i, -1, "old") for i in range(10))
    follower.log_end_offset = 10
    assert truncation_offset(follower, 2, 7) == (7, True)
    assert truncation_offset(follower, 2, 70) == (10, True)


def test_offset_out_of_range_with_a_shorter_leader_truncates_to_the_leaders_end():
    follower = log_of((1, 20))
    state = handle_offset_out_of_range(follower, PartitionFetchState(20, 1, 3), 0, 12)
    assert (state.fetch_offset, follower.log_end_offset, state.last_fetched_epoch) == (12, 12, 1)


def test_offset_out_of_range_past_the_follower_truncates_fully_and_starts_at_the_leaders_log_start():
    follower = log_of((1, 20))
    state = handle_offset_out_of_range(follower, PartitionFetchState(20, 1, 3), 50, 80)
    assert (follower.log_start_offset, follower.log_end_offset, follower.latest_epoch) == (50, 50, -1)
    assert (state.fetch_offset, state.last_fetched_epoch) == (50, -1)


def test_offset_out_of_range_otherwise_keeps_the_log_and_fetches_from_its_end():
    follower = log_of((1, 20))
    state = handle_offset_out_of_range(follower, PartitionFetchState(20, 1, 3), 10, 80)
    assert (follower.log_start_offset, follower.log_end_offset, state.fetch_offset) == (0, 20, 20)


# -- against a leader Partition ----------------------------------------------------------------------

class Replica:
    """One broker's partition plus, when following, its fetch state."""

    def __init__(self, broker_id: int, brokers: Brokers) -> None:
        self.partition = Partition("t", 0, broker_id, MemoryPartitionLog(), brokers, LAG, 1)
        self.state: PartitionFetchState | None = None

    @property
    def log(self) -> MemoryPartitionLog:
        return self.partition.log


def fetch_round(leader: Partition, follower: Replica, now: int):
    """One Fetch served by ``leader`` and applied by ``follower``, the way the edge does it."""
    state = follower.state
    check = leader.check_follower_fetch(follower.partition.local_broker_id, state.current_leader_epoch,
                                        state.fetch_offset, state.last_fetched_epoch)
    if check.diverging_epoch is not None:
        follower.state = handle_diverging_epoch(follower.log, state, *check.diverging_epoch)
        return None
    if check.error == errors.OFFSET_OUT_OF_RANGE:
        follower.state = handle_offset_out_of_range(follower.log, state, leader.log.log_start_offset,
                                                    leader.log.log_end_offset)
        return None
    assert check.error == errors.NONE, check
    leader_end = leader.log.log_end_offset
    records = leader.log.read(state.fetch_offset)
    outcome = leader.update_follower_fetch_state(follower.partition.local_broker_id, -1, state.fetch_offset,
                                                 follower.log.log_start_offset, leader_end, now)
    follower.state, _ = handle_records(follower.log, state, records, leader.log.high_watermark,
                                       leader.log.log_start_offset, now)
    return outcome


def become_follower(r: Replica, reg, now: int) -> None:
    if r.partition.make_follower(reg, now).leader_epoch_changed:
        r.state = initial_fetch_state(r.log, reg.leader_epoch)


def test_returning_leader_truncates_exactly_its_unreplicated_tail():
    brokers = Brokers(1, 2)
    one, two = Replica(1, brokers), Replica(2, brokers)
    reg = registration(replicas=(1, 2), leader=1, leader_epoch=1, partition_epoch=1)
    one.partition.make_leader(reg, T0)
    become_follower(two, reg, T0)
    one.partition.append_records_to_leader(["a", "b", "c"], -1, T0)
    fetch_round(one.partition, two, T0)
    fetch_round(one.partition, two, T0)                     # the follower learns HW 3
    assert (one.log.high_watermark, two.log.high_watermark) == (3, 3)
    one.partition.append_records_to_leader(["lost-1", "lost-2"], -1, T0)   # never replicated
    reg2 = registration(replicas=(1, 2), isr=(2,), leader=2, leader_epoch=2, partition_epoch=2)
    two.partition.make_leader(reg2, T0 + 1)
    two.partition.append_records_to_leader(["d"], -1, T0 + 1)
    become_follower(one, reg2, T0 + 1)
    assert one.state == PartitionFetchState(5, 1, 2)
    fetch_round(two.partition, one, T0 + 2)                 # diverging epoch (1, 3)
    assert one.log.log_end_offset == 3
    fetch_round(two.partition, one, T0 + 3)
    assert [v for _, _, v in one.log.read(0)] == ["a", "b", "c", "d"]
    assert one.log.read(0) == two.log.read(0) and one.log.epoch_entries() == [(1, 0), (2, 3)]


def test_follower_that_lost_its_disk_re_replicates_from_the_leaders_log_start():
    brokers = Brokers(1, 2)
    one, two = Replica(1, brokers), Replica(2, brokers)
    reg = registration(replicas=(1, 2), isr=(1,), leader=1)
    one.partition.make_leader(reg, T0)
    one.partition.append_records_to_leader(range(10), 1, T0)
    one.log.maybe_increment_log_start_offset(4)
    become_follower(two, reg, T0)
    assert two.state.fetch_offset == 0
    fetch_round(one.partition, two, T0)                     # 0 < leader start 4: out of range
    assert (two.state.fetch_offset, two.log.log_start_offset) == (4, 4)
    assert fetch_round(one.partition, two, T0).alter_partition is None   # recorded at 4, below the HW
    assert two.log.read(4) == one.log.read(4)
    assert fetch_round(one.partition, two, T0).alter_partition.isr == (1, 2)
    assert one.partition.partition_state.maximal_isr == {1, 2}
