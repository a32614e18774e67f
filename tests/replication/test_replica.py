"""ReplicaState and Replica: the two-tier caught-up rule, broker-epoch fencing, resets."""
import pytest

from replication.errors import NOT_LEADER_OR_FOLLOWER, StaleBrokerEpoch
from replication.replica import Replica, ReplicaState

T0 = 1_000_000
LAG = 30_000


def fetched(*fetches, broker_epoch=5):
    """A replica after fetches of (fetch offset, leader LEO at read, time)."""
    replica = Replica(2)
    for offset, leader_end, now in fetches:
        replica.update_fetch_state(offset, 0, now, leader_end, broker_epoch, 5)
    return replica


def test_fetch_at_the_leader_log_end_offset_is_caught_up_now():
    replica = fetched((10, 10, T0))
    assert replica.state.last_caught_up_time_ms == T0
    assert replica.state.log_end_offset == 10
    assert replica.state.last_fetch_leader_log_end_offset == 10


def test_two_tier_caught_up_rule_keeps_trailing_follower_in_sync():
    # Each fetch reaches what the leader had at the previous fetch, never the current end.
    replica = fetched((10, 10, T0), (12, 15, T0 + 100), (15, 18, T0 + 200), (18, 22, T0 + 300))
    assert replica.state.last_caught_up_time_ms == T0 + 200
    assert replica.state.is_caught_up(22, T0 + 200 + LAG, LAG)


def test_fetch_short_of_both_leader_ends_leaves_caught_up_time():
    replica = fetched((10, 10, T0), (11, 20, T0 + 100), (12, 30, T0 + 200))
    assert replica.state.last_caught_up_time_ms == T0
    assert not replica.state.is_caught_up(30, T0 + LAG + 1, LAG)


def test_last_caught_up_time_never_decreases():
    replica = fetched((10, 10, T0 + 500))
    replica.update_fetch_state(10, 0, T0 + 100, 10, 5, 5)  # a late, reordered fetch
    assert replica.state.last_caught_up_time_ms == T0 + 500


def test_replica_at_the_leader_log_end_offset_is_caught_up_however_long_ago():
    state = ReplicaState(log_end_offset=10, last_caught_up_time_ms=0)
    assert state.is_caught_up(10, T0 * 10, LAG)
    assert not state.is_caught_up(11, T0 * 10, LAG)


def test_caught_up_expires_after_replica_lag_time_max_ms():
    state = ReplicaState(log_end_offset=5, last_caught_up_time_ms=T0)
    assert state.is_caught_up(10, T0 + LAG, LAG)
    assert not state.is_caught_up(10, T0 + LAG + 1, LAG)


def test_fetch_with_stale_broker_epoch_is_fenced_and_changes_nothing():
    replica = fetched((10, 10, T0))
    before = replica.state
    with pytest.raises(StaleBrokerEpoch) as e:
        replica.update_fetch_state(20, 0, T0 + 1, 20, 4, 5)
    assert replica.state == before
    assert e.value.code == NOT_LEADER_OR_FOLLOWER


def test_fetch_without_broker_epoch_bypasses_fencing():
    replica = Replica(2)
    replica.update_fetch_state(3, 0, T0, 3, -1, 5)
    assert replica.state.broker_epoch == -1
    assert replica.state.log_end_offset == 3


def test_fetch_with_newer_or_unregistered_broker_epoch_is_recorded():
    replica = Replica(2)
    replica.update_fetch_state(3, 0, T0, 3, 6, 5)
    assert replica.state.broker_epoch == 6
    replica.update_fetch_state(4, 0, T0, 4, 7, None)
    assert replica.state.broker_epoch == 7


def test_reset_by_a_new_leader_forgets_offsets_and_counts_isr_members_caught_up_now():
    replica = fetched((10, 10, T0))
    replica.reset(T0 + 50, 40, is_new_leader=True, is_follower_in_sync=True)
    assert replica.state == ReplicaState(last_caught_up_time_ms=T0 + 50)


def test_reset_by_a_new_leader_marks_non_isr_followers_never_caught_up():
    replica = fetched((10, 10, T0))
    replica.reset(T0 + 50, 40, is_new_leader=True, is_follower_in_sync=False)
    assert replica.state.last_caught_up_time_ms == 0
    assert replica.state.broker_epoch is None


def test_reset_by_a_reelected_leader_keeps_offsets_but_not_the_fetch_time_of_non_isr_followers():
    replica = fetched((10, 10, T0))
    replica.reset(T0 + 50, 40, is_new_leader=False, is_follower_in_sync=False)
    state = replica.state
    assert (state.log_end_offset, state.broker_epoch) == (10, 5)
    assert (state.last_fetch_time_ms, state.last_caught_up_time_ms) == (0, 0)
    assert state.last_fetch_leader_log_end_offset == 40
    replica.reset(T0 + 60, 40, is_new_leader=False, is_follower_in_sync=True)
    assert (replica.state.last_fetch_time_ms, replica.state.last_caught_up_time_ms) == (T0 + 60, T0 + 60)
