"""Log entries <-> Kafka record batches v2 (the bytes of ``__cluster_metadata-0`` and snapshots).

Each ``raft.log.Entry`` is one record. The batch's base offset plus the record's offset delta is
the entry's offset; the batch's partitionLeaderEpoch is the entry's epoch (a batch never spans
two epochs). Data values are records with a null key; everything else is a control record in a
control batch (attributes bit 5), keyed ``version int16 = 0, type int16`` (see
protocol/metadata_records.py) with the value encoded as the record schema in its own leading
``version`` field:

| Entry value                 | batch   | control type | value schema (version written)     |
|-----------------------------|---------|--------------|------------------------------------|
| ``bytes``                   | data    | -            | one metadata record, key null      |
| ``raft.log.LeaderChange``   | control | 2            | LeaderChangeMessage (v0)           |
| ``SnapshotHeader``          | control | 3            | SnapshotHeaderRecord (v0)          |
| ``SnapshotFooter``          | control | 4            | SnapshotFooterRecord (v0)          |
| ``raft.voters.KRaftVersion`` | control | 5            | KRaftVersionRecord (v0)            |
| ``raft.voters.VoterSet``    | control | 6            | VotersRecord (v0)                  |

Field mapping of the control records:

| record              | field                              | from / to                             |
|---------------------|------------------------------------|---------------------------------------|
| LeaderChangeMessage | leader_id                          | LeaderChange.leader_id                |
|                     | voters, granting_voters [voter_id] | LeaderChange.voters (both the same)   |
| KRaftVersionRecord  | kraft_version                      | KRaftVersion.version                  |
| VotersRecord        | voters[].voter_id                  | Voter.id                              |
|                     | voters[].voter_directory_id (uuid) | Voter.directory_id; None <-> zero uuid |
|                     | voters[].endpoints[name,host,port] | Voter.endpoints (Endpoint)            |
|                     | voters[].kraft_version_feature     | Voter.min/max_kraft_version           |
| SnapshotHeaderRecord| last_contained_log_timestamp       | SnapshotHeader.last_contained_log_timestamp |

Batching (``build_batches``): consecutive entries of one epoch with consecutive offsets share a
batch when they are all data values (up to ``max_batch_bytes`` of values, Kafka's 8 MiB
MAX_BATCH_SIZE_BYTES) or when a KRaftVersion is immediately followed by a VoterSet (Kafka writes
that pair in one control batch); every other control value gets a control batch of its own.
Records carry ``now_ms`` as their timestamp; batches have no producer id and no compression.

Decoding (``decode_entries``) reads whole batches (CRC checked) and stops quietly at a truncated
trailing batch, which a Fetch answer bounded by max bytes may carry.
"""
from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from engine.control import build_control_key, parse_control_type
from engine.errors import InvalidRecordError
from ext.batch import (
    LOG_OVERHEAD,
    BatchHeader,
    Record,
    TruncatedBatchError,
    build_batch,
    decode_records,
    read_header,
)
from protocol import messages
from protocol.metadata_records import (
    CONTROL_KRAFT_VERSION,
    CONTROL_LEADER_CHANGE,
    CONTROL_SNAPSHOT_FOOTER,
    CONTROL_SNAPSHOT_HEADER,
    CONTROL_VOTERS,
)
from protocol.types import ZERO_UUID

from .log import Entry, LeaderChange
from .voters import Endpoint, KRaftVersion, Voter, VoterSet

MAX_BATCH_BYTES = 8 * 1024 * 1024  # Kafka's KafkaRaftClient.MAX_BATCH_SIZE_BYTES
_VERSION = struct.Struct(">h")  # the leading ``version`` field of every control record


@dataclass(frozen=True, slots=True)
class SnapshotHeader:
    """The SnapshotHeaderRecord control record: the first record of every snapshot."""

    last_contained_log_timestamp: int


