"""Fetches waiting for data (long polls), keyed by the partitions they read.

A fetch that has fewer than min_bytes registers one future under each of its partitions;
an append to a partition completes the futures registered under it (and only those), so
a waiting fetch is answered as soon as data arrives for it, and an append wakes no fetch
that does not read that partition. A metadata change wakes them all (leaders move,
partitions go away: their errors are answered at once).
"""
from __future__ import annotations

import asyncio
from collections.abc import Hashable, Iterable


class FetchWaiters:
    def __init__(self) -> None:
        self._waiting: dict[Hashable, set[asyncio.Future]] = {}

    def wait(self, keys: Iterable[Hashable]) -> asyncio.Future:
        """A future completed by the next ``notify`` of any of ``keys``; pass it to
        ``forget`` once done with it."""
        fut = asyncio.get_running_loop().create_future()
        for key in keys:
            self._waiting.setdefault(key, set()).add(fut)
        return fut

    def forget(self, keys: Iterable[Hashable], fut: asyncio.Future) -> None:
        for key in keys:
            waiting = self._waiting.get(key)
            if waiting is not None:
                waiting.discard(fut)
                if not waiting:
                    del self._waiting[key]

    def notify(self, key: Hashable) -> None:
        waiting = self._waiting.pop(key, None)
        if waiting:
            for fut in waiting:
                if not fut.done():
                    fut.set_result(None)

    def notify_all(self) -> None:
        for key in list(self._waiting):
            self.notify(key)

    def __len__(self) -> int:
        return len(self._waiting)
