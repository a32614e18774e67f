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
restart rebuilds it from the log. A producer with an ongoing transaction is never expired
(Kafka's rule: its open transaction holds the last stable offset). Forgetting is what
bounds this state, and what it costs: a retry of a batch written before the expiry is no
longer recognised as a duplicate.

Transactions (KIP-98, Kafka's ProducerAppendInfo). A transactional data batch (attributes bit
4, not control) opens its producer's transaction at the batch's first offset when none is
open (``current_txn_first_offset``); a non-transactional batch while one is open is
INVALID_TXN_STATE. A marker (a control batch, engine/control.py) ends it, as
appendEndTxnMarker: refused with INVALID_PRODUCER_EPOCH when its producer epoch is below the
producer's (with transaction.version 2, KIP-890, also at it while a transaction is open: the
coordinator bumps the epoch before it writes the marker; at it with none open the marker is a
resend, taken, KAFKA-19999), and with TRANSACTION_COORDINATOR_FENCED when its
coordinator epoch is below the last one this producer's markers carried. A marker takes the
producer to its epoch (a new epoch forgets the batches, so the next one starts at sequence
0), records its coordinator epoch, and, if a transaction was open, completes it: a
CompletedTxn (producer, first offset, the marker's offset, aborted or not, and the last
stable offset once it completed: the first offset of the earliest other open transaction, or
the marker's offset + 1, Kafka's lastStableOffset(CompletedTxn)) that the log indexes in its
.txnindex when aborted. A completed transaction stays unstable until the high watermark passes
its marker (Kafka's unreplicatedTxns): ``first_unstable_offset(hw)`` is the least first offset
of the open and the not yet replicated ones. Markers replayed from a log (a follower's append,
a recovery) are never refused, as Kafka's REPLICATION origin only warns, and one there at an
epoch other than its producer's, even a lower one (the leader took it after expiring the
producer), takes the producer to that epoch as a data batch does (maybeUpdateProducerEpoch),
so followers and a replay keep the leader's transactions and .txnindex. Writes of the broker's
own coordinators (``coordinator=True``: the group coordinator's transactional offset commits,
base sequence -1) have their epoch checked and no sequence, as Kafka's COORDINATOR origin.

