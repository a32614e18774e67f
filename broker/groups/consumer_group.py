"""Consumer groups of the consumer group protocol (KIP-848, ``group.protocol=consumer``).

Theory of operation. The coordinator, not a group leader, assigns partitions. A member
joins by heartbeating with member epoch 0 and its subscription; it keeps heartbeating, and
every ConsumerGroupHeartbeat response says which partitions it may own *now* and its member
epoch. Three epochs drive the group:

    group epoch       bumped whenever membership, a subscription, or the subscribed topics'
                      partition counts change
    assignment epoch  the group epoch the target assignment was computed for; the server-side
                      assignor (uniform or range) recomputes the target when it is behind
    member epoch      the assignment epoch the member has converged to

A member converges to its target through its own heartbeats (Kafka's CurrentAssignmentBuilder):

    STABLE                 member epoch == assignment epoch; it owns its target
    UNREVOKED_PARTITIONS   it still owns partitions the target took away: the response leaves
                           them out; it keeps its old epoch until a heartbeat reports it no
                           longer owns them (within its rebalance timeout, or it is fenced)
    UNRELEASED_PARTITIONS  it has the new epoch, but some target partitions are still owned by
                           another member (which has not revoked them yet); it gets them on a
                           later heartbeat, once they are free

Invariant (revocation before assignment): ``owners`` maps each partition to the one member
that holds it, assigned or pending revocation; a partition is given to a member only when it
has no owner. The member epoch of a heartbeat must be the member's epoch, or its previous
epoch with owned partitions that are a subset of its assignment (the response that bumped it
was lost); anything else is FENCED_MEMBER_EPOCH and the member rejoins with epoch 0.

Sessions: a member that does not heartbeat within the session timeout, or does not revoke
within its rebalance timeout, is removed; its partitions become free and the group epoch bumps.

Everything here is pure: time is ``now_ms``, topics are a ``{name: (topic id, partitions)}``
snapshot the caller passes in, and each step returns the records to append to
``__consumer_offsets`` (protocol/schemas/consumer_groups.schema); the shell appends them
before it answers.
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from broker.groups import storage as S
from metadata.configs import GROUP_CONFIGS, GROUP_HEARTBEAT_INTERVAL, GROUP_SESSION_TIMEOUT
from protocol import messages as M
from protocol.errors import Error, KafkaError

# Member states (Kafka's MemberState values, as CurrentMemberAssignment records store them).
MEMBER_STABLE, UNREVOKED_PARTITIONS, UNRELEASED_PARTITIONS = 0, 1, 2
# Group states (what ListGroups and ConsumerGroupDescribe show).
EMPTY, ASSIGNING, RECONCILING, STABLE = "Empty", "Assigning", "Reconciling", "Stable"

JOIN_EPOCH, LEAVE_EPOCH, STATIC_LEAVE_EPOCH = 0, -1, -2
PROTOCOL_TYPE = "consumer"
ASSIGNORS = ("uniform", "range")  # group.consumer.assignors; the first is the default

Partitions = dict[bytes, set[int]]  # topic id -> partitions
Topics = dict[str, tuple[bytes, int]]  # topic name -> (topic id, number of partitions)
Record = S.Record


class GroupError(KafkaError):
    """A heartbeat's refusal: its code and message."""


@dataclass
class ConsumerGroupConfig:
    # group.consumer.session.timeout.ms and group.consumer.heartbeat.interval.ms
    session_timeout_ms: int = GROUP_CONFIGS[GROUP_SESSION_TIMEOUT]
    heartbeat_interval_ms: int = GROUP_CONFIGS[GROUP_HEARTBEAT_INTERVAL]
    max_size: int = 2**31 - 1  # group.consumer.max.size


@dataclass
class ConsumerMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: list[str] = field(default_factory=list)
    subscribed_topic_regex: str | None = None
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: int = MEMBER_STABLE
    assigned: Partitions = field(default_factory=dict)
    pending_revocation: Partitions = field(default_factory=dict)
    session_deadline: int = 0
    revocation_deadline: int | None = None

    def subscribes(self, topic: str) -> bool:
        if topic in self.subscribed_topic_names:
            return True
        return self.subscribed_topic_regex is not None and not topic.startswith("__") and \
            re.fullmatch(self.subscribed_topic_regex, topic) is not None


