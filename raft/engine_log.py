"""RaftLog on engine/ segments: the replicated log ``__cluster_metadata-0`` and its snapshots.

The log is an ``engine.log.Log`` of record batches (raft/records.py): entries keep the offsets
the core assigned and their epoch is the batches' partition leader epoch, so the engine's
leader-epoch cache (``leader-epoch-checkpoint``) is the log's epoch history. The high watermark
lives in memory (as in Kafka); on open it is the latest snapshot's end offset (a snapshot only
holds committed entries) or the log start offset.

Partition directory::

    00000000000000000000.log/.index/.timeindex   segments (engine/)
    leader-epoch-checkpoint                      epoch -> start offset (engine/)
    quorum-state                                 election state (raft/quorum_file.py)
    <20-digit end offset>-<10-digit epoch>.checkpoint        complete snapshots
    <20-digit end offset>-<10-digit epoch>.checkpoint.part   a snapshot being written/downloaded

Snapshot file (Kafka's RecordsSnapshotWriter; offsets inside the file start at 0, every batch
carries the snapshot's epoch):

| batch   | records                                                                        |
|---------|--------------------------------------------------------------------------------|
| control | SnapshotHeaderRecord(version 0, last_contained_log_timestamp);                 |
|         | KRaftVersionRecord(kraft_version) when kraft.version >= 1;                     |
|         | VotersRecord when kraft.version >= 1 and there is a voter set                  |
| data... | the snapshot's values, one record each                                         |
| control | SnapshotFooterRecord(version 0)                                                |

A snapshot with no KRaftVersionRecord is kraft.version 0 (Kafka writes none then).

Invariants:
    every complete snapshot's end offset >= log_start_offset; the earliest one, if the log
    start is above 0, ends exactly at the log start (complete_snapshot and
    delete_before_snapshot delete the older ones), so its epoch answers for the entry just
    below the log start: the epoch history is (that epoch, log start) followed by the cache.
    log_start_offset <= high watermark <= log end offset.

On open: ``.checkpoint.part`` and ``.checkpoint.deleted`` files are deleted; the log starts at
the earliest snapshot's end offset (or the first segment); a latest snapshot ahead of the log
(Kafka's truncateToLatestSnapshot: its epoch above the log's last epoch, or the same epoch and
past the log end offset: a download completed just before a crash, or unflushed entries lost)
empties the log and starts it there; every segment is recovered (CRC checked), since the raft
log keeps no clean-shutdown marker.

Truncation inside a batch (the core truncates at entry granularity, a batch is the unit on
disk) drops the batch, rewrites its kept head and flushes it at once; a crash between the two
can lose that head (Kafka keeps none of it). Reads decode whole batches and return exactly the
entries asked for.
"""
from __future__ import annotations

import bisect
import os
import re
import time
from collections import OrderedDict
from dataclasses import replace

from engine.checkpoint import fsync_dir
from engine.config import LogConfig
from engine.log import Log
from ext.batch import build_batch, read_header

from .log import Entry, OffsetAndEpoch, Snapshot
from .records import (
    SnapshotFooter,
    SnapshotHeader,
    build_batches,
    build_control_record,
    decode_entries,
    iter_batches_records,
    parse_control_record,
)
from .voters import KRaftVersion, VoterSet

SNAPSHOT_SUFFIX = ".checkpoint"
PARTIAL_SUFFIX = ".checkpoint.part"
DELETED_SUFFIX = ".checkpoint.deleted"
_SNAPSHOT_NAME = re.compile(r"^(\d{20})-(\d{10})\.checkpoint$")
READ_CHUNK_BYTES = 1 << 20
DECODED_RUNS = 8

# Kafka's metadata log: 1 GiB segments rolled hourly, nothing removed by time or size (only
# below a snapshot), no batch size limit beyond what the core wrote.
METADATA_LOG_CONFIG = LogConfig(segment_bytes=1 << 30, segment_ms=3_600_000, retention_ms=-1,
                                retention_bytes=-1, max_message_bytes=1 << 30, file_delete_delay_ms=0)


def _now_ms() -> int:
    return int(time.time() * 1000)


def snapshot_file_name(snapshot_id: OffsetAndEpoch) -> str:
    return f"{snapshot_id.offset:020d}-{snapshot_id.epoch:010d}{SNAPSHOT_SUFFIX}"


