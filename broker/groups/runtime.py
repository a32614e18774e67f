"""The group coordinator's asyncio shell: the broker's IO around the pure core.

Theory of operation. The core (coordinator.py) is stepped with requests and the clock and
returns Effects: records to append to a partition of ``__consumer_offsets`` and replies
for parked requests. This shell

- hands the core the group configs of each new metadata image (KIP-848's GROUP resource);
- watches the metadata image for the ``__consumer_offsets`` partitions this broker leads:
  it loads each by replaying its log, unloads it when the leadership moves away, and
  reloads it when its leader epoch changed in between (the log may have been truncated and
  rewritten by another leader meanwhile);
- appends each step's records to a partition as one batch, through the ReplicaManager, and
  answers only once they are committed (Kafka's CoordinatorRuntime);
- asks the controller to create the topic the first time a group needs it;
- runs one timer task that sleeps until the core's next deadline, and one that runs the
  core's offsets retention pass every offsets.retention.check.interval.ms, telling it which
  offset records are still waiting to commit.

Writes. Group state is changed by the step that writes its records; committed offsets only
once the high watermark passed their records (the core's ``apply_batch``, batch by batch in
log order, each at its log offsets). A reply is released once the high watermark passed
every record written to its partition so far, the step's own and earlier ones, since it may
depend on any of them; a request that writes nothing (a heartbeat) waits the same way. How a write ends:

| the write                                  | the core                         | the reply                 |
|--------------------------------------------|----------------------------------|---------------------------|
| committed                                  | its offsets applied              | the core's                |
| NOT_ENOUGH_REPLICAS before writing (offset | unchanged: the step changed      | COORDINATOR_NOT_AVAILABLE |
| commits only, see below)                   | nothing else                     |                           |
| not committed in offsets.commit.timeout.ms | keeps it, applied if committed   | COORDINATOR_NOT_AVAILABLE |
| leadership lost, before or while waiting   | partition unloaded               | NOT_COORDINATOR           |
| refused otherwise (too large, disk error)  | partition reloaded from its log  | Kafka's mapping, below    |
| appended at another offset than expected   | partition reloaded from its log  | NOT_COORDINATOR           |

Offset-only writes are appended with acks=-1, so under min.insync.replicas they are refused
before they reach the log and fail at once. Any other write is appended with acks=1 and
waits for the high watermark (Kafka 4.x's CoordinatorPartitionWriter), because refusing it
would mean undoing a group state change: a write that times out stays in the log and in the
core, and either commits later or ends with the leadership, which unloads the partition. The
core therefore never keeps a record that cannot commit while it still leads the partition.

Kafka's mapping of a write's error (CoordinatorOperationExceptionHelper, Kafka 4.x):

| append error                                        | reply                     |
|-----------------------------------------------------|---------------------------|
| UNKNOWN_TOPIC_OR_PARTITION, NOT_ENOUGH_REPLICAS,    | COORDINATOR_NOT_AVAILABLE |
| REQUEST_TIMED_OUT                                   |                           |
| NOT_LEADER_OR_FOLLOWER, KAFKA_STORAGE_ERROR         | NOT_COORDINATOR           |
| MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE,           | UNKNOWN_SERVER_ERROR      |
| INVALID_FETCH_SIZE                                  |                           |
| NOT_ENOUGH_REPLICAS_AFTER_APPEND                    | none: it is committed     |
| NETWORK_EXCEPTION (a TxnOffsetCommit's verification)| COORDINATOR_LOAD_IN_PROGRESS |

Transactions. A TxnOffsetCommit is first verified (KIP-890, Kafka's
scheduleTransactionalWriteOperation, when transaction.partition.verification.enable): unless the
producer's transaction is already open on the group's partition, ``verify_transaction`` asks the
transaction coordinator (``broker.transactions.verify``) whether the transaction holds that
partition (from v5, KIP-890 part 2, has it add that partition: AddPartitionsToTxn v5 without
verify_only, no AddOffsetsToTxn from a client of transaction version 2), and the request
answers its refusal as Kafka's AddPartitionsToTxnManager and
CoordinatorOperationExceptionHelper map it (PRODUCER_FENCED as INVALID_PRODUCER_EPOCH,
TRANSACTION_ABORTABLE as INVALID_TXN_STATE below v4, NETWORK_EXCEPTION as
COORDINATOR_LOAD_IN_PROGRESS). A marker of the producer appended to the partition while it was
being verified voids the verification (Kafka's VerificationGuard, the partition's own: engine/
producer_state.py's start_verification before the request, ``verified`` after it):
INVALID_TXN_STATE. So a
late retry, a zombie, or a producer that skipped AddOffsetsToTxn cannot open a transaction on
``__consumer_offsets`` that no marker ends. Its records are appended as one transactional
batch of the producer (its id and epoch, base sequence -1), like any offset commit (acks=-1); once
committed they are pending in the core. ``complete_transaction`` is how the WriteTxnMarkers
handler ends a transaction on a partition of ``__consumer_offsets``: it appends the marker
(engine/control.py) through the same path, acks=-1, and answers once it is committed, when the
core commits or drops the producer's pending offsets. Its answer is what WriteTxnMarkers
answers for the partition (Kafka's KafkaApis): the append's own error (a stale coordinator
epoch is TRANSACTION_COORDINATOR_FENCED, from the log), REQUEST_TIMED_OUT, or
NOT_LEADER_OR_FOLLOWER when this broker does not coordinate the partition (not led, loading,
unloaded while waiting), so that the transaction coordinator retries it at the new leader.

Loading. The new leader's log holds everything committed, so a partition is replayed from
its log start offset to its log end offset. The batches below the high watermark (as it
stood when loading began) are committed; the tail above it is replayed into group state but
its offsets wait, and every reply waits, until the high watermark passes the log end offset
(the tail is one pending write). Transactional batches and markers replay as storage.py says,
so a partition loaded mid-transaction holds the same pending offsets as the coordinator that
wrote them.

Per loaded partition (``_Partition``):

| field    | meaning and invariant                                                         |
|----------|-------------------------------------------------------------------------------|
| epoch    | leader epoch it was loaded in; another epoch in the image means reload        |
| log_end  | the log end offset the core has replayed; the next append must start here    |
| writes   | appended, not yet committed, in offset order; each ``required`` (last offset  |
|          | + 1) above the last, and every earlier write committed before a later one      |
| committer| the task waiting for the oldest write to commit (done once ``writes`` is empty) |
"""
from __future__ import annotations

