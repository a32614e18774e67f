"""A small scenario kit for the partition core: a metadata registry, a leader on an in-memory log,
follower fetches the way the edge performs them, and a controller that answers AlterPartition."""
from __future__ import annotations

from replication import errors
from replication.isr import RECOVERED, LeaderAndIsr, PartitionRegistration
from replication.log import MemoryPartitionLog
from replication.partition import BrokerLiveness, Outcome, Partition

T0 = 1_000_000          # clocks start far from 0, as wall clocks do
LAG = 30_000            # replica.lag.time.max.ms
LEADER = 1


class Brokers:
    """The metadata image's broker registrations (BrokerRegistry)."""

    def __init__(self, *broker_ids: int, epoch: int = 10) -> None:
        self.by_id = {b: BrokerLiveness(broker_epoch=epoch + b) for b in broker_ids}

    def get(self, broker_id: int) -> BrokerLiveness | None:
        return self.by_id.get(broker_id)

    def epoch(self, broker_id: int) -> int:
        return self.by_id[broker_id].broker_epoch

    def set(self, broker_id: int, **changes) -> None:
        current = self.by_id[broker_id]
        self.by_id[broker_id] = BrokerLiveness(**{**current.__dict__, **changes})


def registration(replicas=(1, 2, 3), isr=None, leader=LEADER, leader_epoch=1, partition_epoch=1,
                 leader_recovery_state=RECOVERED) -> PartitionRegistration:
    return PartitionRegistration(tuple(replicas), tuple(replicas if isr is None else isr), leader,
                                 leader_epoch, partition_epoch, leader_recovery_state)


def leader(replicas=(1, 2, 3), isr=None, min_isr=1, log=None, now=T0, leader_epoch=1,
           partition_epoch=1, brokers=None) -> Partition:
    brokers = brokers or Brokers(*replicas)
    p = Partition("t", 0, LEADER, log if log is not None else MemoryPartitionLog(), brokers,
                  replica_lag_time_max_ms=LAG, min_insync_replicas=min_isr)
    p.make_leader(registration(replicas, isr, LEADER, leader_epoch, partition_epoch), now)
    return p


def produce(p: Partition, n: int, now=T0, acks=1, value="v"):
    info, outcome = p.append_records_to_leader([f"{value}{i}" for i in range(n)], acks, now)
    return info, outcome


def fetch(p: Partition, replica_id: int, offset: int, now: int, broker_epoch: int | None = None,
          last_fetched_epoch: int | None = None) -> Outcome:
    """A follower Fetch from ``offset`` as the edge serves it: check, then record the read."""
    check = p.check_follower_fetch(replica_id, p.leader_epoch, offset,
                                   p.leader_epoch if last_fetched_epoch is None else last_fetched_epoch)
    assert check.error == errors.NONE and check.diverging_epoch is None, check
    if broker_epoch is None:
        broker_epoch = p.brokers.get(replica_id).broker_epoch
    return p.update_follower_fetch_state(replica_id, broker_epoch, offset, 0, p.log.log_end_offset, now)


def commit(p: Partition, sent: LeaderAndIsr, now: int = T0) -> Outcome:
    """The controller accepts ``sent``: the partition epoch moves on by one."""
    result = LeaderAndIsr(sent.leader, sent.leader_epoch, sent.isr_with_epochs,
                          sent.leader_recovery_state, sent.partition_epoch + 1)
    return p.handle_alter_partition_response(sent, errors.NONE, result, now)


def caught_up(p: Partition, replica_ids, now: int) -> None:
    """Every named follower fetches at the leader's LEO (committing any expansion it causes)."""
    for r in replica_ids:
        out = fetch(p, r, p.log.log_end_offset, now)
        if out.alter_partition is not None:
            commit(p, out.alter_partition, now)


def log_of(*epoch_counts, start: int = 0) -> MemoryPartitionLog:
    """A log written as (leader epoch, number of records) runs from ``start``."""
    log = MemoryPartitionLog(log_start_offset=start)
    for epoch, n in epoch_counts:
        log.append_as_leader(range(n), epoch, 0)
    return log
