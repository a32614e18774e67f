"""The leader's rules: becoming leader, the high watermark, ISR expansion and shrink, acks=all,
and the checks on a follower's Fetch."""
import pytest

from replication import errors
from replication.errors import NotEnoughReplicas, NotLeaderOrFollower, StaleBrokerEpoch
from replication.isr import PendingExpandIsr, PendingShrinkIsr
from replication.log import MemoryPartitionLog
from replication.partition import Partition
from tests.replication.partition_scenario import (
    LAG,
    LEADER,
    T0,
    Brokers,
    caught_up,
    commit,
    fetch,
    leader,
    produce,
    registration,
)


def log_with(n: int, epoch: int, hw: int = 0) -> MemoryPartitionLog:
    log = MemoryPartitionLog()
    log.append_as_leader(range(n), epoch, 0)
    log.maybe_increment_high_watermark(hw)
    return log


# -- becoming leader ---------------------------------------------------------------------------------

def test_new_leader_epoch_caches_its_start_offset_at_the_log_end_offset():
    p = leader(log=log_with(10, 1, hw=4), leader_epoch=3)
    assert p.leader_epoch_start_offset == 10
    assert p.log.epoch_entries() == [(1, 0), (3, 10)]
    assert p.is_leader and p.leader_epoch == 3


def test_leader_epoch_start_offset_lets_a_follower_from_a_later_epoch_truncate():
    # Successive elections: the follower wrote in epoch 4, which this leader never saw.
    p = leader(log=log_with(10, 1), leader_epoch=5)
    check = p.check_follower_fetch(2, 5, fetch_offset=14, last_fetched_epoch=4)
    assert check.diverging_epoch == (1, 10)


def test_same_leader_epoch_with_newer_partition_epoch_keeps_epoch_start_and_replica_states():
    p = leader()
    produce(p, 5)
    fetch(p, 2, 5, T0 + 1)
    before = p.remote_replicas[2].state
    out = p.make_leader(registration(isr=(1, 2), partition_epoch=2), T0 + 2)
    assert not out.leader_epoch_changed
    assert p.leader_epoch_start_offset == 0 and p.log.epoch_entries() == [(1, 0)]
    assert p.remote_replicas[2].state == before
    assert p.partition_state.isr == {1, 2} and p.partition_epoch == 2


def test_stale_partition_epoch_is_ignored():
    p = leader(partition_epoch=5)
    out = p.make_leader(registration(isr=(1,), leader_epoch=2, partition_epoch=4), T0)
    assert out.leader_epoch_changed is False and out.alter_partition is None
    assert (p.leader_epoch, p.partition_epoch, p.partition_state.isr) == (1, 5, {1, 2, 3})
    out = p.make_follower(registration(leader=2, leader_epoch=2, partition_epoch=4), T0)
    assert not out.leader_epoch_changed and p.is_leader


def test_registration_at_our_own_partition_epoch_changes_nothing():
    # The AlterPartition answer may teach the epoch before the metadata carrying it arrives;
    # the same epoch is the same registration, and our (possibly pending) state stays.
    p = leader(partition_epoch=5)
    before = p.partition_state
    p.make_leader(registration(isr=(1, 2, 3), partition_epoch=5), T0)
    assert p.partition_state is before and p.partition_epoch == 5


def test_new_leader_epoch_resets_replica_states():
    p = leader()
    produce(p, 5)
    fetch(p, 2, 5, T0 + 1)
    p.make_follower(registration(leader=2, leader_epoch=2, partition_epoch=2), T0 + 2)
    p.make_leader(registration(isr=(1, 2), leader_epoch=3, partition_epoch=3), T0 + 3)
    assert p.remote_replicas[2].state.log_end_offset == -1       # learned anew from fetches
    assert p.remote_replicas[2].state.last_caught_up_time_ms == T0 + 3
    assert p.remote_replicas[3].state.last_caught_up_time_ms == 0  # not in the ISR


