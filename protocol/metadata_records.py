"""Metadata log records as Kafka frames them in a record value, and KRaft control records.

Metadata record value (key is null)::

    frameVersion  unsigned varint  = 1
    recordType    unsigned varint  (TopicRecord = 2, PartitionRecord = 3, ...)
    version       unsigned varint  the record schema version
    record        the record, in that version

Control record key (in a control batch)::

    version int16 = 0, type int16 (2 LeaderChange, 3 SnapshotHeader, 4 SnapshotFooter,
    5 KRaftVersion, 6 Voters); the value is the control record itself.
"""
from __future__ import annotations

from typing import Any

from protocol import messages
from protocol.types import ProtocolError, Reader, Writer

FRAME_VERSION = 1

CONTROL_LEADER_CHANGE = 2
CONTROL_SNAPSHOT_HEADER = 3
CONTROL_SNAPSHOT_FOOTER = 4
CONTROL_KRAFT_VERSION = 5
CONTROL_VOTERS = 6


def encode_record(record: Any, version: int | None = None) -> bytes:
    codec = messages.DATA[type(record).__name__]
    record_type = codec.message.record_type
    if record_type is None:
        raise ValueError(f"{type(record).__name__} is not a metadata record")
    version = codec.message.versions.hi if version is None else version
    w = Writer()
    w.uvarint(FRAME_VERSION)
    w.uvarint(record_type)
    w.uvarint(version)
    codec.write(version, record, w)
    return bytes(w.buf)


def decode_record(value: bytes | memoryview) -> tuple[int, int, Any]:
    """(record type, version, record); ProtocolError for an unknown frame or type."""
    r = Reader(value)
    frame = r.uvarint()
    if frame != FRAME_VERSION:
        raise ProtocolError(f"unknown metadata record frame version {frame}")
    record_type = r.uvarint()
    version = r.uvarint()
    codec = messages.RECORDS.get(record_type)
    if codec is None:
        raise ProtocolError(f"unknown metadata record type {record_type}")
    return record_type, version, codec.decode(version, r)
