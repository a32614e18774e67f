"""What the log cleaner cleans, and in which groups: the pure decisions of Kafka's log cleaner.

No file IO and no clock: a log comes in as a ``CleanerLog`` (plain descriptions of its
segments, its offsets and its topic's compaction settings), time as ``now_ms``. The cleaner
that reads and rewrites segments asks this module three questions, as Kafka's LogCleaner
asks LogCleanerManager and Cleaner:

1. ``cleanable_offsets(log, now_ms)`` (LogCleanerManager.cleanableOffsets): where the dirty
   section starts and where cleaning must stop. The first dirty offset is the checkpointed
   cleaner offset (``cleaner-offset-checkpoint``), or the log start offset when there is
   none, or when the checkpoint lies below the log start or past the log end (then
   ``force_update_checkpoint`` says the checkpoint must be rewritten to it). Cleaning stops
   at the least of

   - the last stable offset (the first unstable offset of an open transaction, else the
     high watermark),
   - the active segment's base offset (the active segment is never cleaned),
   - when ``min.compaction.lag.ms`` > 0, the base of the first dirty non-active segment
     whose largest timestamp is later than ``now - min.compaction.lag.ms``. A segment without
     any timestamp has largest timestamp -1 (NO_TIMESTAMP), as in Kafka, so it is cleanable
     unless the lag reaches back before the epoch;

   and never below the first dirty offset. ``compaction_delay_ms`` is Kafka's
   maxCompactionDelay: how far past ``max.compaction.lag.ms`` the earliest first-batch
   timestamp of the dirty non-active segments is (timestamps of 0 or less and unknown ones
   are ignored, as Kafka ignores them); a positive delay forces a clean whatever the ratio.

2. ``survey(logs, now_ms, in_progress, uncleanable)`` (grabFilthiestCompactedLog, LogToClean):
   for each compacted log not being cleaned or deleted and not marked uncleanable, its clean
   bytes (segments below the first dirty offset), cleanable bytes (segments from the one
   holding the first dirty offset up to the segment holding the first uncleanable offset)
   and their ratio, cleanable / (clean + cleanable). Logs with no bytes at all are skipped.
   A log may be cleaned when its ratio is strictly above its topic's
   ``min.cleanable.dirty.ratio``, or when the max compaction lag forces it and it has
   cleanable bytes; of those the highest ratio wins (the first in the given order on a tie).
   ``filthiest`` answers only the winner. The survey also lists the checkpoints to reset
   and the greatest ratio and delay seen (Kafka's max-dirty-percent and
   max-compaction-delay-secs). ``deletable_logs`` is Kafka's deletableLogs: after a clean,
   the compacted logs (``compact`` alone too: segments may precede the log start offset)
   that retention may now delete from.

3. ``group_segments_by_size(segments, max_size, max_index_size, first_uncleanable_offset)``
   (Cleaner.groupSegmentsBySize): consecutive segments cleaned into one new segment. A group
   takes its first segment whatever its size, then the next ones while the group's log
   bytes stay at most ``segment.bytes``, its offset index bytes and its time index bytes
   each at most ``segment.index.bytes``, and the last offset the candidate may hold (the
   next segment's base - 1, or ``first_uncleanable_offset`` - 1 for the last) stays within
   Integer.MAX_VALUE of the group's base offset, so every relative offset fits an int32
   index entry (an empty candidate skips that check, as in Kafka).

The cleaner's checkpoint file is ``engine.manager.CLEANER_CHECKPOINT`` in each log dir, in
Kafka's offset checkpoint format (``engine.checkpoint.read_offset_checkpoint`` /
``write_offset_checkpoint``): the first dirty offset of each compacted partition after its
last clean.
"""
from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

MAX_LONG = 2**63 - 1
MAX_INT = 2**31 - 1
NO_TIMESTAMP = -1

