"""Balanced recovery (controller.balanced_recovery): with ISR and ELR both gone, the partition is
led by its most complete replica, asked for its log end, not by whichever last led it.

The 100-trial soak's seed 1032: two brokers restarted uncleanly (out of ISR and ELR), the only
in-sync replica lost its disk and came back; electing it as the last known leader made the
others truncate to its empty log and lost 4,042 acknowledged records they held."""
from controller.balanced_recovery import BalancedRecovery, LogEndQuery
from controller.partition_change import PartitionChange
from metadata.image import NO_LEADER, RECOVERING, PartitionState
from protocol.errors import Error
from tests.controller.scenario import Scenario


def fence(s: Scenario, *brokers: int) -> None:
    for b in brokers:
        s.cluster.connection_closed(s.connections[b], s.now)
    s.advance(1000)
    s.heartbeat_all(skip=brokers)
    s.tick()


def unclean_restart(s: Scenario, broker: int) -> None:
    """Killed and back: a new incarnation without a clean shutdown, caught up and unfenced."""
    s.register(broker, new_incarnation=True)
    s.heartbeat(broker)
    assert not s.fenced(broker)


def every_in_sync_replica_gone() -> Scenario:
    """Replicas [3, 1, 2], 3 leading: 2 then 1 killed and restarted uncleanly (out of ISR and
    ELR, 1 left later so it holds more), then 3, the only in-sync replica, fenced and back
    as a new incarnation: ISR = ELR = [], last known leader [3], live."""
    s = Scenario(brokers=3, min_isr=2)
    s.create_topic("t", assignments={0: [3, 1, 2]})
    fence(s, 2)
    unclean_restart(s, 2)
    fence(s, 1)
    assert s.partition("t").elr == [1]
    unclean_restart(s, 1)
    assert (s.partition("t").isr, s.partition("t").elr) == ([3], [])
    fence(s, 3)
    p = s.partition("t")
    assert (p.leader, p.isr, p.elr, p.last_known_elr) == (NO_LEADER, [], [3], [3])
    unclean_restart(s, 3)
    p = s.partition("t")
    assert (p.isr, p.elr, p.last_known_elr) == ([], [], [3])
    return s


def answer(recovery: BalancedRecovery, queries: list[LogEndQuery], ends: dict[int, tuple[int, int]]) -> None:
    for q in queries:
        if q.broker_id in ends:
            epoch, offset = ends[q.broker_id]
            recovery.answered(q, Error.NONE, epoch, offset)


def poll(s: Scenario, recovery: BalancedRecovery, rescan: bool = True) -> list[LogEndQuery]:
    queries, records = recovery.poll(s.image, s.now, rescan)
    s.commit(records)
    return queries


def test_a_live_last_known_leader_is_not_elected_before_the_replicas_log_ends_are_known():
    s = every_in_sync_replica_gone()
    assert s.partition("t").leader == NO_LEADER, "unfencing the last known leader elects nobody by itself"
    assert s.replication.awaits_recovery(s.image, ("t", s.image.topics["t"].topic_id, 0, s.partition("t")))
    queries = poll(s, BalancedRecovery(s.replication))
    assert sorted((q.broker_id, q.broker_epoch, q.topic, q.partition) for q in queries) == sorted(
        (b, s.epoch(b), "t", 0) for b in (1, 2, 3))
    assert s.partition("t").leader == NO_LEADER


def test_the_most_complete_replica_is_elected_not_the_last_known_leader_that_came_back_empty():
    s = every_in_sync_replica_gone()
    recovery = BalancedRecovery(s.replication)
    queries = poll(s, recovery)
    answer(recovery, queries, {3: (-1, 0), 1: (0, 5120), 2: (0, 3900)})
    assert poll(s, recovery, rescan=False) == []
    p = s.partition("t")
    assert (p.leader, p.isr, p.elr, p.last_known_elr, p.leader_recovery_state) == (1, [1], [], [], RECOVERING)
    assert not recovery.pending


