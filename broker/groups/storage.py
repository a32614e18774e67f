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
"""
from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ext.batch import build_batch, decode_records, iter_batches
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


def build_records_batch(records: Iterable[Record], now_ms: int) -> bytearray:
    """One uncompressed batch of (key, value) records, ready for ``append_as_leader``."""
    return bytearray(build_batch([(k, v, [], now_ms) for k, v in records]))


# ---- replay ---------------------------------------------------------------------------

@dataclass
class OffsetAndMetadata:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    expire_timestamp: int = -1


@dataclass
class GroupState:
    """One partition's groups and offsets, as its records say: the latest value per key."""

    offsets: dict[str, dict[tuple[str, int], OffsetAndMetadata]] = field(default_factory=dict)
    groups: dict[str, Any] = field(default_factory=dict)  # group id -> M.GroupMetadataValue
    # group id -> {(record type, member id or ""): value}: consumer groups' latest records,
    # each value the decoded struct of its record type
    consumer_groups: dict[str, dict[tuple[int, str], Any]] = field(default_factory=dict)

    def replay(self, key: bytes | memoryview, value: bytes | memoryview | None) -> None:
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
            return
        self.offsets.setdefault(k.group, {})[tp] = OffsetAndMetadata(
            v.offset, v.leader_epoch, v.metadata, v.commit_timestamp, v.expire_timestamp)


def replay_batches(state: GroupState, data: bytes | memoryview) -> int:
    """Replay every record of the whole batches in ``data`` into ``state``; the offset after
    the last batch (-1 if there was none)."""
    next_offset = -1
    for header in iter_batches(data):
        next_offset = header.next_offset
        if header.is_control:
            continue
        for record in decode_records(data, header.position, False):
            if record.key is not None:
                state.replay(record.key, record.value)
    return next_offset


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
