"""Leader elections: clean from the ISR, KIP-966 eligible leader replicas, awaiting balanced recovery,
unclean when the topic allows it, preferred (ElectLeaders, auto.leader.rebalance.enable), and
how the leader and partition epochs move."""
from controller.partition_change import Election, PartitionChange
from metadata.image import NO_LEADER, RECOVERED, RECOVERING, PartitionState
from protocol import messages as M
from protocol.errors import Error
from tests.controller.scenario import SESSION_MS, Scenario, leader_changes


def fence(s: Scenario, *brokers: int) -> list:
    """Fence ``brokers`` by closing their connections (everyone else heartbeats)."""
    for b in brokers:
        s.cluster.connection_closed(s.connections[b], s.now)
    s.advance(1000)
    s.heartbeat_all(skip=brokers)
    return s.tick()


def build(p: PartitionState, live=(1, 2, 3), min_isr=1, elr=True, election=Election.ONLINE, isr=None):
    change = PartitionChange(p, bytes(16), 0, lambda b: b in live, min_isr, elr).set_election(election)
    if isr is not None:
        change.set_target_isr(isr)
    return change.build()


def test_clean_election_prefers_the_assignment_order_among_live_isr_members():
    p = PartitionState(replicas=[3, 1, 2], isr=[1, 2, 3], leader=3, leader_epoch=4, partition_epoch=9)
    record = build(p, live=(1, 2), isr=[1, 2])
    assert record.leader == 1 and record.isr == [1, 2]
    p.merge(record)
    assert (p.leader, p.leader_epoch, p.partition_epoch) == (1, 5, 10)


def test_current_leader_is_kept_when_it_may_still_lead():
    p = PartitionState(replicas=[1, 2, 3], isr=[1, 2, 3], leader=2, leader_epoch=4, partition_epoch=9)
    record = build(p, isr=[2, 3])
    assert record.leader == -2 and record.isr == [2, 3]
    p.merge(record)
    assert (p.leader, p.leader_epoch, p.partition_epoch) == (2, 4, 10), \
        "an ISR change moves the partition epoch only"


def test_a_change_that_changes_nothing_is_no_record():
    p = PartitionState(replicas=[1, 2, 3], isr=[1, 2, 3], leader=1, leader_epoch=0, partition_epoch=0)
    assert build(p) is None


def test_no_eligible_replica_leaves_the_partition_offline_with_no_leader():
    p = PartitionState(replicas=[1, 2, 3], isr=[1], leader=1, leader_epoch=2, partition_epoch=5)
    record = build(p, live=(2, 3), elr=False, isr=[])
    assert record.leader == NO_LEADER
    assert record.isr is None, "without ELR the last ISR member stays in the ISR"
    p.merge(record)
    assert p.leader == NO_LEADER and p.isr == [1] and p.leader_epoch == 3


def test_unclean_election_marks_leader_recovering():
    p = PartitionState(replicas=[1, 2, 3], isr=[1], leader=1, leader_epoch=2, partition_epoch=5)
    assert build(p, live=(2, 3), elr=False, isr=[]).leader == NO_LEADER, "unclean not allowed"
    record = build(p, live=(2, 3), elr=False, election=Election.UNCLEAN, isr=[])
    assert record.leader == 2 and record.isr == [2]
    assert record.leader_recovery_state == RECOVERING


def test_isr_emptying_moves_members_to_elr_and_elr_member_is_elected_cleanly():
    s = Scenario(brokers=3, min_isr=2)
    s.create_topic("t", assignments={0: [1, 2, 3]})
    fence(s, 3)
    assert s.partition("t").isr == [1, 2] and s.partition("t").elr == []
    fence(s, 2)
    assert s.partition("t").isr == [1] and s.partition("t").elr == [2]
    fence(s, 1)
    p = s.partition("t")
    assert (p.leader, p.isr, p.elr, p.last_known_elr) == (NO_LEADER, [], [1, 2], [1])
    s.register(2, new_incarnation=True, previous_epoch=s.epoch(2))  # a clean restart
    s.heartbeat(2)
    p = s.partition("t")
    assert (p.leader, p.isr, p.elr, p.leader_recovery_state) == (2, [2], [1], RECOVERED)
    assert p.last_known_elr == []


