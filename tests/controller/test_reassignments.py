"""Partition reassignment (KIP-455) on the active controller: AlterPartitionReassignments and
ListPartitionReassignments, as Kafka's ReplicationControlManager and PartitionChangeBuilder do
them. A reassignment first adds the target replicas (replicas = target + the ones being
removed, adding_replicas and removing_replicas set), then completes in whichever change first
finds every target replica in the ISR: replicas = target, the removed ones out of the ISR, a
new leader if the old one was removed, and a leader epoch bump when a replica leaves."""
import random

import pytest

from protocol import messages as M
from protocol.errors import Error
from tests.controller.scenario import Scenario


def topic(s: Scenario, replicas=(1, 2, 3), name="t", configs=None):
    s.create_topic(name, assignments={0: list(replicas)}, configs=configs)
    return s.partition(name).copy()


def test_reassignment_adds_the_targets_and_keeps_the_removed_until_the_new_replicas_are_in_sync():
    s = Scenario(brokers=4)
    before = topic(s)
    assert s.reassign("t", {0: [2, 3, 4]}) == {0: (Error.NONE, None)}
    [record] = s.last_records
    assert isinstance(record, M.PartitionChangeRecord)
    p = s.partition("t")
    assert (p.replicas, p.adding_replicas, p.removing_replicas) == ([2, 3, 4, 1], [4], [1])
    assert p.isr == [1, 2, 3] and p.leader == 1, "the leader stays until the reassignment completes"
    assert p.leader_epoch == before.leader_epoch and p.partition_epoch == before.partition_epoch + 1
    assert s.reassignments() == {("t", 0): ([2, 3, 4, 1], [4], [1])}


def test_reassignment_completes_when_the_isr_holds_every_target_replica_and_moves_a_removed_leader():
    s = Scenario(brokers=4)
    topic(s)
    s.reassign("t", {0: [2, 3, 4]})
    epoch = s.partition("t").leader_epoch
    answer = s.alter_partition(1, "t", 0, [1, 2, 3, 4])
    assert answer.error_code == Error.NEW_LEADER_ELECTED, "the leader's ISR change completed it and moved it"
    p = s.partition("t")
    assert (p.replicas, p.isr, p.adding_replicas, p.removing_replicas) == ([2, 3, 4], [2, 3, 4], [], [])
    assert p.leader == 2 and p.leader_epoch == epoch + 1
    assert s.reassignments() == {}


def test_reassignment_incomplete_while_a_target_replica_is_out_of_the_isr():
    s = Scenario(brokers=5)
    topic(s)
    s.reassign("t", {0: [1, 4, 5]})
    answer = s.alter_partition(1, "t", 0, [1, 2, 3, 4])
    assert answer.error_code == Error.NONE
    p = s.partition("t")
    assert (p.replicas, p.isr, p.adding_replicas, p.removing_replicas) == ([1, 4, 5, 2, 3], [1, 2, 3, 4],
                                                                         [4, 5], [2, 3])


def test_reassignment_that_only_reorders_completes_at_once_without_a_leader_epoch_bump():
    s = Scenario()
    before = topic(s)
    assert s.reassign("t", {0: [3, 2, 1]}) == {0: (Error.NONE, None)}
    p = s.partition("t")
    assert (p.replicas, p.adding_replicas, p.removing_replicas, p.leader) == ([3, 2, 1], [], [], 1)
    assert p.leader_epoch == before.leader_epoch


def test_reassignment_that_only_removes_completes_at_once_and_bumps_the_leader_epoch():
    s = Scenario()
    before = topic(s)
    s.reassign("t", {0: [1, 2]})
    p = s.partition("t")
    assert (p.replicas, p.isr, p.adding_replicas, p.removing_replicas) == ([1, 2], [1, 2], [], [])
    assert p.leader == 1
    assert p.leader_epoch == before.leader_epoch + 1, "a replica left: its fetches must be fenced"