def test_remote_replicas_follow_the_assignment():
    p = leader(replicas=(1, 2, 3))
    p.make_leader(registration(replicas=(1, 3, 4), isr=(1, 3), partition_epoch=2), T0)
    assert set(p.remote_replicas) == {3, 4}
    assert p.assignment == (1, 3, 4)


def test_leader_alone_in_the_isr_advances_the_hw_on_becoming_leader():
    out = Partition("t", 0, LEADER, log_with(10, 1), Brokers(1, 2), LAG).make_leader(
        registration(replicas=(1, 2), isr=(1,)), T0)
    assert out.hw_advanced


def test_make_follower_reports_a_leader_epoch_change_only_when_it_grows():
    p = leader()
    assert p.make_follower(registration(leader=2, leader_epoch=2, partition_epoch=2), T0).leader_epoch_changed
    out = p.make_follower(registration(leader=2, leader_epoch=2, partition_epoch=3), T0)
    assert not out.leader_epoch_changed


def test_follower_tracks_no_isr_and_no_remote_replicas():
    p = leader()
    p.make_follower(registration(leader=2, leader_epoch=2, partition_epoch=2), T0)
    assert not p.is_leader and p.leader_id == 2
    assert p.partition_state.isr == frozenset() and p.remote_replicas == {}
    assert p.leader_epoch_start_offset is None and not p.is_under_min_isr


# -- high watermark ---------------------------------------------------------------------------------

def test_hw_is_the_min_leo_over_the_isr():
    p = leader()
    produce(p, 105)
    fetch(p, 2, 104, T0 + 1)
    fetch(p, 3, 102, T0 + 1)
    assert p.log.high_watermark == 102
    fetch(p, 3, 105, T0 + 2)
    assert p.log.high_watermark == 104
    assert fetch(p, 2, 105, T0 + 3).hw_advanced
    assert p.log.high_watermark == 105


def test_hw_never_decreases():
    p = leader(replicas=(1, 2))
    produce(p, 10)
    fetch(p, 2, 10, T0 + 1)
    fetch(p, 2, 4, T0 + 2)  # a reordered, older fetch
    assert p.log.high_watermark == 10


def test_hw_does_not_advance_under_min_isr():
    p = leader(isr=(1,), min_isr=2)
    _, out = produce(p, 10)
    assert p.is_under_min_isr and not out.hw_advanced and p.log.high_watermark == 0
    assert not p.maybe_increment_leader_hw(T0 + 1)


def test_effective_min_isr_is_capped_by_the_replication_factor():
    p = leader(replicas=(1, 2), min_isr=5)
    assert p.effective_min_isr == 2 and not p.is_under_min_isr
    caught_up(p, [2], T0)
    produce(p, 3, acks=-1)
    fetch(p, 2, 3, T0 + 1)
    assert p.log.high_watermark == 3


def test_lowering_min_isr_lets_the_hw_advance_at_once():
    p = leader(isr=(1,), min_isr=2)
    produce(p, 10)
    assert p.set_min_insync_replicas(1, T0 + 1).hw_advanced
    assert p.log.high_watermark == 10


def test_pending_shrink_does_not_advance_hw_past_removed_replica():
    p = leader()
    produce(p, 10)
    fetch(p, 2, 10, T0 + 1)
    fetch(p, 3, 5, T0 + 1)                       # replica 3 stalls at 5
    later = T0 + LAG + 100
    fetch(p, 2, 10, later)
    sent = p.maybe_shrink_isr(later).alter_partition
    assert sent.isr == (1, 2) and isinstance(p.partition_state, PendingShrinkIsr)
    produce(p, 10, now=later)
    fetch(p, 2, 20, later + 1)
    assert p.log.high_watermark == 5             # 3 is still in the maximal ISR
    assert commit(p, sent, later + 2).hw_advanced
    assert p.log.high_watermark == 20


