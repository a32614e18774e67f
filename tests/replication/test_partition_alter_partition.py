"""AlterPartition answers on the leader, and the recovery of an uncleanly elected leader."""
import pytest

from replication import errors
from replication.isr import (
    RECOVERED,
    RECOVERING,
    CommittedPartitionState,
    LeaderAndIsr,
    PendingLeaderRecovery,
)
from tests.replication.partition_scenario import LAG, T0, commit, fetch, leader, produce, registration


def expanding():
    """A leader of (1, 2, 3) with ISR {1, 2} that proposed adding 3."""
    p = leader(isr=(1, 2))
    fetch(p, 2, 0, T0)
    sent = fetch(p, 3, 0, T0).alter_partition
    assert sent is not None
    return p, sent


def test_success_installs_the_committed_state_and_the_new_partition_epoch():
    p, sent = expanding()
    commit(p, sent)
    assert p.partition_state == CommittedPartitionState(frozenset({1, 2, 3}), RECOVERED)
    assert p.partition_epoch == 2


def test_success_reruns_the_hw_which_a_committed_shrink_may_free():
    p = leader(replicas=(1, 2))
    produce(p, 10)
    sent = p.maybe_shrink_isr(T0 + LAG + 1).alter_partition
    assert p.log.high_watermark == 0
    assert commit(p, sent, T0 + LAG + 2).hw_advanced
    assert p.log.high_watermark == 10


def test_controller_answer_with_a_different_isr_is_what_gets_installed():
    p, sent = expanding()
    result = LeaderAndIsr.build(1, 1, [(1, 11), (2, 12)], RECOVERED, 2)
    p.handle_alter_partition_response(sent, errors.NONE, result, T0)
    assert p.partition_state.isr == {1, 2} and not p.partition_state.is_inflight


def test_answer_after_the_state_moved_on_is_ignored_as_stale():
    p, sent = expanding()
    p.make_leader(registration(isr=(1, 2, 3), partition_epoch=2), T0)   # the metadata got there first
    state = p.partition_state
    out = p.handle_alter_partition_response(sent, errors.INVALID_UPDATE_VERSION, None, T0)
    assert out.alter_partition is None and p.partition_state is state
    out = commit(p, sent)
    assert p.partition_state is state and p.partition_epoch == 2 and not out.hw_advanced


def test_answer_for_another_proposal_is_ignored():
    p, sent = expanding()
    other = LeaderAndIsr.build(1, 1, [(1, 11)], RECOVERED, 1)
    commit(p, other)
    assert p.partition_state.is_inflight and p.partition_state.sent == sent


def test_success_from_another_leader_epoch_or_older_partition_epoch_is_ignored():
    p, sent = expanding()
    other_leader_epoch = LeaderAndIsr.build(1, 2, sent.isr_with_epochs, RECOVERED, 2)
    older_partition_epoch = LeaderAndIsr.build(1, 1, sent.isr_with_epochs, RECOVERED, 0)
    p.handle_alter_partition_response(sent, errors.NONE, other_leader_epoch, T0)
    p.handle_alter_partition_response(sent, errors.NONE, older_partition_epoch, T0)
    assert p.partition_state.is_inflight and p.partition_epoch == 1


@pytest.mark.parametrize("code", [errors.OPERATION_NOT_ATTEMPTED, errors.INELIGIBLE_REPLICA])
def test_not_applied_answers_reset_to_the_last_committed_state(code):
    p, sent = expanding()
    out = p.handle_alter_partition_response(sent, code, None, T0)
    assert out.alter_partition is None
    assert p.partition_state == CommittedPartitionState(frozenset({1, 2}), RECOVERED)
    assert p.partition_epoch == 1


def test_after_a_reset_the_follower_is_proposed_again_on_its_next_fetch():
    p, sent = expanding()
    p.handle_alter_partition_response(sent, errors.OPERATION_NOT_ATTEMPTED, None, T0)
    assert fetch(p, 3, 0, T0 + 1).alter_partition == sent


