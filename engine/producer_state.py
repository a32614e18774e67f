"""Idempotent producer state of one partition (Kafka's ProducerStateManager).

For every producer id the partition remembers its epoch, its last five batches
(first/last sequence, first/last offset) and the max timestamp of its last batch. A leader
append of a batch with a producer id is checked against it:

    older epoch                         -> INVALID_PRODUCER_EPOCH (fenced)
    newer epoch                         -> must start at sequence 0
    a batch equal to a remembered one   -> a duplicate: not written again; the original
                                           offsets are returned
    first sequence != last sequence + 1 -> OUT_OF_ORDER_SEQUENCE_NUMBER
    unknown producer, sequence != 0     -> UNKNOWN_PRODUCER_ID

An unknown producer is one this partition keeps no state for: never seen, its batches gone
with retention, or expired. Its batch is taken at sequence 0 only, the rule of Kafka up to 2.4;
the producer answers UNKNOWN_PRODUCER_ID by bumping its epoch (KIP-360) and starting again at
0. Kafka 2.5+ takes such a batch at any sequence instead: Strom tried that and a fault trial
(seed 3101) then stored one idempotent record twice, cause not yet established, so the older
rule stays until it is.

Expiration (producer.id.expiration.ms, Kafka's ``isProducerExpired``): a producer whose last
batch's max timestamp is ``producer.id.expiration.ms`` or more before now is forgotten. That
timestamp is the batch's as stored, so the producer's record time under CreateTime and the
leader's append time under LogAppendTime; leader and followers read the same one, and a
restart rebuilds it from the log. Kafka never expires a producer with an ongoing
transaction; Strom has no transactions yet, so no producer is exempt. Forgetting is what
bounds this state, and what it costs: a retry of a batch written before the expiry is no
longer recognised as a duplicate.

Sequences wrap at 2**31. After a restart or a truncation the state comes from the newest
snapshot at or below the log end, then the batch headers after it (no records are decoded):
``replay`` takes the C scans of the segments chunk by chunk and keeps per producer only what
the rules above leave (the newest epoch's last five batches), so Python makes no call per
batch.

Snapshots are Kafka's files (``<20-digit offset>.snapshot``, the ProducerSnapshot v1 layout:
int16 version, uint32 CRC32C of everything after it, int32 count, then per entry producer id
int64, epoch int16, last sequence int32, last offset int64, offset delta int32, timestamp
int64, coordinator epoch int32, current transaction's first offset int64). The log writes one
at each roll and at its log end when it closes (engine/log.py). Kafka writes one entry per
producer, its last batch, and keeps the last entry of a producer id when it reads one; Strom
writes a producer's remembered batches oldest first, so Kafka reads the newest and Strom gets
all five back: a retry of any of them after a restart is still recognised.
"""
from __future__ import annotations

import struct
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ext.crc import crc32c

BATCHES_KEPT = 5
INT_MAX = 2**31 - 1
_CONTROL = 0x20  # batch attributes: a control batch (transaction markers) is no producer's write

SNAPSHOT_SUFFIX = ".snapshot"
SNAPSHOT_VERSION = 1
_SNAPSHOT_HEAD = struct.Struct(">hI")  # version, CRC32C of what follows
_SNAPSHOT_COUNT = struct.Struct(">i")
_SNAPSHOT_ENTRY = struct.Struct(">qhiqiqiq")
_CRC_FROM = _SNAPSHOT_HEAD.size


class ProducerFencedError(Exception):
    """An append from an older producer epoch."""


class OutOfOrderSequenceError(Exception):
    pass


class UnknownProducerIdError(Exception):
    pass


class CorruptSnapshotError(Exception):
    """A producer snapshot file that fails its version, length or CRC check."""


@dataclass(frozen=True)
class BatchMetadata:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int


@dataclass
class ProducerEntry:
    epoch: int
    batches: deque = field(default_factory=lambda: deque(maxlen=BATCHES_KEPT))
    last_timestamp: int = -1  # max timestamp of the last batch written; expiry counts from it

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1


def _next_seq(seq: int) -> int:
    return 0 if seq == INT_MAX else seq + 1


def last_sequence(first_seq: int, delta: int) -> int:
    """The last sequence of a batch of ``delta`` + 1 records from ``first_seq`` (-1: none)."""
    return (first_seq + delta) % 2**31 if first_seq >= 0 else -1


