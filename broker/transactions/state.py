"""A transactional id's state, and Kafka's rules for moving it (TransactionState and
TransactionMetadata of Kafka's transaction coordinator).

States, with the id the transaction log stores and the states each may be entered from::

    Empty              0   Empty, CompleteCommit, CompleteAbort            (InitProducerId)
    Ongoing            1   Ongoing, Empty, CompleteCommit, CompleteAbort   (AddPartitions/AddOffsets)
    PrepareCommit      2   Ongoing                                         (EndTxn commit)
    PrepareAbort       3   Ongoing, PrepareEpochFence, Empty,              (EndTxn abort, fencing, timeout;
                           CompleteCommit, CompleteAbort                    from a complete state: TV2 only)
    CompleteCommit     4   PrepareCommit                                   (every marker written)
    CompleteAbort      5   PrepareAbort                                    (every marker written)
    Dead               6   Empty, CompleteCommit, CompleteAbort            (transactional.id.expiration.ms)
    PrepareEpochFence  7   Ongoing                                         (a new producer fences an
                                                                            ongoing transaction)

A transition is two steps, as in Kafka: ``prepare_*`` checks it is legal from the current
state, sets ``pending`` and returns the target (a copy, ``TransactionMetadata``), whose record
the caller writes to the log; ``complete_transition`` applies the target once the write is
committed, ``abort_transition`` drops it when the write failed. While a transition is pending
no other may be prepared: the coordinator answers CONCURRENT_TRANSACTIONS. PrepareEpochFence is
only ever pending: the coordinator turns it into a PrepareAbort at the fenced epoch.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from enum import IntEnum

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
SHORT_MAX = 32767


class TxnState(IntEnum):
    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        """The name DescribeTransactions and ListTransactions show."""
        return _NAMES[self]

    @classmethod
    def from_name(cls, name: str) -> TxnState | None:
        return _BY_NAME.get(name)

    @property
    def expiration_allowed(self) -> bool:
        return self in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)


_NAMES = {
    TxnState.EMPTY: "Empty", TxnState.ONGOING: "Ongoing", TxnState.PREPARE_COMMIT: "PrepareCommit",
    TxnState.PREPARE_ABORT: "PrepareAbort", TxnState.COMPLETE_COMMIT: "CompleteCommit",
    TxnState.COMPLETE_ABORT: "CompleteAbort", TxnState.DEAD: "Dead",
    TxnState.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}
_BY_NAME = {name: state for state, name in _NAMES.items()}

_COMPLETE = frozenset({TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT})

VALID_PREVIOUS: dict[TxnState, frozenset[TxnState]] = {
    TxnState.EMPTY: _COMPLETE,
    TxnState.ONGOING: _COMPLETE | {TxnState.ONGOING},
    TxnState.PREPARE_COMMIT: frozenset({TxnState.ONGOING}),
    TxnState.PREPARE_ABORT: _COMPLETE | {TxnState.ONGOING, TxnState.PREPARE_EPOCH_FENCE},
    TxnState.COMPLETE_COMMIT: frozenset({TxnState.PREPARE_COMMIT}),
    TxnState.COMPLETE_ABORT: frozenset({TxnState.PREPARE_ABORT}),
    TxnState.DEAD: _COMPLETE,
    TxnState.PREPARE_EPOCH_FENCE: frozenset({TxnState.ONGOING}),
}

TopicPartition = tuple[str, int]


class IllegalTransition(Exception):
    """A transition Kafka's state table does not allow (a coordinator bug, never a client's)."""


def is_epoch_exhausted(epoch: int) -> bool:
    """No epoch at or above Short.MAX_VALUE - 1 goes to a client: the coordinator must always
    be able to bump once more to fence it."""
    return epoch >= SHORT_MAX - 1


@dataclass
class TransactionMetadata:
    transactional_id: str
    producer_id: int
    previous_producer_id: int = NO_PRODUCER_ID
    next_producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    timeout_ms: int = 60000
    state: TxnState = TxnState.EMPTY
    partitions: set[TopicPartition] = field(default_factory=set)
    start_ms: int = -1
    last_update_ms: int = -1
    client_transaction_version: int = 0
    # not persisted
    pending: TxnState | None = None
    has_failed_epoch_fence: bool = False

    def copy(self) -> TransactionMetadata:
        return replace(self, partitions=set(self.partitions), pending=None)

    @property
    def pending_in_progress(self) -> bool:
        return self.pending is not None

    @property
    def epoch_exhausted(self) -> bool:
        return is_epoch_exhausted(self.producer_epoch)

    @property
    def has_pending_transaction(self) -> bool:
        return self.state in (TxnState.ONGOING, TxnState.PREPARE_ABORT, TxnState.PREPARE_COMMIT)

    # ---- the transitions (Kafka's prepare*) --------------------------------------------

    def _prepare(self, target: TransactionMetadata) -> TransactionMetadata:
        if self.pending is not None:
            raise IllegalTransition(f"{self.transactional_id}: {target.state.kafka_name} prepared while "
                                    f"{self.pending.kafka_name} is pending")
        if target.producer_id < 0:
            raise IllegalTransition(f"illegal producer id {target.producer_id}")
        if target.state is not TxnState.DEAD and target.producer_epoch < 0:
            raise IllegalTransition(f"illegal producer epoch {target.producer_epoch}")
        if self.state not in VALID_PREVIOUS[target.state]:
            raise IllegalTransition(f"{self.transactional_id}: {self.state.kafka_name} -> "
                                    f"{target.state.kafka_name} is not a legal transition")
        target.previous_producer_id = self.producer_id  # Kafka's transit keeps the current id as previous
        self.pending = target.state
        return target

    def prepare_fence_producer_epoch(self) -> TransactionMetadata:
        """Ongoing -> PrepareEpochFence at the next epoch (not again after a failed fence)."""
        bumped = self.producer_epoch
        if not (self.has_failed_epoch_fence or self.producer_epoch == SHORT_MAX):
            bumped += 1
        t = self.copy()
        t.state, t.producer_epoch = TxnState.PREPARE_EPOCH_FENCE, bumped
        return self._prepare(t)

    def prepare_increment_producer_epoch(self, timeout_ms: int, expected_epoch: int | None,
                                         now_ms: int) -> TransactionMetadata | int:
        """-> Empty at the next epoch (InitProducerId); PRODUCER_FENCED's code (90) when
        ``expected_epoch`` is neither the current nor the last epoch."""
        t = self.copy()
        bumped = self.producer_epoch + 1
        if expected_epoch is None:
            t.producer_epoch, t.last_producer_epoch = bumped, NO_PRODUCER_EPOCH
        elif self.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == self.producer_epoch:
            t.producer_epoch, t.last_producer_epoch = bumped, self.producer_epoch
        elif expected_epoch == self.last_producer_epoch:
            pass  # a retry of an InitProducerId that succeeded: the same epoch again
        else:
            return 90  # PRODUCER_FENCED
        if t.producer_epoch != self.producer_epoch and self.epoch_exhausted:
            raise IllegalTransition(f"no epoch left for producer id {self.producer_id}")
        t.state, t.timeout_ms, t.partitions = TxnState.EMPTY, timeout_ms, set()
        t.start_ms, t.last_update_ms = -1, now_ms
        return self._prepare(t)

    def prepare_producer_id_rotation(self, producer_id: int, timeout_ms: int, now_ms: int,
                                     record_last_epoch: bool) -> TransactionMetadata:
        """-> Empty with a new producer id at epoch 0 (the old one's epochs are exhausted)."""
        if self.has_pending_transaction:
            raise IllegalTransition("producer id rotated while a transaction is pending")
        t = self.copy()
        t.producer_id, t.producer_epoch = producer_id, 0
        t.last_producer_epoch = self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH
        t.state, t.timeout_ms, t.partitions = TxnState.EMPTY, timeout_ms, set()
        t.start_ms, t.last_update_ms = -1, now_ms
        return self._prepare(t)

    def prepare_add_partitions(self, partitions: Iterable[TopicPartition], now_ms: int,
                               client_transaction_version: int) -> TransactionMetadata:
        t = self.copy()
        if self.state in _COMPLETE:
            t.start_ms = now_ms
        t.partitions |= set(partitions)
        t.state, t.last_update_ms = TxnState.ONGOING, now_ms
        t.client_transaction_version = client_transaction_version
        return self._prepare(t)

    def prepare_abort_or_commit(self, state: TxnState, client_transaction_version: int,
                                next_producer_id: int, now_ms: int,
                                no_partition_added: bool) -> TransactionMetadata:
        """-> PrepareCommit or PrepareAbort; with transaction version 2 the epoch is bumped
        (KIP-890): the markers and the producer's next transaction use the new one."""
        t = self.copy()
        if client_transaction_version >= 2:
            if not (self.producer_epoch == SHORT_MAX and state is TxnState.PREPARE_ABORT):
                t.producer_epoch = self.producer_epoch + 1
            t.last_producer_epoch = self.producer_epoch
        t.start_ms = now_ms if no_partition_added else self.start_ms
        t.next_producer_id, t.last_update_ms = next_producer_id, now_ms
        t.state, t.client_transaction_version = state, client_transaction_version
        return self._prepare(t)

    def prepare_complete(self, now_ms: int) -> TransactionMetadata:
        """PrepareCommit -> CompleteCommit, PrepareAbort -> CompleteAbort, every marker written;
        an exhausted epoch moves to the next producer id at epoch 0 (TV2)."""
        self.has_failed_epoch_fence = False
        t = self.copy()
        t.state = (TxnState.COMPLETE_COMMIT if self.state is TxnState.PREPARE_COMMIT
                   else TxnState.COMPLETE_ABORT)
        if self.client_transaction_version >= 2 and self.next_producer_id != NO_PRODUCER_ID:
            t.producer_id, t.producer_epoch = self.next_producer_id, 0
        t.next_producer_id, t.partitions, t.last_update_ms = NO_PRODUCER_ID, set(), now_ms
        return self._prepare(t)

    def prepare_dead(self) -> TransactionMetadata:
        t = self.copy()
        t.state, t.partitions = TxnState.DEAD, set()
        return self._prepare(t)

    # ---- the second step ------------------------------------------------------------------

    def complete_transition(self, target: TransactionMetadata) -> None:
        """Apply ``target``, whose record the log committed (Kafka's completeTransitionTo)."""
        if self.pending is not target.state:
            raise IllegalTransition(f"{self.transactional_id}: completing {target.state.kafka_name} "
                                    f"but {self.pending} is pending")
        if target.last_update_ms < self.last_update_ms:
            raise IllegalTransition("a transition's update time went backwards")
        if target.producer_id == self.producer_id and target.producer_epoch < self.producer_epoch:
            raise IllegalTransition("a transition's producer epoch went backwards")
        for name in ("producer_id", "previous_producer_id", "next_producer_id", "producer_epoch",
                     "last_producer_epoch", "timeout_ms", "state", "start_ms", "last_update_ms",
                     "client_transaction_version"):
            setattr(self, name, getattr(target, name))
        self.partitions = set(target.partitions)
        self.pending = None

    def abort_transition(self) -> None:
        self.pending = None

