"""Read-only access to a partition directory: the seam the Spark reader uses.

Nothing here writes, locks or keeps writer state, so a process may read a live broker's
directory: segment sizes are snapshotted when a reader opens, a torn tail batch is simply
not returned, and indexes are read with pread, never mapped (a writer may trim the file
under a reader; a mapped page past the new end would kill the reader with SIGBUS).

File names (Apache Kafka's): ``<topic>-<partition>/`` holding ``<20-digit base offset>.log``
with ``.index`` and ``.timeindex`` beside each segment.
"""
from __future__ import annotations

import os
import re
import struct
from bisect import bisect_left, bisect_right
from collections.abc import Iterator
from typing import NamedTuple

from ext.batch import (
    LOG_OVERHEAD,
    MIN_BATCH_LENGTH,
    BatchHeader,
    BatchSummary,
    decode_records,
    peek_extent,
    read_header,
    read_prefix,
    scan,
)
from ext.errors import CorruptRecordError

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
DELETED_SUFFIX = ".deleted"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"

_PARTITION_DIR = re.compile(r"^(?P<topic>[a-zA-Z0-9._-]+)-(?P<partition>\d+)$")
_INDEX_ENTRY = struct.Struct(">ii")  # relative offset, position
_TIME_INDEX_ENTRY = struct.Struct(">qi")  # timestamp, relative offset
_SEARCH_CHUNK = 16 * 1024  # covers index.interval.bytes (4 KiB) of small batches
_READ_CHUNK = 4 * 1024 * 1024


def file_name(base_offset: int, suffix: str) -> str:
    return f"{base_offset:020d}{suffix}"


def base_offset_of(name: str) -> int:
    return int(name.split(".", 1)[0])


def parse_partition_dir(name: str) -> tuple[str, int] | None:
    """(topic, partition) for a live partition directory name, None for anything else
    (``-delete``, ``-future``, ``-stray`` directories, files, the metadata log)."""
    m = _PARTITION_DIR.match(name)
    if m is None:
        return None
    return m.group("topic"), int(m.group("partition"))


def segment_base_offsets(partition_dir: str) -> list[int]:
    return sorted(
        base_offset_of(name)
        for name in os.listdir(partition_dir)
        if name.endswith(LOG_SUFFIX) and name[:20].isdigit() and len(name) == 24
    )


class BatchPosition(NamedTuple):
    position: int
    base_offset: int
    last_offset: int
    size: int


def search_for_offset(fd: int, target_offset: int, start: int, end: int) -> BatchPosition | None:
    """The first batch in [start, end) of a segment file whose last offset >= target_offset.

    Reads ahead in chunks and splits them with ext.batch.scan (no CRC: this is the read
    path, recovery validates). A batch larger than a chunk is stepped over from its header
    alone. A torn tail ends the search."""
    pos = start
    while pos + LOG_OVERHEAD <= end:
        chunk = os.pread(fd, min(_SEARCH_CHUNK, end - pos), pos)
        summary = scan(chunk, 0, False, True)
        if summary.count:
            i = bisect_left(summary.last_offsets, target_offset)
            if i < summary.count:
                return BatchPosition(pos + summary.positions[i], summary.base_offsets[i],
                                     summary.last_offsets[i], summary.sizes[i])
            pos += summary.valid_bytes
            continue
        # No whole batch in the chunk: one big batch, one that scan refused (served as Kafka
        # does, from its header's offsets and size: the client's CRC check refuses it), or a
        # torn tail.
        extent = peek_extent(chunk)
        if extent is None:
            return None
        base_offset, last_offset, size = extent
        if pos + size > end:
            return None
        if last_offset >= target_offset:
            return BatchPosition(pos, base_offset, last_offset, size)
        pos += size
    return None


