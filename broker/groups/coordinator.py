"""The group coordinator: Kafka's classic group protocol as a pure state machine.

Theory of operation. The core owns the groups and committed offsets of the
``__consumer_offsets`` partitions this broker leads. It is stepped with requests and with
the time (``now_ms``); it never sleeps, sends or writes. Every step returns ``Effects``:
records to append to a partition of ``__consumer_offsets`` and replies for parked
requests. A parked JoinGroup or SyncGroup is an opaque *waiter* the shell hands in (an
object holding an asyncio future there, any object in tests); the core stores it in the
member and hands it back with the response when the join or sync phase completes. The shell
appends the records first and releases the replies once the records are committed, so a
response never precedes its record.

What the core holds is the partition's log in two cuts. Group state (classic and consumer
groups) changes in the step that writes its records: it is the log up to the log end
offset, as later steps must see it. Committed offsets change only through
``apply_records``, which the shell calls once the high watermark passed the records (the
same replay that loads a partition): ``offsets`` is the log below the high watermark, so
an OffsetFetch never returns an offset a failover can lose. A commit changes nothing else
before that: even the "simple" group of a consumer without group management appears only
when its first offsets are applied.

Rebalance (one generation):

    Empty/Stable/CompletingRebalance --join, leave, expiry--> PreparingRebalance
        the join phase ends when every known member has rejoined (and no member id handed
        out with MEMBER_ID_REQUIRED is outstanding), or at the rebalance timeout (members
        that did not rejoin are removed); a new group waits group.initial.rebalance.delay.ms
        first, extended slice by slice while members keep arriving.
    PreparingRebalance --join phase ends--> CompletingRebalance (generation + 1, protocol
        chosen by vote, every member gets its JoinGroup response; the leader's lists all
        members) or Empty (nobody rejoined)
    CompletingRebalance --leader's SyncGroup--> Stable (GroupMetadata record appended, then
        every parked SyncGroup answered with its assignment)

Timers are deadlines held in the groups and members; ``next_deadline()`` says when to
``tick`` next. A member's session expires unless it heartbeats (members parked in a
JoinGroup or SyncGroup count as alive, except members new to this join phase); members
that never send SyncGroup within the rebalance timeout after the join phase are removed.

Groups of the consumer group protocol (KIP-848) live beside the classic ones in
``self.consumer`` (broker/groups/consumer_group.py); a group id is one or the other, and
both share the committed offsets and the timers here.

Offsets retention (offsets.retention.minutes) is a pass the shell runs every
offsets.retention.check.interval.ms: ``cleanup_group_metadata`` writes tombstones for the
offsets broker/groups/retention.py finds expired, and deletes each Empty group left with no
offsets (Kafka's cleanupGroupMetadata), so both stay gone after a reload.
"""
from __future__ import annotations

import random
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from broker.groups import retention, storage
from broker.groups.consumer_group import (
    PROTOCOL_TYPE,
    ConsumerGroup,
    ConsumerGroupConfig,
    ConsumerGroups,
    Topics,
)
from broker.groups.group import (
    COMPLETING_REBALANCE,
    DEAD,
    EMPTY,
    PREPARING_REBALANCE,
    STABLE,
    ClassicGroup,
    Member,
)
from protocol import messages as M
from protocol.errors import Error

NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000  # Kafka's ClassicGroupMember.NEW_MEMBER_JOIN_TIMEOUT_MS
UNKNOWN_MEMBER_ID = ""
NO_GENERATION = -1
INT64_MAX = (1 << 63) - 1


@dataclass
class CoordinatorConfig:
    initial_rebalance_delay_ms: int = 3000  # group.initial.rebalance.delay.ms
    min_session_timeout_ms: int = 6000  # group.min.session.timeout.ms
    max_session_timeout_ms: int = 1800000  # group.max.session.timeout.ms
    max_size: int = 2**31 - 1  # group.max.size
    offset_metadata_max_bytes: int = 4096  # offset.metadata.max.bytes
    offsets_retention_ms: int = 10080 * 60000  # offsets.retention.minutes, in ms
    consumer: ConsumerGroupConfig = field(default_factory=ConsumerGroupConfig)


@dataclass
class Effects:
    appends: list[tuple[int, list[tuple[bytes, bytes | None]]]] = field(default_factory=list)
    replies: list[tuple[Any, Any]] = field(default_factory=list)
    # What happened to a group's membership, for the operator's log (Kafka logs the same at INFO).
    events: list[str] = field(default_factory=list)

    def event(self, text: str) -> None:
        self.events.append(text)

    def append(self, partition: int, records: list[tuple[bytes, bytes | None]]) -> None:
        if records:
            self.appends.append((partition, records))

    def reply(self, waiter: Any, response: Any) -> None:
        if waiter is not None:
            self.replies.append((waiter, response))