import asyncio
import logging
import random
import struct
import time
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

from broker.groups import storage
from broker.groups.consumer_group import ConsumerGroupConfig, Topics
from broker.groups.coordinator import CoordinatorConfig, Effects, GroupCoordinator
from engine.control import CONTROL_ABORT, CONTROL_COMMIT, build_end_txn_marker_batch
from engine.log import ORIGIN_COORDINATOR
from engine.producer_state import SENTINEL_GUARD
from protocol import messages as M
from protocol.errors import Error

log = logging.getLogger("strom.broker.groups")

CREATE_TOPICS_VERSION = 7
CREATE_RETRY_S = 1.0

_COORDINATOR_ERRORS: dict[int, int] = {
    Error.UNKNOWN_TOPIC_OR_PARTITION: Error.COORDINATOR_NOT_AVAILABLE,
    Error.NOT_ENOUGH_REPLICAS: Error.COORDINATOR_NOT_AVAILABLE,
    Error.REQUEST_TIMED_OUT: Error.COORDINATOR_NOT_AVAILABLE,
    Error.NOT_LEADER_OR_FOLLOWER: Error.NOT_COORDINATOR,
    Error.KAFKA_STORAGE_ERROR: Error.NOT_COORDINATOR,
    Error.MESSAGE_TOO_LARGE: Error.UNKNOWN_SERVER_ERROR,
    Error.RECORD_LIST_TOO_LARGE: Error.UNKNOWN_SERVER_ERROR,
    Error.INVALID_FETCH_SIZE: Error.UNKNOWN_SERVER_ERROR,
    Error.NOT_ENOUGH_REPLICAS_AFTER_APPEND: Error.NONE,  # the high watermark passed it
    # A transaction coordinator that could not be reached to verify a TxnOffsetCommit: clients
    # retry this one without looking the group coordinator up again.
    Error.NETWORK_EXCEPTION: Error.COORDINATOR_LOAD_IN_PROGRESS,
}
# Append errors that end this broker's tenure of the partition: unload it (it is loaded again
# only if the metadata image still makes this broker its leader).
_LEADERSHIP_LOST = {Error.NOT_LEADER_OR_FOLLOWER, Error.UNKNOWN_TOPIC_OR_PARTITION,
                    Error.KAFKA_STORAGE_ERROR}