@dataclass
class ConsumerGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    targets: dict[str, Partitions] = field(default_factory=dict)  # member id -> target
    subscription_metadata: Topics = field(default_factory=dict)
    owners: dict[tuple[bytes, int], str] = field(default_factory=dict)

    @property
    def state(self) -> str:
        if not self.members:
            return EMPTY
        if self.group_epoch != self.assignment_epoch:
            return ASSIGNING
        if any(m.member_epoch != self.assignment_epoch or m.state != MEMBER_STABLE
               for m in self.members.values()):
            return RECONCILING
        return STABLE

    def assignor(self) -> str:
        """The server assignor most members ask for; the default if none does."""
        votes = Counter(m.server_assignor for m in self.members.values() if m.server_assignor)
        return max(sorted(votes), key=lambda a: votes[a]) if votes else ASSIGNORS[0]

    def set_owned(self, member: ConsumerMember, assigned: Partitions, pending: Partitions) -> None:
        """Replace the member's partitions, keeping ``owners`` in step."""
        for tid, parts in [*member.assigned.items(), *member.pending_revocation.items()]:
            for p in parts:
                if self.owners.get((tid, p)) == member.member_id:
                    del self.owners[(tid, p)]
        member.assigned, member.pending_revocation = assigned, pending
        for tid, parts in [*assigned.items(), *pending.items()]:
            for p in parts:
                self.owners[(tid, p)] = member.member_id

    def subscribed_topics(self, topics: Topics) -> Topics:
        return {name: meta for name, meta in topics.items()
                if any(m.subscribes(name) for m in self.members.values())}


# ---- assignors -----------------------------------------------------------------------------

def assign_uniform(subscriptions: dict[str, set[str]], topics: Topics,
                   previous: dict[str, Partitions]) -> dict[str, Partitions]:
    """Spread the subscribed partitions evenly; a member keeps what it had up to its share.
    Shares come from a greedy pass (partitions with the fewest candidates first, to the least
    loaded candidate, ties to the member that had more), so in a homogeneous group they are
    floor/ceil of partitions/members and an unchanged group gets the same assignment back."""
    members = sorted(subscriptions)
    candidates = {(tid, p): [m for m in members if name in subscriptions[m]]
                  for name, (tid, n) in sorted(topics.items()) for p in range(n)}
    valid = {m: sorted((tid, p) for tid, parts in previous.get(m, {}).items() for p in parts
                       if m in candidates.get((tid, p), ())) for m in members}
    order = sorted((tp for tp in candidates if candidates[tp]), key=lambda tp: len(candidates[tp]))
    quota = dict.fromkeys(members, 0)
    for tp in order:
        m = min(candidates[tp], key=lambda m: (quota[m], -len(valid[m]), m))
        quota[m] += 1
    owner: dict[tuple[bytes, int], str] = {}
    count = dict.fromkeys(members, 0)
    for m in members:
        for tp in valid[m]:
            if count[m] < quota[m] and tp not in owner:
                owner[tp] = m
                count[m] += 1
    for tp in order:
        if tp in owner:
            continue
        under = [m for m in candidates[tp] if count[m] < quota[m]]
        m = min(under or candidates[tp], key=lambda m: (count[m], m))
        owner[tp] = m
        count[m] += 1
    return _by_member(members, owner)


def assign_range(subscriptions: dict[str, set[str]], topics: Topics,
                 previous: dict[str, Partitions]) -> dict[str, Partitions]:
    """Per topic, its subscribers (by member id) get contiguous ranges, the first ones one more."""
    members = sorted(subscriptions)
    owner: dict[tuple[bytes, int], str] = {}
    for name, (tid, n) in sorted(topics.items()):
        subs = [m for m in members if name in subscriptions[m]]
        if not subs:
            continue
        share, extra = divmod(n, len(subs))
        p = 0
        for i, m in enumerate(subs):
            for _ in range(share + (1 if i < extra else 0)):
                owner[(tid, p)] = m
                p += 1
    return _by_member(members, owner)


def _by_member(members: list[str], owner: dict[tuple[bytes, int], str]) -> dict[str, Partitions]:
    out: dict[str, Partitions] = {m: {} for m in members}
    for (tid, p), m in owner.items():
        out[m].setdefault(tid, set()).add(p)
    return out


