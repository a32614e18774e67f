"""AddPartitionsToTxn as Kafka's KafkaApis answers it, through broker/handlers/transactions.py
and the coordinator's shell over a real ``__transaction_state`` log: a client's v0-v3 with a
partition that does not exist, a broker's batched v4 with verify_only (KIP-890)."""
from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from broker.authorizer import ALLOW_ALL
from broker.handlers.produce import ProduceHandlers
from broker.handlers.transactions import TransactionApis
from broker.transactions.runtime import TOPIC, TransactionCoordinatorRuntime
from engine.log import Log
from protocol import messages as M
from protocol.context import RequestContext
from protocol.errors import Error
from protocol.headers import RequestHeader
from tests.transactions.test_runtime import Broker, until

R = M.AddPartitionsToTxnRequest


class TopicsBroker(Broker):
    @property
    def image(self):
        state = SimpleNamespace(leader=self.leader, leader_epoch=self.leader_epoch)
        return SimpleNamespace(topics={TOPIC: SimpleNamespace(partitions={0: state}),
                                       "a": SimpleNamespace(partitions={0: state, 1: state})},
                               brokers=self.brokers)


@pytest.fixture
def log(tmp_path):
    log = Log(str(tmp_path / f"{TOPIC}-0"))
    yield log
    log.close()


def context(api_key: int, version: int) -> RequestContext:
    return RequestContext(RequestHeader(api_key, version, 1, "test", 2))


def errors_of(topic_results):
    return {(t.name, p.partition_index): p.partition_error_code for t in topic_results
            for p in t.results_by_partition}


def serve(log, scenario, with_broker=False, authorizer=ALLOW_ALL):
    async def run():
        broker = TopicsBroker(log)
        allocated.fail = False
        broker.allocate_producer_id = allocated
        broker.transactions = TransactionCoordinatorRuntime(broker)
        broker.transactions.start()
        txn_apis = TransactionApis(broker.transactions, lambda: broker.image, broker.replicas, None,
                                   authorizer).apis()
        produce_apis = ProduceHandlers(broker.replicas, lambda: broker.transactions,
                                       broker.allocate_producer_id).apis()
        apis = {api.key: api.fn for api in txn_apis + produce_apis}
        try:
            await until(lambda: 0 in broker.transactions.core.owned)
            core = broker.transactions.core
            waiter = broker.transactions.waiter()
            broker.transactions.run(core.init_producer_id("t", 60000, -1, -1, 1, waiter))
            reply = await waiter
            if with_broker:
                await scenario(apis, reply.producer_id, reply.producer_epoch, broker)
            else:
                await scenario(apis, reply.producer_id, reply.producer_epoch)
        finally:
            await broker.transactions.stop()
    asyncio.run(run())


def test_a_partition_that_does_not_exist_fails_alone_and_the_others_are_not_attempted(log):
    async def scenario(apis, pid, epoch):
        request = R(v3_and_below_transactional_id="t", v3_and_below_producer_id=pid,
                    v3_and_below_producer_epoch=epoch,
                    v3_and_below_topics=[R.AddPartitionsToTxnTopic(name="a", partitions=[0, 7]),
                                         R.AddPartitionsToTxnTopic(name="nope", partitions=[0])])
        response = await apis[24](context(24, 3), request)
        assert errors_of(response.results_by_topic_v3_and_below) == {
            ("a", 0): Error.OPERATION_NOT_ATTEMPTED, ("a", 7): Error.UNKNOWN_TOPIC_OR_PARTITION,
            ("nope", 0): Error.UNKNOWN_TOPIC_OR_PARTITION}
        request.v3_and_below_topics = [R.AddPartitionsToTxnTopic(name="a", partitions=[0])]
        response = await apis[24](context(24, 3), request)
        assert errors_of(response.results_by_topic_v3_and_below) == {("a", 0): Error.NONE}
    serve(log, scenario)