def test_the_election_waits_for_every_replica_to_answer():
    s = every_in_sync_replica_gone()
    recovery = BalancedRecovery(s.replication)
    queries = poll(s, recovery)
    answer(recovery, queries, {3: (-1, 0), 2: (0, 3900)})
    s.advance(500)
    assert poll(s, recovery, rescan=False) == [] and s.partition("t").leader == NO_LEADER
    recovery.answered(next(q for q in queries if q.broker_id == 1), Error.NONE, 0, 5120)
    poll(s, recovery, rescan=False)
    assert s.partition("t").leader == 1


def test_a_later_epoch_beats_a_longer_log_of_an_earlier_epoch():
    s = every_in_sync_replica_gone()
    recovery = BalancedRecovery(s.replication)
    answer(recovery, poll(s, recovery), {3: (1, 10), 1: (0, 5120), 2: (0, 9000)})
    poll(s, recovery)
    assert s.partition("t").leader == 3


def test_the_last_known_leader_wins_a_tie_and_then_the_assignment_order():
    s = every_in_sync_replica_gone()
    recovery = BalancedRecovery(s.replication)
    answer(recovery, poll(s, recovery), {3: (0, 5120), 1: (0, 5120), 2: (0, 5120)})
    poll(s, recovery)
    assert s.partition("t").leader == 3

    s = every_in_sync_replica_gone()
    recovery = BalancedRecovery(s.replication)
    answer(recovery, poll(s, recovery), {3: (-1, 0), 1: (0, 5120), 2: (0, 5120)})
    poll(s, recovery)
    assert s.partition("t").leader == 1, "1 comes before 2 in the assignment [3, 1, 2]"


def test_a_log_end_in_an_epoch_the_partition_never_had_is_no_candidate():
    """A corrupt log would claim it (soak seed 1013: a flipped partitionLeaderEpoch)."""
    s = every_in_sync_replica_gone()
    recovery = BalancedRecovery(s.replication)
    epoch = s.partition("t").leader_epoch
    answer(recovery, poll(s, recovery), {3: (-1, 0), 1: (epoch + 1000, 310), 2: (epoch, 3900)})
    poll(s, recovery, rescan=False)
    assert s.partition("t").leader == 2


def test_at_the_timeout_the_most_complete_answer_is_elected_without_the_silent_replica():
    s = every_in_sync_replica_gone()
    recovery = BalancedRecovery(s.replication, timeout_ms=5000)
    answer(recovery, poll(s, recovery), {3: (-1, 0), 2: (0, 3900)})
    s.advance(4999)
    poll(s, recovery, rescan=False)
    assert s.partition("t").leader == NO_LEADER
    s.advance(1)
    assert recovery.due(s.now)
    poll(s, recovery, rescan=False)
    assert s.partition("t").leader == 2


def test_at_the_timeout_a_silent_last_known_leader_is_elected_as_kafka_would():
    s = every_in_sync_replica_gone()
    recovery = BalancedRecovery(s.replication, timeout_ms=5000)
    answer(recovery, poll(s, recovery), {1: (0, 5120), 2: (0, 3900)})
    s.advance(5000)
    poll(s, recovery, rescan=False)
    p = s.partition("t")
    assert (p.leader, p.leader_recovery_state) == (3, RECOVERING), \
        "nothing is known of the last known leader's log: it is trusted, as Kafka 4.x does"


def test_a_more_complete_replica_that_is_fenced_is_waited_for_until_the_timeout():
    s = every_in_sync_replica_gone()
    recovery = BalancedRecovery(s.replication, timeout_ms=5000)
    queries = poll(s, recovery)
    fence(s, 1)  # answered, then fenced: it cannot lead yet
    answer(recovery, queries, {3: (-1, 0), 1: (0, 5120), 2: (0, 3900)})
    poll(s, recovery)
    assert s.partition("t").leader == NO_LEADER
    s.heartbeat(1)  # unfenced again, the same incarnation: its answer still counts
    poll(s, recovery)
    assert s.partition("t").leader == 1

    s = every_in_sync_replica_gone()
    recovery = BalancedRecovery(s.replication, timeout_ms=5000)
    queries = poll(s, recovery)
    fence(s, 1)
    answer(recovery, queries, {3: (-1, 0), 1: (0, 5120), 2: (0, 3900)})
    s.advance(5000)
    poll(s, recovery)
    assert s.partition("t").leader == 2, "at the timeout: the most complete live replica"


