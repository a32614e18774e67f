"""LogSegment: one ``.log`` file of concatenated v2 batches with its ``.index``,
``.timeindex`` and ``.txnindex`` (engine/txn_index.py: created by its first aborted
transaction, as Kafka's; renamed, truncated, flushed, closed and deleted with the segment).

Theory of operation. A segment holds offsets [base_offset, next segment's base_offset).
Appends go to the end of the file in one write; every batch that starts more than
``index_interval_bytes`` after the last indexed one gets an offset index entry
(its last offset -> its position) and a time index entry (the largest timestamp so far ->
the last offset of the batch that holds it). A read finds the floor index entry and scans
batch headers forward from there. When the segment stops being active, the time index gets a
final entry for its largest timestamp and both indexes are trimmed to their entries.

Invariants: ``size`` is the file length; every byte below it is a whole batch (recovery
restores this after a crash); offsets strictly increase; ``max_timestamp_so_far`` and
``offset_of_max_timestamp_so_far`` describe the batches in the file.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass

from engine.errors import CorruptRecordError, InvalidIndexError
from engine.reader import (
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    BatchPosition,
    file_name,
    iter_file_batches,
    search_for_offset,
    whole_batches_size,
)
from engine.txn_index import TransactionIndex
from ext import segment as native
from ext.batch import BATCH_OVERHEAD, BatchSummary, decode_records, peek_header, read_header
from ext.epoch import LeaderEpochCache
from ext.index import OffsetIndex, TimeIndex

INT_MAX = 2**31 - 1
RECENT_STARTS = 64  # appends whose start a segment remembers (LogSegment._starts)


@dataclass(frozen=True)
class FileSlice:
    """Bytes [position, position + size) of a segment file: what a fetch sends with
    sendfile. ``fd`` stays valid while the segment is open (deleted segments keep their
    fd until file.delete.delay.ms has passed)."""

    fd: int
    position: int
    size: int

    def read(self) -> bytes:
        return os.pread(self.fd, self.size, self.position)


class LogSegment:
    def __init__(
        self,
        directory: str,
        base_offset: int,
        index_interval_bytes: int = 4096,
        max_index_size: int = 10485760,
        create: bool = False,
        created_ms: int | None = None,
    ):
        self.dir = directory
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.max_index_size = max_index_size
        self.log_path = os.path.join(directory, file_name(base_offset, LOG_SUFFIX))
        flags = os.O_RDWR | os.O_APPEND | (os.O_CREAT | os.O_EXCL if create else 0)
        self.fd = os.open(self.log_path, flags, 0o644)
        self.size = os.fstat(self.fd).st_size
        self.offset_index = OffsetIndex(
            os.path.join(directory, file_name(base_offset, INDEX_SUFFIX)), base_offset, max_index_size
        )
        self.time_index = TimeIndex(
            os.path.join(directory, file_name(base_offset, TIME_INDEX_SUFFIX)), base_offset, max_index_size
        )
        self.txn_index = TransactionIndex.for_segment(directory, base_offset)
        # Set when the .txnindex was reset (recovery, corruption): the log rebuilds it by
        # replaying producer state over this segment.
        self.txn_index_rebuild = False
        try:
            self.txn_index.sanity_check()
        except InvalidIndexError:
            self.txn_index.reset()
            self.txn_index_rebuild = True
        self.bytes_since_last_index_entry = 0
        ts, offset = self.time_index.last_entry
        self.max_timestamp_so_far = ts
        self.offset_of_max_timestamp_so_far = offset if ts >= 0 else -1
        # segment.ms counts from the first batch's max timestamp (read lazily from the file
        # for a reopened segment), or from when this object was created for a segment
        # without timestamps.
        self.rolling_based_timestamp: int | None = None
        self.created_ms = int(time.time() * 1000) if created_ms is None else created_ms
        self.closed = False
        # Where the last RECENT_STARTS appends began, by offset: a follower or a consumer at the
        # log end fetches from exactly there, and is found without an index lookup and a scan.
        self._starts: dict[int, BatchPosition] = {}

    # ---- appends -------------------------------------------------------------------------

    def append(self, buf: bytes | bytearray | memoryview, summary: BatchSummary) -> int:
        """Write ``buf`` (already validated, offsets final) and index its batches.
        Returns the position it was written at."""
        if summary.count == 0:
            return self.size
        if summary.last_offset - self.base_offset > INT_MAX or summary.first_offset < self.base_offset:
            raise InvalidIndexError(
                f"offsets {summary.first_offset}..{summary.last_offset} do not fit segment "
                f"{self.base_offset}"
            )
        start = self.size
        before = (self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far,
                  self.bytes_since_last_index_entry)
        try:
            native.append(self.fd, buf)
            self._index_batches(start, summary)
        except OSError:
            self._undo_append(start, summary.first_offset, before)
            raise
        if start == 0:
            self.rolling_based_timestamp = summary.max_timestamps[0]
        self.size = start + summary.valid_bytes
        starts = self._starts
        if len(starts) >= RECENT_STARTS:
            del starts[next(iter(starts))]
        first = summary.base_offsets[0]
        starts[first] = BatchPosition(start, first, summary.last_offsets[0], summary.sizes[0])
        return start

    def _undo_append(self, start: int, first_offset: int, before: tuple[int, int, int]) -> None:
        """A failed append (ENOSPC, EIO) leaves the segment as it was: the bytes written
        (a short write leaves some) are cut off and the index entries it added dropped. If
        even the ftruncate fails the tail stays; the log dir is offline by then and recovery
        truncates the torn batch at the next start."""
        self.offset_index.truncate_to(first_offset)
        self.time_index.truncate_to(first_offset)
        (self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far,
         self.bytes_since_last_index_entry) = before
        try:
            os.ftruncate(self.fd, start)
        except OSError:
            pass

    def _index_batches(self, start: int, summary: BatchSummary) -> None:
        for pos, size, last_offset, max_ts in zip(
            summary.positions, summary.sizes, summary.last_offsets, summary.max_timestamps
        ):
            self._index_batch(start + pos, size, last_offset, max_ts)

    def _index_batch(self, position: int, size: int, last_offset: int, max_timestamp: int) -> None:
        if max_timestamp > self.max_timestamp_so_far:
            self.max_timestamp_so_far = max_timestamp
            self.offset_of_max_timestamp_so_far = last_offset
        if self.bytes_since_last_index_entry > self.index_interval_bytes:
            self.offset_index.append(last_offset, position)
            self.time_index.maybe_append(self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far)
            self.bytes_since_last_index_entry = 0
        self.bytes_since_last_index_entry += size

    def should_roll(self, batch_bytes: int, max_timestamp: int, last_offset: int,
                    segment_bytes: int, roll_ms: int, now_ms: int) -> bool:
        """Kafka's roll rule: no room for the append, segment.ms reached (measured from the
        first batch's timestamp), a full index, or an offset too far for a relative index."""
        if self.size == 0:
            return False  # an empty active segment takes any append (indexes are empty too)
        return (
            self.size > segment_bytes - batch_bytes
            or self.time_waited_for_roll(now_ms, max_timestamp) > roll_ms
            or self.offset_index.is_full
            or self.time_index.is_full
            or last_offset - self.base_offset > INT_MAX
        )

    def time_waited_for_roll(self, now_ms: int, message_timestamp: int) -> int:
        if self.rolling_based_timestamp is None and self.size > 0:
            first = search_for_offset(self.fd, self.base_offset, 0, self.size)
            self.rolling_based_timestamp = -1 if first is None else read_header(
                os.pread(self.fd, first.size, first.position)).max_timestamp
        if self.rolling_based_timestamp is not None and self.rolling_based_timestamp >= 0:
            return message_timestamp - self.rolling_based_timestamp
        return now_ms - self.created_ms

    # ---- reads ---------------------------------------------------------------------------

    def translate_offset(self, offset: int, starting_position: int = 0) -> BatchPosition | None:
        """The first batch whose last offset >= ``offset``, searching from the floor index entry."""
        position = max(self.offset_index.lookup(offset)[1], starting_position)
        return search_for_offset(self.fd, offset, position, self.size)

    def read(self, start_offset: int, max_size: int, max_position: int | None = None,
             min_one_message: bool = False) -> tuple[BatchPosition, FileSlice] | None:
        """Whole batches from the one holding ``start_offset``, at most ``max_size`` bytes
        (at least the first batch with min_one_message), none at or past ``max_position``."""
        limit = self.size if max_position is None else min(max_position, self.size)
        first = self._starts.get(start_offset) or self.translate_offset(start_offset)
        if first is None or first.position >= limit:
            return None
        available = limit - first.position
        if max_size <= 0 and not min_one_message:
            return first, FileSlice(self.fd, first.position, 0)
        size = min(available, max_size)
        if min_one_message and first.size > size:
            size = min(first.size, available)
        elif size < available:
            size = whole_batches_size(self.fd, first.position, size)
            if size == 0 and min_one_message:
                size = first.size
        return first, FileSlice(self.fd, first.position, size)

    def find_offset_by_timestamp(self, timestamp: int, starting_offset: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record at or after ``starting_offset`` whose
        timestamp >= ``timestamp``, or None if this segment holds none."""
        _, indexed_offset = self.time_index.lookup(timestamp)
        position = self.offset_index.lookup(max(indexed_offset, starting_offset))[1]
        for _, data in iter_file_batches(self.fd, position, self.size):
            header = read_header(data)
            if header.max_timestamp < timestamp or header.last_offset < starting_offset:
                continue
            for record in decode_records(data, 0, False):
                if record.offset >= starting_offset and record.timestamp >= timestamp:
                    return record.offset, record.timestamp
        return None

    def find_max_timestamp_record(self) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record holding this segment's largest timestamp
        (ListOffsets MAX_TIMESTAMP, Kafka 3.8+): the time index names the first batch that
        reached it (by its last offset), the offset index where to start looking for that
        batch, and the batch's records (decompressed if need be) which of them holds it. A
        LogAppendTime batch gives each record its own time: the first record. None when the
        segment holds no batch of that timestamp."""
        ts, offset = self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far
        position = self.offset_index.lookup(offset)[1] if offset >= self.base_offset else 0
        for _, data in iter_file_batches(self.fd, position, self.size):
            if read_header(data).max_timestamp != ts:
                continue
            for record in decode_records(data, 0, False):
                if record.timestamp == ts:
                    return record.offset, ts
            return None
        return None

    def batch_at(self, position: int) -> int | None:
        """The base offset of the batch at file ``position``, None when none starts there."""
        try:
            return peek_header(os.pread(self.fd, BATCH_OVERHEAD, position)).base_offset
        except CorruptRecordError:
            return None

    def read_next_offset(self) -> int:
        """The offset after the last batch (base_offset for an empty segment)."""
        position = self.offset_index.lookup(2**63 - 1)[1] if self.offset_index.entries else 0
        next_offset = self.base_offset
        for _, data in iter_file_batches(self.fd, position, self.size):
            next_offset = read_header(data).next_offset
        return next_offset

    def largest_timestamp(self) -> int:
        """The largest record timestamp, or the file's mtime for a segment without one
        (what time-based retention compares against)."""
        if self.max_timestamp_so_far > 0:
            return self.max_timestamp_so_far
        return int(os.fstat(self.fd).st_mtime * 1000)

    # ---- recovery and truncation ---------------------------------------------------------

    def recover(self, epoch_cache: LeaderEpochCache | None = None, *, contiguous: bool = False,
                checkpointed_epochs: bool = False) -> int:
        """Rebuild both indexes from the file, validating every batch (structure, magic,
        CRC32C, increasing offsets that fit the relative index) and truncating at the first
        bad or torn one. Returns the number of bytes truncated.

        The CRC does not cover baseOffset and partitionLeaderEpoch, so two more rules catch
        a flipped bit there. ``contiguous`` (a log nobody compacts): each batch starts right
        after the previous one, the first at the segment's base offset. ``checkpointed_epochs``
        (``epoch_cache`` was loaded from its checkpoint, which every append writes before its
        batches, fsynced): each batch carries the epoch the cache gives its offset. Otherwise
        epochs above the cache's latest are taken from the batches, as Kafka does."""
        self._starts.clear()
        self.offset_index.truncate()
        self.time_index.truncate()
        self.txn_index.reset()
        self.txn_index_rebuild = True  # the log's producer-state replay refills it
        self.resize_indexes(self.max_index_size)
        self.max_timestamp_so_far = -1
        self.offset_of_max_timestamp_so_far = -1
        self.bytes_since_last_index_entry = 0
        valid = 0
        previous = self.base_offset - 1
        try:
            for position, data in iter_file_batches(self.fd, 0, self.size, check_crc=True):
                header = read_header(data)
                if header.base_offset <= previous or header.last_offset - self.base_offset > INT_MAX:
                    break
                if contiguous and header.base_offset != previous + 1:
                    break
                epoch = header.partition_leader_epoch
                if checkpointed_epochs and epoch_cache is not None and epoch >= 0:
                    # By its last offset: the cache's first entry may start inside the batch
                    # the log start offset cuts; batches wholly below it have no entry left.
                    expected = epoch_cache.epoch_for_offset(header.last_offset)
                    if expected >= 0 and epoch != expected:
                        break
                self._index_batch(position, header.size, header.last_offset, header.max_timestamp)
                if epoch_cache is not None and epoch > epoch_cache.latest_epoch:
                    epoch_cache.assign(epoch, header.base_offset, flush=False)
                if position == 0:
                    self.rolling_based_timestamp = header.max_timestamp
                previous = header.last_offset
                valid = position + header.size
        except CorruptRecordError:
            pass
        truncated = self.size - valid
        if truncated:
            os.ftruncate(self.fd, valid)
            self.size = valid
        self.offset_index.trim_to_valid_size()
        self.time_index.maybe_append(self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far, True)
        self.time_index.trim_to_valid_size()
        return truncated

    def truncate_to(self, offset: int) -> int:
        """Remove every batch holding an offset >= ``offset``. Returns bytes removed.
        A batch straddling ``offset`` goes whole, as in Kafka."""
        found = self.translate_offset(offset)
        if found is None:
            return 0
        self._starts.clear()
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.txn_index.truncate_to(offset)
        removed = self.size - found.position
        os.ftruncate(self.fd, found.position)
        self.size = found.position
        if self.size == 0:
            self.rolling_based_timestamp = None
        self._reload_max_timestamp()
        self.bytes_since_last_index_entry = 0
        return removed

    def _reload_max_timestamp(self) -> None:
        ts, offset = self.time_index.last_entry
        self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far = (ts, offset) if ts >= 0 else (-1, -1)
        position = self.offset_index.lookup(offset)[1] if ts >= 0 else 0
        for _, data in iter_file_batches(self.fd, position, self.size):
            header = read_header(data)
            if header.max_timestamp > self.max_timestamp_so_far:
                self.max_timestamp_so_far = header.max_timestamp
                self.offset_of_max_timestamp_so_far = header.last_offset

    # ---- lifecycle -----------------------------------------------------------------------

    def on_become_inactive(self) -> None:
        """Roll: the time index records the segment's largest timestamp; indexes are trimmed."""
        self.time_index.maybe_append(self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far, True)
        self.offset_index.trim_to_valid_size()
        self.time_index.trim_to_valid_size()

    def resize_indexes(self, max_index_size: int) -> None:
        self.offset_index.resize(max_index_size)
        self.time_index.resize(max_index_size)

    def flush(self) -> None:
        os.fsync(self.fd)
        self.offset_index.flush()
        self.time_index.flush()
        self.txn_index.flush()

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        if self.max_timestamp_so_far >= 0:
            self.time_index.maybe_append(self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far, True)
        self.offset_index.close()
        self.time_index.close()
        self.txn_index.close()
        os.close(self.fd)

    def close_handlers(self) -> None:
        """Close the files without writing to them (a failed log dir; Kafka's closeHandlers):
        the indexes keep their preallocated size, which recovery expects after a crash."""
        if self.closed:
            return
        self.closed = True
        for close in (self.offset_index.close_handler, self.time_index.close_handler,
                      self.txn_index.close, lambda: os.close(self.fd)):
            try:
                close()
            except OSError:
                pass

    def mark_deleted(self) -> None:
        """Rename every file to ``*.deleted``; the fd stays open for in-flight reads until
        ``close_and_delete`` runs after file.delete.delay.ms."""
        for index in (self.offset_index, self.time_index):
            index.rename(index.path + DELETED_SUFFIX)
        self.txn_index.rename(self.txn_index.path + DELETED_SUFFIX)
        os.rename(self.log_path, self.log_path + DELETED_SUFFIX)
        self.log_path += DELETED_SUFFIX

    def close_and_delete(self) -> None:
        paths = [self.log_path, self.offset_index.path, self.time_index.path, self.txn_index.path]
        if not self.closed:
            self.closed = True
            self.offset_index.close()
            self.time_index.close()
            self.txn_index.close()
            os.close(self.fd)
        for path in paths:
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass

    def __repr__(self) -> str:
        return f"LogSegment({self.log_path}, size={self.size})"


__all__ = ["LogSegment", "FileSlice", "CorruptRecordError"]
