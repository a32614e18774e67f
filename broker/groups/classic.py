"""The classic group protocol: JoinGroup, SyncGroup, Heartbeat, LeaveGroup and the rebalance.

Theory of operation. ``ClassicGroups`` holds the classic groups (broker/groups/group.py) of
the ``__consumer_offsets`` partitions the coordinator owns and is stepped by it
(broker/groups/coordinator.py) with requests and the time, writing into the coordinator's
``Effects``: the records to append (GroupMetadata; the tombstones of an empty consumer group
that becomes classic), the replies to parked requests and the membership events. A parked
JoinGroup or SyncGroup is the shell's opaque waiter, stored in its member until the join or
sync phase completes.

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

The GroupMetadata record is written and read here (``group_record``, ``load``). What a
classic group needs of the rest of the coordinator is its ``host``: partition ownership
(``coordinator_error``, ``partition_for``), member ids (``new_member_id``), whether a group
has committed offsets (``offsets``), and the consumer groups (``consumer``), since a group
id is one or the other and an empty consumer group becomes a classic group on JoinGroup.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from broker.groups import storage
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

if TYPE_CHECKING:
    from broker.groups.coordinator import CoordinatorConfig, Effects, GroupCoordinator

NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000  # Kafka's ClassicGroupMember.NEW_MEMBER_JOIN_TIMEOUT_MS
UNKNOWN_MEMBER_ID = ""
NO_GENERATION = -1


def join_error(version: int, code: int, member_id: str):
    return M.JoinGroupResponse(error_code=code, generation_id=NO_GENERATION,
                               protocol_name=None if version >= 7 else "", leader="",
                               member_id=member_id, members=[])


def sync_error(version: int, code: int):
    return M.SyncGroupResponse(error_code=code, assignment=b"")


class ClassicGroups:
    """The classic groups of the ``__consumer_offsets`` partitions the coordinator owns."""

    def __init__(self, host: GroupCoordinator, config: CoordinatorConfig):
        self.host = host
        self.config = config
        self.groups: dict[str, ClassicGroup] = {}

    # ---- JoinGroup -----------------------------------------------------------------------

    def join_group(self, fx: Effects, req, version: int, client_id: str, client_host: str, waiter: Any,
                   now_ms: int) -> None:
        member_id = req.member_id
        instance_id = req.group_instance_id if version >= 5 else None
        code = self._validate_join(req)
        if code != Error.NONE:
            fx.reply(waiter, join_error(version, code, member_id))
            return
        consumer_group = self.host.consumer.groups.get(req.group_id)
        if consumer_group is not None:
            if consumer_group.members:
                fx.reply(waiter, join_error(version, Error.INCONSISTENT_GROUP_PROTOCOL, member_id))
                return
            # An empty consumer group becomes a classic group.
            fx.append(self.host.partition_for(req.group_id), self.host.consumer.delete(consumer_group))
        group = self.groups.get(req.group_id)
        if group is None:
            if member_id != UNKNOWN_MEMBER_ID:
                fx.reply(waiter, join_error(version, Error.UNKNOWN_MEMBER_ID, member_id))
                return
            group = self.groups[req.group_id] = ClassicGroup(req.group_id, state_timestamp=now_ms)
        protocols = [(p.name, bytes(p.metadata)) for p in req.protocols]
        rebalance_timeout = req.rebalance_timeout_ms if version >= 1 else req.session_timeout_ms
        if group.state == DEAD:
            fx.reply(waiter, join_error(version, Error.COORDINATOR_NOT_AVAILABLE, member_id))
        elif not group.supports_protocols(req.protocol_type, [n for n, _ in protocols]):
            fx.reply(waiter, join_error(version, Error.INCONSISTENT_GROUP_PROTOCOL, member_id))
        elif member_id == UNKNOWN_MEMBER_ID:
            self._join_new_member(fx, group, req, version, instance_id, client_id, client_host,
                                  rebalance_timeout, protocols, waiter, now_ms)
        else:
            self._join_existing_member(fx, group, req, version, instance_id, client_id, client_host,
                                       rebalance_timeout, protocols, waiter, now_ms)
        if not group.members and not group.pending_members and group.state == EMPTY and \
                req.group_id not in self.host.offsets and group.generation_id == 0:
            del self.groups[req.group_id]  # a failed first join leaves nothing behind

    def _validate_join(self, req) -> int:
        if not req.group_id:
            return Error.INVALID_GROUP_ID
        code = self.host.coordinator_error(req.group_id)
        if code != Error.NONE:
            return code
        c = self.config
        if not c.min_session_timeout_ms <= req.session_timeout_ms <= c.max_session_timeout_ms:
            return Error.INVALID_SESSION_TIMEOUT
        return Error.NONE

    def _join_new_member(self, fx, group, req, version, instance_id, client_id, client_host,
                         rebalance_timeout, protocols, waiter, now_ms) -> None:
        if instance_id is None and len(group.members) + len(group.pending_members) >= self.config.max_size:
            fx.reply(waiter, join_error(version, Error.GROUP_MAX_SIZE_REACHED, UNKNOWN_MEMBER_ID))
            return
        new_id = self.host.new_member_id(instance_id if instance_id is not None else client_id)
        if instance_id is not None:
            old_id = group.static_members.get(instance_id)
            if old_id is not None:
                self._replace_static_member(fx, group, instance_id, old_id, new_id, req, version,
                                            rebalance_timeout, protocols, waiter, now_ms)
                return
        elif version >= 4:
            # KIP-394: hand out the member id first; the member joins with it.
            group.pending_members[new_id] = now_ms + req.session_timeout_ms
            fx.reply(waiter, join_error(version, Error.MEMBER_ID_REQUIRED, new_id))
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
            fx.reply(waiter, join_error(version, code, member_id))
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
            fx.reply(waiter, join_error(version, Error.UNKNOWN_MEMBER_ID, member_id))

    def _replace_static_member(self, fx, group, instance_id, old_id, new_id, req, version,
                               rebalance_timeout, protocols, waiter, now_ms) -> None:
        old = group.members[old_id]
        fx.reply(old.join_waiter, join_error(old.join_version, Error.FENCED_INSTANCE_ID, old_id))
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
                fx.append(self.host.partition_for(group.group_id), [self.group_record(group)])
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
            fx.reply(waiter, join_error(version, Error.UNKNOWN_MEMBER_ID, new_id))

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
            fx.reply(member.join_waiter, join_error(member.join_version, Error.UNKNOWN_MEMBER_ID,
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
                fx.reply(m.sync_waiter, sync_error(m.sync_version, Error.REBALANCE_IN_PROGRESS))
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
        partition = self.host.partition_for(group.group_id)
        if group.state == EMPTY:
            fx.append(partition, [self.group_record(group)])
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

    # ---- SyncGroup -----------------------------------------------------------------------

    def sync_group(self, fx: Effects, req, version: int, waiter: Any, now_ms: int) -> None:
        instance_id = req.group_instance_id if version >= 3 else None
        code = self.host.coordinator_error(req.group_id) if req.group_id else Error.INVALID_GROUP_ID
        group = self.groups.get(req.group_id)
        if code == Error.NONE:
            code = self._validate_generation(group, req.member_id, instance_id, req.generation_id)
        if code == Error.NONE:
            assert group is not None  # _validate_generation answers UNKNOWN_MEMBER_ID for no group
            if version >= 5 and (
                    (req.protocol_type is not None and req.protocol_type != group.protocol_type)
                    or (req.protocol_name is not None and req.protocol_name != group.protocol_name)):
                code = Error.INCONSISTENT_GROUP_PROTOCOL
            elif group.state == PREPARING_REBALANCE:
                code = Error.REBALANCE_IN_PROGRESS
        if code != Error.NONE:
            fx.reply(waiter, sync_error(version, code))
            return
        assert group is not None
        member = group.members[req.member_id]
        group.pending_sync.discard(member.member_id)
        if group.state == STABLE:
            fx.reply(waiter, self._sync_response(group, member))
            return
        # CompletingRebalance: park until the leader's assignments are in.
        member.sync_waiter, member.sync_version = waiter, version
        if group.is_leader(member.member_id):
            assignments = {a.member_id: bytes(a.assignment) for a in req.assignments}
            for m in group.members.values():
                m.assignment = assignments.get(m.member_id, b"")
            fx.append(self.host.partition_for(group.group_id), [self.group_record(group)])
            group.transition_to(STABLE, now_ms)
            fx.event(f"group {group.group_id}: generation {group.generation_id} is stable with the "
                     f"assignment of leader {member.member_id}")
            for m in group.members.values():
                fx.reply(m.sync_waiter, self._sync_response(group, m))
                m.sync_waiter = None

    def _sync_response(self, group, member):
        return M.SyncGroupResponse(error_code=Error.NONE, protocol_type=group.protocol_type,
                                   protocol_name=group.protocol_name, assignment=member.assignment)

    def _validate_member(self, group: ClassicGroup, member_id: str, instance_id: str | None) -> int:
        if instance_id is not None:
            holder = group.static_members.get(instance_id)
            if holder is None:
                return Error.UNKNOWN_MEMBER_ID
            if holder != member_id:
                return Error.FENCED_INSTANCE_ID
            return Error.NONE
        return Error.NONE if member_id in group.members else Error.UNKNOWN_MEMBER_ID

    def _validate_generation(self, group: ClassicGroup | None, member_id: str, instance_id: str | None,
                             generation_id: int) -> int:
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
        code = self.host.coordinator_error(req.group_id) if req.group_id else Error.INVALID_GROUP_ID
        if code != Error.NONE:
            return code
        group = self.groups.get(req.group_id)
        code = self._validate_generation(group, req.member_id, instance_id, req.generation_id)
        if code != Error.NONE:
            return code
        assert group is not None  # _validate_generation answers UNKNOWN_MEMBER_ID for no group
        if group.state == EMPTY:
            return Error.UNKNOWN_MEMBER_ID
        member = group.members[req.member_id]
        member.heartbeat_deadline = now_ms + member.session_timeout_ms
        return Error.REBALANCE_IN_PROGRESS if group.state == PREPARING_REBALANCE else Error.NONE

    def leave_group(self, fx: Effects, group_id: str, members: list[tuple[str, str | None]],
                    now_ms: int) -> tuple[int, list[int]]:
        """(top-level error, an error per (member id, group instance id))."""
        code = self.host.coordinator_error(group_id) if group_id else Error.INVALID_GROUP_ID
        if code != Error.NONE:
            return code, [code] * len(members)
        group = self.groups.get(group_id)
        if group is None:
            return Error.NONE, [Error.UNKNOWN_MEMBER_ID] * len(members)
        if group.state == DEAD:
            return Error.COORDINATOR_NOT_AVAILABLE, [Error.COORDINATOR_NOT_AVAILABLE] * len(members)
        errors: list[int] = []
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
        return Error.NONE, errors

    def _remove_member(self, fx, group: ClassicGroup, member_id: str) -> None:
        member = group.remove(member_id)
        if member is None:
            return
        fx.reply(member.join_waiter, join_error(member.join_version, Error.UNKNOWN_MEMBER_ID, member_id))
        fx.reply(member.sync_waiter, sync_error(member.sync_version, Error.UNKNOWN_MEMBER_ID))
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
        return min(deadlines, default=None)

    def tick(self, fx: Effects, now_ms: int) -> None:
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

    def validate_offset_commit(self, group_id: str, generation_id: int, member_id: str,
                               instance_id: str | None, version: int, transactional: bool = False) -> int:
        """Whether the classic group ``group_id`` takes an OffsetCommit now, in Kafka 4.x's
        order (OffsetMetadataManager.validateOffsetCommit, ClassicGroup.validateOffsetCommit):

            no such group        generation -1: accepted (a "simple" group, created when its
                                 offsets are applied); else GROUP_ID_NOT_FOUND (v9+) or
                                 ILLEGAL_GENERATION
            Dead                 COORDINATOR_NOT_AVAILABLE
            generation -1, Empty accepted (the admin client, a consumer without group management)
            a member named       static member fencing (UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID),
                                 then UNKNOWN_MEMBER_ID, then ILLEGAL_GENERATION
            no member named      UNKNOWN_MEMBER_ID unless Empty
            CompletingRebalance  REBALANCE_IN_PROGRESS: the member has its new generation but
                                 not its assignment yet

        PreparingRebalance takes the commit of a member of the current generation: that is a
        consumer committing in its partitions-revoked callback before it rejoins.

        A ``transactional`` commit (TxnOffsetCommit) differs in two rules: one that names no
        member, generation or instance id (v0-2 carry none) is taken in any state, and
        CompletingRebalance does not refuse it; an unknown group with a generation answers
        ILLEGAL_GENERATION at every version."""
        group = self.groups.get(group_id)
        if group is None:
            if generation_id < 0:
                return Error.NONE
            if version >= 9 and not transactional:
                return Error.GROUP_ID_NOT_FOUND
            return Error.ILLEGAL_GENERATION
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
        elif group.state != EMPTY and not transactional:
            return Error.UNKNOWN_MEMBER_ID
        if group.state == COMPLETING_REBALANCE and not transactional:
            return Error.REBALANCE_IN_PROGRESS
        return Error.NONE

    def reschedule_heartbeat(self, group_id: str, member_id: str, now_ms: int) -> None:
        """A member's valid OffsetCommit counts as a heartbeat."""
        group = self.groups.get(group_id)
        if group is not None and group.state in (STABLE, PREPARING_REBALANCE) and member_id in group.members:
            member = group.members[member_id]
            member.heartbeat_deadline = max(member.heartbeat_deadline, now_ms + member.session_timeout_ms)

    # ---- records, loading and unloading --------------------------------------------------

    def load(self, group_id: str, value, now_ms: int) -> None:
        """A group from its GroupMetadata record ``value``. A group with members comes back
        Stable; each member's session starts now. A group keeps the time of its last state
        change from its record (offsets retention counts from it)."""
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

    def unload(self, fx: Effects, group_id: str) -> None:
        """The group's partition moved away: it dies here; parked requests get NOT_COORDINATOR."""
        group = self.groups.pop(group_id)
        for m in group.members.values():
            fx.reply(m.join_waiter, join_error(m.join_version, Error.NOT_COORDINATOR, m.member_id))
            fx.reply(m.sync_waiter, M.SyncGroupResponse(error_code=Error.NOT_COORDINATOR))
            m.join_waiter = m.sync_waiter = None
        group.state = DEAD

    def delete(self, group: ClassicGroup, now_ms: int) -> list[storage.Record]:
        """Remove an Empty group; the tombstone of its record (its offsets are the caller's)."""
        group.transition_to(DEAD, now_ms)
        del self.groups[group.group_id]
        return [(storage.group_metadata_key(group.group_id), None)]

    def group_record(self, group: ClassicGroup) -> tuple[bytes, bytes]:
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
