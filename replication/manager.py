"""ReplicaManager: every partition this broker hosts, and the one door request handlers use.

Theory of operation. Each hosted partition is a replication core (replication/partition.py)
over its engine Log; the LogManager creates and deletes the logs. The metadata image drives the
roles: ``apply_image`` runs on every metadata change and, in this order (Kafka's applyDelta),

1. removes partitions this broker no longer hosts, and those whose topic was deleted or
   recreated under the same name (another topic id): fetcher stopped, acks=all waiters answered
   NOT_LEADER_OR_FOLLOWER, log deleted;
2. makes this broker the leader where the image says so (fetcher removed first, then
   ``make_leader``);
3. makes it a follower elsewhere (``make_follower``); the replica fetcher is (re)started when
   the leader or the leader epoch changed, and stopped while the leader is -1 or not alive.

Whatever a core call returns (an Outcome) is carried out in one place, ``_apply``: an
AlterPartition proposal goes to the AlterPartitionManager; a high watermark that moved completes
the acks=all purgatory up to it and wakes the partition's waiting fetches.

The narrow interface (the handlers see nothing else of a partition):

| call                    | rules                                                              |
|-------------------------|--------------------------------------------------------------------|
| append_records (async)  | leader only. acks=-1: NOT_ENOUGH_REPLICAS before writing under min |
|                         | ISR, else waits in the purgatory until HW >= last offset + 1       |
|                         | (REQUEST_TIMED_OUT at timeout_ms, NOT_ENOUGH_REPLICAS_AFTER_APPEND, |
|                         | NOT_LEADER_OR_FOLLOWER when leadership is lost meanwhile)          |
| append_local            | the same append, answered at once (acks 0/1, the group coordinator)|
| wait_committed (async)  | acks=all for appends already made (their required offsets)         |
| when_committed,         | the same without a task: a callback gets the answers from inside   |
| when_replicated         | the call that moves the HW (a produce's answer is made there)      |
| read                    | consumers: current leader epoch checked, never at or past the HW;  |
|                         | leader only without client metadata (Fetch < v11), else a follower |
|                         | too (KIP-392); a leader with a replica selector may name a         |
|                         | preferred read replica instead of reading (see below)              |
| read_for_follower       | replica fetch: divergence check, read up to the LEO, then record   |
|                         | the follower's fetch (may expand the ISR, advance the HW)          |
| list_offset             | latest = HW for clients, LEO for replicas; OFFSET_NOT_AVAILABLE    |
|                         | while the HW is below the leader epoch's start offset              |
| offset_for_leader_epoch | the leader's end offset of an epoch                                |
| delete_records,         | leader only, up to the HW; done once the low watermark (the lowest |
| low_watermark           | log start among live replicas) reaches it                          |
| current_leader,         | KIP-951 hints from the image: who leads now, and where             |
| leader_node             | (on the listener the request came on)                              |
| active_producers        | DescribeProducers: the leader's idempotent producer state          |
| describe_log_dirs       | DescribeLogDirs: each log dir, its partitions' sizes and lags      |

Fetch from the closest replica (KIP-392, Kafka's ReplicaManager.readFromLog and
findPreferredReadReplica). A consumer's Fetch v11+ carries client metadata (its rack, the
listener it came on): such a read may be served by any replica, leader or follower, up to that
replica's own high watermark, with the leader's epoch checks (FENCED_LEADER_EPOCH /
UNKNOWN_LEADER_EPOCH against the replica's leader epoch), OFFSET_OUT_OF_RANGE outside
[log start, log end] and an empty answer between the high watermark and the log end offset; a
broker with no replica answers NOT_LEADER_OR_FOLLOWER. A follower never redirects. The leader,
when ``replica_selector`` is set (replica.selector.class), asks replication/replica_selector.py
for a follower in the client's rack, from its view of each follower as of that follower's last
fetch (ISR, log start and end offsets, last caught-up time) and of where each broker listens on
the request's listener; when one is named, the answer carries ``preferred_read_replica``, the
high watermark and the log start offset, and no records. A follower's high watermark moves with
its fetcher's answers (``on_follower_appended`` is called for new records and for a new high
watermark alike), which wakes the consumer fetches waiting on it.

Periodic work, called by the broker: ``maybe_shrink_isr`` (replica.lag.time.max.ms / 2); the HW
checkpoint is the LogManager's (replication-offset-checkpoint).

Log dir failure (Kafka's handleLogDirFailure). A storage operation that fails takes its log dir
offline through the LogDirFailureChannel (engine/log_dir_failure.py) and raises
KafkaStorageError: the request that hit it answers KAFKA_STORAGE_ERROR for that partition, and
from then on every call on a partition of an offline dir answers KAFKA_STORAGE_ERROR without
touching the disk. ``handle_log_dir_failure`` (called by the broker when the channel reports a
dir) stops the dir's fetchers and answers its parked acks=all requests KAFKA_STORAGE_ERROR;
metadata changes skip its partitions. The broker then halts, as Kafka does once no log dir is
left online; the controller fences it and moves its leaderships.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple

from engine.checkpoint import uuid_to_str
from engine.errors import (
    CorruptRecordError,
    DuplicateSequenceError,
    InvalidRecordError,
    InvalidTimestampError,
    OffsetOutOfRangeError,
    RecordTooLargeError,
    RecordValidationError,
)
from engine.log import FETCH_HIGH_WATERMARK, FETCH_LOG_END, FETCH_TXN_COMMITTED, ORIGIN_CLIENT
from engine.log_dir_failure import KafkaStorageError, LogDirFailureChannel
from engine.producer_state import (
    CoordinatorFencedError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    ProducerFencedError,
    UnknownProducerIdError,
)
from metadata.configs import dynamic_broker_configs
from protocol.errors import Error
from protocol.list_offsets import (
    DEBUGGING_REPLICA_ID,
    EARLIEST,
    EARLIEST_LOCAL,
    LATEST,
    LATEST_TIERED,
    MAX_TIMESTAMP,
)
from replication import errors
from replication.brokers import ImageBrokers
from replication.errors import NotLeaderOrFollower, ReplicationError
from replication.fetcher import FollowerPartition
from replication.isr import NO_LEADER, RECOVERED, LeaderAndIsr, PartitionRegistration
from replication.log_dir_mover import LogDirMover
from replication.partition import Outcome, Partition
from replication.purgatory import AcksPurgatory, Deadlines
from replication.replica_selector import FollowerView, preferred_read_replica

log = logging.getLogger("strom.replication")


TopicPartition = tuple[str, int]
ALTER_LOG_DIRS_RATE = "replica.alter.log.dirs.io.max.bytes.per.second"
LONG_MAX = (1 << 63) - 1

# Engine errors of an append, as the Produce API answers them.
_APPEND_ERRORS = [
    (CorruptRecordError, Error.CORRUPT_MESSAGE),
    (RecordTooLargeError, Error.MESSAGE_TOO_LARGE),
    (InvalidTimestampError, Error.INVALID_TIMESTAMP),
    (InvalidRecordError, Error.INVALID_RECORD),
    (OutOfOrderSequenceError, Error.OUT_OF_ORDER_SEQUENCE_NUMBER),
    (ProducerFencedError, Error.INVALID_PRODUCER_EPOCH),
    (UnknownProducerIdError, Error.UNKNOWN_PRODUCER_ID),
    (InvalidTxnStateError, Error.INVALID_TXN_STATE),
    (CoordinatorFencedError, Error.TRANSACTION_COORDINATOR_FENCED),
    (KafkaStorageError, Error.KAFKA_STORAGE_ERROR),
]


def _wall_clock_ms() -> int:
    return int(time.time() * 1000)


def _set_done(waiter: asyncio.Future, result: Any = None) -> None:
    if not waiter.done():
        waiter.set_result(result)


class CommitWait:
    """One ``when_committed`` call's wait: its answers, one purgatory waiter (a _Slot) per
    partition that waits, and what to call once every slot is answered. Its timeout is in
    the ReplicaManager's Deadlines (``finished`` once answered or cancelled)."""

    __slots__ = ("purgatory", "deadlines", "answers", "on_done", "slots", "left", "finished")

    def __init__(self, purgatory: AcksPurgatory, deadlines: Deadlines, answers: list[int],
                 on_done: Callable[[list[int]], None]) -> None:
        self.purgatory = purgatory
        self.deadlines = deadlines
        self.answers = answers
        self.on_done: Callable[[list[int]], None] | None = on_done
        self.slots: list[_Slot] = []
        self.left = 0
        self.finished = False

    def slot(self, index: int, key: TopicPartition) -> _Slot:
        slot = _Slot(self, index, key)
        self.slots.append(slot)
        self.left += 1
        return slot

    def answered(self, index: int, code: int) -> None:
        self.answers[index] = code
        self.left -= 1
        if not self.left:
            self._finish()

    def expire(self) -> None:
        """The request's timeout (its deadline left the Deadlines): what still waits is
        REQUEST_TIMED_OUT."""
        self.finished = True
        self._forget(errors.REQUEST_TIMED_OUT)
        self._finish()

    def cancel(self) -> None:
        """The caller stopped waiting: leave the purgatory and never call ``on_done``."""
        self.on_done = None
        self._forget(errors.REQUEST_TIMED_OUT)
        self._finish()

    def _forget(self, code: int) -> None:
        for slot in self.slots:
            if not slot.answered:
                slot.answered = True
                self.answers[slot.index] = code
                self.purgatory.forget(slot.key, slot)
        self.left = 0

    def _finish(self) -> None:
        if not self.finished:
            self.finished = True
            self.deadlines.finished()
        on_done, self.on_done = self.on_done, None
        if on_done is not None:
            try:
                on_done(self.answers)
            except Exception:  # it runs inside whatever moved the HW: that call goes on
                log.exception("an acks=all answer failed")


