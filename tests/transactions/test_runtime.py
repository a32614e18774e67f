"""The transaction coordinator's shell (broker/transactions/runtime.py) in-process, over a real
``__transaction_state`` log (engine.log.Log) behind a stand-in ReplicaManager: answers only
once the record is committed, a failed append mapped as Kafka's appendTransactionToLog maps it
and not applied, loading by replay at the partition's leader epoch, reloading when the epoch
changes, and a PrepareCommit found by the load resuming its markers."""
from __future__ import annotations

import asyncio
import contextlib
import time
from types import SimpleNamespace

import pytest

from broker.transactions import runtime as runtime_module
from broker.transactions.coordinator import InitProducerIdReply, TxnReply
from broker.transactions.runtime import (
    TOPIC,
    TransactionCoordinatorRuntime,
    state_topic_configs,
    verification_error,
)
from engine.log import Log
from protocol.errors import Error
from replication.manager import AppendResult

CONFIG = {
    "transaction.max.timeout.ms": 900000, "transactional.id.expiration.ms": 604800000,
    "offsets.topic.num.partitions": 50,
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": 3600000,
    "transaction.remove.expired.transaction.cleanup.interval.ms": 3600000,
    "transaction.state.log.load.buffer.size": 5242880, "transaction.state.log.num.partitions": 1,
    "transaction.state.log.replication.factor": 3, "transaction.state.log.min.isr": 2,
    "transaction.state.log.segment.bytes": 104857600,
}


class Replicas:
    """The ReplicaManager calls the runtime makes, over one real Log; ``refuse`` is the error
    the next appends answer (NOT_ENOUGH_REPLICAS: under min.insync.replicas)."""

    def __init__(self, log: Log):
        self.log = log
        self.refuse = Error.NONE
        # what the acks=-1 wait answers for a record the leader appended: REQUEST_TIMED_OUT or
        # NOT_ENOUGH_REPLICAS_AFTER_APPEND when the other replicas are gone (the record stays in
        # the leader's log, above the high watermark)
        self.lost_after_append = Error.NONE
        self.leader_epoch = 0
        self.refused = 0  # appends answered with ``refuse``
        self.waits: list[int] = []  # the timeout_ms of each acks=-1 wait
        # the other replicas stopped fetching: each acks=-1 wait runs to its timeout and answers
        # REQUEST_TIMED_OUT (the record stays in the leader's log, above its high watermark)
        self.stalled = False
        self.raises = False  # the append raises (a bug, a disk error not mapped to a code)

    def local_log(self, topic, partition):
        return self.log if (topic, partition) == (TOPIC, 0) else None

    def append_records_locally(self, entries, acks, origin="client"):
        assert acks == -1  # Kafka's transaction log appends wait for min.insync.replicas
        if self.raises:
            raise OSError("the log's disk is gone")
        out = []
        for _, _, batch in entries:
            if self.refuse:
                self.refused += 1
                out.append(AppendResult(self.refuse))
                continue
            info = self.log.append_as_leader(batch, self.leader_epoch, 0, origin=origin)
            if not self.lost_after_append and not self.stalled:
                self.log.high_watermark = info.last_offset + 1  # the stand-in's replicas are in sync
            out.append(AppendResult(Error.NONE, None, info.first_offset, -1, 0, info.last_offset + 1))
        return out

    async def wait_replicated(self, entries, results, timeout_ms):
        self.waits.append(timeout_ms)
        if self.stalled:
            await asyncio.sleep(timeout_ms / 1000)
            for result in results:
                result.error = Error.REQUEST_TIMED_OUT
            return
        await asyncio.sleep(0)
        for result in results:
            if not result.error:
                result.error = self.lost_after_append


class Broker:
    def __init__(self, log: Log, **config):
        self.config = {**CONFIG, **config}
        self.node_id = 1
        self.replicas = Replicas(log)
        self.leader_epoch = 0
        self.leader = 1
        self.next_id = 1000
        self.fenced: set[int] = set()
        self.unregistered: set[int] = set()
        self.changed = asyncio.Event()
        self.follower = SimpleNamespace(wait_for_change=self._wait)

    async def _wait(self, timeout):
        try:
            async with asyncio.timeout(timeout):
                await self.changed.wait()
        except TimeoutError:
            pass
        self.changed.clear()

    @property
    def image(self):
        state = SimpleNamespace(leader=self.leader, leader_epoch=self.leader_epoch)
        return SimpleNamespace(topics={TOPIC: SimpleNamespace(partitions={0: state})}, brokers=self.brokers)

    @property
    def brokers(self):
        """The registered brokers (alive unless in ``fenced``); ``unregistered`` are not."""
        return {n: SimpleNamespace(fenced=n in self.fenced) for n in (1, 2, 3) if n not in self.unregistered}

    def take_producer_id(self):
        self.next_id += 1
        return self.next_id


