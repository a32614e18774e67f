"""Fetches waiting for data (long polls), keyed by the partitions they read.

A fetch that has fewer than min_bytes registers one future under each of its partitions;
an append to a partition completes the futures registered under it (and only those), so
a waiting fetch is answered as soon as data arrives for it, and an append wakes no fetch
that does not read that partition. A metadata change wakes them all (leaders move,
partitions go away: their errors are answered at once).

Replica fetches wait apart (``replica=True``): a move of the high watermark brings consumers
records to read (``notify(key, replicas=False)``) but a follower nothing, as it reads up to the
log end offset and learns the high watermark with its next records (broker/handlers/fetch.py).
"""
from __future__ import annotations

import asyncio
from collections.abc import Hashable, Iterable


class FetchWaiters:
    def __init__(self) -> None:
        self._waiting: dict[Hashable, set[asyncio.Future]] = {}
        self._replicas: dict[Hashable, set[asyncio.Future]] = {}  # replica fetches, apart

    def wait(self, keys: Iterable[Hashable], replica: bool = False) -> asyncio.Future:
        """A future completed by the next ``notify`` of any of ``keys``; pass it to
        ``forget`` once done with it."""
        fut = asyncio.get_running_loop().create_future()
        waiting = self._replicas if replica else self._waiting
        for key in keys:
            waiting.setdefault(key, set()).add(fut)
        return fut

    def forget(self, keys: Iterable[Hashable], fut: asyncio.Future, replica: bool = False) -> None:
        waiting = self._replicas if replica else self._waiting
        for key in keys:
            futures = waiting.get(key)
            if futures is not None:
                futures.discard(fut)
                if not futures:
                    del waiting[key]

    def notify(self, key: Hashable, replicas: bool = True) -> None:
        """Wake the fetches waiting on ``key``: consumers', and replicas' unless told not to."""
        _complete(self._waiting.pop(key, None))
        if replicas:
            _complete(self._replicas.pop(key, None))

    def notify_all(self) -> None:
        for key in list(self._waiting) + list(self._replicas):
            self.notify(key)

    def __len__(self) -> int:
        return len(self._waiting.keys() | self._replicas.keys())


def _complete(futures: set[asyncio.Future] | None) -> None:
    for fut in futures or ():
        if not fut.done():
            fut.set_result(None)
