"""The log cleaner: Apache Kafka's Cleaner (log compaction) over a ``Log``.

Theory of operation. ``engine/cleaner_plan.py`` decides which log to clean and how far
(``describe`` turns a Log into its ``CleanerLog``); ``Cleaner.clean`` then does what Kafka's
Cleaner.doClean does:

1. The offset map (ext.offset_map, keys hashed in C) takes every keyed record of the dirty
   section [first dirty offset, first uncleanable offset), skipping the data of aborted
   transactions (the segments' ``.txnindex`` entries); when it fills up, cleaning stops
   after the last offset it took (``end_offset``). A segment that ends in a gap moves the
   map's latest offset to the offset before the next segment.
2. The segments from the log's first up to ``end_offset`` are grouped
   (``group_segments_by_size``) and each group is rewritten into one segment, batch by
   batch, with Kafka's MemoryRecords.filterTo rules:

   - a record is kept when ``OffsetMap.retain_mask`` keeps it (the last of its key, or past
     the map; a tombstone only until its batch's delete horizon has passed);
   - a batch that keeps every record, and needs no delete horizon, is copied byte for byte;
   - a batch that keeps some is rebuilt: its base offset, last offset (so offsets keep their
     gaps), partition leader epoch, producer id, epoch and base sequence and its
     transactional and control bits kept, its records kept with their own offsets and
     timestamps, in its own codec;
   - a batch that keeps none is dropped, unless it holds its producer's last sequence, or
     is the control batch of an active producer's current epoch when the producer has no data
     batch left (KIP-890's epoch bump cleared them), or ends the cleaning round (its next
     offset is the first uncleanable offset): then an empty batch of its header is kept
     (Kafka's writeEmptyHeader: no records, first timestamp -1), so the producer's state and
     the round's last offset survive, as Kafka's isBatchLastRecordOfProducer and cleanInto do;
   - transactions (Kafka's CleanedTransactionMetadata, ONE for the whole clean, shared by its
     groups, each group's aborted transactions added to it and its cleaned ``.txnindex``
     taking the entries of its own markers): the data batches of an aborted transaction are
     dropped; its ABORT marker is kept (and its ``.txnindex`` entry copied) while any of its
     data was still met in this clean, and a COMMIT marker while any data of its transaction
     was, in this group or an earlier one; a marker that may go is kept until its delete
     horizon;
   - KIP-534's delete horizon: a batch kept with a tombstone, or a marker that may go, and
     no horizon yet, is rebuilt with its base timestamp set to now + delete.retention.ms and
     the attribute bit 6 set; a later clean past that time drops them.

3. The swap, Kafka's replaceSegments, so that a kill -9 at any point leaves a log that loads
   with nothing lost or doubled (engine/recovery.py completes or undoes it):

   - ``<base>.log.cleaned`` and its ``.index``, ``.timeindex``, ``.txnindex`` ``.cleaned``
     files are written and fsynced;
   - they are renamed ``.swap``, the indexes first and the ``.log`` last: a ``.log.swap``
     means a complete cleaned segment, which recovery finishes swapping in;
   - the replaced segments are renamed ``.deleted`` (their fds stay open for reads in
     flight; they are unlinked after file.delete.delay.ms, as retention's are);
   - the ``.swap`` files are renamed to their final names, the ``.log`` last again;
   - the Log's segment list takes the new segment in place of the group in one step;
   - the log's directory is fsynced, once, in the cleaner's thread.

   The renames are made on the log's thread with no fsync between them, as Kafka's
   replaceSegments makes them: the file system keeps one directory's renames in order (its
   journal commits them in sequence), so a crash leaves a prefix of them, each a state that
   recovery completes or undoes; the one fsync of the directory after them (Kafka's flushDir)
   runs off the broker's loop, where a directory fsync under a writing disk takes up to tens
   of milliseconds (three of them per swap, on the loop, put the broker's produce p99 at 12x
   its idle figure).

4. The checkpoint: ``end_offset`` becomes the partition's entry in the log dir's
   ``cleaner-offset-checkpoint`` (engine.manager.CLEANER_CHECKPOINT, Kafka's format).

The cleaner's thread never touches the Log's own state: on the log's thread
(``Cleaner.on_log_thread``) it takes a snapshot first (the segment list, a dup of each
cleanable segment's fd, their sizes and aborted-transaction entries, the producers' last data
offsets and epochs), reads only through those fds (closed at the end, always), and the swap,
again on the log's thread, aborts with CleanAborted (Kafka's abortAndPauseCleaning) when the
log was truncated (``Log._truncations`` moved), closed or deleted, or the group's segments
changed since the snapshot. Reads in flight hold the old segments' fds, so a reader sees the
old segment or the new one, never a mix. The whole clean is IO and C over batch bytes, and the
C releases the GIL for its per-record work (the offset map's add_batches and retain_mask,
ext.batch.retain_records' rebuild of a batch), so the broker's loop runs beside the cleaner's
thread; Python runs per batch, never per record (a control batch's one record aside).

``log.cleaner.io.max.bytes.per.second`` throttles the bytes read and written (Kafka's
Throttler); ``hook(step)`` is called after each step of the swap (for tests that kill the
process there).
"""
from __future__ import annotations

import contextlib
import logging
import math
import os
import time
from collections import deque
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple, TypeVar