def parse_snapshot_file_name(name: str) -> OffsetAndEpoch | None:
    m = _SNAPSHOT_NAME.match(name)
    return OffsetAndEpoch(int(m.group(1)), int(m.group(2))) if m else None


# ---- snapshot files ---------------------------------------------------------------------------

def build_snapshot(snapshot: Snapshot, last_contained_log_timestamp: int, now_ms: int) -> bytes:
    """The bytes of a snapshot file (see the table above)."""
    epoch = snapshot.snapshot_id.epoch
    control = [SnapshotHeader(last_contained_log_timestamp)]
    if snapshot.kraft_version >= 1:
        control.append(KRaftVersion(snapshot.kraft_version))
        if snapshot.voters is not None:
            control.append(snapshot.voters)
    records = [(*build_control_record(v), (), now_ms) for v in control]
    parts = [build_batch(records, base_offset=0, partition_leader_epoch=epoch, is_control=True)]
    offset = len(control)
    data = [Entry(offset + i, epoch, v) for i, v in enumerate(snapshot.values)]
    parts.extend(build_batches(data, now_ms))
    footer = [(*build_control_record(SnapshotFooter()), (), now_ms)]
    parts.append(build_batch(footer, base_offset=offset + len(data), partition_leader_epoch=epoch,
                             is_control=True))
    return b"".join(parts)


def parse_snapshot(snapshot_id: OffsetAndEpoch, data: bytes | memoryview, name: str = "snapshot") -> Snapshot:
    """Decode a snapshot file; ValueError naming ``name`` if it is not a whole, valid snapshot."""
    try:
        batches = list(iter_batches_records(data, stop_at_truncated=False))
        if not batches or not batches[0][0].is_control or not batches[-1][0].is_control:
            raise ValueError("it must start and end with a control batch")
        kraft_version, voters, values = 0, None, []
        for i, (header, records) in enumerate(batches):
            if not header.is_control:
                values.extend(b"" if r.value is None else r.value for r in records)
                continue
            for j, r in enumerate(records):
                value = parse_control_record(r.key, r.value)
                first = i == 0 and j == 0
                last = i == len(batches) - 1 and j == len(records) - 1
                if isinstance(value, SnapshotHeader) != first:
                    raise ValueError(f"SnapshotHeaderRecord must be the first record (offset {r.offset})")
                if isinstance(value, SnapshotFooter) != last:
                    raise ValueError(f"SnapshotFooterRecord must be the last record (offset {r.offset})")
                if isinstance(value, KRaftVersion):
                    kraft_version = value.version
                elif isinstance(value, VoterSet):
                    voters = value
                elif not isinstance(value, SnapshotHeader | SnapshotFooter):
                    raise ValueError(f"unexpected {type(value).__name__} at offset {r.offset}")
    except ValueError as e:  # CorruptRecordError and ProtocolError are ValueErrors
        raise ValueError(f"{name}: corrupt snapshot: {e}") from None
    return Snapshot(snapshot_id, kraft_version, voters, values)


class CheckpointFormat:
    """Snapshot bytes as in ``.checkpoint`` files, for a MemoryRaftLog fed by a real leader."""

    @staticmethod
    def encode(snapshot: Snapshot) -> bytes:
        return build_snapshot(snapshot, 0, _now_ms())

    @staticmethod
    def decode(snapshot_id: OffsetAndEpoch, data: bytes) -> Snapshot:
        return parse_snapshot(snapshot_id, data)


def read_snapshot_file(path: str) -> Snapshot:
    snapshot_id = parse_snapshot_file_name(os.path.basename(path))
    if snapshot_id is None:
        raise ValueError(f"{path}: not a snapshot file name (<20-digit offset>-<10-digit epoch>.checkpoint)")
    with open(path, "rb") as f:
        return parse_snapshot(snapshot_id, f.read(), path)