# Kafka's defaults (CleanerConfig, LogConfig): what an unset setting means.
DEFAULT_MIN_CLEANABLE_DIRTY_RATIO = 0.5     # log.cleaner.min.cleanable.ratio, min.cleanable.dirty.ratio
DEFAULT_MIN_COMPACTION_LAG_MS = 0           # log.cleaner.min.compaction.lag.ms
DEFAULT_MAX_COMPACTION_LAG_MS = MAX_LONG    # log.cleaner.max.compaction.lag.ms
DEFAULT_DELETE_RETENTION_MS = 24 * 60 * 60 * 1000  # log.cleaner.delete.retention.ms (1 day)
DEFAULT_BACKOFF_MS = 15_000                 # log.cleaner.backoff.ms
DEFAULT_DEDUPE_BUFFER_SIZE = 128 * 1024 * 1024  # log.cleaner.dedupe.buffer.size
DEFAULT_THREADS = 1                         # log.cleaner.threads
DEFAULT_IO_BUFFER_SIZE = 512 * 1024         # log.cleaner.io.buffer.size
DEFAULT_IO_BUFFER_LOAD_FACTOR = 0.9         # log.cleaner.io.buffer.load.factor
DEFAULT_IO_MAX_BYTES_PER_SECOND = sys.float_info.max  # log.cleaner.io.max.bytes.per.second

TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class SegmentInfo:
    """What the cleaner knows of one segment without reading its records."""
    base_offset: int
    size: int                  # bytes of the .log file
    offset_index_bytes: int    # bytes of the .index file
    time_index_bytes: int      # bytes of the .timeindex file
    next_offset: int           # one past its last offset
    largest_timestamp: int = NO_TIMESTAMP  # greatest batch max timestamp; -1: none
    first_batch_timestamp: int | None = None  # its first batch's max timestamp; None: unknown


@dataclass(frozen=True)
class CompactionSettings:
    """A topic's settings the cleaner's choice depends on."""
    min_cleanable_dirty_ratio: float = DEFAULT_MIN_CLEANABLE_DIRTY_RATIO
    min_compaction_lag_ms: int = DEFAULT_MIN_COMPACTION_LAG_MS
    max_compaction_lag_ms: int = DEFAULT_MAX_COMPACTION_LAG_MS


@dataclass(frozen=True)
class CleanerLog:
    """A partition's log as the cleaner sees it. ``segments`` run in offset order and the
    last one is the active segment (a log always has one)."""
    topic: str
    partition: int
    segments: tuple[SegmentInfo, ...]
    log_start_offset: int
    high_watermark: int
    first_unstable_offset: int | None = None  # first offset of the earliest open transaction
    cleaner_checkpoint: int | None = None     # this partition's entry in cleaner-offset-checkpoint
    settings: CompactionSettings = field(default_factory=CompactionSettings)
    compact: bool = True                      # cleanup.policy holds "compact"

    def __post_init__(self) -> None:
        if not self.segments:
            raise ValueError(f"{self.topic}-{self.partition}: a log has at least its active segment")
        bases = [s.base_offset for s in self.segments]
        if any(a >= b for a, b in zip(bases, bases[1:])):
            raise ValueError(f"{self.topic}-{self.partition}: segments out of base offset order: {bases}")

    @property
    def topic_partition(self) -> TopicPartition:
        return (self.topic, self.partition)

    @property
    def active_segment_base(self) -> int:
        return self.segments[-1].base_offset

    @property
    def log_end_offset(self) -> int:
        return self.segments[-1].next_offset

    @property
    def last_stable_offset(self) -> int:
        """UnifiedLog.lastStableOffset: the first unstable offset if below the high watermark,
        else the high watermark."""
        if self.first_unstable_offset is not None and self.first_unstable_offset < self.high_watermark:
            return self.first_unstable_offset
        return self.high_watermark


def segments_between(log: CleanerLog, from_offset: int, to_offset: int) -> list[SegmentInfo]:
    """Kafka's LogSegments.values(from, to): the segments from the one holding ``from_offset``
    (its floor; from the first segment if none) up to those based before ``to_offset``."""
    if from_offset == to_offset:
        return []
    if to_offset < from_offset:
        raise ValueError(f"invalid segment range: {from_offset} > {to_offset}")
    floor = None
    for s in log.segments:
        if s.base_offset <= from_offset:
            floor = s.base_offset
        else:
            break
    return [s for s in log.segments
            if (floor is None or s.base_offset >= floor) and s.base_offset < to_offset]


def non_active_segments_from(log: CleanerLog, from_offset: int) -> list[SegmentInfo]:
    """LogSegments.nonActiveLogSegmentsFrom."""
    if from_offset > log.active_segment_base:
        return []
    return segments_between(log, from_offset, log.active_segment_base)


class OffsetsToClean(NamedTuple):
    first_dirty_offset: int            # inclusive
    first_uncleanable_offset: int      # exclusive; never below first_dirty_offset
    force_update_checkpoint: bool      # the checkpoint was invalid: rewrite it to first_dirty_offset
    compaction_delay_ms: int           # > 0: max.compaction.lag.ms has passed by this much

    @property
    def needs_compaction_now(self) -> bool:
        return self.compaction_delay_ms > 0


