"""The narrow log seam between the replication core and storage (STYLE.md point 3).

A Partition reads and changes its local log only through ``PartitionLog``. engine.log.Log
implements it on segments; ``MemoryPartitionLog`` is the in-memory version for tests and the
simulation. ``records`` are opaque to the core: engine batches (bytes / FileSlice) at the edge,
tuples of (offset, epoch, value) entries in memory.

| term              | meaning                                                                  |
|-------------------|--------------------------------------------------------------------------|
| log end offset    | offset the next appended record gets                                     |
| log start offset  | first offset still in the log                                            |
| high watermark    | first offset not known to be committed; monotonic unless truncated below |
| latest epoch      | largest leader epoch in the leader-epoch cache, -1 when empty            |
| end offset for e  | Kafka's endOffsetFor, below                                              |

end_offset_for_epoch(e) answers (epoch, end offset):

* e is the latest epoch: (e, LEO);
* else (largest cached epoch e' <= e, start offset of the first epoch after e');
* e below every cached epoch: (e, start offset of the first cached epoch) (its data is gone);
* e == -1, empty cache, or e above every cached epoch: (-1, -1).

MemoryPartitionLog:

| field            | meaning                                              | invariant                 |
|------------------|------------------------------------------------------|---------------------------|
| entries          | (offset, epoch, value) tuples, consecutive offsets   | entries[0][0] == start    |
| log_start_offset | first offset still held                              | <= high watermark         |
| high_watermark   |                                                      | start <= HW <= LEO        |
| epochs           | leader-epoch cache [(epoch, start offset)]           | both strictly rising      |
| recovery_point   | offsets below it survive ``crash`` (flushed)         | <= LEO                    |
| hw_checkpoint    | the HW a restart recovers (replication-offset-checkpoint) |                      |

The epoch cache follows Kafka's LeaderEpochFileCache: ``assign`` drops entries that would break
monotonicity, truncation from the end drops entries starting at or past the new end, a raised log
start offset rewrites the first surviving entry to start there.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from replication.errors import OffsetOutOfRange, UnexpectedAppendOffset


class PartitionLog(Protocol):
    log_start_offset: int
    log_end_offset: int
    high_watermark: int

    @property
    def latest_epoch(self) -> int: ...

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]: ...

    def assign_epoch_start_offset(self, epoch: int, start_offset: int) -> None: ...

    def maybe_increment_high_watermark(self, offset: int) -> bool:
        """Raise the HW to ``offset`` clamped to the LEO; never lowers it. True if it moved."""

    def truncate_to(self, offset: int) -> bool:
        """Drop offsets >= ``offset`` (HW and epoch cache follow). True if anything went."""

    def truncate_fully_and_start_at(self, offset: int) -> None: ...

    def maybe_increment_log_start_offset(self, offset: int) -> bool: ...

    def append_as_leader(self, records: Any, leader_epoch: int, now_ms: int,
                         verification_guard: Any = None) -> Any:
        """Assign offsets from the LEO, stamp ``leader_epoch``; returns an object with
        ``first_offset`` and ``last_offset``. May raise the engine's validation errors.
        ``verification_guard``: KIP-890's, checked for transactional batches (engine/log.py)."""

    def append_as_follower(self, records: Any, now_ms: int) -> Any:
        """Append the leader's records with their offsets and epochs (the epoch cache follows)."""


@dataclass(frozen=True)
class AppendInfo:
    """What an append wrote: offsets [first_offset, last_offset] (last < first when empty)."""

    first_offset: int
    last_offset: int
    last_epoch: int
    entries: tuple[tuple[int, int, Any], ...]