def test_pending_expand_holds_the_hw_for_the_new_replica():
    p = leader(isr=(1, 2))
    produce(p, 10)
    fetch(p, 2, 10, T0 + 1)
    assert fetch(p, 3, 10, T0 + 1).alter_partition is not None
    produce(p, 5, now=T0 + 2)
    fetch(p, 2, 15, T0 + 3)
    assert p.partition_state.maximal_isr == {1, 2, 3}
    assert p.log.high_watermark == 10


def test_rejected_expansion_never_advanced_hw():
    p = leader(isr=(1, 2))
    produce(p, 10)
    fetch(p, 2, 10, T0 + 1)
    sent = fetch(p, 3, 10, T0 + 1).alter_partition
    produce(p, 5, now=T0 + 2)
    fetch(p, 2, 15, T0 + 3)
    assert p.log.high_watermark == 10            # never past replica 3 while it was counted
    p.brokers.set(3, fenced=True)                # why the controller says no
    p.handle_alter_partition_response(sent, errors.INELIGIBLE_REPLICA, None, T0 + 4)
    assert p.partition_state.isr == {1, 2} and not p.partition_state.is_inflight
    assert p.maybe_increment_leader_hw(T0 + 5) and p.log.high_watermark == 15


def test_caught_up_eligible_replica_outside_the_isr_holds_the_hw_back():
    p = leader(isr=(1,))
    sent = fetch(p, 3, 0, T0).alter_partition    # 3 joins: in flight
    fetch(p, 2, 0, T0)                           # 2 is caught up but cannot be proposed yet
    produce(p, 10, now=T0 + 1)
    fetch(p, 3, 10, T0 + 2)
    assert sent is not None and 2 not in p.partition_state.maximal_isr
    assert p.log.high_watermark == 0             # waits for 2, which may join at any moment
    produce(p, 1, now=T0 + LAG + 10)             # 2 no longer caught up
    assert p.log.high_watermark == 10


def test_caught_up_but_ineligible_replica_outside_the_isr_does_not_hold_the_hw():
    p = leader(isr=(1,))
    fetch(p, 3, 0, T0)
    fetch(p, 2, 0, T0)
    p.brokers.set(2, fenced=True)
    produce(p, 10, now=T0 + 1)
    fetch(p, 3, 10, T0 + 2)
    assert p.log.high_watermark == 10


# -- ISR expansion ----------------------------------------------------------------------------------

def test_follower_joins_isr_only_past_epoch_start_offset():
    p = leader(isr=(1, 2), log=log_with(10, 1, hw=5), leader_epoch=2)
    assert p.leader_epoch_start_offset == 10
    assert fetch(p, 3, 7, T0 + 1, last_fetched_epoch=1).alter_partition is None   # >= HW, < epoch start
    sent = fetch(p, 3, 10, T0 + 2, last_fetched_epoch=1).alter_partition
    assert sent is not None and sent.isr == (1, 2, 3)


def test_follower_joins_isr_only_at_or_past_hw():
    p = leader(isr=(1, 2))
    produce(p, 10)
    fetch(p, 2, 10, T0 + 1)
    assert fetch(p, 3, 8, T0 + 1).alter_partition is None
    assert fetch(p, 3, 10, T0 + 2).alter_partition is not None


def test_expansion_proposes_the_isr_with_each_members_broker_epoch():
    brokers = Brokers(1, 2, 3)
    p = leader(isr=(1, 2), brokers=brokers)
    fetch(p, 2, 0, T0)
    sent = fetch(p, 3, 0, T0).alter_partition
    assert sent.isr_with_epochs == ((1, brokers.epoch(1)), (2, brokers.epoch(2)), (3, brokers.epoch(3)))
    assert (sent.leader, sent.leader_epoch, sent.partition_epoch) == (1, 1, 1)
    assert isinstance(p.partition_state, PendingExpandIsr)


def test_isr_member_that_has_not_fetched_is_proposed_with_unknown_broker_epoch():
    p = leader(isr=(1, 2))
    sent = fetch(p, 3, 0, T0).alter_partition
    assert dict(sent.isr_with_epochs)[2] == -1


