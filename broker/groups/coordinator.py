"""The group coordinator: the groups and committed offsets of ``__consumer_offsets`` as a pure
state machine.

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
offset, as later steps must see it. Committed offsets change only through ``apply_batch``,
which the shell calls with each batch, at its log offsets, once the high watermark passed
it (the same replay that loads a partition): ``offsets`` is the log below the high
watermark, so an OffsetFetch never returns an offset a failover can lose. A commit changes
nothing else before that: even the "simple" group of a consumer without group management
appears only when its first offsets are applied.

``GroupCoordinator`` is the one object the shell steps. It keeps what the two group
protocols share and hands each protocol's requests to the class that runs it:

    here                 partition ownership, loading and unloading a partition, replaying
                         committed records; committed offsets (OffsetCommit, OffsetFetch,
                         retention); DescribeGroups, ListGroups, DeleteGroups; the timers;
                         member ids
    self.classic         the classic protocol: JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
                         rebalances (broker/groups/classic.py); its groups are ``self.groups``
    self.consumer        the consumer group protocol of KIP-848: ConsumerGroupHeartbeat
                         (broker/groups/consumer_group.py)

A group id is one or the other; both share the committed offsets and the timers here.

Transactional offset commits (KIP-98, KIP-447). TxnOffsetCommit is validated as an
OffsetCommit is, with Kafka's transactional rules (``commit_transactional_offsets``), and its
records are written in one transactional batch of the producer (``Effects.producer``). Once
committed they are *pending* for that producer (``pending``, ``open_txns``: storage.py has the
replay rules) and invisible to OffsetFetch; the transaction coordinator's marker, appended
through the shell (``complete_transaction`` there), commits or drops them once it is
committed itself. OffsetFetch with require_stable answers UNSTABLE_OFFSET_COMMIT for a
partition with pending offsets; retention keeps such a partition's offset and its group;
DeleteGroups and OffsetDelete write a tombstone for a partition with pending offsets only.

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
from broker.groups.classic import ClassicGroups, join_error, sync_error
from broker.groups.consumer_group import (
    PROTOCOL_TYPE,
    ConsumerGroup,
    ConsumerGroupConfig,
    ConsumerGroups,
    Topics,
)
from broker.groups.group import DEAD, EMPTY, STABLE, ClassicGroup
from broker.groups.storage import Record
from protocol import messages as M
from protocol.errors import Error

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
    appends: list[tuple[int, list[Record]]] = field(default_factory=list)
    replies: list[tuple[Any, Any]] = field(default_factory=list)
    # (producer id, producer epoch): the appends are a transaction's offset commits, written as
    # one transactional batch of that producer (TxnOffsetCommit); None for the coordinator's own
    producer: tuple[int, int] | None = None
    # What happened to a group's membership, for the operator's log (Kafka logs the same at INFO).
    events: list[str] = field(default_factory=list)

    def event(self, text: str) -> None:
        self.events.append(text)

    def append(self, partition: int, records: list[Record]) -> None:
        if records:
            self.appends.append((partition, records))

    def reply(self, waiter: Any, response: Any) -> None:
        if waiter is not None:
            self.replies.append((waiter, response))


class GroupCoordinator:
    # The classic protocol's error responses, for the shell's answers before a request reaches the core.
    join_error = staticmethod(join_error)
    sync_error = staticmethod(sync_error)

    def __init__(self, config: CoordinatorConfig | None = None, rng: random.Random | None = None):
        self.config = config or CoordinatorConfig()
        self.rng = rng or random.Random(0)
        self.num_partitions = 0  # of __consumer_offsets; 0 while it does not exist
        self.owned: set[int] = set()
        self.loading: set[int] = set()
        self.offsets: dict[str, dict[tuple[str, int], storage.OffsetAndMetadata]] = {}
        # transactional offsets of transactions not ended yet (storage.GroupState's fields)
        self.pending: dict[int, dict[str, dict[tuple[str, int], storage.OffsetAndMetadata]]] = {}
        self.open_txns: dict[str, set[int]] = {}
        self.classic = ClassicGroups(self, self.config)
        self.consumer = ConsumerGroups(self, self.config.consumer)

    @property
    def groups(self) -> dict[str, ClassicGroup]:
        """The classic groups (``self.classic`` holds them)."""
        return self.classic.groups

    def new_member_id(self, prefix: str) -> str:
        """A member id for either protocol, drawn from the injected ``rng``."""
        return f"{prefix}-{uuid.UUID(int=self.rng.getrandbits(128), version=4)}"

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
        """Take over a partition whose records were replayed into ``state``: its committed
        offsets, its classic and consumer groups (each protocol rebuilds its own from its
        records), and a simple group for offsets that have no group record."""
        self.loading.discard(partition)
        self.owned.add(partition)
        for group_id, offsets in state.offsets.items():
            self.offsets[group_id] = dict(offsets)
        for producer_id, by_group in state.pending.items():
            mine = self.pending.setdefault(producer_id, {})
            for group_id, offsets in by_group.items():
                mine[group_id] = dict(offsets)
        for group_id, producers in state.open_txns.items():
            self.open_txns[group_id] = set(producers)
        for group_id, value in state.groups.items():
            self.classic.load(group_id, value, now_ms)
        for group_id, records in state.consumer_groups.items():
            self.consumer.load(group_id, records, now_ms)
        for group_id in [*state.offsets, *state.open_txns]:
            self._ensure_simple_group(group_id, now_ms)

    def _ensure_simple_group(self, group_id: str, now_ms: int) -> None:
        """Offsets with no group record, committed or pending in a transaction: the group of a
        consumer without group management."""
        if (group_id in self.offsets or group_id in self.open_txns) and group_id not in self.groups \
                and group_id not in self.consumer.groups:
            self.groups[group_id] = ClassicGroup(group_id, state_timestamp=now_ms, protocol_type="")

    def unload(self, partition: int) -> Effects:
        """The partition moved away: its groups die here; parked requests get NOT_COORDINATOR."""
        fx = Effects()
        self.loading.discard(partition)
        self.owned.discard(partition)
        for group_id in [g for g in self.groups if self.partition_for(g) == partition]:
            self.classic.unload(fx, group_id)
        for group_id in [g for g in self.offsets if self.partition_for(g) == partition]:
            del self.offsets[group_id]
        for group_id in [g for g in self.open_txns if self.partition_for(g) == partition]:
            del self.open_txns[group_id]
        for producer_id, by_group in list(self.pending.items()):
            for group_id in [g for g in by_group if self.partition_for(g) == partition]:
                del by_group[group_id]
            if not by_group:
                del self.pending[producer_id]
        for group_id in [g for g in self.consumer.groups if self.partition_for(g) == partition]:
            del self.consumer.groups[group_id]
        return fx

    def apply_batch(self, batch: storage.LogBatch, now_ms: int = 0) -> None:
        """A committed batch of this partition, in log order: offset commits and their
        tombstones take effect (a transaction's stay pending until its marker, which commits
        or drops them), and a group left with offsets but no group becomes a simple group, as
        loading makes it (group records describe state the core already holds)."""
        self._txn_state().replay_batch(batch)
        committed_to: set[str] = set()
        for _, key, value in batch.records:
            version, k = storage.parse_key(key)
            if version <= 1 and value is not None:
                committed_to.add(k.group)
        for group_id in committed_to:
            self._ensure_simple_group(group_id, now_ms)

    def _txn_state(self) -> storage.GroupState:
        """The core's offsets as a GroupState, to replay into (it shares the core's dicts)."""
        return storage.GroupState(offsets=self.offsets, pending=self.pending, open_txns=self.open_txns)

    def pending_partitions(self, group_id: str) -> set[tuple[str, int]]:
        """The group's partitions with an offset pending in a transaction not ended yet."""
        return self._txn_state().pending_partitions(group_id)

    # ---- the classic group protocol ------------------------------------------------------

    def join_group(self, req, version: int, client_id: str, client_host: str, waiter: Any,
                   now_ms: int) -> Effects:
        fx = Effects()
        self.classic.join_group(fx, req, version, client_id, client_host, waiter, now_ms)
        return fx

    def sync_group(self, req, version: int, waiter: Any, now_ms: int) -> Effects:
        fx = Effects()
        self.classic.sync_group(fx, req, version, waiter, now_ms)
        return fx

    def heartbeat(self, req, version: int, now_ms: int) -> int:
        return self.classic.heartbeat(req, version, now_ms)

    def leave_group(self, group_id: str, members: list[tuple[str, str | None]],
                    now_ms: int) -> tuple[int, list[int], Effects]:
        """(top-level error, an error per (member id, group instance id), effects)."""
        fx = Effects()
        code, errors = self.classic.leave_group(fx, group_id, members, now_ms)
        return code, errors, fx

    # ---- timers --------------------------------------------------------------------------

    def next_deadline(self) -> int | None:
        deadlines = (self.classic.next_deadline(), self.consumer.next_deadline())
        return min((d for d in deadlines if d is not None), default=None)

    def tick(self, now_ms: int) -> Effects:
        fx = Effects()
        for group_id, records in self.consumer.tick(now_ms):
            fx.append(self.partition_for(group_id), records)
        self.classic.tick(fx, now_ms)
        return fx

    # ---- offsets -------------------------------------------------------------------------

    def commit_offsets(self, group_id: str, generation_id: int, member_id: str, instance_id: str | None,
                       offsets: list[tuple[str, int, int, int, str | None]], version: int, now_ms: int,
                       retention_ms: int = -1) -> tuple[list[int], Effects]:
        """``offsets``: (topic, partition, offset, leader epoch, metadata). An error per offset;
        the records to append. The offsets take effect when the shell applies the records."""
        fx = Effects()
        code = self.coordinator_error(group_id) if group_id else Error.INVALID_GROUP_ID
        if code == Error.NONE:
            code = self._validate_commit(group_id, generation_id, member_id, instance_id, version)
        if code != Error.NONE:
            return [code] * len(offsets), fx
        self.classic.reschedule_heartbeat(group_id, member_id, now_ms)
        errors: list[int] = []
        records: list[Record] = []
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

    def _validate_commit(self, group_id, generation_id, member_id, instance_id, version,
                         transactional: bool = False) -> int:
        consumer_group = self.consumer.groups.get(group_id)
        if consumer_group is not None:
            return self.consumer.validate_offset_commit(consumer_group, member_id, generation_id, version,
                                                        instance_id, transactional)
        return self.classic.validate_offset_commit(group_id, generation_id, member_id, instance_id, version,
                                                   transactional)

    def commit_transactional_offsets(self, group_id: str, producer_id: int, producer_epoch: int,
                                     generation_id: int, member_id: str, instance_id: str | None,
                                     offsets: list[tuple[str, int, int, int, str | None]], version: int,
                                     now_ms: int) -> tuple[list[int], Effects]:
        """TxnOffsetCommit (KIP-98, KIP-447): an error per offset; the records to append as one
        transactional batch of the producer (``fx.producer``). Kafka 4.x's
        OffsetMetadataManager.validateTransactionalOffsetCommit:

            no such group          generation -1: accepted (a simple group, created when the
                                   records are applied); else ILLEGAL_GENERATION
            a classic group        Dead: COORDINATOR_NOT_AVAILABLE; generation -1 and Empty, or
                                   no member, generation or instance id (v0-2 carry none):
                                   accepted in any state; else the member (UNKNOWN_MEMBER_ID,
                                   FENCED_INSTANCE_ID) and its generation (ILLEGAL_GENERATION);
                                   a rebalance in progress does not refuse it
            a consumer group       epoch -1 with no members, or no member, epoch or instance
                                   id: accepted; else UNKNOWN_MEMBER_ID, and a stale member
                                   epoch answers ILLEGAL_GENERATION

        then OFFSET_METADATA_TOO_LARGE per offset. The offsets stay pending, invisible to
        OffsetFetch, until the transaction's marker commits them."""
        fx = Effects(producer=(producer_id, producer_epoch))
        code = self.coordinator_error(group_id) if group_id else Error.INVALID_GROUP_ID
        if code == Error.NONE:
            code = self._validate_commit(group_id, generation_id, member_id, instance_id, version,
                                         transactional=True)
            if code == Error.STALE_MEMBER_EPOCH:
                code = Error.ILLEGAL_GENERATION
        if code != Error.NONE:
            return [code] * len(offsets), fx
        errors: list[int] = []
        records: list[Record] = []
        for topic, partition, offset, leader_epoch, metadata in offsets:
            if metadata is not None and len(metadata.encode()) > self.config.offset_metadata_max_bytes:
                errors.append(Error.OFFSET_METADATA_TOO_LARGE)
                continue
            errors.append(Error.NONE)
            value = storage.offset_commit_value(offset, leader_epoch, metadata or "", now_ms)
            records.append((storage.offset_commit_key(group_id, topic, partition), value))
        fx.append(self.partition_for(group_id), records)
        return errors, fx

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
        errors: list[int] = []
        for group_id in group_ids:
            code = self.coordinator_error(group_id) if group_id else Error.INVALID_GROUP_ID
            consumer_group = self.consumer.groups.get(group_id) if code == Error.NONE else None
            if consumer_group is not None:
                code = Error.NON_EMPTY_GROUP if consumer_group.members else Error.NONE
                errors.append(code)
                if code == Error.NONE:
                    fx.append(self.partition_for(group_id),
                              self._offset_tombstones(group_id) + self.consumer.delete(consumer_group))
                continue
            group = self.groups.get(group_id)
            if code == Error.NONE:
                if group is None or group.state == DEAD:
                    code = Error.GROUP_ID_NOT_FOUND
                elif group.state != EMPTY:
                    code = Error.NON_EMPTY_GROUP
            errors.append(code)
            if code != Error.NONE:
                continue
            assert group is not None  # NONE above only for a group that exists
            fx.append(self.partition_for(group_id),
                      self._offset_tombstones(group_id) + self._delete_group(group, now_ms))
        return errors, fx

    def delete_offsets(self, group_id: str, topics: list[tuple[str, list[int]]],
                       pending: Iterable[tuple[str, str, int]] = ()
                       ) -> tuple[int, list[tuple[str, list[tuple[int, int]]]], Effects]:
        """OffsetDelete (KIP-496): (group error, [(topic, [(partition, error)])], effects), as
        Kafka 4.x's OffsetMetadataManager.deleteOffsets answers it:

            no such group, or Dead               GROUP_ID_NOT_FOUND
            classic, not Empty, protocol type    NON_EMPTY_GROUP
            other than "consumer"
            a topic the group subscribes to      GROUP_SUBSCRIBED_TO_TOPIC on each partition
            otherwise                            NONE, and a tombstone for each partition
                                                 with an offset, committed or ``pending``
                                                 ((group, topic, partition) written but not
                                                 committed yet)

        A consumer group (KIP-848) takes it in any state. The offsets go when the shell
        applies the tombstones, after they commit."""
        fx = Effects()
        code = self.coordinator_error(group_id) if group_id else Error.INVALID_GROUP_ID
        group: ClassicGroup | ConsumerGroup | None = None
        if code == Error.NONE:
            group = self.consumer.groups.get(group_id) or self.groups.get(group_id)
            if group is None or group.state == DEAD:
                code = Error.GROUP_ID_NOT_FOUND
            elif isinstance(group, ClassicGroup) and group.state != EMPTY and \
                    group.protocol_type != PROTOCOL_TYPE:
                code = Error.NON_EMPTY_GROUP
        if code != Error.NONE:
            return code, [], fx
        assert group is not None
        subscribed = retention.subscription(group)
        present = set(self.offsets.get(group_id, {})) | self.pending_partitions(group_id)
        present.update((t, p) for g, t, p in pending if g == group_id)
        out: list[tuple[str, list[tuple[int, int]]]] = []
        records: list[Record] = []
        for topic, partitions in topics:
            if subscribed(topic):
                out.append((topic, [(p, Error.GROUP_SUBSCRIBED_TO_TOPIC) for p in partitions]))
                continue
            out.append((topic, [(p, Error.NONE) for p in partitions]))
            records += [(storage.offset_commit_key(group_id, topic, p), None)
                        for p in partitions if (topic, p) in present]
        fx.append(self.partition_for(group_id), records)
        return Error.NONE, out, fx

    def _offset_tombstones(self, group_id: str) -> list[Record]:
        """A tombstone for each committed offset of the group, and for each partition with
        only a pending transactional offset (Kafka's deleteAllOffsets), in (topic, partition)
        order."""
        partitions = set(self.offsets.get(group_id, {})) | self.pending_partitions(group_id)
        return [(storage.offset_commit_key(group_id, t, p), None) for t, p in sorted(partitions)]

    def _delete_group(self, group: ClassicGroup | ConsumerGroup, now_ms: int) -> list[Record]:
        """Remove an Empty group; the tombstones of its own records (its offsets are the caller's)."""
        if isinstance(group, ConsumerGroup):
            return self.consumer.delete(group)
        return self.classic.delete(group, now_ms)

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
        # A partition with a pending transactional offset keeps its offset, and a group with an
        # open transaction is not deleted (Kafka's cleanupExpiredOffsets).
        for group_id in self.open_txns:
            waiting.setdefault(group_id, set()).update(self.pending_partitions(group_id))
        groups: list[ClassicGroup | ConsumerGroup] = [*self.groups.values(), *self.consumer.groups.values()]
        for group in groups:
            group_id = group.group_id
            if group.state == DEAD or self.coordinator_error(group_id) != Error.NONE:
                continue
            expired, none_left = retention.expired_offsets(
                group, self.offsets.get(group_id, {}), waiting.get(group_id, ()), now_ms,
                self.config.offsets_retention_ms)
            records: list[Record] = [(storage.offset_commit_key(group_id, t, p), None) for t, p in expired]
            if expired:
                fx.event(f"group {group_id}: {len(expired)} committed offsets expired")
            if none_left and group.state == EMPTY and group_id not in self.open_txns:
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