@dataclass(frozen=True, slots=True)
class SnapshotFooter:
    """The SnapshotFooterRecord control record: the last record of every snapshot."""


# ---- control records ------------------------------------------------------------------------

def build_control_record(value: Any) -> tuple[bytes, bytes]:
    """(key, value) of the control record for a LeaderChange, KRaftVersion, VoterSet,
    SnapshotHeader or SnapshotFooter."""
    if isinstance(value, LeaderChange):
        voters = [messages.LeaderChangeMessage.Voter(voter_id=i) for i in value.voters]
        record = messages.LeaderChangeMessage(version=0, leader_id=value.leader_id, voters=voters,
                                              granting_voters=list(voters))
        return _encode(CONTROL_LEADER_CHANGE, "LeaderChangeMessage", record)
    if isinstance(value, KRaftVersion):
        return _encode(CONTROL_KRAFT_VERSION, "KRaftVersionRecord",
                       messages.KRaftVersionRecord(version=0, kraft_version=value.version))
    if isinstance(value, VoterSet):
        return _encode(CONTROL_VOTERS, "VotersRecord", build_voters_record(value))
    if isinstance(value, SnapshotHeader):
        return _encode(CONTROL_SNAPSHOT_HEADER, "SnapshotHeaderRecord", messages.SnapshotHeaderRecord(
            version=0, last_contained_log_timestamp=value.last_contained_log_timestamp))
    if isinstance(value, SnapshotFooter):
        return _encode(CONTROL_SNAPSHOT_FOOTER, "SnapshotFooterRecord",
                       messages.SnapshotFooterRecord(version=0))
    raise TypeError(f"no control record for {type(value).__name__}")


def parse_control_record(key: bytes | None, value: bytes | None) -> Any:
    """The value of a control record: LeaderChange, KRaftVersion, VoterSet, SnapshotHeader or
    SnapshotFooter. ValueError for another control type (transaction markers) or a malformed one."""
    try:
        control_type = parse_control_type(key)
    except InvalidRecordError as e:
        raise ValueError(str(e)) from None
    if value is None or len(value) < 2:
        raise ValueError(f"control record of type {control_type} without a value")
    if control_type == CONTROL_LEADER_CHANGE:
        record = _decode("LeaderChangeMessage", value)
        return LeaderChange(record.leader_id, tuple(v.voter_id for v in record.voters))
    if control_type == CONTROL_KRAFT_VERSION:
        return KRaftVersion(_decode("KRaftVersionRecord", value).kraft_version)
    if control_type == CONTROL_VOTERS:
        return parse_voters_record(_decode("VotersRecord", value))
    if control_type == CONTROL_SNAPSHOT_HEADER:
        return SnapshotHeader(_decode("SnapshotHeaderRecord", value).last_contained_log_timestamp)
    if control_type == CONTROL_SNAPSHOT_FOOTER:
        _decode("SnapshotFooterRecord", value)
        return SnapshotFooter()
    raise ValueError(f"unexpected control record type {control_type}")


def build_voters_record(voters: VoterSet) -> Any:
    """VotersRecord v0 for a voter set (a None directory id is written as the zero uuid)."""
    r = messages.VotersRecord
    return r(version=0, voters=[
        r.Voter(
            voter_id=v.id,
            voter_directory_id=ZERO_UUID if v.directory_id is None else v.directory_id,
            endpoints=[r.Endpoint(name=e.name, host=e.host, port=e.port) for e in v.endpoints],
            kraft_version_feature=r.KRaftVersionFeature(min_supported_version=v.min_kraft_version,
                                                        max_supported_version=v.max_kraft_version),
        )
        for v in voters.voters
    ])


def parse_voters_record(record: Any) -> VoterSet:
    return VoterSet.of(
        Voter(
            v.voter_id,
            None if v.voter_directory_id == ZERO_UUID else bytes(v.voter_directory_id),
            tuple(Endpoint(e.name, e.host, e.port) for e in v.endpoints),
            v.kraft_version_feature.min_supported_version,
            v.kraft_version_feature.max_supported_version,
        )
        for v in record.voters
    )