class _Slot:
    """A partition's place in the purgatory for a CommitWait: answered like a future (done,
    set_result, cancel), without the loop hop a future's callbacks take."""

    __slots__ = ("wait", "index", "key", "answered")

    def __init__(self, wait: CommitWait, index: int, key: TopicPartition) -> None:
        self.wait = wait
        self.index = index
        self.key = key
        self.answered = False

    def done(self) -> bool:
        return self.answered

    def set_result(self, code: int) -> None:
        if not self.answered:
            self.answered = True
            self.wait.answered(self.index, code)

    def cancel(self) -> bool:
        if self.answered:
            return False
        self.answered = True
        return True


async def _until(done: asyncio.Future, wait: CommitWait | None) -> Any:
    """``done``'s result; a cancelled caller cancels ``wait``."""
    try:
        return await done
    except asyncio.CancelledError:
        if wait is not None:
            wait.cancel()
        raise


@dataclass
class AppendResult:
    error: int = errors.NONE
    error_message: str | None = None
    base_offset: int = -1
    log_append_time: int = -1
    log_start_offset: int = -1
    required_offset: int = -1  # acks=all: the high watermark that commits the append
    record_errors: list[tuple[int, str]] | None = None  # INVALID_RECORD: (batch index, why)


@dataclass
class ReadResult:
    error: int = errors.NONE
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    records: Any = None  # a FileSlice, or None when there is nothing to send
    size: int = 0
    diverging_epoch: tuple[int, int] | None = None  # (epoch, end offset): no records with it
    # read_committed: the (producer id, first offset) of the aborted transactions of the range
    # returned; None for read_uncommitted and replicas
    aborted_transactions: list[tuple[int, int]] | None = None
    preferred_read_replica: int = -1  # KIP-392: read from this follower (no records with it)


class ClientMetadata(NamedTuple):
    """What a consumer's Fetch v11+ says of its client (Kafka's ClientMetadata): its rack
    (empty: none) and the listener the request came on (None: the inter-broker listener)."""
    rack_id: str
    listener_name: str | None = None


@dataclass
class OffsetResult:
    error: int = errors.NONE
    offset: int = -1
    timestamp: int = -1
    leader_epoch: int = -1


class LogDirView(NamedTuple):
    """One log dir for DescribeLogDirs: (topic, partition, size in bytes, offset lag, is
    future) of the partitions asked for, and the file system's total and usable bytes."""
    log_dir: str
    error: int
    partitions: list[tuple[str, int, int, int, bool]]
    total_bytes: int = -1
    usable_bytes: int = -1


class ProducerView(NamedTuple):
    """An idempotent producer's state in a leader's log (DescribeProducers)."""
    producer_id: int
    epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int = -1
    current_txn_start_offset: int = -1  # the open transaction's first offset; -1: none