def whole_batches_size(fd: int, start: int, max_size: int) -> int:
    """Bytes of the whole batches that start at ``start`` and fit in ``max_size``.

    Small batches are split from chunks of up to _SEARCH_CHUNK bytes; a batch larger than a
    chunk is stepped over from its 12-byte length prefix alone, so the records of large batches
    (a replica fetch's megabyte) are never read. A torn or short batch ends the run."""
    pos, end = start, start + max_size
    while pos + LOG_OVERHEAD <= end:
        chunk = os.pread(fd, min(_SEARCH_CHUNK, end - pos), pos)
        summary = scan(chunk, 0, False, True)
        if summary.count:
            pos += summary.valid_bytes
            continue
        prefix = read_prefix(chunk)
        if prefix is None:
            break
        length = prefix[1]
        if length < MIN_BATCH_LENGTH or pos + LOG_OVERHEAD + length > end:
            break
        pos += LOG_OVERHEAD + length
    return pos - start


def _live_entries(fd: int, entry_size: int, live) -> int:
    """How many entries an index file holds: a preallocated (active) index ends in
    zero-filled slots, so binary-search the prefix of slots ``live`` accepts."""
    lo, hi = 0, os.fstat(fd).st_size // entry_size
    while lo < hi:
        mid = (lo + hi) // 2
        raw = os.pread(fd, entry_size, mid * entry_size)
        if len(raw) == entry_size and live(raw):
            lo = mid + 1
        else:
            hi = mid
    return lo


def _offset_entry_live(raw: bytes) -> bool:
    # Entries have positions > 0: the first batch of a segment is never indexed.
    return _INDEX_ENTRY.unpack(raw)[1] > 0


def _time_entry_live(raw: bytes) -> bool:
    return raw != b"\0" * _TIME_INDEX_ENTRY.size


def index_lookup_pread(fd: int, base_offset: int, target_offset: int) -> int:
    """Position of the floor entry for ``target_offset`` in an offset index file.
    Untrusted input: any inconsistency answers 0 (scan the segment from its start)."""

    def entry(n: int) -> tuple[int, int]:
        raw = os.pread(fd, 8, n * 8)
        return _INDEX_ENTRY.unpack(raw) if len(raw) == 8 else (0, 0)

    lo, hi, found = 0, _live_entries(fd, 8, _offset_entry_live), 0
    while lo < hi:
        mid = (lo + hi) // 2
        relative, position = entry(mid)
        if base_offset + relative <= target_offset:
            found = position
            lo = mid + 1
        else:
            hi = mid
    return max(found, 0)


def index_entries_pread(fd: int, base_offset: int) -> list[tuple[int, int]]:
    """Every (offset, position) entry of an offset index file, in one read. Each entry
    names a batch's last offset and the batch's position (Kafka's choice). Untrusted
    input: entries stop where offsets or positions stop increasing."""
    count = _live_entries(fd, 8, _offset_entry_live)
    raw = os.pread(fd, count * 8, 0)
    entries: list[tuple[int, int]] = []
    for relative, position in _INDEX_ENTRY.iter_unpack(raw[:len(raw) - len(raw) % 8]):
        if entries and (base_offset + relative <= entries[-1][0] or position <= entries[-1][1]):
            break
        entries.append((base_offset + relative, position))
    return entries


def time_index_lookup_pread(fd: int, base_offset: int, target_timestamp: int) -> tuple[int, int]:
    """(timestamp, offset) of the time index entry with the largest timestamp <= target,
    or (-1, base_offset) when there is none. Entry (T, O): the largest timestamp among the
    records up to offset O is T, first reached in the batch ending at O; so every record
    before that batch has a timestamp < T."""
    size = _TIME_INDEX_ENTRY.size
    lo, hi = 0, _live_entries(fd, size, _time_entry_live)
    found = (-1, base_offset)
    while lo < hi:
        mid = (lo + hi) // 2
        timestamp, relative = _TIME_INDEX_ENTRY.unpack(os.pread(fd, size, mid * size))
        if timestamp <= target_timestamp:
            found = (timestamp, base_offset + relative)
            lo = mid + 1
        else:
            hi = mid
    return found


def time_index_last_entry_pread(fd: int, base_offset: int) -> tuple[int, int]:
    """(timestamp, offset) of the last time index entry, (-1, base_offset) if none. A
    sealed segment's last entry holds its largest timestamp (written when it rolled)."""
    size = _TIME_INDEX_ENTRY.size
    count = _live_entries(fd, size, _time_entry_live)
    if count == 0:
        return -1, base_offset
    timestamp, relative = _TIME_INDEX_ENTRY.unpack(os.pread(fd, size, (count - 1) * size))
    return timestamp, base_offset + relative