async def until(predicate, timeout=5.0):
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.01)

@contextlib.asynccontextmanager
async def coordinator(log, capture_markers: bool = False):
    """A started runtime over ``log`` once it owns partition 0: (broker, runtime, the markers it
    asked to send, when ``capture_markers``: the channel itself is tested in test_markers.py)."""
    broker = Broker(log)
    runtime = TransactionCoordinatorRuntime(broker)
    sent: list = []
    if capture_markers:
        runtime.markers.add = sent.append
    runtime.start()
    try:
        await until(lambda: 0 in runtime.core.owned)
        yield broker, runtime, sent
    finally:
        await runtime.stop()



async def call(runtime, step):
    waiter = runtime.waiter()
    runtime.run(step(waiter))
    async with asyncio.timeout(5):
        return await waiter


@pytest.fixture
def log(tmp_path):
    log = Log(str(tmp_path / f"{TOPIC}-0"))
    yield log
    log.close()


def run(scenario):
    asyncio.run(scenario())


def test_a_transition_is_answered_once_its_record_is_in_the_log_and_a_reload_finds_it(log):
    async def scenario():
        async with coordinator(log) as (broker, runtime, _):
            reply = await call(runtime, lambda w: runtime.core.init_producer_id("t", 60000, -1, -1, 1, w))
            assert reply == InitProducerIdReply(Error.NONE, 1001, 0)
            reply = await call(runtime, lambda w: runtime.core.add_partitions("t", 1001, 0, [("a", 0)], 2, w))
            assert reply == TxnReply(Error.NONE)
            assert log.log_end_offset == 2
            broker.leader_epoch = 4  # led again at a new epoch: reloaded from the log
            broker.changed.set()
            await until(lambda: runtime.core.owned.get(0) == 4)
            meta = runtime.core.transactions["t"]
            assert (meta.producer_id, meta.producer_epoch, meta.state.kafka_name, meta.partitions) == \
                (1001, 0, "Ongoing", {("a", 0)})
            broker.leader = 2  # the leadership moved away: unloaded
            broker.changed.set()
            await until(lambda: 0 not in runtime.core.owned)
            assert runtime.core.transactions == {}
    run(scenario)


def test_a_failed_append_is_not_applied_and_answers_as_kafkas_append_transaction_to_log(log):
    async def scenario():
        async with coordinator(log) as (broker, runtime, _):
            await call(runtime, lambda w: runtime.core.init_producer_id("t", 60000, -1, -1, 1, w))
            broker.replicas.refuse = Error.NOT_ENOUGH_REPLICAS
            reply = await call(runtime, lambda w: runtime.core.add_partitions("t", 1001, 0, [("a", 0)], 2, w))
            assert reply == TxnReply(Error.COORDINATOR_NOT_AVAILABLE)
            meta = runtime.core.transactions["t"]
            assert (meta.state.kafka_name, meta.pending) == ("Empty", None)
            broker.replicas.refuse = Error.NOT_LEADER_OR_FOLLOWER
            reply = await call(runtime, lambda w: runtime.core.add_partitions("t", 1001, 0, [("a", 0)], 3, w))
            assert reply == TxnReply(Error.NOT_COORDINATOR)
    run(scenario)


def test_a_prepare_commit_found_by_the_load_resumes_its_markers(log):
    async def scenario():
        async with coordinator(log, capture_markers=True) as (broker, runtime, sent):
            await call(runtime, lambda w: runtime.core.init_producer_id("t", 60000, -1, -1, 1, w))
            both = [("a", 0), ("b", 1)]
            await call(runtime, lambda w: runtime.core.add_partitions("t", 1001, 0, both, 2, w))
            reply = await call(runtime, lambda w: runtime.core.end_txn("t", 1001, 0, True, 3, w, 2))
            assert (reply.error_code, reply.producer_id, reply.producer_epoch) == (Error.NONE, 1001, 1)
            assert [(m.producer_epoch, m.commit, m.coordinator_epoch, m.partitions) for m in sent] == \
                [(1, True, 0, [("a", 0), ("b", 1)])]
            broker.leader_epoch = 1  # the coordinator moved before the markers were written
            broker.changed.set()
            await until(lambda: runtime.core.owned.get(0) == 1)
            assert [(m.producer_epoch, m.commit, m.coordinator_epoch, m.partitions) for m in sent[1:]] == \
                [(1, True, 1, [("a", 0), ("b", 1)])]
            runtime.markers_written("t", 1, [("a", 0), ("b", 1)])
            await until(lambda: runtime.core.transactions["t"].state.kafka_name == "CompleteCommit")
    run(scenario)