@pytest.mark.parametrize("change", [{"fenced": True}, {"in_controlled_shutdown": True}],
                         ids=["fenced", "controlled_shutdown"])
def test_ineligible_broker_does_not_join_isr(change):
    p = leader(isr=(1, 2))
    p.brokers.set(3, **change)
    assert fetch(p, 3, 0, T0).alter_partition is None


def test_broker_epoch_other_than_the_registered_one_does_not_join_isr():
    # The broker restarted; its new registration is not in our metadata image yet.
    p = leader(isr=(1, 2))
    assert fetch(p, 3, 0, T0, broker_epoch=p.brokers.epoch(3) + 1).alter_partition is None


def test_fetch_without_broker_epoch_may_join_isr():
    p = leader(isr=(1, 2))
    sent = fetch(p, 3, 0, T0, broker_epoch=-1).alter_partition
    assert dict(sent.isr_with_epochs)[3] == -1


def test_unregistered_broker_does_not_join_isr():
    p = leader(isr=(1, 2))
    del p.brokers.by_id[3]
    assert fetch(p, 3, 0, T0, broker_epoch=7).alter_partition is None


def test_stale_broker_epoch_fetch_is_fenced():
    p = leader()
    produce(p, 5)
    with pytest.raises(StaleBrokerEpoch):
        p.update_follower_fetch_state(2, p.brokers.epoch(2) - 1, 5, 0, 5, T0 + 1)
    assert p.remote_replicas[2].state.log_end_offset == -1 and p.log.high_watermark == 0


def test_only_one_alter_partition_in_flight():
    p = leader(replicas=(1, 2, 3, 4), isr=(1, 2))
    fetch(p, 2, 0, T0)
    assert fetch(p, 3, 0, T0).alter_partition is not None
    assert fetch(p, 4, 0, T0).alter_partition is None          # in flight: no second expansion
    assert p.maybe_shrink_isr(T0 + 10 * LAG).alter_partition is None   # nor a shrink
    assert p.partition_state.maximal_isr == {1, 2, 3}


# -- ISR shrink -------------------------------------------------------------------------------------

def test_stuck_follower_leaves_the_isr_after_replica_lag_time():
    p = leader()
    produce(p, 10)
    caught_up(p, [2, 3], T0 + 1)
    produce(p, 1, now=T0 + 2)
    fetch(p, 2, 11, T0 + 3)
    assert p.maybe_shrink_isr(T0 + 1 + LAG).alter_partition is None
    fetch(p, 2, 11, T0 + 2 + LAG)
    sent = p.maybe_shrink_isr(T0 + 2 + LAG).alter_partition
    assert sent.isr == (1, 2)
    assert p.partition_state.outgoing_replica_ids == {3}


def test_slow_follower_leaves_the_isr_although_it_keeps_fetching():
    p = leader(replicas=(1, 2))
    now, offset = T0, 0
    for _ in range(40):                          # always half of the leader's new records behind
        produce(p, 10, now=now)
        offset += 5
        fetch(p, 2, offset, now)
        now += 1000
    assert p.maybe_shrink_isr(now).alter_partition.isr == (1,)


def test_two_tier_caught_up_rule_keeps_trailing_follower_in_sync():
    p = leader(replicas=(1, 2))
    now, leader_end_at_last_fetch = T0, 0
    for _ in range(100):                         # a busy leader: each fetch reaches only the previous end
        fetch(p, 2, leader_end_at_last_fetch, now)
        leader_end_at_last_fetch = p.log.log_end_offset
        produce(p, 3, now=now + 1)
        now += 1000
    assert now - T0 > 3 * LAG
    assert p.out_of_sync_replicas(now) == frozenset()
    assert p.maybe_shrink_isr(now).alter_partition is None


def test_new_leader_gives_isr_followers_a_full_lag_time():
    p = leader()
    assert p.maybe_shrink_isr(T0 + LAG).alter_partition is None
    assert p.maybe_shrink_isr(T0 + LAG + 1).alter_partition.isr == (1,)


