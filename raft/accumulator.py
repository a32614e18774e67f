"""The leader's append accumulator: client values gathered into batches for ``RaftCore.append``.

Values appended within ``controller.quorum.append.linger.ms`` of the first one of a batch go to
the core together, as one batch (one log append, one flush, one round of Fetch answers); a batch
is closed early when the next values would take it past MAX_BATCH_SIZE bytes (8 MiB, Kafka's
KafkaRaftClient.MAX_BATCH_SIZE_BYTES) and the values go to a new batch. Offsets are promised at
append time: the first batch starts at the log end offset when it opened and the batches are
contiguous, which holds as long as nothing else is appended to the log in between — the driver
hands the batches to the core before any step that may append a control record (voter changes),
and drops them, failing their waiters, if the log end offset moved anyway.
"""
from __future__ import annotations

from dataclasses import dataclass, field

MAX_BATCH_SIZE = 8 << 20


class RecordBatchTooLargeError(ValueError):
    """One append larger than MAX_BATCH_SIZE."""


@dataclass
class Batch:
    values: list = field(default_factory=list)
    size: int = 0


class BatchAccumulator:
    def __init__(self, max_batch_size: int = MAX_BATCH_SIZE) -> None:
        self.max_batch_size = max_batch_size
        self.batches: list[Batch] = []
        self.base_offset = -1  # offset of the first pending value
        self.epoch = -1
        self.count = 0  # pending values

    def __bool__(self) -> bool:
        return self.count > 0

    def append(self, values: list, log_end_offset: int, epoch: int) -> int:
        """Queue ``values``; returns the offset the last of them will get."""
        size = sum(len(v) for v in values)
        if size > self.max_batch_size:
            raise RecordBatchTooLargeError(f"{size} bytes in one append, the limit is {self.max_batch_size}")
        if not self.count:
            self.base_offset, self.epoch = log_end_offset, epoch
        if not self.batches or self.batches[-1].size + size > self.max_batch_size:
            self.batches.append(Batch())
        batch = self.batches[-1]
        batch.values += values
        batch.size += size
        self.count += len(values)
        return self.base_offset + self.count - 1

    def is_full(self) -> bool:
        """A batch is closed and waits to be drained."""
        return len(self.batches) > 1

    def drain(self) -> tuple[int, int, list[list]]:
        """(base offset, epoch, the batches' values), leaving the accumulator empty."""
        out = (self.base_offset, self.epoch, [b.values for b in self.batches])
        self.batches, self.count, self.base_offset, self.epoch = [], 0, -1, -1
        return out