def test_an_answer_from_a_previous_broker_incarnation_does_not_count():
    s = every_in_sync_replica_gone()
    recovery = BalancedRecovery(s.replication)
    queries = poll(s, recovery)
    fence(s, 1)  # killed and back as a new incarnation after it was asked
    unclean_restart(s, 1)
    answer(recovery, queries, {3: (-1, 0), 1: (0, 5120), 2: (0, 3900)})
    again = poll(s, recovery)
    assert s.partition("t").leader == NO_LEADER
    assert [(q.broker_id, q.broker_epoch) for q in again] == [(1, s.epoch(1))], "asked anew"
    answer(recovery, again, {1: (0, 5100)})
    poll(s, recovery)
    assert s.partition("t").leader == 1


def test_an_unanswered_query_is_asked_again_after_the_retry_interval_and_not_before():
    s = every_in_sync_replica_gone()
    recovery = BalancedRecovery(s.replication, retry_ms=1000)
    queries = poll(s, recovery)
    recovery.answered(next(q for q in queries if q.broker_id == 1), Error.NOT_LEADER_OR_FOLLOWER, -1, -1)
    answer(recovery, queries, {3: (-1, 0), 2: (0, 3900)})
    s.advance(999)
    assert poll(s, recovery, rescan=False) == [] and not recovery.due(s.now)
    s.advance(1)
    assert recovery.due(s.now)
    assert [q.broker_id for q in poll(s, recovery, rescan=False)] == [1], "an error is no answer"


def test_a_recovery_is_forgotten_once_the_partition_no_longer_awaits_one():
    s = every_in_sync_replica_gone()
    recovery = BalancedRecovery(s.replication)
    poll(s, recovery)
    assert recovery.pending
    fence(s, 3)  # the last known leader is gone again
    assert poll(s, recovery) == [] and not recovery.pending


def test_a_topic_that_allows_unclean_election_does_not_wait_for_log_ends():
    """Unclean election allowed: the last known leader is elected the moment it is live
    again, as Kafka 4.x does, and balanced recovery has nothing to do."""
    s = Scenario(brokers=1)
    s.create_topic("solo", rf=1, configs={"unclean.leader.election.enable": "true"})
    fence(s, 1)
    assert s.partition("solo").last_known_elr == [1]
    unclean_restart(s, 1)
    p = s.partition("solo")
    assert (p.leader, p.leader_recovery_state) == (1, RECOVERING)
    assert BalancedRecovery(s.replication).poll(s.image, s.now) == ([], [])


def test_a_lone_replica_that_restarted_uncleanly_leads_again_once_it_answers():
    """RF 1: nobody else could hold more; the partition is not left offline."""
    s = Scenario(brokers=1)
    s.create_topic("solo", rf=1)
    fence(s, 1)
    assert s.partition("solo").last_known_elr == [1]
    unclean_restart(s, 1)
    assert s.partition("solo").leader == NO_LEADER
    recovery = BalancedRecovery(s.replication)
    answer(recovery, poll(s, recovery), {1: (0, 42)})
    poll(s, recovery, rescan=False)
    p = s.partition("solo")
    assert (p.leader, p.isr, p.leader_recovery_state, p.last_known_elr) == (1, [1], RECOVERING, [])


def test_a_recovery_leader_that_may_not_lead_is_not_elected():
    p = PartitionState(replicas=[1, 2, 3], isr=[], elr=[], last_known_elr=[1], leader=NO_LEADER,
                       leader_epoch=3, partition_epoch=7)
    change = PartitionChange(p, bytes(16), 0, lambda b: b in (1, 3), 2, True)
    assert change.set_recovery_leader(2).build() is None
    change = PartitionChange(p, bytes(16), 0, lambda b: b in (1, 3), 2, True)
    record = change.set_recovery_leader(3).build()
    assert (record.leader, record.isr, record.leader_recovery_state, record.last_known_elr) == (
        3, [3], RECOVERING, [])
