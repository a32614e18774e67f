"""The records of ``__consumer_offsets``: Apache Kafka's formats, byte for byte.

A group lives in one partition of ``__consumer_offsets``::

    partition = Utils.abs(String.hashCode(group_id)) % offsets.topic.num.partitions

where ``String.hashCode`` is Java's (31-polynomial over the UTF-16 code units, int32
overflow) and ``Utils.abs(n)`` is ``0 if n == Integer.MIN_VALUE else abs(n)``.

Each record (protocol/schemas/group_storage.schema) is a key and a value:

    key   = int16 key version   + key struct (big-endian, non-flexible)
    value = int16 value version + value struct, or null (a tombstone)

    | key version | key                               | value                        |
    |-------------|-----------------------------------|------------------------------|
    | 0 or 1      | OffsetCommitKey(group, topic, p)  | OffsetCommitValue, written v3 |
    | 2           | GroupMetadataKey(group)           | GroupMetadataValue, written v3|
    | 3 ... 8     | ConsumerGroup*Key (KIP-848)       | ConsumerGroup*Value, v0       |

Key versions 3 to 8 are the consumer group protocol's records (protocol/schemas/
consumer_groups.schema has the table); replay keeps the latest value of each key in
``GroupState.consumer_groups`` and broker/groups/consumer_group.py rebuilds the groups.

Example, OffsetCommitKey v1 for ("g", "t", 3): ``0001 0001 67 0001 74 00000003``.

The partition is compacted: the latest record of a key wins, a tombstone deletes it.
``GroupState`` is what replaying a partition from its start yields; loading and the
live coordinator agree because the coordinator applies its own records the same way.

Transactional offset commits (KIP-98, KIP-447). TxnOffsetCommit writes the usual offset
commit records in one transactional batch (attributes bit 4) carrying the producer's id and
epoch; the transaction coordinator's marker (a control batch, engine/control.py) ends it on
this partition. Replay follows Kafka's OffsetMetadataManager:

    | batch                       | replay                                                  |
    |-----------------------------|---------------------------------------------------------|
    | producer id -1              | offsets committed at once                               |
    | transactional, producer P   | offsets pending for P (``pending``); P open in the group |
    | an offset tombstone         | the committed offset and every producer's pending one   |
    |                             | for that partition go                                   |
    | COMMIT marker of P          | P's pending offsets committed, each unless the partition |
    |                             | holds an offset written later in the log (a larger      |
    |                             | record offset: compaction may have dropped the rest)    |
    | ABORT marker of P           | P's pending offsets dropped                             |

A control batch is never read as offset records.
"""
from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from engine.control import read_end_txn_marker
from engine.errors import InvalidRecordError
from ext.batch import NO_SEQUENCE, build_batch, decode_records, iter_batches
from protocol import messages as M
from protocol.java_hash import coordinator_partition
from protocol.types import Reader

OFFSETS_TOPIC = "__consumer_offsets"

Record = tuple[bytes, bytes | None]  # (key, value); a value of None is a tombstone

OFFSET_COMMIT_KEY_VERSION = 1
OFFSET_COMMIT_VALUE_VERSION = 3
OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY = 1
GROUP_METADATA_KEY_VERSION = 2
GROUP_METADATA_VALUE_VERSION = 3

_KEYS = {0: "OffsetCommitKey", 1: "OffsetCommitKey", 2: "GroupMetadataKey"}
_VALUES = {0: "OffsetCommitValue", 1: "OffsetCommitValue", 2: "GroupMetadataValue"}

# The consumer group protocol's records: key version (Kafka's record type) -> record name.
CONSUMER_GROUP_METADATA = 3
CONSUMER_GROUP_PARTITION_METADATA = 4
CONSUMER_GROUP_MEMBER_METADATA = 5
CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA = 6
CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER = 7
CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT = 8
CONSUMER_RECORDS = {
    CONSUMER_GROUP_METADATA: "ConsumerGroupMetadata",
    CONSUMER_GROUP_PARTITION_METADATA: "ConsumerGroupPartitionMetadata",
    CONSUMER_GROUP_MEMBER_METADATA: "ConsumerGroupMemberMetadata",
    CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA: "ConsumerGroupTargetAssignmentMetadata",
    CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER: "ConsumerGroupTargetAssignmentMember",
    CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT: "ConsumerGroupCurrentMemberAssignment",
}
CONSUMER_VALUE_VERSION = 0
for _type, _name in CONSUMER_RECORDS.items():
    _KEYS[_type] = _name + "Key"
    _VALUES[_type] = _name + "Value"
_VERSION = struct.Struct(">h")


def partition_for(group_id: str, partitions: int) -> int:
    """The ``__consumer_offsets`` partition of a group (Kafka's ``partitionFor``)."""
    return coordinator_partition(group_id, partitions)


# ---- keys and values ------------------------------------------------------------------

def _encode(name: str, version: int, obj) -> bytes:
    return _VERSION.pack(version) + M.DATA[name].encode(version, obj)