def test_verify_only_answers_whether_the_transaction_holds_each_partition_and_adds_nothing(log):
    async def scenario(apis, pid, epoch):
        add = R(v3_and_below_transactional_id="t", v3_and_below_producer_id=pid,
                v3_and_below_producer_epoch=epoch,
                v3_and_below_topics=[R.AddPartitionsToTxnTopic(name="a", partitions=[0])])
        await apis[24](context(24, 3), add)
        verify = R(transactions=[
            R.AddPartitionsToTxnTransaction(transactional_id="t", producer_id=pid, producer_epoch=epoch,
                                            verify_only=True,
                                            topics=[R.AddPartitionsToTxnTopic(name="a", partitions=[0, 1])]),
            R.AddPartitionsToTxnTransaction(transactional_id="t", producer_id=pid, producer_epoch=epoch + 5,
                                            verify_only=True,
                                            topics=[R.AddPartitionsToTxnTopic(name="a", partitions=[0])])])
        response = await apis[24](context(24, 4), verify)
        assert response.error_code == Error.NONE
        held, stale = response.results_by_transaction
        assert errors_of(held.topic_results) == {("a", 0): Error.NONE, ("a", 1): Error.TRANSACTION_ABORTABLE}
        assert errors_of(stale.topic_results) == {("a", 0): Error.PRODUCER_FENCED}
        response = await apis[24](context(24, 4), verify)  # nothing was added
        assert errors_of(response.results_by_transaction[0].topic_results)[("a", 1)] == \
            Error.TRANSACTION_ABORTABLE
    serve(log, scenario)


def test_producer_fenced_is_invalid_producer_epoch_for_the_versions_before_it_as_kafka_apis_answers(log):
    """KafkaApis answers PRODUCER_FENCED as INVALID_PRODUCER_EPOCH to AddPartitionsToTxn,
    AddOffsetsToTxn and EndTxn below v2 (clients from before KIP-588 know only the latter:
    aiokafka sends v0 and takes only 47 for a fenced producer)."""
    async def scenario(apis, pid, epoch):
        stale = epoch + 1  # not the id's epoch: the core answers PRODUCER_FENCED

        def add(version):
            return apis[24](context(24, version), R(
                v3_and_below_transactional_id="t", v3_and_below_producer_id=pid,
                v3_and_below_producer_epoch=stale,
                v3_and_below_topics=[R.AddPartitionsToTxnTopic(name="a", partitions=[0])]))

        assert errors_of((await add(1)).results_by_topic_v3_and_below) == \
            {("a", 0): Error.INVALID_PRODUCER_EPOCH}
        assert errors_of((await add(2)).results_by_topic_v3_and_below) == {("a", 0): Error.PRODUCER_FENCED}
        offsets = M.AddOffsetsToTxnRequest(transactional_id="t", producer_id=pid, producer_epoch=stale,
                                           group_id="g")
        for version, code in ((0, Error.INVALID_PRODUCER_EPOCH), (1, Error.INVALID_PRODUCER_EPOCH),
                              (2, Error.PRODUCER_FENCED)):
            assert (await apis[25](context(25, version), offsets)).error_code == code
        end = M.EndTxnRequest(transactional_id="t", producer_id=pid, producer_epoch=stale, committed=False)
        for version, code in ((1, Error.INVALID_PRODUCER_EPOCH), (2, Error.PRODUCER_FENCED)):
            assert (await apis[26](context(26, version), end)).error_code == code
    serve(log, scenario)


def test_verify_only_answers_unknown_topic_or_partition_first_as_kafka_apis_checks_every_version(log):
    """KafkaApis checks each partition against the metadata cache before anything else, for
    every version: a verification of a partition that does not exist answers
    UNKNOWN_TOPIC_OR_PARTITION and the transaction's other partitions OPERATION_NOT_ATTEMPTED."""
    async def scenario(apis, pid, epoch):
        verify = R(transactions=[R.AddPartitionsToTxnTransaction(
            transactional_id="t", producer_id=pid, producer_epoch=epoch, verify_only=True,
            topics=[R.AddPartitionsToTxnTopic(name="a", partitions=[0, 9]),
                    R.AddPartitionsToTxnTopic(name="nope", partitions=[0])])])
        response = await apis[24](context(24, 4), verify)
        assert errors_of(response.results_by_transaction[0].topic_results) == {
            ("a", 0): Error.OPERATION_NOT_ATTEMPTED, ("a", 9): Error.UNKNOWN_TOPIC_OR_PARTITION,
            ("nope", 0): Error.UNKNOWN_TOPIC_OR_PARTITION}
    serve(log, scenario)