def test_replica_outside_isr_and_elr_is_not_elected_unless_unclean_is_allowed():
    for unclean in (False, True):
        s = Scenario(brokers=3, min_isr=2)
        s.create_topic("t", assignments={0: [1, 2, 3]}, configs={
            "unclean.leader.election.enable": str(unclean).lower()})
        fence(s, 3)
        fence(s, 2)
        fence(s, 1)
        s.register(3, new_incarnation=True)  # an unclean restart of the replica that left first
        s.heartbeat(3)
        p = s.partition("t")
        if unclean:
            assert (p.leader, p.isr, p.leader_recovery_state) == (3, [3], RECOVERING)
        else:
            assert p.leader == NO_LEADER and p.leader_recovery_state == RECOVERED


def test_with_isr_and_elr_both_gone_the_live_last_known_leader_is_not_elected_by_the_change_itself():
    """Every eligible replica restarted uncleanly and the last leader is live again. Kafka 4.x
    elects it on the spot; here the partition awaits balanced recovery, which elects the most
    complete replica once their log ends are known (tests/controller/test_balanced_recovery.py)."""
    s = Scenario(brokers=1)
    s.create_topic("solo", rf=1)
    fence(s, 1)
    p = s.partition("solo")
    assert (p.leader, p.isr, p.elr, p.last_known_elr) == (NO_LEADER, [], [1], [1])
    s.register(1, new_incarnation=True)  # killed: no clean shutdown
    assert s.partition("solo").elr == []
    s.heartbeat(1)
    p = s.partition("solo")
    assert (p.leader, p.isr, p.leader_recovery_state, p.last_known_elr) == (NO_LEADER, [], RECOVERED, [1])
    assert s.replication.awaits_recovery(s.image, ("solo", s.image.topics["solo"].topic_id, 0, p))


def test_leader_epoch_and_partition_epoch_strictly_increase_through_failovers():
    s = Scenario(brokers=3)
    s.create_topic("t", assignments={0: [1, 2, 3]})
    seen = [(s.partition("t").leader_epoch, s.partition("t").partition_epoch)]
    for broker in (1, 2):
        fence(s, broker)
        s.register(broker, new_incarnation=True)
        s.heartbeat(broker)
        s.alter_partition(s.partition("t").leader, "t", 0, sorted(s.partition("t").isr + [broker]))
        seen.append((s.partition("t").leader_epoch, s.partition("t").partition_epoch))
    assert all(a < b for a, b in zip([e for e, _ in seen], [e for e, _ in seen][1:]))
    assert all(a < b for a, b in zip([e for _, e in seen], [e for _, e in seen][1:]))


# ---- ElectLeaders (key 43) --------------------------------------------------------------

def elect(s: Scenario, election_type: int, partitions: dict[str, list[int]] | None, version: int = 2):
    R = M.ElectLeadersRequest
    req = R(election_type=election_type, timeout_ms=1000, topic_partitions=None if partitions is None else [
        R.TopicPartitions(topic=t, partitions=ps) for t, ps in partitions.items()])
    response = s.apply(s.replication.elect_leaders(s.image, req, version))
    return response, {(r.topic, p.partition_id): p.error_code
                      for r in response.replica_election_results for p in r.partition_result}


def test_preferred_election_moves_leadership_back_to_the_preferred_replica():
    s = Scenario(brokers=3)
    s.create_topic("t", assignments={0: [1, 2, 3], 1: [2, 3, 1]})
    fence(s, 1)
    s.register(1, new_incarnation=True)
    s.heartbeat(1)
    s.alter_partition(s.partition("t", 0).leader, "t", 0, [1, 2, 3])
    _, errors = elect(s, 0, {"t": [0, 1], "nope": [0]})
    assert errors == {("t", 0): Error.NONE, ("t", 1): Error.ELECTION_NOT_NEEDED,
                      ("nope", 0): Error.UNKNOWN_TOPIC_OR_PARTITION}
    assert s.partition("t", 0).leader == 1


