"""The commit purgatory: callers waiting for the high watermark to pass an offset (STYLE.md 7).

Threshold waiters keyed by offset, in a heap: when the driver learns "the high watermark is now
X" it completes, in offset order, every waiter whose offset is below X. The waiters belong to one
leader epoch (a leader only learns commits of offsets it appended in its own epoch); when the
replica stops being the leader of that epoch, every waiter fails with NotLeaderError — its entry
may still commit under the next leader, but this replica can no longer tell.
"""
from __future__ import annotations

import asyncio
import heapq
import itertools

from .errors import NotLeaderError


class CommitPurgatory:
    def __init__(self) -> None:
        self._waiters: list[tuple[int, int, asyncio.Future]] = []
        self._seq = itertools.count()
        self.epoch = -1  # the leader epoch the waiters were registered in

    def __len__(self) -> int:
        return len(self._waiters)

    def watch(self, offset: int, epoch: int) -> asyncio.Future:
        if self._waiters and epoch != self.epoch:
            self.fail_all(NotLeaderError(f"leader epoch {self.epoch} ended"))
        self.epoch = epoch
        fut = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiters, (offset, next(self._seq), fut))
        return fut

    def complete(self, high_watermark: int) -> None:
        """Every waiter for an offset below ``high_watermark`` is committed."""
        w = self._waiters
        while w and w[0][0] < high_watermark:
            _, _, fut = heapq.heappop(w)
            if not fut.done():
                fut.set_result(None)

    def fail_from(self, offset: int, error: Exception) -> None:
        """Fail the waiters at or above ``offset`` (entries that will never be appended)."""
        keep = []
        for item in self._waiters:
            if item[0] >= offset:
                if not item[2].done():
                    item[2].set_exception(error)
            else:
                keep.append(item)
        heapq.heapify(keep)
        self._waiters = keep

    def fail_all(self, error: Exception) -> None:
        waiters, self._waiters = self._waiters, []
        for _, _, fut in waiters:
            if not fut.done():
                fut.set_exception(error)
