"""The transaction coordinator's asyncio shell: the broker's IO around the pure core
(coordinator.py), as broker/groups/runtime.py is the group coordinator's.

Theory of operation. The shell

- watches the metadata image for the ``__transaction_state`` partitions this broker leads:
  it loads each by replaying its log (``storage.replay``; the coordinator epoch is the
  partition's leader epoch), unloads it when the leadership moves away, and reloads it when
  its leader epoch changed in between;
- appends each ``Write``'s record to its partition as one batch with acks=-1 (Kafka's
  appendTransactionToLog: requiredAcks -1, so transaction.state.log.min.isr replicas hold it)
  and steps the core with the outcome (``complete_write``); the core's error mapping is
  Kafka's (coordinator.append_error). Writes to one partition are appended in the order the
  core made them; a CompleteCommit/CompleteAbort that failed with COORDINATOR_NOT_AVAILABLE
  (the quorum lost) is appended again after ``RETRY_BACKOFF_S``, unless the partition was
  unloaded or loaded again meanwhile (no record of an older coordinator epoch is appended); a
  record waits for its acks=-1 for its transaction's timeout; an append that raises ends its
  write with UNKNOWN_SERVER_ERROR; failures are warned once, then every
  ``APPEND_WARNING_EVERY_S`` with their count;
- hands the core's ``MarkerRequest``s to the marker channel (markers.py), which reports each
  written partition back (``on_markers_written``);
- answers each parked request (a future) with the core's reply, which the core gives only once
  the request's record is committed;
- keeps a block of producer ids at hand (the core's allocator is synchronous): the broker's
  block is fetched ahead from the controller (AllocateProducerIds) before it runs out; while
  none is at hand the core answers COORDINATOR_LOAD_IN_PROGRESS (retriable), as Kafka's
  RPCProducerIdManager does before its first block arrives;
- ticks the core every transaction.abort.timed.out.transaction.cleanup.interval.ms (abort
  the transactions older than their timeout) and every
  transaction.remove.expired.transaction.cleanup.interval.ms (expire the ids idle for
  transactional.id.expiration.ms);
- asks the controller to create ``__transaction_state`` the first time a FindCoordinator
  needs it, with Kafka's configs for it (``state_topic_configs``).

Loading reads the partition from its log start offset to its log end offset, as Kafka's
loadTransactionsForTxnTopicPartition does (transaction.state.log.load.buffer.size at a time,
through the group coordinator's reader, ``broker.groups.storage.read_chunks``); control batches
are skipped. A transaction found in PrepareCommit or PrepareAbort resumes its
markers.
"""
from __future__ import annotations

import asyncio
import logging
import math
import time
from collections import deque
from typing import Any

from broker.groups.storage import build_records_batch, read_chunks
from broker.transactions import storage
from broker.transactions.connections import Connections
from broker.transactions.coordinator import Effects, TransactionConfig, TransactionCoordinator, Write
from broker.transactions.markers import MarkerChannel
from engine.log import ORIGIN_COORDINATOR
from ext.batch import decode_records, iter_batches
from protocol import messages as M
from protocol.errors import Error
from replication.manager import AppendResult

log = logging.getLogger("strom.broker.transactions")

# The coordinator's metrics as the JMX exporter renders Kafka's MBeans: TransactionMarkerChannelManager's
# gauges and TransactionStateManager's partition load times (a Max and an Avg over Kafka's default
# metrics window: 2 samples of 30 s).
MARKER_GAUGES = "kafka_coordinator_transaction_transactionmarkerchannelmanager_"
LOAD_TIME = "kafka_server_transaction_coordinator_metrics_partition_load_time_"
LOAD_TIME_WINDOW_S = 60.0


def load_time_stats(loads: deque[tuple[float, float]], now: float) -> dict[str, float]:
    """partition-load-time-avg and -max (ms) of the loads that ended within the window before
    ``now`` (dropping older ones); NaN when there are none, as Kafka's Avg and Max have it."""
    while loads and loads[0][0] <= now - LOAD_TIME_WINDOW_S:
        loads.popleft()
    if not loads:
        return {"avg": math.nan, "max": math.nan}
    times = [ms for _, ms in loads]
    return {"avg": sum(times) / len(times), "max": max(times)}


