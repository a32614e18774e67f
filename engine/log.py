"""Log: one partition directory of segments.

Theory of operation. Offsets [log_start_offset, log_end_offset) are readable. A leader
append validates the producer's batches in C, assigns offsets by patching each batch's
baseOffset in place and writes them to the active segment in one write (a batch whose codec
is not the one compression.type names is first rebuilt in it, at compression.<codec>.level);
a follower append takes the leader's batches as they are. The active segment rolls on
segment.bytes, segment.ms, a full index, or an offset the relative index cannot hold.
Reads return file slices for sendfile, bounded by the log end offset, the high watermark or
(for read_committed) the last stable offset.

Transactions (KIP-98). Producer state (engine/producer_state.py) follows every transactional
batch and marker, on the leader and on followers alike, and keeps the open transactions. The
last stable offset is min(first unstable offset, high watermark), the first unstable offset
being the least first offset of a transaction still open or whose marker the high watermark
has not passed, never below the log start offset (Kafka's UnifiedLog). An ABORT marker that
completes a transaction appends an AbortedTxn to the ``.txnindex`` of the segment it lands
in; a read_committed read returns, with its records, the aborted transactions of the range
it returns (Kafka's collectAbortedTransactions up to the offset after the last batch read).
The index entry's last stable offset is computed batch by batch, so every replica, whatever
batches its appends grouped, writes the same bytes. A recovered segment's ``.txnindex`` is
rebuilt by replaying producer state from a snapshot at or below it (Kafka's recoverSegment).
Retention never deletes a segment past the last stable offset: Kafka's deletableSegments is
bounded by the high watermark only; bounding it by the first unstable offset too is Strom's
own rule, so an open transaction's data stays. DeleteRecords may move the log start offset
past the first unstable offset (up to the high watermark), as in Kafka; the LSO then follows.

Invariants:
    log_start_offset <= high_watermark <= log_end_offset
    recovery_point <= log_end_offset; everything below it has been fsynced
    segments are contiguous in offsets; the last one is the active segment
    the leader-epoch cache covers [log_start_offset, log_end_offset)

A roll leaves the segments before the new one to be flushed (``flush_wanted``), as Kafka's
roll schedules flushUptoOffsetExclusive on its scheduler thread: ``flush_plan`` opens what that
takes (fds of its own), a worker thread runs it (``FlushPlan.run``), and ``flushed`` moves the
recovery point, unless the log was truncated meanwhile. So after a crash recovery scans from
the last flushed roll on, not the whole log since the last clean shutdown.

Times are milliseconds passed in by the caller (``now_ms``); the log keeps no clock.
"""
from __future__ import annotations

import contextlib
import logging
import os
import shutil
import time
from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

from engine.config import LogConfig
from engine.control import read_end_txn_marker
from engine.errors import (
    DuplicateSequenceError,
    InvalidRecordError,
    InvalidTimestampError,
    OffsetOutOfRangeError,
    RecordTooLargeError,
    RecordValidationError,
    UnexpectedAppendOffsetError,
)
from engine.log_dir_failure import LogDirFailureChannel, log_dir_of, storage_operation
from engine.producer_state import (
    ATTR_CONTROL,
    ATTR_TRANSACTIONAL,
    SNAPSHOT_SUFFIX,
    CompletedTxn,
    CorruptSnapshotError,
    ProducerStateManager,
    VerificationGuard,
)
from engine.producer_state import last_sequence as _last_seq
from engine.reader import base_offset_of, file_name, iter_file_chunks, parse_partition_dir
from engine.recovery import load_log
from engine.segment import FileSlice, LogSegment
from engine.txn_index import AbortedTxn
from ext.batch import (
    COMPRESSION_GZIP,
    COMPRESSION_LZ4,
    COMPRESSION_NONE,
    COMPRESSION_SNAPPY,
    COMPRESSION_ZSTD,
    TIMESTAMP_LOG_APPEND_TIME,
    BatchSummary,
    assign_offsets,
    null_key_indexes,
    recompress,
    scan,
)
from ext.epoch import LeaderEpochCache

log = logging.getLogger("strom.log")

LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
PARTITION_METADATA = "partition.metadata"

# Who appends as leader (Kafka's AppendOrigin).
ORIGIN_CLIENT = "client"
ORIGIN_RAFT_LEADER = "raft_leader"
ORIGIN_COORDINATOR = "coordinator"

# compression.type -> the codec the leader stores (Kafka's BrokerCompressionType); "producer"
# is absent: the producer's codec stays.
TARGET_CODECS = {
    "uncompressed": COMPRESSION_NONE, "gzip": COMPRESSION_GZIP, "snappy": COMPRESSION_SNAPPY,
    "lz4": COMPRESSION_LZ4, "zstd": COMPRESSION_ZSTD,
}

COMPRESSION_CODEC_MASK = 0x07  # record batch attributes: the codec

# Fetch isolation: how far a read may go.
FETCH_LOG_END = "log_end"  # replicas
FETCH_HIGH_WATERMARK = "high_watermark"  # consumers, read_uncommitted
FETCH_TXN_COMMITTED = "txn_committed"  # consumers, read_committed


def _now_ms() -> int:
    return int(time.time() * 1000)


class LogAppendInfo(NamedTuple):
    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time: int  # -1 unless the topic uses LogAppendTime
    log_start_offset: int
    records_count: int
    valid_bytes: int