def test_init_producer_id_answers_producer_fenced_as_invalid_producer_epoch_below_v4_as_kafka_apis(log):
    """KIP-360 recovery with an epoch that is not the id's: PRODUCER_FENCED from v4,
    INVALID_PRODUCER_EPOCH below (KafkaApis' handleInitProducerIdRequest)."""
    async def scenario(apis, pid, epoch):
        Init = M.InitProducerIdRequest
        for bump in (1, 2):  # epoch + 1 is the last epoch (a retried bump); epoch is older: fenced
            bumped = await apis[22](context(22, 4), Init(
                transactional_id="t", transaction_timeout_ms=60000, producer_id=pid,
                producer_epoch=epoch + bump - 1))
            assert (bumped.error_code, bumped.producer_id, bumped.producer_epoch) == \
                (Error.NONE, pid, epoch + bump)
        stale = Init(transactional_id="t", transaction_timeout_ms=60000, producer_id=pid,
                     producer_epoch=epoch)
        for version, code in ((3, Error.INVALID_PRODUCER_EPOCH), (4, Error.PRODUCER_FENCED),
                              (5, Error.PRODUCER_FENCED)):
            assert (await apis[22](context(22, version), stale)).error_code == code
    serve(log, scenario)


def test_an_idempotent_init_producer_id_always_gets_a_new_producer_id_at_epoch_zero_as_kafka_4(log):
    """Without a transactional id Kafka 4.x allocates a new producer id at epoch 0 whatever
    producer id and epoch the request gives (KIP-360's bump is for transactional ids), and a
    failed allocation answers COORDINATOR_NOT_AVAILABLE."""
    async def scenario(apis, pid, epoch):
        Init = M.InitProducerIdRequest
        for given_id, given_epoch in ((-1, -1), (77, 3), (77, 32766)):
            reply = await apis[22](context(22, 5), Init(
                transactional_id=None, transaction_timeout_ms=60000, producer_id=given_id,
                producer_epoch=given_epoch))
            assert (reply.error_code, reply.producer_epoch) == (Error.NONE, 0)
            assert reply.producer_id not in (77, -1)
        allocated.fail = True
        reply = await apis[22](context(22, 5), Init(
            transactional_id=None, transaction_timeout_ms=60000, producer_id=77, producer_epoch=3))
        assert (reply.error_code, reply.producer_id, reply.producer_epoch) == \
            (Error.COORDINATOR_NOT_AVAILABLE, -1, -1)
    serve(log, scenario)


class Allocator:
    """The controller's producer id blocks, as broker/server.py asks for them; ``fail`` as when
    the controller cannot be reached."""

    def __init__(self):
        self.next, self.fail = 5000, False

    async def __call__(self):
        if self.fail:
            raise ConnectionError("no controller")
        self.next += 1
        return self.next


allocated = Allocator()



def test_add_offsets_to_txn_adds_at_transaction_version_0_at_every_version_as_kafka_apis(log):
    """KafkaApis hands AddOffsetsToTxn to the coordinator at transaction version 0 whatever the
    request's version: a transaction version 2 client never sends it (TxnOffsetCommit v5 adds
    the group's partition itself), so the Ongoing record holds client version 0; an EndTxn v5
    still ends the transaction at its own version 2."""
    async def scenario(apis, pid, epoch, broker):
        core = broker.transactions.core
        for version in range(5):
            offsets = M.AddOffsetsToTxnRequest(transactional_id="t", producer_id=pid, producer_epoch=epoch,
                                               group_id=f"g{version}")
            assert (await apis[25](context(25, version), offsets)).error_code == Error.NONE
            meta = core.transactions["t"]
            assert (meta.state.kafka_name, meta.client_transaction_version) == ("Ongoing", 0)
        assert {t for t, _ in meta.partitions} == {"__consumer_offsets"}
        end = M.EndTxnRequest(transactional_id="t", producer_id=pid, producer_epoch=epoch, committed=True)
        response = await apis[26](context(26, 5), end)
        assert (response.error_code, response.producer_epoch) == (Error.NONE, epoch + 1)
        assert core.transactions["t"].client_transaction_version == 2
    serve(log, scenario, with_broker=True)