def _encode(control_type: int, name: str, record: Any) -> tuple[bytes, bytes]:
    return build_control_key(control_type), messages.DATA[name].encode(record.version, record)


def _decode(name: str, value: bytes | memoryview) -> Any:
    """Decode at the version named by the record's own leading int16."""
    version = _VERSION.unpack_from(value, 0)[0]
    codec = messages.DATA[name]
    codec.check_version(version)
    return codec.decode(version, value)


# ---- batches ----------------------------------------------------------------------------------

def _is_data(value: Any) -> bool:
    return isinstance(value, bytes | bytearray | memoryview)


def build_batches(entries: list[Entry], now_ms: int, max_batch_bytes: int = MAX_BATCH_BYTES) -> list[bytes]:
    """Record batches holding ``entries``, each batch's base offset and partition leader epoch
    those of its entries (see the module docstring for the grouping)."""
    batches: list[bytes] = []
    i, n = 0, len(entries)
    while i < n:
        first = entries[i]
        j = i + 1
        if _is_data(first.value):
            size = len(first.value)
            while j < n and _continues(entries[j - 1], entries[j]) and _is_data(entries[j].value):
                size += len(entries[j].value)
                if size > max_batch_bytes:
                    break
                j += 1
            data = [(None, bytes(e.value), (), now_ms) for e in entries[i:j]]
            batches.append(build_batch(data, base_offset=first.offset, partition_leader_epoch=first.epoch))
        else:
            if (isinstance(first.value, KRaftVersion) and j < n and _continues(first, entries[j])
                    and isinstance(entries[j].value, VoterSet)):
                j += 1
            records = [(*build_control_record(e.value), (), now_ms) for e in entries[i:j]]
            batches.append(build_batch(records, base_offset=first.offset, partition_leader_epoch=first.epoch,
                                       is_control=True))
        i = j
    return batches


def _continues(prev: Entry, entry: Entry) -> bool:
    return entry.offset == prev.offset + 1 and entry.epoch == prev.epoch


def iter_batches_records(data: bytes | bytearray | memoryview,
                         stop_at_truncated: bool = True) -> Iterator[tuple[BatchHeader, list[Record]]]:
    """Each complete batch of ``data`` with its decoded records (CRC checked). A truncated
    trailing batch ends the iteration, or raises TruncatedBatchError with
    ``stop_at_truncated=False``; any other damage raises CorruptRecordError."""
    pos, end = 0, len(data)
    while pos < end:
        if end - pos < LOG_OVERHEAD and stop_at_truncated:
            return
        try:
            header = read_header(data, pos)
        except TruncatedBatchError:
            if stop_at_truncated:
                return
            raise
        yield header, decode_records(data, pos)
        pos += header.size


def decode_entries(data: bytes | bytearray | memoryview) -> list[Entry]:
    """The entries in a run of batches (the inverse of ``build_batches``). ValueError for a
    control record that is not a log entry (a snapshot header or footer, a transaction marker)."""
    entries: list[Entry] = []
    for header, records in iter_batches_records(data):
        epoch = header.partition_leader_epoch
        if header.is_control:
            for r in records:
                value = parse_control_record(r.key, r.value)
                if isinstance(value, SnapshotHeader | SnapshotFooter):
                    raise ValueError(f"{type(value).__name__} at offset {r.offset} of a log")
                entries.append(Entry(r.offset, epoch, value))
        else:
            entries.extend(Entry(r.offset, epoch, b"" if r.value is None else r.value) for r in records)
    return entries


__all__ = [
    "MAX_BATCH_BYTES", "SnapshotHeader", "SnapshotFooter", "build_control_record", "parse_control_record",
    "build_voters_record", "parse_voters_record", "build_batches", "decode_entries", "iter_batches_records",
]
