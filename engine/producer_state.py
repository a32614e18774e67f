"""Idempotent producer state of one partition (Kafka's ProducerStateManager).

For every producer id the partition remembers its epoch and its last five batches
(first/last sequence, first/last offset). A leader append of a batch with a producer id is
checked against it:

    older epoch                         -> INVALID_PRODUCER_EPOCH (fenced)
    newer epoch                         -> must start at sequence 0
    a batch equal to a remembered one   -> a duplicate: not written again; the original
                                           offsets are returned
    first sequence != last sequence + 1 -> OUT_OF_ORDER_SEQUENCE_NUMBER
    unknown producer, sequence != 0     -> UNKNOWN_PRODUCER_ID

Sequences wrap at 2**31. The state is rebuilt after a restart from the batch headers in
the log (no records are decoded); Kafka's producer snapshot files, which bound that scan,
are not written yet.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

BATCHES_KEPT = 5
INT_MAX = 2**31 - 1


class ProducerFencedError(Exception):
    """An append from an older producer epoch."""


class OutOfOrderSequenceError(Exception):
    pass


class UnknownProducerIdError(Exception):
    pass


@dataclass(frozen=True)
class BatchMetadata:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int


@dataclass
class ProducerEntry:
    epoch: int
    batches: deque = field(default_factory=lambda: deque(maxlen=BATCHES_KEPT))

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1


def _next_seq(seq: int) -> int:
    return 0 if seq == INT_MAX else seq + 1


class ProducerStateManager:
    def __init__(self) -> None:
        self.producers: dict[int, ProducerEntry] = {}

    def check(self, producer_id: int, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        """Validate one batch before it is written. Returns the remembered batch if this one
        is a duplicate (retry of a batch already in the log), None if it may be written."""
        entry = self.producers.get(producer_id)
        if entry is None:
            if first_seq != 0:
                raise UnknownProducerIdError(
                    f"producer {producer_id} is unknown here and its first sequence is {first_seq}")
            return None
        if epoch < entry.epoch:
            raise ProducerFencedError(
                f"producer {producer_id} epoch {epoch} is older than the current epoch {entry.epoch}")
        if epoch > entry.epoch:
            if first_seq != 0:
                raise OutOfOrderSequenceError(
                    f"producer {producer_id} new epoch {epoch} must start at sequence 0, not {first_seq}")
            return None
        for batch in entry.batches:
            if batch.first_seq == first_seq and batch.last_seq == last_seq:
                return batch
        if first_seq != _next_seq(entry.last_seq):
            raise OutOfOrderSequenceError(
                f"producer {producer_id} sent sequence {first_seq}, expected {_next_seq(entry.last_seq)}")
        return None

    def update(self, producer_id: int, epoch: int, first_seq: int, last_seq: int,
               first_offset: int, last_offset: int) -> None:
        """Record a batch that was written (leader or follower append, or log replay)."""
        entry = self.producers.get(producer_id)
        if entry is None or epoch > entry.epoch:
            entry = self.producers[producer_id] = ProducerEntry(epoch)
        elif epoch < entry.epoch:
            return
        entry.batches.append(BatchMetadata(first_seq, last_seq, first_offset, last_offset))

    def truncate(self) -> None:
        self.producers.clear()
