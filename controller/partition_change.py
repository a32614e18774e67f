"""One partition's next state: elections, ISR and ELR changes, as one PartitionChangeRecord.

Theory of operation. Every change to a partition (a broker fenced or shutting down, an
AlterPartition from the leader, a preferred or unclean election, a broker coming back to a
partition with no leader) is expressed as targets over the current PartitionState: the
target ISR, the election kind, the target leader recovery state, the replicas known to have
shut down uncleanly, the target replicas with those being added and removed by a
reassignment (KIP-455). ``PartitionChange.build()`` then derives, in Kafka's order
(PartitionChangeBuilder):

0. a reassignment in progress completes once the target ISR, without the replicas being
   removed, holds every replica that stays: the assignment becomes the target, the removed
   replicas leave the ISR, adding and removing are cleared;
1. the ELR (KIP-966, when eligible.leader.replicas.version >= 1): while the target ISR is
   below min.insync.replicas the high watermark cannot advance (strict min ISR), so every
   replica that leaves the ISR still holds everything below it and is *eligible*; the ELR is
   (ELR + current ISR) - target ISR - unclean shutdowns, and is cleared once the ISR is
   back to min ISR;
2. the leader: keep the current one if it may still lead; else the first replica in
   assignment order that is in the target ISR (or in the ELR when the ISR is empty) and is
   acceptable (live: registered, unfenced, not shutting down); else, with ISR and ELR both
   empty, the replica balanced recovery chose (``set_recovery_leader``: the most complete
   live replica, controller.balanced_recovery); else, for an UNCLEAN election only, the last
   known leader (lastKnownElr holds the one broker that led last) if it is live, then any
   live replica; else NO_LEADER (-1), the partition is offline. A leader taken from the ELR
   becomes the only ISR member; an unclean or recovery leader becomes the only ISR member
   and the partition RECOVERING;
3. the ISR (it may be empty only with ELR), the last known leader (set when the ISR first
   empties, cleared once the partition has a leader), the leader recovery state;
4. the assignment (replicas, adding, removing). A replica that leaves it bumps the leader
   epoch even when the leader stays, so whatever the removed replica still sends is fenced.

A change that changes nothing is no record at all. Replaying the record (PartitionState.merge)
bumps the leader epoch when the leader field is set and the partition epoch always.

Invariants of the result: the ISR is a subset of the replicas and contains the leader (or
is empty with no leader); the ELR is a subset of the replicas and does not overlap the ISR;
a leader is acceptable, or was the leader before and is acceptable still.
"""
from __future__ import annotations

import enum
from collections.abc import Callable, Iterable

from metadata.image import NO_LEADER, NO_LEADER_CHANGE, RECOVERED, RECOVERING, PartitionState
from protocol import messages as M


class Election(enum.Enum):
    PREFERRED = "preferred"  # the preferred replica when it may lead; otherwise as ONLINE
    ONLINE = "online"  # stay online from the ISR (or the ELR), never lose committed data
    UNCLEAN = "unclean"  # as ONLINE, then any live replica (data may be lost: RECOVERING)


