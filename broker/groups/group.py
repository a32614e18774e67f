"""A classic consumer group and its members: the data the classic protocol's state machine
(classic.py) works on, with the small rules that read only one group.

States (Kafka's ``ClassicGroupState``; the names are what DescribeGroups/ListGroups show):

    Empty               no members; offsets may exist (a "simple" group commits with generation -1)
    PreparingRebalance  the join phase: waiting for every known member to (re)send JoinGroup
    CompletingRebalance the join phase is over; waiting for the leader's SyncGroup
    Stable              assignments handed out; members heartbeat
    Dead                deleted, or its partition moved away; no request may touch it

Invariants:
    leader_id is None  <=>  members is empty
    static_members maps each group_instance_id to the member id of the one member holding it
    a member's join_waiter/sync_waiter is set only while its JoinGroup/SyncGroup is parked
"""
from __future__ import annotations

from dataclasses import dataclass, field

EMPTY = "Empty"
PREPARING_REBALANCE = "PreparingRebalance"
COMPLETING_REBALANCE = "CompletingRebalance"
STABLE = "Stable"
DEAD = "Dead"

# Kafka's ClassicGroupState.validPreviousStates.
_VALID_PREVIOUS = {
    EMPTY: {PREPARING_REBALANCE},
    PREPARING_REBALANCE: {STABLE, COMPLETING_REBALANCE, EMPTY},
    COMPLETING_REBALANCE: {PREPARING_REBALANCE},
    STABLE: {COMPLETING_REBALANCE},
    DEAD: {STABLE, PREPARING_REBALANCE, COMPLETING_REBALANCE, EMPTY, DEAD},
}


@dataclass
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]  # (name, metadata), in the member's order of preference
    assignment: bytes = b""
    join_waiter: object | None = None  # the parked JoinGroup (an opaque token of the shell)
    join_version: int = 0
    sync_waiter: object | None = None
    sync_version: int = 0
    is_new: bool = False  # joined in the current join phase with no member id yet
    heartbeat_deadline: int = 0  # ms; the session expires at this time

    def metadata(self, protocol: str | None) -> bytes:
        for name, data in self.protocols:
            if name == protocol:
                return data
        return b""

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        return [(n, bytes(m)) for n, m in protocols] == [(n, bytes(m)) for n, m in self.protocols]

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None


@dataclass
class ClassicGroup:
    group_id: str
    state: str = EMPTY
    previous_state: str | None = None
    state_timestamp: int = -1
    generation_id: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, Member] = field(default_factory=dict)  # in join order
    static_members: dict[str, str] = field(default_factory=dict)
    pending_members: dict[str, int] = field(default_factory=dict)  # member id -> expiry (ms)
    pending_sync: set[str] = field(default_factory=set)  # members yet to SyncGroup this generation
    join_deadline: int | None = None  # the join phase ends (rebalance timeout / initial delay)
    initial_delay_ms: int = 0  # the current slice of group.initial.rebalance.delay.ms
    initial_remaining_ms: int = 0  # rebalance time left for further slices
    new_member_added: bool = False
    sync_deadline: int | None = None  # members who have not synced by then are removed

    # ---- state ---------------------------------------------------------------------------

    def transition_to(self, state: str, now_ms: int) -> None:
        if self.state not in _VALID_PREVIOUS[state]:
            raise AssertionError(f"group {self.group_id}: illegal transition {self.state} -> {state}")
        self.previous_state = self.state
        self.state = state
        self.state_timestamp = now_ms

    def is_in(self, *states: str) -> bool:
        return self.state in states

    def can_rebalance(self) -> bool:
        return self.state in _VALID_PREVIOUS[PREPARING_REBALANCE]

    # ---- members -------------------------------------------------------------------------

    def add(self, member: Member) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id

    def remove(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        if member.group_instance_id is not None and \
                self.static_members.get(member.group_instance_id) == member_id:
            del self.static_members[member.group_instance_id]
        self.pending_sync.discard(member_id)
        if self.leader_id == member_id:
            # Prefer a member that has rejoined, so the join phase can complete with it.
            joined = [m.member_id for m in self.members.values() if m.join_waiter is not None]
            self.leader_id = next(iter(joined or self.members), None)
        return member

    def replace_static_member(self, instance_id: str, old_id: str, new_id: str) -> Member:
        """A static member rejoined without its member id: it keeps its place (and assignment)
        under a new member id; the old id is fenced."""
        member = self.members.pop(old_id)
        member.member_id = new_id
        self.members[new_id] = member
        self.static_members[instance_id] = new_id
        if self.leader_id == old_id:
            self.leader_id = new_id
        if old_id in self.pending_sync:
            self.pending_sync.discard(old_id)
            self.pending_sync.add(new_id)
        return member

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def has_all_members_joined(self) -> bool:
        return not self.pending_members and all(m.join_waiter is not None for m in self.members.values())

    def maybe_elect_new_joined_leader(self) -> bool:
        """Kafka's rule: the leader must be a member that rejoined in this join phase."""
        leader = self.members.get(self.leader_id) if self.leader_id else None
        if leader is not None and leader.join_waiter is not None:
            return True
        for m in self.members.values():
            if m.join_waiter is not None:
                self.leader_id = m.member_id
                return True
        return False

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    # ---- protocols -----------------------------------------------------------------------

    def candidate_protocols(self) -> list[str]:
        """Protocols every member supports, in the first member's order."""
        members = list(self.members.values())
        if not members:
            return []
        common = [n for n, _ in members[0].protocols]
        for m in members[1:]:
            names = {n for n, _ in m.protocols}
            common = [n for n in common if n in names]
        return common

    def supports_protocols(self, protocol_type: str, names: list[str]) -> bool:
        if not self.members:
            return bool(protocol_type) and bool(names)
        if protocol_type != self.protocol_type:
            return False
        candidates = set(self.candidate_protocols())
        return any(n in candidates for n in names)

    def select_protocol(self) -> str | None:
        """Each member votes for its most preferred protocol that all support; most votes
        wins (ties: the earliest in the first member's preference order)."""
        candidates = self.candidate_protocols()
        if not candidates:
            return None
        votes = dict.fromkeys(candidates, 0)
        for m in self.members.values():
            for name, _ in m.protocols:
                if name in votes:
                    votes[name] += 1
                    break
        return max(candidates, key=lambda n: votes[n])  # max keeps the first of equals

    def init_next_generation(self, now_ms: int) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.transition_to(COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.transition_to(EMPTY, now_ms)
        self.pending_sync = set(self.members)