def test_the_state_topic_is_created_with_kafkas_configs():
    assert state_topic_configs(CONFIG) == {
        "cleanup.policy": "compact", "compression.type": "uncompressed", "min.insync.replicas": "2",
        "segment.bytes": "104857600", "unclean.leader.election.enable": "false"}


def test_a_refused_verification_answers_the_produce_as_kafkas_replica_manager_maps_it():
    """Kafka's AddPartitionsToTxnManager and ReplicaManager: PRODUCER_FENCED is
    INVALID_PRODUCER_EPOCH; TRANSACTION_ABORTABLE reaches produce v11+ ("v11 adds support for
    new error code TRANSACTION_ABORTABLE") and is INVALID_TXN_STATE below; a verification that
    could not be made (the coordinator unreachable, loading, moved, or busy) is
    NOT_ENOUGH_REPLICAS, which every producer retries without a metadata refresh."""
    assert verification_error(Error.PRODUCER_FENCED, 9) == Error.INVALID_PRODUCER_EPOCH
    assert verification_error(Error.TRANSACTION_ABORTABLE, 10) == Error.INVALID_TXN_STATE
    assert verification_error(Error.TRANSACTION_ABORTABLE, 11) == Error.TRANSACTION_ABORTABLE
    assert verification_error(Error.TRANSACTION_ABORTABLE, 12) == Error.TRANSACTION_ABORTABLE
    for unable in (Error.NETWORK_EXCEPTION, Error.COORDINATOR_LOAD_IN_PROGRESS,
                   Error.COORDINATOR_NOT_AVAILABLE, Error.NOT_COORDINATOR):
        for version in (9, 11, 12):
            assert verification_error(unable, version) == Error.NOT_ENOUGH_REPLICAS  # the producer retries
    # CONCURRENT_TRANSACTIONS is NOT_ENOUGH_REPLICAS below v12; from v12 the leader adds the
    # partition (supportsEpochBump) and the client of transaction version 2 retries it as it is.
    assert verification_error(Error.CONCURRENT_TRANSACTIONS, 11) == Error.NOT_ENOUGH_REPLICAS
    assert verification_error(Error.CONCURRENT_TRANSACTIONS, 12) == Error.CONCURRENT_TRANSACTIONS
    assert verification_error(Error.INVALID_PRODUCER_ID_MAPPING, 9) == Error.INVALID_PRODUCER_ID_MAPPING


def test_verification_asks_a_coordinator_on_another_broker_with_add_partitions_to_txn_v4(log):
    """The coordinator of the id is broker 2: the leader sends it AddPartitionsToTxn v4 with
    verify_only and takes each partition's answer; a top-level CLUSTER_AUTHORIZATION_FAILED
    becomes INVALID_TXN_STATE (Kafka never shows it to the producer); an unreachable
    coordinator is NETWORK_EXCEPTION."""
    from protocol import messages as M
    from protocol.dispatch import Api, Dispatcher
    from protocol.net import Server

    asked = []
    refuse_all = []

    async def handle(header, req):
        R = M.AddPartitionsToTxnResponse
        asked.append((header.api_version, [
            (t.transactional_id, t.producer_id, t.producer_epoch, t.verify_only,
             [(x.name, x.partitions) for x in t.topics]) for t in req.transactions]))
        if refuse_all:
            return R(error_code=Error.CLUSTER_AUTHORIZATION_FAILED)
        held = {("a", 0)}

        def topic_result(x):
            return R.AddPartitionsToTxnTopicResult(name=x.name, results_by_partition=[
                R.AddPartitionsToTxnPartitionResult(
                    partition_index=p, partition_error_code=Error.NONE if (x.name, p) in held
                    else Error.TRANSACTION_ABORTABLE) for p in x.partitions])

        return R(results_by_transaction=[
            R.AddPartitionsToTxnResult(transactional_id=t.transactional_id,
                                       topic_results=[topic_result(x) for x in t.topics])
            for t in req.transactions])

    async def scenario():
        server = Server(Dispatcher([Api(24, 0, 5, handle)]).handle, 1 << 20)
        port = server.bind("127.0.0.1", 0)
        server.start()
        broker = Broker(log)
        broker.leader = 2
        endpoints = {2: port}
        broker.replicas.brokers = SimpleNamespace(endpoint_of=lambda b: ("127.0.0.1", endpoints[b]))
        runtime = TransactionCoordinatorRuntime(broker)
        try:
            answers = await runtime.verify("t", 5, 1, [("a", 0), ("a", 1)])
            assert answers == {("a", 0): Error.NONE, ("a", 1): Error.TRANSACTION_ABORTABLE}
            assert asked == [(4, [("t", 5, 1, True, [("a", [0, 1])])])]
            # KIP-890 part 2: a Produce v12's partition is added, AddPartitionsToTxn v5 without verify_only
            asked.clear()
            assert await runtime.verify("t", 5, 1, [("a", 0)], add=True) == {("a", 0): Error.NONE}
            assert asked == [(5, [("t", 5, 1, False, [("a", [0])])])]
            refuse_all.append(True)
            assert await runtime.verify("t", 5, 1, [("a", 0)]) == {("a", 0): Error.INVALID_TXN_STATE}
            await server.close()
            endpoints[2] = 1  # nothing listens there
            await runtime.coordinator_connections.held[2][1].close()
            assert await runtime.verify("t", 5, 1, [("a", 0)]) == {("a", 0): Error.NETWORK_EXCEPTION}
        finally:
            await runtime.stop()
    run(scenario)


