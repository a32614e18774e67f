"""The transaction coordinator: the transactional ids of ``__transaction_state`` as a pure
state machine (Kafka's TransactionCoordinator and TransactionStateManager, KIP-98, KIP-360,
KIP-890 with transaction.version 2).

Theory of operation. The core owns the transactional ids of the ``__transaction_state``
partitions this broker leads, each loaded at the partition's leader epoch (the *coordinator
epoch*). It is stepped with requests, write and marker outcomes and the time (``now_ms``);
it never sleeps, sends or writes, and draws producer ids from an injected allocator. Every
step returns ``Effects``:

    writes    ``Write``: one record for a transactional id's partition. The shell appends it
              (acks=all) and calls ``complete_write(write, error, now_ms)`` once it is committed
              or failed; the state changes only then ("each transition persisted before it is
              acted on": Kafka's pendingState and completeTransitionTo). While a write is
              outstanding the id has a pending transition and every other request on it is
              answered CONCURRENT_TRANSACTIONS.
    markers   ``MarkerRequest``: WriteTxnMarkers to send for one transaction (producer id,
              epoch, commit or abort, coordinator epoch, its partitions); the shell groups them
              by partition leader, retries each partition until its leader answers, across
              leader moves, and reports each written partition with ``on_markers_written``.
              When the last partition is written the core writes CompleteCommit/CompleteAbort.
    replies   (waiter, reply): the answers to requests; a reply that waits for a write comes
              out of the ``complete_write`` step, never before its record is committed.

A transaction's life with transaction.version 2 (EndTxn v5+, the epoch bumped at each end)::

    InitProducerId  -> write Empty(pid, e)             -> reply (pid, e)
    AddPartitions   -> write Ongoing(pid, e, {tp...})  -> reply NONE
    EndTxn(commit)  -> write PrepareCommit(pid, e+1)   -> reply (pid, e+1); markers at e+1
    markers written -> write CompleteCommit(pid, e+1)

Fencing: InitProducerId on an Ongoing transaction bumps the epoch (PrepareEpochFence, only
ever pending), aborts the transaction at the fenced epoch and answers CONCURRENT_TRANSACTIONS;
the client retries and gets the next epoch once the abort completed. ``tick`` aborts the
transactions older than their transaction.timeout.ms the same way and expires the ids idle
for transactional.id.expiration.ms (a tombstone).

Loading (``begin_load``, ``complete_load``): the transactions ``storage.replay`` rebuilt from
the partition's records; a PrepareCommit or PrepareAbort found there resumes sending its
markers. ``unload`` forgets a partition's ids; writes and markers of an older coordinator
epoch are then ignored when they complete.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from broker.groups.storage import partition_for as group_partition_for
from broker.transactions import storage
from broker.transactions.state import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    SHORT_MAX,
    TopicPartition,
    TransactionMetadata,
    TxnState,
)
from protocol.errors import Error

OFFSETS_TOPIC = "__consumer_offsets"

# A producer id from this broker's block (AllocateProducerIds); None while no block is at hand.
ProducerIdAllocator = Callable[[], "int | None"]


@dataclass
class TransactionConfig:
    max_timeout_ms: int = 900000  # transaction.max.timeout.ms
    id_expiration_ms: int = 604800000  # transactional.id.expiration.ms
    offsets_partitions: int = 50  # offsets.topic.num.partitions, for AddOffsetsToTxn
    # The cluster's transaction.version: an abort no client asked for (a fence, a timeout) is
    # made at it, as Kafka's txnManager.transactionVersionLevel() ("not from client, use server TV").
    transaction_version: int = 2


@dataclass
class InitProducerIdReply:
    error_code: int
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


@dataclass
class EndTxnReply:
    error_code: int
    producer_id: int = NO_PRODUCER_ID  # EndTxn v5+: the producer's next id and epoch
    producer_epoch: int = NO_PRODUCER_EPOCH


@dataclass
class TxnReply:
    """AddPartitionsToTxn (one transaction: the same error for each of its partitions) and
    AddOffsetsToTxn."""
    error_code: int


@dataclass
class Write:
    """A record to append to ``partition`` of __transaction_state before ``target`` holds."""
    partition: int
    coordinator_epoch: int
    transactional_id: str
    record: storage.Record
    target: TransactionMetadata
    # what the write completes: "init", "add", "end", "fence", "timeout", "complete", "expire"
    kind: str
    waiter: Any = None
    commit: bool = False  # "end", "fence", "timeout": the transaction's result
    producer_id: int = NO_PRODUCER_ID  # the request's, for the checks after the write
    producer_epoch: int = NO_PRODUCER_EPOCH


@dataclass
class MarkerRequest:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    commit: bool
    coordinator_epoch: int
    partitions: list[TopicPartition]
    transaction_version: int


@dataclass
class Effects:
    writes: list[Write] = field(default_factory=list)
    markers: list[MarkerRequest] = field(default_factory=list)
    replies: list[tuple[Any, Any]] = field(default_factory=list)

    def reply(self, waiter: Any, response: Any) -> None:
        self.replies.append((waiter, response))

    def extend(self, other: Effects) -> None:
        self.writes += other.writes
        self.markers += other.markers
        self.replies += other.replies


# The log append's errors as the transaction coordinator answers them (appendTransactionToLog).
_APPEND_ERRORS = {
    Error.UNKNOWN_TOPIC_OR_PARTITION: Error.COORDINATOR_NOT_AVAILABLE,
    Error.NOT_ENOUGH_REPLICAS: Error.COORDINATOR_NOT_AVAILABLE,
    Error.NOT_ENOUGH_REPLICAS_AFTER_APPEND: Error.COORDINATOR_NOT_AVAILABLE,
    Error.REQUEST_TIMED_OUT: Error.COORDINATOR_NOT_AVAILABLE,
    Error.NOT_LEADER_OR_FOLLOWER: Error.NOT_COORDINATOR,
    Error.KAFKA_STORAGE_ERROR: Error.NOT_COORDINATOR,
    Error.MESSAGE_TOO_LARGE: Error.UNKNOWN_SERVER_ERROR,
    Error.RECORD_LIST_TOO_LARGE: Error.UNKNOWN_SERVER_ERROR,
}


def append_error(error: int) -> int:
    return int(_APPEND_ERRORS.get(Error(error), error)) if error else 0


class TransactionCoordinator:
    def __init__(self, allocate_producer_id: ProducerIdAllocator,
                 config: TransactionConfig | None = None, num_partitions: int = 50):
        self.allocate_producer_id = allocate_producer_id
        self.config = config or TransactionConfig()
        self.num_partitions = num_partitions  # of __transaction_state
        self.owned: dict[int, int] = {}  # partition -> coordinator epoch
        self.loading: dict[int, int] = {}
        self.transactions: dict[str, TransactionMetadata] = {}
        # CompleteCommit/CompleteAbort prepared while a transaction's markers go out
        self.completions: dict[str, TransactionMetadata] = {}

    # ---- partitions ----------------------------------------------------------------------

    def partition_for(self, transactional_id: str) -> int:
        return storage.partition_for(transactional_id, self.num_partitions)

    def coordinator_error(self, transactional_id: str) -> int:
        """What FindCoordinator's answer means here: NONE, COORDINATOR_LOAD_IN_PROGRESS or
        NOT_COORDINATOR (Kafka's getTransactionState)."""
        if self.num_partitions <= 0:
            return Error.COORDINATOR_NOT_AVAILABLE
        p = self.partition_for(transactional_id)
        if p in self.loading:
            return Error.COORDINATOR_LOAD_IN_PROGRESS
        if p not in self.owned:
            return Error.NOT_COORDINATOR
        return Error.NONE

    def begin_load(self, partition: int, coordinator_epoch: int) -> None:
        self.unload(partition)
        self.loading[partition] = coordinator_epoch

    def complete_load(self, partition: int, coordinator_epoch: int,
                      transactions: dict[str, TransactionMetadata], now_ms: int) -> Effects:
        """Take over a partition whose records were replayed into ``transactions`` (see
        ``storage.replay``); a transaction left in PrepareCommit or PrepareAbort resumes its
        markers, as Kafka's load hands them to the marker channel."""
        fx = Effects()
        if self.loading.get(partition) != coordinator_epoch:
            return fx  # unloaded or reloaded at a newer epoch meanwhile
        del self.loading[partition]
        self.owned[partition] = coordinator_epoch
        for tid, meta in sorted(transactions.items()):
            meta = meta.copy()
            self.transactions[tid] = meta
            if meta.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
                self._send_markers(meta, coordinator_epoch, now_ms, fx)
        return fx

    def unload(self, partition: int) -> None:
        self.owned.pop(partition, None)
        self.loading.pop(partition, None)
        for tid in [t for t in self.transactions if self.partition_for(t) == partition]:
            del self.transactions[tid]
            self.completions.pop(tid, None)

    def _lookup(self, tid: str) -> tuple[int, TransactionMetadata | None]:
        error = self.coordinator_error(tid)
        return (error, None) if error else (Error.NONE, self.transactions.get(tid))

    def _epoch(self, tid: str) -> int:
        return self.owned[self.partition_for(tid)]

    def _write(self, meta: TransactionMetadata, target: TransactionMetadata, kind: str, fx: Effects,
               waiter: Any = None, commit: bool = False, producer_id: int = NO_PRODUCER_ID,
               producer_epoch: int = NO_PRODUCER_EPOCH) -> None:
        tid = meta.transactional_id
        p = self.partition_for(tid)
        fx.writes.append(Write(p, self.owned[p], tid, storage.record(target), target, kind, waiter,
                               commit, producer_id, producer_epoch))

    # ---- InitProducerId ------------------------------------------------------------------

    def init_producer_id(self, transactional_id: str, timeout_ms: int, producer_id: int,
                         producer_epoch: int, now_ms: int, waiter: Any = None) -> Effects:
        """InitProducerId with a transactional id (a null one is the idempotent producer's,
        answered without the coordinator). ``producer_id``/``producer_epoch`` -1 unless the
        producer recovers (KIP-360)."""
        fx = Effects()
        if not transactional_id:
            fx.reply(waiter, InitProducerIdReply(Error.INVALID_REQUEST))
            return fx
        if (producer_id == NO_PRODUCER_ID) != (producer_epoch == NO_PRODUCER_EPOCH):
            fx.reply(waiter, InitProducerIdReply(Error.INVALID_REQUEST))
            return fx
        if not 0 < timeout_ms <= self.config.max_timeout_ms:
            fx.reply(waiter, InitProducerIdReply(Error.INVALID_TRANSACTION_TIMEOUT))
            return fx
        error, meta = self._lookup(transactional_id)
        if error:
            fx.reply(waiter, InitProducerIdReply(error))
            return fx
        if meta is None:
            new_id = self.allocate_producer_id()
            if new_id is None:
                fx.reply(waiter, InitProducerIdReply(Error.COORDINATOR_LOAD_IN_PROGRESS))
                return fx
            meta = TransactionMetadata(transactional_id, new_id, timeout_ms=timeout_ms,
                                       last_update_ms=now_ms)
            self.transactions[transactional_id] = meta
        expected = None if producer_id == NO_PRODUCER_ID else (producer_id, producer_epoch)

        def valid_producer_id(pid: int, epoch: int) -> bool:
            return (meta.producer_epoch == NO_PRODUCER_EPOCH or pid == meta.producer_id
                    or (pid == meta.previous_producer_id and epoch >= SHORT_MAX - 1))

        if meta.pending_in_progress:
            fx.reply(waiter, InitProducerIdReply(Error.CONCURRENT_TRANSACTIONS))
        elif expected is not None and not valid_producer_id(*expected):
            fx.reply(waiter, InitProducerIdReply(Error.PRODUCER_FENCED))
        elif meta.state in (TxnState.PREPARE_ABORT, TxnState.PREPARE_COMMIT):
            fx.reply(waiter, InitProducerIdReply(Error.CONCURRENT_TRANSACTIONS))
        elif meta.state in (TxnState.EMPTY, TxnState.COMPLETE_ABORT, TxnState.COMPLETE_COMMIT):
            if meta.epoch_exhausted and (expected is None or expected[1] == meta.producer_epoch):
                new_id = self.allocate_producer_id()
                if new_id is None:
                    fx.reply(waiter, InitProducerIdReply(Error.COORDINATOR_LOAD_IN_PROGRESS))
                    return fx
                target = meta.prepare_producer_id_rotation(new_id, timeout_ms, now_ms, expected is not None)
            else:
                t = meta.prepare_increment_producer_epoch(
                    timeout_ms, None if expected is None else expected[1], now_ms)
                if isinstance(t, int):
                    fx.reply(waiter, InitProducerIdReply(t))
                    return fx
                target = t
            self._write(meta, target, "init", fx, waiter)
        elif meta.state is TxnState.ONGOING:
            # fence the producer: abort at the next epoch, answer CONCURRENT_TRANSACTIONS; the
            # client's retry gets an epoch above the fenced one
            fenced = meta.prepare_fence_producer_epoch()
            self._end(meta, False, meta.producer_id, fenced.producer_epoch, False,
                      self.config.transaction_version, now_ms, fx, waiter, "fence")
        else:
            raise AssertionError(f"{transactional_id} is {meta.state.kafka_name}: never held")
        return fx

    # ---- AddPartitionsToTxn, AddOffsetsToTxn ------------------------------------------------

    def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                       partitions: Iterable[TopicPartition], now_ms: int, waiter: Any = None,
                       transaction_version: int = 2) -> Effects:
        fx = Effects()
        error = self._add_partitions(transactional_id, producer_id, producer_epoch, set(partitions),
                                     now_ms, waiter, transaction_version, fx)
        if error is not None:
            fx.reply(waiter, TxnReply(error))
        return fx

    def _add_partitions(self, tid: str, producer_id: int, producer_epoch: int,
                        partitions: set[TopicPartition], now_ms: int, waiter: Any, tv: int,
                        fx: Effects) -> int | None:
        if not tid:
            return Error.INVALID_REQUEST
        error, meta = self._lookup(tid)
        if error:
            return error
        if meta is None or meta.producer_id != producer_id:
            return Error.INVALID_PRODUCER_ID_MAPPING
        if meta.producer_epoch != producer_epoch:
            return Error.PRODUCER_FENCED
        if meta.pending_in_progress or meta.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            return Error.CONCURRENT_TRANSACTIONS
        if meta.state is TxnState.ONGOING and partitions <= meta.partitions:
            return Error.NONE
        self._write(meta, meta.prepare_add_partitions(partitions, now_ms, tv), "add", fx, waiter)
        return None

    def add_offsets(self, transactional_id: str, producer_id: int, producer_epoch: int, group_id: str,
                    now_ms: int, waiter: Any = None, transaction_version: int = 2) -> Effects:
        """AddOffsetsToTxn: the group's __consumer_offsets partition joins the transaction."""
        tp = (OFFSETS_TOPIC, group_partition_for(group_id, self.config.offsets_partitions))
        return self.add_partitions(transactional_id, producer_id, producer_epoch, [tp], now_ms, waiter,
                                   transaction_version)

    def verify_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                          partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """AddPartitionsToTxn with verify_only (KIP-890: a partition leader asks before it
        appends a transactional batch): each partition's error."""
        parts = list(partitions)
        error: int
        if not transactional_id:
            error = Error.INVALID_REQUEST
        else:
            error, meta = self._lookup(transactional_id)
            if not error:
                if meta is None or meta.producer_id != producer_id:
                    error = Error.INVALID_PRODUCER_ID_MAPPING
                elif meta.producer_epoch != producer_epoch:
                    error = Error.PRODUCER_FENCED
                elif meta.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
                    error = Error.CONCURRENT_TRANSACTIONS
                else:
                    return {tp: Error.NONE if tp in meta.partitions else Error.TRANSACTION_ABORTABLE
                            for tp in parts}
        return dict.fromkeys(parts, int(error))

    # ---- EndTxn ------------------------------------------------------------------------

    def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool,
                now_ms: int, waiter: Any = None, transaction_version: int = 2) -> Effects:
        """EndTxn; ``transaction_version`` 2 for EndTxn v5+ (the epoch is bumped), else 0."""
        fx = Effects()
        if not transactional_id:
            fx.reply(waiter, EndTxnReply(Error.INVALID_REQUEST))
            return fx
        error, meta = self._lookup(transactional_id)
        if error or meta is None:
            fx.reply(waiter, EndTxnReply(error or Error.INVALID_PRODUCER_ID_MAPPING))
            return fx
        self._end(meta, commit, producer_id, producer_epoch, True, transaction_version, now_ms, fx,
                  waiter, "end")
        return fx

    def _end(self, meta: TransactionMetadata, commit: bool, producer_id: int, producer_epoch: int,
             from_client: bool, tv: int, now_ms: int, fx: Effects, waiter: Any, kind: str) -> None:
        result = self._end_check(meta, commit, producer_id, producer_epoch, from_client, tv, now_ms)
        if isinstance(result, TransactionMetadata):
            self._write(meta, result, kind, fx, waiter, commit, producer_id, producer_epoch)
        elif kind == "end":
            if result == Error.NONE:  # a retry of an EndTxn that completed
                fx.reply(waiter, EndTxnReply(Error.NONE, meta.producer_id, meta.producer_epoch))
            else:
                fx.reply(waiter, EndTxnReply(result))
        elif kind == "fence":
            fx.reply(waiter, InitProducerIdReply(result or Error.CONCURRENT_TRANSACTIONS))

    def _end_check(self, meta: TransactionMetadata, commit: bool, producer_id: int, producer_epoch: int,
                   from_client: bool, tv: int, now_ms: int) -> TransactionMetadata | int:
        S = TxnState
        fence = meta.pending is S.PREPARE_EPOCH_FENCE
        if tv < 2:
            if meta.producer_id != producer_id:
                return Error.INVALID_PRODUCER_ID_MAPPING
            current = meta.producer_epoch
            if producer_epoch < current or (from_client and producer_epoch != current):
                return Error.PRODUCER_FENCED
            retry = False
        else:
            retry_on_overflow = (not fence and meta.previous_producer_id == producer_id
                                 and producer_epoch == SHORT_MAX - 1 and meta.producer_epoch == 0)
            retry_on_bump = not fence and meta.producer_epoch == producer_epoch + 1
            if fence:
                valid = (not from_client or producer_epoch == meta.producer_epoch) \
                    and producer_epoch >= meta.producer_epoch
            elif meta.state in (S.ONGOING, S.EMPTY, S.DEAD):
                valid = producer_epoch == meta.producer_epoch
            elif meta.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                valid = retry_on_bump
            else:
                valid = retry_on_bump or retry_on_overflow or producer_epoch == meta.producer_epoch
            if meta.producer_id != producer_id and not retry_on_overflow:
                return Error.INVALID_PRODUCER_ID_MAPPING
            if not valid:
                return Error.PRODUCER_FENCED
            retry = retry_on_bump or retry_on_overflow
        if meta.pending is not None and not fence:
            return Error.CONCURRENT_TRANSACTIONS

        def complete(state: TxnState, no_partition_added: bool) -> TransactionMetadata | int:
            next_id = NO_PRODUCER_ID
            if tv >= 2 and not fence and meta.epoch_exhausted:
                allocated = self.allocate_producer_id()
                if allocated is None:
                    return Error.COORDINATOR_LOAD_IN_PROGRESS
                next_id = allocated
            if fence:
                # the fenced epoch, in memory before its write (Kafka does the same)
                meta.pending = None
                meta.producer_epoch, meta.last_producer_epoch = producer_epoch, NO_PRODUCER_EPOCH
            return meta.prepare_abort_or_commit(state, tv, next_id, now_ms, no_partition_added)

        if meta.state is S.ONGOING:
            return complete(S.PREPARE_COMMIT if commit else S.PREPARE_ABORT, False)
        if meta.state is S.COMPLETE_COMMIT:
            if tv < 2:
                return Error.NONE if commit else Error.INVALID_TXN_STATE
            if commit:
                return Error.NONE if retry else Error.INVALID_TXN_STATE
            return Error.INVALID_TXN_STATE if retry else complete(S.PREPARE_ABORT, True)
        if meta.state is S.COMPLETE_ABORT:
            if tv < 2:
                return Error.INVALID_TXN_STATE if commit else Error.NONE
            if commit:
                return Error.INVALID_TXN_STATE
            return Error.NONE if retry else complete(S.PREPARE_ABORT, True)
        if meta.state is S.PREPARE_COMMIT:
            return Error.CONCURRENT_TRANSACTIONS if commit else Error.INVALID_TXN_STATE
        if meta.state is S.PREPARE_ABORT:
            return Error.INVALID_TXN_STATE if commit else Error.CONCURRENT_TRANSACTIONS
        if meta.state is S.EMPTY:
            if tv >= 2 and not commit:
                return complete(S.PREPARE_ABORT, True)
            return Error.INVALID_TXN_STATE
        raise AssertionError(f"{meta.transactional_id} is {meta.state.kafka_name}: never held")

    # ---- writes and markers -----------------------------------------------------------------

    def complete_write(self, write: Write, error: int, now_ms: int) -> Effects:
        """The shell's append of ``write`` was committed (``error`` 0) or failed."""
        fx = Effects()
        tid = write.transactional_id
        error = append_error(error)
        meta = self.transactions.get(tid)
        current = self.owned.get(write.partition)
        if current != write.coordinator_epoch or meta is None or meta.pending is not write.target.state:
            # unloaded, or loaded again since: the new owner's state holds
            self._answer(write, Error.NOT_COORDINATOR, fx)
            return fx
        if error:
            if write.kind == "complete" and error == Error.COORDINATOR_NOT_AVAILABLE:
                # the markers are written: appended again, the transition still pending, as
                # Kafka's tryAppendToLog retries COORDINATOR_NOT_AVAILABLE only
                fx.writes.append(write)
                return fx
            # Any other error ends the write (Kafka's appendTransactionToLog resets the pending
            # transition). A CompleteX not written leaves the transaction PrepareX, as its log
            # has it: the partition's next load sends its markers again.
            meta.abort_transition()
            if write.kind in ("fence", "timeout"):
                meta.has_failed_epoch_fence = True
            self._answer(write, error, fx)
            return fx
        meta.complete_transition(write.target)
        if write.kind == "expire":
            del self.transactions[tid]
        elif write.kind == "init":
            fx.reply(write.waiter, InitProducerIdReply(Error.NONE, meta.producer_id, meta.producer_epoch))
        elif write.kind == "add":
            fx.reply(write.waiter, TxnReply(Error.NONE))
        elif write.kind in ("end", "fence", "timeout"):
            expected_epochs = (write.producer_epoch, write.producer_epoch + 1)
            if meta.producer_id != write.producer_id:
                self._answer(write, Error.INVALID_PRODUCER_ID_MAPPING, fx)
            elif meta.producer_epoch not in expected_epochs:
                self._answer(write, Error.PRODUCER_FENCED, fx)
            else:
                # The reply names the producer id and epoch of CompleteX, not PrepareX's: an
                # exhausted epoch moves to the next producer id there (Kafka 4.x answers
                # newPreSendMetadata's).
                tv2 = meta.client_transaction_version >= 2
                complete = self._send_markers(meta, current, now_ms, fx)
                if write.kind == "end":
                    fx.reply(write.waiter, EndTxnReply(
                        Error.NONE, complete.producer_id if tv2 else NO_PRODUCER_ID,
                        complete.producer_epoch if tv2 else NO_PRODUCER_EPOCH))
                elif write.kind == "fence":
                    fx.reply(write.waiter, InitProducerIdReply(Error.CONCURRENT_TRANSACTIONS))
        return fx

    def _answer(self, write: Write, error: int, fx: Effects) -> None:
        if write.kind == "init":
            fx.reply(write.waiter, InitProducerIdReply(error))
        elif write.kind == "add":
            fx.reply(write.waiter, TxnReply(error))
        elif write.kind == "end":
            fx.reply(write.waiter, EndTxnReply(error))
        elif write.kind == "fence":
            fx.reply(write.waiter, InitProducerIdReply(error))

    def _send_markers(self, meta: TransactionMetadata, coordinator_epoch: int, now_ms: int,
                      fx: Effects) -> TransactionMetadata:
        """PrepareX is committed: prepare CompleteX (pending while the markers go out) and ask
        for the markers, or write CompleteX now when the transaction holds no partition. The
        CompleteX target is returned."""
        commit = meta.state is TxnState.PREPARE_COMMIT
        partitions = sorted(meta.partitions)
        target = meta.prepare_complete(now_ms)
        if partitions:
            fx.markers.append(MarkerRequest(meta.transactional_id, meta.producer_id, meta.producer_epoch,
                                            commit, coordinator_epoch, partitions,
                                            meta.client_transaction_version))
            self.completions[meta.transactional_id] = target
        else:
            self._write(meta, target, "complete", fx)
        return target

    def on_markers_written(self, transactional_id: str, coordinator_epoch: int,
                           partitions: Iterable[TopicPartition], now_ms: int) -> Effects:
        """The leaders of ``partitions`` wrote the transaction's marker (or the partitions are
        gone: their topic was deleted). The last one completes the transaction."""
        fx = Effects()
        meta = self.transactions.get(transactional_id)
        if meta is None or self.owned.get(self.partition_for(transactional_id)) != coordinator_epoch \
                or meta.state not in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT) \
                or not meta.partitions:
            return fx
        meta.partitions -= set(partitions)
        if not meta.partitions:
            target = self.completions.pop(transactional_id)
            self._write(meta, target, "complete", fx)
        return fx

    def pending_markers(self, transactional_id: str) -> list[TopicPartition]:
        """The partitions whose marker the transaction still waits for."""
        meta = self.transactions.get(transactional_id)
        if meta is None or meta.state not in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            return []
        return sorted(meta.partitions)

    # ---- timers ------------------------------------------------------------------------

    def tick(self, now_ms: int, expire: bool = True) -> Effects:
        """Abort the transactions older than their timeout (Kafka's abortTimedOutTransactions,
        every transaction.abort.timed.out.transaction.cleanup.interval.ms) and, with
        ``expire``, expire the idle transactional ids (removeExpiredTransactionalIds, every
        transaction.remove.expired.transaction.cleanup.interval.ms)."""
        fx = Effects()
        for tid, meta in sorted(self.transactions.items()):
            if self.partition_for(tid) not in self.owned or meta.pending is not None:
                continue
            if meta.state is TxnState.ONGOING and meta.start_ms + meta.timeout_ms < now_ms:
                fenced = meta.prepare_fence_producer_epoch()
                self._end(meta, False, meta.producer_id, fenced.producer_epoch, False,
                          self.config.transaction_version, now_ms, fx, None, "timeout")
            elif expire and meta.state.expiration_allowed \
                    and meta.last_update_ms <= now_ms - self.config.id_expiration_ms:
                self._write(meta, meta.prepare_dead(), "expire", fx)
        return fx

    # ---- DescribeTransactions, ListTransactions ------------------------------------------------

    def describe(self, transactional_id: str) -> dict[str, Any]:
        """One DescribeTransactions TransactionState's fields."""
        out: dict[str, Any] = {"transactional_id": transactional_id}
        if not transactional_id:
            return {**out, "error_code": Error.INVALID_REQUEST}
        error, meta = self._lookup(transactional_id)
        if error:
            return {**out, "error_code": error}
        if meta is None or meta.state is TxnState.DEAD:
            return {**out, "error_code": Error.TRANSACTIONAL_ID_NOT_FOUND}
        topics: dict[str, list[int]] = {}
        for topic, p in sorted(meta.partitions):
            topics.setdefault(topic, []).append(p)
        return {**out, "error_code": Error.NONE, "transaction_state": meta.state.kafka_name,
                "transaction_timeout_ms": meta.timeout_ms, "transaction_start_time_ms": meta.start_ms,
                "producer_id": meta.producer_id, "producer_epoch": meta.producer_epoch,
                "topics": sorted(topics.items())}

    def list_transactions(self, state_filters: Iterable[str], producer_id_filters: Iterable[int],
                          now_ms: int, duration_filter: int = -1,
                          transactional_id_pattern: str | None = None) -> dict[str, Any]:
        """ListTransactions: error_code, unknown_state_filters and transaction_states, each
        (transactional id, producer id, state name)."""
        names = list(state_filters)
        states = {TxnState.from_name(n) for n in names} - {None}
        unknown = [n for n in names if TxnState.from_name(n) is None]
        pids = set(producer_id_filters)
        if self.loading:
            return {"error_code": Error.COORDINATOR_LOAD_IN_PROGRESS, "unknown_state_filters": unknown,
                    "transaction_states": []}
        pattern = re.compile(transactional_id_pattern) if transactional_id_pattern else None
        out = []
        for tid, meta in sorted(self.transactions.items()):
            if meta.state is TxnState.DEAD or self.partition_for(tid) not in self.owned:
                continue
            if pids and meta.producer_id not in pids:
                continue
            if names and meta.state not in states:
                continue
            if duration_filter >= 0 and now_ms - meta.start_ms <= duration_filter:
                continue
            if pattern is not None and not pattern.fullmatch(tid):
                continue
            out.append((tid, meta.producer_id, meta.state.kafka_name))
        return {"error_code": Error.NONE, "unknown_state_filters": unknown, "transaction_states": out}