def _first_dirty_offset(log: CleanerLog) -> tuple[int, bool]:
    checkpoint = log.log_start_offset if log.cleaner_checkpoint is None else log.cleaner_checkpoint
    if checkpoint < log.log_start_offset or checkpoint > log.log_end_offset:
        return log.log_start_offset, True
    return checkpoint, False


def _first_segment_within_min_lag(log: CleanerLog, first_dirty: int, now_ms: int, lag_ms: int) -> int | None:
    for s in non_active_segments_from(log, first_dirty):
        if s.largest_timestamp > now_ms - lag_ms:
            return s.base_offset
    return None


def max_compaction_delay(log: CleanerLog, first_dirty_offset: int, now_ms: int) -> int:
    """LogCleanerManager.maxCompactionDelay."""
    stamps = [MAX_LONG if s.first_batch_timestamp is None or s.first_batch_timestamp < 0
              else s.first_batch_timestamp
              for s in non_active_segments_from(log, first_dirty_offset)]
    earliest = min((t for t in stamps if t > 0), default=MAX_LONG)
    clean_until = now_ms - max(log.settings.max_compaction_lag_ms, 0)
    return clean_until - earliest if earliest < clean_until else 0


def cleanable_offsets(log: CleanerLog, now_ms: int) -> OffsetsToClean:
    """LogCleanerManager.cleanableOffsets, with the max-lag delay of the same first dirty offset."""
    first_dirty, force = _first_dirty_offset(log)
    bounds = [log.last_stable_offset, log.active_segment_base]
    min_lag = max(log.settings.min_compaction_lag_ms, 0)
    if min_lag > 0:
        lagging = _first_segment_within_min_lag(log, first_dirty, now_ms, min_lag)
        if lagging is not None:
            bounds.append(lagging)
    return OffsetsToClean(first_dirty, max(first_dirty, min(bounds)), force,
                          max_compaction_delay(log, first_dirty, now_ms))


def calculate_cleanable_bytes(log: CleanerLog, first_dirty_offset: int,
                              uncleanable_offset: int) -> tuple[int, int]:
    """LogCleanerManager.calculateCleanableBytes: (the base offset of the segment holding
    ``uncleanable_offset``, or of the active segment; the bytes from the segment holding the
    first dirty offset up to it)."""
    non_active = non_active_segments_from(log, uncleanable_offset)
    first_uncleanable = non_active[0].base_offset if non_active else log.active_segment_base
    cleanable = sum(s.size for s in segments_between(
        log, min(first_dirty_offset, first_uncleanable), first_uncleanable))
    return first_uncleanable, cleanable


@dataclass(frozen=True)
class LogToClean:
    """Kafka's LogToClean: a log with its cleanable range and dirtiness."""
    log: CleanerLog
    first_dirty_offset: int
    first_uncleanable_offset: int  # segment-aligned: where the cleaner's offset map must stop
    clean_bytes: int
    cleanable_bytes: int
    needs_compaction_now: bool
    force_update_checkpoint: bool = False
    compaction_delay_ms: int = 0

    @property
    def topic_partition(self) -> TopicPartition:
        return self.log.topic_partition

    @property
    def total_bytes(self) -> int:
        return self.clean_bytes + self.cleanable_bytes

    @property
    def cleanable_ratio(self) -> float:
        """cleanable / total; Java's double division (NaN for an empty log, which
        ``survey`` skips before comparing)."""
        total = self.total_bytes
        return self.cleanable_bytes / total if total else float("nan")

    @property
    def may_clean(self) -> bool:
        """grabFilthiestCompactedLog's filter: the ratio strictly above the topic's
        min.cleanable.dirty.ratio, or a max-lag deadline passed with bytes to clean."""
        return ((self.needs_compaction_now and self.cleanable_bytes > 0)
                or self.cleanable_ratio > self.log.settings.min_cleanable_dirty_ratio)


def log_to_clean(log: CleanerLog, now_ms: int) -> LogToClean:
    offsets = cleanable_offsets(log, now_ms)
    clean = sum(s.size for s in segments_between(log, -1, offsets.first_dirty_offset))
    first_uncleanable, cleanable = calculate_cleanable_bytes(
        log, offsets.first_dirty_offset, offsets.first_uncleanable_offset)
    return LogToClean(log, offsets.first_dirty_offset, first_uncleanable, clean, cleanable,
                      offsets.needs_compaction_now, offsets.force_update_checkpoint,
                      offsets.compaction_delay_ms)