def register_metrics(registry: Any, runtime: Any) -> None:
    """The transaction coordinator's gauges, read from ``runtime`` when scraped."""
    registry.gauge(MARKER_GAUGES + "unknowndestinationqueuesize",
                   "kafka.coordinator.transaction:type=TransactionMarkerChannelManager,"
                   "name=UnknownDestinationQueueSize", lambda: runtime.markers.unknown_destination_size())
    registry.gauge(MARKER_GAUGES + "logappendretryqueuesize",
                   "kafka.coordinator.transaction:type=TransactionMarkerChannelManager,"
                   "name=LogAppendRetryQueueSize", lambda: len(runtime.append_retries))
    for stat in ("avg", "max"):
        registry.gauge(LOAD_TIME + stat, f"kafka.server:type=transaction-coordinator-metrics "
                                         f"(partition-load-time-{stat})",
                       lambda stat=stat: load_time_stats(runtime.load_times, time.monotonic())[stat])

TOPIC = storage.TRANSACTION_STATE_TOPIC
CREATE_TOPICS_VERSION = 7
CREATE_RETRY_S = 1.0
RETRY_BACKOFF_S = 0.1
# A record's acks=-1 wait lasts the transaction's own timeout before the write fails
# (REQUEST_TIMED_OUT, answered COORDINATOR_NOT_AVAILABLE), as Kafka's appendTransactionToLog
# (appendRecords with newMetadata.txnTimeoutMs); no transaction's timeout is above
# transaction.max.timeout.ms. An API handler waits for the core's reply that long and
# REPLY_MARGIN_S more before it answers REQUEST_TIMED_OUT (``reply_timeout_s``): only a guard,
# so the client is answered by the coordinator's error mapping, never by the guard.
REPLY_MARGIN_S = 10.0
# A failed append to a partition is warned the first time, then at most once this often with the
# count of those not warned (a CompleteX is appended again every RETRY_BACKOFF_S while the quorum
# of __transaction_state is lost); an append that succeeds starts it afresh.
APPEND_WARNING_EVERY_S = 30.0
ADD_PARTITIONS_TO_TXN = 24
VERIFY_VERSION = 4  # AddPartitionsToTxn v4: batched, verify_only (a broker's)
# AddPartitionsToTxn v5 without verify_only: a partition leader adds the partition of a Produce
# v12+ or TxnOffsetCommit v5+ to the transaction itself (KIP-890 part 2, Kafka's
# TransactionSupportedOperation.ADD_PARTITION; the coordinator takes it at transaction version 2).
ADD_PARTITION_VERSION = 5
# The first produce version whose clients run transaction version 2 and let their partition's
# leader add it (AddPartitionsToTxnManager's produceRequestVersionToTransactionSupportedOperation;
# TxnOffsetCommit's is broker/groups/runtime.py's).
ADD_PARTITION_PRODUCE_VERSION = 12
VERIFY_TIMEOUT_S = 30.0
# What a produce answers for a verification that could not be made: NOT_ENOUGH_REPLICAS, which
# every producer retries without a metadata refresh (Kafka's ReplicaManager: "Unable to verify
# the partition has been added to the transaction"). CONCURRENT_TRANSACTIONS too, below produce
# v12; from v12 (the leader adds the partition, supportsEpochBump) it is answered as it is, the
# client's usual retry while the previous transaction's markers are written.
_VERIFY_RETRIABLE = {Error.NETWORK_EXCEPTION, Error.COORDINATOR_LOAD_IN_PROGRESS,
                     Error.COORDINATOR_NOT_AVAILABLE, Error.NOT_COORDINATOR}
