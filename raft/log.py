"""The narrow log seam between the KRaft core and storage (STYLE.md point 3).

The core reads and writes the replicated log only through ``RaftLog``. ``engine/`` will implement
it on segments at the edge; ``MemoryRaftLog`` is the in-memory version for tests and the
simulation. Writes land in the log at once (as in Kafka's page cache); ``flush`` makes them
durable, and the driver calls it before it sends the messages of the step that wrote them.

Entries are identified by (offset, epoch): two logs holding an entry with the same offset and
epoch hold the same entry and the same prefix before it (log matching).

| term               | meaning                                                                 |
|--------------------|-------------------------------------------------------------------------|
| log end offset     | offset the next appended entry gets (``end_offset().offset``)           |
| last epoch         | epoch of the last entry, 0 for an empty log (``end_offset().epoch``)    |
| end offset for e   | leader-epoch cache lookup: the largest epoch e' <= e in the log and the |
|                    | offset where e' ends (the start of the next epoch, or the LEO)          |
| high watermark     | first offset not known to be committed; in memory only (as in Kafka)    |
"""
from __future__ import annotations

import bisect
import pickle
from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(frozen=True, slots=True)
class OffsetAndEpoch:
    offset: int
    epoch: int

    def key(self) -> tuple[int, int]:
        """Order for log up-to-dateness: by epoch first, then offset."""
        return (self.epoch, self.offset)


@dataclass(frozen=True, slots=True)
class Entry:
    offset: int
    epoch: int
    value: Any


@dataclass(frozen=True, slots=True)
class LeaderChange:
    """The LeaderChange control record a new leader appends at its epoch start offset."""

    leader_id: int
    voters: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A snapshot's content (KIP-630, KIP-853): every entry below ``snapshot_id.offset``.

    ``snapshot_id`` is (end offset, epoch of the last included entry). On disk it is the file
    ``<20-digit offset>-<10-digit epoch>.checkpoint``: a control batch with SnapshotHeaderRecord,
    KRaftVersionRecord and (kraft.version 1) VotersRecord, the data records, and a control batch
    with SnapshotFooterRecord.
    """

    snapshot_id: OffsetAndEpoch
    kraft_version: int
    voters: Any  # raft.voters.VoterSet | None
    values: list  # data record values (bytes)


class RaftLog(Protocol):
    """The replicated log, its snapshots and the leader-epoch cache over both.

    After a snapshot is loaded (``complete_snapshot``) or the log prefix is deleted
    (``delete_before_snapshot``), ``log_start_offset`` is the snapshot's end offset, and
    ``end_offset_for_epoch`` answers for the snapshot's epoch as if its last entry were in the
    log. Reads below ``log_start_offset`` return nothing.
    """

    def end_offset(self) -> OffsetAndEpoch: ...

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch: ...

    def append(self, entries: list[Entry]) -> None:
        """Append at the log end offset; offsets must be contiguous and epochs non-decreasing."""

    def read(self, start_offset: int, max_entries: int) -> list[Entry]: ...

    def truncate_to(self, offset: int) -> None:
        """Remove every entry at or above ``offset``."""

    def flush(self) -> None: ...

    @property
    def high_watermark(self) -> int: ...

    def update_high_watermark(self, offset: int) -> None: ...

    # ---- snapshots ---------------------------------------------------------------------------
    @property
    def log_start_offset(self) -> int: ...

    def latest_snapshot_id(self) -> OffsetAndEpoch | None: ...

    def create_snapshot(self, snapshot: Snapshot) -> None:
        """Write a complete snapshot (at or below the high watermark) durably."""

    def read_snapshot(self, snapshot_id: OffsetAndEpoch) -> Snapshot: ...

    def snapshot_size(self, snapshot_id: OffsetAndEpoch) -> int | None:
        """Size in bytes of a complete snapshot, None if there is no such snapshot."""

    def read_snapshot_chunk(self, snapshot_id: OffsetAndEpoch, position: int, max_bytes: int) -> bytes: ...

    def write_snapshot_chunk(self, snapshot_id: OffsetAndEpoch, position: int, data: bytes) -> None:
        """Append to the snapshot being downloaded (``.checkpoint.part``); position must be its size."""

    def complete_snapshot(self, snapshot_id: OffsetAndEpoch) -> None:
        """The download is whole: make it the latest snapshot, empty the log and start it at
        ``snapshot_id.offset`` with the high watermark there."""

    def delete_before_snapshot(self, snapshot_id: OffsetAndEpoch) -> None:
        """Drop log entries below the snapshot's end offset and older snapshots (the latest stays)."""


class PickleSnapshots:
    """Snapshot bytes for simulations only: never for bytes from the network."""

    @staticmethod
    def encode(snapshot: Snapshot) -> bytes:
        return pickle.dumps(snapshot)

    @staticmethod
    def decode(snapshot_id: OffsetAndEpoch, data: bytes) -> Snapshot:
        return pickle.loads(data)