def test_reassignment_removing_the_leader_elects_a_target_replica_from_the_isr():
    s = Scenario()
    topic(s)
    s.reassign("t", {0: [3, 2]})
    p = s.partition("t")
    assert (p.replicas, p.isr, p.leader) == ([3, 2], [2, 3], 3)


def test_reassignment_to_the_current_replicas_writes_nothing():
    s = Scenario()
    topic(s)
    assert s.reassign("t", {0: [1, 2, 3]}) == {0: (Error.NONE, None)}
    assert s.last_records == []


def test_reassignment_to_a_new_target_while_one_is_in_progress_replaces_it():
    s = Scenario(brokers=5)
    topic(s)
    s.reassign("t", {0: [2, 3, 4]})
    s.reassign("t", {0: [2, 3, 5]})
    p = s.partition("t")
    # Kafka computes the new reassignment against the replica list as it stands (4 included).
    assert (p.replicas, p.adding_replicas, p.removing_replicas) == ([2, 3, 5, 1, 4], [5], [1, 4])


def test_reassignment_targets_are_validated_as_a_manual_assignment():
    s = Scenario(brokers=4)
    topic(s)
    results = s.reassign("t", {0: []})
    assert results[0][0] == Error.INVALID_REPLICA_ASSIGNMENT and "empty" in results[0][1]
    assert s.reassign("t", {0: [1, 2, 2]})[0][0] == Error.INVALID_REPLICA_ASSIGNMENT
    code, message = s.reassign("t", {0: [1, 2, 9]})[0]
    assert code == Error.INVALID_REPLICA_ASSIGNMENT and "no such broker is registered" in message
    assert s.reassign("t", {7: [1, 2, 3]})[7][0] == Error.UNKNOWN_TOPIC_OR_PARTITION
    assert s.partition("t").replicas == [1, 2, 3] and s.last_records == []


def test_reassignment_of_an_unknown_topic_is_unknown_topic_or_partition():
    s = Scenario()
    assert s.reassign("nope", {0: [1, 2, 3]})[0][0] == Error.UNKNOWN_TOPIC_OR_PARTITION


def test_reassignment_may_place_replicas_on_a_fenced_broker_which_cannot_join_the_isr():
    s = Scenario(brokers=4)
    topic(s)
    s.advance(20_000)
    s.heartbeat_all(skip=(4,))
    s.tick()
    assert s.fenced(4)
    assert s.reassign("t", {0: [1, 2, 4]}) == {0: (Error.NONE, None)}
    assert s.alter_partition(1, "t", 0, [1, 2, 3, 4]).error_code == Error.INELIGIBLE_REPLICA
    assert s.partition("t").adding_replicas == [4]


def test_cancel_without_a_reassignment_in_progress_is_no_reassignment_in_progress():
    s = Scenario()
    topic(s)
    assert s.reassign("t", {0: None})[0][0] == Error.NO_REASSIGNMENT_IN_PROGRESS


def test_cancel_reverts_to_the_original_replicas_and_takes_the_added_ones_out_of_the_isr():
    s = Scenario(brokers=6)
    before = topic(s)
    s.reassign("t", {0: [4, 5, 6]})
    s.alter_partition(1, "t", 0, [1, 2, 3, 4])
    assert s.partition("t").isr == [1, 2, 3, 4]
    assert s.reassign("t", {0: None}) == {0: (Error.NONE, None)}
    p = s.partition("t")
    assert (p.replicas, p.isr, p.adding_replicas, p.removing_replicas) == ([1, 2, 3], [1, 2, 3], [], [])
    assert p.leader == before.leader == 1
    assert s.reassignments() == {}


def test_cancel_that_needs_an_unclean_election_is_refused_unless_the_topic_allows_it():
    for unclean in (False, True):
        s = Scenario(brokers=4)
        topic(s, configs={"unclean.leader.election.enable": str(unclean).lower()})
        s.reassign("t", {0: [4, 3]})
        s.set_partition("t", isr=[4], leader=4)  # only the replica being added is in sync
        code, message = s.reassign("t", {0: None})[0]
        if not unclean:
            assert code == Error.INVALID_REPLICA_ASSIGNMENT and "unclean" in message
            assert s.partition("t").adding_replicas == [4]
        else:
            assert code == Error.NONE
            p = s.partition("t")
            assert (p.replicas, p.adding_replicas, p.removing_replicas) == ([3, 1, 2], [], [])
            assert p.isr == [p.leader] and p.leader_recovery_state == 1, "an unclean leader recovers"