# ---- the quorum of __transaction_state lost (fewer than transaction.state.log.min.isr replicas) ----


def now() -> int:
    """The shell's clock: a transition after one the shell timed must not go back in time."""
    return int(time.time() * 1000)


async def _committed_once(runtime, sent):
    """InitProducerId, a partition added and the transaction committed with EndTxn v1 (the
    transaction version 0 librdkafka speaks), its marker written: CompleteCommit at epoch 0."""
    await call(runtime, lambda w: runtime.core.init_producer_id("t", 60000, -1, -1, 1, w))
    assert await call(runtime, lambda w: runtime.core.add_partitions("t", 1001, 0, [("a", 0)], 2, w, 0)) == \
        TxnReply(Error.NONE)
    reply = await call(runtime, lambda w: runtime.core.end_txn("t", 1001, 0, True, 3, w, 0))
    assert reply.error_code == Error.NONE
    runtime.markers_written("t", sent[-1].coordinator_epoch, [("a", 0)])
    await until(lambda: runtime.core.transactions["t"].state.kafka_name == "CompleteCommit")


def test_with_the_quorum_lost_an_abort_after_a_failed_add_partitions_answers_as_kafkas_end_transaction(log):
    """The transaction's AddPartitionsToTxn is appended but never committed (the other replicas
    died: the acks=-1 wait answers REQUEST_TIMED_OUT), then refused (NOT_ENOUGH_REPLICAS): each
    answers COORDINATOR_NOT_AVAILABLE, retriable, and nothing changes in memory (Kafka's
    appendTransactionToLog resets the pending state). The id is still CompleteCommit, so an
    EndTxn(abort) below v5 answers INVALID_TXN_STATE, as Kafka's endTransactionWithTV1 does
    ("CompleteCommit only accepts Commit": librdkafka, which sends EndTxn after an
    AddPartitionsToTxn that failed, takes it as fatal against Kafka too); EndTxn v5 (transaction
    version 2) answers COORDINATOR_NOT_AVAILABLE while the quorum is lost and bumps the epoch
    once it is back (Kafka's table: CompleteCommit, Abort, Current -> epoch bump)."""
    async def scenario():
        async with coordinator(log, capture_markers=True) as (broker, runtime, sent):
            await _committed_once(runtime, sent)
            end = log.log_end_offset
            broker.replicas.lost_after_append = Error.REQUEST_TIMED_OUT
            reply = await call(runtime, lambda w: runtime.core.add_partitions("t", 1001, 0, [("a", 0)], now(),
                                                                              w, 0))
            assert reply == TxnReply(Error.COORDINATOR_NOT_AVAILABLE)
            assert log.log_end_offset == end + 1  # in the leader's log, above its high watermark
            broker.replicas.lost_after_append = Error.NONE
            broker.replicas.refuse = Error.NOT_ENOUGH_REPLICAS  # the ISR shrank below min.isr
            reply = await call(runtime, lambda w: runtime.core.add_partitions("t", 1001, 0, [("a", 0)], now(),
                                                                              w, 0))
            assert reply == TxnReply(Error.COORDINATOR_NOT_AVAILABLE)
            meta = runtime.core.transactions["t"]
            assert (meta.state.kafka_name, meta.pending, meta.producer_epoch, meta.partitions) == \
                ("CompleteCommit", None, 0, set())

            reply = await call(runtime, lambda w: runtime.core.end_txn("t", 1001, 0, False, now(), w, 0))
            assert reply.error_code == Error.INVALID_TXN_STATE
            reply = await call(runtime, lambda w: runtime.core.end_txn("t", 1001, 0, False, now(), w, 2))
            assert reply.error_code == Error.COORDINATOR_NOT_AVAILABLE
            assert runtime.core.transactions["t"].pending is None
            broker.replicas.refuse = Error.NONE  # the replicas are back
            reply = await call(runtime, lambda w: runtime.core.end_txn("t", 1001, 0, False, now(), w, 2))
            assert (reply.error_code, reply.producer_id, reply.producer_epoch) == (Error.NONE, 1001, 1)
            await until(lambda: runtime.core.transactions["t"].state.kafka_name == "CompleteAbort")
    run(scenario)