class ProducerStateManager:
    def __init__(self) -> None:
        self.producers: dict[int, ProducerEntry] = {}

    def check(self, producer_id: int, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        """Validate one batch before it is written. Returns the remembered batch if this one
        is a duplicate (retry of a batch already in the log), None if it may be written."""
        entry = self.producers.get(producer_id)
        if entry is None:
            if first_seq != 0:
                raise UnknownProducerIdError(
                    f"producer {producer_id} is unknown here and its first sequence is {first_seq}")
            return None
        if epoch < entry.epoch:
            raise ProducerFencedError(
                f"producer {producer_id} epoch {epoch} is older than the current epoch {entry.epoch}")
        if epoch > entry.epoch:
            if first_seq != 0:
                raise OutOfOrderSequenceError(
                    f"producer {producer_id} new epoch {epoch} must start at sequence 0, not {first_seq}")
            return None
        for batch in entry.batches:
            if batch.first_seq == first_seq and batch.last_seq == last_seq:
                return batch
        if first_seq != _next_seq(entry.last_seq):
            raise OutOfOrderSequenceError(
                f"producer {producer_id} sent sequence {first_seq}, expected {_next_seq(entry.last_seq)}")
        return None

    def update(self, producer_id: int, epoch: int, first_seq: int, last_seq: int,
               first_offset: int, last_offset: int, max_timestamp: int) -> None:
        """Record a batch that was written (leader or follower append, or log replay);
        ``max_timestamp`` is the batch header's, as stored."""
        entry = self.producers.get(producer_id)
        if entry is None or epoch > entry.epoch:
            entry = self.producers[producer_id] = ProducerEntry(epoch)
        elif epoch < entry.epoch:
            return
        entry.batches.append(BatchMetadata(first_seq, last_seq, first_offset, last_offset))
        entry.last_timestamp = max_timestamp

    def replay(self, summaries: Iterable[Any]) -> None:
        """``update`` for every producer batch of ``summaries`` (ext.batch.BatchSummary scans of
        the log, in log order), in one pass: each producer keeps a plain tail of its newest
        epoch's last batches until the end, when its entry is made."""
        tails: dict[int, list] = {}  # producer id -> [epoch, deque of batch tuples, max timestamp]
        for summary in summaries:
            for pid, epoch, seq, base, last, attributes, max_ts in zip(
                summary.producer_ids, summary.producer_epochs, summary.base_sequences,
                summary.base_offsets, summary.last_offsets, summary.attributes, summary.max_timestamps,
            ):
                if pid < 0 or attributes & _CONTROL:
                    continue
                tail = tails.get(pid)
                if tail is None:
                    entry = self.producers.get(pid)
                    tail = tails[pid] = [-1, deque(maxlen=BATCHES_KEPT), -1] if entry is None else [
                        entry.epoch, deque(((b.first_seq, b.last_seq - b.first_seq, b.first_offset,
                                             b.last_offset) for b in entry.batches), maxlen=BATCHES_KEPT),
                        entry.last_timestamp]
                if epoch > tail[0]:
                    tail[0] = epoch
                    tail[1].clear()
                elif epoch < tail[0]:
                    continue
                tail[1].append((seq, last - base, base, last))
                tail[2] = max_ts
        for pid, (epoch, batches, max_ts) in tails.items():
            entry = self.producers[pid] = ProducerEntry(epoch)
            entry.batches.extend(BatchMetadata(seq, last_sequence(seq, delta), first, last)
                                 for seq, delta, first, last in batches)
            entry.last_timestamp = max_ts

    def snapshot(self) -> bytes:
        """The producer state as a snapshot file's bytes (see the module docstring)."""
        pack = _SNAPSHOT_ENTRY.pack
        rows = []
        for pid, entry in self.producers.items():
            if not entry.batches:
                rows.append(pack(pid, entry.epoch, -1, -1, 0, entry.last_timestamp, -1, -1))
            for b in entry.batches:
                rows.append(pack(pid, entry.epoch, b.last_seq, b.last_offset, b.last_offset - b.first_offset,
                                 entry.last_timestamp, -1, -1))
        body = _SNAPSHOT_COUNT.pack(len(rows)) + b"".join(rows)
        return _SNAPSHOT_HEAD.pack(SNAPSHOT_VERSION, crc32c(body)) + body

    def load_snapshot(self, data: bytes) -> None:
        """Replace the state with a snapshot file's; CorruptSnapshotError (state untouched) when
        the file fails its checks."""
        if len(data) < _CRC_FROM + _SNAPSHOT_COUNT.size:
            raise CorruptSnapshotError(f"{len(data)} bytes: shorter than a snapshot's header")
        version, crc = _SNAPSHOT_HEAD.unpack_from(data, 0)
        if version != SNAPSHOT_VERSION:
            raise CorruptSnapshotError(f"unknown snapshot version {version}")
        (count,) = _SNAPSHOT_COUNT.unpack_from(data, _CRC_FROM)
        if count < 0 or len(data) != _CRC_FROM + _SNAPSHOT_COUNT.size + count * _SNAPSHOT_ENTRY.size:
            raise CorruptSnapshotError(f"{len(data)} bytes do not hold {count} entries")
        computed = crc32c(memoryview(data)[_CRC_FROM:])
        if computed != crc:
            raise CorruptSnapshotError(f"CRC {crc:#010x} stored, {computed:#010x} computed")
        producers: dict[int, ProducerEntry] = {}
        for pid, epoch, last_seq, last_offset, delta, timestamp, _, _ in _SNAPSHOT_ENTRY.iter_unpack(
                memoryview(data)[_CRC_FROM + _SNAPSHOT_COUNT.size:]):
            entry = producers.get(pid)
            if entry is None or entry.epoch != epoch:
                entry = producers[pid] = ProducerEntry(epoch)
            if last_offset >= 0:
                first_seq = (last_seq - delta) % 2**31 if last_seq >= 0 else -1
                entry.batches.append(BatchMetadata(first_seq, last_seq, last_offset - delta, last_offset))
            entry.last_timestamp = timestamp
        self.producers = producers

    def remove_expired_producers(self, now_ms: int, expiration_ms: int) -> list[int]:
        """Forget every producer whose last batch's max timestamp is ``expiration_ms`` or more
        before ``now_ms`` (producer.id.expiration.ms); the ids forgotten."""
        expired = [pid for pid, entry in self.producers.items()
                   if now_ms - entry.last_timestamp >= expiration_ms]
        for pid in expired:
            del self.producers[pid]
        return expired

    def truncate(self) -> None:
        self.producers.clear()