def _write_durably(path: str, data: bytes) -> None:
    """``path``.part, fsync, rename, fsync the directory (a crash leaves no torn snapshot)."""
    part = path + ".part"
    with open(part, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(part, path)
    fsync_dir(os.path.dirname(path) or ".")


def write_bootstrap_snapshot(partition_dir: str, voters: VoterSet | None, kraft_version: int) -> str:
    """The KIP-853 bootstrap checkpoint ``00000000000000000000-0000000000.checkpoint`` (header,
    KRaftVersion and Voters records, footer, no data), as ``strom format`` writes it. Returns its path."""
    os.makedirs(partition_dir, exist_ok=True)
    snapshot = Snapshot(OffsetAndEpoch(0, 0), kraft_version, voters, [])
    path = os.path.join(partition_dir, snapshot_file_name(snapshot.snapshot_id))
    now = _now_ms()
    _write_durably(path, build_snapshot(snapshot, now, now))
    return path


# ---- the log ------------------------------------------------------------------------------------

class EngineRaftLog:
    """raft.log.RaftLog over an engine.log.Log in ``partition_dir`` (see the module docstring)."""

    def __init__(self, partition_dir: str, config: LogConfig | None = None) -> None:
        self.dir = partition_dir
        # Recently decoded runs of whole batches, by first offset (entries are contiguous). A
        # leader batch may hold tens of thousands of entries while followers and the listener
        # read it a chunk at a time: without this each chunk would decode the batch again.
        self._runs: OrderedDict[int, list[Entry]] = OrderedDict()
        os.makedirs(partition_dir, exist_ok=True)
        self.snapshots: set[OffsetAndEpoch] = set()
        for name in os.listdir(partition_dir):
            if name.endswith((PARTIAL_SUFFIX, DELETED_SUFFIX)):
                os.unlink(os.path.join(partition_dir, name))
            elif (snapshot_id := parse_snapshot_file_name(name)) is not None:
                self.snapshots.add(snapshot_id)
        earliest = min(self.snapshots, key=_order).offset if self.snapshots else 0
        # Entries leave the raft log only below a snapshot, never by time or size.
        config = replace(config or METADATA_LOG_CONFIG, retention_ms=-1, retention_bytes=-1)
        # Recovery validates every segment on open (the raft log keeps no clean-shutdown marker).
        self.log = Log(partition_dir, config, log_start_offset=earliest, recovery_point=0,
                       had_clean_shutdown=False)
        latest = self.latest_snapshot_id()
        if latest is not None:
            # Kafka's truncateToLatestSnapshot: a snapshot ahead of the log (downloaded, then a
            # crash before the log was emptied, or unflushed entries lost) replaces the log.
            last_epoch = max(self.log.latest_epoch, 0)
            end = self.log.log_end_offset
            if latest.epoch > last_epoch or (latest.epoch == last_epoch and latest.offset > end):
                self._start_at_snapshot(latest)
            self.log.update_high_watermark(max(self.log.log_start_offset, latest.offset))
        self._synced_segment: int | None = None  # the first flush makes the segment's name durable

    # ---- log ----------------------------------------------------------------------------------
    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    def _start_snapshot(self) -> OffsetAndEpoch | None:
        """The snapshot ending at the log start offset (above 0), whose epoch is the last below it."""
        start = self.log.log_start_offset
        if start == 0:
            return None
        for s in self.snapshots:
            if s.offset == start:
                return s
        return None

    def _epochs(self) -> list[tuple[int, int]]:
        """(epoch, start offset) of every epoch from the log start, the start snapshot's first."""
        entries = self.log.leader_epoch_cache.entries()
        snap = self._start_snapshot()
        if snap is not None and (not entries or entries[0][0] > snap.epoch):
            entries.insert(0, (snap.epoch, snap.offset))
        return entries

    def end_offset(self) -> OffsetAndEpoch:
        epoch = self.log.latest_epoch
        if epoch < 0:
            snap = self._start_snapshot()
            epoch = snap.epoch if snap is not None else 0
        return OffsetAndEpoch(self.log.log_end_offset, epoch)

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch:
        """The largest epoch e' <= ``epoch`` and where it ends; (0, 0) below every epoch of a log
        starting at 0, (-1, -1) below the start snapshot's epoch (as MemoryRaftLog)."""
        entries = self._epochs()
        i = bisect.bisect_right([e for e, _ in entries], epoch) - 1
        if i < 0:
            return OffsetAndEpoch(-1, -1) if self._start_snapshot() is not None else OffsetAndEpoch(0, 0)
        end = entries[i + 1][1] if i + 1 < len(entries) else self.log.log_end_offset
        return OffsetAndEpoch(end, entries[i][0])

    def append(self, entries: list[Entry]) -> None:
        if not entries:
            return
        end = self.end_offset()
        offset, last = end.offset, end.epoch
        for entry in entries:
            if entry.offset != offset:
                raise ValueError(f"append at {entry.offset}, log end offset {offset}")
            if entry.epoch < last:
                raise ValueError(f"epoch {entry.epoch} after {last}")
            offset, last = offset + 1, entry.epoch
        self._append(entries)

    def _append(self, entries: list[Entry]) -> None:
        # As a follower: the batches keep our offsets and their epochs enter the epoch cache.
        now = _now_ms()
        self.log.append_as_follower(b"".join(build_batches(entries, now)), now)

    def read(self, start_offset: int, max_entries: int) -> list[Entry]:
        """Exactly the entries [start_offset, start_offset + max_entries) that the log holds:
        nothing below the log start or at the log end. Whole batches are read and decoded, so a
        read costs up to a batch more than it returns."""
        out: list[Entry] = []
        offset, end = start_offset, self.log.log_end_offset
        if start_offset < self.log.log_start_offset:
            return out
        while len(out) < max_entries and offset < end:
            run = self._run_at(offset)
            if run is None:
                info = self.log.read(offset, min(READ_CHUNK_BYTES, max(4096, 256 * (max_entries - len(out)))))
                if info.records is None:
                    break
                run = decode_entries(info.records.read())
                if not run or not run[0].offset <= offset <= run[-1].offset:
                    break
                self._remember(run)
            i = offset - run[0].offset
            taken = run[i:i + max_entries - len(out)]
            out.extend(taken)
            offset = taken[-1].offset + 1
        return out

    def _run_at(self, offset: int) -> list[Entry] | None:
        for first, run in self._runs.items():
            if first <= offset <= run[-1].offset:
                self._runs.move_to_end(first)
                return run
        return None

    def _remember(self, run: list[Entry]) -> None:
        self._runs[run[0].offset] = run
        while len(self._runs) > DECODED_RUNS:
            self._runs.popitem(last=False)

    def truncate_to(self, offset: int) -> None:
        self._runs.clear()
        hw = self.log.high_watermark
        if offset < hw:
            raise ValueError(f"truncation to {offset} below the high watermark {hw}")
        if offset >= self.log.log_end_offset:
            return
        info = self.log.read(offset, 1)
        base = info.first_batch_offset if info.records is not None else offset
        kept = []
        if base < offset:
            kept = [e for e in decode_entries(info.records.read()) if base <= e.offset < offset]
        self.log.truncate_to(base)
        if kept:
            self._append(kept)
            # The kept head may sit below the log start (the log start cut a batch): the epoch
            # history still starts at the log start.
            self.log.leader_epoch_cache.truncate_from_start(self.log.log_start_offset)
            self.flush()
        self.log.update_high_watermark(hw)

    def flush(self) -> None:
        self.log.flush()
        active = self.log.active_segment.base_offset
        if active != self._synced_segment:  # a segment was created: make its name durable too
            fsync_dir(self.dir)
            self._synced_segment = active

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    def update_high_watermark(self, offset: int) -> None:
        hw, end = self.log.high_watermark, self.log.log_end_offset
        if offset < hw or offset > end:
            raise ValueError(f"high watermark {hw} -> {offset}, LEO {end}")
        self.log.update_high_watermark(offset)

    def close(self) -> None:
        self.flush()
        self.log.close()

    # ---- snapshots ----------------------------------------------------------------------------
    def _path(self, snapshot_id: OffsetAndEpoch) -> str:
        return os.path.join(self.dir, snapshot_file_name(snapshot_id))

    def latest_snapshot_id(self) -> OffsetAndEpoch | None:
        return max(self.snapshots, key=_order) if self.snapshots else None

    def create_snapshot(self, snapshot: Snapshot) -> None:
        snapshot_id = snapshot.snapshot_id
        if snapshot_id.offset > self.log.high_watermark:
            raise ValueError(f"snapshot at {snapshot_id.offset} above the high watermark "
                             f"{self.log.high_watermark}")
        if snapshot_id in self.snapshots:
            return  # the same committed prefix: the same content
        data = build_snapshot(snapshot, self._timestamp_before(snapshot_id.offset), _now_ms())
        _write_durably(self._path(snapshot_id), data)
        self.snapshots.add(snapshot_id)

    def _timestamp_before(self, offset: int) -> int:
        """The max timestamp of the batch holding ``offset - 1`` (the SnapshotHeaderRecord's
        last_contained_log_timestamp), 0 if the log no longer has it."""
        if not self.log.log_start_offset < offset <= self.log.log_end_offset:
            return 0
        info = self.log.read(offset - 1, 1)
        return 0 if info.records is None else max(read_header(info.records.read()).max_timestamp, 0)

    def read_snapshot(self, snapshot_id: OffsetAndEpoch) -> Snapshot:
        return read_snapshot_file(self._path(snapshot_id))

    def snapshot_size(self, snapshot_id: OffsetAndEpoch) -> int | None:
        if snapshot_id not in self.snapshots:
            return None
        return os.path.getsize(self._path(snapshot_id))

    def read_snapshot_chunk(self, snapshot_id: OffsetAndEpoch, position: int, max_bytes: int) -> bytes:
        with open(self._path(snapshot_id), "rb") as f:
            return os.pread(f.fileno(), max_bytes, position)

    def write_snapshot_chunk(self, snapshot_id: OffsetAndEpoch, position: int, data: bytes) -> None:
        """Append to ``.checkpoint.part``; position 0 starts (or restarts) the download and drops
        any other partial snapshot."""
        part = self._path(snapshot_id) + ".part"
        if position == 0:
            for name in os.listdir(self.dir):
                if name.endswith(PARTIAL_SUFFIX):
                    os.unlink(os.path.join(self.dir, name))
        size = os.path.getsize(part) if os.path.exists(part) else 0
        if position != size:
            raise ValueError(f"snapshot chunk at {position}, {part} has {size} bytes")
        with open(part, "ab") as f:
            f.write(data)

    def complete_snapshot(self, snapshot_id: OffsetAndEpoch) -> None:
        path = self._path(snapshot_id)
        part = path + ".part"
        if not os.path.exists(part):
            raise ValueError(f"no download of snapshot {snapshot_id} ({part})")
        with open(part, "rb") as f:
            parse_snapshot(snapshot_id, f.read(), part)  # a corrupt download never becomes a snapshot
            os.fsync(f.fileno())
        os.replace(part, path)
        fsync_dir(self.dir)
        self.snapshots.add(snapshot_id)
        self._start_at_snapshot(snapshot_id)

    def _start_at_snapshot(self, snapshot_id: OffsetAndEpoch) -> None:
        """Empty the log, start it at the snapshot's end offset, forget older snapshots."""
        self._runs.clear()
        hw = self.log.high_watermark
        self.log.truncate_fully_and_start_at(snapshot_id.offset)
        self.log.update_high_watermark(max(hw, snapshot_id.offset))  # clamped to the (empty) log end
        fsync_dir(self.dir)
        self._synced_segment = self.log.active_segment.base_offset
        self._delete_snapshots_before(snapshot_id)

    def delete_before_snapshot(self, snapshot_id: OffsetAndEpoch) -> None:
        """Move the log start to the snapshot's end offset (at most the high watermark), delete
        the whole segments below it, and the snapshots older than it (never the latest)."""
        start = min(snapshot_id.offset, self.log.high_watermark)
        if start > self.log.log_start_offset:
            self.log.maybe_increment_log_start_offset(start)
            self.log.delete_old_segments()
            self.log.delete_pending_segments(force=True)
        self._delete_snapshots_before(snapshot_id)

    def _delete_snapshots_before(self, snapshot_id: OffsetAndEpoch) -> None:
        latest = self.latest_snapshot_id()
        for old in [s for s in self.snapshots if _order(s) < _order(snapshot_id) and s != latest]:
            os.unlink(self._path(old))
            self.snapshots.discard(old)


def _order(snapshot_id: OffsetAndEpoch) -> tuple[int, int]:
    return (snapshot_id.offset, snapshot_id.epoch)


__all__ = [
    "EngineRaftLog", "METADATA_LOG_CONFIG", "write_bootstrap_snapshot", "build_snapshot", "parse_snapshot",
    "read_snapshot_file", "snapshot_file_name", "parse_snapshot_file_name",
]