Verification (KIP-890, Kafka's VerificationGuard). When transaction.partition.verification.enable
holds, a transactional batch of a producer with no transaction open here is appended only after
its transaction coordinator said the partition is in the transaction. ``start_verification``,
called before that request, returns the producer's guard (made on first use, shared by the
verifications under way together), or SENTINEL_GUARD when the producer's transaction at that
epoch is already open. Every transactional batch and every marker of the producer clears its
guard, leader, follower or replay alike (Kafka's updateProducers). The append then passes the
guard: ``verified`` is true when the producer's transaction at the batch's epoch is open, or the
guard is still the stored one. So a marker that lands while the coordinator is being asked (a
transaction.timeout.ms abort at the same epoch, before transaction.version 2) voids the
verification, and the late batch is refused with INVALID_TXN_STATE instead of opening a
transaction no coordinator will end. A guard left by a verification that failed is forgotten
with the expired producers, after producer.id.expiration.ms.

Sequences wrap at 2**31. After a restart or a truncation the state comes from the newest
snapshot at or below the log end, then the batch headers after it (no records are decoded):
``replay`` takes the C scans of the segments chunk by chunk and keeps per producer only what
the rules above leave (the newest epoch's last five batches), so Python makes no call per
batch.

Snapshots are Kafka's files (``<20-digit offset>.snapshot``, the ProducerSnapshot v1 layout:
int16 version, uint32 CRC32C of everything after it, int32 count, then per entry producer id
int64, epoch int16, last sequence int32, last offset int64, offset delta int32, timestamp
int64, coordinator epoch int32, current transaction's first offset int64). The log writes one
at each roll and at its log end when it closes (engine/log.py). The coordinator epoch and
the current transaction's first offset are written as Kafka writes them, and loading a
snapshot reopens the transactions it names (Kafka's loadFromSnapshot). Kafka writes one entry per
producer, its last batch, and keeps the last entry of a producer id when it reads one; Strom
writes a producer's remembered batches oldest first, so Kafka reads the newest and Strom gets
all five back: a retry of any of them after a restart is still recognised.
"""
from __future__ import annotations

import struct
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from engine.control import MarkerBatch, read_end_txn_marker
from engine.errors import InvalidRecordError
from ext.crc import crc32c

BATCHES_KEPT = 5
INT_MAX = 2**31 - 1
# Record batch attributes.
ATTR_TRANSACTIONAL = 0x10  # part of a transaction
ATTR_CONTROL = 0x20  # a control batch (transaction markers): no producer's own write
ATTR_TXN_OR_CONTROL = ATTR_CONTROL | ATTR_TRANSACTIONAL

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


class InvalidTxnStateError(Exception):
    """A non-transactional write from a producer whose transaction is open."""


class CoordinatorFencedError(Exception):
    """A marker from a transaction coordinator older than the last one seen for its producer."""


class VerificationGuard:
    """One producer's verification under way on a partition (Kafka's VerificationGuard),
    compared by identity."""

    __slots__ = ("created_ms",)

    def __init__(self, created_ms: int) -> None:
        self.created_ms = created_ms

    def __repr__(self) -> str:
        return "VerificationGuard(sentinel)" if self is SENTINEL_GUARD else \
            f"VerificationGuard({self.created_ms})"


# A verification not needed: the producer's transaction was open when it was asked for. It
# verifies nothing by itself: a batch that carries it is taken only while that stays so.
SENTINEL_GUARD = VerificationGuard(-1)


class CompletedTxn(NamedTuple):
    """A transaction a marker ended (Kafka's CompletedTxn), with the last stable offset its
    .txnindex entry records."""

    producer_id: int
    first_offset: int
    last_offset: int  # the marker's offset
    is_aborted: bool
    last_stable_offset: int


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
    coordinator_epoch: int = -1  # of the last marker
    current_txn_first_offset: int = -1  # the open transaction's first offset; -1: none

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1


def _next_seq(seq: int) -> int:
    return 0 if seq == INT_MAX else seq + 1


def marker_of(buf: Any, position: int) -> MarkerBatch | None:
    """The transaction marker of the control batch at ``buf[position:]`` as written to a log;
    None when it holds none (an empty control batch, or a control record that is no
    transaction marker: written by a replica, such a batch ends nothing)."""
    try:
        return read_end_txn_marker(buf, position)
    except InvalidRecordError:
        return None


def last_sequence(first_seq: int, delta: int) -> int:
    """The last sequence of a batch of ``delta`` + 1 records from ``first_seq`` (-1: none)."""
    return (first_seq + delta) % 2**31 if first_seq >= 0 else -1


class ProducerStateManager:
    def __init__(self) -> None:
        self.producers: dict[int, ProducerEntry] = {}
        # Open transactions: producer id -> first offset. Completed ones whose marker the high
        # watermark has not passed yet, in marker order: (first offset, marker offset).
        self.ongoing: dict[int, int] = {}
        self.unreplicated: deque[tuple[int, int]] = deque()
        self.verifications: dict[int, VerificationGuard] = {}  # producer id -> its guard

    def has_ongoing(self, producer_id: int, epoch: int) -> bool:
        """Whether the producer's transaction at ``epoch`` is open here."""
        entry = self.producers.get(producer_id)
        return entry is not None and entry.epoch == epoch and entry.current_txn_first_offset >= 0

    def start_verification(self, producer_id: int, epoch: int, now_ms: int) -> VerificationGuard:
        """The guard a verification of the producer's transaction on this partition carries to
        its append (see the module docstring): SENTINEL_GUARD when its transaction at
        ``epoch`` is already open, else the producer's guard, made if it has none."""
        if self.has_ongoing(producer_id, epoch):
            return SENTINEL_GUARD
        guard = self.verifications.get(producer_id)
        if guard is None:
            guard = self.verifications[producer_id] = VerificationGuard(now_ms)
        return guard

    def verified(self, producer_id: int, epoch: int, guard: VerificationGuard) -> bool:
        """Whether a transactional batch of the producer at ``epoch`` that carries ``guard``
        may be appended (Kafka's batchMissingRequiredVerification, negated)."""
        if self.has_ongoing(producer_id, epoch):
            return True
        return guard is not SENTINEL_GUARD and self.verifications.get(producer_id) is guard

    def check(self, producer_id: int, epoch: int, first_seq: int, last_seq: int,
              transactional: int = 0, coordinator: bool = False,
              guard: VerificationGuard | None = None) -> BatchMetadata | None:
        """Validate one batch before it is written. Returns the remembered batch if this one
        is a duplicate (retry of a batch already in the log), None if it may be written.
        ``transactional``: non-zero for a batch of a transaction (its attributes bit 4);
        ``coordinator``: a broker coordinator's write, whose epoch alone is checked;
        ``guard``: KIP-890's verification guard the append carries (None: verification off).
        In Kafka's order (analyzeAndValidateProducerState, then appendDataBatch): a duplicate
        first (a client's write at the producer's epoch), then the verification, the epoch,
        the sequence, and the transaction state last."""
        entry = self.producers.get(producer_id)
        if entry is not None and not coordinator and epoch == entry.epoch:
            for batch in entry.batches:
                if batch.first_seq == first_seq and batch.last_seq == last_seq:
                    return batch
        if guard is not None and transactional and not self.verified(producer_id, epoch, guard):
            raise InvalidTxnStateError(
                f"producer {producer_id} epoch {epoch}: a transactional batch whose verification a "
                f"marker voided, or that was never verified (no transaction of it is open here)")
        if entry is None:
            if first_seq != 0 and not coordinator:
                raise UnknownProducerIdError(
                    f"producer {producer_id} is unknown here and its first sequence is {first_seq}")
            return None
        if epoch < entry.epoch:
            raise ProducerFencedError(
                f"producer {producer_id} epoch {epoch} is older than the current epoch {entry.epoch}")
        if not coordinator:
            if epoch > entry.epoch:
                if first_seq != 0:
                    raise OutOfOrderSequenceError(
                        f"producer {producer_id} new epoch {epoch} must start at sequence 0, not {first_seq}")
            elif first_seq != _next_seq(entry.last_seq):
                raise OutOfOrderSequenceError(
                    f"producer {producer_id} sent sequence {first_seq}, expected {_next_seq(entry.last_seq)}")
        if not transactional and entry.current_txn_first_offset >= 0:
            raise InvalidTxnStateError(
                f"producer {producer_id} wrote outside its transaction open since offset "
                f"{entry.current_txn_first_offset}")
        return None

    def check_marker(self, producer_id: int, epoch: int, coordinator_epoch: int,
                     transaction_version: int = 0) -> None:
        """A leader's checks of a marker before it is written (Kafka's appendEndTxnMarker):
        ProducerFencedError for an older epoch (transaction.version 2: also the same epoch
        while a transaction is open), and CoordinatorFencedError for an older coordinator
        epoch. At transaction.version 2 a marker at the producer's epoch with no transaction
        open is a resend of the marker that bumped it (a coordinator resuming PrepareCommit/
        PrepareAbort after a failover, or a WriteTxnMarkers answer lost): it passes and is
        written again, ending nothing (Kafka's checkProducerEpoch, KAFKA-19999)."""
        entry = self.producers.get(producer_id)
        if entry is None:
            return
        if epoch < entry.epoch or (transaction_version >= 2 and epoch == entry.epoch
                                   and entry.current_txn_first_offset >= 0):
            raise ProducerFencedError(
                f"marker of producer {producer_id} at epoch {epoch}, which is "
                f"{'<=' if epoch == entry.epoch else '<'} the last seen epoch {entry.epoch} "
                f"(transaction.version {transaction_version})")
        if coordinator_epoch < entry.coordinator_epoch:
            raise CoordinatorFencedError(
                f"marker of producer {producer_id} from coordinator epoch {coordinator_epoch} "
                f"(zombie), {entry.coordinator_epoch} (current)")

    def update(self, producer_id: int, epoch: int, first_seq: int, last_seq: int,
               first_offset: int, last_offset: int, max_timestamp: int,
               transactional: bool = False) -> None:
        """Record a batch that was written (leader or follower append, or log replay);
        ``max_timestamp`` is the batch header's, as stored. The producer takes the batch's
        epoch whenever it differs from its own, even a lower one, forgetting its batches
        (Kafka's maybeUpdateProducerEpoch): the leader refused a lower epoch before writing
        it (``check``), so one in the log is one the leader took, e.g. after it expired the
        producer, and a follower or a replay must follow it (AppendOrigin.REPLICATION)."""
        entry = self.producers.get(producer_id)
        if entry is None:
            entry = self.producers[producer_id] = ProducerEntry(epoch)
        elif epoch != entry.epoch:
            entry.epoch = epoch
            entry.batches.clear()
        entry.batches.append(BatchMetadata(first_seq, last_seq, first_offset, last_offset))
        entry.last_timestamp = max_timestamp
        if transactional:
            if self.verifications:
                self.verifications.pop(producer_id, None)
            if entry.current_txn_first_offset < 0:
                entry.current_txn_first_offset = first_offset
                self.ongoing[producer_id] = first_offset

    def complete(self, producer_id: int, epoch: int, coordinator_epoch: int, is_commit: bool,
                 offset: int, timestamp: int) -> CompletedTxn | None:
        """A marker was written at ``offset``: the producer moves to its epoch and coordinator
        epoch, and its open transaction, if any, completes (see the module docstring). Its
        epoch is taken even when lower than the producer's, as ``update`` takes it (the leader
        refused such a marker before writing it: ``check_marker``)."""
        if self.verifications:
            self.verifications.pop(producer_id, None)
        entry = self.producers.get(producer_id)
        if entry is None:
            entry = self.producers[producer_id] = ProducerEntry(epoch)
        elif epoch != entry.epoch:
            entry.epoch = epoch
            entry.batches.clear()
        entry.coordinator_epoch = coordinator_epoch
        entry.last_timestamp = timestamp
        first = entry.current_txn_first_offset
        if first < 0:
            return None
        entry.current_txn_first_offset = -1
        lso = offset + 1
        for pid, other_first in self.ongoing.items():
            if pid != producer_id and other_first < lso:
                lso = other_first
        del self.ongoing[producer_id]
        self.unreplicated.append((first, offset))
        return CompletedTxn(producer_id, first, offset, not is_commit, lso)

    def append_batch(self, buf: Any, producer_id: int, epoch: int, first_seq: int, base_offset: int,
                     last_offset: int, attributes: int, max_timestamp: int,
                     position: int) -> CompletedTxn | None:
        """One written batch of a producer (the batch at ``buf[position:]``, its header's
        fields given) into the state, by its kind: a data batch, transactional or not, goes
        to ``update``, a control batch's transaction marker to ``complete``, whose completed
        transaction is returned (Kafka's ProducerAppendInfo.append)."""
        if attributes & ATTR_CONTROL:
            marker = marker_of(buf, position)
            if marker is None:
                return None
            return self.complete(producer_id, epoch, marker.marker.coordinator_epoch, marker.marker.is_commit,
                                 marker.offset, marker.timestamp)
        self.update(producer_id, epoch, first_seq, last_sequence(first_seq, last_offset - base_offset),
                    base_offset, last_offset, max_timestamp, attributes & ATTR_TRANSACTIONAL != 0)
        return None

    def on_high_watermark_updated(self, high_watermark: int) -> None:
        """Forget the completed transactions whose marker the high watermark passed (Kafka's
        onHighWatermarkUpdated, removeUnreplicatedTransactions)."""
        unreplicated = self.unreplicated
        while unreplicated and unreplicated[0][1] < high_watermark:
            unreplicated.popleft()

    def first_unstable_offset(self, high_watermark: int) -> int | None:
        """The least first offset of a transaction still open, or completed by a marker the
        high watermark has not passed (Kafka's firstUnstableOffset); None when there is none."""
        unreplicated = self.unreplicated
        while unreplicated and unreplicated[0][1] < high_watermark:
            unreplicated.popleft()
        if not self.ongoing and not unreplicated:
            return None
        firsts = [first for first, _ in unreplicated]
        firsts.extend(self.ongoing.values())
        return min(firsts)

    def replay(self, chunks: Iterable[tuple[Any, Any]]) -> list[CompletedTxn]:
        """``update`` (and ``complete`` for each marker) for every producer batch of
        ``chunks`` ((bytes, their ext.batch.BatchSummary scan) of the log, in log order), in
        one pass: each producer keeps a plain tail of its newest epoch's last batches until
        the end, when its entry is made; a transactional batch or a marker goes through the
        entry at once. The transactions completed, in order."""
        tails: dict[int, list] = {}  # producer id -> [epoch, deque of batch tuples, max timestamp]
        completed: list[CompletedTxn] = []
        for chunk, summary in chunks:
            for pid, epoch, seq, base, last, attributes, max_ts, position in zip(
                summary.producer_ids, summary.producer_epochs, summary.base_sequences,
                summary.base_offsets, summary.last_offsets, summary.attributes, summary.max_timestamps,
                summary.positions,
            ):
                if pid < 0:
                    continue
                if attributes & ATTR_TXN_OR_CONTROL:
                    tail = tails.pop(pid, None)
                    if tail is not None:
                        self._settle(pid, *tail)
                    done = self.append_batch(chunk, pid, epoch, seq, base, last, attributes, max_ts,
                                             position)
                    if done is not None:
                        completed.append(done)
                    continue
                tail = tails.get(pid)
                if tail is None:
                    entry = self.producers.get(pid)
                    tail = tails[pid] = [-1, deque(maxlen=BATCHES_KEPT), -1] if entry is None else [
                        entry.epoch, deque(((b.first_seq, b.last_seq - b.first_seq, b.first_offset,
                                             b.last_offset) for b in entry.batches), maxlen=BATCHES_KEPT),
                        entry.last_timestamp]
                if epoch != tail[0]:
                    tail[0] = epoch
                    tail[1].clear()
                tail[1].append((seq, last - base, base, last))
                tail[2] = max_ts
        for pid, (epoch, batches, max_ts) in tails.items():
            self._settle(pid, epoch, batches, max_ts)
        return completed

    def _settle(self, pid: int, epoch: int, batches: deque, max_ts: int) -> None:
        """A replay tail becomes the producer's entry (its transaction fields stay)."""
        entry = self.producers.get(pid)
        if entry is None or entry.epoch != epoch:
            old = entry
            entry = self.producers[pid] = ProducerEntry(epoch)
            if old is not None:
                entry.coordinator_epoch = old.coordinator_epoch
                entry.current_txn_first_offset = old.current_txn_first_offset
        entry.batches.clear()
        entry.batches.extend(BatchMetadata(seq, last_sequence(seq, delta), first, last)
                             for seq, delta, first, last in batches)
        entry.last_timestamp = max_ts

    def snapshot(self) -> bytes:
        """The producer state as a snapshot file's bytes (see the module docstring)."""
        pack = _SNAPSHOT_ENTRY.pack
        rows = []
        for pid, entry in self.producers.items():
            coordinator_epoch, txn_first = entry.coordinator_epoch, entry.current_txn_first_offset
            if not entry.batches:
                rows.append(pack(pid, entry.epoch, -1, -1, 0, entry.last_timestamp, coordinator_epoch,
                                 txn_first))
            for b in entry.batches:
                rows.append(pack(pid, entry.epoch, b.last_seq, b.last_offset, b.last_offset - b.first_offset,
                                 entry.last_timestamp, coordinator_epoch, txn_first))
        body = _SNAPSHOT_COUNT.pack(len(rows)) + b"".join(rows)
        return _SNAPSHOT_HEAD.pack(SNAPSHOT_VERSION, crc32c(body)) + body

    def load_snapshot(self, data: bytes) -> None:
        """Replace the state with a snapshot file's; CorruptSnapshotError (state untouched) when
        the file fails its checks. The transactions the snapshot names as open are open again;
        none is completed-but-unreplicated (a snapshot is taken below the log end, and a
        loaded log's high watermark is taken as passing every marker below it)."""
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
        for pid, epoch, last_seq, last_offset, delta, timestamp, coordinator_epoch, txn_first in \
                _SNAPSHOT_ENTRY.iter_unpack(memoryview(data)[_CRC_FROM + _SNAPSHOT_COUNT.size:]):
            entry = producers.get(pid)
            if entry is None or entry.epoch != epoch:
                entry = producers[pid] = ProducerEntry(epoch)
            if last_offset >= 0:
                first_seq = (last_seq - delta) % 2**31 if last_seq >= 0 else -1
                entry.batches.append(BatchMetadata(first_seq, last_seq, last_offset - delta, last_offset))
            entry.last_timestamp = timestamp
            entry.coordinator_epoch = coordinator_epoch
            entry.current_txn_first_offset = txn_first
        self.producers = producers
        self.ongoing = {pid: entry.current_txn_first_offset for pid, entry in producers.items()
                        if entry.current_txn_first_offset >= 0}
        self.unreplicated.clear()
        self.verifications.clear()

    def remove_expired_producers(self, now_ms: int, expiration_ms: int) -> list[int]:
        """Forget every producer whose last batch's max timestamp is ``expiration_ms`` or more
        before ``now_ms`` (producer.id.expiration.ms) and whose transaction is not open; the
        ids forgotten."""
        expired = [pid for pid, entry in self.producers.items()
                   if now_ms - entry.last_timestamp >= expiration_ms and entry.current_txn_first_offset < 0]
        for pid in expired:
            del self.producers[pid]
        stale = [pid for pid, guard in self.verifications.items()
                 if now_ms - guard.created_ms >= expiration_ms]
        for pid in stale:
            del self.verifications[pid]
        return expired

    def truncate(self) -> None:
        self.producers.clear()
        self.ongoing.clear()
        self.unreplicated.clear()
        self.verifications.clear()