def test_follower_at_the_leader_log_end_offset_never_leaves_the_isr():
    p = leader(replicas=(1, 2))
    produce(p, 3)
    fetch(p, 2, 3, T0)
    assert p.maybe_shrink_isr(T0 + 100 * LAG).alter_partition is None


def test_shrink_is_only_for_leaders():
    p = leader()
    p.make_follower(registration(leader=2, leader_epoch=2, partition_epoch=2), T0)
    assert p.maybe_shrink_isr(T0 + 10 * LAG).alter_partition is None


# -- acks=all ---------------------------------------------------------------------------------------

def test_acks_all_is_refused_before_writing_under_min_isr():
    p = leader(isr=(1,), min_isr=2)
    assert p.check_append(-1) == errors.NOT_ENOUGH_REPLICAS
    with pytest.raises(NotEnoughReplicas):
        produce(p, 3, acks=-1)
    assert p.log.log_end_offset == 0


def test_acks_one_is_written_under_min_isr():
    p = leader(isr=(1,), min_isr=2)
    assert p.check_append(1) == errors.NONE
    info, _ = produce(p, 3, acks=1)
    assert (info.first_offset, info.last_offset) == (0, 2)


def test_acks_all_counts_the_committed_isr_not_the_maximal_isr():
    p = leader(replicas=(1, 2), isr=(1,), min_isr=2)
    sent = fetch(p, 2, 0, T0).alter_partition
    assert p.partition_state.maximal_isr == {1, 2}
    assert p.check_append(-1) == errors.NOT_ENOUGH_REPLICAS
    commit(p, sent)
    assert p.check_append(-1) == errors.NONE


def test_acks_all_completes_when_the_hw_reaches_the_required_offset():
    p = leader(replicas=(1, 2), min_isr=2)
    info, _ = produce(p, 4, acks=-1)
    required = info.last_offset + 1
    assert p.check_enough_replicas_reach_offset(required) == (False, errors.NONE)
    assert fetch(p, 2, required, T0 + 1).hw_advanced
    assert p.check_enough_replicas_reach_offset(required) == (True, errors.NONE)


def test_acks_all_completed_after_the_isr_fell_under_min_isr_is_not_enough_replicas_after_append():
    p = leader(replicas=(1, 2), min_isr=2)
    info, _ = produce(p, 4, acks=-1)
    fetch(p, 2, 4, T0 + 1)
    p.make_leader(registration(replicas=(1, 2), isr=(1,), partition_epoch=2), T0 + 2)  # 2 fenced
    assert p.check_enough_replicas_reach_offset(4) == (True, errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND)


def test_appends_reach_only_the_leader():
    p = leader()
    p.make_follower(registration(leader=2, leader_epoch=2, partition_epoch=2), T0)
    assert p.check_append(1) == errors.NOT_LEADER_OR_FOLLOWER
    with pytest.raises(NotLeaderOrFollower):
        produce(p, 1)
    assert p.check_enough_replicas_reach_offset(0) == (False, errors.NOT_LEADER_OR_FOLLOWER)


# -- follower fetch checks --------------------------------------------------------------------------

def test_fetch_with_an_older_leader_epoch_is_fenced_and_a_newer_one_unknown():
    p = leader(leader_epoch=4)
    assert p.check_follower_fetch(2, 3, 0, -1).error == errors.FENCED_LEADER_EPOCH
    assert p.check_follower_fetch(2, 5, 0, -1).error == errors.UNKNOWN_LEADER_EPOCH
    assert p.check_follower_fetch(2, 4, 0, -1).error == errors.NONE


def test_fetch_from_a_replica_outside_the_assignment_is_retried():
    p = leader()
    assert p.check_follower_fetch(9, 1, 0, -1).error == errors.UNKNOWN_LEADER_EPOCH
    assert p.check_follower_fetch(9, -1, 0, -1).error == errors.NOT_LEADER_OR_FOLLOWER
    with pytest.raises(NotLeaderOrFollower):
        p.update_follower_fetch_state(9, 1, 0, 0, 0, T0)