_KEY_VERSION = struct.Struct(">h")
# What WriteTxnMarkers answers NOT_LEADER_OR_FOLLOWER instead (Kafka's KafkaApis: the
# transaction coordinator does not expect them, and retries that one).
_NOT_HERE = {Error.NOT_COORDINATOR, Error.COORDINATOR_NOT_AVAILABLE, Error.COORDINATOR_LOAD_IN_PROGRESS}


def coordinator_error(append_error: int) -> int:
    """What a group request answers when the write it waits for ended with ``append_error``."""
    return _COORDINATOR_ERRORS.get(append_error, append_error)


def _now_ms() -> int:
    return int(time.time() * 1000)


def _is_offset_commit(key: bytes) -> bool:
    return _KEY_VERSION.unpack_from(key, 0)[0] <= 1  # OffsetCommitKey v0/v1


class Waiter:
    """A parked request: the future its handler awaits, the ``__consumer_offsets`` partition
    its answer depends on (-1: none), and how to answer it with an error code instead."""

    __slots__ = ("error", "future", "partition")

    def __init__(self, future: asyncio.Future, partition: int, error: Callable[[int], Any]):
        self.future = future
        self.partition = partition
        self.error = error

    def answer(self, response: Any) -> None:
        if not self.future.done():
            self.future.set_result(response)


class _Write:
    __slots__ = ("batches", "committed", "required")

    def __init__(self, required: int, batches: list[storage.LogBatch], committed: asyncio.Future):
        self.required = required  # the high watermark that commits it
        self.batches = batches  # applied to the core when committed, in order
        self.committed = committed  # NONE once committed; NOT_COORDINATOR if unloaded first


# The first TxnOffsetCommit version whose clients run transaction version 2: the group's
# partition is added to the transaction by its coordinator, the client sends no AddOffsetsToTxn
# (KIP-890 part 2, AddPartitionsToTxnManager's txnOffsetCommitRequestVersionToTransactionSupportedOperation).
ADD_PARTITION_TXN_OFFSET_COMMIT_VERSION = 5


def verification_error(error: int, version: int) -> int:
    """What a TxnOffsetCommit of ``version`` answers when the transaction coordinator answered
    ``error`` to its verification: AddPartitionsToTxnManager's mapping (PRODUCER_FENCED is
    INVALID_PRODUCER_EPOCH; TRANSACTION_ABORTABLE is INVALID_TXN_STATE for the versions before
    4, whose clients do not know it), then the coordinator's (``coordinator_error``)."""
    if error == Error.PRODUCER_FENCED:
        error = Error.INVALID_PRODUCER_EPOCH
    elif error == Error.TRANSACTION_ABORTABLE and version < 4:
        error = Error.INVALID_TXN_STATE
    return coordinator_error(error)


class _Partition:
    def __init__(self, epoch: int):
        self.epoch = epoch
        self.log_end = -1
        self.writes: deque[_Write] = deque()
        self.committer: asyncio.Task | None = None