def iter_file_chunks(
    fd: int, start: int, end: int, chunk_size: int = _READ_CHUNK, check_crc: bool = False
) -> Iterator[tuple[int, bytes, BatchSummary]]:
    """(file position, chunk, the chunk's scan) for the whole batches in [start, end) of a
    segment file, read a chunk at a time; the scan covers the chunk's whole batches (a batch
    cut by the chunk starts the next one).

    Raises CorruptRecordError (with the file position) for a bad batch; a batch cut off
    by ``end`` (a torn tail, or a writer mid-append) ends the iteration quietly."""
    pos = start
    while pos + LOG_OVERHEAD <= end:
        want = min(chunk_size, end - pos)
        chunk = os.pread(fd, want, pos)
        summary = scan(chunk, 0, check_crc, True)
        if summary.count == 0:
            prefix = read_prefix(chunk)
            if prefix is None:
                return
            length = prefix[1]
            if length >= MIN_BATCH_LENGTH and pos + LOG_OVERHEAD + length > end:
                return  # torn tail
            if length >= MIN_BATCH_LENGTH and LOG_OVERHEAD + length > len(chunk):
                chunk_size = LOG_OVERHEAD + length  # one batch larger than the chunk
                continue
            raise CorruptRecordError(
                f"corrupt batch at position {pos}: {summary.error}", pos
            )
        yield pos, chunk, summary
        pos += summary.valid_bytes  # a batch cut by the chunk is read again whole


def iter_file_batches(
    fd: int, start: int, end: int, chunk_size: int = _READ_CHUNK, check_crc: bool = False
) -> Iterator[tuple[int, memoryview]]:
    """(position, batch bytes) for each whole batch in [start, end) of a segment file, with
    ``iter_file_chunks``' rules."""
    for pos, chunk, summary in iter_file_chunks(fd, start, end, chunk_size, check_crc):
        view = memoryview(chunk)
        for p, size in zip(summary.positions, summary.sizes):
            yield pos + p, view[p:p + size]