def offset_commit_key(group: str, topic: str, partition: int) -> bytes:
    return _encode("OffsetCommitKey", OFFSET_COMMIT_KEY_VERSION,
                   M.OffsetCommitKey(group=group, topic=topic, partition=partition))


def offset_commit_value(offset: int, leader_epoch: int, metadata: str, commit_timestamp: int,
                        expire_timestamp: int = -1) -> bytes:
    version = OFFSET_COMMIT_VALUE_VERSION
    if expire_timestamp >= 0:
        version = OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY
    return _encode("OffsetCommitValue", version, M.OffsetCommitValue(
        offset=offset, leader_epoch=leader_epoch, metadata=metadata or "",
        commit_timestamp=commit_timestamp, expire_timestamp=expire_timestamp))


def group_metadata_key(group: str) -> bytes:
    return _encode("GroupMetadataKey", GROUP_METADATA_KEY_VERSION, M.GroupMetadataKey(group=group))


def group_metadata_value(value) -> bytes:
    """``value``: an ``M.GroupMetadataValue``."""
    return _encode("GroupMetadataValue", GROUP_METADATA_VALUE_VERSION, value)


def parse_key(data: bytes | memoryview):
    """(key version, key struct); raises ValueError for a key version Kafka does not write."""
    (version,) = _VERSION.unpack_from(data, 0)
    name = _KEYS.get(version)
    if name is None:
        raise ValueError(f"unknown __consumer_offsets key version {version}")
    try:
        return version, M.DATA[name].decode(version, Reader(memoryview(data)[2:]))
    except (IndexError, struct.error, EOFError) as e:
        raise ValueError(f"truncated __consumer_offsets key of version {version}") from e


def parse_value(key_version: int, data: bytes | memoryview | None):
    """The value struct of a record whose key has ``key_version``; None for a tombstone."""
    if data is None:
        return None
    (version,) = _VERSION.unpack_from(data, 0)
    return M.DATA[_VALUES[key_version]].decode(version, Reader(memoryview(data)[2:]))


def consumer_record(record_type: int, key, value) -> Record:
    """A consumer group record: ``key`` and ``value`` are the M.ConsumerGroup*Key/Value
    structs of ``record_type``; ``value`` None makes a tombstone."""
    k = _encode(_KEYS[record_type], record_type, key)
    if value is None:
        return k, None
    return k, _encode(_VALUES[record_type], CONSUMER_VALUE_VERSION, value)


def build_records_batch(records: Iterable[Record], now_ms: int, producer_id: int = -1,
                        producer_epoch: int = -1) -> bytearray:
    """One uncompressed batch of (key, value) records, ready for ``append_as_leader``; with a
    producer id, a transactional batch of that producer and epoch (a TxnOffsetCommit's). Its
    base sequence is -1: the log checks no sequence of the coordinator's own writes."""
    if producer_id < 0:
        return bytearray(build_batch([(k, v, [], now_ms) for k, v in records]))
    return bytearray(build_batch([(k, v, [], now_ms) for k, v in records], producer_id=producer_id,
                                 producer_epoch=producer_epoch, base_sequence=NO_SEQUENCE,
                                 is_transactional=True))


# ---- replay ---------------------------------------------------------------------------

@dataclass
class OffsetAndMetadata:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    expire_timestamp: int = -1
    # The log offset of the record that wrote it (replay always knows it): a transaction's
    # commit does not replace an offset written after the transaction's own record.
    record_offset: int = field(default=-1, compare=False)


TopicPartition = tuple[str, int]


@dataclass
class LogBatch:
    """A batch of ``__consumer_offsets`` as replay takes it: its records with their offsets,
    the producer of a transactional batch (-1 otherwise), or, for a marker, the marker's
    verdict (``marker`` True for COMMIT, False for ABORT, None for a data batch)."""

    records: list[tuple[int, bytes, bytes | None]]  # (offset, key, value)
    producer_id: int = -1
    marker: bool | None = None


