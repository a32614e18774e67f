"""Loading a partition directory, and recovering it after an unclean shutdown.

On open:
 1. Leftovers of interrupted operations go: ``*.deleted`` (segments awaiting deletion),
    ``*.cleaned``/``*.swap`` (interrupted compaction output), ``*.tmp`` (checkpoint temps),
    and index files without a ``.log`` beside them.
 2. Every segment opens; one whose ``.index`` or ``.timeindex`` is missing or fails its
    sanity check is recovered (its indexes rebuilt from the log).
 3. After an unclean shutdown (no clean-shutdown marker in the log dir), every segment from
    the one holding the recovery point onward is recovered: each batch is validated
    (length, magic, CRC32C, increasing offsets) and the file is truncated at the last good
    batch; if a segment lost bytes, every later segment is deleted, since its offsets
    would no longer follow on.
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
    segment_base_offsets,
)
from engine.segment import LogSegment
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
    logs = {name for name in os.listdir(directory) if name.endswith(LOG_SUFFIX)}
    for name in os.listdir(directory):
        path = os.path.join(directory, name)
        if name.endswith((DELETED_SUFFIX, CLEANED_SUFFIX, SWAP_SUFFIX, ".tmp")):
            os.unlink(path)
        elif name.endswith((INDEX_SUFFIX, TIME_INDEX_SUFFIX)):
            if name.rsplit(".", 1)[0] + LOG_SUFFIX not in logs:
                os.unlink(path)


def open_segments(directory: str, index_interval_bytes: int, max_index_size: int,
                  epoch_cache: LeaderEpochCache | None) -> list[LogSegment]:
    segments = []
    for base in segment_base_offsets(directory):
        stem = os.path.join(directory, f"{base:020d}")
        indexes_present = os.path.exists(stem + INDEX_SUFFIX) and os.path.exists(stem + TIME_INDEX_SUFFIX)
        segment = LogSegment(directory, base, index_interval_bytes, max_index_size)
        try:
            if not indexes_present:
                raise InvalidIndexError("index file missing")
            segment.offset_index.sanity_check()
            segment.time_index.sanity_check()
        except InvalidIndexError as e:
            log.warning("%s: rebuilding indexes (%s)", segment.log_path, e)
            segment.recover(epoch_cache)
        segments.append(segment)
    return segments


def load_log(directory: str, *, index_interval_bytes: int, max_index_size: int,
             log_start_offset: int, recovery_point: int, had_clean_shutdown: bool,
             epoch_cache: LeaderEpochCache) -> LoadedLog:
    remove_leftovers(directory)
    segments = open_segments(directory, index_interval_bytes, max_index_size, epoch_cache)
    truncated = 0
    if not had_clean_shutdown and segments:
        bases = [s.base_offset for s in segments]
        first = max(0, _floor_index(bases, recovery_point))
        for i in range(first, len(segments)):
            lost = segments[i].recover(epoch_cache)
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