from engine.checkpoint import fsync_dir, read_offset_checkpoint, write_offset_checkpoint
from engine.cleaner_plan import (
    CleanerLog,
    CompactionSettings,
    LogToClean,
    SegmentInfo,
    group_segments_by_size,
    survey,
)
from engine.control import CONTROL_ABORT, CONTROL_COMMIT, parse_control_type
from engine.errors import InvalidRecordError
from engine.reader import (
    CLEANED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    file_name,
    iter_file_chunks,
)
from engine.segment import LogSegment
from engine.txn_index import TXN_INDEX_SUFFIX, AbortedTxn, TransactionIndex, read_aborted_txns
from ext.batch import (
    BATCH_OVERHEAD,
    CorruptRecordError,
    build_batch_at,
    decode_records,
    peek_header,
    read_header,
    retain_records,
)
from ext.index import OffsetIndex, TimeIndex
from ext.offset_map import OffsetMap, cleaner_map_memory

if TYPE_CHECKING:
    from engine.log import Log

log = logging.getLogger("strom.cleaner")
_T = TypeVar("_T")

CLEANER_CHECKPOINT = "cleaner-offset-checkpoint"  # engine.manager.CLEANER_CHECKPOINT
# The files of a segment the swap moves, the .log last (recovery keys on ``<base>.log.swap``).
INDEX_SUFFIXES = (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)
SEGMENT_SUFFIXES = INDEX_SUFFIXES + (LOG_SUFFIX,)

# Batch attributes (DefaultRecordBatch).
_TRANSACTIONAL = 0x10
_CONTROL = 0x20
_DELETE_HORIZON = 0x40  # KIP-534: the base timestamp is the delete horizon
_READ_CHUNK = 1 << 20

# The steps a clean passes, in order (``hook``): the snapshot is taken, then the swap's steps.
STEP_SNAPSHOT = "snapshot"    # the log's segments, fds and producers are snapshotted
STEP_CLEANED = "cleaned"      # the .cleaned files are written and fsynced
STEP_SWAP = "swap"            # they are renamed .swap
STEP_DELETED = "deleted"      # the replaced segments are renamed .deleted
STEP_SWAPPED = "swapped"      # the .swap files have their final names; the Log holds the new segment
STEP_CHECKPOINT = "checkpoint"  # cleaner-offset-checkpoint holds the new first dirty offset
STEPS = (STEP_CLEANED, STEP_SWAP, STEP_DELETED, STEP_SWAPPED, STEP_CHECKPOINT)


# ---- describing a log to cleaner_plan ------------------------------------------------------

def last_stable_offset(lg: Log) -> int:
    """The log's last stable offset (the high watermark while it has none of its own)."""
    lso = getattr(lg, "last_stable_offset", None)
    if callable(lso):
        lso = lso()
    return lg.high_watermark if lso is None else int(lso)


def _first_batch_timestamp(segment: LogSegment) -> int | None:
    if segment.size == 0:
        return None
    if segment.rolling_based_timestamp is not None:
        return segment.rolling_based_timestamp
    try:
        return peek_header(os.pread(segment.fd, BATCH_OVERHEAD, 0)).max_timestamp
    except CorruptRecordError:
        return None


def compaction_settings(lg: Log) -> CompactionSettings:
    config = lg.config
    return CompactionSettings(config.min_cleanable_dirty_ratio, config.min_compaction_lag_ms,
                              config.max_compaction_lag_ms)


def describe(lg: Log, cleaner_checkpoint: int | None = None) -> CleanerLog:
    """The log as cleaner_plan sees it."""
    segments = []
    for i, s in enumerate(lg.segments):
        nxt = lg.segments[i + 1].base_offset if i + 1 < len(lg.segments) else lg.log_end_offset
        segments.append(SegmentInfo(s.base_offset, s.size, s.offset_index.size_in_bytes,
                                    s.time_index.size_in_bytes, nxt, s.max_timestamp_so_far,
                                    _first_batch_timestamp(s)))
    lso = last_stable_offset(lg)
    return CleanerLog(lg.topic, lg.partition, tuple(segments), lg.log_start_offset, lg.high_watermark,
                      lso if lso < lg.high_watermark else None, cleaner_checkpoint,
                      compaction_settings(lg), lg.config.compacts)


# ---- the cleaner's checkpoint --------------------------------------------------------------

def checkpoint_path(log_dir: str) -> str:
    return os.path.join(log_dir, CLEANER_CHECKPOINT)


def read_cleaner_checkpoint(log_dir: str) -> dict[tuple[str, int], int]:
    """The log dir's cleaner-offset-checkpoint ({} when absent or unreadable, as Kafka starts
    over from the log start offsets then)."""
    try:
        return read_offset_checkpoint(checkpoint_path(log_dir))
    except FileNotFoundError:
        return {}
    except ValueError as e:
        log.warning("%s: unreadable, cleaning starts over: %s", checkpoint_path(log_dir), e)
        return {}


def update_cleaner_checkpoint(log_dir: str, updates: dict[tuple[str, int], int],
                              remove: Iterable[tuple[str, int]] = ()) -> None:
    offsets = read_cleaner_checkpoint(log_dir)
    offsets.update(updates)
    for tp in remove:
        offsets.pop(tp, None)
    write_offset_checkpoint(checkpoint_path(log_dir), offsets)


# ---- the throttle --------------------------------------------------------------------------