def test_fetch_from_a_follower_partition_is_not_leader_or_follower():
    p = leader()
    p.make_follower(registration(leader=2, leader_epoch=2, partition_epoch=2), T0)
    assert p.check_follower_fetch(3, 2, 0, -1).error == errors.NOT_LEADER_OR_FOLLOWER


def test_diverging_epoch_is_answered_to_a_follower_ahead_in_an_old_epoch():
    log = MemoryPartitionLog(log_start_offset=100)
    log.append_as_leader(range(30), 5, 0)
    p = leader(log=log, leader_epoch=7)
    produce(p, 10)
    assert p.log.epoch_entries() == [(5, 100), (7, 130)]
    check = p.check_follower_fetch(2, 7, fetch_offset=143, last_fetched_epoch=5)
    assert check == type(check)(errors.NONE, (5, 130))
    assert p.check_follower_fetch(2, 7, fetch_offset=130, last_fetched_epoch=5).diverging_epoch is None


def test_fetch_past_the_log_end_offset_or_below_the_log_start_is_out_of_range():
    log = MemoryPartitionLog(log_start_offset=100)
    p = leader(log=log)
    produce(p, 10)
    assert p.check_follower_fetch(2, 1, 111, -1).error == errors.OFFSET_OUT_OF_RANGE
    assert p.check_follower_fetch(2, 1, 99, -1).error == errors.OFFSET_OUT_OF_RANGE
    assert p.check_follower_fetch(2, 1, 99, 1).error == errors.OFFSET_OUT_OF_RANGE  # even if it diverges
    assert p.check_follower_fetch(2, 1, 110, 1).error == errors.NONE


def test_fetch_with_an_epoch_the_leader_cannot_place_is_out_of_range():
    p = leader(leader_epoch=3)
    assert p.check_follower_fetch(2, 3, 0, 9).error == errors.OFFSET_OUT_OF_RANGE


def test_last_offset_for_leader_epoch_answers_the_end_of_the_epoch():
    p = leader(log=log_with(10, 1), leader_epoch=3)
    produce(p, 5)
    assert p.last_offset_for_leader_epoch(3, 1) == (errors.NONE, 1, 10)
    assert p.last_offset_for_leader_epoch(3, 2) == (errors.NONE, 1, 10)
    assert p.last_offset_for_leader_epoch(-1, 3) == (errors.NONE, 3, 15)
    assert p.last_offset_for_leader_epoch(3, 4) == (errors.NONE, -1, -1)


def test_last_offset_for_leader_epoch_checks_the_current_leader_epoch():
    p = leader(leader_epoch=3)
    assert p.last_offset_for_leader_epoch(2, 1)[0] == errors.FENCED_LEADER_EPOCH
    assert p.last_offset_for_leader_epoch(4, 1)[0] == errors.UNKNOWN_LEADER_EPOCH
    p.make_follower(registration(leader=2, leader_epoch=4, partition_epoch=2), T0)
    assert p.last_offset_for_leader_epoch(4, 1)[0] == errors.NOT_LEADER_OR_FOLLOWER
    assert p.last_offset_for_leader_epoch(4, 1, fetch_only_from_leader=False)[0] == errors.NONE


def test_offset_snapshot_is_served_by_the_leader_only():
    p = leader(replicas=(1, 2))
    produce(p, 4)
    fetch(p, 2, 3, T0)
    assert p.fetch_offset_snapshot(1) == (errors.NONE, type(p.fetch_offset_snapshot()[1])(0, 3, 4))
    p.make_follower(registration(replicas=(1, 2), leader=2, leader_epoch=2, partition_epoch=2), T0)
    assert p.fetch_offset_snapshot(2) == (errors.NOT_LEADER_OR_FOLLOWER, None)