class GroupCoordinatorRuntime:
    def __init__(self, broker):
        self.broker = broker
        c = broker.config
        self.core = GroupCoordinator(CoordinatorConfig(
            initial_rebalance_delay_ms=c["group.initial.rebalance.delay.ms"],
            min_session_timeout_ms=c["group.min.session.timeout.ms"],
            max_session_timeout_ms=c["group.max.session.timeout.ms"],
            max_size=c["group.max.size"],
            offset_metadata_max_bytes=c.get("offset.metadata.max.bytes", 4096),
            offsets_retention_ms=c.get("offsets.retention.minutes", 10080) * 60000,
            consumer=ConsumerGroupConfig(
                session_timeout_ms=c.get("group.consumer.session.timeout.ms", 45000),
                heartbeat_interval_ms=c.get("group.consumer.heartbeat.interval.ms", 5000),
                max_size=c.get("group.consumer.max.size", 2**31 - 1)),
        ), random.Random())
        self.consumer_protocol = "consumer" in c.get("group.coordinator.rebalance.protocols",
                                                     ["classic", "consumer"])
        self.commit_timeout_ms = c.get("offsets.commit.timeout.ms", 5000)
        self.retention_check_ms = c.get("offsets.retention.check.interval.ms", 600000)
        self._wake = asyncio.Event()
        self._tasks: list[asyncio.Task] = []
        self._loads: dict[int, asyncio.Task] = {}
        self._partitions: dict[int, _Partition] = {}  # loading or loaded here
        self._creating: asyncio.Task | None = None

    # ---- lifecycle -----------------------------------------------------------------------

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._watch_metadata()), loop.create_task(self._run_timers()),
                       loop.create_task(self._run_offsets_retention())]

    async def stop(self) -> None:
        tasks = self._tasks + list(self._loads.values()) + ([self._creating] if self._creating else [])
        tasks += [ctx.committer for ctx in self._partitions.values() if ctx.committer is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for p in sorted(set(self._partitions) | self.core.owned | self.core.loading):
            self._unload(p)

    # ---- the topic and its partitions ----------------------------------------------------

    def ensure_offsets_topic(self) -> bool:
        """True if ``__consumer_offsets`` exists; otherwise start creating it (once)."""
        if storage.OFFSETS_TOPIC in self.broker.image.topics:
            return True
        if self._creating is None or self._creating.done():
            self._creating = asyncio.get_running_loop().create_task(self._create_offsets_topic())
        return False

    async def _create_offsets_topic(self) -> None:
        """With offsets.topic.replication.factor replicas exactly: as in Kafka, the controller
        refuses (INVALID_REPLICATION_FACTOR) while fewer brokers are up, and a later group
        request tries again."""
        c = self.broker.config
        R = M.CreateTopicsRequest
        request = R(topics=[R.CreatableTopic(
            name=storage.OFFSETS_TOPIC, num_partitions=c["offsets.topic.num.partitions"],
            replication_factor=c["offsets.topic.replication.factor"],
            # Kafka's offsets topic configs: compacted, its own segment size, and the coordinator's
            # batches stored as written whatever the broker's compression.type says.
            configs=[R.CreatableTopic.CreatableTopicConfig(name="cleanup.policy", value="compact"),
                     R.CreatableTopic.CreatableTopicConfig(name="segment.bytes",
                                                           value=str(c["offsets.topic.segment.bytes"])),
                     R.CreatableTopic.CreatableTopicConfig(name="compression.type", value="producer")])],
            timeout_ms=5000, validate_only=False)
        try:
            response = await self.broker.follower.forward(19, CREATE_TOPICS_VERSION, request)
            for t in response.topics:
                if t.error_code not in (Error.NONE, Error.TOPIC_ALREADY_EXISTS):
                    log.warning("creating %s failed: %s %s", t.name, Error(t.error_code).name,
                                t.error_message)
                    await asyncio.sleep(CREATE_RETRY_S)  # the next request tries again, not sooner
        except (ConnectionError, TimeoutError, OSError) as e:
            log.warning("creating %s failed: %s", storage.OFFSETS_TOPIC, e)
            await asyncio.sleep(CREATE_RETRY_S)

    def topics(self) -> Topics:
        """The metadata image's topics as the consumer group assignor sees them."""
        return {name: (t.topic_id, len(t.partitions)) for name, t in self.broker.image.topics.items()
                if name != storage.OFFSETS_TOPIC}

    def coordinator_of(self, group_id: str) -> tuple[int, int]:
        """(error, node id of the leader of the group's partition)."""
        topic = self.broker.image.topics.get(storage.OFFSETS_TOPIC)
        if topic is None or not topic.partitions:
            return Error.COORDINATOR_NOT_AVAILABLE, -1
        partition = topic.partitions.get(storage.partition_for(group_id, len(topic.partitions)))
        if partition is None or partition.leader < 0:
            return Error.COORDINATOR_NOT_AVAILABLE, -1
        return Error.NONE, partition.leader

    def partition_of(self, group_id: str | None) -> int:
        """The group's partition of ``__consumer_offsets``; -1 while the topic is unknown."""
        if group_id is None or self.core.num_partitions <= 0:
            return -1
        return self.core.partition_for(group_id)

    async def _watch_metadata(self) -> None:
        while True:
            try:
                self._reconcile()
            except Exception:
                log.exception("group coordinator: reconciling with the metadata image failed")
            await self.broker.follower.wait_for_change(1.0)

    def _reconcile(self) -> None:
        image = self.broker.image
        self.core.consumer.group_configs = dict(getattr(image, "group_configs", None) or {})
        topic = image.topics.get(storage.OFFSETS_TOPIC)
        led: dict[int, int] = {}  # partition -> leader epoch
        if topic is not None:
            self.core.num_partitions = len(topic.partitions)
            led = {p: st.leader_epoch for p, st in topic.partitions.items()
                   if st.leader == self.broker.node_id}
        for p in sorted(set(self._partitions) | self.core.owned | self.core.loading):
            ctx = self._partitions.get(p)
            if p not in led or ctx is None or ctx.epoch != led[p]:
                self._unload(p)
        if topic is None:
            self.core.num_partitions = 0
            return
        for p, epoch in led.items():
            if p not in self._partitions:
                self._partitions[p] = _Partition(epoch)
                self.core.begin_load(p)
                self._loads[p] = asyncio.get_running_loop().create_task(self._load(p))

    async def _load(self, partition: int) -> None:
        """Replay the partition from its log start offset to its log end offset: the latest
        record of a key wins; offsets above the high watermark wait for their commit."""
        started = time.monotonic()
        ctx = self._partitions[partition]
        state = storage.GroupState()
        tail: list[storage.LogBatch] = []  # offset records and markers above the high watermark
        log_ = self.broker.replicas.local_log(storage.OFFSETS_TOPIC, partition)
        hw = end = 0
        if log_ is not None:
            hw, end = log_.high_watermark, log_.log_end_offset
            chunk = self.broker.config.get("offsets.load.buffer.size", 5242880)
            for data in storage.read_chunks(log_, chunk):
                _replay(state, data, hw, tail)
                await asyncio.sleep(0)  # let other requests in between chunks
        self._loads.pop(partition, None)
        self.core.complete_load(partition, state, _now_ms())
        ctx.log_end = end
        if end > hw:
            ctx.writes.append(_Write(end, tail, asyncio.get_running_loop().create_future()))
            self._maybe_commit(partition, ctx)
        self._wake.set()
        log.info("loaded %s-%d: %d groups, %d groups with offsets in %.3f s (%d offsets above the "
                 "high watermark %d)", storage.OFFSETS_TOPIC, partition, len(state.groups),
                 len(state.offsets), time.monotonic() - started, end - hw, hw)

    def _unload(self, partition: int) -> None:
        """Stop coordinating the partition: its writes and parked requests are answered
        NOT_COORDINATOR, its groups and offsets leave the core."""
        task = self._loads.pop(partition, None)
        if task is not None:
            task.cancel()
        ctx = self._partitions.pop(partition, None)
        if ctx is not None:
            if ctx.committer is not None and ctx.committer is not asyncio.current_task():
                ctx.committer.cancel()
            for write in ctx.writes:
                write.committed.set_result(Error.NOT_COORDINATOR)
            ctx.writes.clear()
        self._complete(self.core.unload(partition))

    def _reload(self, partition: int, why: str) -> None:
        log.warning("reloading %s-%d: %s", storage.OFFSETS_TOPIC, partition, why)
        self._unload(partition)
        self._reconcile()

    # ---- effects -------------------------------------------------------------------------

    def waiter(self, group_id: str | None, error: Callable[[int], Any]) -> Waiter:
        """A waiter for a request of ``group_id``; ``error(code)`` is its error response."""
        return Waiter(asyncio.get_running_loop().create_future(), self.partition_of(group_id), error)

    def run(self, fx: Effects) -> dict[int, int]:
        """Append the step's records (one batch per partition), then release its replies as
        their partitions' writes commit. The partitions whose append failed, with the error
        their requests answer (their replies are answered with it already)."""
        for event in fx.events:
            log.info("%s", event)
        batches: dict[int, list[tuple[bytes, bytes | None]]] = {}
        for partition, records in fx.appends:
            batches.setdefault(partition, []).extend(records)
        failed = {}
        for partition, records in batches.items():
            code = self._append(partition, records, fx.producer)
            if code != Error.NONE:
                failed[partition] = code
        self._complete(fx, failed)
        self._wake.set()
        return failed

    async def write(self, fx: Effects, partitions: Iterable[int]) -> dict[int, int]:
        """``run(fx)``, then wait until everything written to each of ``partitions`` is
        committed: for each, NONE or the error its requests answer."""
        failed = self.run(fx)
        return {p: failed[p] if p in failed else await self.committed(p) for p in set(partitions)}

    async def committed(self, partition: int) -> int:
        """Wait until the high watermark passed every record written to the partition so
        far: NONE, or the error a request depending on them answers."""
        ctx = self._partitions.get(partition)
        if ctx is None or not ctx.writes:
            return Error.NONE
        try:
            async with asyncio.timeout(self.commit_timeout_ms / 1000):
                code = await asyncio.shield(ctx.writes[-1].committed)
        except TimeoutError:
            code = Error.REQUEST_TIMED_OUT
        return coordinator_error(code)

    def _append(self, partition: int, records: list[tuple[bytes, bytes | None]],
                producer: tuple[int, int] | None = None) -> int:
        """Append one batch of ``records`` (a transactional batch of ``producer`` if given);
        NONE or the error its requests answer."""
        offsets_only = all(_is_offset_commit(key) for key, _ in records)
        now = _now_ms()
        producer_id, producer_epoch = producer or (-1, -1)
        buf = storage.build_records_batch(records, now, producer_id, producer_epoch)
        code = self._append_batch(partition, buf, storage.LogBatch(
            [(i, key, value) for i, (key, value) in enumerate(records)], producer_id),
            offsets_only, now)
        return coordinator_error(code)

    def _append_batch(self, partition: int, buf: bytearray, batch: storage.LogBatch, undone: bool,
                      now: int, transaction_version: int = 0) -> int:
        """Append ``buf``, which holds ``batch`` (its record offsets relative to the batch's
        base offset); ``undone``: a refusal leaves the core as it was (offset records and
        markers apply only once committed), so it is appended with acks=-1 and its failure
        needs no reload. NONE or the append's error."""
        ctx = self._partitions.get(partition)
        if ctx is None or partition not in self.core.owned:
            return Error.NOT_COORDINATOR
        result = self.broker.replicas.append_local(storage.OFFSETS_TOPIC, partition, buf,
                                                   acks=-1 if undone else 1,
                                                   origin=ORIGIN_COORDINATOR, now_ms=now,
                                                   transaction_version=transaction_version)
        if result.error != Error.NONE:
            log.warning("append to %s-%d failed: %s %s", storage.OFFSETS_TOPIC, partition,
                        Error(result.error).name, result.error_message or "")
            if result.error in _LEADERSHIP_LOST:
                self._unload(partition)
                self._reconcile()
            elif not undone:  # the core already changed what the log did not take
                self._reload(partition, f"a write failed with {Error(result.error).name}")
            return result.error
        if result.base_offset != ctx.log_end:
            self._reload(partition, f"appended at {result.base_offset}, the core expected {ctx.log_end}")
            return Error.NOT_COORDINATOR
        ctx.log_end = result.required_offset
        batch.records = [(result.base_offset + i, key, value) for i, key, value in batch.records]
        ctx.writes.append(_Write(result.required_offset, [batch], asyncio.get_running_loop().create_future()))
        self._maybe_commit(partition, ctx)
        return Error.NONE

    # ---- transactions --------------------------------------------------------------------

    async def verify_transaction(self, partition: int, transactional_id: str, producer_id: int,
                                 producer_epoch: int, version: int) -> int:
        """KIP-890's verification of a TxnOffsetCommit of ``version`` before its records are
        written to ``partition``: NONE, or the error the request answers. NONE at once when
        verification is off or no transaction coordinator runs, when the partition is not
        coordinated here (the core answers that), or when the producer's transaction is already
        open on the partition. Returns without yielding after its last check, so a caller that
        appends right after it appends what was verified."""
        txns = getattr(self.broker, "transactions", None)
        if txns is None or not txns.verification_enabled or partition not in self.core.owned:
            return Error.NONE
        log_ = self.broker.replicas.local_log(storage.OFFSETS_TOPIC, partition)
        if log_ is None:
            return Error.NONE
        guard = log_.producer_state.start_verification(producer_id, producer_epoch, _now_ms())
        if guard is SENTINEL_GUARD:
            return Error.NONE  # its transaction is open on the partition
        tps = [(storage.OFFSETS_TOPIC, partition)]
        if version >= ADD_PARTITION_TXN_OFFSET_COMMIT_VERSION:
            errors = await txns.verify(transactional_id, producer_id, producer_epoch, tps, add=True)
        else:
            errors = await txns.verify(transactional_id, producer_id, producer_epoch, tps)
        code = errors.get((storage.OFFSETS_TOPIC, partition), Error.NONE)
        if code != Error.NONE:
            return verification_error(code, version)
        # The log's own check, as its append would make it: a marker of the producer that
        # landed meanwhile (or a log loaded again) voided the guard.
        log_ = self.broker.replicas.local_log(storage.OFFSETS_TOPIC, partition)
        if log_ is None or not log_.producer_state.verified(producer_id, producer_epoch, guard):
            return Error.INVALID_TXN_STATE
        return Error.NONE

    async def complete_transaction(self, partition: int, producer_id: int, producer_epoch: int,
                                   coordinator_epoch: int, commit: bool, transaction_version: int = 2) -> int:
        """End the producer's transaction on ``__consumer_offsets-partition``: append the
        marker, wait for it to commit (the core then commits or drops the producer's pending
        offsets). The error WriteTxnMarkers answers for the partition (see the module doc)."""
        if partition not in self.core.owned or partition not in self._partitions:
            return Error.NOT_LEADER_OR_FOLLOWER  # not coordinated here, or still loading
        now = _now_ms()
        buf = bytearray(build_end_txn_marker_batch(CONTROL_COMMIT if commit else CONTROL_ABORT, producer_id,
                                                   producer_epoch, coordinator_epoch, now))
        code = self._append_batch(partition, buf, storage.LogBatch([], producer_id, commit), True, now,
                                  transaction_version)
        if code == Error.NONE:
            ctx = self._partitions.get(partition)
            if ctx is not None and ctx.writes:
                try:
                    async with asyncio.timeout(self.commit_timeout_ms / 1000):
                        code = await asyncio.shield(ctx.writes[-1].committed)
                except TimeoutError:
                    code = Error.REQUEST_TIMED_OUT
        if code in _NOT_HERE:
            return Error.NOT_LEADER_OR_FOLLOWER
        if code != Error.NONE:
            log.info("%s-%d: the %s marker of producer %d ended with %s", storage.OFFSETS_TOPIC, partition,
                     "COMMIT" if commit else "ABORT", producer_id, Error(code).name)
        return code

    def _maybe_commit(self, partition: int, ctx: _Partition) -> None:
        """Apply the writes the high watermark passed, in order; wait for the rest."""
        log_ = self.broker.replicas.local_log(storage.OFFSETS_TOPIC, partition)
        hw = log_.high_watermark if log_ is not None else -1
        now = _now_ms()
        while ctx.writes and ctx.writes[0].required <= hw:
            write = ctx.writes.popleft()
            for batch in write.batches:
                self.core.apply_batch(batch, now)
            write.committed.set_result(Error.NONE)
        if ctx.writes and (ctx.committer is None or ctx.committer.done()):
            ctx.committer = asyncio.get_running_loop().create_task(self._commit(partition, ctx))

    async def _commit(self, partition: int, ctx: _Partition) -> None:
        tp = (storage.OFFSETS_TOPIC, partition)
        while ctx.writes and self._partitions.get(partition) is ctx:
            required = ctx.writes[0].required
            [code] = await self.broker.replicas.wait_committed([(tp, required)], self.commit_timeout_ms)
            if self._partitions.get(partition) is not ctx:
                return
            if code in (Error.NONE, Error.NOT_ENOUGH_REPLICAS_AFTER_APPEND):
                self._maybe_commit(partition, ctx)
            elif code != Error.REQUEST_TIMED_OUT:  # leadership lost: the writes may be gone
                log.info("%s-%d: waiting for offset %d to commit ended with %s", storage.OFFSETS_TOPIC,
                         partition, required, Error(code).name)
                self._unload(partition)
                self._reconcile()
                return

    def _complete(self, fx: Effects, failed: dict[int, int] | None = None) -> None:
        for waiter, response in fx.replies:
            self._answer(waiter, response, (failed or {}).get(waiter.partition))

    def _answer(self, waiter: Waiter, response: Any, failed: int | None = None) -> None:
        if waiter.future.done():
            return
        if failed:
            waiter.answer(waiter.error(failed))
            return
        ctx = self._partitions.get(waiter.partition)
        if ctx is None or not ctx.writes:
            waiter.answer(response)
            return
        timer = asyncio.get_running_loop().call_later(
            self.commit_timeout_ms / 1000,
            lambda: waiter.answer(waiter.error(coordinator_error(Error.REQUEST_TIMED_OUT))))

        def release(committed: asyncio.Future) -> None:
            timer.cancel()
            code = coordinator_error(committed.result())
            waiter.answer(response if code == Error.NONE else waiter.error(code))

        ctx.writes[-1].committed.add_done_callback(release)

    async def _run_timers(self) -> None:
        while True:
            deadline = self.core.next_deadline()
            self._wake.clear()
            timeout = None if deadline is None else max(0.0, (deadline - _now_ms()) / 1000)
            if timeout is None or timeout > 0:
                try:
                    async with asyncio.timeout(timeout):
                        await self._wake.wait()
                except TimeoutError:
                    pass
            try:
                fx = self.core.tick(_now_ms())
                if fx.appends or fx.replies or fx.events:
                    self.run(fx)
            except Exception:
                log.exception("group coordinator timers failed")
                await asyncio.sleep(0.1)

    def run_timers_soon(self) -> None:
        """Deadlines moved: the timer task recomputes its sleep."""
        self._wake.set()

    async def _run_offsets_retention(self) -> None:
        """Every offsets.retention.check.interval.ms, expire offsets and delete the groups left
        Empty without any (Kafka's cleanupGroupMetadata); the tombstones go out as any write."""
        while True:
            await asyncio.sleep(self.retention_check_ms / 1000)
            try:
                fx = self.core.cleanup_group_metadata(_now_ms(), self.pending_offsets())
                if fx.appends or fx.events:
                    self.run(fx)
            except Exception:
                log.exception("group coordinator: expiring offsets failed")

    def pending_offsets(self) -> set[tuple[str, str, int]]:
        """(group, topic, partition) of every offset record appended and not committed yet:
        the core's offsets do not show them, and no tombstone may follow them."""
        pending = set()
        for ctx in self._partitions.values():
            for write in ctx.writes:
                for batch in write.batches:
                    for _, key, _ in batch.records:
                        if _is_offset_commit(key):
                            k = storage.parse_key(key)[1]
                            pending.add((k.group, k.topic, k.partition))
        return pending


def _replay(state: storage.GroupState, data: bytes | memoryview, high_watermark: int,
            tail: list[storage.LogBatch]) -> None:
    """Replay whole batches into ``state``; the offset records and markers of batches above
    the high watermark go to ``tail`` instead, to be applied once committed (their group
    records are group state, replayed at once)."""
    for next_offset, batch in storage.read_batches(data):
        if next_offset <= high_watermark:
            state.replay_batch(batch)
            continue
        offsets = []
        for offset, key, value in batch.records:
            if _is_offset_commit(key):
                offsets.append((offset, bytes(key), None if value is None else bytes(value)))
            else:
                state.replay(key, value, batch.producer_id, offset)
        tail.append(storage.LogBatch(offsets, batch.producer_id, batch.marker))