def test_a_prepare_commit_in_the_log_whose_append_timed_out_is_committed_by_the_next_coordinator(log):
    """EndTxn(commit) answers COORDINATOR_NOT_AVAILABLE when its PrepareCommit's acks=-1 wait
    timed out, and the coordinator stays Ongoing; the record is in the leader's log all the same.
    When the coordinator moves, the load finds PrepareCommit and sends its markers (Kafka's load
    does the same): the client, told to retry, is answered CONCURRENT_TRANSACTIONS until the
    markers are written, then NONE. The transaction the client was asked to retry is the one
    committed: nothing it was told is contradicted."""
    async def scenario():
        async with coordinator(log, capture_markers=True) as (broker, runtime, sent):
            await call(runtime, lambda w: runtime.core.init_producer_id("t", 60000, -1, -1, 1, w))
            await call(runtime, lambda w: runtime.core.add_partitions("t", 1001, 0, [("a", 0)], 2, w, 0))
            broker.replicas.lost_after_append = Error.NOT_ENOUGH_REPLICAS_AFTER_APPEND
            reply = await call(runtime, lambda w: runtime.core.end_txn("t", 1001, 0, True, 3, w, 0))
            assert reply.error_code == Error.COORDINATOR_NOT_AVAILABLE
            meta = runtime.core.transactions["t"]
            assert (meta.state.kafka_name, meta.pending, sent) == ("Ongoing", None, [])
            broker.replicas.lost_after_append = Error.NONE
            broker.leader_epoch = 1  # the replicas are back and the coordinator moved
            broker.changed.set()
            await until(lambda: runtime.core.owned.get(0) == 1)
            assert runtime.core.transactions["t"].state.kafka_name == "PrepareCommit"
            assert [(m.producer_id, m.producer_epoch, m.commit, m.coordinator_epoch, m.partitions)
                    for m in sent] == [(1001, 0, True, 1, [("a", 0)])]
            reply = await call(runtime, lambda w: runtime.core.end_txn("t", 1001, 0, True, 4, w, 0))
            assert reply.error_code == Error.CONCURRENT_TRANSACTIONS
            runtime.markers_written("t", 1, [("a", 0)])
            await until(lambda: runtime.core.transactions["t"].state.kafka_name == "CompleteCommit")
            reply = await call(runtime, lambda w: runtime.core.end_txn("t", 1001, 0, True, 5, w, 0))
            assert reply.error_code == Error.NONE
    run(scenario)


def test_an_ongoing_record_that_landed_without_committing_is_aborted_by_the_timeout_after_a_reload(log):
    """AddPartitionsToTxn answered COORDINATOR_NOT_AVAILABLE though its Ongoing record is in the
    leader's log; after the coordinator moves the load finds the transaction Ongoing (as Kafka's
    load would), and transaction.timeout.ms aborts it with markers at a fenced epoch: no
    partition is left with a transaction that nothing ends."""
    async def scenario():
        async with coordinator(log, capture_markers=True) as (broker, runtime, sent):
            await call(runtime, lambda w: runtime.core.init_producer_id("t", 60000, -1, -1, 1, w))
            broker.replicas.lost_after_append = Error.REQUEST_TIMED_OUT
            reply = await call(runtime, lambda w: runtime.core.add_partitions("t", 1001, 0, [("a", 0)], 2,
                                                                              w, 0))
            assert reply == TxnReply(Error.COORDINATOR_NOT_AVAILABLE)
            assert runtime.core.transactions["t"].state.kafka_name == "Empty"
            broker.replicas.lost_after_append = Error.NONE
            broker.leader_epoch = 1
            broker.changed.set()
            await until(lambda: runtime.core.owned.get(0) == 1)
            meta = runtime.core.transactions["t"]
            assert (meta.state.kafka_name, meta.partitions) == ("Ongoing", {("a", 0)})
            runtime.run(runtime.core.tick(2 + 60000 + 1, expire=False))
            await until(lambda: bool(sent))
            assert [(m.producer_id, m.commit, m.coordinator_epoch, m.partitions) for m in sent] == \
                [(1001, False, 1, [("a", 0)])]
            assert sent[0].producer_epoch > 0  # fenced: the producer of epoch 0 cannot write again
            runtime.markers_written("t", 1, [("a", 0)])
            await until(lambda: runtime.core.transactions["t"].state.kafka_name == "CompleteAbort")
    run(scenario)


