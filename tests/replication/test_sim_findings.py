"""What the seeded simulation (tests/replication/sim.py) found in the replication core, each
reduced to the shortest sequence of core calls that shows it. A finding stays here, marked
xfail(strict=True), until the core is fixed; then the mark goes and the test stays.

F1 (fixed: make_leader now ignores a registration at the partition epoch it already holds;
found by seeds 2059, 2352, 2427, 2858, 3241, 3482 with 3 replicas, 34 and 232 with 5): the
leader learns partition epoch N from an AlterPartition answer, proposes its next ISR change on
top of it, and only then replays the metadata record of epoch N. make_leader accepted a
registration at an equal partition epoch and reset partition_state to the committed ISR, so
the pending expansion dropped out of the maximal ISR. The controller still committed the
expansion (its partition epoch matched), and until the next metadata record arrived the leader
advanced the high watermark past the log end offset of a replica in the controller's ISR: a
record below the HW was missing on an ISR member, and had the leader died in that window the
controller could have elected that replica and lost acknowledged records.
"""
from replication import errors
from replication.isr import LeaderAndIsr, PartitionRegistration
from replication.log import MemoryPartitionLog
from replication.partition import BrokerLiveness, Partition

LAG = 100


class Registry:
    def __init__(self, *broker_ids: int) -> None:
        self.by_id = {b: BrokerLiveness(broker_epoch=100 + b) for b in broker_ids}

    def get(self, broker_id: int) -> BrokerLiveness | None:
        return self.by_id.get(broker_id)


def follower_fetch(p: Partition, replica_id: int, offset: int, now: int):
    check = p.check_follower_fetch(replica_id, p.leader_epoch, offset, p.log.latest_epoch)
    assert check.error == errors.NONE and check.diverging_epoch is None
    return p.update_follower_fetch_state(replica_id, 100 + replica_id, offset, 0, p.log.log_end_offset, now)


def committed(sent: LeaderAndIsr) -> LeaderAndIsr:
    """The controller's answer: the proposal committed at the next partition epoch."""
    return LeaderAndIsr.build(sent.leader, sent.leader_epoch, [(r, -1) for r in sent.isr],
                              sent.leader_recovery_state, sent.partition_epoch + 1)


def test_replaying_the_registration_of_the_current_partition_epoch_keeps_a_pending_expansion():
    log = MemoryPartitionLog()
    p = Partition("t", 0, 1, log, Registry(1, 2, 3), replica_lag_time_max_ms=LAG, min_insync_replicas=2)
    p.make_leader(PartitionRegistration((1, 2, 3), (1, 2, 3), 1, 0, 1), 0)
    p.append_records_to_leader(["a", "b"], -1, 0)
    follower_fetch(p, 2, 2, 10)
    follower_fetch(p, 3, 0, 10)
    # Replica 3 stops fetching: the leader shrinks the ISR and the controller commits epoch 2.
    shrink = p.maybe_shrink_isr(10 + LAG + 1).alter_partition
    assert shrink is not None and shrink.isr == (1, 2)
    p.handle_alter_partition_response(shrink, errors.NONE, committed(shrink), 120)
    assert p.partition_epoch == 2
    # Replica 3 is back at the HW: the leader proposes it on top of epoch 2.
    expand = follower_fetch(p, 3, 2, 130).alter_partition
    assert expand is not None and expand.isr == (1, 2, 3) and expand.partition_epoch == 2
    # Now the metadata record of epoch 2 (the shrink) arrives, late.
    p.make_leader(PartitionRegistration((1, 2, 3), (1, 2), 1, 0, 2), 140)
    # The controller commits the expansion: its ISR is {1, 2, 3} from here on.
    controller_isr = committed(expand).isr
    p.append_records_to_leader(["c", "d"], -1, 150)
    follower_fetch(p, 2, 4, 160)
    replica_3_end = 2
    assert 3 in p.partition_state.maximal_isr
    assert log.high_watermark <= replica_3_end, (
        f"HW {log.high_watermark} passed the log end offset {replica_3_end} of replica 3, "
        f"a member of the committed ISR {controller_isr}")