ASSIGNOR_FUNCTIONS = {"uniform": assign_uniform, "range": assign_range}


# ---- the coordinator of consumer groups ------------------------------------------------------

class ConsumerGroups:
    """The consumer groups of the ``__consumer_offsets`` partitions the coordinator owns.
    ``host`` is the GroupCoordinator: partition ownership, offsets and classic groups."""

    def __init__(self, host, config: ConsumerGroupConfig):
        self.host = host
        self.config = config
        self.groups: dict[str, ConsumerGroup] = {}
        # KIP-848's group configs, from the metadata image: group id -> {name: value}. A
        # group's consumer.session.timeout.ms and consumer.heartbeat.interval.ms take the
        # place of the broker's group.consumer.* for it, from its next heartbeat on.
        self.group_configs: dict[str, dict[str, str]] = {}

    def _group_config(self, group_id: str, name: str, default: int) -> int:
        value = self.group_configs.get(group_id, {}).get(name)
        try:
            return int(value) if value is not None else default
        except ValueError:
            return default  # the controller validates what it stores; never seen here

    def session_timeout_ms(self, group_id: str) -> int:
        """consumer.session.timeout.ms of the group, else group.consumer.session.timeout.ms."""
        return self._group_config(group_id, GROUP_SESSION_TIMEOUT, self.config.session_timeout_ms)

    def heartbeat_interval_ms(self, group_id: str) -> int:
        """consumer.heartbeat.interval.ms of the group, else group.consumer.heartbeat.interval.ms."""
        return self._group_config(group_id, GROUP_HEARTBEAT_INTERVAL, self.config.heartbeat_interval_ms)

    # ---- ConsumerGroupHeartbeat ------------------------------------------------------------

    def heartbeat(self, req, version: int, client_id: str, client_host: str, topics: Topics,
                  now_ms: int) -> tuple[object, list[Record]]:
        """(the response, records to append). Records are only produced by a valid heartbeat,
        and every check happens before the group is touched."""
        records: list[Record] = []
        try:
            self._validate(req, version)
            if req.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
                response = self._leave(req, records)
            else:
                response = self._heartbeat(req, client_id, client_host, topics, now_ms, records)
        except GroupError as e:
            return M.ConsumerGroupHeartbeatResponse(error_code=e.code, error_message=e.message,
                                                    member_epoch=-1), []
        return response, records

    def _validate(self, req, version: int) -> None:
        bad = None
        if not req.group_id:
            bad = "GroupId can't be empty."
        elif req.instance_id == "":
            bad = "InstanceId can't be empty."
        elif req.rack_id == "":
            bad = "RackId can't be empty."
        elif not req.member_id and (version >= 1 or req.member_epoch != JOIN_EPOCH):
            bad = "MemberId can't be empty."
        elif req.member_epoch < STATIC_LEAVE_EPOCH:
            bad = f"MemberEpoch is invalid: {req.member_epoch}."
        elif req.member_epoch == STATIC_LEAVE_EPOCH and req.instance_id is None:
            bad = "InstanceId can't be null when MemberEpoch is -2."
        elif req.member_epoch == JOIN_EPOCH:
            if req.rebalance_timeout_ms == -1:
                bad = "RebalanceTimeoutMs must be provided in first request."
            elif req.topic_partitions is None or req.topic_partitions:
                bad = "TopicPartitions must be empty when (re-)joining."
            elif req.subscribed_topic_names is None and req.subscribed_topic_regex is None:
                bad = "SubscribedTopicNames or SubscribedTopicRegex must be set in first request."
        if bad is not None:
            raise GroupError(Error.INVALID_REQUEST, bad)
        if req.server_assignor is not None and req.server_assignor not in ASSIGNORS:
            raise GroupError(Error.UNSUPPORTED_ASSIGNOR,
                             f"ServerAssignor {req.server_assignor} is not supported. "
                             f"Supported assignors: {', '.join(ASSIGNORS)}.")
        if req.subscribed_topic_regex is not None:
            try:
                re.compile(req.subscribed_topic_regex)
            except re.error as e:
                raise GroupError(Error.INVALID_REQUEST, f"SubscribedTopicRegex is invalid: {e}") from e
        code = self.host.coordinator_error(req.group_id)
        if code != Error.NONE:
            raise GroupError(code)

    def _leave(self, req, records: list[Record]):
        group = self.groups.get(req.group_id)
        if group is None:
            raise GroupError(Error.GROUP_ID_NOT_FOUND, f"Group {req.group_id} not found.")
        if req.member_id not in group.members:
            raise GroupError(Error.UNKNOWN_MEMBER_ID, f"Member {req.member_id} is not a member of the group.")
        self.remove_member(group, req.member_id, records)
        # Static members (-2) are not kept for a later return: Strom has no static consumer members.
        return M.ConsumerGroupHeartbeatResponse(member_id=req.member_id, member_epoch=req.member_epoch,
                                                heartbeat_interval_ms=0)

    def _heartbeat(self, req, client_id, client_host, topics: Topics, now_ms: int, records):
        group = self.groups.get(req.group_id)
        joining = req.member_epoch == JOIN_EPOCH
        if group is None:
            if not joining:
                # Kafka answers GROUP_ID_NOT_FOUND; librdkafka takes that as fatal, so let it rejoin.
                raise GroupError(Error.UNKNOWN_MEMBER_ID,
                                 f"Group {req.group_id} has no member {req.member_id}.")
            classic = self.host.groups.get(req.group_id)
            if classic is not None and classic.members:
                raise GroupError(Error.GROUP_ID_NOT_FOUND, f"Group {req.group_id} is not a consumer group.")
        member = group.members.get(req.member_id) if group is not None else None
        if joining:
            if member is None and group is not None and len(group.members) >= self.config.max_size:
                raise GroupError(Error.GROUP_MAX_SIZE_REACHED,
                                 f"The consumer group has reached its maximum capacity of "
                                 f"{self.config.max_size} members.")
        else:
            if member is None:
                raise GroupError(Error.UNKNOWN_MEMBER_ID,
                                 f"Member {req.member_id} is not a member of group {req.group_id}.")
            self._check_member_epoch(member, req.member_epoch, req.topic_partitions)
        owned = _partitions(req.topic_partitions)

        # ---- valid: from here on the group changes ----
        if group is None:
            group = self.groups[req.group_id] = ConsumerGroup(req.group_id)
            if req.group_id in self.host.groups:
                del self.host.groups[req.group_id]  # an empty classic group becomes a consumer group
                records.append((S.group_metadata_key(req.group_id), None))
        if joining and member is not None:
            # A rejoin (after being fenced): the member starts again from nothing.
            self.remove_member(group, member.member_id, records)
            member = None
        new = member is None
        if member is None:
            member = ConsumerMember(req.member_id or self.host.new_member_id(client_id))
        old_subscription = (list(member.subscribed_topic_names), member.subscribed_topic_regex)
        old_metadata = _member_metadata(member)
        if req.instance_id is not None:
            member.instance_id = req.instance_id
        if req.rack_id is not None:
            member.rack_id = req.rack_id
        if req.rebalance_timeout_ms != -1:
            member.rebalance_timeout_ms = req.rebalance_timeout_ms
        if req.subscribed_topic_names is not None:
            member.subscribed_topic_names = sorted(set(req.subscribed_topic_names))
        if req.subscribed_topic_regex is not None:
            member.subscribed_topic_regex = req.subscribed_topic_regex or None
        if req.server_assignor is not None:
            member.server_assignor = req.server_assignor
        member.client_id, member.client_host = client_id, client_host
        member.session_deadline = now_ms + self.session_timeout_ms(group.group_id)
        if new:
            group.members[member.member_id] = member
        if new or _member_metadata(member) != old_metadata:
            records.append(self._member_metadata_record(group, member))

        bump = new or (list(member.subscribed_topic_names), member.subscribed_topic_regex) != old_subscription
        subscribed = group.subscribed_topics(topics)
        if subscribed != group.subscription_metadata:
            group.subscription_metadata = subscribed
            records.append(self._partition_metadata_record(group))
            bump = True
        if bump:
            group.group_epoch += 1
            records.append(self._epoch_record(group))
        if group.assignment_epoch < group.group_epoch:
            self._update_target(group, records)

        before = _assignment_state(member)
        self._reconcile(group, member, owned, now_ms)
        after = _assignment_state(member)
        if new or after != before:
            records.append(self._current_assignment_record(group, member))

        R = M.ConsumerGroupHeartbeatResponse
        response = R(member_id=member.member_id, member_epoch=member.member_epoch,
                     heartbeat_interval_ms=self.heartbeat_interval_ms(group.group_id))
        full = req.rebalance_timeout_ms != -1 and owned is not None and \
            (req.subscribed_topic_names is not None or req.subscribed_topic_regex is not None)
        if joining or full or after[2] != before[2]:
            response.assignment = R.Assignment(topic_partitions=[
                R.TopicPartitions(topic_id=tid, partitions=sorted(parts))
                for tid, parts in sorted(member.assigned.items())])
        return response

    @staticmethod
    def _check_member_epoch(member: ConsumerMember, epoch: int, owned_request) -> None:
        if epoch > member.member_epoch:
            raise GroupError(Error.FENCED_MEMBER_EPOCH,
                             f"The consumer group member has a greater member epoch ({epoch}) than the "
                             f"one known by the group coordinator ({member.member_epoch}). "
                             "The member must abandon all its partitions and rejoin.")
        if epoch < member.member_epoch:
            owned = _partitions(owned_request)
            # The response that bumped its epoch may have been lost: the previous epoch is fine
            # as long as it owns nothing it should not.
            if epoch != member.previous_member_epoch or owned is None or \
                    not _is_subset(owned, member.assigned):
                raise GroupError(Error.FENCED_MEMBER_EPOCH,
                                 f"The consumer group member has a smaller member epoch ({epoch}) than "
                                 f"the one known by the group coordinator ({member.member_epoch}). "
                                 "The member must abandon all its partitions and rejoin.")

    # ---- target assignment and reconciliation ---------------------------------------------

    def _update_target(self, group: ConsumerGroup, records: list[Record]) -> None:
        topics = group.subscription_metadata
        subscriptions = {mid: {name for name in topics if m.subscribes(name)}
                         for mid, m in group.members.items()}
        target = ASSIGNOR_FUNCTIONS[group.assignor()](subscriptions, topics, group.targets)
        for mid in sorted(target):
            if _frozen(target[mid]) != _frozen(group.targets.get(mid, {})) or mid not in group.targets:
                records.append(self._target_member_record(group, mid, target[mid]))
        group.targets = target
        group.assignment_epoch = group.group_epoch
        records.append(self._target_metadata_record(group))

    def _reconcile(self, group: ConsumerGroup, member: ConsumerMember, owned: Partitions | None,
                   now_ms: int) -> None:
        """Kafka's CurrentAssignmentBuilder: move the member one step towards its target."""
        if member.state == MEMBER_STABLE:
            if member.member_epoch == group.assignment_epoch:
                return
            self._next_assignment(group, member, member.member_epoch, owned)
        elif member.state == UNREVOKED_PARTITIONS:
            if _owns_any(owned, member.pending_revocation):
                return
            self._next_assignment(group, member, member.member_epoch, owned)
        else:  # UNRELEASED_PARTITIONS
            self._next_assignment(group, member, member.member_epoch, owned)
        if member.state == UNREVOKED_PARTITIONS:
            if member.revocation_deadline is None:
                member.revocation_deadline = now_ms + max(member.rebalance_timeout_ms, 0)
        else:
            member.revocation_deadline = None

    def _next_assignment(self, group: ConsumerGroup, member: ConsumerMember, member_epoch: int,
                         owned: Partitions | None) -> None:
        target = group.targets.get(member.member_id, {})
        assigned: Partitions = {}
        revoke: Partitions = {}
        free: Partitions = {}
        unreleased = False
        for tid in set(target) | set(member.assigned):
            want, have = target.get(tid, set()), member.assigned.get(tid, set())
            keep = have & want
            new = want - keep
            available = {p for p in new if group.owners.get((tid, p), member.member_id) == member.member_id}
            unreleased = unreleased or available != new
            if keep:
                assigned[tid] = keep
            if have - keep:
                revoke[tid] = have - keep
            if available:
                free[tid] = available
        if revoke and _owns_any(owned, revoke):
            # Revocation first: it keeps its epoch and what stays; new partitions wait.
            self._set(group, member, UNREVOKED_PARTITIONS, member_epoch, assigned, revoke)
            return
        for tid, ps in free.items():
            assigned[tid] = assigned.get(tid, set()) | ps
        self._set(group, member, UNRELEASED_PARTITIONS if unreleased else MEMBER_STABLE,
                  group.assignment_epoch, assigned, {})

    @staticmethod
    def _set(group: ConsumerGroup, member: ConsumerMember, state: int, epoch: int,
             assigned: Partitions, pending: Partitions) -> None:
        if epoch != member.member_epoch:
            member.previous_member_epoch = member.member_epoch
        member.member_epoch = epoch
        member.state = state
        group.set_owned(member, assigned, pending)

    # ---- removal and timers ----------------------------------------------------------------

    def remove_member(self, group: ConsumerGroup, member_id: str, records: list[Record]) -> None:
        """The member leaves or is fenced: its partitions are free; the group epoch bumps."""
        member = group.members.pop(member_id)
        group.set_owned(member, {}, {})
        group.targets.pop(member_id, None)
        key = {"group_id": group.group_id, "member_id": member_id}
        records.append(S.consumer_record(S.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT,
                                         M.ConsumerGroupCurrentMemberAssignmentKey(**key), None))
        records.append(S.consumer_record(S.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER,
                                         M.ConsumerGroupTargetAssignmentMemberKey(**key), None))
        records.append(S.consumer_record(S.CONSUMER_GROUP_MEMBER_METADATA,
                                         M.ConsumerGroupMemberMetadataKey(**key), None))
        group.group_epoch += 1
        records.append(self._epoch_record(group))

    def next_deadline(self) -> int | None:
        deadlines = [d for g in self.groups.values() for m in g.members.values()
                     for d in (m.session_deadline, m.revocation_deadline) if d is not None]
        return min(deadlines, default=None)

    def tick(self, now_ms: int) -> list[tuple[str, list[Record]]]:
        """Fence members whose session or revocation time is up: [(group id, records)]."""
        out = []
        for group in self.groups.values():
            records: list[Record] = []
            for member in list(group.members.values()):
                expired = member.session_deadline <= now_ms or (
                    member.revocation_deadline is not None and member.revocation_deadline <= now_ms)
                if expired:
                    self.remove_member(group, member.member_id, records)
            if records:
                out.append((group.group_id, records))
        return out

    # ---- offsets ---------------------------------------------------------------------------

    def validate_offset_commit(self, group: ConsumerGroup, member_id: str, member_epoch: int,
                               version: int, instance_id: str | None = None,
                               transactional: bool = False) -> int:
        """Kafka 4.x's ConsumerGroup.validateOffsetCommit: member epoch -1 (the admin client, a
        consumer without group management) commits only to a group with no members; otherwise
        the member must exist (UNKNOWN_MEMBER_ID), commit with OffsetCommit v9+ since it uses
        the consumer protocol (UNSUPPORTED_VERSION), and with its current epoch
        (STALE_MEMBER_EPOCH). Every member here uses the consumer protocol: a classic-protocol
        JoinGroup to a consumer group with members is refused, so none gets the
        ILLEGAL_GENERATION that Kafka answers such a member.

        A ``transactional`` commit (TxnOffsetCommit) naming no member, epoch or instance id is
        taken (its v0-2 carry none), and its version is not checked."""
        if member_epoch < 0 and not group.members:
            return Error.NONE
        if transactional and member_epoch == -1 and not member_id and instance_id is None:
            return Error.NONE
        member = group.members.get(member_id)
        if member is None:
            return Error.UNKNOWN_MEMBER_ID
        if version < 9 and not transactional:
            return Error.UNSUPPORTED_VERSION
        if member_epoch != member.member_epoch:
            return Error.STALE_MEMBER_EPOCH
        return Error.NONE

    def validate_offset_fetch(self, group: ConsumerGroup, member_id: str | None, member_epoch: int) -> int:
        if member_id is None or member_epoch < 0:
            return Error.NONE
        member = group.members.get(member_id)
        if member is None:
            return Error.UNKNOWN_MEMBER_ID
        if member_epoch != member.member_epoch:
            return Error.STALE_MEMBER_EPOCH
        return Error.NONE

    # ---- admin -------------------------------------------------------------------------------

    def delete(self, group: ConsumerGroup) -> list[Record]:
        """Tombstones of an empty group's records (its offsets are the caller's)."""
        gid = group.group_id
        del self.groups[gid]
        return [S.consumer_record(S.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA,
                                  M.ConsumerGroupTargetAssignmentMetadataKey(group_id=gid), None),
                S.consumer_record(S.CONSUMER_GROUP_PARTITION_METADATA,
                                  M.ConsumerGroupPartitionMetadataKey(group_id=gid), None),
                S.consumer_record(S.CONSUMER_GROUP_METADATA, M.ConsumerGroupMetadataKey(group_id=gid), None)]

    def describe(self, group_id: str, topic_names: dict[bytes, str]):
        R = M.ConsumerGroupDescribeResponse
        D = R.DescribedGroup
        code = self.host.coordinator_error(group_id) if group_id else Error.INVALID_GROUP_ID
        if code != Error.NONE:
            return D(error_code=code, group_id=group_id, group_state="", assignor_name="")
        group = self.groups.get(group_id)
        if group is None:
            return D(error_code=Error.GROUP_ID_NOT_FOUND, error_message=f"Group {group_id} not found.",
                     group_id=group_id, group_state="Dead", assignor_name="")

        def assignment(parts: Partitions):
            return R.Assignment(topic_partitions=[
                R.TopicPartitions(topic_id=tid, topic_name=topic_names.get(tid, ""), partitions=sorted(ps))
                for tid, ps in sorted(parts.items())])

        return D(error_code=Error.NONE, group_id=group_id, group_state=group.state,
                 group_epoch=group.group_epoch, assignment_epoch=group.assignment_epoch,
                 assignor_name=group.assignor(), members=[
                     D.Member(member_id=m.member_id, instance_id=m.instance_id, rack_id=m.rack_id,
                              member_epoch=m.member_epoch, client_id=m.client_id, client_host=m.client_host,
                              subscribed_topic_names=list(m.subscribed_topic_names),
                              subscribed_topic_regex=m.subscribed_topic_regex,
                              assignment=assignment(m.assigned),
                              target_assignment=assignment(group.targets.get(m.member_id, {})))
                     for m in group.members.values()])

    # ---- records and loading ---------------------------------------------------------------

    def _epoch_record(self, group: ConsumerGroup) -> Record:
        return S.consumer_record(S.CONSUMER_GROUP_METADATA,
                                 M.ConsumerGroupMetadataKey(group_id=group.group_id),
                                 M.ConsumerGroupMetadataValue(epoch=group.group_epoch))

    def _partition_metadata_record(self, group: ConsumerGroup) -> Record:
        V = M.ConsumerGroupPartitionMetadataValue
        return S.consumer_record(
            S.CONSUMER_GROUP_PARTITION_METADATA, M.ConsumerGroupPartitionMetadataKey(group_id=group.group_id),
            V(topics=[V.TopicMetadata(topic_id=tid, topic_name=name, num_partitions=n)
                      for name, (tid, n) in sorted(group.subscription_metadata.items())]))

    def _member_metadata_record(self, group: ConsumerGroup, m: ConsumerMember) -> Record:
        return S.consumer_record(
            S.CONSUMER_GROUP_MEMBER_METADATA,
            M.ConsumerGroupMemberMetadataKey(group_id=group.group_id, member_id=m.member_id),
            M.ConsumerGroupMemberMetadataValue(
                instance_id=m.instance_id, rack_id=m.rack_id, client_id=m.client_id,
                client_host=m.client_host,
                subscribed_topic_names=list(m.subscribed_topic_names),
                subscribed_topic_regex=m.subscribed_topic_regex, rebalance_timeout_ms=m.rebalance_timeout_ms,
                server_assignor=m.server_assignor))

    def _target_member_record(self, group: ConsumerGroup, member_id: str, target: Partitions) -> Record:
        V = M.ConsumerGroupTargetAssignmentMemberValue
        return S.consumer_record(
            S.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER,
            M.ConsumerGroupTargetAssignmentMemberKey(group_id=group.group_id, member_id=member_id),
            V(topic_partitions=[V.TopicPartition(topic_id=tid, partitions=sorted(ps))
                                for tid, ps in sorted(target.items())]))

    def _target_metadata_record(self, group: ConsumerGroup) -> Record:
        return S.consumer_record(
            S.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA,
            M.ConsumerGroupTargetAssignmentMetadataKey(group_id=group.group_id),
            M.ConsumerGroupTargetAssignmentMetadataValue(assignment_epoch=group.assignment_epoch))

    def _current_assignment_record(self, group: ConsumerGroup, m: ConsumerMember) -> Record:
        V = M.ConsumerGroupCurrentMemberAssignmentValue
        return S.consumer_record(
            S.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT,
            M.ConsumerGroupCurrentMemberAssignmentKey(group_id=group.group_id, member_id=m.member_id),
            V(member_epoch=m.member_epoch, previous_member_epoch=m.previous_member_epoch, state=m.state,
              assigned_partitions=[V.TopicPartitions(topic_id=t, partitions=sorted(p))
                                   for t, p in sorted(m.assigned.items())],
              partitions_pending_revocation=[V.TopicPartitions(topic_id=t, partitions=sorted(p))
                                             for t, p in sorted(m.pending_revocation.items())]))

    def load(self, group_id: str, records: dict[tuple[int, str], Any],
             now_ms: int) -> ConsumerGroup | None:
        """Rebuild a group from its latest records (``GroupState.consumer_groups``); every
        member's session starts now."""
        meta = records.get((S.CONSUMER_GROUP_METADATA, ""))
        if meta is None:
            return None
        group = ConsumerGroup(group_id, group_epoch=meta.epoch)
        target_meta = records.get((S.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA, ""))
        group.assignment_epoch = target_meta.assignment_epoch if target_meta is not None else 0
        partitions = records.get((S.CONSUMER_GROUP_PARTITION_METADATA, ""))
        if partitions is not None:
            group.subscription_metadata = {t.topic_name: (bytes(t.topic_id), t.num_partitions)
                                           for t in partitions.topics}
        for (kind, member_id), v in sorted(records.items(), key=lambda kv: kv[0]):
            if kind == S.CONSUMER_GROUP_MEMBER_METADATA:
                group.members[member_id] = ConsumerMember(
                    member_id, v.instance_id, v.rack_id, v.client_id, v.client_host,
                    list(v.subscribed_topic_names), v.subscribed_topic_regex, v.rebalance_timeout_ms,
                    v.server_assignor, session_deadline=now_ms + self.session_timeout_ms(group_id))
        for (kind, member_id), v in records.items():
            member = group.members.get(member_id)
            if member is None:
                continue
            if kind == S.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER:
                group.targets[member_id] = {bytes(t.topic_id): set(t.partitions) for t in v.topic_partitions}
            elif kind == S.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT:
                member.member_epoch, member.previous_member_epoch = v.member_epoch, v.previous_member_epoch
                member.state = v.state if v.state in (UNREVOKED_PARTITIONS, UNRELEASED_PARTITIONS) \
                    else MEMBER_STABLE
                group.set_owned(member, _partition_map(v.assigned_partitions),
                                _partition_map(v.partitions_pending_revocation))
                if member.state == UNREVOKED_PARTITIONS:
                    member.revocation_deadline = now_ms + max(member.rebalance_timeout_ms, 0)
        self.groups[group_id] = group
        return group