class ReplicaManager:
    def __init__(self, local_broker_id: int, logs: Any, topic_config: Callable[[str], Any], *,
                 listener_name: str, replica_lag_time_max_ms: int = 30000,
                 on_changed: Callable[[str, int], None] | None = None,
                 on_committed: Callable[[str, int], None] | None = None,
                 clock: Callable[[], int] = _wall_clock_ms,
                 failure_channel: LogDirFailureChannel | None = None,
                 replica_selector: str | None = None) -> None:
        """``logs``: the LogManager; ``topic_config(name)``: the topic's LogConfig (broker
        defaults with the topic's overrides); ``on_changed(topic, partition)``: new data, a new
        log start or another change (the broker wakes the partition's waiting fetches);
        ``on_committed(topic, partition)``: a new high watermark alone (consumers' fetches; by
        default ``on_changed``); ``failure_channel``: the log dirs' (the LogManager's when not
        given); ``replica_selector``: replica.selector.class as replica_selector.selector_name
        reads it (None: the leader serves every consumer)."""
        self.node_id = local_broker_id
        self.replica_selector = replica_selector
        self.logs = logs
        self.failure_channel = (failure_channel or getattr(logs, "failure_channel", None)
                                or LogDirFailureChannel())
        self.topic_config = topic_config
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        self.on_changed = on_changed or (lambda topic, partition: None)
        self.on_committed = on_committed or self.on_changed
        self.clock = clock
        self.brokers = ImageBrokers(listener_name)
        self.purgatory = AcksPurgatory()
        self.deadlines = Deadlines()  # the purgatory's timeouts
        self.partitions: dict[TopicPartition, Partition] = {}
        self.topic_ids: dict[TopicPartition, bytes] = {}
        self.fetchers: Any = None  # ReplicaFetcherManager, set by the broker
        self.alter_partition: Any = None  # AlterPartitionManager, set by the broker
        self._image: Any = None
        self._fetching: dict[TopicPartition, tuple[int, int]] = {}  # (leader, leader epoch) fetched from
        self._applied: dict[TopicPartition, PartitionRegistration] = {}  # the last one applied
        # Metrics (protocol/metrics.py), counted in place: a BrokerTopicStats the broker sets
        # (messages and bytes in as leader, bytes out to consumers), and the ISR changes this
        # leader made (IsrShrinksPerSec, IsrExpandsPerSec).
        self.topic_stats: Any = None
        self.isr_shrinks = 0
        self.isr_expands = 0
        # Replicas moving between this broker's log dirs (AlterReplicaLogDirs), their copy
        # bound by replica.alter.log.dirs.io.max.bytes.per.second: the static property (set by
        # the broker) unless the image holds a dynamic one.
        self.alter_log_dirs_static_rate: float | None = None
        self._alter_log_dirs_rate: float | None = None
        self.log_dir_mover = LogDirMover(logs, self._moved, lambda: self._alter_log_dirs_rate)

    # ---- metadata -----------------------------------------------------------------------------

    def apply_image(self, image: Any, now_ms: int | None = None, startup: bool = False) -> None:
        """``image`` applied to this broker's partitions; ``startup``: the first image after the
        logs were loaded, where a log the image does not place here is stray (kept aside, not
        deleted, as Kafka's LogManager.isStrayKraftReplica has it)."""
        now = self.clock() if now_ms is None else now_ms
        self._image = image
        self.brokers.image = image
        self._alter_log_dirs_rate = self._alter_log_dirs_rate_of(image)
        wanted: dict[TopicPartition, tuple[Any, Any]] = {}
        for topic in image.topics.values():
            for index, state in topic.partitions.items():
                if self.node_id in state.replicas:
                    wanted[(topic.name, index)] = (topic, state)
        for tp in set(self.partitions) | set(self.logs.logs):
            entry = wanted.get(tp)
            if entry is None or self._is_other_topic(tp, entry[0].topic_id):
                with self._storage_error_skips(tp):
                    if startup and tp not in self.partitions:
                        self._set_aside_stray(tp)
                    else:
                        self._remove_partition(tp)
        leaders, followers = [], []
        for tp, (topic, state) in wanted.items():
            with self._storage_error_skips(tp):
                partition = self._ensure_partition(tp, topic.topic_id, now)
            if tp not in self.partitions or self._offline(self.partitions[tp]):
                continue
            if tp in getattr(self.logs, "future_logs", {}):
                self._resume_move(tp)
            reg = PartitionRegistration(
                tuple(state.replicas), tuple(state.isr), state.leader, state.leader_epoch,
                state.partition_epoch, getattr(state, "leader_recovery_state", RECOVERED))
            # Only a changed registration is applied (Kafka applies the delta's partitions): a
            # replayed record of another partition must not reset a pending ISR change here.
            changed = self._applied.get(tp) != reg
            self._applied[tp] = reg
            if state.leader == self.node_id:
                if changed:
                    leaders.append((tp, partition, reg))
            else:
                followers.append((tp, partition, reg if changed else None))
        if leaders:
            self._stop_fetching([tp for tp, _, _ in leaders])
            for tp, partition, reg in leaders:
                with self._storage_error_skips(tp):
                    self._apply(tp, partition, partition.make_leader(reg, now))
        self._make_followers(followers, now)

    @contextlib.contextmanager
    def _storage_error_skips(self, tp: TopicPartition) -> Iterator[None]:
        """A metadata change skips a partition whose log dir fails under it (the channel has
        taken the dir offline and said so)."""
        try:
            yield
        except KafkaStorageError:
            log.debug("skipped a metadata change of %s-%d: its log dir is offline", *tp)

    def _offline(self, partition: Partition) -> bool:
        """Is the partition's log dir offline? (No dir has failed in the common case.)"""
        offline = self.failure_channel.offline
        return bool(offline) and getattr(partition.log, "parent_dir", None) in offline

    def handle_log_dir_failure(self, log_dir: str) -> list[TopicPartition]:
        """``log_dir`` went offline: stop fetching its partitions and answer their parked
        acks=all requests KAFKA_STORAGE_ERROR. Returns its partitions."""
        tps = [tp for tp, p in self.partitions.items() if getattr(p.log, "parent_dir", None) == log_dir]
        self._stop_fetching(tps)
        for tp in tps:
            self.purgatory.fail_partition(tp, Error.KAFKA_STORAGE_ERROR)
            self.on_changed(*tp)
        return tps

    def _is_other_topic(self, tp: TopicPartition, topic_id: bytes) -> bool:
        known = self.topic_ids.get(tp)
        if known is not None and known != topic_id:
            return True
        log_ = self.logs.get_log(*tp)
        return log_ is not None and log_.topic_id not in (None, uuid_to_str(topic_id))

    def _remove_partition(self, tp: TopicPartition) -> None:
        self._stop_fetching([tp])
        self.purgatory.fail_partition(tp, errors.NOT_LEADER_OR_FOLLOWER)
        self.partitions.pop(tp, None)
        self.topic_ids.pop(tp, None)
        self._applied.pop(tp, None)
        if self.logs.delete_log(*tp):
            log.info("deleted the log of %s-%d", *tp)
        self.on_changed(*tp)

    def _set_aside_stray(self, tp: TopicPartition) -> None:
        self.topic_ids.pop(tp, None)
        moved = self.logs.mark_stray(*tp)
        if moved is not None:
            log.warning("Log for partition %s-%d is marked as stray and renamed to %s", *tp, moved)

    def _ensure_partition(self, tp: TopicPartition, topic_id: bytes, now: int) -> Partition:
        config = self.topic_config(tp[0])
        log_ = self.logs.get_log(*tp)
        if log_ is None:
            log_ = self.logs.get_or_create_log(tp[0], tp[1], config, uuid_to_str(topic_id))
        elif log_.config != config:
            log_.config = config
        partition = self.partitions.get(tp)
        if partition is None:
            partition = self.partitions[tp] = Partition(
                tp[0], tp[1], self.node_id, log_, self.brokers, self.replica_lag_time_max_ms,
                config.min_insync_replicas)
            self.topic_ids[tp] = topic_id
        elif partition.min_insync_replicas != config.min_insync_replicas:
            self._apply(tp, partition, partition.set_min_insync_replicas(config.min_insync_replicas, now))
        return partition

    def _make_followers(self, followers: list, now: int) -> None:
        stop, start = [], {}
        for tp, partition, reg in followers:
            outcome = Outcome()
            if reg is not None:  # changed; else only the leader's liveness may have
                was_leader = partition.is_leader
                try:
                    outcome = partition.make_follower(reg, now)
                except KafkaStorageError:
                    continue  # its log dir is offline
                if was_leader and not partition.is_leader:
                    self.purgatory.fail_partition(tp, errors.NOT_LEADER_OR_FOLLOWER)
                    self.on_changed(*tp)
                self._apply(tp, partition, outcome)
            leader = partition.leader_id
            target = None
            if leader not in (NO_LEADER, self.node_id) and self.brokers.is_alive(leader):
                target = (leader, partition.leader_epoch)
            current = self._fetching.get(tp)
            if target == current and not (outcome.leader_epoch_changed and target is not None):
                continue
            if current is not None:
                stop.append(tp)
            if target is not None:
                start[tp] = FollowerPartition(self.topic_ids[tp], target[0], target[1], partition.log)
        self._stop_fetching(stop)
        if start and self.fetchers is not None:
            try:  # the initial fetch state may truncate a log
                self.fetchers.add_partitions(start)
            except KafkaStorageError:
                start = {}
        for tp, target in start.items():
            self._fetching[tp] = (target.leader_id, target.leader_epoch)

    def _stop_fetching(self, tps: list[TopicPartition]) -> None:
        fetched = [tp for tp in tps if self._fetching.pop(tp, None) is not None]
        if fetched and self.fetchers is not None:
            self.fetchers.remove_partitions(fetched)

    # ---- what the core asks for ---------------------------------------------------------------

    def _apply(self, tp: TopicPartition, partition: Partition, outcome: Outcome) -> None:
        if outcome.alter_partition is not None and self.alter_partition is not None:
            self.alter_partition.submit(self.topic_ids[tp], tp[1], outcome.alter_partition)
        if outcome.hw_advanced:
            self.purgatory.complete_up_to(
                tp, partition.log.high_watermark,
                lambda required: partition.check_enough_replicas_reach_offset(required)[1])
        if outcome.low_watermark_moved:
            self.on_changed(*tp)
        elif outcome.hw_advanced:
            self.on_committed(*tp)

    def handle_alter_partition_result(self, topic_id: bytes, index: int, sent: LeaderAndIsr, error: int,
                                      result: LeaderAndIsr | None) -> None:
        """The AlterPartitionManager's on_result."""
        topic = self._image.topics_by_id.get(topic_id) if self._image is not None else None
        tp = (topic.name, index) if topic is not None else None
        partition = self.partitions.get(tp) if tp is not None else None
        if partition is None or self.topic_ids.get(tp) != topic_id:
            return  # the partition went away meanwhile
        before = len(partition.partition_state.isr)
        outcome = partition.handle_alter_partition_response(sent, error, result, self.clock())
        after = len(partition.partition_state.isr)
        if after < before:
            self.isr_shrinks += 1
        elif after > before:
            self.isr_expands += 1
        self._apply(tp, partition, outcome)

    def on_follower_appended(self, topic: str, partition: int) -> None:
        """The replica fetcher's on_appended: the follower's log grew or its high watermark
        moved (consumers reading from this follower wait on both)."""
        self.on_changed(topic, partition)

    def maybe_shrink_isr(self, now_ms: int | None = None) -> None:
        """isr-expiration: propose removing followers not caught up for replica.lag.time.max.ms."""
        now = self.clock() if now_ms is None else now_ms
        for tp, partition in list(self.partitions.items()):
            if partition.is_leader:
                self._apply(tp, partition, partition.maybe_shrink_isr(now))

    async def close(self) -> None:
        """Stop fetching, proposing and moving replicas between log dirs (a copy under way ends
        before the logs close; its future log resumes at the next start); parked acks=all
        requests are answered."""
        await self.log_dir_mover.stop()
        self.purgatory.fail_all(errors.NOT_LEADER_OR_FOLLOWER)
        if self.fetchers is not None:
            await self.fetchers.close()
        if self.alter_partition is not None:
            await self.alter_partition.close()

    # ---- lookups ------------------------------------------------------------------------------

    def _missing(self, tp: TopicPartition) -> int:
        """Not hosted here: NOT_LEADER_OR_FOLLOWER if the partition exists elsewhere."""
        topic = self._image.topics.get(tp[0]) if self._image is not None else None
        if topic is not None and tp[1] in topic.partitions:
            return errors.NOT_LEADER_OR_FOLLOWER
        return errors.UNKNOWN_TOPIC_OR_PARTITION

    def _leader(self, tp: TopicPartition, current_leader_epoch: int = -1,
                require_leader: bool = True) -> tuple[Partition | None, int]:
        partition = self.partitions.get(tp)
        if partition is None:
            return None, self._missing(tp)
        if self._offline(partition):
            return None, Error.KAFKA_STORAGE_ERROR
        error = partition.check_leader_epoch(current_leader_epoch, require_leader)
        return (None, error) if error else (partition, errors.NONE)

    def topic_name(self, topic_id: bytes) -> str | None:
        topic = self._image.topics_by_id.get(topic_id) if self._image is not None else None
        return topic.name if topic is not None else None

    def current_leader(self, topic: str, partition: int) -> tuple[int, int]:
        """(leader id, leader epoch) as the image has them; (-1, -1) for an unknown partition."""
        t = self._image.topics.get(topic) if self._image is not None else None
        state = t.partitions.get(partition) if t is not None else None
        return (state.leader, state.leader_epoch) if state is not None else (NO_LEADER, -1)

    def leader_node(self, broker_id: int,
                    listener_name: str | None = None) -> tuple[str, int, str | None] | None:
        """Where a client on ``listener_name`` (None: the inter-broker listener) reaches the
        leader ``broker_id`` (KIP-951 node endpoints); None if it cannot."""
        return self.brokers.node(broker_id, listener_name) if broker_id >= 0 else None

    def local_log(self, topic: str, partition: int) -> Any:
        """The partition's log for the broker's own readers (the group coordinator's load)."""
        p = self.partitions.get((topic, partition))
        return p.log if p is not None else None

    # ---- appends ------------------------------------------------------------------------------

    def append_local(self, topic: str, index: int, records: Any, acks: int = 1,
                     origin: str = ORIGIN_CLIENT, now_ms: int | None = None,
                     transaction_version: int = 0, verification_guard: Any = None) -> AppendResult:
        """Append to the leader's log and answer at once; ``required_offset`` says which high
        watermark commits it. ``transaction_version``: the coordinator's, for the markers it
        writes (KIP-890: at 2 a marker must carry a newer producer epoch).
        ``verification_guard``: KIP-890's, taken from the log's producer state before the
        transaction coordinator was asked (Log.append_as_leader)."""
        tp = (topic, index)
        partition = self.partitions.get(tp)
        if partition is None:
            return AppendResult(self._missing(tp))
        if self._offline(partition):
            return AppendResult(Error.KAFKA_STORAGE_ERROR, "the partition's log dir is offline")
        if records is None or len(records) == 0:
            return AppendResult(partition.check_append(acks) or Error.INVALID_RECORD)
        now = self.clock() if now_ms is None else now_ms
        log_ = partition.log
        try:
            if origin == ORIGIN_CLIENT:
                info, outcome = partition.append_records_to_leader(records, acks, now, verification_guard)
            else:  # the broker's own writers may write what clients may not (control batches)
                error = partition.check_append(acks)
                if error:
                    return AppendResult(error)
                info = log_.append_as_leader(records, partition.leader_epoch, now, origin=origin,
                                             transaction_version=transaction_version,
                                             verification_guard=verification_guard)
                outcome = Outcome(hw_advanced=partition.maybe_increment_leader_hw(now))
        except DuplicateSequenceError as dup:  # a retry: the original offsets are the answer
            return AppendResult(errors.NONE, None, dup.first_offset, -1, log_.log_start_offset,
                                dup.last_offset + 1)
        except ReplicationError as e:
            return AppendResult(e.code, str(e))
        except RecordValidationError as e:  # the refused records, for Produce v8+
            return AppendResult(Error.INVALID_RECORD, str(e), record_errors=e.record_errors)
        except OSError as e:  # a storage operation the Log does not guard: the same path
            failure = self.failure_channel.maybe_add_offline_log_dir(
                log_.parent_dir, f"appending to {topic}-{index}", e)
            return AppendResult(Error.KAFKA_STORAGE_ERROR, str(failure))
        except Exception as e:
            for cls, code in _APPEND_ERRORS:
                if isinstance(e, cls):
                    if cls in (OutOfOrderSequenceError, ProducerFencedError, UnknownProducerIdError,
                               InvalidTxnStateError, CoordinatorFencedError):
                        # idempotence refusals: what a producer's retries met, for the logs
                        log.info("%s-%d: produce refused, %s: %s", topic, index, Error(code).name, e)
                    return AppendResult(code, str(e))
            raise
        self.on_changed(topic, index)  # followers' long polls: there is data to replicate
        self._apply(tp, partition, outcome)
        stats = self.topic_stats
        if stats is not None:
            stats.appended(topic, info.last_offset - info.first_offset + 1, len(records))
        return AppendResult(errors.NONE, None, info.first_offset, info.log_append_time,
                            info.log_start_offset, info.last_offset + 1)

    async def append_records(self, entries: list[tuple[str, int, Any]], acks: int, timeout_ms: int,
                             origin: str = ORIGIN_CLIENT, transaction_version: int = 0) -> list[AppendResult]:
        """Append each (topic, partition, records); with acks=-1 answer once each append is
        committed, failed, or ``timeout_ms`` passed."""
        results = self.append_records_locally(entries, acks, origin, transaction_version)
        if acks == -1:
            await self.wait_replicated(entries, results, timeout_ms)
        return results

    def append_records_locally(self, entries: list[tuple[str, int, Any]], acks: int,
                               origin: str = ORIGIN_CLIENT, transaction_version: int = 0,
                               guards: list[Any] | None = None) -> list[AppendResult]:
        """The leader's appends of ``append_records``, in order, without waiting; ``guards``:
        each entry's KIP-890 verification guard (None: verification is off)."""
        now = self.clock()
        if guards is not None:
            return [self.append_local(t, p, records, acks, origin, now, transaction_version, guard)
                    for (t, p, records), guard in zip(entries, guards)]
        return [self.append_local(t, p, records, acks, origin, now, transaction_version)
                for t, p, records in entries]

    async def wait_replicated(self, entries: list[tuple[str, int, Any]], results: list[AppendResult],
                              timeout_ms: int) -> None:
        """acks=-1 for ``append_records_locally``'s results: each successful one's error
        becomes what ``wait_committed`` answers."""
        done = asyncio.get_running_loop().create_future()
        wait = self.when_replicated(entries, results, timeout_ms, lambda: _set_done(done))
        await _until(done, wait)

    def when_replicated(self, entries: list[tuple[str, int, Any]], results: list[AppendResult],
                        timeout_ms: int, on_done: Callable[[], None]) -> CommitWait | None:
        """``wait_replicated`` without a task: ``on_done()`` is called once each successful
        result's error is what ``wait_committed`` answers (at once, before this returns, when
        nothing has to wait). Returns the wait (None when nothing waited), to cancel."""
        waits = [((topic, index), result.required_offset)
                 for (topic, index, _), result in zip(entries, results) if not result.error]

        def committed(answers: list[int]) -> None:
            answered = iter(answers)
            for result in results:
                if not result.error:
                    result.error = next(answered)
            on_done()

        return self.when_committed(waits, timeout_ms, committed)

    async def wait_committed(self, appended: list[tuple[TopicPartition, int]], timeout_ms: int) -> list[int]:
        """acks=all for appends already made: for each (partition, required offset), NONE once
        the high watermark reached it, NOT_ENOUGH_REPLICAS_AFTER_APPEND, NOT_LEADER_OR_FOLLOWER,
        or REQUEST_TIMED_OUT after ``timeout_ms``."""
        done = asyncio.get_running_loop().create_future()
        wait = self.when_committed(appended, timeout_ms, lambda answers: _set_done(done, answers))
        return await _until(done, wait)

    def when_committed(self, appended: list[tuple[TopicPartition, int]], timeout_ms: int,
                       on_done: Callable[[list[int]], None]) -> CommitWait | None:
        """``wait_committed`` without a task (every acks=all produce waits here): ``on_done``
        gets the answers once each is known, from inside the call that moved the last high
        watermark it waited for, from the timeout's timer, or at once, before this returns,
        when none has to wait. Returns the wait (None when nothing waited), to cancel."""
        answers: list[int] = []
        parked: list[tuple[int, TopicPartition, int]] = []
        for i, (tp, required) in enumerate(appended):
            partition = self.partitions.get(tp)
            if partition is None:
                answers.append(errors.NOT_LEADER_OR_FOLLOWER)
                continue
            done, error = partition.check_enough_replicas_reach_offset(required)
            answers.append(error)
            if not done and not error:
                parked.append((i, tp, required))
        if not parked:
            on_done(answers)
            return None
        if timeout_ms <= 0:
            for i, _, _ in parked:
                answers[i] = errors.REQUEST_TIMED_OUT
            on_done(answers)
            return None
        wait = CommitWait(self.purgatory, self.deadlines, answers, on_done)
        for i, tp, required in parked:
            self.purgatory.park(tp, required, wait.slot(i, tp))
        self.deadlines.add(timeout_ms / 1000, wait)
        return wait

    # ---- reads --------------------------------------------------------------------------------

    def read(self, topic: str, index: int, fetch_offset: int, max_bytes: int, *,
             current_leader_epoch: int = -1, read_committed: bool = False,
             min_one_message: bool = True, client: ClientMetadata | None = None,
             now_ms: int | None = None) -> ReadResult:
        """A consumer's read: below this replica's high watermark (the last stable offset for
        read_committed, with the aborted transactions of the range read), never past it; the
        answer's last stable offset is the log's whatever the isolation, as Kafka's. Without
        ``client`` (Fetch < v11) from the leader only;
        with it from a follower too, and a leader with a replica selector may answer with a
        preferred read replica instead of records (Kafka's readFromLog)."""
        partition, error = self._leader((topic, index), current_leader_epoch, require_leader=client is None)
        if partition is None:
            return ReadResult(error)
        log_ = partition.log
        # No client rack: the leader serves (the selector's first rule), asked of no follower.
        if client is not None and client.rack_id and self.replica_selector is not None \
                and partition.is_leader:
            now = self.clock() if now_ms is None else now_ms
            preferred = self._preferred_read_replica(partition, client, fetch_offset, now)
            if preferred is not None:
                return ReadResult(errors.NONE, log_.high_watermark, log_.last_stable_offset,
                                  log_.log_start_offset, preferred_read_replica=preferred)
        result = ReadResult(errors.NONE, log_.high_watermark, log_.last_stable_offset, log_.log_start_offset)
        isolation = FETCH_TXN_COMMITTED if read_committed else FETCH_HIGH_WATERMARK
        result = self._read_into(result, log_, fetch_offset, max_bytes, isolation, min_one_message)
        stats = self.topic_stats
        if stats is not None and result.size:
            stats.read(topic, result.size)
        return result

    def _preferred_read_replica(self, partition: Partition, client: ClientMetadata, fetch_offset: int,
                                now: int) -> int | None:
        """The follower the selector names for this consumer, from the leader's view of its
        followers and of the brokers' endpoints on the request's listener."""
        isr = partition.in_sync_replica_ids
        listener = client.listener_name
        views = []
        for replica_id, replica in partition.remote_replicas.items():
            node = self.brokers.node(replica_id, listener)
            state = replica.state
            views.append(FollowerView(replica_id, None if node is None else node[2], node is not None,
                                      replica_id in isr, state.log_start_offset, state.log_end_offset,
                                      now - state.last_caught_up_time_ms))
        leader = self.brokers.node(self.node_id, listener)
        return preferred_read_replica(self.replica_selector, client.rack_id,
                                      None if leader is None else leader[2], views, fetch_offset)

    def read_for_follower(self, topic: str, index: int, replica_id: int, broker_epoch: int,
                          current_leader_epoch: int, fetch_offset: int, last_fetched_epoch: int,
                          log_start_offset: int, max_bytes: int, min_one_message: bool = True,
                          now_ms: int | None = None, update_fetch_state: bool = True) -> ReadResult:
        """A follower's fetch: a diverging epoch instead of records when its last fetched epoch
        ends earlier in our log; else records up to our log end offset, after which its fetch
        offset counts as its log end offset (ISR expansion, high watermark). A read of a fetch
        that waited (``update_fetch_state`` False) records nothing: its arrival did."""
        tp = (topic, index)
        partition = self.partitions.get(tp)
        if partition is None:
            return ReadResult(self._missing(tp))
        if self._offline(partition):
            return ReadResult(Error.KAFKA_STORAGE_ERROR)
        check = partition.check_follower_fetch(replica_id, current_leader_epoch, fetch_offset,
                                               last_fetched_epoch)
        log_ = partition.log
        if check.error:
            result = ReadResult(check.error)
            if check.error == errors.OFFSET_OUT_OF_RANGE:
                result.high_watermark, result.log_start_offset = log_.high_watermark, log_.log_start_offset
            return result
        if check.diverging_epoch is not None:
            return ReadResult(errors.NONE, log_.high_watermark, log_.last_stable_offset,
                              log_.log_start_offset, diverging_epoch=check.diverging_epoch)
        leader_end = log_.log_end_offset
        result = self._read_into(ReadResult(), log_, fetch_offset, max_bytes, FETCH_LOG_END, min_one_message)
        if result.error:
            return result
        if not update_fetch_state:  # a read after a wait: the fetch was recorded on arrival
            result.high_watermark, result.last_stable_offset = log_.high_watermark, log_.last_stable_offset
            result.log_start_offset = log_.log_start_offset
            return result
        now = self.clock() if now_ms is None else now_ms
        try:
            outcome = partition.update_follower_fetch_state(replica_id, broker_epoch, fetch_offset,
                                                            log_start_offset, leader_end, now)
        except NotLeaderOrFollower:  # StaleBrokerEpoch too: Kafka answers this
            return ReadResult(errors.NOT_LEADER_OR_FOLLOWER)
        self._apply(tp, partition, outcome)
        # After the update: the follower learns a high watermark its own fetch may just have moved
        # (it is at most this fetch's offset, so never past what the follower holds), and the last
        # stable offset, as Kafka answers every fetch.
        result.high_watermark, result.last_stable_offset = log_.high_watermark, log_.last_stable_offset
        result.log_start_offset = log_.log_start_offset
        return result

    @staticmethod
    def _read_into(result: ReadResult, log_: Any, fetch_offset: int, max_bytes: int, isolation: str,
                   min_one_message: bool) -> ReadResult:
        try:
            info = log_.read(fetch_offset, max(max_bytes, 0), isolation, min_one_message=min_one_message)
        except OffsetOutOfRangeError:
            result.error = errors.OFFSET_OUT_OF_RANGE
            return result
        except KafkaStorageError:
            result.error = Error.KAFKA_STORAGE_ERROR
            return result
        if info.records is not None and info.size:
            result.records, result.size = info.records, info.size
        if info.aborted_transactions is not None:
            # By first offset: the .txnindex (and Kafka's answer) is in abort order, which the
            # Java client and librdkafka sort but kafkajs walks as a queue by first offset.
            result.aborted_transactions = sorted(
                ((t.producer_id, t.first_offset) for t in info.aborted_transactions), key=lambda t: t[1])
        return result

    # ---- offsets ------------------------------------------------------------------------------

    def list_offset(self, topic: str, index: int, timestamp: int, *, replica_id: int = -1,
                    isolation_level: int = 0, current_leader_epoch: int = -1) -> OffsetResult:
        """ListOffsets for one partition. Clients (replica_id -1) see up to the high watermark
        (the last stable offset for read_committed), replicas up to the log end offset. The
        debugging replica id (-2) may ask any replica, leader or not."""
        partition, error = self._leader((topic, index), current_leader_epoch,
                                        require_leader=replica_id != DEBUGGING_REPLICA_ID)
        if partition is None:
            return OffsetResult(error)
        log_ = partition.log
        from_client = replica_id == -1
        if not from_client:
            last_fetchable = log_.log_end_offset
        elif isolation_level == 1:  # read_committed: Kafka's lastFetchableOffset
            last_fetchable = log_.last_stable_offset
        else:
            last_fetchable = log_.high_watermark
        # After an unclean election the HW may lag the epoch start: clients must not see it.
        start = partition.leader_epoch_start_offset
        not_available = from_client and start is not None and start > log_.high_watermark
        if timestamp == LATEST:
            if not_available:
                return OffsetResult(Error.OFFSET_NOT_AVAILABLE)
            if replica_id == DEBUGGING_REPLICA_ID:
                # Any replica answers, with what its own log holds: the controller's balanced
                # recovery compares replicas by (epoch of the last batch, log end offset).
                return OffsetResult(errors.NONE, log_.log_end_offset, -1, log_.latest_epoch)
            return OffsetResult(errors.NONE, last_fetchable, -1, partition.leader_epoch)
        if timestamp in (EARLIEST, EARLIEST_LOCAL):
            offset = log_.log_start_offset
            return OffsetResult(errors.NONE, offset, -1, log_.epoch_for_offset(offset))
        if timestamp == LATEST_TIERED:
            return OffsetResult(errors.NONE, -1, -1, -1)  # no tiered storage
        if timestamp != MAX_TIMESTAMP and timestamp < 0:
            return OffsetResult(Error.INVALID_REQUEST)
        try:  # both read the log: -3 scans the batch holding the greatest timestamp
            if timestamp == MAX_TIMESTAMP:
                found = log_.offset_of_max_timestamp()
            else:
                found = log_.fetch_offset_by_timestamp(timestamp)
        except KafkaStorageError:
            return OffsetResult(Error.KAFKA_STORAGE_ERROR)
        if found is not None and found[0] < last_fetchable:
            return OffsetResult(errors.NONE, found[0], found[1], log_.epoch_for_offset(found[0]))
        return OffsetResult(Error.OFFSET_NOT_AVAILABLE if not_available else errors.NONE)

    def offset_for_leader_epoch(self, topic: str, index: int, current_leader_epoch: int,
                                leader_epoch: int, replica_id: int = -1) -> tuple[int, int, int]:
        """(error, epoch, end offset) of ``leader_epoch`` in the leader's log."""
        partition = self.partitions.get((topic, index))
        if partition is None:
            return self._missing((topic, index)), -1, -1
        if self._offline(partition):
            return Error.KAFKA_STORAGE_ERROR, -1, -1
        return partition.last_offset_for_leader_epoch(current_leader_epoch, leader_epoch,
                                                      replica_id != DEBUGGING_REPLICA_ID)

    def delete_records(self, topic: str, index: int, offset: int) -> tuple[int, int]:
        """(error, required low watermark): raise the leader's log start offset to ``offset``
        (-1: the high watermark); segments below it go on the next retention pass. The
        followers raise theirs when their next fetch answer carries it; the request is done
        once ``low_watermark`` reaches the returned offset (Kafka's DelayedDeleteRecords).
        POLICY_VIOLATION where cleanup.policy lacks delete, after the leader check and before
        the offset's, as Kafka's Partition.deleteRecordsOnLeader."""
        partition, error = self._leader((topic, index))
        if partition is None:
            return error, -1
        log_ = partition.log
        if not log_.config.deletes:
            return Error.POLICY_VIOLATION, -1
        try:
            log_.maybe_increment_log_start_offset(log_.high_watermark if offset == -1 else offset)
        except OffsetOutOfRangeError:
            return errors.OFFSET_OUT_OF_RANGE, -1
        except KafkaStorageError:
            return Error.KAFKA_STORAGE_ERROR, -1
        self.on_changed(topic, index)  # followers' long polls answer with the new log start
        return errors.NONE, log_.log_start_offset

    def active_producers(self, topic: str, index: int) -> tuple[int, list[ProducerView]]:
        """(error, the idempotent producers with state in the leader's log), for DescribeProducers:
        leader only, as Kafka's Partition.activeProducerState."""
        partition, error = self._leader((topic, index))
        if partition is None:
            return error, []
        return errors.NONE, [ProducerView(pid, entry.epoch, entry.last_seq, entry.last_timestamp,
                                          entry.coordinator_epoch, entry.current_txn_first_offset)
                             for pid, entry in sorted(partition.log.producer_state.producers.items())]

    def describe_log_dirs(self, wanted: set[TopicPartition] | None = None) -> list[LogDirView]:
        """Kafka's ReplicaManager.describeLogDirs: every log dir, with the size of each wanted
        partition's log (None: all) and its offset lag (max(HW - LEO, 0): no future logs
        here); an offline dir, or one whose file system cannot be read, answers
        KAFKA_STORAGE_ERROR and nothing more."""
        out = []
        for d in self.logs.log_dirs:
            if self.failure_channel.is_offline(d):
                out.append(LogDirView(d, Error.KAFKA_STORAGE_ERROR, []))
                continue
            try:
                fs = os.statvfs(d)
            except OSError:
                out.append(LogDirView(d, Error.KAFKA_STORAGE_ERROR, []))
                continue
            partitions = [(tp[0], tp[1], lg.size_in_bytes, max(lg.high_watermark - lg.log_end_offset, 0),
                           False)
                          for tp, lg in sorted(self.logs.logs_in(d).items())
                          if wanted is None or tp in wanted]
            for tp, future in sorted(getattr(self.logs, "future_logs", {}).items()):
                current = self.logs.get_log(*tp)
                if future.parent_dir == d and current is not None and (wanted is None or tp in wanted):
                    partitions.append((tp[0], tp[1], future.size_in_bytes,
                                       max(current.log_end_offset - future.log_end_offset, 0), True))
            out.append(LogDirView(d, errors.NONE, partitions, fs.f_blocks * fs.f_frsize,
                                  fs.f_bavail * fs.f_frsize))
        return out

    # ---- moving replicas between log dirs ------------------------------------------------------

    def _alter_log_dirs_rate_of(self, image: Any) -> float | None:
        value = dynamic_broker_configs(image, self.node_id).get(ALTER_LOG_DIRS_RATE) \
            if getattr(image, "configs", None) is not None else None
        if value is None:
            return self.alter_log_dirs_static_rate
        try:
            rate = int(value)
        except ValueError:
            return self.alter_log_dirs_static_rate
        return None if rate < 0 or rate >= LONG_MAX else float(rate)

    def _resume_move(self, tp: TopicPartition) -> None:
        """A future log found at startup (or left by a stopped move) resumes its copy."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return  # applied off any loop (in-process tests): nothing to run the move
        self.log_dir_mover.start(tp)

    def _moved(self, tp: TopicPartition, moved: Any) -> None:
        """The future log replaced the current: the partition reads and appends to it, and a
        follower's fetch starts again on it."""
        partition = self.partitions.get(tp)
        if partition is None:
            return
        partition.log = moved
        if tp in self._fetching:
            self._stop_fetching([tp])
            self._make_followers([(tp, partition, None)], self.clock())
        self.on_changed(*tp)

    async def alter_replica_log_dirs(self, moves: dict[TopicPartition, str]) -> dict[TopicPartition, int]:
        """Kafka's ReplicaManager.alterReplicaLogDirs: each partition's replica here moves to
        its log dir (an absolute path of log.dirs; LOG_DIR_NOT_FOUND for another), copied into
        a future log there and swapped in once caught up. KAFKA_STORAGE_ERROR when the target
        dir or the partition's is offline; REPLICA_NOT_AVAILABLE for a partition not here; the
        dir it is in already: nothing to do (and a move elsewhere under way is abandoned)."""
        out: dict[TopicPartition, int] = {}
        for tp, target in moves.items():
            d = self.logs.log_dir_of(target) if os.path.isabs(target) else None
            if d is None:
                out[tp] = Error.LOG_DIR_NOT_FOUND
                continue
            if self.failure_channel.is_offline(d):
                out[tp] = Error.KAFKA_STORAGE_ERROR
                continue
            partition = self.partitions.get(tp)
            if partition is not None and self._offline(partition):
                out[tp] = Error.KAFKA_STORAGE_ERROR
                continue
            if partition is None or self.logs.get_log(*tp) is None:
                out[tp] = Error.REPLICA_NOT_AVAILABLE
                continue
            if self.logs.future_dir_of(*tp) not in (None, d):
                await self.log_dir_mover.cancel(tp)  # its target changed: that copy stops
            try:
                future = self.logs.create_future_log(tp[0], tp[1], d)
            except KafkaStorageError:
                out[tp] = Error.KAFKA_STORAGE_ERROR
                continue
            if future is not None:
                self.log_dir_mover.start(tp)
            out[tp] = Error.NONE
        return out

    def low_watermark(self, topic: str, index: int) -> tuple[int, int]:
        """(error, low watermark) of a partition led here (Partition.low_watermark)."""
        partition, error = self._leader((topic, index))
        if partition is None:
            return error, -1
        return errors.NONE, partition.low_watermark()


__all__ = ["AppendResult", "ClientMetadata", "LogDirView", "OffsetResult", "ProducerView", "ReadResult",
           "ReplicaManager"]