class Throttler:
    """Kafka's Throttler: at most ``rate`` bytes a second on average, by sleeping once the
    bytes done since the last check run ahead of the clock (checked every ``check_ms``)."""

    def __init__(self, rate: float, sleep: Callable[[float], None] = time.sleep,
                 clock: Callable[[], float] = time.monotonic, check_ms: int = 300):
        self.rate = rate
        self.sleep = sleep
        self.clock = clock
        self.check_s = check_ms / 1000
        self.period_start = clock()
        self.observed = 0.0
        self.slept_s = 0.0

    def maybe_throttle(self, observed: int) -> None:
        if not math.isfinite(self.rate) or self.rate <= 0:
            return
        self.observed += observed
        now = self.clock()
        elapsed = now - self.period_start
        if elapsed < self.check_s and self.observed < self.rate * self.check_s:
            return
        wanted = self.observed / self.rate
        if wanted > elapsed:
            self.sleep(wanted - elapsed)
            self.slept_s += wanted - elapsed
        self.period_start = self.clock()
        self.observed = 0.0


# ---- writing batches (ext.batch.build_batch_at) ---------------------------------------------

def empty_batch(header) -> bytes:
    """Kafka's DefaultRecordBatch.writeEmptyHeader for a batch the cleaner emptied and keeps:
    no records, no codec, no delete horizon, first timestamp NO_TIMESTAMP (-1), max timestamp
    the batch's."""
    attributes = header.attributes & (_TRANSACTIONAL | _CONTROL | 0x08)
    return build_batch_at((), header.base_offset, header.last_offset_delta, -1, header.max_timestamp,
                          attributes, header.partition_leader_epoch, header.producer_id,
                          header.producer_epoch, header.base_sequence)


def rebuild_batch(header, records, delete_horizon_ms: int | None) -> bytes:
    """MemoryRecords.buildRetainedRecordsInto: the batch of ``records`` (ext.batch.Record,
    each with its own offset and timestamp) with ``header``'s base and last offset, producer
    fields, leader epoch, codec and bits; the delete horizon as its base timestamp when given
    (or the one it has)."""
    log_append_time = header.attributes & 0x08
    attributes = header.attributes & ~_DELETE_HORIZON
    if delete_horizon_ms is None and header.attributes & _DELETE_HORIZON:
        delete_horizon_ms = header.base_timestamp
    if delete_horizon_ms is not None:
        attributes |= _DELETE_HORIZON
        base_timestamp = delete_horizon_ms
    else:
        base_timestamp = records[0].timestamp
    if log_append_time:
        max_timestamp = header.max_timestamp
    else:
        max_timestamp = max(r.timestamp for r in records)
    base = header.base_offset
    return build_batch_at([(r.offset - base, r.key, r.value, r.headers, r.timestamp) for r in records],
                          base, header.last_offset_delta, base_timestamp, max_timestamp, attributes,
                          header.partition_leader_epoch, header.producer_id, header.producer_epoch,
                          header.base_sequence)


# ---- transactions (Kafka's CleanedTransactionMetadata) -------------------------------------

class _AbortedMeta:
    __slots__ = ("txn", "last_obsolete_offset")

    def __init__(self, txn: AbortedTxn):
        self.txn = txn
        self.last_obsolete_offset: int | None = None


class CleanedTransactionMetadata:
    """What the cleaner knows of transactions while it walks a group's batches in order:
    the aborted ones (from the ``.txnindex``, by first offset) it is inside, the committed
    ones it met data of, and the aborted-transaction entries the cleaned segment keeps."""

    def __init__(self, aborted: Iterable[AbortedTxn] = ()):
        self.aborted: deque[AbortedTxn] = deque()
        self._added: set[tuple[int, int]] = set()
        self.ongoing_aborted: dict[int, _AbortedMeta] = {}
        self.ongoing_committed: set[int] = set()
        # The aborted-transaction entries of the group being cleaned (Kafka points its
        # cleanedIndex at each group's cleaned .txnindex in turn).
        self.cleaned_index: list[AbortedTxn] = []
        self.add_aborted(aborted)

    def add_aborted(self, aborted: Iterable[AbortedTxn]) -> None:
        """Kafka's addAbortedTransactions: the aborted transactions of the next group (one
        already added, as a transaction spanning two groups is, is not added again)."""
        new = [t for t in aborted if (t.producer_id, t.first_offset) not in self._added]
        if not new:
            return
        self._added.update((t.producer_id, t.first_offset) for t in new)
        self.aborted = deque(sorted([*self.aborted, *new], key=lambda t: t.first_offset))

    def _consume_aborted_up_to(self, offset: int) -> None:
        while self.aborted and self.aborted[0].first_offset <= offset:
            txn = self.aborted.popleft()
            self.ongoing_aborted.setdefault(txn.producer_id, _AbortedMeta(txn))

    def on_control_batch(self, header, records) -> bool:
        """May the marker batch go (once its delete horizon has passed)?"""
        self._consume_aborted_up_to(header.last_offset)
        if not records:
            return True  # an empty control batch was cleaned already
        try:
            control_type = parse_control_type(records[0].key)
        except InvalidRecordError:
            return False
        pid = header.producer_id
        if control_type == CONTROL_ABORT:
            meta = self.ongoing_aborted.pop(pid, None)
            if meta is not None and meta.last_obsolete_offset is not None:
                # Kept until every batch of the transaction is gone.
                self.cleaned_index.append(meta.txn)
                return False
            return True
        if control_type == CONTROL_COMMIT:
            # May go when no batch of its transaction was met.
            if pid in self.ongoing_committed:
                self.ongoing_committed.discard(pid)
                return False
            return True
        return False

    def on_batch(self, header) -> bool:
        """May the data batch go (it belongs to an aborted transaction)?"""
        self._consume_aborted_up_to(header.last_offset)
        if not header.attributes & _TRANSACTIONAL:
            return False
        meta = self.ongoing_aborted.get(header.producer_id)
        if meta is not None:
            meta.last_obsolete_offset = header.last_offset
            return True
        self.ongoing_committed.add(header.producer_id)
        return False


