"""The voter set in force, read from the snapshot and the log, committed or not (KIP-853).

Theory of operation. Every replica reads the VotersRecord and KRaftVersionRecord control
records of its snapshot and its log as soon as they are in its log, before they commit: the
latest one is in force. An uncommitted one may be truncated away (diverging epoch), and then the
one before it is in force again; so the history keeps every (offset, value) from the latest
snapshot to the log end offset. Creating a snapshot at offset N forgets the entries below N
except the one in force at N. Without any VotersRecord (kraft.version 0) the static
``controller.quorum.voters`` set is in force.

| history entry        | from                                   | dropped when                 |
|----------------------|----------------------------------------|------------------------------|
| (-1, static set)     | controller.quorum.voters               | never                        |
| (snapshot end, set)  | the snapshot's VotersRecord            | a newer snapshot is loaded   |
| (offset, set)        | a VotersRecord entry at offset         | truncation below offset      |
"""
from __future__ import annotations

import bisect
from typing import Generic, TypeVar

T = TypeVar("T")


class OffsetHistory(Generic[T]):
    """Values by the offset where they appeared; the last one is in force."""

    def __init__(self, initial: T) -> None:
        self.offsets: list[int] = [-1]
        self.values: list[T] = [initial]

    def latest(self) -> T:
        return self.values[-1]

    def latest_offset(self) -> int:
        return self.offsets[-1]

    def add(self, offset: int, value: T) -> None:
        if offset <= self.offsets[-1]:
            raise ValueError(f"history entry at {offset} after {self.offsets[-1]}")
        self.offsets.append(offset)
        self.values.append(value)

    def at(self, offset: int) -> T:
        """The value in force for a log prefix ending just below ``offset``."""
        return self.values[bisect.bisect_left(self.offsets, offset) - 1] if offset > -1 else self.values[0]

    def truncate(self, offset: int) -> bool:
        """Forget entries at or above ``offset`` (never the initial one); True if any went."""
        i = max(1, bisect.bisect_left(self.offsets, offset))
        if i == len(self.offsets):
            return False
        del self.offsets[i:], self.values[i:]
        return True

    def reset(self, offset: int, value: T) -> None:
        """A snapshot ending at ``offset`` was loaded: it holds the value in force there."""
        del self.offsets[1:], self.values[1:]
        self.offsets.append(offset)
        self.values.append(value)

    def trim_before(self, offset: int) -> None:
        """A snapshot at ``offset`` was created: keep what is in force there and what follows."""
        i = bisect.bisect_left(self.offsets, offset) - 1
        if i > 1:
            del self.offsets[1:i], self.values[1:i]
