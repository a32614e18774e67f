"""Loading a partition directory, and recovering it after an unclean shutdown.

On open:
 1. Leftovers of interrupted operations go: ``*.deleted`` (segments awaiting deletion),
    ``*.cleaned`` (unfinished compaction output), ``*.tmp`` (checkpoint temps); a cleaned
    segment the cleaner had begun to swap in (``<base>.log.swap``) is swapped in, as Kafka's
    LogLoader completes it (``complete_swap``); then index files (``.index``, ``.timeindex``,
    ``.txnindex``) without a ``.log`` beside them go.
 2. Every segment opens; one whose ``.index`` or ``.timeindex`` is missing, fails its
    sanity check, or whose last entries do not fit the log is recovered (its indexes rebuilt
    from the log, its batches validated). Kafka checks only sizes and the last offsets; we
    also read the batch header the last offset index entry points at (it must be a batch
    starting at or below the entry's offset: Kafka logs written before per-batch indexing
    name the last offset of a multi-batch append) and bound both last offsets by the next
    segment's base offset (the log end offset for the last segment). An entry corrupted in
    the middle of an index and still in order goes unnoticed here, as in Kafka; a read
    that lands on it fails with CorruptRecordError instead of returning wrong records.
 3. After an unclean shutdown (no clean-shutdown marker in the log dir), every segment from
    the one holding the recovery point onward is recovered: each batch is validated
    (length, magic, CRC32C, increasing offsets; the fields before the CRC too: offsets
    without gaps unless the log is compacted, and the epoch the leader-epoch checkpoint
    gives the batch's offset when that checkpoint exists, since every append writes it
    first) and the file is truncated at the last good batch; if a segment lost bytes,
    every later segment is deleted, since its offsets would no longer follow on.
    Segments wholly below the recovery point, and every segment after a clean shutdown,
    are trusted as Kafka trusts them: a flipped bit there is not looked for at start-up
    (that would read the whole log on every start). A follower's fetch CRC-checks what it
    appends, so such a batch never spreads to another replica.
 4. The log end offset is the offset after the last batch; the leader-epoch cache is
    trimmed to [log start offset, log end offset).

The recovery point only advances when the log is flushed (``Log.flush``): recovered but
unflushed segments are recovered again after another crash.
"""
from __future__ import annotations

import logging
import os
from dataclasses import dataclass

from engine.errors import InvalidIndexError
from engine.reader import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    base_offset_of,
    file_name,
    iter_file_batches,
    segment_base_offsets,
)
from engine.segment import LogSegment
from engine.txn_index import TXN_INDEX_SUFFIX
from ext.batch import BATCH_OVERHEAD, CorruptRecordError, peek_header, read_header
from ext.epoch import LeaderEpochCache

log = logging.getLogger(__name__)


@dataclass
class LoadedLog:
    segments: list[LogSegment]
    log_end_offset: int
    recovery_point: int
    log_start_offset: int
    truncated_bytes: int


def remove_leftovers(directory: str) -> None:
    """Kafka's LogLoader.removeTempFilesAndCollectSwapFiles, then its swap completion:
    ``*.deleted``, ``*.cleaned`` and ``*.tmp`` files go; a ``<base>.log.swap`` (a cleaned
    segment the cleaner had begun to swap in: engine/cleaner.py) is completed, unless a
    ``.cleaned`` file at or below its base shows an unfinished clean; index ``.swap`` files
    without their ``.log.swap`` go; then index files without a ``.log`` beside them."""
    names = os.listdir(directory)
    cleaned_bases = []
    for name in names:
        if name.endswith((DELETED_SUFFIX, CLEANED_SUFFIX, ".tmp")):
            if name.endswith(CLEANED_SUFFIX) and name[:20].isdigit():
                cleaned_bases.append(base_offset_of(name))
            _unlink(os.path.join(directory, name))
    min_cleaned = min(cleaned_bases, default=None)
    swaps = sorted(base_offset_of(name) for name in names
                   if name.endswith(LOG_SUFFIX + SWAP_SUFFIX) and name[:20].isdigit())
    completed = []
    for base in swaps:
        if min_cleaned is not None and base >= min_cleaned:
            _unlink(os.path.join(directory, file_name(base, LOG_SUFFIX + SWAP_SUFFIX)))
        else:
            completed.append(base)
    for name in os.listdir(directory):
        if name.endswith(SWAP_SUFFIX) and not (name[:20].isdigit() and base_offset_of(name) in completed):
            _unlink(os.path.join(directory, name))
    for base in completed:
        complete_swap(directory, base)
    logs = {name for name in os.listdir(directory) if name.endswith(LOG_SUFFIX)}
    for name in os.listdir(directory):
        if name.endswith((INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)):
            if name.rsplit(".", 1)[0] + LOG_SUFFIX not in logs:
                _unlink(os.path.join(directory, name))


def complete_swap(directory: str, base: int) -> None:
    """Finish swapping in the cleaned segment ``<base>.log.swap`` (LogLoader): the segments
    it replaces (those based in [base, its next offset)) are removed, its index ``.swap``
    files take their final names (one already renamed is the new one: the cleaner renames
    the ``.log`` last), and it becomes ``<base>.log``. Its indexes are checked, and rebuilt
    if need be, when the segment opens."""
    swap = os.path.join(directory, file_name(base, LOG_SUFFIX + SWAP_SUFFIX))
    next_offset = _next_offset_of_file(swap, base)
    for other in segment_base_offsets(directory):
        if base < other < next_offset:
            for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
                _unlink(os.path.join(directory, file_name(other, suffix)))
    for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
        final = os.path.join(directory, file_name(base, suffix))
        if os.path.exists(final + SWAP_SUFFIX):
            os.replace(final + SWAP_SUFFIX, final)
    os.replace(swap, os.path.join(directory, file_name(base, LOG_SUFFIX)))
    log.info("%s: completed the swap of the cleaned segment at %d (replaced up to %d)",
             directory, base, next_offset)


