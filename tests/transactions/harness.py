"""A driver for the transaction coordinator's core in tests: a log per __transaction_state
partition that the writes append to, and a producer id allocator."""
from __future__ import annotations

from broker.transactions import storage
from broker.transactions.coordinator import Effects, TransactionConfig, TransactionCoordinator


class Allocator:
    def __init__(self, start: int = 1000):
        self.next = start
        self.exhausted = False

    def __call__(self) -> int | None:
        if self.exhausted:
            return None
        self.next += 1
        return self.next - 1


class Node:
    """One coordinator over an in-memory log per partition; writes are held until ``flush``."""

    def __init__(self, partitions: int = 4, config: TransactionConfig | None = None,
                 allocator: Allocator | None = None, logs: dict[int, list] | None = None,
                 coordinator_epoch: int = 0, now_ms: int = 0):
        self.allocator = allocator or Allocator()
        self.core = TransactionCoordinator(self.allocator, config or TransactionConfig(),
                                           num_partitions=partitions)
        self.logs: dict[int, list] = logs if logs is not None else {p: [] for p in range(partitions)}
        self.replies: list = []
        self.markers: list = []
        self.held: list = []
        for p in range(partitions):
            self.load(p, coordinator_epoch, now_ms)

    def load(self, p: int, coordinator_epoch: int, now_ms: int) -> Effects:
        self.core.begin_load(p, coordinator_epoch)
        fx = self.core.complete_load(p, coordinator_epoch, storage.replay(self.logs[p]), now_ms)
        self.take(fx)
        return fx

    def take(self, fx: Effects) -> Effects:
        self.replies += fx.replies
        self.markers += fx.markers
        self.held += fx.writes
        return fx

    def flush(self, now_ms: int, error: int = 0) -> None:
        """Commit (or fail with ``error``) every held write, and those they lead to."""
        while self.held:
            w = self.held.pop(0)
            if not error:
                self.logs[w.partition].append(w.record)
            self.take(self.core.complete_write(w, error, now_ms))

    def step(self, fx: Effects, now_ms: int, error: int = 0):
        """Take ``fx``, flush, and return the last reply."""
        before = len(self.replies)
        self.take(fx)
        self.flush(now_ms, error)
        new = self.replies[before:]
        return new[-1][1] if new else None

    def write_markers(self, now_ms: int) -> None:
        while self.markers:
            m = self.markers.pop(0)
            self.take(self.core.on_markers_written(m.transactional_id, m.coordinator_epoch, m.partitions,
                                                   now_ms))
            self.flush(now_ms)
