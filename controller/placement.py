"""Replica placement for new partitions: Kafka's striped placer, racks first.

Theory of operation (StripedReplicaPlacer). The usable brokers (unfenced, not in controlled
shutdown) are grouped by ``broker.rack`` (brokers without a rack form one rack of their
own); racks are kept in a list, and each rack's brokers in a list. A partition takes its
first replica, its preferred leader, from the rack at the current rack offset, the next
replica from the next rack, and so on round the racks, so the replicas of a partition land
on as many racks as there are; within a rack, brokers are taken round-robin. Each partition
starts one rack further than the last, which stripes leaders across racks and brokers:

    racks A (a0 a1), B (b0 b1), C (c0 c1), offsets 0:
    partition 0: a0 b0 c0    partition 1: b1 c1 a1    partition 2: c0 a0 b0 ...

After as many partitions as there are brokers, the rack list and each rack's brokers are
shuffled with the injected ``random.Random``, so that many topics do not all start on the
same broker. Fewer usable brokers than the replication factor is INVALID_REPLICATION_FACTOR.
"""
from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any


class InvalidReplicationFactor(Exception):
    """The replication factor cannot be met; the message is Kafka's."""


class InvalidReplicaAssignment(Exception):
    """A replica list given by hand (CreateTopics, CreatePartitions, a reassignment) is not
    valid; the message is Kafka's."""


def check_manual_assignment(registered: Collection[int], replicas: list[int], rf: int | None = None) -> None:
    """Kafka's validateManualPartitionAssignment: not empty, every broker registered (fenced
    ones too), none twice, and ``rf`` replicas when the topic's other partitions fix it."""
    if not replicas:
        raise InvalidReplicaAssignment("The manual partition assignment includes an empty replica list.")
    for b in sorted(replicas):
        if b not in registered:
            raise InvalidReplicaAssignment("The manual partition assignment "
                                           f"includes broker {b}, but no such broker is registered.")
    if len(set(replicas)) != len(replicas):
        dup = next(b for b in replicas if replicas.count(b) > 1)
        raise InvalidReplicaAssignment("The manual partition assignment "
                                       f"includes the broker {dup} more than once.")
    if rf is not None and len(replicas) != rf:
        raise InvalidReplicaAssignment(
            f"The manual partition assignment includes a partition with {len(replicas)} replica(s), "
            f"but this is not consistent with previous partitions, which have {rf} replica(s).")


@dataclass(frozen=True)
class UsableBroker:
    broker_id: int
    rack: str | None


class _Rack:
    """A rack's brokers. Within one partition each is handed out at most once, starting one
    further than for the previous partition (from a random first start)."""

    def __init__(self, brokers: list[int], rng: Any):
        self.brokers = brokers
        self.offset = rng.randrange(len(brokers))
        self.epoch = -1  # the partition being placed
        self.index = 0  # brokers handed out for it

    def next(self, epoch: int) -> int:
        """The next broker for partition ``epoch``, or -1 once all were handed out."""
        if epoch != self.epoch:
            self.epoch, self.index = epoch, 0
            self.offset = (self.offset + 1) % len(self.brokers)
        if self.index >= len(self.brokers):
            return -1
        broker = self.brokers[(self.offset + self.index) % len(self.brokers)]
        self.index += 1
        return broker


class StripedReplicaPlacer:
    """Place ``num_partitions`` partitions of ``replication_factor`` replicas each."""

    def __init__(self, rng: Any):
        self.rng = rng  # a random.Random: the only source of randomness

    def place(self, brokers: list[UsableBroker], num_partitions: int,
              replication_factor: int) -> list[list[int]]:
        if replication_factor <= 0:
            raise InvalidReplicationFactor(
                f"Invalid replication factor {replication_factor}: the replication factor must be "
                "positive.")
        if not brokers:
            raise InvalidReplicationFactor("All brokers are currently fenced.")
        if replication_factor > len(brokers):
            raise InvalidReplicationFactor(
                f"The target replication factor of {replication_factor} cannot be reached because "
                f"only {len(brokers)} broker(s) are registered.")
        by_rack: dict[str | None, list[int]] = {}
        for b in sorted(brokers, key=lambda b: b.broker_id):
            by_rack.setdefault(b.rack, []).append(b.broker_id)
        names = sorted(by_rack, key=lambda n: (n is None, n or ""))
        racks = {n: _Rack(by_rack[n], self.rng) for n in names}
        offset = self.rng.randrange(len(names))
        out = []
        for placed in range(num_partitions):
            if placed and placed % len(brokers) == 0 and len(brokers) > 1:
                # A full round: reshuffle so the next round does not repeat this one.
                self.rng.shuffle(names)
                for rack in racks.values():
                    self.rng.shuffle(rack.brokers)
            out.append(_place_one([racks[n] for n in names], offset % len(names), replication_factor,
                                  placed))
            offset += 1
        return out


def _place_one(racks: list[_Rack], first: int, replication_factor: int, epoch: int) -> list[int]:
    """One broker per rack per turn round the racks from ``first``, skipping racks whose
    brokers are all used for this partition."""
    replicas: list[int] = []
    index = first
    while len(replicas) < replication_factor:
        broker = racks[index].next(epoch)
        if broker >= 0:
            replicas.append(broker)
        index = (index + 1) % len(racks)
    return replicas