def _partitions(topic_partitions) -> Partitions | None:
    """A request's nullable list of topic partitions; None stays None (not reported)."""
    return None if topic_partitions is None else _partition_map(topic_partitions)


def _partition_map(topic_partitions) -> Partitions:
    out: Partitions = {}
    for t in topic_partitions:
        out.setdefault(bytes(t.topic_id), set()).update(t.partitions)
    return out


def _owns_any(owned: Partitions | None, partitions: Partitions) -> bool:
    """Whether the member (by what its heartbeat reports) still owns any of ``partitions``;
    a heartbeat that reports nothing is taken to own them all."""
    if owned is None:
        return any(partitions.values())
    return any(owned.get(tid, set()) & ps for tid, ps in partitions.items())


def _is_subset(owned: Partitions, assigned: Partitions) -> bool:
    return all(ps <= assigned.get(tid, set()) for tid, ps in owned.items())


def _assignment_state(m: ConsumerMember) -> tuple:
    return m.member_epoch, m.state, _frozen(m.assigned), _frozen(m.pending_revocation)


def _frozen(parts: Partitions) -> frozenset:
    return frozenset((tid, p) for tid, ps in parts.items() for p in ps)


def _member_metadata(m: ConsumerMember) -> tuple:
    return (m.instance_id, m.rack_id, m.client_id, m.client_host, tuple(m.subscribed_topic_names),
            m.subscribed_topic_regex, m.rebalance_timeout_ms, m.server_assignor)
