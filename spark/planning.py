"""From options to offset ranges to Spark partitions.

Offsets (as Spark's Kafka source resolves them): each partition reads
``[start, end)``, where start comes from ``startingOffsetsByTimestamp``,
``startingTimestamp`` or ``startingOffsets`` (earliest = the log start offset, latest =
the partition's latest) and end likewise from the ending options; nothing at or past
``latest`` is ever read. A given offset outside [log start offset, log end offset] is
out of range, as a Kafka consumer's fetch would be: data loss (failOnDataLoss).

Splits: each ``LogRange`` (one Spark InputPartition) covers a contiguous offset range of
one topic-partition and the segment byte regions that hold it, about
``maxPartitionBytes`` of segment data (fewer with ``minPartitions``). Small segments are
read together; a large one is cut at offset index entries, so every cut falls on a batch
boundary: the bytes before a cut hold exactly the offsets below the base offset of the
batch after it. A LogRange is a small picklable description (paths, byte positions,
offsets), never an open file; executors open the files, so they must see the same paths
(a shared filesystem on a real cluster).

With read_committed each LogRange also carries the (producer id, first offset) of every
aborted transaction overlapping its offsets (spark/transactions.py reads them from the
segments' ``.txnindex`` files), for the reader to drop their batches.

The byte regions only say where to look. Which records come out is decided by offsets:
the reader keeps records in ``[start_offset, end_offset)``, so adjacent LogRanges never
overlap even where a region begins at an index entry before the first wanted batch.
"""
from __future__ import annotations

import os
from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field

from pyspark.sql.datasource import InputPartition

from ext.batch import LOG_OVERHEAD, read_prefix
from spark.errors import StromSparkError
from spark.layout import PartitionState
from spark.options import EARLIEST, LATEST, OffsetSpec, TimestampSpec
from spark.transactions import aborted_transactions

Region = tuple[str, int, int]  # segment file path, start position, end position


@dataclass(frozen=True)
class LogRange(InputPartition):
    """Offsets [start_offset, end_offset) of one topic-partition, found in ``regions``.
    Timestamp bounds (microseconds, inclusive; None = unbounded) come from pushed filters
    and are enforced exactly by the reader."""

    topic: str
    partition: int
    start_offset: int
    end_offset: int
    regions: tuple[Region, ...]
    include_headers: bool = False
    check_crcs: bool = True
    min_timestamp_us: int | None = None
    max_timestamp_us: int | None = None
    aborted: tuple[tuple[int, int], ...] = ()  # read_committed: (producer id, first offset)

    @property
    def size(self) -> int:
        return sum(end - start for _, start, end in self.regions)


@dataclass(frozen=True)
class ReadSettings:
    """What every LogRange of a query shares."""

    max_partition_bytes: int
    min_partitions: int | None = None
    include_headers: bool = False
    check_crcs: bool = True
    min_timestamp_us: int | None = None
    max_timestamp_us: int | None = None
    read_committed: bool = False  # aborted transactions' batches are skipped


# ---- offsets -----------------------------------------------------------------------------

def resolve_start(state: PartitionState, offsets: OffsetSpec, timestamps: TimestampSpec | None,
                  strategy: str, fail_on_data_loss: bool) -> int:
    tp = state.tp
    timestamp = timestamps.for_partition(tp) if timestamps is not None else None
    if timestamp is not None:
        found = offset_for_timestamp(state, timestamp)
        if found is None:
            if strategy == "error":
                option = "startingOffsetsByTimestamp" if tp in timestamps.timestamps else "startingTimestamp"
                raise StromSparkError(
                    f"{option}: no committed record of {tp[0]}-{tp[1]} has a timestamp >= "
                    f"{timestamp} (its latest offset is {state.latest}); set "
                    f"startingOffsetsByTimestampStrategy=latest to start there instead"
                )
            return state.latest
        return found
    offset = offsets.for_partition(tp)
    if offset == EARLIEST:
        return state.log_start_offset
    if offset == LATEST:
        return state.latest
    if offset < state.log_start_offset:
        if fail_on_data_loss:
            raise StromSparkError(
                f"startingOffsets: offset {offset} of {tp[0]}-{tp[1]} is gone: the log starts at "
                f"{state.log_start_offset} (retention or DeleteRecords removed the rest); set "
                f"failOnDataLoss=false to start at the log start offset"
            )
        return state.log_start_offset
    if offset > state.log_end_offset:
        if fail_on_data_loss:
            raise StromSparkError(
                f"startingOffsets: offset {offset} of {tp[0]}-{tp[1]} is past its log end offset "
                f"{state.log_end_offset} (a re-created topic, or a truncated log?); set "
                f"failOnDataLoss=false to start at the latest offset"
            )
        return state.latest
    return offset  # past ``latest``: a batch reads nothing, a stream waits for it


def resolve_end(state: PartitionState, offsets: OffsetSpec, timestamps: TimestampSpec | None,
                start: int) -> int:
    tp = state.tp
    timestamp = timestamps.for_partition(tp) if timestamps is not None else None
    if timestamp is not None:
        found = offset_for_timestamp(state, timestamp)
        end = state.latest if found is None else found
    else:
        offset = offsets.for_partition(tp)
        end = state.latest if offset == LATEST else min(offset, state.latest)
    return max(end, start)