class PartitionReader:
    """A read-only view of one partition directory, frozen at open time."""

    def __init__(self, partition_dir: str):
        self.dir = partition_dir
        parsed = parse_partition_dir(os.path.basename(os.path.normpath(partition_dir)))
        self.topic: str | None
        self.partition: int | None
        self.topic, self.partition = parsed if parsed else (None, None)
        # A live broker's retention may delete a segment between the listing and its size:
        # the oldest segments go, so whatever survives is still a contiguous tail.
        self.base_offsets, self.sizes = [], []
        for base in segment_base_offsets(partition_dir):
            try:
                size = os.path.getsize(os.path.join(partition_dir, file_name(base, LOG_SUFFIX)))
            except FileNotFoundError:
                continue
            self.base_offsets.append(base)
            self.sizes.append(size)

    def segment_path(self, base_offset: int, suffix: str = LOG_SUFFIX) -> str:
        return os.path.join(self.dir, file_name(base_offset, suffix))

    def _read_index(self, segment: int, suffix: str, read, default):
        try:
            fd = os.open(self.segment_path(self.base_offsets[segment], suffix), os.O_RDONLY)
        except FileNotFoundError:
            return default
        try:
            return read(fd, self.base_offsets[segment])
        finally:
            os.close(fd)

    def index_entries(self, segment: int) -> list[tuple[int, int]]:
        """(last offset, position) entries of a segment's offset index within the size
        snapshot (none if the index is missing)."""
        entries = self._read_index(segment, INDEX_SUFFIX, index_entries_pread, [])
        size = self.sizes[segment]
        return [e for e in entries if e[1] < size]

    def max_timestamp(self, segment: int) -> int | None:
        """A sealed segment's largest timestamp (the final time index entry written when it
        rolled); None for the last segment, which may still be active, or when unknown."""
        if segment >= len(self.base_offsets) - 1:
            return None
        timestamp, _ = self._read_index(segment, TIME_INDEX_SUFFIX, time_index_last_entry_pread,
                                        (-1, 0))
        return timestamp if timestamp >= 0 else None

    def log_end_offset(self) -> int | None:
        """The offset after the last whole batch within the size snapshot; the last
        segment's base offset if it is empty; None if there is no segment."""
        if not self.base_offsets:
            return None
        last = len(self.base_offsets) - 1
        entries = self.index_entries(last)
        position = entries[-1][1] if entries else 0
        next_offset = self.base_offsets[last]
        fd = os.open(self.segment_path(self.base_offsets[last]), os.O_RDONLY)
        try:
            for _, data in iter_file_batches(fd, position, self.sizes[last]):
                next_offset = read_header(data).next_offset
        finally:
            os.close(fd)
        return next_offset

    def offset_for_timestamp(self, timestamp: int, start_offset: int = 0) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record at or after ``start_offset`` whose
        timestamp >= ``timestamp`` (Kafka's ListOffsets by timestamp), or None if no record
        has one. Sealed segments whose largest timestamp is older are skipped; in the first
        candidate segment the time index gives where to start scanning batch headers, and
        only the batch that holds the answer is decoded."""
        for i in range(self.segment_for(start_offset), len(self.base_offsets)):
            largest = self.max_timestamp(i)
            if largest is not None and largest < timestamp:
                continue
            _, indexed = self._read_index(
                i, TIME_INDEX_SUFFIX,
                lambda fd, base: time_index_lookup_pread(fd, base, timestamp), (-1, 0),
            )
            found = self._search_timestamp(i, timestamp, max(indexed, start_offset, self.base_offsets[i]),
                                           start_offset)
            if found is not None:
                return found
        return None

    def _search_timestamp(self, segment: int, timestamp: int, from_offset: int,
                          start_offset: int) -> tuple[int, int] | None:
        base = self.base_offsets[segment]
        position = self.start_position(segment, from_offset)
        fd = os.open(self.segment_path(base), os.O_RDONLY)
        try:
            for _, data in iter_file_batches(fd, position, self.sizes[segment]):
                header = read_header(data)
                if header.max_timestamp < timestamp or header.last_offset < start_offset:
                    continue
                for record in decode_records(data, 0, False):
                    if record.offset >= start_offset and record.timestamp >= timestamp:
                        return record.offset, record.timestamp
        except CorruptRecordError as e:
            raise CorruptRecordError(f"{self.segment_path(base)} position {e.position}: {e}",
                                     e.position) from None
        finally:
            os.close(fd)
        return None

    def segment_for(self, offset: int) -> int:
        """Index into base_offsets of the segment that would hold ``offset``."""
        return max(0, bisect_right(self.base_offsets, offset) - 1)

    def start_position(self, segment: int, offset: int) -> int:
        """A byte position in the segment at or before the batch holding ``offset``."""
        base = self.base_offsets[segment]
        if offset <= base:
            return 0
        try:
            fd = os.open(self.segment_path(base, INDEX_SUFFIX), os.O_RDONLY)
        except FileNotFoundError:
            return 0
        try:
            return min(index_lookup_pread(fd, base, offset), self.sizes[segment])
        finally:
            os.close(fd)

    def batches(
        self, start_offset: int = 0, end_offset: int | None = None, check_crc: bool = True
    ) -> Iterator[tuple[BatchHeader, memoryview]]:
        """Each batch holding an offset in [start_offset, end_offset), in offset order."""
        if not self.base_offsets:
            return
        first = self.segment_for(start_offset)
        for i in range(first, len(self.base_offsets)):
            base = self.base_offsets[i]
            if end_offset is not None and base >= end_offset:
                return
            position = self.start_position(i, start_offset) if i == first else 0
            fd = os.open(self.segment_path(base), os.O_RDONLY)
            try:
                for pos, data in iter_file_batches(fd, position, self.sizes[i], check_crc=check_crc):
                    try:
                        header = read_header(data)
                    except CorruptRecordError as e:
                        raise CorruptRecordError(
                            f"{self.segment_path(base)} position {pos}: {e}", pos
                        ) from None
                    if header.last_offset < start_offset:
                        continue
                    if end_offset is not None and header.base_offset >= end_offset:
                        return
                    yield header, data
            except CorruptRecordError as e:
                if str(e).startswith(self.dir):
                    raise
                raise CorruptRecordError(
                    f"{self.segment_path(base)} position {e.position}: {e}", e.position
                ) from None
            finally:
                os.close(fd)