def test_list_reassignments_names_only_partitions_being_reassigned_and_follows_the_filter():
    s = Scenario(brokers=4)
    s.create_topic("a", assignments={0: [1, 2, 3], 1: [1, 2, 3]})
    s.create_topic("b", assignments={0: [1, 2, 3]})
    s.reassign("a", {1: [2, 3, 4]})
    s.reassign("b", {0: [1, 2, 4]})
    assert set(s.reassignments()) == {("a", 1), ("b", 0)}
    assert set(s.reassignments({"a": [0, 1]})) == {("a", 1)}
    assert s.reassignments({"a": [0], "nope": [0]}) == {}


def test_fencing_the_leader_during_a_reassignment_elects_from_the_isr_and_the_reassignment_goes_on():
    s = Scenario(brokers=4)
    topic(s)
    s.reassign("t", {0: [2, 3, 4]})
    s.advance(20_000)
    s.heartbeat_all(skip=(1,))
    s.tick()
    assert s.fenced(1)
    p = s.partition("t")
    assert (p.leader, p.isr) == (2, [2, 3])
    assert (p.replicas, p.adding_replicas, p.removing_replicas) == ([2, 3, 4, 1], [4], [1])
    assert s.alter_partition(2, "t", 0, [2, 3, 4]).error_code == Error.NONE
    p = s.partition("t")
    assert (p.replicas, p.isr, p.adding_replicas, p.removing_replicas, p.leader) == ([2, 3, 4], [2, 3, 4],
                                                                                    [], [], 2)


# ---- seeded walks -----------------------------------------------------------------------------
WALK_SEEDS = 1000  # 3,000 seeds of 60 steps ran clean on 2026-11-27
WALK_STEPS = 40
WALK_BROKERS = 5


def _walk_step(s: Scenario, rng, targets: dict) -> list[int]:
    """One random operation of an operator, a leader or the clock on topic "w"; the ISR a leader
    proposed, if that was it."""
    index = rng.randrange(2)
    p = s.partition("w", index).copy()
    op = rng.random()
    if op < 0.3:
        size = rng.randint(1, 4)
        target = rng.sample(range(1, WALK_BROKERS + 1), size)
        if rng.random() < 0.05:
            target[-1] = 9  # never registered
        code, _ = s.reassign("w", {index: target})[index]
        if code == Error.NONE:
            after = s.partition("w", index)
            if after.adding_replicas or after.removing_replicas:
                targets[index] = (target, after.copy())
            else:  # nothing to wait for (a reorder, a removal in sync, the current list): done
                targets.pop(index, None)
                assert after.replicas == target
        else:
            assert code == Error.INVALID_REPLICA_ASSIGNMENT and 9 in target
    elif op < 0.4:
        code, _ = s.reassign("w", {index: None})[index]
        in_progress = bool(p.adding_replicas or p.removing_replicas)
        assert (code == Error.NO_REASSIGNMENT_IN_PROGRESS) == (not in_progress)
        if code == Error.NONE:
            targets.pop(index, None)
            after = s.partition("w", index)
            assert after.replicas == [r for r in p.replicas if r not in p.adding_replicas]
            assert not after.adding_replicas and not after.removing_replicas
    elif op < 0.75 and p.leader > 0:
        others = [r for r in p.replicas if r != p.leader and not s.fenced(r)]
        isr = [p.leader] + rng.sample(others, rng.randint(0, len(others)))
        s.alter_partition(p.leader, "w", index, isr)
        return isr
    elif op < 0.87:
        victim = rng.randrange(1, WALK_BROKERS + 1)
        s.advance(10_000)
        s.heartbeat_all(skip=(victim,))
        s.tick()
    else:
        for b in range(1, WALK_BROKERS + 1):
            if s.fenced(b):
                s.register(b, new_incarnation=True)
                s.heartbeat(b)
    return []