def _next_offset_of_file(path: str, base: int) -> int:
    """The offset after the last whole batch of a segment file (``base`` when it has none)."""
    next_offset = base
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        for _, data in iter_file_batches(fd, 0, os.fstat(fd).st_size):
            next_offset = read_header(data).next_offset
    except CorruptRecordError:
        pass
    finally:
        os.close(fd)
    return next_offset


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def check_index_ends(segment: LogSegment, next_base: int | None) -> None:
    """InvalidIndexError unless the last entries of both indexes fit the log file (see the
    module docstring); ``next_base`` is the next segment's base offset, None for the last."""
    index = segment.offset_index
    if index.entries:
        offset, position = index.entry(index.entries - 1)
        if position + BATCH_OVERHEAD > segment.size:
            raise InvalidIndexError(
                f"{index.path}: last entry at position {position}, past the {segment.size}-byte log")
        try:
            header = peek_header(os.pread(segment.fd, BATCH_OVERHEAD, position))
        except CorruptRecordError:
            header = None
        if header is None or position + header.size > segment.size:
            raise InvalidIndexError(f"{index.path}: last entry, position {position}, points at no batch")
        base_offset = header.base_offset
        if not segment.base_offset <= base_offset <= offset:
            raise InvalidIndexError(
                f"{index.path}: last entry names offset {offset} but the batch at {position} "
                f"starts at {base_offset}")
    bound = segment.read_next_offset() if next_base is None else next_base
    lasts = (("offset index", index.path, index.entry(index.entries - 1)[0] if index.entries else None),
             ("time index", segment.time_index.path,
              segment.time_index.last_entry[1] if segment.time_index.entries else None))
    for name, path, last in lasts:
        if last is not None and last >= max(bound, segment.base_offset + 1):
            raise InvalidIndexError(f"{path}: {name} names offset {last}, past the segment's "
                                    f"last offset {bound - 1}")


def open_segments(directory: str, index_interval_bytes: int, max_index_size: int,
                  epoch_cache: LeaderEpochCache | None, contiguous: bool = False,
                  checkpointed_epochs: bool = False) -> list[LogSegment]:
    segments = []
    bases = segment_base_offsets(directory)
    for i, base in enumerate(bases):
        stem = os.path.join(directory, f"{base:020d}")
        indexes_present = os.path.exists(stem + INDEX_SUFFIX) and os.path.exists(stem + TIME_INDEX_SUFFIX)
        segment = LogSegment(directory, base, index_interval_bytes, max_index_size)
        try:
            if not indexes_present:
                raise InvalidIndexError("index file missing")
            segment.offset_index.sanity_check()
            segment.time_index.sanity_check()
            check_index_ends(segment, bases[i + 1] if i + 1 < len(bases) else None)
        except (InvalidIndexError, CorruptRecordError) as e:
            log.warning("%s: rebuilding indexes (%s)", segment.log_path, e)
            segment.recover(epoch_cache, contiguous=contiguous, checkpointed_epochs=checkpointed_epochs)
        segments.append(segment)
    return segments


def load_log(directory: str, *, index_interval_bytes: int, max_index_size: int,
             log_start_offset: int, recovery_point: int, had_clean_shutdown: bool,
             epoch_cache: LeaderEpochCache, contiguous: bool = False) -> LoadedLog:
    """``contiguous``: offsets run on without gaps (a log nobody compacts). The epochs of
    ``epoch_cache`` are checkpointed (LogSegment.recover checks batches against them) when it
    holds any entry as it comes in: what its checkpoint file had."""
    remove_leftovers(directory)
    checkpointed = len(epoch_cache) > 0
    segments = open_segments(directory, index_interval_bytes, max_index_size, epoch_cache,
                             contiguous, checkpointed)
    truncated = 0
    if not had_clean_shutdown and segments:
        bases = [s.base_offset for s in segments]
        first = max(0, _floor_index(bases, recovery_point))
        for i in range(first, len(segments)):
            lost = segments[i].recover(epoch_cache, contiguous=contiguous, checkpointed_epochs=checkpointed)
            if lost:
                log.warning("%s: truncated %d bytes of torn or corrupt data at %d",
                            segments[i].log_path, lost, segments[i].size)
                truncated += lost
                for later in segments[i + 1:]:
                    later.close_and_delete()
                del segments[i + 1:]
                break
    if not segments:
        segments.append(
            LogSegment(directory, log_start_offset, index_interval_bytes, max_index_size, create=True)
        )
    # An empty trailing segment is kept: it is the active one.
    log_end_offset = segments[-1].read_next_offset()
    segments[-1].resize_indexes(max_index_size)
    log_start_offset = max(log_start_offset, segments[0].base_offset)
    if had_clean_shutdown:
        recovery_point = log_end_offset
    else:
        recovery_point = min(recovery_point, log_end_offset)
    epoch_cache.truncate_from_end(log_end_offset)
    epoch_cache.truncate_from_start(log_start_offset)
    return LoadedLog(segments, log_end_offset, recovery_point, log_start_offset, truncated)


def _floor_index(sorted_values: list[int], value: int) -> int:
    lo, hi = 0, len(sorted_values)
    while lo < hi:
        mid = (lo + hi) // 2
        if sorted_values[mid] <= value:
            lo = mid + 1
        else:
            hi = mid
    return lo - 1


__all__ = ["load_log", "LoadedLog", "base_offset_of"]