def test_a_complete_retried_after_the_partition_was_loaded_again_is_not_appended_at_the_old_epoch(log):
    """CompleteCommit refused (the quorum lost) is appended again after a backoff; when the
    partition was loaded again meanwhile (a new coordinator epoch), the retry is not appended:
    Kafka's appendTransactionToLog answers NOT_COORDINATOR without appending when the coordinator
    epoch changed, so no record of an old epoch lands after the new owner's load. The new load
    resumes the markers and writes its own CompleteCommit."""
    async def scenario():
        async with coordinator(log, capture_markers=True) as (broker, runtime, sent):
            await call(runtime, lambda w: runtime.core.init_producer_id("t", 60000, -1, -1, 1, w))
            await call(runtime, lambda w: runtime.core.add_partitions("t", 1001, 0, [("a", 0)], 2, w, 0))
            await call(runtime, lambda w: runtime.core.end_txn("t", 1001, 0, True, 3, w, 0))
            end = log.log_end_offset
            broker.replicas.refuse = Error.NOT_ENOUGH_REPLICAS
            runtime.markers_written("t", 0, [("a", 0)])  # CompleteCommit refused, retried after a backoff
            broker.leader_epoch = 1
            broker.changed.set()
            await until(lambda: runtime.core.owned.get(0) == 1)
            broker.replicas.refuse = Error.NONE
            await until(lambda: not runtime._writes)  # the retry ran
            assert log.log_end_offset == end
            assert runtime.core.transactions["t"].state.kafka_name == "PrepareCommit"
            assert [(m.coordinator_epoch, m.commit) for m in sent] == [(0, True), (1, True)]
            runtime.markers_written("t", 1, [("a", 0)])
            await until(lambda: runtime.core.transactions["t"].state.kafka_name == "CompleteCommit")
            assert log.log_end_offset == end + 1
    run(scenario)


def test_a_timeout_abort_is_made_at_the_finalized_transaction_version_one_as_kafka_without_the_feature(log):
    """The broker does not finalize the transaction.version feature at 2, so its clients run
    transaction version 0/1 and an abort no client asked for (transaction.timeout.ms) is made
    at transaction version 1, as Kafka's transactionVersionLevel() is then: its markers carry
    TV 1 and a fenced epoch, and the transaction's record keeps the client's version."""
    async def scenario():
        async with coordinator(log, capture_markers=True) as (broker, runtime, sent):
            await call(runtime, lambda w: runtime.core.init_producer_id("t", 60000, -1, -1, 1, w))
            await call(runtime, lambda w: runtime.core.add_partitions("t", 1001, 0, [("a", 0)], 2, w, 0))
            runtime.run(runtime.core.tick(2 + 60000 + 1, expire=False))
            await until(lambda: bool(sent))
            assert [(m.transaction_version, m.commit, m.producer_epoch) for m in sent] == [(1, False, 1)]
    run(scenario)


def test_a_partition_whose_log_is_missing_stays_loading_and_is_loaded_once_the_log_is_there(log):
    """Kafka loads a __transaction_state partition only from its log: while the broker has no
    local log of it (its log dir offline, the replica not created yet) the partition stays
    loading, answering COORDINATOR_LOAD_IN_PROGRESS (retriable), never loaded empty (which would
    hand out producer ids and epochs as if no transaction ever ran, losing the fencing)."""
    async def scenario():
        async with coordinator(log) as (broker, runtime, _):
            await call(runtime, lambda w: runtime.core.init_producer_id("t", 60000, -1, -1, 1, w))
            present = broker.replicas.local_log
            broker.replicas.local_log = lambda topic, partition: None
            broker.leader_epoch = 1  # led again at a new epoch, its log gone meanwhile
            broker.changed.set()
            await until(lambda: 0 not in runtime.core.owned and not runtime._loads)
            await asyncio.sleep(0.05)
            assert 0 not in runtime.core.owned
            reply = await call(runtime, lambda w: runtime.core.init_producer_id("t", 60000, -1, -1, 2, w))
            assert reply.error_code == Error.COORDINATOR_LOAD_IN_PROGRESS
            broker.replicas.local_log = present
            broker.changed.set()
            await until(lambda: runtime.core.owned.get(0) == 1)
            reply = await call(runtime, lambda w: runtime.core.init_producer_id("t", 60000, -1, -1, 3, w))
            assert (reply.error_code, reply.producer_id, reply.producer_epoch) == (Error.NONE, 1001, 1)
    run(scenario)


