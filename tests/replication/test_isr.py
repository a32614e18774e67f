"""The ISR state machine's views: maximal ISR asymmetry, in-flight flag, LeaderAndIsr form."""
import dataclasses

import pytest

from replication.isr import (
    RECOVERED,
    RECOVERING,
    CommittedPartitionState,
    LeaderAndIsr,
    PartitionRegistration,
    PendingExpandIsr,
    PendingLeaderRecovery,
    PendingShrinkIsr,
)

COMMITTED = CommittedPartitionState(frozenset({1, 2}))
SENT = LeaderAndIsr.build(1, 3, [(2, 12), (1, 11)], RECOVERED, 7)


def test_committed_state_maximal_isr_is_the_isr_and_nothing_is_in_flight():
    assert COMMITTED.maximal_isr == COMMITTED.isr == {1, 2}
    assert not COMMITTED.is_inflight


def test_pending_expand_counts_the_new_replica_in_the_maximal_isr_only():
    pending = PendingExpandIsr(3, SENT, COMMITTED)
    assert pending.isr == {1, 2}
    assert pending.maximal_isr == {1, 2, 3}
    assert pending.is_inflight


def test_pending_shrink_keeps_the_old_isr_as_maximal_isr():
    pending = PendingShrinkIsr(frozenset({2}), SENT, COMMITTED)
    assert pending.isr == {1, 2}
    assert pending.maximal_isr == {1, 2}
    assert pending.is_inflight


def test_pending_leader_recovery_changes_no_isr_and_is_in_flight():
    committed = CommittedPartitionState(frozenset({1}), RECOVERING)
    pending = PendingLeaderRecovery(SENT, committed)
    assert pending.isr == pending.maximal_isr == {1}
    assert pending.is_inflight
    assert pending.leader_recovery_state == RECOVERING


def test_pending_states_remember_the_last_committed_state():
    for pending in (PendingExpandIsr(3, SENT, COMMITTED), PendingShrinkIsr(frozenset({2}), SENT, COMMITTED)):
        assert pending.last_committed_state is COMMITTED
        assert pending.leader_recovery_state == COMMITTED.leader_recovery_state


def test_leader_and_isr_lists_isr_sorted_by_broker_id_with_broker_epochs():
    assert SENT.isr_with_epochs == ((1, 11), (2, 12))
    assert SENT.isr == (1, 2)


def test_registration_is_recovered_unless_told_otherwise():
    reg = PartitionRegistration((1, 2, 3), (1, 2), 1, 4, 9)
    assert reg.leader_recovery_state == RECOVERED


def test_states_are_immutable_values():
    with pytest.raises(dataclasses.FrozenInstanceError):
        COMMITTED.isr = frozenset()  # type: ignore[misc]
    assert PendingExpandIsr(3, SENT, COMMITTED) == PendingExpandIsr(3, SENT, COMMITTED)
    assert PendingExpandIsr(3, SENT, COMMITTED) != PendingShrinkIsr(frozenset({3}), SENT, COMMITTED)
