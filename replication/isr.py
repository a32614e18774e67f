"""Partition metadata as the replication core sees it, and the leader's ISR state machine.

Theory of operation. The controller owns the ISR (KIP-497): a leader only *proposes* a change
through AlterPartition and learns the result from the answer or from the replayed metadata.
While a proposal is in flight the leader's ``partition_state`` is a pending state; exactly one
proposal per partition is in flight at a time (``is_inflight`` blocks further expand/shrink).

| state                    | isr                  | maximal_isr                | is_inflight |
|--------------------------|----------------------|----------------------------|-------------|
| CommittedPartitionState  | committed ISR        | = isr                      | False       |
| PendingExpandIsr         | last committed ISR   | committed ISR + new replica| True        |
| PendingShrinkIsr         | last committed ISR   | = last committed ISR       | True        |

The asymmetry is the safety argument: the maximal ISR is what the high watermark is computed
over and what acks=all counts, so it must always be a superset of every ISR the controller
may commit. A pending expansion counts the new replica at once (a stricter HW condition, so a
rejected expansion never advanced the HW); a pending shrink keeps the outgoing replicas until
the controller confirms (a rejected shrink never let the HW pass a replica still required).

PartitionRegistration (the metadata image's view of one partition):

| field                  | meaning                                                             |
|------------------------|---------------------------------------------------------------------|
| replicas               | assignment; replicas[0] is the preferred leader                     |
| isr                    | committed in-sync replicas (contains the leader, subset of replicas)|
| leader                 | broker id or NO_LEADER (-1)                                         |
| leader_epoch           | bumped on every leader change; strictly increasing                  |
| partition_epoch        | bumped on every change (ISR-only too); the AlterPartition CAS token  |
| leader_recovery_state  | RECOVERED, or RECOVERING after an unclean election                  |

LeaderAndIsr (an AlterPartition proposal, and the controller's answer):

| field                 | meaning                                                              |
|-----------------------|----------------------------------------------------------------------|
| leader, leader_epoch  | the proposing leader and its epoch                                   |
| isr_with_epochs       | ((broker id, broker epoch), ...) sorted by id; epoch -1 when unknown |
| leader_recovery_state | RECOVERED / RECOVERING                                               |
| partition_epoch       | proposal: the epoch it was based on; answer: the committed epoch    |
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

RECOVERED = 0
RECOVERING = 1
NO_LEADER = -1


@dataclass(frozen=True)
class PartitionRegistration:
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int
    partition_epoch: int
    leader_recovery_state: int = RECOVERED


@dataclass(frozen=True)
class LeaderAndIsr:
    leader: int
    leader_epoch: int
    isr_with_epochs: tuple[tuple[int, int], ...]
    leader_recovery_state: int
    partition_epoch: int

    @property
    def isr(self) -> tuple[int, ...]:
        return tuple(broker_id for broker_id, _ in self.isr_with_epochs)

    @staticmethod
    def build(leader: int, leader_epoch: int, isr_with_epochs, leader_recovery_state: int,
              partition_epoch: int) -> LeaderAndIsr:
        """A LeaderAndIsr with ``isr_with_epochs`` sorted by broker id, as the invariant wants."""
        return LeaderAndIsr(leader, leader_epoch, tuple(sorted(isr_with_epochs)), leader_recovery_state,
                            partition_epoch)


@dataclass(frozen=True)
class CommittedPartitionState:
    isr: frozenset[int]
    leader_recovery_state: int = RECOVERED
    is_inflight: Literal[False] = field(default=False, init=False)

    @property
    def maximal_isr(self) -> frozenset[int]:
        return self.isr


class _Pending:
    """An AlterPartition in flight: the committed ISR and recovery state are the last committed
    state's until the controller answers."""

    last_committed_state: CommittedPartitionState

    @property
    def isr(self) -> frozenset[int]:
        return self.last_committed_state.isr

    @property
    def leader_recovery_state(self) -> int:
        return self.last_committed_state.leader_recovery_state


@dataclass(frozen=True)
class PendingExpandIsr(_Pending):
    new_in_sync_replica_id: int
    sent: LeaderAndIsr
    last_committed_state: CommittedPartitionState
    is_inflight: Literal[True] = field(default=True, init=False)

    @property
    def maximal_isr(self) -> frozenset[int]:
        # Counted at once: a stricter HW condition, safe if the controller rejects it.
        return self.last_committed_state.isr | {self.new_in_sync_replica_id}


@dataclass(frozen=True)
class PendingShrinkIsr(_Pending):
    outgoing_replica_ids: frozenset[int]
    sent: LeaderAndIsr
    last_committed_state: CommittedPartitionState
    is_inflight: Literal[True] = field(default=True, init=False)

    @property
    def maximal_isr(self) -> frozenset[int]:
        # Not shrunk until committed: the HW may not pass a replica that is still required.
        return self.last_committed_state.isr


@dataclass(frozen=True)
class PendingLeaderRecovery(_Pending):
    """A RECOVERING leader's proposal to mark the partition RECOVERED, ISR unchanged (KIP-704).

    Kafka keeps this inside a plain in-flight state; a class of its own keeps the rule
    "nothing expands until the recovery is committed" visible.
    """

    sent: LeaderAndIsr
    last_committed_state: CommittedPartitionState
    is_inflight: Literal[True] = field(default=True, init=False)

    @property
    def maximal_isr(self) -> frozenset[int]:
        return self.last_committed_state.isr


PartitionState = CommittedPartitionState | PendingExpandIsr | PendingShrinkIsr | PendingLeaderRecovery