def collect_aborted(lg: Log, start: int, upper: int) -> list[AbortedTxn]:
    """Kafka's UnifiedLog.collectAbortedTransactions: the aborted transactions of the
    segments' ``.txnindex`` files, from the segment holding ``start`` on, that overlap
    [start, upper)."""
    found: list[AbortedTxn] = []
    for i, segment in enumerate(lg.segments):
        nxt = lg.segments[i + 1].base_offset if i + 1 < len(lg.segments) else None
        if nxt is not None and nxt <= start:
            continue
        index = getattr(segment, "txn_index", None)
        if index is not None and not getattr(index, "closed", False):
            entries = index.all_aborted()
        else:
            path = os.path.join(lg.dir, file_name(segment.base_offset, TXN_INDEX_SUFFIX))
            entries = read_aborted_txns(path)
        found.extend(t for t in entries if t.last_offset >= start and t.first_offset < upper)
    return found


# ---- the cleaned segment -------------------------------------------------------------------

class _CleanedSegment:
    """``<base>.log.cleaned`` and its indexes, written in one pass, indexed as LogSegment
    indexes its appends."""

    def __init__(self, directory: str, base_offset: int, index_interval_bytes: int, max_index_size: int):
        self.dir = directory
        self.base_offset = base_offset
        self.interval = index_interval_bytes
        for suffix in SEGMENT_SUFFIXES:
            for extra in (CLEANED_SUFFIX, SWAP_SUFFIX):
                _unlink(self.path(suffix) + extra)
        self.fd = os.open(self.path(LOG_SUFFIX) + CLEANED_SUFFIX,
                          os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
        cleaned = CLEANED_SUFFIX
        opened: list = []
        try:
            self.offset_index = OffsetIndex(self.path(INDEX_SUFFIX) + cleaned, base_offset, max_index_size)
            opened.append(self.offset_index)
            self.time_index = TimeIndex(self.path(TIME_INDEX_SUFFIX) + cleaned, base_offset, max_index_size)
            opened.append(self.time_index)
            self.txn_index = TransactionIndex(self.path(TXN_INDEX_SUFFIX) + cleaned, base_offset)
        except BaseException:
            for index in opened:
                index.close()
            os.close(self.fd)
            for suffix in SEGMENT_SUFFIXES:
                _unlink(self.path(suffix) + cleaned)
            raise
        self.size = 0
        self.max_timestamp = -1
        self.offset_of_max_timestamp = -1
        self.bytes_since_last_index_entry = 0
        self.closed = False

    def path(self, suffix: str) -> str:
        return os.path.join(self.dir, file_name(self.base_offset, suffix))

    def append(self, batch: bytes | memoryview, last_offset: int, max_timestamp: int) -> None:
        position = self.size
        view = memoryview(batch)
        while view:
            written = os.pwrite(self.fd, view, self.size)
            self.size += written
            view = view[written:]
        if max_timestamp > self.max_timestamp:
            self.max_timestamp = max_timestamp
            self.offset_of_max_timestamp = last_offset
        if self.bytes_since_last_index_entry > self.interval:
            self.offset_index.append(last_offset, position)
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
            self.bytes_since_last_index_entry = 0
        self.bytes_since_last_index_entry += len(batch)

    def finish(self, mtime: float | None) -> None:
        """The roll's last time index entry, indexes trimmed, everything fsynced."""
        if self.max_timestamp >= 0:
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp, True)
        for index in (self.offset_index, self.time_index):
            index.trim_to_valid_size()
            index.flush()
        if not self.txn_index.exists:
            # Always a .txnindex beside a cleaned .log, so recovery never takes an old one for it.
            with open(self.path(TXN_INDEX_SUFFIX) + CLEANED_SUFFIX, "wb"):
                pass
        os.fsync(self.fd)
        fd = os.open(self.path(TXN_INDEX_SUFFIX) + CLEANED_SUFFIX, os.O_RDONLY | os.O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        self.close()
        if mtime is not None:
            os.utime(self.path(LOG_SUFFIX) + CLEANED_SUFFIX, (mtime, mtime))
        fsync_dir(self.dir)

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self.offset_index.close()
        self.time_index.close()
        self.txn_index.close()
        os.close(self.fd)

    def discard(self) -> None:
        self.close()
        for suffix in SEGMENT_SUFFIXES:
            for extra in (CLEANED_SUFFIX, SWAP_SUFFIX):
                _unlink(self.path(suffix) + extra)


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


# ---- the cleaner ---------------------------------------------------------------------------

@dataclass
class CleanerStats:
    """Kafka's CleanerStats, the parts a report or a benchmark reads."""
    map_bytes_read: int = 0
    map_messages_read: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    batches_read: int = 0
    batches_copied: int = 0
    batches_rebuilt: int = 0
    batches_dropped: int = 0
    segments_cleaned: int = 0
    groups: int = 0


class CleanResult(NamedTuple):
    first_dirty_offset: int
    end_offset: int  # the next first dirty offset: what the checkpoint records
    stats: CleanerStats


class CleanAborted(Exception):
    """The log changed under the clean (a truncation, a deletion, retention): the cleaned
    output is discarded and the log is left as it was."""


class _LogSnapshot:
    """What a clean reads of its log, taken on the log's thread (``Cleaner.snapshot``): the
    segments as they stood, a dup of each cleanable segment's fd (so a truncation or a
    deletion closing the segment's own fd never reaches the cleaner's reads), their sizes,
    every segment's aborted-transaction entries, the position of the first dirty offset, and each
    producer's (last data offset or None, epoch). The cleaner works on these only; the swap
    checks on the log's thread that the log did not change under it (``changed``)."""

    def __init__(self, lg: Log, first_dirty: int, upper: int):
        self.lg = lg
        self.truncations = getattr(lg, "_truncations", 0)
        segments = list(lg.segments)
        self.segments = segments
        self.log_end_offset = lg.log_end_offset
        self.active_base = segments[-1].base_offset
        self.infos = describe(lg).segments
        self.next_offsets = [segments[i + 1].base_offset if i + 1 < len(segments) else self.log_end_offset
                             for i in range(len(segments))]
        self.fds: dict[int, int] = {}
        self.sizes: dict[int, int] = {}
        self.aborted: dict[int, list[AbortedTxn]] = {}
        self.start_position = 0
        self.producers: dict[int, tuple[int | None, int]] = {}
        try:
            for segment, nxt in zip(segments, self.next_offsets):
                # Every segment's aborted transactions, the uncleanable ones' too (Kafka's
                # collectAbortedTransactions walks on to the active segment): a transaction
                # whose data is below ``upper`` and whose ABORT marker is not.
                self.aborted[segment.base_offset] = _segment_aborted(lg, segment)
                if segment.base_offset >= upper or segment.base_offset >= self.active_base:
                    continue
                self.fds[segment.base_offset] = os.dup(segment.fd)
                self.sizes[segment.base_offset] = segment.size
                if segment.base_offset < first_dirty < nxt:
                    found = segment.translate_offset(first_dirty)
                    self.start_position = segment.size if found is None else found.position
        except BaseException:
            self.close()
            raise
        for pid, entry in lg.producer_state.producers.items():
            batches = getattr(entry, "batches", None)
            self.producers[pid] = (batches[-1].last_offset if batches else None, entry.epoch)
        self.mtime = {b: os.fstat(fd).st_mtime for b, fd in self.fds.items()}

    def next_offset(self, segment: LogSegment) -> int:
        return self.next_offsets[self.segments.index(segment)]

    def collect_aborted(self, start: int, upper: int) -> list[AbortedTxn]:
        """collect_aborted over the snapshot's segments."""
        found: list[AbortedTxn] = []
        for segment, nxt in zip(self.segments, self.next_offsets):
            if nxt <= start or segment.base_offset not in self.aborted:
                continue
            found.extend(t for t in self.aborted[segment.base_offset]
                         if t.last_offset >= start and t.first_offset < upper)
        return found

    def changed(self, group: list[LogSegment] | None = None) -> str | None:
        """Why the log no longer is the one snapshotted (None when it is): truncated since,
        closed or deleted, or ``group`` no longer in its segment list as it was. On the log's
        thread."""
        lg = self.lg
        if getattr(lg, "_truncations", 0) != self.truncations:
            return "it was truncated"
        cleaned = [s for s in self.segments if s.base_offset in self.fds]
        if any(getattr(s, "closed", False) for s in cleaned):
            return "it was closed or deleted"
        if group is not None:
            segments = lg.segments
            start = next((i for i, s in enumerate(segments) if s is group[0]), -1)
            if start < 0 or segments[start:start + len(group)] != group or group[-1] is lg.active_segment:
                return f"the segments from {group[0].base_offset} changed"
        return None

    def close(self) -> None:
        fds, self.fds = self.fds, {}
        for fd in fds.values():
            try:
                os.close(fd)
            except OSError:
                pass


def _segment_aborted(lg: Log, segment: LogSegment) -> list[AbortedTxn]:
    index = getattr(segment, "txn_index", None)
    if index is not None and not getattr(index, "closed", False):
        return list(index.all_aborted())
    return read_aborted_txns(os.path.join(lg.dir, file_name(segment.base_offset, TXN_INDEX_SUFFIX)))


class Cleaner:
    """One cleaner thread's state: its offset map and throttle (Kafka's Cleaner)."""

    def __init__(self, offset_map: OffsetMap | None = None, *, dedupe_buffer_size: int = 128 * 1024 * 1024,
                 threads: int = 1, load_factor: float = 0.9, io_buffer_size: int = _READ_CHUNK,
                 io_max_bytes_per_second: float = float("inf"),
                 sleep: Callable[[float], None] = time.sleep,
                 hook: Callable[[str], None] | None = None,
                 on_log_thread: Callable[[Callable[[], None]], None] | None = None):
        self.offset_map = offset_map if offset_map is not None else OffsetMap(
            cleaner_map_memory(dedupe_buffer_size, threads, load_factor), load_factor=load_factor)
        self.chunk_size = max(io_buffer_size, BATCH_OVERHEAD)
        self.throttler = Throttler(io_max_bytes_per_second, sleep)
        self.hook = hook
        # Runs what touches the Log (the snapshot, the swap) where the log's appends, rolls,
        # truncations and reads run (the broker's event loop), and returns once it has: the
        # cleaner reads and writes on its own thread, the Log changes only there. None: here.
        self.on_log_thread = on_log_thread

    def _step(self, step: str) -> None:
        if self.hook is not None:
            self.hook(step)

    def call_on_log_thread(self, fn: Callable[[], _T]) -> _T:
        """``fn()`` run through ``on_log_thread`` (which must raise what ``fn`` raises), its
        value returned."""
        if self.on_log_thread is None:
            return fn()
        out: list[_T] = []
        self.on_log_thread(lambda: out.append(fn()))
        if not out:
            raise CleanAborted("the log's thread did not run the cleaner's step")
        return out[0]

    # ---- the whole clean ------------------------------------------------------------------

    def clean(self, lg: Log, to_clean: LogToClean, now_ms: int,
              checkpoint_lock: AbstractContextManager | None = None) -> CleanResult:
        """Kafka's Cleaner.doClean of ``lg`` as ``to_clean`` (cleaner_plan's choice) says, then
        the checkpoint (under ``checkpoint_lock``, the log dir's). Returns where the next clean
        starts. Raises CleanAborted when the log was truncated, deleted or its segments
        replaced meanwhile (nothing of the clean is left then)."""
        stats = CleanerStats()
        first_dirty = to_clean.first_dirty_offset
        upper = to_clean.first_uncleanable_offset
        if upper <= first_dirty:
            return CleanResult(first_dirty, first_dirty, stats)
        snap = self.call_on_log_thread(lambda: _LogSnapshot(lg, first_dirty, upper))
        try:
            self._step(STEP_SNAPSHOT)
            try:
                end_offset = self._do_clean(snap, first_dirty, upper, now_ms, stats)
            except (OSError, CorruptRecordError, InvalidRecordError, ValueError) as e:
                # Read under a truncation or a deletion: not the log's fault.
                why = self.call_on_log_thread(snap.changed)
                if why is not None:
                    raise CleanAborted(f"{lg.dir}: {why} during the clean") from e
                raise
        finally:
            snap.close()
        with checkpoint_lock if checkpoint_lock is not None else contextlib.nullcontext():
            if not any(getattr(s, "closed", False) for s in lg.segments):  # not deleted meanwhile
                update_cleaner_checkpoint(lg.parent_dir, {(lg.topic, lg.partition): end_offset})
        self._step(STEP_CHECKPOINT)
        return CleanResult(first_dirty, end_offset, stats)

    def _do_clean(self, snap: _LogSnapshot, first_dirty: int, upper: int, now_ms: int,
                  stats: CleanerStats) -> int:
        lg = snap.lg
        end_offset = self.build_offset_map(snap, first_dirty, upper, stats)
        delete_retention_ms = lg.config.delete_retention_ms
        to_group = [s for s in snap.infos if s.base_offset < end_offset and s.base_offset in snap.fds]
        groups = group_segments_by_size(to_group, lg.config.segment_bytes, lg.config.segment_index_bytes,
                                        upper)
        # One transaction metadata for the whole clean (Kafka's doClean): a transaction whose
        # data is in one group and whose marker is in the next is known there.
        txn = CleanedTransactionMetadata(())
        for group in groups:
            self.clean_segments(snap, [s.base_offset for s in group], now_ms, delete_retention_ms, stats,
                                txn, upper)
        return end_offset

    def build_offset_map(self, snap: _LogSnapshot, start: int, upper: int, stats: CleanerStats) -> int:
        """Kafka's buildOffsetMap over the segments of [start, upper): the offset after the
        last one the map took (``upper`` unless it filled up)."""
        offset_map = self.offset_map
        offset_map.clear()
        aborted = [(t.producer_id, t.first_offset, t.last_offset) for t in snap.collect_aborted(start, upper)]
        for segment, nxt in zip(snap.segments, snap.next_offsets):
            if nxt <= start or segment.base_offset >= upper or segment.base_offset not in snap.fds:
                continue
            position = snap.start_position if segment.base_offset < start else 0
            full = False
            fd, size = snap.fds[segment.base_offset], snap.sizes[segment.base_offset]
            for _, chunk, summary in iter_file_chunks(fd, position, size, self.chunk_size):
                fill = offset_map.add_batches(chunk, start, 0, aborted)
                stats.map_bytes_read += summary.valid_bytes
                stats.map_messages_read += fill.records
                self.throttler.maybe_throttle(summary.valid_bytes)
                if fill.full:
                    full = True
                    break
            if full:
                break
            offset_map.update_latest_offset(min(nxt, upper) - 1)
        return max(offset_map.latest_offset + 1, start)

    # ---- one group ------------------------------------------------------------------------

    def clean_segments(self, snap: _LogSnapshot, bases: list[int], now_ms: int, delete_retention_ms: int,
                       stats: CleanerStats, txn: CleanedTransactionMetadata, upper: int) -> None:
        """Kafka's cleanSegments: the group of segments starting at ``bases`` cleaned into one,
        then swapped in. ``txn`` is the clean's, shared by its groups; ``upper`` the round's
        first uncleanable offset."""
        lg = snap.lg
        by_base = {s.base_offset: s for s in snap.segments}
        group = [by_base[b] for b in bases]
        last = group[-1]
        group_end = snap.next_offset(last)
        txn.add_aborted(snap.collect_aborted(group[0].base_offset, group_end))
        txn.cleaned_index = []  # this group's cleaned .txnindex
        config = lg.config
        out = _CleanedSegment(lg.dir, group[0].base_offset, config.index_interval_bytes,
                              config.segment_index_bytes)
        try:
            for segment in group:
                self._clean_into(snap, segment, out, txn, now_ms, delete_retention_ms, stats, upper)
            for aborted in txn.cleaned_index:
                if out.txn_index.last_offset is None or aborted.last_offset > out.txn_index.last_offset:
                    out.txn_index.append(aborted)
            out.finish(snap.mtime[last.base_offset])
        except BaseException:
            out.discard()
            raise
        self._step(STEP_CLEANED)

        def swap() -> None:
            why = snap.changed(group)
            if why is not None:
                out.discard()
                raise CleanAborted(f"{lg.dir}: {why} during the clean")
            self.swap(lg, group, out)

        self.call_on_log_thread(swap)
        fsync_dir(lg.dir)  # the swap's renames made durable, off the log's thread
        stats.groups += 1
        stats.segments_cleaned += len(group)

    def _clean_into(self, snap: _LogSnapshot, segment: LogSegment, out: _CleanedSegment,
                    txn: CleanedTransactionMetadata, now_ms: int, delete_retention_ms: int,
                    stats: CleanerStats, upper: int) -> None:
        offset_map = self.offset_map
        fd, size = snap.fds[segment.base_offset], snap.sizes[segment.base_offset]
        for _, chunk, summary in iter_file_chunks(fd, 0, size, self.chunk_size):
            mask = offset_map.retain_mask(chunk, 0, now_ms)
            stats.bytes_read += summary.valid_bytes
            self.throttler.maybe_throttle(summary.valid_bytes)
            view = memoryview(chunk)
            r = 0
            for position, size_, count in zip(summary.positions, summary.sizes, summary.records_counts):
                keep = mask[r:r + count]
                r += count
                stats.batches_read += 1
                batch = self._filter_batch(view, position, size_, keep, txn, snap.producers, now_ms,
                                           delete_retention_ms, stats, upper)
                if batch is not None:
                    header = read_header(batch)
                    out.append(batch, header.last_offset, header.max_timestamp)
                    stats.bytes_written += len(batch)
                    self.throttler.maybe_throttle(len(batch))

    def _filter_batch(self, view: memoryview, position: int, size: int, keep: bytearray | bytes,
                      txn: CleanedTransactionMetadata, producers: dict[int, tuple[int | None, int]],
                      now_ms: int, delete_retention_ms: int, stats: CleanerStats,
                      upper: int | None = None) -> bytes | memoryview | None:
        """MemoryRecords.filterTo with the cleaner's LogCleanerFilter, for one batch."""
        header = read_header(view, position)
        has_horizon = bool(header.attributes & _DELETE_HORIZON)
        is_control = bool(header.attributes & _CONTROL)
        records = None
        if is_control:
            records = decode_records(view, position, False)
            can_discard = txn.on_control_batch(header, records)
            discard = can_discard and has_horizon and header.base_timestamp <= now_ms
            marker_for_empty_txn = can_discard
        else:
            discard = txn.on_batch(header)
            marker_for_empty_txn = False
        if _is_last_of_producer(header, is_control, producers):
            retention = "retain_empty"
        elif upper is not None and header.last_offset + 1 == upper:
            retention = "retain_empty"  # so that the round's last offset is not lost
        elif discard:
            retention = "delete"
        else:
            retention = "delete_empty"
        if retention == "delete":
            stats.batches_dropped += 1
            return None
        if discard:
            any_kept = False  # an aborted transaction's data, a marker past its horizon
        else:
            any_kept = is_control or keep.count(0) != len(keep)
        if any_kept:
            # MemoryRecords.filterTo's retained records, in C over the batch's bytes
            # (ext.batch.retain_records): None when the batch is kept whole with no delete
            # horizon to add (a kept tombstone needs one), else the batch rebuilt.
            horizon = tombstone_horizon = None
            if not has_horizon:
                if marker_for_empty_txn:
                    horizon = now_ms + delete_retention_ms
                elif not is_control:
                    tombstone_horizon = now_ms + delete_retention_ms
            if is_control:
                keep = b"\x01" * header.records_count
            rebuilt = retain_records(view, position, keep, horizon, tombstone_horizon)
            if rebuilt is None:
                stats.batches_copied += 1
                return view[position:position + size]
            stats.batches_rebuilt += 1
            return rebuilt
        if retention == "retain_empty":
            stats.batches_rebuilt += 1
            return empty_batch(header)
        stats.batches_dropped += 1
        return None

    # ---- the swap -------------------------------------------------------------------------

    def swap(self, lg: Log, group: list[LogSegment], out: _CleanedSegment) -> None:
        """Kafka's replaceSegments: ``out`` in place of ``group`` (see the module docstring).
        On the log's thread."""
        segments = lg.segments
        try:
            start = next(i for i, s in enumerate(segments) if s is group[0])
        except StopIteration:
            start = -1
        if start < 0 or segments[start:start + len(group)] != group or group[-1] is lg.active_segment:
            out.discard()
            raise CleanAborted(f"{lg.dir}: the segments from {group[0].base_offset} changed during the clean")
        for suffix in SEGMENT_SUFFIXES:  # the .log last
            os.replace(out.path(suffix) + CLEANED_SUFFIX, out.path(suffix) + SWAP_SUFFIX)
        self._step(STEP_SWAP)
        due = int(time.time() * 1000) + lg.config.file_delete_delay_ms
        for old in group:
            old.mark_deleted()  # its .txnindex too
        self._step(STEP_DELETED)
        for suffix in SEGMENT_SUFFIXES:
            os.replace(out.path(suffix) + SWAP_SUFFIX, out.path(suffix))
        if os.path.getsize(out.path(TXN_INDEX_SUFFIX)) == 0:
            os.unlink(out.path(TXN_INDEX_SUFFIX))  # Kafka keeps no .txnindex without entries
        config = lg.config
        cleaned = LogSegment(lg.dir, out.base_offset, config.index_interval_bytes, config.segment_index_bytes)
        cleaned.on_become_inactive()
        install_segment(lg, group, cleaned, due)
        self._step(STEP_SWAPPED)


def _is_last_of_producer(header, is_control: bool, producers: dict[int, tuple[int | None, int]]) -> bool:
    """Kafka's isBatchLastRecordOfProducer: the batch holding an active producer's last data
    offset (its last sequence), or, for a producer with no data batch left (a KIP-890 epoch
    bump cleared them), the control batch of its current epoch (needed to ensure fencing)."""
    if header.producer_id < 0:
        return False
    last = producers.get(header.producer_id)
    if last is None:
        return False
    last_data_offset, epoch = last
    if last_data_offset is not None:
        return header.last_offset == last_data_offset
    return is_control and header.producer_epoch == epoch


def install_segment(lg: Log, group: list[LogSegment], cleaned: LogSegment, delete_due_ms: int) -> None:
    """The Log's segment list takes ``cleaned`` in place of ``group`` in one step, and the
    old segments wait for file.delete.delay.ms before their files go (as retention's)."""
    segments = list(lg.segments)
    start = next(i for i, s in enumerate(segments) if s is group[0])
    segments[start:start + len(group)] = [cleaned]
    lg.segments = segments
    lg._bases = [s.base_offset for s in segments]
    lg._bound_cache = None
    for old in group:
        lg._pending_deletes.append((delete_due_ms, old))


# ---- choosing and cleaning (LogCleanerManager, one pass) -----------------------------------

def clean_filthiest(cleaner: Cleaner, logs: Iterable[Log], now_ms: int,
                    uncleanable: Iterable[tuple[str, int]] = (),
                    on_choice: Callable[[tuple[str, int]], None] | None = None,
                    checkpoint_lock: Callable[[str], AbstractContextManager] | None = None,
                    on_survey: Callable[[float], None] | None = None,
                    ) -> CleanResult | None:
    """One pass of Kafka's CleanerThread.tryCleanFilthiestLog over ``logs`` (of one or more
    log dirs): the checkpoints read, invalid ones reset, the filthiest log cleaned
    (``on_choice`` told of it first). The logs are described on the log's thread
    (``Cleaner.on_log_thread``); ``checkpoint_lock(log_dir)`` guards each read-modify-write of
    a dir's cleaner-offset-checkpoint; ``on_survey`` is told the survey's greatest dirty
    ratio (Kafka's dirtiestLogCleanableRatio, behind max-dirty-percent) whether or not a log is
    cleaned. None when no log needs cleaning."""
    logs = [lg for lg in logs if lg.config.compacts]
    by_tp = {(lg.topic, lg.partition): lg for lg in logs}

    def lock(log_dir: str) -> AbstractContextManager:
        return checkpoint_lock(log_dir) if checkpoint_lock is not None else contextlib.nullcontext()

    checkpoints: dict[str, dict[tuple[str, int], int]] = {}
    for lg in logs:
        if lg.parent_dir not in checkpoints:
            with lock(lg.parent_dir):
                checkpoints[lg.parent_dir] = read_cleaner_checkpoint(lg.parent_dir)

    def describe_all() -> list[CleanerLog]:
        return [describe(lg, checkpoints[lg.parent_dir].get((lg.topic, lg.partition))) for lg in logs
                if not any(getattr(s, "closed", False) for s in lg.segments)]

    described = cleaner.call_on_log_thread(describe_all)
    found = survey(described, now_ms, (), uncleanable)
    if on_survey is not None:
        on_survey(found.max_dirty_ratio)
    resets: dict[str, dict[tuple[str, int], int]] = {}
    for tp, offset in found.checkpoint_resets.items():
        resets.setdefault(by_tp[tp].parent_dir, {})[tp] = offset
    for log_dir, updates in resets.items():
        with lock(log_dir):
            update_cleaner_checkpoint(log_dir, updates)
    if found.filthiest is None:
        return None
    if on_choice is not None:
        on_choice(found.filthiest.topic_partition)
    lg = by_tp[found.filthiest.topic_partition]
    return cleaner.clean(lg, found.filthiest, now_ms, lock(lg.parent_dir))


__all__ = [
    "CLEANER_CHECKPOINT", "CleanAborted", "CleanResult", "CleanedTransactionMetadata", "Cleaner",
    "CleanerStats", "STEPS", "Throttler", "clean_filthiest", "collect_aborted", "describe",
    "empty_batch", "install_segment", "read_cleaner_checkpoint", "update_cleaner_checkpoint",
]
