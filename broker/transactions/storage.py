"""The records of ``__transaction_state``: Apache Kafka's formats, byte for byte.

A transactional id lives in one partition of ``__transaction_state``, chosen as a group's
is in ``__consumer_offsets``::

    partition = Utils.abs(String.hashCode(transactional_id)) % transaction.state.log.num.partitions

Each record (protocol/schemas/transaction_storage.schema) is a key and a value:

    key   = int16 0 + TransactionLogKey(transactional_id)         (non-flexible)
    value = int16 value version + TransactionLogValue, or null    (a tombstone)

Kafka 4.x writes value v1 (flexible, with the tagged previous and next producer ids and the
client's transaction version) when transaction.version is 2, as a new 4.x cluster finalizes
it, and v0 below; both are read, and Strom, which runs at transaction.version 2, writes v1.
The partitions are null in the Empty (and Dead) state and grouped by topic otherwise. The
producer's last epoch is not stored: a loaded transaction has none (-1), as in Kafka.

Example, the key of "t": ``0000 0001 74``.

The partition is compacted: the latest record of a transactional id is its state, a
tombstone removes it. ``replay`` is what loading a partition from its start yields.
"""
from __future__ import annotations

import struct
from collections.abc import Iterable
from typing import Any

from broker.transactions.state import NO_PRODUCER_EPOCH, TransactionMetadata, TxnState
from protocol import messages as M
from protocol.java_hash import coordinator_partition
from protocol.types import Reader

TRANSACTION_STATE_TOPIC = "__transaction_state"

Record = tuple[bytes, bytes | None]  # (key, value); a value of None is a tombstone

KEY_VERSION = 0  # the coordinator record type of the transaction log
VALUE_VERSION_TV2 = 1  # what Kafka 4.x writes with transaction.version 2
VALUE_VERSION_TV0 = 0
_VERSION = struct.Struct(">h")


def partition_for(transactional_id: str, partitions: int) -> int:
    """The ``__transaction_state`` partition of a transactional id (Kafka's ``partitionFor``)."""
    return coordinator_partition(transactional_id, partitions)


def key(transactional_id: str) -> bytes:
    return _VERSION.pack(KEY_VERSION) + M.DATA["TransactionLogKey"].encode(
        KEY_VERSION, M.TransactionLogKey(transactional_id=transactional_id))


def value(meta: TransactionMetadata, version: int = VALUE_VERSION_TV2) -> bytes:
    """The value Kafka writes for ``meta`` (a transition's target)."""
    if meta.state is TxnState.EMPTY and meta.partitions:
        raise ValueError(f"an Empty transaction holds no partitions: {meta}")
    partitions = None
    if meta.state is not TxnState.EMPTY:
        by_topic: dict[str, list[int]] = {}
        for topic, p in sorted(meta.partitions):
            by_topic.setdefault(topic, []).append(p)
        partitions = [M.TransactionLogValue.PartitionsSchema(topic=t, partition_ids=ps)
                      for t, ps in by_topic.items()]
    v = M.TransactionLogValue(producer_id=meta.producer_id, producer_epoch=meta.producer_epoch,
                              transaction_timeout_ms=meta.timeout_ms, transaction_status=int(meta.state),
                              transaction_partitions=partitions,
                              transaction_last_update_timestamp_ms=meta.last_update_ms,
                              transaction_start_timestamp_ms=meta.start_ms)
    if version >= 1:  # tagged fields: v0 has none
        v.previous_producer_id = meta.previous_producer_id
        v.next_producer_id = meta.next_producer_id
        v.client_transaction_version = meta.client_transaction_version
    return _VERSION.pack(version) + M.DATA["TransactionLogValue"].encode(version, v)


def record(meta: TransactionMetadata) -> Record:
    """The record of a transition; a Dead transaction's is the tombstone of its key."""
    if meta.state is TxnState.DEAD:
        return key(meta.transactional_id), None
    return key(meta.transactional_id), value(meta)


def parse_key(data: bytes | memoryview) -> str | None:
    """The transactional id of a key; None for a key version this coordinator does not know
    (Kafka's UnknownKey, "a left over from an aborted upgrade": loading skips it);
    ValueError for a truncated key."""
    try:
        (version,) = _VERSION.unpack_from(data, 0)
    except struct.error as e:
        raise ValueError("truncated __transaction_state key") from e
    if version != KEY_VERSION:
        return None
    try:
        k: Any = M.DATA["TransactionLogKey"].decode(KEY_VERSION, Reader(memoryview(data)[2:]))
        return k.transactional_id
    except (IndexError, struct.error, EOFError) as e:
        raise ValueError("truncated __transaction_state key") from e


def parse_value(transactional_id: str, data: bytes | memoryview | None) -> TransactionMetadata | None:
    """The transaction a value holds; None for a tombstone."""
    if data is None:
        return None
    (version,) = _VERSION.unpack_from(data, 0)
    if not 0 <= version <= 1:
        raise ValueError(f"unknown __transaction_state value version {version}")
    v: Any = M.DATA["TransactionLogValue"].decode(version, Reader(memoryview(data)[2:]))
    state = TxnState(v.transaction_status)
    partitions: set[tuple[str, int]] = set()
    if state is not TxnState.EMPTY:
        for entry in v.transaction_partitions or ():
            partitions.update((entry.topic, p) for p in entry.partition_ids)
    return TransactionMetadata(
        transactional_id=transactional_id, producer_id=v.producer_id,
        previous_producer_id=getattr(v, "previous_producer_id", -1),
        next_producer_id=getattr(v, "next_producer_id", -1),
        producer_epoch=v.producer_epoch, last_producer_epoch=NO_PRODUCER_EPOCH,
        timeout_ms=v.transaction_timeout_ms, state=state, partitions=partitions,
        start_ms=v.transaction_start_timestamp_ms, last_update_ms=v.transaction_last_update_timestamp_ms,
        client_transaction_version=getattr(v, "client_transaction_version", 0))


def replay(records: Iterable[tuple[bytes | memoryview, bytes | memoryview | None]]
           ) -> dict[str, TransactionMetadata]:
    """The transactions that a partition's records, in offset order, leave: the latest value
    of each transactional id, less those a tombstone removed. A record whose key version is
    unknown is skipped, as Kafka's loadTransactionsForTxnTopicPartition skips it."""
    out: dict[str, TransactionMetadata] = {}
    for k, v in records:
        tid = parse_key(k)
        if tid is None:
            continue
        meta = parse_value(tid, v)
        if meta is None:
            out.pop(tid, None)
        else:
            out[tid] = meta
    return out