class PartitionChange:
    """Targets for one partition; ``build()`` returns the PartitionChangeRecord or None."""

    def __init__(self, partition: PartitionState, topic_id: bytes, partition_id: int,
                 is_acceptable_leader: Callable[[int], bool], min_isr: int, elr_enabled: bool):
        self.partition = partition
        self.topic_id = topic_id
        self.partition_id = partition_id
        self.is_acceptable_leader = is_acceptable_leader
        self.min_isr = min_isr
        self.elr_enabled = elr_enabled
        self.election = Election.ONLINE
        self.target_isr = list(partition.isr)
        self.target_replicas = list(partition.replicas)
        self.target_adding = list(partition.adding_replicas)
        self.target_removing = list(partition.removing_replicas)
        self.target_elr = list(partition.elr)
        self.target_last_known_elr = list(partition.last_known_elr)
        self.target_leader_recovery_state = partition.leader_recovery_state
        self.unclean_shutdown_replicas: frozenset[int] = frozenset()
        self.recovery_leader: int | None = None

    # ---- targets -----------------------------------------------------------------------
    def set_target_isr(self, isr: Iterable[int]) -> PartitionChange:
        self.target_isr = list(isr)
        return self

    def set_target_replicas(self, replicas: Iterable[int]) -> PartitionChange:
        self.target_replicas = list(replicas)
        return self

    def set_target_adding(self, replicas: Iterable[int]) -> PartitionChange:
        self.target_adding = list(replicas)
        return self

    def set_target_removing(self, replicas: Iterable[int]) -> PartitionChange:
        self.target_removing = list(replicas)
        return self

    def set_election(self, election: Election) -> PartitionChange:
        self.election = election
        return self

    def set_target_leader_recovery_state(self, state: int) -> PartitionChange:
        self.target_leader_recovery_state = state
        return self

    def set_unclean_shutdown_replicas(self, replicas: Iterable[int]) -> PartitionChange:
        self.unclean_shutdown_replicas = frozenset(replicas)
        return self

    def set_recovery_leader(self, replica: int) -> PartitionChange:
        """Balanced recovery's choice, elected (uncleanly) if ISR and ELR are still empty."""
        self.recovery_leader = replica
        return self

    # ---- the election ------------------------------------------------------------------
    def _valid_new_leader(self, replica: int) -> bool:
        """In the target ISR, or in the ELR while the ISR is empty, and live."""
        in_isr = replica in self.target_isr
        in_elr = not self.target_isr and replica in self.target_elr
        return (in_isr or in_elr) and self.is_acceptable_leader(replica)

    def _recovery_leader(self) -> int | None:
        """ISR and ELR empty: balanced recovery's choice if it may lead, and for an UNCLEAN
        election the one last known leader if it is live again."""
        if not self.elr_enabled or self.target_elr or self.target_isr:
            return None
        if self.recovery_leader is not None:
            return self.recovery_leader if self.is_acceptable_leader(self.recovery_leader) else None
        if self.election is not Election.UNCLEAN or len(self.partition.last_known_elr) != 1:
            return None
        candidate = self.partition.last_known_elr[0]
        return candidate if self.is_acceptable_leader(candidate) else None

    def elect_leader(self) -> tuple[int, bool]:
        """(leader, unclean) for the election kind; NO_LEADER when nobody may lead."""
        current = self.partition.leader
        if self.election is Election.PREFERRED and self.target_replicas:
            preferred = self.target_replicas[0]
            if self._valid_new_leader(preferred):
                return preferred, False
        if current != NO_LEADER and self._valid_new_leader(current):
            return current, False
        for replica in self.target_replicas:
            if self._valid_new_leader(replica):
                return replica, False
        recovery = self._recovery_leader()
        if recovery is not None:
            return recovery, True
        if self.election is Election.UNCLEAN:
            for replica in self.target_replicas:
                if self.is_acceptable_leader(replica):
                    return replica, True
        return NO_LEADER, False

    # ---- building the record -----------------------------------------------------------
    def build(self) -> M.PartitionChangeRecord | None:
        p = self.partition
        record = M.PartitionChangeRecord(topic_id=self.topic_id, partition_id=self.partition_id)
        self._complete_reassignment_if_needed()
        self._populate_target_elr()
        self._try_election(record)
        if record.leader == NO_LEADER_CHANGE and not set(p.replicas) <= set(self.target_replicas):
            # A replica leaves the assignment: a new leader epoch fences what it may still send.
            record.leader = p.leader
        self._update_record_elr(record)
        if record.isr is None and (self.target_isr or self.elr_enabled) and self.target_isr != p.isr:
            record.isr = list(self.target_isr)
        self._update_last_known_leader(record)
        if self.target_replicas and self.target_replicas != p.replicas:
            record.replicas = list(self.target_replicas)
        if self.target_removing != p.removing_replicas:
            record.removing_replicas = list(self.target_removing)
        if self.target_adding != p.adding_replicas:
            record.adding_replicas = list(self.target_adding)
        if self.target_leader_recovery_state != p.leader_recovery_state:
            record.leader_recovery_state = self.target_leader_recovery_state
        return None if _is_no_op(record) else record

    def _complete_reassignment_if_needed(self) -> None:
        """A reassignment completes once the target ISR, without the replicas being removed,
        holds every replica that stays (PartitionReassignmentReplicas.maybeCompleteReassignment):
        the assignment becomes the target and the removed replicas leave the ISR."""
        removing, adding = self.target_removing, self.target_adding
        if not removing and not adding:
            return
        isr = [r for r in self.target_isr if r not in removing]
        replicas = [r for r in self.target_replicas if r not in removing]
        if not isr or not replicas or not set(replicas) <= set(isr):
            return
        self.target_isr, self.target_replicas = isr, replicas
        self.target_removing, self.target_adding = [], []

    def _populate_target_elr(self) -> None:
        if not self.elr_enabled:
            return
        if len(self.target_isr) >= self.min_isr:
            self.target_elr, self.target_last_known_elr = [], []
            return
        isr = set(self.target_isr)
        assigned = set(self.target_replicas)
        candidates = (set(self.target_elr) | set(self.partition.isr)) & assigned
        self.target_elr = sorted(r for r in candidates
                                 if r not in isr and r not in self.unclean_shutdown_replicas)
        candidates |= set(self.target_last_known_elr)
        elr = set(self.target_elr)
        self.target_last_known_elr = sorted(r for r in candidates if r not in isr and r not in elr)

    def _try_election(self, record) -> None:
        leader, unclean = self.elect_leader()
        if leader == self.partition.leader:
            return
        if leader in self.target_elr:
            # Elected from the ELR: it becomes the whole ISR and leaves the ELR.
            self.target_isr = [leader]
            self.target_elr = [r for r in self.target_elr if r != leader]
        record.leader = leader
        if unclean:
            # Whatever the new leader lacks is lost: it alone is the ISR, and it recovers.
            record.isr = [leader]
            self.target_leader_recovery_state = RECOVERING

    def _update_record_elr(self, record) -> None:
        p = self.partition
        if record.isr is not None or not self.elr_enabled:  # an unclean election, or ELR off
            self.target_elr, self.target_last_known_elr = [], []
        if self.target_elr != p.elr:
            record.eligible_leader_replicas = list(self.target_elr)

    def _update_last_known_leader(self, record) -> None:
        """lastKnownElr holds the leader of the moment the ISR emptied, until a leader is back."""
        if not self.elr_enabled:
            return
        p = self.partition
        if record.isr is not None and not record.isr:
            if p.leader != NO_LEADER and p.last_known_elr != [p.leader]:
                record.last_known_elr = [p.leader]
        elif p.last_known_elr and (record.leader >= 0 or
                                   (p.leader != NO_LEADER and record.leader != NO_LEADER)):
            record.last_known_elr = []


def _is_no_op(record) -> bool:
    return (record.isr is None and record.leader == NO_LEADER_CHANGE and record.replicas is None
            and record.removing_replicas is None and record.adding_replicas is None
            and record.leader_recovery_state == -1 and record.eligible_leader_replicas is None
            and record.last_known_elr is None and record.directories is None)


__all__ = ["Election", "PartitionChange", "NO_LEADER", "NO_LEADER_CHANGE", "RECOVERED", "RECOVERING"]