class FetchDataInfo(NamedTuple):
    """What a read found: the slice to send (None when there is nothing) and where it starts."""

    fetch_offset: int
    records: FileSlice | None
    first_batch_offset: int = -1
    aborted_transactions: list[AbortedTxn] | None = None  # read_committed reads only

    @property
    def size(self) -> int:
        return 0 if self.records is None else self.records.size


@dataclass(eq=False)
class FlushPlan:
    """Flushing a log up to ``upto`` (exclusive), opened on the log's thread for a worker
    thread: duplicates of the segment files' fds, the segments' index files, the producer
    snapshots the rolls wrote, and the partition directory (a segment was created in it since
    the last flush). Its own fds, so the log may close or delete those files while it runs."""

    upto: int
    generation: int  # the log's truncations when it was made: ``flushed`` drops a stale plan
    data_fds: list[int]
    index_fds: list[int]
    snapshot_fds: list[int]
    dir_fd: int | None
    elapsed_ms: float | None = None  # how long ``run`` took, once it has

    def fds(self) -> list[int]:
        directory = [] if self.dir_fd is None else [self.dir_fd]
        return self.data_fds + self.index_fds + self.snapshot_fds + directory

    def run(self) -> None:
        """fsync it all (in a worker thread); every fd is closed, whatever happens."""
        start = time.monotonic()
        try:
            for fd in self.data_fds:
                os.fsync(fd)
            for fd in self.index_fds + self.snapshot_fds:
                os.fdatasync(fd)
            if self.dir_fd is not None:
                os.fsync(self.dir_fd)
            self.elapsed_ms = (time.monotonic() - start) * 1000
        finally:
            self.close()

    def close(self) -> None:
        fds, self.data_fds, self.index_fds, self.snapshot_fds, self.dir_fd = self.fds(), [], [], [], None
        for fd in fds:
            os.close(fd)