@pytest.mark.parametrize("code", [errors.INVALID_UPDATE_VERSION, errors.FENCED_LEADER_EPOCH,
                                  errors.UNKNOWN_TOPIC_OR_PARTITION, errors.NEW_LEADER_ELECTED,
                                  errors.INVALID_REQUEST])
def test_give_up_answers_wait_for_metadata_in_the_pending_state(code):
    p, sent = expanding()
    out = p.handle_alter_partition_response(sent, code, None, T0)
    assert out.alter_partition is None
    assert p.partition_state.is_inflight and p.partition_state.maximal_isr == {1, 2, 3}
    p.make_leader(registration(isr=(1, 2), partition_epoch=3), T0 + 1)   # the metadata arrives
    assert not p.partition_state.is_inflight


@pytest.mark.parametrize("code", [errors.NOT_CONTROLLER, errors.UNKNOWN_SERVER_ERROR,
                                  errors.REQUEST_TIMED_OUT])
def test_other_answers_retry_the_same_proposal(code):
    p, sent = expanding()
    out = p.handle_alter_partition_response(sent, code, None, T0)
    assert out.alter_partition == sent
    assert p.partition_state.is_inflight and p.partition_state.sent == sent


def test_partition_epoch_learned_from_an_answer_makes_an_older_registration_stale():
    p, sent = expanding()
    commit(p, sent)
    p.make_leader(registration(isr=(1, 2), partition_epoch=1), T0 + 1)   # late metadata
    assert p.partition_state.isr == {1, 2, 3}


# -- unclean leader election ------------------------------------------------------------------------

def unclean_leader():
    p = leader(isr=(1,), leader_epoch=1, partition_epoch=1)
    p.make_follower(registration(isr=(2,), leader=2, leader_epoch=2, partition_epoch=2), T0)
    out = p.make_leader(registration(isr=(1,), leader_epoch=3, partition_epoch=3,
                                     leader_recovery_state=RECOVERING), T0)
    return p, out


def test_unclean_leader_proposes_recovered_before_expanding():
    p, out = unclean_leader()
    sent = out.alter_partition
    assert sent == LeaderAndIsr.build(1, 3, [(1, p.brokers.epoch(1))], RECOVERED, 3)
    assert isinstance(p.partition_state, PendingLeaderRecovery)
    assert fetch(p, 2, 0, T0 + 1).alter_partition is None
    assert p.partition_state.maximal_isr == {1}


def test_unclean_leader_expands_once_recovery_is_committed():
    p, out = unclean_leader()
    commit(p, out.alter_partition, T0 + 1)
    assert p.partition_state == CommittedPartitionState(frozenset({1}), RECOVERED)
    sent = fetch(p, 2, 0, T0 + 2).alter_partition
    assert sent.isr == (1, 2) and sent.leader_recovery_state == RECOVERED


def test_unclean_leader_proposes_recovery_again_after_a_reset():
    p, out = unclean_leader()
    p.handle_alter_partition_response(out.alter_partition, errors.OPERATION_NOT_ATTEMPTED, None, T0 + 1)
    assert p.partition_state.leader_recovery_state == RECOVERING and not p.partition_state.is_inflight
    again = fetch(p, 2, 0, T0 + 2).alter_partition
    assert again == out.alter_partition                       # recovery, not an expansion
    p.handle_alter_partition_response(again, errors.INELIGIBLE_REPLICA, None, T0 + 3)
    assert p.maybe_shrink_isr(T0 + 4).alter_partition == out.alter_partition


def test_follower_of_a_recovering_partition_proposes_nothing():
    p = leader()
    out = p.make_follower(registration(isr=(2,), leader=2, leader_epoch=2, partition_epoch=2,
                                       leader_recovery_state=RECOVERING), T0)
    assert out.alter_partition is None and p.partition_state.leader_recovery_state == RECOVERING
