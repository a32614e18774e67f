"""Transaction markers: the control batches that commit or abort a transaction on a partition.

The transaction coordinator ends a transaction by having each partition's leader append
one marker batch (Kafka's MemoryRecords.withEndTransactionMarker), a record batch v2 with::

    attributes          bit 5 (control) and bit 4 (transactional) set, no compression,
                        CreateTime: 0x0030
    producerId/Epoch    the transaction's producer and its epoch
    baseSequence        -1 (a marker has no sequence number)
    lastOffsetDelta     0; recordsCount 1
    base/maxTimestamp   the marker's timestamp

and one record, attributes 0, timestamp and offset deltas 0, no headers, whose

    key    ControlRecordType v0: version int16 = 0, type int16 (0 ABORT, 1 COMMIT)
    value  EndTxnMarker v0:      version int16 = 0, coordinatorEpoch int32

all big-endian (KRaft's control records share the key layout with types 2 and up; see
raft/records.py). The batch is built by ext.batch.build_batch like any other.

Reading a marker follows Kafka's EndTransactionMarker.deserialize: a key or value shorter
than its v0 fields, or a negative version, is an invalid record; a higher version is read
as v0 (its leading fields are v0's); a control type other than ABORT and COMMIT is not a
transaction marker. Only a control batch's first record is read, as ProducerStateManager
reads it; a control batch with no record (what compaction leaves of a marker whose
transaction is wholly cleaned) holds no marker.
"""
from __future__ import annotations

import struct
from typing import NamedTuple

from engine.errors import InvalidRecordError
from ext.batch import NO_SEQUENCE, build_batch, decode_records, read_header

CONTROL_ABORT = 0
CONTROL_COMMIT = 1
CONTROL_KEY_VERSION = 0
END_TXN_MARKER_VERSION = 0
MARKER_BATCH_ATTRIBUTES = 0x30  # control | transactional, no compression, CreateTime

_CONTROL_KEY = struct.Struct(">hh")  # version, type
_END_TXN_MARKER = struct.Struct(">hi")  # version, coordinatorEpoch


class EndTxnMarker(NamedTuple):
    control_type: int  # CONTROL_ABORT or CONTROL_COMMIT
    coordinator_epoch: int

    @property
    def is_commit(self) -> bool:
        return self.control_type == CONTROL_COMMIT


class MarkerBatch(NamedTuple):
    """What a marker batch says: its producer, its offset and the marker."""

    producer_id: int
    producer_epoch: int
    offset: int
    timestamp: int
    marker: EndTxnMarker


def build_control_key(control_type: int) -> bytes:
    return _CONTROL_KEY.pack(CONTROL_KEY_VERSION, control_type)


def parse_control_type(key: bytes | None) -> int:
    """The type of a control record from its key (Kafka's ControlRecordType.parse)."""
    if key is None or len(key) < _CONTROL_KEY.size:
        raise InvalidRecordError(
            f"control record key of {0 if key is None else len(key)} bytes, at least "
            f"{_CONTROL_KEY.size} expected")
    version, control_type = _CONTROL_KEY.unpack_from(key)
    if version < 0:
        raise InvalidRecordError(f"invalid control record key version {version}")
    return int(control_type)


def build_end_txn_marker_value(coordinator_epoch: int) -> bytes:
    return _END_TXN_MARKER.pack(END_TXN_MARKER_VERSION, coordinator_epoch)


def parse_end_txn_marker(key: bytes | None, value: bytes | None) -> EndTxnMarker:
    """The marker of a control record (Kafka's EndTransactionMarker.deserialize)."""
    control_type = parse_control_type(key)
    if control_type not in (CONTROL_ABORT, CONTROL_COMMIT):
        raise InvalidRecordError(f"control record type {control_type} is not a transaction marker")
    if value is None or len(value) < _END_TXN_MARKER.size:
        raise InvalidRecordError(
            f"end transaction marker value of {0 if value is None else len(value)} bytes, at "
            f"least {_END_TXN_MARKER.size} expected")
    version, coordinator_epoch = _END_TXN_MARKER.unpack_from(value)
    if version < 0:
        raise InvalidRecordError(f"invalid end transaction marker version {version}")
    return EndTxnMarker(control_type, coordinator_epoch)


def build_end_txn_marker_batch(control_type: int, producer_id: int, producer_epoch: int,
                               coordinator_epoch: int, timestamp_ms: int, base_offset: int = 0,
                               partition_leader_epoch: int = -1) -> bytes:
    """One marker batch as Kafka's writeEndTransactionalMarker builds it (layout above)."""
    if control_type not in (CONTROL_ABORT, CONTROL_COMMIT):
        raise ValueError(f"control type {control_type} is neither ABORT nor COMMIT")
    record = (build_control_key(control_type), build_end_txn_marker_value(coordinator_epoch),
              (), timestamp_ms)
    return build_batch([record], base_offset=base_offset,
                       partition_leader_epoch=partition_leader_epoch, producer_id=producer_id,
                       producer_epoch=producer_epoch, base_sequence=NO_SEQUENCE,
                       is_transactional=True, is_control=True)


def read_end_txn_marker(buf: bytes | bytearray | memoryview, pos: int = 0,
                        check_crc: bool = False) -> MarkerBatch | None:
    """The marker of the control batch at ``buf[pos:]``; None when it holds no record.
    InvalidRecordError for a batch that is not a control batch or whose first record is
    not a transaction marker; CorruptRecordError for a malformed batch (and, with
    ``check_crc``, a bad CRC: batches read back from a validated log need no second check)."""
    header = read_header(buf, pos)
    if not header.is_control:
        raise InvalidRecordError(f"the batch at offset {header.base_offset} is not a control batch")
    records = decode_records(buf, pos, check_crc)
    if not records:
        return None
    first = records[0]
    return MarkerBatch(header.producer_id, header.producer_epoch, first.offset, first.timestamp,
                       parse_end_txn_marker(first.key, first.value))


__all__ = [
    "CONTROL_ABORT", "CONTROL_COMMIT", "CONTROL_KEY_VERSION", "END_TXN_MARKER_VERSION",
    "MARKER_BATCH_ATTRIBUTES", "EndTxnMarker", "MarkerBatch", "build_control_key",
    "build_end_txn_marker_batch", "build_end_txn_marker_value", "parse_control_type",
    "parse_end_txn_marker", "read_end_txn_marker",
]