def test_the_coordinator_is_not_available_while_its_leader_is_fenced_or_unregistered_as_kafka_finds_it(log):
    """Kafka's getTransactionCoordinator answers with an alive broker only: a leader that is
    fenced (its heartbeats stopped) or not registered gives COORDINATOR_NOT_AVAILABLE (which a
    produce's verification answers NOT_ENOUGH_REPLICAS), not a connection attempt to it."""
    async def scenario():
        broker = Broker(log)
        broker.leader = 2
        tried = []
        broker.replicas.brokers = SimpleNamespace(endpoint_of=lambda b: tried.append(b))
        runtime = TransactionCoordinatorRuntime(broker)
        try:
            assert runtime.coordinator_of("t") == (Error.NONE, 2)
            broker.fenced.add(2)
            assert runtime.coordinator_of("t") == (Error.COORDINATOR_NOT_AVAILABLE, -1)
            assert await runtime.verify("t", 5, 1, [("a", 0)]) == {("a", 0): Error.COORDINATOR_NOT_AVAILABLE}
            broker.fenced.clear()
            broker.unregistered.add(2)
            assert runtime.coordinator_of("t") == (Error.COORDINATOR_NOT_AVAILABLE, -1)
            assert tried == []
        finally:
            await runtime.stop()
    run(scenario)


# ---- how long a write waits to commit, and the guard above it ----


def test_a_records_commit_wait_is_the_transactions_timeout_as_kafkas_append_transaction_to_log(log):
    """Kafka's appendTransactionToLog waits for the record's acks=-1 for the transaction's own
    timeout (appendRecords(newMetadata.txnTimeoutMs)): a transaction of transaction.timeout.ms
    60 s waits 60 s, one of 300 ms 300 ms; a wait that runs out answers COORDINATOR_NOT_AVAILABLE
    (REQUEST_TIMED_OUT as appendTransactionToLog maps it), through the API's guard."""
    async def scenario():
        async with coordinator(log) as (broker, runtime, _):
            reply = await runtime.call(lambda w: runtime.core.init_producer_id("t", 60000, -1, -1, now(), w))
            assert (reply.error_code, broker.replicas.waits) == (Error.NONE, [60000])
            broker.replicas.stalled = True
            async with asyncio.timeout(5):  # the append's own 300 ms, not a fixed request timeout
                reply = await runtime.call(
                    lambda w: runtime.core.init_producer_id("t", 300, -1, -1, now(), w))
            assert (reply.error_code, broker.replicas.waits[1:]) == (Error.COORDINATOR_NOT_AVAILABLE, [300])
            meta = runtime.core.transactions["t"]
            assert (meta.producer_epoch, meta.timeout_ms, meta.pending) == (0, 60000, None)
    run(scenario)


def test_the_reply_guard_outlasts_the_longest_commit_wait_transaction_max_timeout_ms():
    """A write waits at most transaction.max.timeout.ms (no transaction's timeout is above it),
    so the API handlers' guard (REQUEST_TIMED_OUT, fatal to librdkafka) is derived from it and
    never fires before the coordinator's own answer."""
    for max_timeout_ms in (1000, 60000, 900000, 3600000):
        runtime = TransactionCoordinatorRuntime(SimpleNamespace(
            config={**CONFIG, "transaction.max.timeout.ms": max_timeout_ms}))
        assert max_timeout_ms / 1000 < runtime.reply_timeout_s <= max_timeout_ms / 1000 + 60


# ---- failed appends ----