class Log:
    def __init__(
        self,
        directory: str,
        config: LogConfig | None = None,
        *,
        log_start_offset: int = 0,
        recovery_point: int = 0,
        high_watermark: int | None = None,
        had_clean_shutdown: bool = True,
        topic_id: str | None = None,
        failure_channel: LogDirFailureChannel | None = None,
    ):
        self.dir = directory
        # Every storage operation below that runs while serving is a storage_operation: an
        # OSError takes the log dir offline through this channel (engine/log_dir_failure.py).
        self.parent_dir = log_dir_of(directory)
        self.failure_channel = failure_channel or LogDirFailureChannel()
        self.config = config or LogConfig()
        self.flush_wanted = 0  # a roll's: flush up to here, off the caller's thread (flush_plan)
        self.on_roll: Callable[[Log], None] | None = None  # told of every roll (LogManager)
        # told how long each flush took, in ms (LogManager: Kafka's LogFlushStats)
        self.on_flush: Callable[[float], None] | None = None
        self._truncations = 0  # a FlushPlan made before a truncation is void (flushed)
        parsed = parse_partition_dir(os.path.basename(os.path.normpath(directory)))
        self.topic, self.partition = parsed if parsed else ("", 0)
        self.topic_id = topic_id
        os.makedirs(directory, exist_ok=True)
        self.leader_epoch_cache = LeaderEpochCache(os.path.join(directory, LEADER_EPOCH_CHECKPOINT))
        checkpointed_epochs = self.leader_epoch_cache.entries()
        loaded = load_log(
            directory,
            index_interval_bytes=self.config.index_interval_bytes,
            max_index_size=self.config.segment_index_bytes,
            log_start_offset=log_start_offset,
            recovery_point=recovery_point,
            had_clean_shutdown=had_clean_shutdown,
            epoch_cache=self.leader_epoch_cache,
            contiguous=not self.config.compacts,
        )
        self.segments: list[LogSegment] = loaded.segments
        self._bases = [s.base_offset for s in self.segments]
        self.log_end_offset = loaded.log_end_offset
        self.recovery_point = loaded.recovery_point
        self.log_start_offset = loaded.log_start_offset
        self.truncated_on_load = loaded.truncated_bytes
        if self.log_start_offset > self.log_end_offset:
            self.truncate_fully_and_start_at(self.log_start_offset)
        hw = self.log_start_offset if high_watermark is None else high_watermark
        self.high_watermark = min(max(hw, self.log_start_offset), self.log_end_offset)
        self.producer_state = ProducerStateManager()
        self._load_producer_state()
        if self.leader_epoch_cache.entries() != checkpointed_epochs:
            self.leader_epoch_cache.flush()  # recovery assigned epochs without flushing
        self.unflushed_messages = 0
        self.last_flush_ms = _now_ms()
        self._pending_deletes: list[tuple[int, LogSegment]] = []
        self._bound_cache: tuple[tuple[int, int], int | None] | None = None

    # ---- state ---------------------------------------------------------------------------

    @property
    def active_segment(self) -> LogSegment:
        return self.segments[-1]

    @property
    def size_in_bytes(self) -> int:
        return sum(s.size for s in self.segments)

    @property
    def latest_epoch(self) -> int:
        return self.leader_epoch_cache.latest_epoch

    def __repr__(self) -> str:
        return (f"Log({self.dir}, start={self.log_start_offset}, hw={self.high_watermark}, "
                f"end={self.log_end_offset}, segments={len(self.segments)})")

    # ---- appends -------------------------------------------------------------------------

    @storage_operation("appending to")
    def append_as_leader(self, buf: bytearray | memoryview, leader_epoch: int,
                         now_ms: int | None = None, origin: str = ORIGIN_CLIENT,
                         transaction_version: int = 0,
                         verification_guard: VerificationGuard | None = None) -> LogAppendInfo:
        """Validate the batches, assign offsets from the log end offset, stamp the leader
        epoch, and append. ``buf`` must be writable: offsets are patched in place. Batches
        from clients are checked as Kafka's LogValidator does; the broker's own writers
        (a raft leader, a coordinator) may also write control batches. A topic whose
        compression.type names a codec stores its data batches in that codec, whoever
        wrote them (``_maybe_recompress``). A marker is checked against producer state at
        ``transaction_version`` (the coordinator's, from WriteTxnMarkers). With
        ``verification_guard`` (KIP-890's verification is on and the caller took it from
        ``producer_state.start_verification`` before asking the transaction coordinator), a
        transactional data batch of a producer whose transaction is not open here is refused
        with InvalidTxnStateError unless the guard is still the producer's: a marker landed
        meanwhile (Kafka's analyzeAndValidateProducerState)."""
        now_ms = _now_ms() if now_ms is None else now_ms
        append_time = now_ms if self.config.log_append_time else -1
        summary = assign_offsets(buf, self.log_end_offset, leader_epoch, append_time)
        self._check_batches(buf, summary, now_ms, from_client=origin == ORIGIN_CLIENT)
        if origin == ORIGIN_CLIENT:
            self._check_producers(summary, verification_guard)
        elif origin == ORIGIN_COORDINATOR:
            self._check_coordinator_writes(buf, summary, transaction_version, verification_guard)
        codec = TARGET_CODECS.get(self.config.compression_type)
        written: bytes | bytearray | memoryview = buf
        if codec is not None:
            written, summary = self._maybe_recompress(buf, summary, codec, now_ms)
        if leader_epoch >= 0:
            self.leader_epoch_cache.assign(leader_epoch, summary.first_offset)
        return self._append(written, summary, now_ms, append_time)

    @storage_operation("appending (as follower) to")
    def append_as_follower(self, buf: bytes | bytearray | memoryview,
                           now_ms: int | None = None) -> LogAppendInfo:
        """Append the leader's batches with their offsets and epochs as they are."""
        now_ms = _now_ms() if now_ms is None else now_ms
        summary = scan(buf, 0, True, False)
        if summary.count == 0:
            return self._empty_append_info()
        if summary.first_offset < self.log_end_offset:
            raise UnexpectedAppendOffsetError(
                f"{self.dir}: first offset {summary.first_offset} is below the log end offset "
                f"{self.log_end_offset}"
            )
        self._check_batches(buf, summary, now_ms, from_client=False)
        for epoch, first in zip(summary.partition_leader_epochs, summary.base_offsets):
            if epoch > self.leader_epoch_cache.latest_epoch:
                self.leader_epoch_cache.assign(epoch, first)
        return self._append(buf, summary, now_ms, -1)

    def _check_batches(self, buf, summary: BatchSummary, now_ms: int, from_client: bool) -> None:
        config = self.config
        if summary.count == 0 and from_client:
            raise InvalidRecordError("produce request holds no record batch")
        if summary.valid_bytes > config.segment_bytes:
            raise RecordTooLargeError(
                f"{summary.valid_bytes} bytes exceed segment.bytes {config.segment_bytes}"
            )
        for size in summary.sizes:
            if size > config.max_message_bytes:
                raise RecordTooLargeError(
                    f"a batch of {size} bytes exceeds max.message.bytes {config.max_message_bytes}"
                )
        if not from_client:
            return
        for attributes, records in zip(summary.attributes, summary.records_counts):
            if attributes & ATTR_CONTROL:
                raise InvalidRecordError("clients may not write control batches")
            if records == 0:
                raise InvalidRecordError("a batch with no records")
        if not config.log_append_time:
            before = config.message_timestamp_before_max_ms
            after = config.message_timestamp_after_max_ms
            # Every record's timestamp, as LogValidator checks them: the least and greatest.
            for min_ts, max_ts in zip(summary.min_timestamps, summary.max_timestamps):
                for ts in (min_ts, max_ts):
                    if ts >= 0 and (now_ms - ts > before or ts - now_ms > after):
                        raise InvalidTimestampError(
                            f"timestamp {ts} is outside message.timestamp.before.max.ms={before} / "
                            f"message.timestamp.after.max.ms={after} of now ({now_ms})"
                        )
        if "compact" in config.cleanup_policy:
            # LogValidator.validateKey: a compacted topic refuses a record without a key; the
            # batch's refused records are listed, each by its index within the batch.
            for position in summary.positions:
                indexes = null_key_indexes(buf, position)
                if indexes:
                    why = ("Compacted topic cannot accept message without key in topic partition "
                           f"{self.topic}-{self.partition}")
                    raise RecordValidationError([(index, why) for index in indexes])

    def _maybe_recompress(self, buf, summary: BatchSummary, codec: int,
                          now_ms: int) -> tuple[bytes | bytearray | memoryview, BatchSummary]:
        """Kafka's LogValidator with a target codec: each data batch in another codec is
        rebuilt in ``codec`` at the topic's level of it (compression.<codec>.level; offsets,
        epoch, timestamps and producer fields kept, fresh CRC); one already in it is stored
        as it came, whatever level its producer used, and so is every control batch (Kafka
        compresses control records only if they were written compressed, and the broker
        writes them uncompressed). Runs after every check of the batches as sent, so a refused or
        duplicate batch costs no compression; the rebuilt sizes are checked again against
        max.message.bytes and segment.bytes, as Kafka re-checks a recompressed batch."""
        if all(a & COMPRESSION_CODEC_MASK == codec or a & ATTR_CONTROL for a in summary.attributes):
            return buf, summary
        buf = recompress(buf, codec, self.config.compression_level)
        summary = scan(buf, 0, False)
        self._check_batches(buf, summary, now_ms, from_client=False)  # sizes only
        return buf, summary

    def _check_producers(self, summary: BatchSummary, guard: VerificationGuard | None = None) -> None:
        """Idempotence: a retried batch raises DuplicateSequenceError with its original
        offsets; a fenced epoch or a sequence gap raises before anything is written."""
        for pid, epoch, seq, base, last, attributes in zip(
            summary.producer_ids, summary.producer_epochs, summary.base_sequences,
            summary.base_offsets, summary.last_offsets, summary.attributes,
        ):
            if pid < 0 or attributes & ATTR_CONTROL:
                continue
            known = self.producer_state.producers.get(pid)
            duplicate = self.producer_state.check(pid, epoch, seq, _last_seq(seq, last - base),
                                                  attributes & ATTR_TRANSACTIONAL, guard=guard)
            if duplicate is not None:
                raise DuplicateSequenceError(duplicate.first_offset, duplicate.last_offset)
            if known is not None and epoch > known.epoch:
                log.info("%s: producer %d moves from epoch %d to %d at sequence %d", self.dir, pid,
                         known.epoch, epoch, seq)

    def _check_coordinator_writes(self, buf, summary: BatchSummary, transaction_version: int,
                                  guard: VerificationGuard | None = None) -> None:
        """A coordinator's batches (Kafka's AppendOrigin.COORDINATOR): a marker is checked as
        appendEndTxnMarker checks it, a data batch with a producer id by its epoch alone."""
        state = self.producer_state
        for pid, epoch, seq, base, last, attributes, position in zip(
            summary.producer_ids, summary.producer_epochs, summary.base_sequences,
            summary.base_offsets, summary.last_offsets, summary.attributes, summary.positions,
        ):
            if pid < 0:
                continue
            if attributes & ATTR_CONTROL:
                marker = read_end_txn_marker(buf, position)
                if marker is not None:
                    state.check_marker(pid, epoch, marker.marker.coordinator_epoch, transaction_version)
            else:
                state.check(pid, epoch, seq, _last_seq(seq, last - base),
                            transactional=attributes & ATTR_TRANSACTIONAL, coordinator=True, guard=guard)

    def _update_producers(self, buf, summary: BatchSummary, segment: LogSegment) -> None:
        """Every producer batch just written into the producer state (the rule is the
        manager's ``append_batch``, the one a replay uses); an aborted transaction its marker
        completed goes into ``segment``'s .txnindex."""
        append_batch = self.producer_state.append_batch
        for pid, epoch, seq, base, last, attributes, max_ts, position in zip(
            summary.producer_ids, summary.producer_epochs, summary.base_sequences,
            summary.base_offsets, summary.last_offsets, summary.attributes, summary.max_timestamps,
            summary.positions,
        ):
            if pid < 0:
                continue
            done = append_batch(buf, pid, epoch, seq, base, last, attributes, max_ts, position)
            if done is not None and done.is_aborted:
                self._index_aborted(segment, done)

    @staticmethod
    def _index_aborted(segment: LogSegment, txn: CompletedTxn) -> None:
        """An aborted transaction into the .txnindex of the segment holding its marker, unless
        already there (a replay over a segment whose index was kept)."""
        index = segment.txn_index
        if index.last_offset is None or txn.last_offset > index.last_offset:
            index.append(AbortedTxn(txn.producer_id, txn.first_offset, txn.last_offset,
                                    txn.last_stable_offset))

    def _load_producer_state(self) -> None:
        """Producer state from the newest snapshot at or below the log end offset (and above
        the log start), then the batches after it; from every batch when there is none.
        Snapshots outside that range, and corrupt ones, are deleted (Kafka's loadProducerState
        and truncateAndReload). When recovery reset the .txnindex of some segments, the
        snapshot is one at or below the first of them, so the replay rebuilds their indexes
        (Kafka's recoverSegment); the later snapshots are only checked."""
        rebuild = [s.base_offset for s in self.segments if s.txn_index_rebuild]
        at_most = rebuild[0] if rebuild else self.log_end_offset
        for segment in self.segments:
            segment.txn_index_rebuild = False
        state = self.producer_state
        for offset in reversed(self._snapshot_offsets()):
            path = self._snapshot_path(offset)
            if offset > self.log_end_offset or offset <= self.log_start_offset:
                _unlink(path)
                continue
            try:
                with open(path, "rb") as f:
                    data = f.read()
                if offset > at_most:
                    ProducerStateManager().load_snapshot(data)
                    continue
                starts = self._positions_from(offset)
                state.load_snapshot(data)
            except CorruptSnapshotError as e:
                log.warning("%s: producer snapshot not used, deleting it: %s", path, e)
                _unlink(path)
                continue
            self._replay(starts)
            break
        else:
            self._rebuild_producer_state()
        # Forget the completed transactions the high watermark already passed (a replay of a
        # long history completes many).
        self.producer_state.first_unstable_offset(self.high_watermark)

    def _rebuild_producer_state(self) -> None:
        """Replay the producer batches of the whole log from its batch headers, scanned in C a
        chunk at a time."""
        self.producer_state.truncate()
        self._replay([(segment, 0) for segment in self.segments])

    def _replay(self, starts: list[tuple[LogSegment, int]]) -> None:
        """Producer state through the batches from ``starts`` on; each aborted transaction met
        goes into its segment's .txnindex unless there already."""
        for segment, position in starts:
            chunks = iter_file_chunks(segment.fd, position, segment.size)
            for txn in self.producer_state.replay((chunk, summary) for _, chunk, summary in chunks):
                if txn.is_aborted:
                    self._index_aborted(segment, txn)

    def _positions_from(self, offset: int) -> list[tuple[LogSegment, int]]:
        """(segment, file position) of where the batches from ``offset`` on begin, per segment;
        CorruptSnapshotError when ``offset`` falls inside a batch (no snapshot is taken there)."""
        starts = []
        for i, segment in enumerate(self.segments):
            end = self.segments[i + 1].base_offset if i + 1 < len(self.segments) else self.log_end_offset
            if end <= offset:
                continue
            if segment.base_offset >= offset:
                starts.append((segment, 0))
                continue
            found = segment.translate_offset(offset)
            if found is None or found.base_offset != offset:
                raise CorruptSnapshotError(f"offset {offset} is not where a batch of the log begins")
            starts.append((segment, found.position))
        return starts

    def _snapshot_offsets(self) -> list[int]:
        width = 20 + len(SNAPSHOT_SUFFIX)
        return sorted(base_offset_of(name) for name in os.listdir(self.dir)
                      if name.endswith(SNAPSHOT_SUFFIX) and len(name) == width and name[:20].isdigit())

    def _snapshot_path(self, offset: int) -> str:
        return os.path.join(self.dir, file_name(offset, SNAPSHOT_SUFFIX))

    def _take_snapshot(self, sync: bool) -> None:
        """Write the producer state at the log end offset (Kafka's takeSnapshot): through a
        .tmp file and a rename, fsynced when ``sync``."""
        if self.log_end_offset <= self.log_start_offset:
            return  # nothing below it: the state there is the empty one
        path = self._snapshot_path(self.log_end_offset)
        with open(path + ".tmp", "wb") as f:
            f.write(self.producer_state.snapshot())
            if sync:
                f.flush()
                os.fsync(f.fileno())
        os.replace(path + ".tmp", path)

    def _drop_snapshots(self, keep: Callable[[int], bool]) -> None:
        for offset in self._snapshot_offsets():
            if not keep(offset):
                _unlink(self._snapshot_path(offset))

    def remove_expired_producers(self, now_ms: int, expiration_ms: int) -> int:
        """Forget the producers idle for ``expiration_ms`` (producer.id.expiration.ms), as
        leader or follower alike: the rule is engine/producer_state.py's. How many went."""
        return len(self.producer_state.remove_expired_producers(now_ms, expiration_ms))

    def _append(self, buf, summary: BatchSummary, now_ms: int, append_time: int) -> LogAppendInfo:
        segment = self._maybe_roll(summary.valid_bytes, summary.max_timestamp, summary.last_offset, now_ms)
        segment.append(buf, summary)
        self._update_producers(buf, summary, segment)
        self.log_end_offset = summary.last_offset + 1
        self.unflushed_messages += summary.records_count
        if self.unflushed_messages >= self.config.flush_messages:
            self.flush()
        return LogAppendInfo(
            first_offset=summary.first_offset,
            last_offset=summary.last_offset,
            max_timestamp=summary.max_timestamp,
            offset_of_max_timestamp=summary.offset_of_max_timestamp,
            log_append_time=append_time,
            log_start_offset=self.log_start_offset,
            records_count=summary.records_count,
            valid_bytes=summary.valid_bytes,
        )

    def _empty_append_info(self) -> LogAppendInfo:
        return LogAppendInfo(-1, -1, -1, -1, -1, self.log_start_offset, 0, 0)

    # ---- rolling -------------------------------------------------------------------------

    def _maybe_roll(self, batch_bytes: int, max_timestamp: int, last_offset: int, now_ms: int) -> LogSegment:
        segment = self.active_segment
        roll_ms = self.config.segment_ms - self.config.segment_jitter_ms
        if segment.should_roll(batch_bytes, max_timestamp, last_offset,
                               self.config.segment_bytes, roll_ms, now_ms):
            return self.roll(now_ms)
        return segment

    @storage_operation("rolling a segment of")
    def roll(self, now_ms: int | None = None) -> LogSegment:
        """Start a new active segment at the log end offset (an empty active segment stays)."""
        active = self.active_segment
        if active.size == 0 and active.base_offset == self.log_end_offset:
            return active
        active.on_become_inactive()
        segment = LogSegment(
            self.dir, self.log_end_offset, self.config.index_interval_bytes,
            self.config.segment_index_bytes, create=True, created_ms=now_ms,
        )
        self.segments.append(segment)
        self._bases.append(segment.base_offset)
        self._take_snapshot(sync=False)  # fsynced with the segments by the roll's flush plan
        self.flush_wanted = max(self.flush_wanted, segment.base_offset)
        if self.on_roll is not None:
            self.on_roll(self)
        return segment

    # ---- reads ---------------------------------------------------------------------------

    @property
    def first_unstable_offset(self) -> int | None:
        """The least first offset of a transaction open, or completed by a marker the high
        watermark has not passed, at least the log start offset; None when there is none."""
        first = self.producer_state.first_unstable_offset(self.high_watermark)
        return None if first is None else max(first, self.log_start_offset)

    @property
    def last_stable_offset(self) -> int:
        """What read_committed consumers may read up to: min(first unstable offset, HW)."""
        first = self.first_unstable_offset
        hw = self.high_watermark
        return hw if first is None or first > hw else first

    def fetch_upper_bound(self, isolation: str) -> int:
        if isolation == FETCH_LOG_END:
            return self.log_end_offset
        if isolation == FETCH_TXN_COMMITTED:
            return self.last_stable_offset
        return self.high_watermark

    @storage_operation("reading the transaction index of")
    def collect_aborted(self, start_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """The aborted transactions overlapping [start_offset, upper_bound): those whose marker
        is at or after ``start_offset`` and whose first offset is below ``upper_bound``, from the
        segment holding ``start_offset`` on until a segment's search is complete (Kafka's
        collectAbortedTransactions)."""
        aborted: list[AbortedTxn] = []
        for segment in self.segments[self._segment_index(start_offset):]:
            found = segment.txn_index.collect_aborted(start_offset, upper_bound)
            aborted.extend(found.aborted)
            if found.is_complete:
                break
        return aborted

    @storage_operation("reading")
    def read(self, start_offset: int, max_bytes: int, isolation: str = FETCH_LOG_END,
             min_one_message: bool = True) -> FetchDataInfo:
        """Whole batches from the one holding ``start_offset``: at most ``max_bytes`` (but at
        least one batch with min_one_message, KIP-74), none past the isolation bound."""
        if start_offset < self.log_start_offset or start_offset > self.log_end_offset:
            raise OffsetOutOfRangeError(
                f"offset {start_offset} is outside [{self.log_start_offset}, {self.log_end_offset}] "
                f"of {self.dir}"
            )
        upper = self.fetch_upper_bound(isolation)
        if start_offset >= upper:
            if isolation == FETCH_TXN_COMMITTED:
                return FetchDataInfo(start_offset, None, -1, [])
            return FetchDataInfo(start_offset, None)
        i = self._segment_index(start_offset)
        while i < len(self.segments):
            segment = self.segments[i]
            if segment.base_offset >= upper:
                break
            max_position = None
            if upper < self.log_end_offset and (
                i + 1 >= len(self.segments) or self.segments[i + 1].base_offset > upper
            ):
                max_position = self._position_of(segment, upper)
            found = segment.read(start_offset, max_bytes, max_position, min_one_message)
            if found is not None:
                first, records = found
                if isolation == FETCH_TXN_COMMITTED:
                    return FetchDataInfo(start_offset, records, first.base_offset,
                                         self.collect_aborted(start_offset, self._offset_after(i, records)))
                return FetchDataInfo(start_offset, records, first.base_offset)
            i += 1
        if isolation == FETCH_TXN_COMMITTED:
            return FetchDataInfo(start_offset, None, -1, [])
        return FetchDataInfo(start_offset, None)

    def _offset_after(self, i: int, records: FileSlice) -> int:
        """The offset of the first batch after ``records`` read from segment ``i``: the next
        segment's base or the log end when the slice reaches the segment's end (Kafka's
        fetchUpperBoundOffset, the upper bound of a read_committed read's aborted transactions)."""
        segment = self.segments[i]
        end = records.position + records.size
        if end < segment.size:
            after = segment.batch_at(end)
            if after is not None:
                return after
        return self.segments[i + 1].base_offset if i + 1 < len(self.segments) else self.log_end_offset

    def _position_of(self, segment: LogSegment, offset: int) -> int | None:
        """The file position of the batch holding ``offset`` (a fetch's upper bound), cached:
        below the log end offset a log changes only by truncation and segment deletion,
        which clear the cache."""
        key = (segment.base_offset, offset)
        if self._bound_cache is not None and self._bound_cache[0] == key:
            return self._bound_cache[1]
        bound = segment.translate_offset(offset)
        position = None if bound is None else bound.position
        self._bound_cache = (key, position)
        return position

    def _segment_index(self, offset: int) -> int:
        return max(0, bisect_right(self._bases, offset) - 1)

    @storage_operation("searching by timestamp in")
    def fetch_offset_by_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with timestamp >= ``timestamp``."""
        for segment in self.segments:
            if segment.max_timestamp_so_far < timestamp:
                continue
            found = segment.find_offset_by_timestamp(timestamp, self.log_start_offset)
            if found is not None:
                return found
        return None

    @storage_operation("searching for the largest timestamp in")
    def offset_of_max_timestamp(self) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record holding the largest timestamp (ListOffsets
        -3, Kafka's fetchOffsetByTimestamp since KAFKA-16310): in the first segment whose
        largest timestamp is the log's, the record LogSegment.find_max_timestamp_record
        finds; not the last offset of its batch, which Kafka answered before 3.8."""
        best: LogSegment | None = None
        for segment in self.segments:
            if best is None or segment.max_timestamp_so_far > best.max_timestamp_so_far:
                best = segment
        return None if best is None else best.find_max_timestamp_record()

    # ---- high watermark and log start ----------------------------------------------------

    def update_high_watermark(self, offset: int) -> int:
        """Set the HW, clamped to [log_start_offset, log_end_offset]. Returns the new HW."""
        self.high_watermark = hw = min(max(offset, self.log_start_offset), self.log_end_offset)
        if self.producer_state.unreplicated:
            self.producer_state.on_high_watermark_updated(hw)
        return hw

    def maybe_increment_high_watermark(self, offset: int) -> bool:
        """Raise the HW to ``offset`` clamped to the log end offset; never lowers it. True if
        it moved."""
        before = self.high_watermark
        if offset > before:
            self.update_high_watermark(offset)
        return self.high_watermark > before

    @storage_operation("moving the log start offset of")
    def maybe_increment_log_start_offset(self, new_start: int) -> bool:
        """DeleteRecords: raise the log start offset (up to the HW). Segments wholly below it
        go on the next retention pass. A negative offset is out of range (Kafka's
        deleteRecordsOnLeader, once -1 has been read as the high watermark)."""
        if new_start < 0 or new_start > self.high_watermark:
            raise OffsetOutOfRangeError(
                f"cannot move the log start offset to {new_start}: outside [0, the high watermark "
                f"{self.high_watermark}]"
            )
        if new_start <= self.log_start_offset:
            return False
        self.log_start_offset = new_start
        self.leader_epoch_cache.truncate_from_start(new_start)
        return True

    # ---- leader epochs (the replication seam, replication/log.py) -------------------------

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """(largest cached epoch <= ``epoch``, where it ends: the start of the next epoch, or
        the log end offset for the latest); (-1, -1) for -1 or an epoch above every cached one
        (OffsetsForLeaderEpoch, Kafka's endOffsetFor)."""
        return self.leader_epoch_cache.end_offset_for(epoch, self.log_end_offset)

    @storage_operation("writing the leader-epoch checkpoint of")
    def assign_epoch_start_offset(self, epoch: int, start_offset: int) -> None:
        """A new leader epoch begins at ``start_offset`` (a new leader's log end offset)."""
        self.leader_epoch_cache.assign(epoch, start_offset)

    def epoch_for_offset(self, offset: int) -> int:
        """The leader epoch that wrote ``offset`` (-1 before the first cached epoch)."""
        return self.leader_epoch_cache.epoch_for_offset(offset)

    # ---- truncation ----------------------------------------------------------------------

    @storage_operation("truncating")
    def truncate_to(self, offset: int) -> bool:
        """Remove every offset >= ``offset`` (a follower truncating to the leader's log).
        Returns True if anything was removed."""
        if offset < 0:
            raise ValueError(f"cannot truncate to a negative offset {offset}")
        if offset >= self.log_end_offset:
            # A leader may have cached its epoch's start at the log end and lost leadership
            # before writing anything: that entry must go, or the next fetch of this follower
            # sends an epoch the new leader never had and diverges again.
            self.leader_epoch_cache.truncate_from_end(self.log_end_offset)
            return False
        self._bound_cache = None
        self._truncations += 1
        if offset < self.active_segment.base_offset and offset < self.segments[0].base_offset:
            self.truncate_fully_and_start_at(offset)
            return True
        while len(self.segments) > 1 and self.segments[-1].base_offset >= offset:
            self.segments.pop().close_and_delete()
            self._bases.pop()
        active = self.segments[-1]
        active.truncate_to(offset)
        active.resize_indexes(self.config.segment_index_bytes)
        # A batch straddling ``offset`` went whole, so the end may be below ``offset``.
        end = min(offset, active.read_next_offset())
        self.log_end_offset = end
        self.high_watermark = min(self.high_watermark, end)
        self.recovery_point = min(self.recovery_point, end)
        self.leader_epoch_cache.truncate_from_end(end)
        self._drop_snapshots(lambda offset: offset <= end)
        self._load_producer_state()
        return True

    @storage_operation("truncating")
    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Drop every segment and restart the log empty at ``offset``."""
        self._bound_cache = None
        self._truncations += 1
        self.flush_wanted = offset
        for segment in self.segments:
            segment.close_and_delete()
        self.segments = [LogSegment(self.dir, offset, self.config.index_interval_bytes,
                                    self.config.segment_index_bytes, create=True)]
        self._bases = [offset]
        self.leader_epoch_cache.clear()
        self._drop_snapshots(lambda offset: False)
        if hasattr(self, "producer_state"):
            self.producer_state.truncate()
        self.log_start_offset = self.log_end_offset = self.high_watermark = offset
        self.recovery_point = offset

    # ---- flushing ------------------------------------------------------------------------

    @storage_operation("flushing")
    def flush(self, offset: int | None = None, now_ms: int | None = None) -> None:
        """fsync segments up to ``offset`` (default: the log end offset) and move the
        recovery point there."""
        offset = self.log_end_offset if offset is None else min(offset, self.log_end_offset)
        if offset <= self.recovery_point:
            return
        start = time.monotonic()
        for segment in self.segments[self._segment_index(self.recovery_point):]:
            if segment.base_offset >= offset:
                break
            segment.flush()
        if self.on_flush is not None:
            self.on_flush((time.monotonic() - start) * 1000)
        self.recovery_point = offset
        self.unflushed_messages = 0
        self.last_flush_ms = _now_ms() if now_ms is None else now_ms

    @storage_operation("flushing")
    def flush_plan(self, offset: int) -> FlushPlan | None:
        """What flushing up to ``offset`` (exclusive; at most the log end offset) takes, for a
        worker thread (Kafka's LocalLog.flush: the segments from the recovery point on, and the
        directory when a segment was created since); None when the recovery point is there."""
        offset = min(offset, self.log_end_offset)
        if offset <= self.recovery_point:
            return None
        plan = FlushPlan(offset, self._truncations, [], [], [], None)
        try:
            for segment in self.segments[self._segment_index(self.recovery_point):]:
                if segment.base_offset >= offset:
                    break
                plan.data_fds.append(os.dup(segment.fd))
                for index in (segment.offset_index, segment.time_index):
                    plan.index_fds.append(os.open(index.path, os.O_RDONLY | os.O_CLOEXEC))
                if segment.txn_index.exists:
                    plan.index_fds.append(os.open(segment.txn_index.path, os.O_RDONLY | os.O_CLOEXEC))
                if segment.base_offset >= self.recovery_point and plan.dir_fd is None:
                    plan.dir_fd = os.open(self.dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            for snapshot in self._snapshot_offsets():
                if self.recovery_point < snapshot <= offset:
                    with contextlib.suppress(FileNotFoundError):
                        path = self._snapshot_path(snapshot)
                        plan.snapshot_fds.append(os.open(path, os.O_RDONLY | os.O_CLOEXEC))
        except BaseException:
            plan.close()
            raise
        return plan

    def flushed(self, plan: FlushPlan, now_ms: int) -> None:
        """``plan`` ran: the recovery point moves up to it (Kafka's markFlushed), unless the
        log was truncated since it was made, or has been flushed further meanwhile."""
        if self.on_flush is not None and plan.elapsed_ms is not None:
            self.on_flush(plan.elapsed_ms)
        if plan.generation != self._truncations:
            return
        offset = min(plan.upto, self.log_end_offset)
        if offset > self.recovery_point:
            self.recovery_point = offset
            self.last_flush_ms = now_ms
            if offset == self.log_end_offset:
                self.unflushed_messages = 0

    # ---- retention -----------------------------------------------------------------------

    @storage_operation("deleting old segments of")
    def delete_old_segments(self, now_ms: int | None = None) -> int:
        """Retention: remove whole segments below the log start offset, older than
        retention.ms (by their largest timestamp) or beyond retention.bytes. Never removes
        data at or above the high watermark or an open transaction's first offset; if every
        segment is deletable, rolls first so an empty active segment remains. Returns the
        number of segments deleted."""
        now_ms = _now_ms() if now_ms is None else now_ms
        config = self.config
        deleted = self._delete_segments(
            now_ms, lambda seg, nxt: nxt is not None and nxt.base_offset <= self.log_start_offset
        )
        if not config.deletes:
            return deleted  # compacted-only topics keep every segment (until the cleaner runs)
        if config.retention_ms >= 0:
            deleted += self._delete_segments(
                now_ms, lambda seg, nxt: now_ms - seg.largest_timestamp() > config.retention_ms
            )
        if config.retention_bytes >= 0:
            excess = self.size_in_bytes - config.retention_bytes

            def over_size(seg: LogSegment, nxt: LogSegment | None) -> bool:
                nonlocal excess
                if excess - seg.size >= 0:
                    excess -= seg.size
                    return True
                return False

            deleted += self._delete_segments(now_ms, over_size)
        return deleted

    def _delete_segments(self, now_ms: int, predicate) -> int:
        deletable: list[LogSegment] = []
        bound = self.last_stable_offset  # Kafka bounds by the HW; the first unstable offset is Strom's
        for i, segment in enumerate(self.segments):
            nxt = self.segments[i + 1] if i + 1 < len(self.segments) else None
            upper = nxt.base_offset if nxt is not None else self.log_end_offset
            if upper > bound or not predicate(segment, nxt):
                break
            if nxt is None and segment.size == 0:
                break
            deletable.append(segment)
        if not deletable:
            return 0
        if deletable[-1] is self.active_segment:
            self.roll()
        self._bound_cache = None
        due = now_ms + self.config.file_delete_delay_ms
        for segment in deletable:
            self.segments.remove(segment)
            segment.mark_deleted()
            self._pending_deletes.append((due, segment))
        self._bases = [s.base_offset for s in self.segments]
        new_start = self.segments[0].base_offset
        self._drop_snapshots(lambda offset: offset >= new_start)
        if new_start > self.log_start_offset:
            self.log_start_offset = new_start
            self.high_watermark = max(self.high_watermark, new_start)
            self.leader_epoch_cache.truncate_from_start(new_start)
        return len(deletable)

    @storage_operation("deleting segments of")
    def delete_pending_segments(self, now_ms: int | None = None, force: bool = False) -> int:
        """Close and unlink segments whose file.delete.delay.ms has passed."""
        now_ms = _now_ms() if now_ms is None else now_ms
        keep, done = [], 0
        for due, segment in self._pending_deletes:
            if force or due <= now_ms:
                segment.close_and_delete()
                done += 1
            else:
                keep.append((due, segment))
        self._pending_deletes = keep
        return done

    # ---- lifecycle -----------------------------------------------------------------------

    @storage_operation("closing")
    def close(self, snapshot: bool = True) -> None:
        """Close the files, leaving a producer snapshot at the log end unless told not to (a
        log about to be deleted)."""
        self.delete_pending_segments(force=True)
        self.leader_epoch_cache.flush()
        if snapshot:
            self._take_snapshot(sync=True)
        for segment in self.segments:
            segment.close()

    def close_handlers(self) -> None:
        """Close the files without writing anything: no flush, no snapshot, no checkpoint (a
        log of a failed log dir at shutdown, as Kafka's closeHandlers)."""
        for segment in self.segments:
            segment.close_handlers()

    def delete(self) -> None:
        """Close and remove the whole directory."""
        self.close(snapshot=False)
        shutil.rmtree(self.dir, ignore_errors=True)

    def segment_files(self) -> list[str]:
        return [file_name(s.base_offset, ".log") for s in self.segments]


def _unlink(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


__all__ = [
    "FlushPlan", "Log", "LogAppendInfo", "FetchDataInfo", "FETCH_LOG_END", "FETCH_HIGH_WATERMARK",
    "FETCH_TXN_COMMITTED", "TIMESTAMP_LOG_APPEND_TIME",
]