def offset_for_timestamp(state: PartitionState, timestamp: int) -> int | None:
    """The first committed offset whose record timestamp >= ``timestamp``, or None."""
    found = state.reader.offset_for_timestamp(timestamp, state.log_start_offset)
    if found is None or found[0] >= state.latest:
        return None
    return found[0]


# ---- splits ------------------------------------------------------------------------------

@dataclass
class _Extent:
    """The bytes of one segment that hold the wanted offsets from ``offset`` on."""

    state: PartitionState
    segment: int
    path: str
    start: int
    end: int
    offset: int
    _cuts: list[int] | None = field(default=None, repr=False)

    def cuts(self) -> list[int]:
        """Positions strictly inside the extent where a batch starts (index entries)."""
        if self._cuts is None:
            self._cuts = [p for _, p in self.state.reader.index_entries(self.segment)
                          if self.start < p < self.end]
        return self._cuts


def _extents(state: PartitionState, start: int, end: int) -> list[_Extent]:
    reader = state.reader
    found = []
    for i in range(reader.segment_for(start), len(reader.base_offsets)):
        base = reader.base_offsets[i]
        if base >= end:
            break
        size = reader.sizes[i]
        if size == 0:
            continue
        next_base = reader.base_offsets[i + 1] if i + 1 < len(reader.base_offsets) else None
        entries = None
        lo, hi = 0, size
        if start > base:
            entries = reader.index_entries(i)
            j = bisect_right([o for o, _ in entries], start) - 1
            lo = entries[j][1] if j >= 0 else 0
        if next_base is None or next_base > end:
            entries = entries if entries is not None else reader.index_entries(i)
            # The batch at entry k starts after entry k-1's last offset: once that reaches
            # end - 1, nothing from entry k on is wanted.
            k = bisect_left([o for o, _ in entries], end - 1) + 1
            hi = entries[k][1] if k < len(entries) else size
        if hi > lo:
            found.append(_Extent(state, i, reader.segment_path(base), lo, hi, max(start, base)))
    return found


def plan_ranges(ranges: list[tuple[PartitionState, int, int]], settings: ReadSettings) -> list[LogRange]:
    """LogRanges for each (partition, start, end) with start < end."""
    extents = [(state, start, end, _extents(state, start, end))
               for state, start, end in ranges if start < end]
    target = settings.max_partition_bytes
    if settings.min_partitions:
        total = sum(e.end - e.start for *_, es in extents for e in es)
        target = max(1, min(target, -(-total // settings.min_partitions)))
    planned: list[LogRange] = []
    for state, start, end, es in extents:
        aborted = aborted_transactions(state.reader, start, end) if settings.read_committed else []
        for lo, hi, regions in _split(es, start, end, target):
            planned.append(LogRange(
                state.topic, state.partition, lo, hi, tuple(regions),
                settings.include_headers, settings.check_crcs,
                settings.min_timestamp_us, settings.max_timestamp_us,
                tuple((a.producer_id, a.first_offset) for a in aborted
                      if a.last_offset >= lo and a.first_offset < hi),
            ))
    return planned


def _split(extents: list[_Extent], start: int, end: int,
           target: int) -> list[tuple[int, int, list[Region]]]:
    groups: list[tuple[int, int, list[Region]]] = []
    regions: list[Region] = []
    used, group_start = 0, start
    for extent in extents:
        pos, offset = extent.start, extent.offset
        while pos < extent.end:
            room = target - used
            if extent.end - pos <= room:
                regions.append((extent.path, pos, extent.end))
                used += extent.end - pos
                break
            cuts = extent.cuts()
            i = bisect_right(cuts, pos + room) - 1
            if i < 0 or cuts[i] <= pos:
                if regions:  # close the group here and try again with a whole target
                    groups.append((group_start, offset, regions))
                    regions, used, group_start = [], 0, offset
                    continue
                i = bisect_right(cuts, pos)  # one batch run larger than the target
                if i == len(cuts):
                    regions.append((extent.path, pos, extent.end))
                    used += extent.end - pos
                    break
            cut = cuts[i]
            # The batch at a cut may begin before ``start`` (it holds it) or at/after ``end``
            # (unindexed batches ran past it): clamp so group offsets stay within the range.
            cut_offset = min(max(_base_offset_at(extent.path, cut), start), end)
            regions.append((extent.path, pos, cut))
            groups.append((group_start, cut_offset, regions))
            regions, used, group_start = [], 0, cut_offset
            pos, offset = cut, cut_offset
    if regions:
        groups.append((group_start, end, regions))
    return [(lo, hi, rs) for lo, hi, rs in groups if lo < hi]


def _base_offset_at(path: str, position: int) -> int:
    fd = os.open(path, os.O_RDONLY)
    try:
        prefix = read_prefix(os.pread(fd, LOG_OVERHEAD, position))
    finally:
        os.close(fd)
    if prefix is None:
        raise StromSparkError(f"{path}: the offset index points past the end of the file ({position})")
    return prefix[0]