def test_a_complete_refused_while_the_quorum_is_lost_is_warned_once_then_every_30_s_with_a_count(
        log, caplog, monkeypatch):
    """CompleteCommit refused (NOT_ENOUGH_REPLICAS: COORDINATOR_NOT_AVAILABLE) is appended again
    after each backoff until the quorum is back; the first failure is warned, the next ones only
    once every APPEND_WARNING_EVERY_S with how many there were, and once an append to the
    partition succeeds the next failure is warned at once."""
    monkeypatch.setattr(runtime_module, "RETRY_BACKOFF_S", 0.001)
    clock = [1000.0]

    def warnings():
        return [r.getMessage() for r in caplog.records
                if r.levelname == "WARNING" and r.name == "strom.broker.transactions"]

    async def scenario():
        broker = Broker(log)
        runtime = TransactionCoordinatorRuntime(broker)
        runtime.append_warnings.clock = lambda: clock[0]
        sent = []
        runtime.markers.add = sent.append
        runtime.start()
        try:
            await until(lambda: 0 in runtime.core.owned)
            await call(runtime, lambda w: runtime.core.init_producer_id("t", 60000, -1, -1, now(), w))
            await call(runtime, lambda w: runtime.core.add_partitions("t", 1001, 0, [("a", 0)], now(), w, 0))
            await call(runtime, lambda w: runtime.core.end_txn("t", 1001, 0, True, now(), w, 0))
            broker.replicas.refuse = Error.NOT_ENOUGH_REPLICAS
            runtime.markers_written("t", 0, [("a", 0)])
            await until(lambda: broker.replicas.refused >= 20)
            assert len(warnings()) == 1 and "NOT_ENOUGH_REPLICAS" in warnings()[0]
            clock[0] += runtime_module.APPEND_WARNING_EVERY_S
            seen = broker.replicas.refused
            await until(lambda: broker.replicas.refused >= seen + 5)
            assert len(warnings()) == 2
            held_back = int(warnings()[1].split(" more ")[0].rsplit(" ", 1)[1])
            assert 19 <= held_back < broker.replicas.refused  # the first was warned
            broker.replicas.refuse = Error.NONE  # the quorum is back
            await until(lambda: runtime.core.transactions["t"].state.kafka_name == "CompleteCommit")
            broker.replicas.refuse = Error.NOT_ENOUGH_REPLICAS  # lost again: warned at once
            reply = await call(runtime, lambda w: runtime.core.add_partitions("t", 1001, 0, [("a", 0)], now(),
                                                                              w, 0))
            assert reply == TxnReply(Error.COORDINATOR_NOT_AVAILABLE)
            assert len(warnings()) == 3
        finally:
            await runtime.stop()
    caplog.set_level("INFO", logger="strom.broker.transactions")
    run(scenario)


def test_an_append_that_raises_ends_the_write_with_unknown_server_error_and_frees_the_id(log):
    """An append that raises (not an error code) is answered UNKNOWN_SERVER_ERROR, as Kafka's
    ReplicaManager turns an unexpected exception into a partition's error, and the transition
    is dropped: the id is not left pending (CONCURRENT_TRANSACTIONS to every later request)."""
    async def scenario():
        async with coordinator(log) as (broker, runtime, _):
            await call(runtime, lambda w: runtime.core.init_producer_id("t", 60000, -1, -1, now(), w))
            broker.replicas.raises = True
            reply = await call(runtime, lambda w: runtime.core.add_partitions("t", 1001, 0, [("a", 0)], now(),
                                                                              w, 0))
            assert reply == TxnReply(Error.UNKNOWN_SERVER_ERROR)
            meta = runtime.core.transactions["t"]
            assert (meta.state.kafka_name, meta.pending) == ("Empty", None)
            broker.replicas.raises = False
            reply = await call(runtime, lambda w: runtime.core.add_partitions("t", 1001, 0, [("a", 0)], now(),
                                                                              w, 0))
            assert reply == TxnReply(Error.NONE)
    run(scenario)


def test_a_load_reads_a_batch_at_a_time_at_the_smallest_load_buffer_and_skips_control_batches(log):
    """transaction.state.log.load.buffer.size smaller than a batch still reads one whole batch
    per chunk (the group coordinator's reader, as Kafka's load reads at least one batch); a
    control batch in the partition is not a transaction's record."""
    from engine.control import CONTROL_ABORT, build_end_txn_marker_batch
    from engine.log import ORIGIN_COORDINATOR

    async def scenario():
        broker = Broker(log, **{"transaction.state.log.load.buffer.size": 1})
        runtime = TransactionCoordinatorRuntime(broker)
        runtime.start()
        try:
            await until(lambda: 0 in runtime.core.owned)
            await call(runtime, lambda w: runtime.core.init_producer_id("t", 60000, -1, -1, now(), w))
            log.append_as_leader(bytearray(build_end_txn_marker_batch(CONTROL_ABORT, 7, 0, 0, now())), 0, 0,
                                 origin=ORIGIN_COORDINATOR)
            await call(runtime, lambda w: runtime.core.init_producer_id("u", 60000, -1, -1, now(), w))
            await call(runtime, lambda w: runtime.core.add_partitions("u", 1002, 0, [("a", 0)], now(), w, 0))
            assert log.log_end_offset == 4
            broker.leader_epoch = 1
            broker.changed.set()
            await until(lambda: runtime.core.owned.get(0) == 1)
            got = {tid: (m.producer_id, m.state.kafka_name, m.partitions)
                   for tid, m in runtime.core.transactions.items()}
            assert got == {"t": (1001, "Empty", set()), "u": (1002, "Ongoing", {("a", 0)})}
        finally:
            await runtime.stop()
    run(scenario)