@dataclass
class GroupState:
    """One partition's groups and offsets, as its records say: the latest value per key."""

    offsets: dict[str, dict[tuple[str, int], OffsetAndMetadata]] = field(default_factory=dict)
    groups: dict[str, Any] = field(default_factory=dict)  # group id -> M.GroupMetadataValue
    # group id -> {(record type, member id or ""): value}: consumer groups' latest records,
    # each value the decoded struct of its record type
    consumer_groups: dict[str, dict[tuple[int, str], Any]] = field(default_factory=dict)
    # producer id -> group -> (topic, partition) -> offset: the transactional offset commits of
    # transactions not ended yet (Kafka's pendingTransactionalOffsets)
    pending: dict[int, dict[str, dict[TopicPartition, OffsetAndMetadata]]] = field(default_factory=dict)
    # group -> the producers with a transaction open in it (Kafka's openTransactionsByGroup); a
    # producer stays here until its marker, even if a tombstone removed its pending offsets
    open_txns: dict[str, set[int]] = field(default_factory=dict)

    def replay_batch(self, batch: LogBatch) -> None:
        if batch.marker is not None:
            self.replay_end_txn(batch.producer_id, batch.marker)
            return
        for offset, key, value in batch.records:
            self.replay(key, value, batch.producer_id, offset)

    def has_pending(self, group: str, topic: str, partition: int) -> bool:
        """Whether a transaction not ended yet wrote an offset for the partition."""
        return any((topic, partition) in self.pending.get(p, {}).get(group, {})
                   for p in self.open_txns.get(group, ()))

    def pending_partitions(self, group: str) -> set[TopicPartition]:
        return {tp for p in self.open_txns.get(group, ()) for tp in self.pending.get(p, {}).get(group, {})}

    def replay_end_txn(self, producer_id: int, commit: bool) -> None:
        """A marker of ``producer_id``: its pending offsets are committed or dropped."""
        pending = self.pending.pop(producer_id, None)
        if pending is None:
            return
        for group in pending:
            producers = self.open_txns.get(group)
            if producers is not None:
                producers.discard(producer_id)
                if not producers:
                    del self.open_txns[group]
        if not commit:
            return
        for group, offsets in pending.items():
            committed = self.offsets.setdefault(group, {})
            for tp, om in offsets.items():
                existing = committed.get(tp)
                # Kafka's replayEndTransactionMarker: the offset whose record is later in the
                # log stays.
                if existing is None or om.record_offset > existing.record_offset:
                    committed[tp] = om
            if not committed:
                del self.offsets[group]

    def replay(self, key: bytes | memoryview, value: bytes | memoryview | None, producer_id: int,
               offset: int) -> None:
        """One record of the log at ``offset``, of a transactional batch of ``producer_id``
        (-1: not transactional)."""
        version, k = parse_key(key)
        v = parse_value(version, value)
        if version in CONSUMER_RECORDS:
            slot = (version, getattr(k, "member_id", ""))
            if v is not None:
                self.consumer_groups.setdefault(k.group_id, {})[slot] = v
            elif k.group_id in self.consumer_groups:
                records = self.consumer_groups[k.group_id]
                records.pop(slot, None)
                if not records:
                    del self.consumer_groups[k.group_id]
            return
        if version == 2:
            if v is None:
                self.groups.pop(k.group, None)
            else:
                self.groups[k.group] = v
            return
        tp = (k.topic, k.partition)
        if v is None:
            group = self.offsets.get(k.group)
            if group is not None:
                group.pop(tp, None)
                if not group:
                    del self.offsets[k.group]
            for p in self.open_txns.get(k.group, ()):
                self.pending.get(p, {}).get(k.group, {}).pop(tp, None)
            return
        om = OffsetAndMetadata(v.offset, v.leader_epoch, v.metadata, v.commit_timestamp,
                               v.expire_timestamp, offset)
        if producer_id < 0:
            self.offsets.setdefault(k.group, {})[tp] = om
            return
        self.pending.setdefault(producer_id, {}).setdefault(k.group, {})[tp] = om
        self.open_txns.setdefault(k.group, set()).add(producer_id)


def read_batches(data: bytes | memoryview) -> Iterator[tuple[int, LogBatch]]:
    """(next offset, batch) for each whole batch in ``data``. A control batch that holds no
    transaction marker (what compaction leaves of one) is a batch of no records."""
    for header in iter_batches(data):
        producer_id = header.producer_id if header.is_transactional else -1
        if header.is_control:
            try:
                read = read_end_txn_marker(data, header.position)
            except InvalidRecordError:  # a control record of another type: not ours to replay
                read = None
            verdict = None if read is None else read.marker.is_commit
            yield header.next_offset, LogBatch([], producer_id, verdict)
            continue
        records = [(r.offset, r.key, r.value) for r in decode_records(data, header.position, False)
                   if r.key is not None]
        yield header.next_offset, LogBatch(records, producer_id)


def replay_batches(state: GroupState, data: bytes | memoryview) -> int:
    """Replay every batch of the whole batches in ``data`` into ``state``; the offset after
    the last batch (-1 if there was none)."""
    last = -1
    for next_offset, batch in read_batches(data):
        state.replay_batch(batch)
        last = next_offset
    return last


def read_chunks(log, chunk_bytes: int) -> Iterator[bytes]:
    """The whole batches of ``log`` from its log start offset to its log end offset (as the
    log stood when reading started), ``chunk_bytes`` at a time (at least one batch each)."""
    from engine.log import FETCH_LOG_END

    offset, end = log.log_start_offset, log.log_end_offset
    while offset < end:
        info = log.read(offset, chunk_bytes, FETCH_LOG_END)
        if info.records is None:
            return
        data = info.records.read() if hasattr(info.records, "read") else bytes(info.records)
        last = None
        for header in iter_batches(data):
            last = header
        if last is None or last.next_offset <= offset:
            return
        yield data
        offset = last.next_offset


def load_partition(log, chunk_bytes: int = 5242880) -> GroupState:
    """Replay a whole partition (the synchronous form of the coordinator's load)."""
    state = GroupState()
    for data in read_chunks(log, chunk_bytes):
        replay_batches(state, data)
    return state
