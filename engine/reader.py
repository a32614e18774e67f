"""Read-only access to a partition directory: the seam the Spark reader uses.

Nothing here writes, locks or keeps writer state, so a process may read a live broker's
directory: segment sizes are snapshotted when a reader opens, a torn tail batch is simply
not returned, and offset indexes are opened read-only.

File names (Apache Kafka's): ``<topic>-<partition>/`` holding ``<20-digit base offset>.log``
with ``.index`` and ``.timeindex`` beside each segment.
"""
from __future__ import annotations

import os
import re
import struct
from bisect import bisect_left, bisect_right
from collections.abc import Iterator
from dataclasses import dataclass

from ext.batch import LOG_OVERHEAD, BatchHeader, read_header, scan
from ext.errors import CorruptRecordError

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
DELETED_SUFFIX = ".deleted"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"

_PARTITION_DIR = re.compile(r"^(?P<topic>[a-zA-Z0-9._-]+)-(?P<partition>\d+)$")
_HEADER_PREFIX = struct.Struct(">qi")  # baseOffset, batchLength
_LAST_OFFSET_DELTA = struct.Struct(">i")  # at byte 23 of a batch
_LAST_OFFSET_DELTA_POS = 23
_INDEX_ENTRY = struct.Struct(">ii")  # relative offset, position
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


@dataclass(frozen=True)
class BatchPosition:
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
                return BatchPosition(
                    pos + summary.positions[i],
                    summary.last_offsets[i] - _last_offset_delta_in(chunk, summary.positions[i]),
                    summary.last_offsets[i],
                    summary.sizes[i],
                )
            pos += summary.valid_bytes
            continue
        # No whole batch in the chunk: either one big batch or a bad/torn tail.
        if len(chunk) < _LAST_OFFSET_DELTA_POS + 4:
            return None
        base_offset, length = _HEADER_PREFIX.unpack_from(chunk, 0)
        size = length + LOG_OVERHEAD
        if length < 49 or pos + size > end:
            return None
        last_offset = base_offset + _LAST_OFFSET_DELTA.unpack_from(chunk, _LAST_OFFSET_DELTA_POS)[0]
        if last_offset >= target_offset:
            return BatchPosition(pos, base_offset, last_offset, size)
        pos += size
    return None


def index_lookup_pread(fd: int, base_offset: int, target_offset: int) -> int:
    """Position of the floor entry for ``target_offset`` in an offset index file, read
    with pread rather than mmap: a writer may trim the file under a reader, and a mapped
    page past the new end would kill the reader with SIGBUS. Untrusted input: any
    inconsistency answers 0 (scan the segment from its start)."""
    slots = os.fstat(fd).st_size // 8

    def entry(n: int) -> tuple[int, int]:
        raw = os.pread(fd, 8, n * 8)
        return _INDEX_ENTRY.unpack(raw) if len(raw) == 8 else (0, 0)

    # Entries have positions > 0 (the first batch is never indexed); a zero-filled
    # preallocated tail ends them.
    lo, hi = 0, slots
    while lo < hi:
        mid = (lo + hi) // 2
        if entry(mid)[1] > 0:
            lo = mid + 1
        else:
            hi = mid
    lo, hi, found = 0, lo, 0
    while lo < hi:
        mid = (lo + hi) // 2
        relative, position = entry(mid)
        if base_offset + relative <= target_offset:
            found = position
            lo = mid + 1
        else:
            hi = mid
    return max(found, 0)


def _last_offset_delta_in(buf: bytes, position: int) -> int:
    return _LAST_OFFSET_DELTA.unpack_from(buf, position + _LAST_OFFSET_DELTA_POS)[0]


def iter_file_batches(
    fd: int, start: int, end: int, chunk_size: int = _READ_CHUNK, check_crc: bool = False
) -> Iterator[tuple[int, memoryview]]:
    """(position, batch bytes) for each whole batch in [start, end) of a segment file.

    Raises CorruptRecordError (with the file position) for a bad batch; a batch cut off
    by ``end`` (a torn tail, or a writer mid-append) ends the iteration quietly."""
    pos = start
    while pos + LOG_OVERHEAD <= end:
        want = min(chunk_size, end - pos)
        chunk = os.pread(fd, want, pos)
        summary = scan(chunk, 0, check_crc, True)
        if summary.count == 0:
            if len(chunk) < LOG_OVERHEAD:
                return
            length = _HEADER_PREFIX.unpack_from(chunk, 0)[1]
            if length >= 49 and pos + LOG_OVERHEAD + length > end:
                return  # torn tail
            if length >= 49 and LOG_OVERHEAD + length > len(chunk):
                chunk_size = LOG_OVERHEAD + length  # one batch larger than the chunk
                continue
            raise CorruptRecordError(
                f"corrupt batch at position {pos}: {summary.error}", pos
            )
        view = memoryview(chunk)
        for p, size in zip(summary.positions, summary.sizes):
            yield pos + p, view[p:p + size]
        pos += summary.valid_bytes  # a batch cut by the chunk is read again whole


class PartitionReader:
    """A read-only view of one partition directory, frozen at open time."""

    def __init__(self, partition_dir: str):
        self.dir = partition_dir
        parsed = parse_partition_dir(os.path.basename(os.path.normpath(partition_dir)))
        self.topic, self.partition = parsed if parsed else (None, None)
        self.base_offsets = segment_base_offsets(partition_dir)
        self.sizes = [
            os.path.getsize(os.path.join(partition_dir, file_name(b, LOG_SUFFIX)))
            for b in self.base_offsets
        ]

    def segment_path(self, base_offset: int, suffix: str = LOG_SUFFIX) -> str:
        return os.path.join(self.dir, file_name(base_offset, suffix))

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