class MemoryRaftLog:
    """RaftLog in memory; ``crash`` drops what was never flushed, as a hard kill would.

    ``entries[i]`` holds offset ``log_start_offset + i``. Snapshots are kept as bytes (what
    FetchSnapshot copies) in the format of ``snapshot_codec``: pickles in simulations, Kafka's
    checkpoint format (raft.engine_log.CheckpointFormat) where the bytes come from a real leader,
    as in a broker. Creating or completing a snapshot is durable.
    """

    def __init__(self, snapshot_codec=PickleSnapshots) -> None:
        self.codec = snapshot_codec
        self.entries: list[Entry] = []
        self.start = 0  # log start offset
        # Leader-epoch cache: epochs[i] starts at start_offsets[i]; epochs strictly increase.
        self.epochs: list[int] = []
        self.start_offsets: list[int] = []
        self.flushed_offset = 0  # invariant: entries below it survive a crash
        self._high_watermark = 0
        self.snapshots: dict[OffsetAndEpoch, bytes] = {}
        self._partial: tuple[OffsetAndEpoch, bytearray] | None = None
        self._base = 0  # 1 once the epoch cache starts with a snapshot's (epoch, end offset)

    def _end(self) -> int:
        return self.start + len(self.entries)

    def end_offset(self) -> OffsetAndEpoch:
        return OffsetAndEpoch(self._end(), self.epochs[-1] if self.epochs else 0)

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch:
        i = bisect.bisect_right(self.epochs, epoch) - 1
        if i < 0:
            return OffsetAndEpoch(0, 0) if not self._base else OffsetAndEpoch(-1, -1)
        end = self.start_offsets[i + 1] if i + 1 < len(self.epochs) else self._end()
        return OffsetAndEpoch(end, self.epochs[i])

    def append(self, entries: list[Entry]) -> None:
        for entry in entries:
            if entry.offset != self._end():
                raise ValueError(f"append at {entry.offset}, log end offset {self._end()}")
            last = self.epochs[-1] if self.epochs else 0
            if entry.epoch < last:
                raise ValueError(f"epoch {entry.epoch} after {last}")
            if entry.epoch > last or not self.epochs:
                self.epochs.append(entry.epoch)
                self.start_offsets.append(entry.offset)
            self.entries.append(entry)

    def read(self, start_offset: int, max_entries: int) -> list[Entry]:
        i = start_offset - self.start
        if i < 0:
            return []
        return self.entries[i:i + max_entries]

    def truncate_to(self, offset: int) -> None:
        if offset < self._high_watermark:
            raise ValueError(f"truncation to {offset} below the high watermark {self._high_watermark}")
        del self.entries[max(0, offset - self.start):]
        # After a snapshot the first cache entry is the snapshot's epoch at the log start: it stays.
        while len(self.epochs) > self._base and self.start_offsets[-1] >= offset:
            self.start_offsets.pop()
            self.epochs.pop()
        self.flushed_offset = min(self.flushed_offset, offset)

    def flush(self) -> None:
        self.flushed_offset = self._end()

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    def update_high_watermark(self, offset: int) -> None:
        if offset < self._high_watermark or offset > self._end():
            raise ValueError(f"high watermark {self._high_watermark} -> {offset}, LEO {self._end()}")
        self._high_watermark = offset

    def crash(self) -> None:
        """A hard kill: unflushed entries, a partial snapshot and the (in-memory) HW are lost."""
        self._high_watermark = 0
        self._partial = None
        self.truncate_to(max(self.flushed_offset, self.start))
        self._high_watermark = self.start

    # ---- snapshots -------------------------------------------------------------------------
    @property
    def log_start_offset(self) -> int:
        return self.start

    def latest_snapshot_id(self) -> OffsetAndEpoch | None:
        return max(self.snapshots, key=lambda s: s.offset) if self.snapshots else None

    def create_snapshot(self, snapshot: Snapshot) -> None:
        if snapshot.snapshot_id.offset > self._high_watermark:
            raise ValueError(f"snapshot at {snapshot.snapshot_id.offset} above the HW {self._high_watermark}")
        self.snapshots[snapshot.snapshot_id] = self.codec.encode(snapshot)

    def read_snapshot(self, snapshot_id: OffsetAndEpoch) -> Snapshot:
        return self.codec.decode(snapshot_id, self.snapshots[snapshot_id])

    def snapshot_size(self, snapshot_id: OffsetAndEpoch) -> int | None:
        data = self.snapshots.get(snapshot_id)
        return None if data is None else len(data)

    def read_snapshot_chunk(self, snapshot_id: OffsetAndEpoch, position: int, max_bytes: int) -> bytes:
        return self.snapshots[snapshot_id][position:position + max_bytes]

    def write_snapshot_chunk(self, snapshot_id: OffsetAndEpoch, position: int, data: bytes) -> None:
        if self._partial is None or self._partial[0] != snapshot_id or position == 0:
            self._partial = (snapshot_id, bytearray())
        if position != len(self._partial[1]):
            raise ValueError(f"snapshot chunk at {position}, have {len(self._partial[1])} bytes")
        self._partial[1].extend(data)

    def complete_snapshot(self, snapshot_id: OffsetAndEpoch) -> None:
        if self._partial is None or self._partial[0] != snapshot_id:
            raise ValueError(f"no download of snapshot {snapshot_id}")
        self.snapshots[snapshot_id] = bytes(self._partial[1])
        self._partial = None
        self.entries = []
        self.start = snapshot_id.offset
        self.epochs = [snapshot_id.epoch]
        self.start_offsets = [snapshot_id.offset]
        self._base = 1
        self.flushed_offset = snapshot_id.offset
        self._high_watermark = max(self._high_watermark, snapshot_id.offset)

    def delete_before_snapshot(self, snapshot_id: OffsetAndEpoch) -> None:
        end = min(snapshot_id.offset, self._high_watermark)
        if end > self.start:
            del self.entries[:end - self.start]
            self.start = end
            later = [(e, o) for e, o in zip(self.epochs, self.start_offsets)
                     if o >= end and e > snapshot_id.epoch]
            self.epochs = [snapshot_id.epoch] + [e for e, _ in later]
            self.start_offsets = [end] + [o for _, o in later]
            self._base = 1
        for old in [s for s in self.snapshots if s.offset < snapshot_id.offset]:
            del self.snapshots[old]