def _check_walk_step(before, after, targets: dict, index: int, proposed: list[int]) -> None:
    """The partition's invariants after every step, and what a change from ``before`` may do
    (``proposed``: the ISR its leader proposed in the step, which it vouches for)."""
    p = after
    assert len(set(p.replicas)) == len(p.replicas) and p.replicas
    assert set(p.isr) <= set(p.replicas), "the ISR is within the assignment"
    assert p.leader == -1 or p.leader in p.isr, "the leader is in the ISR"
    assert set(p.adding_replicas) <= set(p.replicas) and set(p.removing_replicas) <= set(p.replicas)
    assert not set(p.adding_replicas) & set(p.removing_replicas)
    assert set(p.elr) <= set(p.replicas) and not set(p.elr) & set(p.isr)
    assert p.partition_epoch >= before.partition_epoch and p.leader_epoch >= before.leader_epoch
    if set(before.replicas) - set(p.replicas) or p.leader != before.leader:
        assert p.leader_epoch > before.leader_epoch, "a replica left or the leader moved: a new leader epoch"
    if p.leader not in (-1, before.leader):
        assert p.leader in set(before.isr) | set(before.elr) | set(proposed), "clean elections only"
    if p.adding_replicas or p.removing_replicas:
        target = targets.get(index)
        if target is not None:
            assert p.replicas == target[0] + sorted(set(p.replicas) - set(target[0]))
    elif (before.adding_replicas or before.removing_replicas) and index in targets:
        target = targets.pop(index)[0]  # completed (a cancel pops its target itself)
        assert p.replicas == target, "a completed reassignment leaves exactly the target"
        assert set(target) <= set(p.isr), "completed only with every target in sync"


@pytest.mark.parametrize("chunk", range(3))
def test_seeded_walks_keep_every_reassignment_invariant(chunk):
    """Random reassignments, cancels, ISR changes from the leader, fencing and restarts of brokers
    over two partitions, with the invariants checked after every step (WALK_SEEDS seeds)."""
    for seed in range(chunk, WALK_SEEDS, 3):
        rng = random.Random(seed)
        s = Scenario(brokers=WALK_BROKERS, seed=seed, min_isr=2)
        s.create_topic("w", assignments={0: [1, 2, 3], 1: [3, 4, 5]})
        targets: dict = {}
        for step in range(WALK_STEPS):
            before = [s.partition("w", i).copy() for i in range(2)]
            try:
                proposed = _walk_step(s, rng, targets)
                for i in range(2):
                    _check_walk_step(before[i], s.partition("w", i), targets, i, proposed)
            except AssertionError as e:
                raise AssertionError(f"seed {seed}, step {step}: {e}") from e


def test_a_request_that_does_not_allow_a_replication_factor_change_refuses_another_size():
    """KIP-860: the size compared is the replica set the partition is headed for."""
    s = Scenario(brokers=5)
    topic(s)
    code, message = s.reassign("t", {0: [1, 2]}, allow_rf_change=False)[0]
    assert code == Error.INVALID_REPLICATION_FACTOR
    assert message == "The replication factor is changed from 3 to 2"
    assert s.reassign("t", {0: [2, 3, 4]}, allow_rf_change=False) == {0: (Error.NONE, None)}
    assert s.partition("t").replicas == [2, 3, 4, 1], "in progress: headed for 3 replicas"
    assert s.reassign("t", {0: [3, 4, 5]}, allow_rf_change=False) == {0: (Error.NONE, None)}
    grown = s.reassign("t", {0: [3, 4, 5, 1]}, allow_rf_change=False)
    assert grown[0][0] == Error.INVALID_REPLICATION_FACTOR
    cancelled = s.reassign("t", {0: None}, allow_rf_change=False)
    assert cancelled == {0: (Error.NONE, None)}, "a cancel has no target to measure"