def test_preferred_election_needs_the_preferred_replica_in_the_isr():
    s = Scenario(brokers=3)
    s.create_topic("t", assignments={0: [1, 2, 3]})
    fence(s, 1)
    s.register(1, new_incarnation=True)
    s.heartbeat(1)  # live again, but not yet back in the ISR
    _, errors = elect(s, 0, {"t": [0]})
    assert errors == {("t", 0): Error.PREFERRED_LEADER_NOT_AVAILABLE}


def test_elect_leaders_for_all_partitions_leaves_out_those_not_needing_one():
    s = Scenario(brokers=3)
    s.create_topic("t", assignments={0: [1, 2, 3], 1: [2, 3, 1]})
    response, errors = elect(s, 0, None)
    assert response.error_code == Error.NONE and errors == {}


def test_unclean_elect_leaders_elects_a_live_replica_of_an_offline_partition():
    s = Scenario(brokers=3, elr=False)
    s.create_topic("t", assignments={0: [1, 2]})
    fence(s, 2)
    fence(s, 1)
    assert s.partition("t").leader == NO_LEADER and s.partition("t").isr == [1]
    s.register(2, new_incarnation=True)
    s.heartbeat(2)
    assert s.partition("t").leader == NO_LEADER, "not in the ISR, unclean not allowed by the topic"
    _, errors = elect(s, 1, {"t": [0]})
    assert errors == {("t", 0): Error.NONE}
    p = s.partition("t")
    assert (p.leader, p.isr, p.leader_recovery_state) == (2, [2], RECOVERING)


def test_elect_leaders_with_an_unknown_election_type_is_invalid_request():
    s = Scenario(brokers=1)
    response, _ = elect(s, 7, None)
    assert response.error_code == Error.INVALID_REQUEST


# ---- periodic work ----------------------------------------------------------------------

def test_auto_rebalance_moves_leaders_back_when_imbalance_exceeds_the_percentage():
    s = Scenario(brokers=3)
    s.create_topic("t", assignments={i: [1, 2, 3] if i % 3 == 0 else [2, 3, 1] if i % 3 == 1 else [3, 1, 2]
                                     for i in range(9)})
    fence(s, 1)
    s.register(1, new_incarnation=True)
    s.heartbeat(1)
    for i in (0, 3, 6):
        s.alter_partition(s.partition("t", i).leader, "t", i, [1, 2, 3])
    assert [s.partition("t", i).leader for i in (0, 3, 6)] == [2, 2, 2]
    assert s.replication.maybe_balance_partition_leaders(s.image, imbalance_percentage=100) == []
    records = s.commit(s.replication.maybe_balance_partition_leaders(s.image, imbalance_percentage=10))
    assert leader_changes(records) == {0: 1, 3: 1, 6: 1}


def test_auto_rebalance_leaves_a_preferred_replica_that_is_not_in_the_isr():
    s = Scenario(brokers=3)
    s.create_topic("t", assignments={0: [1, 2, 3]})
    fence(s, 1)
    s.register(1, new_incarnation=True)
    s.heartbeat(1)
    assert s.replication.maybe_balance_partition_leaders(s.image, imbalance_percentage=0) == []


def test_leaderless_partitions_get_an_unclean_leader_once_the_topic_allows_it():
    s = Scenario(brokers=2, elr=False)
    s.create_topic("t", assignments={0: [1, 2]})
    fence(s, 2)
    fence(s, 1)
    s.register(2, new_incarnation=True)
    s.heartbeat(2)
    assert s.replication.maybe_elect_unclean_leaders(s.image) == []
    s.set_topic_config("t", "unclean.leader.election.enable", "true")
    s.commit(s.replication.maybe_elect_unclean_leaders(s.image))
    assert (s.partition("t").leader, s.partition("t").leader_recovery_state) == (2, RECOVERING)


def test_session_expiry_elects_clean_leaders_for_every_partition_of_the_lost_broker():
    s = Scenario(brokers=3)
    s.create_topic("t", partitions=12, rf=3)
    s.advance(SESSION_MS + 1)
    s.heartbeat_all(skip=(1,))
    s.tick()
    for p in s.image.topics["t"].partitions.values():
        assert p.leader in (2, 3) and p.leader in p.isr and 1 not in p.isr
        assert p.leader_recovery_state == RECOVERED