# The first produce version whose clients know TRANSACTION_ABORTABLE (Kafka: "v11 adds support
# for new error code TRANSACTION_ABORTABLE"); below it the error is INVALID_TXN_STATE.
TRANSACTION_ABORTABLE_PRODUCE_VERSION = 11


# The transaction version of the aborts no client asked for (a timeout, a fence). Kafka 4.x makes
# them at the finalized transaction.version level ("use server TV"), which a new cluster
# bootstraps at 2 and this broker advertises (KIP-890 part 2: a client of version 2 is served by
# the request versions it sends: Produce v12, TxnOffsetCommit v5, EndTxn v5). Here they stay at 1:
# at 2 the abort bumps the epoch twice (the fence, then the end), and a client of version 0/1 (every
# installed one) recovering with KIP-360's InitProducerId at its own epoch is then neither the
# current nor the last epoch: PRODUCER_FENCED, fatal where it was recoverable. A marker sent again
# at 2 (a coordinator move, a lost answer) is safe: the partition takes a marker at the producer's
# epoch with no transaction open as a retry (engine/producer_state.py check_marker, KAFKA-19999).
SERVER_TRANSACTION_VERSION = 1


def verification_error(error: int, produce_version: int) -> int:
    """The error a produce answers when its partition's verification answered ``error``
    (Kafka's AddPartitionsToTxnManager and ReplicaManager): PRODUCER_FENCED as
    INVALID_PRODUCER_EPOCH, a partition not in the transaction as INVALID_TXN_STATE (below
    produce v11), a coordinator that could not answer as NOT_ENOUGH_REPLICAS."""
    if error == Error.PRODUCER_FENCED:
        return Error.INVALID_PRODUCER_EPOCH
    if error == Error.TRANSACTION_ABORTABLE and produce_version < TRANSACTION_ABORTABLE_PRODUCE_VERSION:
        return Error.INVALID_TXN_STATE
    if error in _VERIFY_RETRIABLE or (error == Error.CONCURRENT_TRANSACTIONS
                                      and produce_version < ADD_PARTITION_PRODUCE_VERSION):
        return Error.NOT_ENOUGH_REPLICAS
    return error


def _now_ms() -> int:
    return int(time.time() * 1000)


class RareWarnings:
    """Warnings about one thing (a key) said the first time, then at most once every
    ``every_s`` seconds with how many were held back since; ``clear`` starts a key afresh."""

    def __init__(self, every_s: float, clock: Any = time.monotonic):
        self.every_s = every_s
        self.clock = clock
        self._keys: dict[Any, tuple[float, int]] = {}  # key -> (when last said, held back since)

    def warn(self, key: Any, message: str, *args: Any) -> None:
        now = self.clock()
        said = self._keys.get(key)
        if said is None or now - said[0] >= self.every_s:
            if said is not None and said[1]:
                message += " (and %d more times in the last %.0f s)"
                args += (said[1], now - said[0])
            log.warning(message, *args)
            self._keys[key] = (now, 0)
        else:
            self._keys[key] = (said[0], said[1] + 1)

    def clear(self, key: Any) -> None:
        self._keys.pop(key, None)


def state_topic_configs(config: Any) -> dict[str, str]:
    """The configs Kafka creates ``__transaction_state`` with (TransactionStateManager's
    transactionTopicConfigs)."""
    return {
        "cleanup.policy": "compact",
        "compression.type": "uncompressed",
        "min.insync.replicas": str(config["transaction.state.log.min.isr"]),
        "segment.bytes": str(config["transaction.state.log.segment.bytes"]),
        "unclean.leader.election.enable": "false",
    }


def records_of(data: bytes) -> list[tuple[bytes, bytes | None]]:
    """The (key, value) records of whole batches of ``__transaction_state`` (a chunk of
    ``read_chunks``), control batches and records without a key left out."""
    out: list[tuple[bytes, bytes | None]] = []
    for header in iter_batches(data):
        if header.is_control:
            continue
        for record in decode_records(data, header.position, False):
            if record.key is not None:
                out.append((bytes(record.key), None if record.value is None else bytes(record.value)))
    return out