class CleanerSurvey(NamedTuple):
    filthiest: LogToClean | None      # the log to clean next
    candidates: tuple[LogToClean, ...]  # every compacted, non-empty log considered
    checkpoint_resets: dict[TopicPartition, int]  # invalid checkpoints and what to write instead
    max_dirty_ratio: float            # Kafka's max-dirty-percent / 100
    max_compaction_delay_ms: int      # Kafka's max-compaction-delay-secs * 1000
    cleanable_count: int              # logs that passed the ratio / deadline filter


def survey(logs: Iterable[CleanerLog], now_ms: int, in_progress: Iterable[TopicPartition] = (),
           uncleanable: Iterable[TopicPartition] = ()) -> CleanerSurvey:
    """LogCleanerManager.grabFilthiestCompactedLog without its side effects: the caller
    writes ``checkpoint_resets`` to the cleaner checkpoint and marks ``filthiest`` in progress."""
    busy = set(in_progress) | set(uncleanable)
    resets: dict[TopicPartition, int] = {}
    delay = 0
    candidates = []
    for log in logs:
        if not log.compact or log.topic_partition in busy:
            continue
        ltc = log_to_clean(log, now_ms)
        if ltc.force_update_checkpoint:
            resets[log.topic_partition] = ltc.first_dirty_offset
        delay = max(delay, ltc.compaction_delay_ms)
        if ltc.total_bytes > 0:
            candidates.append(ltc)
    max_ratio = max((c.cleanable_ratio for c in candidates), default=0.0)
    cleanable = [c for c in candidates if c.may_clean]
    best = None
    for c in cleanable:
        if best is None or c.cleanable_ratio > best.cleanable_ratio:
            best = c
    return CleanerSurvey(best, tuple(candidates), resets, max_ratio, delay, len(cleanable))


def filthiest(logs: Iterable[CleanerLog], now_ms: int, in_progress: Iterable[TopicPartition] = (),
              uncleanable: Iterable[TopicPartition] = ()) -> LogToClean | None:
    """The log to clean next, or None: ``survey(...).filthiest``."""
    return survey(logs, now_ms, in_progress, uncleanable).filthiest


def deletable_logs(logs: Iterable[CleanerLog], in_progress: Iterable[TopicPartition] = (),
                   uncleanable: Iterable[TopicPartition] = ()) -> list[CleanerLog]:
    """LogCleanerManager.deletableLogs: the compacted logs, not being cleaned and not marked
    uncleanable, whose old segments the cleaner has retention delete after a clean (the caller
    marks them in progress meanwhile). Logs with ``compact`` alone are included: their
    segments may lie wholly below the log start offset."""
    busy = set(in_progress) | set(uncleanable)
    return [log for log in logs if log.compact and log.topic_partition not in busy]


def _last_offset_estimate(segments: Sequence[SegmentInfo], i: int, first_uncleanable_offset: int) -> int:
    """Cleaner.lastOffsetForFirstSegment: the next segment's base - 1, or for the last one
    the first uncleanable offset - 1 (reading a segment's true last offset costs a scan)."""
    if i + 1 < len(segments):
        return segments[i + 1].base_offset - 1
    return first_uncleanable_offset - 1


def group_segments_by_size(segments: Sequence[SegmentInfo], max_size: int, max_index_size: int,
                           first_uncleanable_offset: int) -> list[list[SegmentInfo]]:
    """Cleaner.groupSegmentsBySize: consecutive runs of ``segments`` (in offset order), each
    to be cleaned into one segment."""
    groups: list[list[SegmentInfo]] = []
    i, n = 0, len(segments)
    while i < n:
        first = segments[i]
        group = [first]
        log_size, index_size, time_index_size = first.size, first.offset_index_bytes, first.time_index_bytes
        i += 1
        while i < n:
            s = segments[i]
            if (log_size + s.size > max_size
                    or index_size + s.offset_index_bytes > max_index_size
                    or time_index_size + s.time_index_bytes > max_index_size):
                break
            last = _last_offset_estimate(segments, i, first_uncleanable_offset)
            if s.size != 0 and last - first.base_offset > MAX_INT:
                break
            group.append(s)
            log_size += s.size
            index_size += s.offset_index_bytes
            time_index_size += s.time_index_bytes
            i += 1
        groups.append(group)
    return groups
