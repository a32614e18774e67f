"""The acks=all purgatory: produce requests waiting for the high watermark.

Theory of operation (STYLE.md point 7: a threshold waiter keyed by offset). A produce with
acks=-1 is appended by the leader at once; its answer waits until the partition's high
watermark reaches the offset after its last record (the required offset). The replication core
never sees a waiter: it only reports, through an Outcome, that the high watermark of a partition
moved, and the edge calls ``complete_up_to(key, hw, verdict)``, which answers every waiter whose
required offset is <= the new high watermark, lowest offset first. ``verdict(required_offset)`` is
the core's word for each (Partition.check_enough_replicas_reach_offset): NONE, or
NOT_ENOUGH_REPLICAS_AFTER_APPEND when the maximal ISR fell under min.insync.replicas meanwhile.

The other ways out:

| event                                     | who                | answer                    |
|-------------------------------------------|--------------------|---------------------------|
| the high watermark passed the offset      | complete_up_to     | the verdict               |
| the partition lost leadership or went away| fail_partition     | NOT_LEADER_OR_FOLLOWER    |
| the request's timeout_ms expired          | the request, then ``forget`` | REQUEST_TIMED_OUT |
| the broker stops                          | fail_all           | the given code            |

Per partition the waiters are a heap of (required offset, arrival sequence, waiter); the
sequence keeps waiters of equal offset in arrival order. A waiter is a future (``watch``) or
anything answered like one (``park``: ReplicaManager.when_committed's slots, answered inside
the call that moved the high watermark, with no loop hop). The requests' timeouts are kept
apart, in ``Deadlines``: one heap and one event-loop timer for all of them.

Invariants: a waiter is answered at most once (answered and forgotten waiters are skipped when
they surface, and swept once they are more than half of a heap); a heap holds no waiter whose
required offset is <= the last high watermark it was completed at.
"""
from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Callable, Hashable
from typing import Any, Protocol

from replication import errors


class Waiter(Protocol):
    """What the purgatory answers: an asyncio.Future, or a waiter with the same three calls."""

    def done(self) -> bool: ...

    def set_result(self, code: int) -> None: ...

    def cancel(self) -> bool: ...


class AcksPurgatory:
    def __init__(self) -> None:
        self._waiting: dict[Hashable, list[tuple[int, int, Waiter]]] = {}
        self._stale: dict[Hashable, int] = {}  # forgotten futures still in a heap
        self._sequence = itertools.count()

    def watch(self, key: Hashable, required_offset: int) -> asyncio.Future:
        """A future answered with an error code (NONE on success) once the high watermark of
        ``key`` reaches ``required_offset``, or the partition is failed."""
        fut = asyncio.get_running_loop().create_future()
        self.park(key, required_offset, fut)
        return fut

    def park(self, key: Hashable, required_offset: int, waiter: Waiter) -> None:
        """``watch`` with a waiter of the caller's: anything with a future's ``done()``,
        ``set_result(code)`` and ``cancel()``. Its ``set_result`` runs inside the call that
        moved the high watermark, so a waiter that is not a future answers with no hop
        through the event loop (ReplicaManager.when_committed)."""
        heapq.heappush(self._waiting.setdefault(key, []), (required_offset, next(self._sequence), waiter))

    def complete_up_to(self, key: Hashable, high_watermark: int, verdict: Callable[[int], int]) -> int:
        """Answer the waiters of ``key`` whose required offset is <= ``high_watermark``, in
        offset order; returns how many were answered."""
        heap = self._waiting.get(key)
        answered = 0
        while heap and heap[0][0] <= high_watermark:
            required, _, fut = heapq.heappop(heap)
            if fut.done():
                self._stale[key] = max(0, self._stale.get(key, 0) - 1)
                continue
            fut.set_result(verdict(required))
            answered += 1
        if not heap:
            self._drop(key)
        return answered

    def fail_partition(self, key: Hashable, error: int = errors.NOT_LEADER_OR_FOLLOWER) -> int:
        """Answer every waiter of ``key`` with ``error`` (leadership lost, partition removed)."""
        heap = self._waiting.get(key)
        self._drop(key)
        answered = 0
        for _, _, fut in heap or ():
            if not fut.done():
                fut.set_result(error)
                answered += 1
        return answered

    def fail_all(self, error: int) -> None:
        for key in list(self._waiting):
            self.fail_partition(key, error)

    def forget(self, key: Hashable, fut: Waiter) -> None:
        """The request stopped waiting (its timeout, or it was cancelled)."""
        if not fut.done():
            fut.cancel()
        heap = self._waiting.get(key)
        if heap is None:
            return
        stale = self._stale.get(key, 0) + 1
        if stale * 2 > len(heap):
            heap[:] = [entry for entry in heap if not entry[2].done()]
            heapq.heapify(heap)
            stale = 0
            if not heap:
                self._drop(key)
                return
        self._stale[key] = stale

    def waiting(self, key: Hashable) -> list[int]:
        """Required offsets still waiting on ``key``, lowest first."""
        return sorted(required for required, _, fut in self._waiting.get(key, ()) if not fut.done())

    def _drop(self, key: Hashable) -> None:
        self._waiting.pop(key, None)
        self._stale.pop(key, None)

    def __len__(self) -> int:
        return sum(1 for heap in self._waiting.values() for _, _, fut in heap if not fut.done())


class Deadlines:
    """The timeouts of the requests waiting in the purgatory, on one event-loop timer (Kafka's
    purgatory has its timing wheel): a heap of (deadline, arrival sequence, wait) with the
    timer armed for the earliest. A wait answered before its deadline stays in the heap until
    it surfaces (``finished`` counts it), or until such waits are most of the heap, which is
    then swept. A wait offers ``finished`` (answered: skip it) and ``expire()``.

    Every acks=all produce has a timeout. With one loop timer each (a TimerHandle made, pushed
    on the loop's heap, cancelled, swept from it), the timer was about two fifths of what
    parking a produce cost (``when_committed`` profiled on a leader under load)."""

    SWEEP_MIN = 64  # no sweep below this many entries

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, Any]] = []
        self._sequence = itertools.count()
        self._finished = 0  # answered waits still in the heap
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = 0.0

    def add(self, timeout_s: float, wait: Any) -> None:
        """Call ``wait.expire()`` in ``timeout_s`` unless it is ``finished`` by then."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        heapq.heappush(self._heap, (deadline, next(self._sequence), wait))
        if self._timer is None or deadline < self._timer_at:
            self._arm(loop, deadline)

    def finished(self) -> None:
        """A wait in the heap was answered before its deadline."""
        self._finished += 1
        heap = self._heap
        if self._finished * 2 > len(heap) >= self.SWEEP_MIN:
            heap[:] = [entry for entry in heap if not entry[2].finished]
            heapq.heapify(heap)
            self._finished = 0

    def __len__(self) -> int:
        """Waits still to expire."""
        return len(self._heap) - self._finished

    def _arm(self, loop: asyncio.AbstractEventLoop, deadline: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = loop.call_at(deadline, self._fire, loop)
        self._timer_at = deadline

    def _fire(self, loop: asyncio.AbstractEventLoop) -> None:
        self._timer = None
        heap = self._heap
        now = loop.time()
        while heap and heap[0][0] <= now:
            wait = heapq.heappop(heap)[2]
            if wait.finished:
                self._finished -= 1
            else:
                wait.expire()
        if heap:
            self._arm(loop, heap[0][0])