class MemoryPartitionLog:
    """An in-memory PartitionLog for tests and the simulation: records are (offset, epoch, value)."""

    def __init__(self, log_start_offset: int = 0) -> None:
        self.entries: list[tuple[int, int, Any]] = []
        self.log_start_offset = log_start_offset
        self.log_end_offset = log_start_offset
        self.high_watermark = log_start_offset
        self.epochs: list[tuple[int, int]] = []
        self.recovery_point = log_start_offset
        self.hw_checkpoint = log_start_offset

    # -- leader-epoch cache (LeaderEpochFileCache) ------------------------------------------------

    @property
    def latest_epoch(self) -> int:
        return self.epochs[-1][0] if self.epochs else -1

    def epoch_entries(self) -> list[tuple[int, int]]:
        return list(self.epochs)

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """Kafka's endOffsetFor: (epoch found, its exclusive end offset); (-1, -1) if unknown."""
        if epoch == -1 or not self.epochs:
            return -1, -1
        if self.epochs[-1][0] == epoch:
            return epoch, self.log_end_offset
        higher = next(((e, start) for e, start in self.epochs if e > epoch), None)
        if higher is None:
            return -1, -1
        floor = [(e, start) for e, start in self.epochs if e <= epoch]
        if not floor:
            # Older than anything cached: the data is gone; answer with the first known start.
            return epoch, higher[1]
        return floor[-1][0], higher[1]

    def assign_epoch_start_offset(self, epoch: int, start_offset: int) -> None:
        if epoch < 0 or start_offset < 0:
            raise ValueError(f"invalid leader epoch entry ({epoch}, {start_offset})")
        if self.epochs:
            latest_epoch, latest_start = self.epochs[-1]
            if epoch == latest_epoch and start_offset >= latest_start:
                return
        while self.epochs and (self.epochs[-1][0] >= epoch or self.epochs[-1][1] >= start_offset):
            self.epochs.pop()
        self.epochs.append((epoch, start_offset))

    def _truncate_epochs_from_end(self, end_offset: int) -> None:
        while self.epochs and self.epochs[-1][1] >= end_offset:
            self.epochs.pop()

    def _truncate_epochs_from_start(self, start_offset: int) -> None:
        removed = None
        while self.epochs and self.epochs[0][1] <= start_offset:
            removed = self.epochs.pop(0)
        if removed is not None:
            self.epochs.insert(0, (removed[0], start_offset))

    # -- offsets ----------------------------------------------------------------------------------

    def maybe_increment_high_watermark(self, offset: int) -> bool:
        offset = min(offset, self.log_end_offset)
        if offset > self.high_watermark:
            self.high_watermark = offset
            return True
        return False

    def truncate_to(self, offset: int) -> bool:
        if offset < 0:
            raise ValueError(f"cannot truncate to a negative offset {offset}")
        if offset >= self.log_end_offset:
            # A new leader may have cached an epoch start at the end before writing anything.
            self._truncate_epochs_from_end(self.log_end_offset)
            return False
        if offset < self.log_start_offset:
            self.truncate_fully_and_start_at(offset)
            return True
        del self.entries[offset - self.log_start_offset:]
        self.log_end_offset = offset
        self._truncate_epochs_from_end(offset)
        self.high_watermark = min(self.high_watermark, offset)
        self.recovery_point = min(self.recovery_point, offset)
        return True

    def truncate_fully_and_start_at(self, offset: int) -> None:
        self.entries.clear()
        self.epochs.clear()
        self.log_start_offset = self.log_end_offset = self.high_watermark = offset
        self.recovery_point = offset

    def maybe_increment_log_start_offset(self, offset: int) -> bool:
        if offset > self.high_watermark:
            raise OffsetOutOfRange(f"log start offset {offset} past the high watermark {self.high_watermark}")
        if offset <= self.log_start_offset:
            return False
        del self.entries[:offset - self.log_start_offset]
        self.log_start_offset = offset
        self._truncate_epochs_from_start(offset)
        return True

    # -- appends and reads ------------------------------------------------------------------------

    def append_as_leader(self, records: Any, leader_epoch: int, now_ms: int,
                         verification_guard: Any = None) -> AppendInfo:
        """``records``: an iterable of values; each gets the next offset and ``leader_epoch``."""
        first = self.log_end_offset
        written = tuple((first + i, leader_epoch, value) for i, value in enumerate(records))
        if written:
            self.assign_epoch_start_offset(leader_epoch, first)
            self.entries.extend(written)
            self.log_end_offset = first + len(written)
        return AppendInfo(first, self.log_end_offset - 1, self.latest_epoch, written)

    def append_as_follower(self, records: Any, now_ms: int) -> AppendInfo:
        """``records``: (offset, epoch, value) entries from the leader, starting at the LEO."""
        records = tuple(records)
        first = self.log_end_offset
        if not records:
            return AppendInfo(first, first - 1, self.latest_epoch, ())
        if records[0][0] != self.log_end_offset:
            raise UnexpectedAppendOffset(records[0][0], records[-1][0], self.log_end_offset)
        for expected, (offset, epoch, _) in enumerate(records, start=first):
            if offset != expected:
                raise ValueError(f"non-consecutive offset {offset}, expected {expected}")
            if epoch < self.latest_epoch:
                raise ValueError(f"epoch {epoch} below the latest epoch {self.latest_epoch} at {offset}")
            self.assign_epoch_start_offset(epoch, offset)
        self.entries.extend(records)
        self.log_end_offset = records[-1][0] + 1
        return AppendInfo(first, self.log_end_offset - 1, self.latest_epoch, records)

    def read(self, start_offset: int, max_entries: int | None = None,
             max_offset: int | None = None) -> tuple[tuple[int, int, Any], ...]:
        """Entries from ``start_offset`` up to ``max_offset`` (exclusive; default the LEO)."""
        if start_offset < self.log_start_offset or start_offset > self.log_end_offset:
            raise OffsetOutOfRange(
                f"offset {start_offset} outside [{self.log_start_offset}, {self.log_end_offset}]")
        end = self.log_end_offset if max_offset is None else min(max_offset, self.log_end_offset)
        if max_entries is not None:
            end = min(end, start_offset + max_entries)
        base = self.log_start_offset
        return tuple(self.entries[start_offset - base:max(end - base, start_offset - base)])

    def entry_at(self, offset: int) -> tuple[int, int, Any] | None:
        if self.log_start_offset <= offset < self.log_end_offset:
            return self.entries[offset - self.log_start_offset]
        return None

    # -- durability (for the simulation's hard kills) ---------------------------------------------

    def flush(self, offset: int | None = None) -> None:
        """Everything below ``offset`` (default the LEO) survives a crash."""
        self.recovery_point = max(self.recovery_point, min(self.log_end_offset,
                                                           self.log_end_offset if offset is None else offset))

    def checkpoint_high_watermark(self) -> None:
        self.hw_checkpoint = self.high_watermark

    def crash(self) -> None:
        """A hard kill: unflushed records are lost, the HW restarts from its checkpoint, the epoch
        cache (flushed on every assign, as Kafka does) is truncated to the recovered LEO."""
        if self.recovery_point < self.log_end_offset:
            del self.entries[self.recovery_point - self.log_start_offset:]
            self.log_end_offset = self.recovery_point
        self._truncate_epochs_from_end(self.log_end_offset)
        self.high_watermark = max(self.log_start_offset, min(self.hw_checkpoint, self.log_end_offset))

    def __repr__(self) -> str:
        return (f"MemoryPartitionLog(start={self.log_start_offset}, hw={self.high_watermark}, "
                f"leo={self.log_end_offset}, epochs={self.epochs})")