class GroupCoordinator:
    def __init__(self, config: CoordinatorConfig | None = None, rng: random.Random | None = None):
        self.config = config or CoordinatorConfig()
        self.rng = rng or random.Random(0)
        self.num_partitions = 0  # of __consumer_offsets; 0 while it does not exist
        self.owned: set[int] = set()
        self.loading: set[int] = set()
        self.groups: dict[str, ClassicGroup] = {}
        self.offsets: dict[str, dict[tuple[str, int], storage.OffsetAndMetadata]] = {}
        self.consumer = ConsumerGroups(self, self.config.consumer)

    # ---- partitions ----------------------------------------------------------------------

    def partition_for(self, group_id: str) -> int:
        return storage.partition_for(group_id, self.num_partitions)

    def coordinator_error(self, group_id: str) -> int:
        if self.num_partitions <= 0:
            return Error.COORDINATOR_NOT_AVAILABLE
        p = self.partition_for(group_id)
        if p in self.loading:
            return Error.COORDINATOR_LOAD_IN_PROGRESS
        if p not in self.owned:
            return Error.NOT_COORDINATOR
        return Error.NONE

    def begin_load(self, partition: int) -> None:
        self.loading.add(partition)

    def complete_load(self, partition: int, state: storage.GroupState, now_ms: int) -> None:
        """Take over a partition whose records were replayed into ``state``. A group with
        members comes back Stable; each member's session starts now. A group keeps the time
        of its last state change from its record (offsets retention counts from it)."""
        self.loading.discard(partition)
        self.owned.add(partition)
        for group_id, offsets in state.offsets.items():
            self.offsets[group_id] = dict(offsets)
        for group_id, value in state.groups.items():
            group = ClassicGroup(group_id, state_timestamp=value.current_state_timestamp,
                                 generation_id=value.generation,
                                 protocol_type=value.protocol_type, protocol_name=value.protocol,
                                 leader_id=value.leader if value.members else None)
            for m in value.members:
                member = Member(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                                m.rebalance_timeout, m.session_timeout, value.protocol_type,
                                [(value.protocol or "", bytes(m.subscription))], bytes(m.assignment),
                                heartbeat_deadline=now_ms + m.session_timeout)
                group.members[member.member_id] = member
                if member.group_instance_id is not None:
                    group.static_members[member.group_instance_id] = member.member_id
            if group.members:
                group.state = STABLE
            self.groups[group_id] = group
        for group_id, records in state.consumer_groups.items():
            self.consumer.load(group_id, records, now_ms)
        for group_id in state.offsets:
            self._ensure_simple_group(group_id, now_ms)

    def _ensure_simple_group(self, group_id: str, now_ms: int) -> None:
        """Offsets with no group record: the group of a consumer without group management."""
        if group_id in self.offsets and group_id not in self.groups and group_id not in self.consumer.groups:
            self.groups[group_id] = ClassicGroup(group_id, state_timestamp=now_ms, protocol_type="")

    def unload(self, partition: int) -> Effects:
        """The partition moved away: its groups die here; parked requests get NOT_COORDINATOR."""
        fx = Effects()
        self.loading.discard(partition)
        self.owned.discard(partition)
        for group_id in [g for g in self.groups if self.partition_for(g) == partition]:
            group = self.groups.pop(group_id)
            for m in group.members.values():
                fx.reply(m.join_waiter, self.join_error(m.join_version, Error.NOT_COORDINATOR, m.member_id))
                fx.reply(m.sync_waiter, M.SyncGroupResponse(error_code=Error.NOT_COORDINATOR))
                m.join_waiter = m.sync_waiter = None
            group.state = DEAD
        for group_id in [g for g in self.offsets if self.partition_for(g) == partition]:
            del self.offsets[group_id]
        for group_id in [g for g in self.consumer.groups if self.partition_for(g) == partition]:
            del self.consumer.groups[group_id]
        return fx

    def apply_records(self, records: list[tuple[bytes, bytes | None]], now_ms: int = 0) -> None:
        """Committed records of this partition, in log order: offset commits and their
        tombstones take effect, and a group left with offsets but no group becomes a simple
        group, as loading makes it (group records describe state the core already holds)."""
        scratch = storage.GroupState(offsets=self.offsets)
        committed_to: set[str] = set()
        for key, value in records:
            scratch.replay(key, value)
            version, k = storage.parse_key(key)
            if version <= 1 and value is not None:
                committed_to.add(k.group)
        for group_id in committed_to:
            self._ensure_simple_group(group_id, now_ms)

    # ---- JoinGroup -----------------------------------------------------------------------

    def join_group(self, req, version: int, client_id: str, client_host: str, waiter: Any,
                   now_ms: int) -> Effects:
        fx = Effects()
        member_id = req.member_id
        instance_id = req.group_instance_id if version >= 5 else None
        code = self._validate_join(req)
        if code != Error.NONE:
            fx.reply(waiter, self.join_error(version, code, member_id))
            return fx
        consumer_group = self.consumer.groups.get(req.group_id)
        if consumer_group is not None:
            if consumer_group.members:
                fx.reply(waiter, self.join_error(version, Error.INCONSISTENT_GROUP_PROTOCOL, member_id))
                return fx
            # An empty consumer group becomes a classic group.
            fx.append(self.partition_for(req.group_id), self.consumer.delete(consumer_group))
        group = self.groups.get(req.group_id)
        if group is None:
            if member_id != UNKNOWN_MEMBER_ID:
                fx.reply(waiter, self.join_error(version, Error.UNKNOWN_MEMBER_ID, member_id))
                return fx
            group = self.groups[req.group_id] = ClassicGroup(req.group_id, state_timestamp=now_ms)
        protocols = [(p.name, bytes(p.metadata)) for p in req.protocols]
        rebalance_timeout = req.rebalance_timeout_ms if version >= 1 else req.session_timeout_ms
        if group.state == DEAD:
            fx.reply(waiter, self.join_error(version, Error.COORDINATOR_NOT_AVAILABLE, member_id))
        elif not group.supports_protocols(req.protocol_type, [n for n, _ in protocols]):
            fx.reply(waiter, self.join_error(version, Error.INCONSISTENT_GROUP_PROTOCOL, member_id))
        elif member_id == UNKNOWN_MEMBER_ID:
            self._join_new_member(fx, group, req, version, instance_id, client_id, client_host,
                                  rebalance_timeout, protocols, waiter, now_ms)
        else:
            self._join_existing_member(fx, group, req, version, instance_id, client_id, client_host,
                                       rebalance_timeout, protocols, waiter, now_ms)
        if not group.members and not group.pending_members and group.state == EMPTY and \
                req.group_id not in self.offsets and group.generation_id == 0:
            del self.groups[req.group_id]  # a failed first join leaves nothing behind
        return fx

    def _validate_join(self, req) -> int:
        if not req.group_id:
            return Error.INVALID_GROUP_ID
        code = self.coordinator_error(req.group_id)
        if code != Error.NONE:
            return code
        c = self.config
        if not c.min_session_timeout_ms <= req.session_timeout_ms <= c.max_session_timeout_ms:
            return Error.INVALID_SESSION_TIMEOUT
        return Error.NONE

    def new_member_id(self, prefix: str) -> str:
        return self._new_member_id(prefix)

    def _new_member_id(self, prefix: str) -> str:
        return f"{prefix}-{uuid.UUID(int=self.rng.getrandbits(128), version=4)}"

    def _join_new_member(self, fx, group, req, version, instance_id, client_id, client_host,
                         rebalance_timeout, protocols, waiter, now_ms) -> None:
        if instance_id is None and len(group.members) + len(group.pending_members) >= self.config.max_size:
            fx.reply(waiter, self.join_error(version, Error.GROUP_MAX_SIZE_REACHED, UNKNOWN_MEMBER_ID))
            return
        new_id = self._new_member_id(instance_id if instance_id is not None else client_id)
        if instance_id is not None:
            old_id = group.static_members.get(instance_id)
            if old_id is not None:
                self._replace_static_member(fx, group, instance_id, old_id, new_id, req, version,
                                            rebalance_timeout, protocols, waiter, now_ms)
                return
        elif version >= 4:
            # KIP-394: hand out the member id first; the member joins with it.
            group.pending_members[new_id] = now_ms + req.session_timeout_ms
            fx.reply(waiter, self.join_error(version, Error.MEMBER_ID_REQUIRED, new_id))
            return
        member = Member(new_id, instance_id, client_id, client_host, rebalance_timeout,
                        req.session_timeout_ms, req.protocol_type, protocols)
        self._add_member_and_rebalance(fx, group, member, version, waiter, now_ms)

    def _join_existing_member(self, fx, group, req, version, instance_id, client_id, client_host,
                              rebalance_timeout, protocols, waiter, now_ms) -> None:
        member_id = req.member_id
        if member_id in group.pending_members:
            del group.pending_members[member_id]
            member = Member(member_id, instance_id, client_id, client_host, rebalance_timeout,
                            req.session_timeout_ms, req.protocol_type, protocols)
            self._add_member_and_rebalance(fx, group, member, version, waiter, now_ms)
            return
        code = self._validate_member(group, member_id, instance_id)
        if code != Error.NONE:
            fx.reply(waiter, self.join_error(version, code, member_id))
            return
        member = group.members[member_id]
        if group.state == PREPARING_REBALANCE:
            self._update_member_and_rebalance(fx, group, member, req, version, rebalance_timeout,
                                              protocols, waiter, now_ms)
        elif group.state == COMPLETING_REBALANCE:
            if member.matches(protocols):
                # A retry of a JoinGroup whose response was lost: the current generation again.
                fx.reply(waiter, self._join_response(group, member, version, group.is_leader(member_id)))
            else:
                self._update_member_and_rebalance(fx, group, member, req, version, rebalance_timeout,
                                                  protocols, waiter, now_ms)
        elif group.state == STABLE:
            if group.is_leader(member_id) or not member.matches(protocols):
                # The leader rejoins to react to metadata changes; new metadata needs a rebalance.
                self._update_member_and_rebalance(fx, group, member, req, version, rebalance_timeout,
                                                  protocols, waiter, now_ms)
            else:
                fx.reply(waiter, self._join_response(group, member, version, False))
        else:
            fx.reply(waiter, self.join_error(version, Error.UNKNOWN_MEMBER_ID, member_id))

    def _replace_static_member(self, fx, group, instance_id, old_id, new_id, req, version,
                               rebalance_timeout, protocols, waiter, now_ms) -> None:
        old = group.members[old_id]
        fx.reply(old.join_waiter, self.join_error(old.join_version, Error.FENCED_INSTANCE_ID, old_id))
        fx.reply(old.sync_waiter, M.SyncGroupResponse(error_code=Error.FENCED_INSTANCE_ID))
        old.join_waiter = old.sync_waiter = None
        old_protocols = old.protocols
        member = group.replace_static_member(instance_id, old_id, new_id)
        member.protocols = protocols
        member.rebalance_timeout_ms = rebalance_timeout
        member.session_timeout_ms = req.session_timeout_ms
        member.heartbeat_deadline = now_ms + req.session_timeout_ms
        if group.state == STABLE:
            if group.select_protocol() == group.protocol_name:
                # KIP-345: same protocol, same assignment; no rebalance. The new id is persisted.
                is_leader = group.is_leader(new_id)
                fx.append(self.partition_for(group.group_id), [self._group_record(group)])
                fx.reply(waiter, self._join_response(group, member, version, is_leader,
                                                     skip_assignment=is_leader))
                return
            member.protocols = protocols
            member.join_waiter, member.join_version = waiter, version
            self._prepare_rebalance(fx, group, now_ms, f"static member {instance_id} rejoined with "
                                    "other protocols")
        elif group.state == COMPLETING_REBALANCE:
            member.join_waiter, member.join_version = waiter, version
            self._prepare_rebalance(fx, group, now_ms, f"static member {instance_id} rejoined")
        elif group.state == PREPARING_REBALANCE:
            member.join_waiter, member.join_version = waiter, version
            self._maybe_complete_join(fx, group, now_ms)
        else:
            member.protocols = old_protocols
            fx.reply(waiter, self.join_error(version, Error.UNKNOWN_MEMBER_ID, new_id))

    def _add_member_and_rebalance(self, fx, group, member, version, waiter, now_ms) -> None:
        member.is_new = True
        member.join_waiter, member.join_version = waiter, version
        member.heartbeat_deadline = now_ms + NEW_MEMBER_JOIN_TIMEOUT_MS
        group.add(member)
        if group.state == PREPARING_REBALANCE and group.previous_state == EMPTY:
            group.new_member_added = True
        self._maybe_prepare_rebalance_or_complete_join(fx, group, now_ms,
                                                       f"member {member.member_id} joined")

    def _update_member_and_rebalance(self, fx, group, member, req, version, rebalance_timeout,
                                     protocols, waiter, now_ms) -> None:
        if member.join_waiter is not None and member.join_waiter is not waiter:
            # A second JoinGroup from the same member: the first one is answered as superseded.
            fx.reply(member.join_waiter, self.join_error(member.join_version, Error.UNKNOWN_MEMBER_ID,
                                                          member.member_id))
        member.protocols = protocols
        member.rebalance_timeout_ms = rebalance_timeout
        member.session_timeout_ms = req.session_timeout_ms
        member.join_waiter, member.join_version = waiter, version
        self._maybe_prepare_rebalance_or_complete_join(fx, group, now_ms,
                                                       f"member {member.member_id} rejoined")

    def _maybe_prepare_rebalance_or_complete_join(self, fx, group, now_ms, reason: str) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(fx, group, now_ms, reason)
        else:
            self._maybe_complete_join(fx, group, now_ms)

    def _prepare_rebalance(self, fx, group: ClassicGroup, now_ms: int, reason: str) -> None:
        fx.event(f"preparing to rebalance group {group.group_id} in state {group.state} with old "
                 f"generation {group.generation_id} ({reason})")
        if group.state == COMPLETING_REBALANCE:
            # Members parked in SyncGroup must rejoin: their assignment is void.
            for m in group.members.values():
                m.assignment = b""
                fx.reply(m.sync_waiter, self.sync_error(m.sync_version, Error.REBALANCE_IN_PROGRESS))
                m.sync_waiter = None
        group.sync_deadline = None
        initial = group.state == EMPTY
        group.transition_to(PREPARING_REBALANCE, now_ms)
        if initial:
            delay = self.config.initial_rebalance_delay_ms
            group.initial_delay_ms = delay
            group.initial_remaining_ms = max(group.rebalance_timeout_ms() - delay, 0)
            group.new_member_added = False
            group.join_deadline = now_ms + delay
            return
        group.join_deadline = now_ms + group.rebalance_timeout_ms()
        self._maybe_complete_join(fx, group, now_ms)

    def _maybe_complete_join(self, fx, group, now_ms) -> None:
        if group.state == PREPARING_REBALANCE and group.previous_state != EMPTY and \
                group.has_all_members_joined():
            self._complete_join(fx, group, now_ms)

    def _complete_join(self, fx, group: ClassicGroup, now_ms: int) -> None:
        for m in [m for m in group.members.values() if m.join_waiter is None and not m.is_static]:
            fx.event(f"group {group.group_id}: member {m.member_id} did not rejoin in time; removing it")
            self._remove_member(fx, group, m.member_id)
        group.join_deadline = None
        if group.members and not group.maybe_elect_new_joined_leader():
            # Nobody rejoined: wait another rebalance timeout for sessions to expire.
            group.join_deadline = now_ms + group.rebalance_timeout_ms()
            return
        group.init_next_generation(now_ms)
        if group.members:
            fx.event(f"group {group.group_id}: generation {group.generation_id} ({group.protocol_name}) "
                     f"with {len(group.members)} members, leader {group.leader_id}")
        else:
            fx.event(f"group {group.group_id}: generation {group.generation_id} is empty")
        partition = self.partition_for(group.group_id)
        if group.state == EMPTY:
            fx.append(partition, [self._group_record(group)])
            return
        for m in group.members.values():
            if m.join_waiter is None:
                continue
            is_leader = group.is_leader(m.member_id)
            fx.reply(m.join_waiter, self._join_response(group, m, m.join_version, is_leader))
            m.join_waiter = None
            m.is_new = False
            m.heartbeat_deadline = now_ms + m.session_timeout_ms
        group.sync_deadline = now_ms + group.rebalance_timeout_ms()

    def _join_response(self, group, member, version, is_leader, skip_assignment=False):
        R = M.JoinGroupResponse
        members = []
        if is_leader:
            members = [R.JoinGroupResponseMember(member_id=m.member_id, group_instance_id=m.group_instance_id,
                                                 metadata=m.metadata(group.protocol_name))
                       for m in group.members.values()]
        return R(error_code=Error.NONE, generation_id=group.generation_id, protocol_type=group.protocol_type,
                 protocol_name=group.protocol_name, leader=group.leader_id or "", member_id=member.member_id,
                 members=members, skip_assignment=skip_assignment)

    @staticmethod
    def join_error(version: int, code: int, member_id: str):
        return M.JoinGroupResponse(error_code=code, generation_id=NO_GENERATION,
                                   protocol_name=None if version >= 7 else "", leader="",
                                   member_id=member_id, members=[])

    # ---- SyncGroup -----------------------------------------------------------------------

    def sync_group(self, req, version: int, waiter: Any, now_ms: int) -> Effects:
        fx = Effects()
        instance_id = req.group_instance_id if version >= 3 else None
        code = self.coordinator_error(req.group_id) if req.group_id else Error.INVALID_GROUP_ID
        group = self.groups.get(req.group_id)
        if code == Error.NONE:
            code = self._validate_generation(group, req.member_id, instance_id, req.generation_id)
        if code == Error.NONE and version >= 5 and (
                (req.protocol_type is not None and req.protocol_type != group.protocol_type)
                or (req.protocol_name is not None and req.protocol_name != group.protocol_name)):
            code = Error.INCONSISTENT_GROUP_PROTOCOL
        if code == Error.NONE and group.state == PREPARING_REBALANCE:
            code = Error.REBALANCE_IN_PROGRESS
        if code != Error.NONE:
            fx.reply(waiter, self.sync_error(version, code))
            return fx
        member = group.members[req.member_id]
        group.pending_sync.discard(member.member_id)
        if group.state == STABLE:
            fx.reply(waiter, self._sync_response(group, member))
            return fx
        # CompletingRebalance: park until the leader's assignments are in.
        member.sync_waiter, member.sync_version = waiter, version
        if group.is_leader(member.member_id):
            assignments = {a.member_id: bytes(a.assignment) for a in req.assignments}
            for m in group.members.values():
                m.assignment = assignments.get(m.member_id, b"")
            fx.append(self.partition_for(group.group_id), [self._group_record(group)])
            group.transition_to(STABLE, now_ms)
            fx.event(f"group {group.group_id}: generation {group.generation_id} is stable with the "
                     f"assignment of leader {member.member_id}")
            for m in group.members.values():
                fx.reply(m.sync_waiter, self._sync_response(group, m))
                m.sync_waiter = None
        return fx

    def _sync_response(self, group, member):
        return M.SyncGroupResponse(error_code=Error.NONE, protocol_type=group.protocol_type,
                                   protocol_name=group.protocol_name, assignment=member.assignment)

    @staticmethod
    def sync_error(version: int, code: int):
        return M.SyncGroupResponse(error_code=code, assignment=b"")

    def _validate_member(self, group: ClassicGroup, member_id: str, instance_id: str | None) -> int:
        if instance_id is not None:
            holder = group.static_members.get(instance_id)
            if holder is None:
                return Error.UNKNOWN_MEMBER_ID
            if holder != member_id:
                return Error.FENCED_INSTANCE_ID
            return Error.NONE
        return Error.NONE if member_id in group.members else Error.UNKNOWN_MEMBER_ID

    def _validate_generation(self, group, member_id, instance_id, generation_id) -> int:
        if group is None:
            return Error.UNKNOWN_MEMBER_ID
        if group.state == DEAD:
            return Error.COORDINATOR_NOT_AVAILABLE
        code = self._validate_member(group, member_id, instance_id)
        if code != Error.NONE:
            return code
        if generation_id != group.generation_id:
            return Error.ILLEGAL_GENERATION
        return Error.NONE

    # ---- Heartbeat and LeaveGroup --------------------------------------------------------

    def heartbeat(self, req, version: int, now_ms: int) -> int:
        instance_id = req.group_instance_id if version >= 3 else None
        code = self.coordinator_error(req.group_id) if req.group_id else Error.INVALID_GROUP_ID
        if code != Error.NONE:
            return code
        group = self.groups.get(req.group_id)
        code = self._validate_generation(group, req.member_id, instance_id, req.generation_id)
        if code != Error.NONE:
            return code
        if group.state == EMPTY:
            return Error.UNKNOWN_MEMBER_ID
        member = group.members[req.member_id]
        member.heartbeat_deadline = now_ms + member.session_timeout_ms
        return Error.REBALANCE_IN_PROGRESS if group.state == PREPARING_REBALANCE else Error.NONE

    def leave_group(self, group_id: str, members: list[tuple[str, str | None]],
                    now_ms: int) -> tuple[int, list[int], Effects]:
        """(top-level error, an error per (member id, group instance id), effects)."""
        fx = Effects()
        code = self.coordinator_error(group_id) if group_id else Error.INVALID_GROUP_ID
        if code != Error.NONE:
            return code, [code] * len(members), fx
        group = self.groups.get(group_id)
        if group is None:
            return Error.NONE, [Error.UNKNOWN_MEMBER_ID] * len(members), fx
        if group.state == DEAD:
            return Error.COORDINATOR_NOT_AVAILABLE, [Error.COORDINATOR_NOT_AVAILABLE] * len(members), fx
        errors = []
        for member_id, instance_id in members:
            if instance_id is not None:
                holder = group.static_members.get(instance_id)
                if holder is None:
                    errors.append(Error.UNKNOWN_MEMBER_ID)
                    continue
                if member_id != UNKNOWN_MEMBER_ID and holder != member_id:
                    errors.append(Error.FENCED_INSTANCE_ID)
                    continue
                member_id = holder
            elif member_id in group.pending_members:
                del group.pending_members[member_id]
                errors.append(Error.NONE)
                self._maybe_complete_join(fx, group, now_ms)
                continue
            elif member_id not in group.members:
                errors.append(Error.UNKNOWN_MEMBER_ID)
                continue
            errors.append(Error.NONE)
            self._remove_member_and_update_group(fx, group, member_id, now_ms,
                                                 f"member {member_id} left the group")
        return Error.NONE, errors, fx

    def _remove_member(self, fx, group: ClassicGroup, member_id: str) -> None:
        member = group.remove(member_id)
        if member is None:
            return
        fx.reply(member.join_waiter, self.join_error(member.join_version, Error.UNKNOWN_MEMBER_ID, member_id))
        fx.reply(member.sync_waiter, self.sync_error(member.sync_version, Error.UNKNOWN_MEMBER_ID))
        member.join_waiter = member.sync_waiter = None

    def _remove_member_and_update_group(self, fx, group, member_id, now_ms, reason: str) -> None:
        fx.event(f"group {group.group_id}: {reason}; removing it")
        self._remove_member(fx, group, member_id)
        if group.state in (STABLE, COMPLETING_REBALANCE):
            self._prepare_rebalance(fx, group, now_ms, reason)
        elif group.state == PREPARING_REBALANCE:
            self._maybe_complete_join(fx, group, now_ms)

    # ---- timers --------------------------------------------------------------------------

    def next_deadline(self) -> int | None:
        deadlines = []
        for group in self.groups.values():
            if group.join_deadline is not None:
                deadlines.append(group.join_deadline)
            if group.sync_deadline is not None:
                deadlines.append(group.sync_deadline)
            deadlines.extend(group.pending_members.values())
            deadlines.extend(m.heartbeat_deadline for m in group.members.values())
        consumer = self.consumer.next_deadline()
        if consumer is not None:
            deadlines.append(consumer)
        return min(deadlines, default=None)

    def tick(self, now_ms: int) -> Effects:
        fx = Effects()
        for group_id, records in self.consumer.tick(now_ms):
            fx.append(self.partition_for(group_id), records)
        for group in list(self.groups.values()):
            if group.state == DEAD:
                continue
            for member_id, deadline in list(group.pending_members.items()):
                if deadline <= now_ms:
                    del group.pending_members[member_id]
                    self._maybe_complete_join(fx, group, now_ms)
            for member in list(group.members.values()):
                if member.heartbeat_deadline > now_ms or member.member_id not in group.members:
                    continue
                if not member.is_new and (member.join_waiter is not None or member.sync_waiter is not None):
                    member.heartbeat_deadline = now_ms + member.session_timeout_ms  # parked = alive
                    continue
                self._remove_member_and_update_group(
                    fx, group, member.member_id, now_ms,
                    f"member {member.member_id}: no heartbeat within its session timeout "
                    f"({member.session_timeout_ms} ms)")
            if group.join_deadline is not None and group.join_deadline <= now_ms:
                self._on_join_deadline(fx, group, now_ms)
            if group.sync_deadline is not None and group.sync_deadline <= now_ms:
                group.sync_deadline = None
                if group.state in (COMPLETING_REBALANCE, STABLE) and group.pending_sync:
                    late = sorted(group.pending_sync)
                    for member_id in late:
                        self._remove_member(fx, group, member_id)
                    self._prepare_rebalance(fx, group, now_ms, f"members {', '.join(late)} sent no "
                                            "SyncGroup within the rebalance timeout")
        return fx

    def _on_join_deadline(self, fx, group: ClassicGroup, now_ms: int) -> None:
        group.join_deadline = None
        if group.state != PREPARING_REBALANCE:
            return
        if group.previous_state == EMPTY and group.new_member_added and group.initial_remaining_ms > 0:
            # group.initial.rebalance.delay.ms: members are still arriving; wait another slice.
            group.new_member_added = False
            delay = min(self.config.initial_rebalance_delay_ms, group.initial_remaining_ms)
            group.initial_remaining_ms = max(group.initial_remaining_ms - group.initial_delay_ms, 0)
            group.initial_delay_ms = delay
            group.join_deadline = now_ms + delay
            return
        self._complete_join(fx, group, now_ms)

    # ---- offsets -------------------------------------------------------------------------

    def commit_offsets(self, group_id: str, generation_id: int, member_id: str, instance_id: str | None,
                       offsets: list[tuple[str, int, int, int, str | None]], version: int, now_ms: int,
                       retention_ms: int = -1) -> tuple[list[int], Effects]:
        """``offsets``: (topic, partition, offset, leader epoch, metadata). An error per offset;
        the records to append. The offsets take effect when the shell applies the records."""
        fx = Effects()
        code = self.coordinator_error(group_id) if group_id else Error.INVALID_GROUP_ID
        if code == Error.NONE:
            code = self._validate_commit(group_id, generation_id, member_id, instance_id, version, now_ms)
        if code != Error.NONE:
            return [code] * len(offsets), fx
        group = self.groups.get(group_id)
        if group is not None and group.state in (STABLE, PREPARING_REBALANCE) and member_id in group.members:
            member = group.members[member_id]
            member.heartbeat_deadline = max(member.heartbeat_deadline, now_ms + member.session_timeout_ms)
        errors, records = [], []
        # retention_time_ms (v2-4) is the client's: a huge one expires never, not past int64.
        expire = min(now_ms + retention_ms, INT64_MAX) if retention_ms >= 0 else -1
        for topic, partition, offset, leader_epoch, metadata in offsets:
            if metadata is not None and len(metadata.encode()) > self.config.offset_metadata_max_bytes:
                errors.append(Error.OFFSET_METADATA_TOO_LARGE)
                continue
            errors.append(Error.NONE)
            value = storage.offset_commit_value(offset, leader_epoch, metadata or "", now_ms, expire)
            records.append((storage.offset_commit_key(group_id, topic, partition), value))
        fx.append(self.partition_for(group_id), records)
        return errors, fx

    def _validate_commit(self, group_id, generation_id, member_id, instance_id, version, now_ms) -> int:
        consumer_group = self.consumer.groups.get(group_id)
        if consumer_group is not None:
            return self.consumer.validate_offset_commit(consumer_group, member_id, generation_id, version)
        group = self.groups.get(group_id)
        if group is None:
            if generation_id < 0:
                # A "simple" group: offsets of a consumer without group management. It is
                # created when its offsets are committed (apply_records), not before.
                return Error.NONE
            return Error.GROUP_ID_NOT_FOUND if version >= 9 else Error.ILLEGAL_GENERATION
        if group.state == DEAD:
            return Error.COORDINATOR_NOT_AVAILABLE
        if generation_id < 0 and group.state == EMPTY:
            return Error.NONE
        if generation_id >= 0 or member_id or instance_id is not None:
            code = self._validate_member(group, member_id, instance_id)
            if code != Error.NONE:
                return code
            if generation_id != group.generation_id:
                return Error.ILLEGAL_GENERATION
        elif group.state != EMPTY:
            return Error.UNKNOWN_MEMBER_ID
        if group.state == PREPARING_REBALANCE:
            return Error.REBALANCE_IN_PROGRESS
        return Error.NONE

    def fetch_offsets(self, group_id: str, topics: list[tuple[str, list[int]]] | None,
                      member_id: str | None = None, member_epoch: int = -1
                      ) -> tuple[int, list[tuple[str, list[tuple[int, storage.OffsetAndMetadata | None]]]]]:
        """(group error, [(topic, [(partition, committed or None)])]); ``topics`` None = all.
        A consumer group member (OffsetFetch v9+) must fetch with its current member epoch."""
        code = self.coordinator_error(group_id) if group_id is not None else Error.INVALID_GROUP_ID
        consumer_group = self.consumer.groups.get(group_id) if code == Error.NONE else None
        if consumer_group is not None:
            code = self.consumer.validate_offset_fetch(consumer_group, member_id, member_epoch)
        if code != Error.NONE:
            return code, []
        committed = self.offsets.get(group_id, {})
        if topics is None:
            by_topic: dict[str, list] = {}
            for (topic, partition), om in sorted(committed.items()):
                by_topic.setdefault(topic, []).append((partition, om))
            return Error.NONE, list(by_topic.items())
        return Error.NONE, [(topic, [(p, committed.get((topic, p))) for p in partitions])
                            for topic, partitions in topics]

    # ---- admin ---------------------------------------------------------------------------

    def describe_group(self, group_id: str):
        D = M.DescribeGroupsResponse.DescribedGroup
        code = self.coordinator_error(group_id)
        if code != Error.NONE:
            return D(error_code=code, group_id=group_id, group_state="", protocol_type="", protocol_data="")
        group = self.groups.get(group_id)
        if group is None:
            return None
        stable = group.state == STABLE
        members = [D.DescribedGroupMember(
            member_id=m.member_id, group_instance_id=m.group_instance_id, client_id=m.client_id,
            client_host=m.client_host,
            member_metadata=m.metadata(group.protocol_name) if stable else b"",
            member_assignment=m.assignment if stable else b"") for m in group.members.values()]
        return D(error_code=Error.NONE, group_id=group_id, group_state=group.state,
                 protocol_type=group.protocol_type or "",
                 protocol_data=(group.protocol_name or "") if stable else "", members=members)

    def list_groups(self, states: list[str]) -> list[tuple[str, str, str]]:
        """(group id, protocol type, state) of every group owned here, by the states filter."""
        wanted = {s.lower() for s in states}
        return [(g.group_id, g.protocol_type or "", g.state) for g in self.groups.values()
                if self.coordinator_error(g.group_id) == Error.NONE and g.state != DEAD
                and (not wanted or g.state.lower() in wanted)]

    def delete_groups(self, group_ids: list[str], now_ms: int) -> tuple[list[int], Effects]:
        fx = Effects()
        errors = []
        for group_id in group_ids:
            code = self.coordinator_error(group_id) if group_id else Error.INVALID_GROUP_ID
            consumer_group = self.consumer.groups.get(group_id) if code == Error.NONE else None
            if consumer_group is not None:
                code = Error.NON_EMPTY_GROUP if consumer_group.members else Error.NONE
                errors.append(code)
                if code == Error.NONE:
                    records = [(storage.offset_commit_key(group_id, t, p), None)
                               for (t, p) in sorted(self.offsets.get(group_id, {}))]
                    fx.append(self.partition_for(group_id), records + self.consumer.delete(consumer_group))
                continue
            group = self.groups.get(group_id)
            if code == Error.NONE and (group is None or group.state == DEAD):
                code = Error.GROUP_ID_NOT_FOUND
            if code == Error.NONE and group.state != EMPTY:
                code = Error.NON_EMPTY_GROUP
            errors.append(code)
            if code != Error.NONE:
                continue
            records = [(storage.offset_commit_key(group_id, t, p), None)
                       for (t, p) in sorted(self.offsets.get(group_id, {}))]
            fx.append(self.partition_for(group_id), records + self._delete_group(group, now_ms))
        return errors, fx

    def _delete_group(self, group: ClassicGroup | ConsumerGroup, now_ms: int) -> list[tuple[bytes, None]]:
        """Remove an Empty group; the tombstones of its own records (its offsets are the caller's)."""
        if isinstance(group, ConsumerGroup):
            return self.consumer.delete(group)
        group.transition_to(DEAD, now_ms)
        del self.groups[group.group_id]
        return [(storage.group_metadata_key(group.group_id), None)]

    # ---- offsets retention ---------------------------------------------------------------

    def cleanup_group_metadata(self, now_ms: int, pending: Iterable[tuple[str, str, int]] = ()) -> Effects:
        """One offsets retention pass at ``now_ms``: a tombstone for every offset that expired
        (broker/groups/retention.py has the rules), and an Empty group left with no offsets
        is deleted with its own tombstones. ``pending`` is (group, topic, partition) of the
        offset records written but not committed yet, which ``offsets`` does not show."""
        fx = Effects()
        waiting: dict[str, set[tuple[str, int]]] = {}
        for group_id, topic, partition in pending:
            waiting.setdefault(group_id, set()).add((topic, partition))
        for group in [*self.groups.values(), *self.consumer.groups.values()]:
            group_id = group.group_id
            if group.state == DEAD or self.coordinator_error(group_id) != Error.NONE:
                continue
            expired, none_left = retention.expired_offsets(
                group, self.offsets.get(group_id, {}), waiting.get(group_id, ()), now_ms,
                self.config.offsets_retention_ms)
            records = [(storage.offset_commit_key(group_id, t, p), None) for t, p in expired]
            if expired:
                fx.event(f"group {group_id}: {len(expired)} committed offsets expired")
            if none_left and group.state == EMPTY:
                fx.event(f"group {group_id} is Empty with no committed offsets left; deleting it")
                records += self._delete_group(group, now_ms)
            fx.append(self.partition_for(group_id), records)
        return fx

    # ---- the consumer group protocol -----------------------------------------------------

    def consumer_group_heartbeat(self, req, version: int, client_id: str, client_host: str,
                                 topics: Topics, now_ms: int):
        """(ConsumerGroupHeartbeat response, effects); ``topics`` is the metadata snapshot
        {name: (topic id, partitions)} the assignor works from."""
        fx = Effects()
        response, records = self.consumer.heartbeat(req, version, client_id, client_host, topics, now_ms)
        fx.append(self.partition_for(req.group_id) if req.group_id else 0, records)
        return response, fx

    def list_consumer_groups(self, states: list[str]) -> list[tuple[str, str, str]]:
        """(group id, protocol type, state) of the consumer groups owned here."""
        wanted = {s.lower() for s in states}
        return [(g.group_id, PROTOCOL_TYPE, g.state) for g in self.consumer.groups.values()
                if self.coordinator_error(g.group_id) == Error.NONE
                and (not wanted or g.state.lower() in wanted)]

    # ---- records -------------------------------------------------------------------------

    def _group_record(self, group: ClassicGroup) -> tuple[bytes, bytes]:
        V = M.GroupMetadataValue
        value = V(protocol_type=group.protocol_type or "", generation=group.generation_id,
                  protocol=group.protocol_name, leader=group.leader_id,
                  current_state_timestamp=group.state_timestamp,
                  members=[V.MemberMetadata(
                      member_id=m.member_id, group_instance_id=m.group_instance_id, client_id=m.client_id,
                      client_host=m.client_host, rebalance_timeout=m.rebalance_timeout_ms,
                      session_timeout=m.session_timeout_ms, subscription=m.metadata(group.protocol_name),
                      assignment=m.assignment) for m in group.members.values()])
        return storage.group_metadata_key(group.group_id), storage.group_metadata_value(value)