class TransactionCoordinatorRuntime:
    def __init__(self, broker: Any):
        self.broker = broker
        c = broker.config
        self.core = TransactionCoordinator(
            self._take_producer_id,
            TransactionConfig(max_timeout_ms=c["transaction.max.timeout.ms"],
                              id_expiration_ms=c["transactional.id.expiration.ms"],
                              offsets_partitions=c["offsets.topic.num.partitions"],
                              transaction_version=SERVER_TRANSACTION_VERSION),
            num_partitions=0)
        self.abort_interval_ms = c["transaction.abort.timed.out.transaction.cleanup.interval.ms"]
        self.expire_interval_ms = c["transaction.remove.expired.transaction.cleanup.interval.ms"]
        self.load_buffer = c["transaction.state.log.load.buffer.size"]
        self.reply_timeout_s = c["transaction.max.timeout.ms"] / 1000 + REPLY_MARGIN_S
        self.markers = MarkerChannel(self)
        self._epochs: dict[int, int] = {}  # partition -> leader epoch, loading or loaded here
        self._loads: dict[int, asyncio.Task] = {}
        self._without_log: set[int] = set()  # partitions whose load found no local log
        self._tasks: list[asyncio.Task] = []
        self._writes: set[asyncio.Task] = set()
        self.append_retries: set[int] = set()  # id()s of complete records waiting to be appended again
        self.load_times: deque[tuple[float, float]] = deque()  # (monotonic end, ms) of each load
        self._creating: asyncio.Task | None = None
        self._refill: asyncio.Task | None = None
        self.verification_enabled = bool(c.get("transaction.partition.verification.enable", True))
        self._coordinator_connections: Connections | None = None
        self.append_warnings = RareWarnings(APPEND_WARNING_EVERY_S)  # by __transaction_state partition

    # ---- lifecycle -----------------------------------------------------------------------

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._watch_metadata()),
                       loop.create_task(self._every(self.abort_interval_ms, False)),
                       loop.create_task(self._every(self.expire_interval_ms, True))]
        self.markers.start()
        self._refill_producer_ids()

    async def stop(self) -> None:
        tasks = self._tasks + list(self._loads.values()) + list(self._writes)
        tasks += [t for t in (self._creating, self._refill) if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self.markers.stop()
        if self._coordinator_connections is not None:
            await self._coordinator_connections.close()
        for p in sorted(set(self._epochs) | set(self.core.owned) | set(self.core.loading)):
            self._unload(p)

    # ---- producer ids --------------------------------------------------------------------

    def _take_producer_id(self) -> int | None:
        take = getattr(self.broker, "take_producer_id", None)
        return take() if take is not None else None

    def _refill_producer_ids(self) -> None:
        if getattr(self.broker, "prefetch_producer_ids", None) is not None \
                and (self._refill is None or self._refill.done()):
            self._refill = asyncio.get_running_loop().create_task(self._prefetch())

    async def _prefetch(self) -> None:
        try:
            await self.broker.prefetch_producer_ids()
        except (ConnectionError, TimeoutError, OSError, RuntimeError) as e:
            log.warning("fetching a block of producer ids failed: %s", e)

    # ---- the topic and its partitions ----------------------------------------------------

    def ensure_state_topic(self) -> bool:
        """True if ``__transaction_state`` exists; otherwise start creating it (once)."""
        if TOPIC in self.broker.image.topics:
            return True
        if self._creating is None or self._creating.done():
            self._creating = asyncio.get_running_loop().create_task(self._create_state_topic())
        return False

    async def _create_state_topic(self) -> None:
        c = self.broker.config
        R = M.CreateTopicsRequest
        request = R(topics=[R.CreatableTopic(
            name=TOPIC, num_partitions=c["transaction.state.log.num.partitions"],
            replication_factor=c["transaction.state.log.replication.factor"],
            configs=[R.CreatableTopic.CreatableTopicConfig(name=k, value=v)
                     for k, v in state_topic_configs(c).items()])],
            timeout_ms=5000, validate_only=False)
        try:
            response = await self.broker.follower.forward(19, CREATE_TOPICS_VERSION, request)
            for t in response.topics:
                if t.error_code not in (Error.NONE, Error.TOPIC_ALREADY_EXISTS):
                    log.warning("creating %s failed: %s %s", t.name, Error(t.error_code).name,
                                t.error_message)
                    await asyncio.sleep(CREATE_RETRY_S)
        except (ConnectionError, TimeoutError, OSError) as e:
            log.warning("creating %s failed: %s", TOPIC, e)
            await asyncio.sleep(CREATE_RETRY_S)

    def coordinator_of(self, transactional_id: str) -> tuple[int, int]:
        """(error, node id of the leader of the id's ``__transaction_state`` partition):
        COORDINATOR_NOT_AVAILABLE when there is none, or it is fenced or not registered."""
        topic = self.broker.image.topics.get(TOPIC)
        if topic is None or not topic.partitions:
            return Error.COORDINATOR_NOT_AVAILABLE, -1
        partition = topic.partitions.get(storage.partition_for(transactional_id, len(topic.partitions)))
        if partition is None or partition.leader < 0:
            return Error.COORDINATOR_NOT_AVAILABLE, -1
        # an alive leader only, as Kafka's getTransactionCoordinator: not a fenced or unregistered one
        leader = self.broker.image.brokers.get(partition.leader)
        if leader is None or leader.fenced:
            return Error.COORDINATOR_NOT_AVAILABLE, -1
        return Error.NONE, partition.leader

    async def _watch_metadata(self) -> None:
        while True:
            try:
                self._reconcile()
            except Exception:
                log.exception("transaction coordinator: reconciling with the metadata image failed")
            await self.broker.follower.wait_for_change(1.0)

    def _reconcile(self) -> None:
        topic = self.broker.image.topics.get(TOPIC)
        led: dict[int, int] = {}
        if topic is not None:
            self.core.num_partitions = len(topic.partitions)
            led = {p: st.leader_epoch for p, st in topic.partitions.items()
                   if st.leader == self.broker.node_id}
        for p in sorted(set(self._epochs) | set(self.core.owned) | set(self.core.loading)):
            if p not in led or self._epochs.get(p) != led[p]:
                self._unload(p)
        if topic is None:
            self.core.num_partitions = 0
            return
        for p, epoch in sorted(led.items()):
            if p not in self._epochs:
                self._epochs[p] = epoch
                self.core.begin_load(p, epoch)
                self._loads[p] = asyncio.get_running_loop().create_task(self._load(p, epoch))

    async def _load(self, partition: int, epoch: int) -> None:
        started = time.monotonic()
        log_ = self.broker.replicas.local_log(TOPIC, partition)
        if log_ is None:
            # Loaded only from its log, as Kafka's loadTransactionsForTxnTopicPartition: without
            # one (its log dir offline, the replica not made yet) the partition stays loading
            # (COORDINATOR_LOAD_IN_PROGRESS) and the next reconcile tries again; loading it empty
            # would forget every producer id and epoch, and with them the fencing.
            if partition not in self._without_log:  # said once, not at every retry
                self._without_log.add(partition)
                log.warning("%s-%d has no local log; its load is retried", TOPIC, partition)
            self._loads.pop(partition, None)
            self._epochs.pop(partition, None)
            return
        self._without_log.discard(partition)
        records: list[tuple[bytes, bytes | None]] = []
        for data in read_chunks(log_, self.load_buffer):
            records += records_of(data)
            await asyncio.sleep(0)  # let other requests in between chunks
        self._loads.pop(partition, None)
        transactions = storage.replay(records)
        self.run(self.core.complete_load(partition, epoch, transactions, _now_ms()))
        ended = time.monotonic()
        self.load_times.append((ended, (ended - started) * 1000))
        log.info("loaded %s-%d at coordinator epoch %d: %d transactional ids from %d records in %.3f s",
                 TOPIC, partition, epoch, len(transactions), len(records), time.monotonic() - started)

    def _unload(self, partition: int) -> None:
        task = self._loads.pop(partition, None)
        if task is not None:
            task.cancel()
        self._epochs.pop(partition, None)
        self.core.unload(partition)
        self.markers.drop_partition(partition)

    # ---- effects -------------------------------------------------------------------------

    def waiter(self) -> asyncio.Future:
        return asyncio.get_running_loop().create_future()

    async def call(self, step: Any) -> Any:
        """Run a core step whose reply goes to a fresh waiter (``step(waiter)``); its reply, or
        None when none came within ``reply_timeout_s`` (a guard against a bug: every write is
        answered within its transaction's timeout)."""
        waiter = self.waiter()
        self.run(step(waiter))
        try:
            return await asyncio.wait_for(waiter, self.reply_timeout_s)
        except TimeoutError:
            log.error("a transaction coordinator request was not answered in %.0f s", self.reply_timeout_s)
            return None

    def run(self, fx: Effects) -> None:
        """Append the step's writes (in order), send its markers, answer its replies."""
        for write in fx.writes:
            self._append(write)
        for request in fx.markers:
            self.markers.add(request)
        for waiter, reply in fx.replies:
            if isinstance(waiter, asyncio.Future) and not waiter.done():
                waiter.set_result(reply)
        self._refill_producer_ids_if_low()

    def _refill_producer_ids_if_low(self) -> None:
        low = getattr(self.broker, "producer_ids_low", None)
        if low is not None and low():
            self._refill_producer_ids()

    def _append(self, write: Write, delay: float = 0.0) -> None:
        """Append the write's record now (so writes keep their order) and complete it once
        committed or failed."""
        now = _now_ms()
        if delay:
            task = asyncio.get_running_loop().create_task(self._append_later(write, delay))
        else:
            batch = build_records_batch([write.record], now)
            entries = [(TOPIC, write.partition, batch)]
            try:
                results = self.broker.replicas.append_records_locally(entries, -1, origin=ORIGIN_COORDINATOR)
            except Exception:
                # ended with an error, as Kafka's ReplicaManager turns an unexpected exception
                # into the partition's error: the id's pending transition is dropped with it
                log.exception("appending %s's %s record to %s-%d raised", write.transactional_id, write.kind,
                              TOPIC, write.partition)
                results = [AppendResult(Error.UNKNOWN_SERVER_ERROR)]
            task = asyncio.get_running_loop().create_task(self._complete(write, entries, results))
        self._writes.add(task)
        task.add_done_callback(self._writes.discard)

    async def _append_later(self, write: Write, delay: float) -> None:
        retry = write.kind == "complete"
        if retry:
            self.append_retries.add(id(write))
        try:
            await asyncio.sleep(delay)
        finally:
            self.append_retries.discard(id(write))
        if self.core.owned.get(write.partition) != write.coordinator_epoch:
            # unloaded or loaded again meanwhile: nothing of an older coordinator epoch is
            # appended (Kafka's appendTransactionToLog answers NOT_COORDINATOR without appending)
            self.run(self.core.complete_write(write, Error.NOT_LEADER_OR_FOLLOWER, _now_ms()))
            return
        self._append(write)

    async def _complete(self, write: Write, entries: list, results: list) -> None:
        if not results[0].error:
            await self.broker.replicas.wait_replicated(entries, results, write.target.timeout_ms)
        error = results[0].error
        if error:
            self.append_warnings.warn(write.partition, "appending %s's %s record to %s-%d failed: %s",
                                      write.transactional_id, write.kind, TOPIC, write.partition,
                                      Error(error).name)
        else:
            self.append_warnings.clear(write.partition)
        fx = self.core.complete_write(write, error, _now_ms())
        if error and write.kind == "complete":
            for again in fx.writes:
                self._append(again, RETRY_BACKOFF_S)
            fx.writes = []
        self.run(fx)

    def markers_written(self, transactional_id: str, coordinator_epoch: int, partitions: list) -> None:
        self.run(self.core.on_markers_written(transactional_id, coordinator_epoch, partitions, _now_ms()))

    async def _every(self, interval_ms: int, expire: bool) -> None:
        while True:
            await asyncio.sleep(interval_ms / 1000)
            try:
                fx = self.core.tick(_now_ms(), expire=expire)
                if fx.writes or fx.replies or fx.markers:
                    self.run(fx)
            except Exception:
                log.exception("transaction coordinator timers failed")

    # ---- KIP-890 verification (the partition leader's side) ---------------------------------

    async def verify(self, transactional_id: str, producer_id: int, producer_epoch: int,
                     partitions: list[tuple[str, int]], add: bool = False) -> dict[tuple[str, int], int]:
        """Ask the transactional id's coordinator whether its transaction holds ``partitions``
        (AddPartitionsToTxn v4 with verify_only, as Kafka's AddPartitionsToTxnManager), or with
        ``add`` have it add them (v5 without verify_only: KIP-890 part 2, a Produce v12+ or a
        TxnOffsetCommit v5+): each partition's error as the coordinator answers it;
        NETWORK_EXCEPTION when it could not be reached; COORDINATOR_NOT_AVAILABLE when there is
        none. The coordinator on this broker answers from its core directly: the same answer,
        without the round trip."""
        error, node = self.coordinator_of(transactional_id)
        if error:
            return dict.fromkeys(partitions, error)
        if node == self.broker.node_id:
            if not add:
                return self.core.verify_partitions(transactional_id, producer_id, producer_epoch,
                                                   partitions)
            reply = await self.call(lambda w: self.core.add_partitions(
                transactional_id, producer_id, producer_epoch, partitions, _now_ms(), w, 2))
            return dict.fromkeys(partitions, Error.REQUEST_TIMED_OUT if reply is None else reply.error_code)
        R = M.AddPartitionsToTxnRequest
        topics: dict[str, list[int]] = {}
        for topic, p in partitions:
            topics.setdefault(topic, []).append(p)
        request = R(transactions=[R.AddPartitionsToTxnTransaction(
            transactional_id=transactional_id, producer_id=producer_id, producer_epoch=producer_epoch,
            verify_only=not add, topics=[R.AddPartitionsToTxnTopic(name=t, partitions=ps)
                                         for t, ps in sorted(topics.items())])])
        try:
            conn = await self.coordinator_connections.get(node)
            version, timeout = ((ADD_PARTITION_VERSION, self.reply_timeout_s) if add
                                else (VERIFY_VERSION, VERIFY_TIMEOUT_S))
            response = await conn.request(ADD_PARTITIONS_TO_TXN, version, request, timeout=timeout)
        except (ConnectionError, TimeoutError, OSError) as e:
            log.info("verifying %s's partitions with broker %d failed: %s", transactional_id, node, e)
            self.coordinator_connections.drop(node)
            return dict.fromkeys(partitions, Error.NETWORK_EXCEPTION)
        if response.error_code:
            code = (Error.INVALID_TXN_STATE if response.error_code == Error.CLUSTER_AUTHORIZATION_FAILED
                    else response.error_code)
            return dict.fromkeys(partitions, code)
        out: dict[tuple[str, int], int] = dict.fromkeys(partitions, int(Error.NONE))
        for result in response.results_by_transaction:
            for t in result.topic_results:
                for p in t.results_by_partition:
                    if (t.name, p.partition_index) in out:
                        out[(t.name, p.partition_index)] = p.partition_error_code
        return out

    @property
    def coordinator_connections(self) -> Connections:
        """The connections to other brokers' transaction coordinators, for verification."""
        if self._coordinator_connections is None:
            self._coordinator_connections = Connections(self.broker.replicas.brokers,
                                                        f"broker-{self.broker.node_id}-txn-verifier")
        return self._coordinator_connections
