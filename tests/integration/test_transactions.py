"""Transactions with real clients against one `strom` node (KIP-98, KIP-360, KIP-447):
the transaction coordinator (broker/transactions/), its APIs (broker/handlers/transactions.py)
and the partition side they drive (markers, the last stable offset, read_committed).

One node for the module, with transaction.state.log.num.partitions=5 so the coordinator's
partitions load quickly; every test uses topics and transactional ids of its own.
"""
from __future__ import annotations

import asyncio
import importlib
import json
import os
import subprocess
import time
import uuid

import pytest

from protocol import messages as M
from protocol.client import KafkaConnection
from protocol.errors import Error

from .clients import aiokafka_client, kafkajs
from .clients import confluent as reference
from .cluster import StromNode

confluent_kafka = pytest.importorskip("confluent_kafka")

pytestmark = [
    pytest.mark.timeout(120),
]

TIMEOUT_S = 30.0
TXN_JS = os.path.join(kafkajs.JS_DIR, "txn.js")


def _read_committed_served() -> bool:
    from engine.log import Log
    return hasattr(Log, "collect_aborted")


def _txn_offsets_served() -> bool:
    from broker.groups.runtime import GroupCoordinatorRuntime
    return hasattr(GroupCoordinatorRuntime, "complete_transaction")


def _require_read_committed() -> None:
    if not _read_committed_served():
        pytest.xfail("read_committed Fetch (the partition's LSO and aborted transactions) is not served yet")


@pytest.fixture(scope="module")
def node():
    with StromNode(extra={"transaction.state.log.num.partitions": 5,
                          "transaction.abort.timed.out.transaction.cleanup.interval.ms": 500}) as n:
        yield n


async def _request(node, api_key: int, version: int, body):
    conn = KafkaConnection("127.0.0.1", node.broker_port)
    await conn.connect()
    try:
        return await conn.request(api_key, version, body)
    finally:
        await conn.close()


def request(node, api_key: int, version: int, body):
    return asyncio.run(_request(node, api_key, version, body))


@pytest.fixture(scope="module")
def coordinator(node):
    """FindCoordinator for a transactional id is answered (the state topic created)."""
    for _ in range(100):
        r = request(node, 10, 4, M.FindCoordinatorRequest(key_type=1, coordinator_keys=["probe"]))
        code = r.coordinators[0].error_code
        if code == Error.INVALID_REQUEST:
            pytest.xfail("FindCoordinator does not answer the TRANSACTION key type yet")
        if code == Error.NONE:
            return r.coordinators[0]
        asyncio.run(asyncio.sleep(0.2))
    pytest.fail(f"FindCoordinator(TRANSACTION) kept answering {Error(code).name}")


def new_topic(node, partitions=2) -> str:
    topic = f"txn-{uuid.uuid4().hex[:10]}"
    reference.create_topic(node.bootstrap, topic, partitions=partitions)
    return topic


def producer(node, tid: str, **extra):
    p = confluent_kafka.Producer({"bootstrap.servers": node.bootstrap, "transactional.id": tid,
                                  "transaction.timeout.ms": 20000, **extra})
    p.init_transactions(TIMEOUT_S)
    return p


def transaction(p, topic: str, values: list[bytes], commit: bool) -> None:
    p.begin_transaction()
    for i, v in enumerate(values):
        p.produce(topic, value=v, key=b"k%d" % (i % 4))
    p.flush(TIMEOUT_S)
    if commit:
        p.commit_transaction(TIMEOUT_S)
    else:
        p.abort_transaction(TIMEOUT_S)


def read(node, topic: str, partitions: int, isolation: str, count: int | None = None,
         idle_s: float = 3.0) -> list[bytes]:
    """Every value of the topic's partitions as a consumer of ``isolation`` reads them:
    until ``count`` values came, or nothing new came for ``idle_s``."""
    c = confluent_kafka.Consumer({"bootstrap.servers": node.bootstrap, "group.id": f"r-{uuid.uuid4().hex}",
                                  "isolation.level": isolation, "enable.auto.commit": False,
                                  "auto.offset.reset": "earliest"})
    try:
        c.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in range(partitions)])
        out: list[bytes] = []
        deadline = time.monotonic() + TIMEOUT_S
        quiet = time.monotonic() + idle_s
        while time.monotonic() < min(deadline, quiet) and (count is None or len(out) < count):
            m = c.poll(0.2)
            if m is None or (m.error() and m.error().code() == confluent_kafka.KafkaError._PARTITION_EOF):
                continue
            if m.error():
                raise RuntimeError(m.error())
            out.append(m.value())
            quiet = time.monotonic() + idle_s
        return out
    finally:
        c.close()


def values(tag: str, n: int) -> list[bytes]:
    return [f"{tag}-{i}".encode() for i in range(n)]


# ---- confluent-kafka ---------------------------------------------------------------------

def test_committed_and_aborted_transactions_are_all_stored_and_read_uncommitted_sees_them(node, coordinator):
    topic = new_topic(node)
    p = producer(node, f"tid-{uuid.uuid4().hex[:8]}")
    transaction(p, topic, values("c1", 6), commit=True)
    transaction(p, topic, values("a", 6), commit=False)
    transaction(p, topic, values("c2", 6), commit=True)
    got = read(node, topic, 2, "read_uncommitted", count=18)
    assert sorted(got) == sorted(values("c1", 6) + values("a", 6) + values("c2", 6))


def test_read_committed_consumer_sees_exactly_the_committed_transactions(node, coordinator):
    topic = new_topic(node)
    p = producer(node, f"tid-{uuid.uuid4().hex[:8]}")
    transaction(p, topic, values("c1", 5), commit=True)
    transaction(p, topic, values("a", 5), commit=False)
    transaction(p, topic, values("c2", 5), commit=True)
    _require_read_committed()
    assert sorted(read(node, topic, 2, "read_committed")) == sorted(values("c1", 5) + values("c2", 5))


def test_read_committed_consumer_waits_for_an_open_transaction(node, coordinator):
    topic = new_topic(node, partitions=1)
    p = producer(node, f"tid-{uuid.uuid4().hex[:8]}")
    transaction(p, topic, values("before", 3), commit=True)
    p.begin_transaction()
    for v in values("open", 3):
        p.produce(topic, value=v)
    p.flush(TIMEOUT_S)
    _require_read_committed()
    assert sorted(read(node, topic, 1, "read_committed", idle_s=2.0)) == sorted(values("before", 3))
    p.commit_transaction(TIMEOUT_S)
    assert sorted(read(node, topic, 1, "read_committed", count=6)) == \
        sorted(values("before", 3) + values("open", 3))


def test_a_second_producer_with_the_same_transactional_id_fences_the_first(node, coordinator):
    topic = new_topic(node)
    tid = f"tid-{uuid.uuid4().hex[:8]}"
    zombie = producer(node, tid)
    zombie.begin_transaction()
    zombie.produce(topic, value=b"zombie")
    zombie.flush(TIMEOUT_S)
    successor = producer(node, tid)  # aborts the zombie's transaction, bumps the epoch
    transaction(successor, topic, [b"successor"], commit=True)
    with pytest.raises(confluent_kafka.KafkaException) as e:
        zombie.commit_transaction(TIMEOUT_S)
    assert e.value.args[0].fatal() or e.value.args[0].code() in (
        confluent_kafka.KafkaError._FENCED, confluent_kafka.KafkaError.PRODUCER_FENCED,
        confluent_kafka.KafkaError.INVALID_PRODUCER_EPOCH), e.value
    _require_read_committed()
    assert read(node, topic, 2, "read_committed") == [b"successor"]


def test_describe_and_list_transactions_and_describe_producers_show_an_open_transaction(node, coordinator):
    topic = new_topic(node, partitions=1)
    tid = f"tid-{uuid.uuid4().hex[:8]}"
    p = producer(node, tid)
    p.begin_transaction()
    p.produce(topic, value=b"v")
    p.flush(TIMEOUT_S)
    d = request(node, 65, 0, M.DescribeTransactionsRequest(transactional_ids=[tid, "never-used"]))
    ongoing, unknown = d.transaction_states
    assert (ongoing.error_code, ongoing.transaction_state) == (Error.NONE, "Ongoing")
    assert [(t.topic, t.partitions) for t in ongoing.topics] == [(topic, [0])]
    assert ongoing.transaction_timeout_ms == 20000
    assert unknown.error_code == Error.TRANSACTIONAL_ID_NOT_FOUND
    listed = request(node, 66, 1, M.ListTransactionsRequest(state_filters=["Ongoing", "Nonsense"],
                                                            producer_id_filters=[]))
    assert listed.unknown_state_filters == ["Nonsense"]
    assert (tid, ongoing.producer_id, "Ongoing") in [
        (s.transactional_id, s.producer_id, s.transaction_state) for s in listed.transaction_states]
    from replication.manager import ProducerView
    if "current_txn_start_offset" not in ProducerView._fields:
        pytest.xfail("the partition's producer state does not show the open transaction yet")
    producers = request(node, 61, 0, M.DescribeProducersRequest(
        topics=[M.DescribeProducersRequest.TopicRequest(name=topic, partition_indexes=[0])]))
    [state] = producers.topics[0].partitions[0].active_producers
    assert (state.producer_id, state.current_txn_start_offset) == (ongoing.producer_id, 0)
    p.commit_transaction(TIMEOUT_S)
    # EndTxn is answered once PrepareCommit is written; the marker lands on the partition after
    # (as in Kafka), so the open transaction is gone from the partition's producer state soon,
    # not necessarily at once.
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        producers = request(node, 61, 0, M.DescribeProducersRequest(
            topics=[M.DescribeProducersRequest.TopicRequest(name=topic, partition_indexes=[0])]))
        [state] = producers.topics[0].partitions[0].active_producers
        if state.current_txn_start_offset == -1 or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert state.current_txn_start_offset == -1, "the COMMIT marker never ended the open transaction"
    while True:  # CompleteCommit is written once every marker is acknowledged
        d = request(node, 65, 0, M.DescribeTransactionsRequest(transactional_ids=[tid]))
        if d.transaction_states[0].transaction_state != "PrepareCommit" or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert d.transaction_states[0].transaction_state == "CompleteCommit"
    assert d.transaction_states[0].topics == []


def test_a_transaction_past_its_timeout_is_aborted_by_the_coordinator(node, coordinator):
    topic = new_topic(node, partitions=1)
    tid = f"tid-{uuid.uuid4().hex[:8]}"
    p = producer(node, tid, **{"transaction.timeout.ms": 1000})
    p.begin_transaction()
    p.produce(topic, value=b"stuck")
    p.flush(TIMEOUT_S)
    state = None
    for _ in range(100):
        d = request(node, 65, 0, M.DescribeTransactionsRequest(transactional_ids=[tid]))
        state = d.transaction_states[0].transaction_state
        if state == "CompleteAbort":
            break
        asyncio.run(asyncio.sleep(0.1))
    assert state == "CompleteAbort"
    _require_read_committed()
    assert read(node, topic, 1, "read_committed", idle_s=1.0) == []


def test_send_offsets_to_transaction_commits_the_offsets_with_the_transaction(node, coordinator):
    if not _txn_offsets_served():
        pytest.xfail("the group coordinator does not write transaction markers yet (complete_transaction)")
    source, sink = new_topic(node, partitions=1), new_topic(node, partitions=1)
    reference.produce(node.bootstrap, source, [(None, v, []) for v in values("in", 10)])
    group = f"g-{uuid.uuid4().hex[:8]}"
    c = confluent_kafka.Consumer({"bootstrap.servers": node.bootstrap, "group.id": group,
                                  "isolation.level": "read_committed", "enable.auto.commit": False,
                                  "auto.offset.reset": "earliest"})
    p = producer(node, f"tid-{uuid.uuid4().hex[:8]}")
    try:
        c.subscribe([source])
        got = []
        while len(got) < 10:
            m = c.poll(1.0)
            if m is not None and not m.error():
                got.append(m)
        p.begin_transaction()
        for m in got[:6]:
            p.produce(sink, value=m.value())
        p.send_offsets_to_transaction([confluent_kafka.TopicPartition(source, 0, got[5].offset() + 1)],
                                      c.consumer_group_metadata(), TIMEOUT_S)
        p.commit_transaction(TIMEOUT_S)
        p.begin_transaction()
        for m in got[6:]:
            p.produce(sink, value=m.value())
        p.send_offsets_to_transaction([confluent_kafka.TopicPartition(source, 0, got[9].offset() + 1)],
                                      c.consumer_group_metadata(), TIMEOUT_S)
        p.abort_transaction(TIMEOUT_S)
    finally:
        c.close()
    assert reference.committed(node.bootstrap, source, group, [0]) == {0: got[5].offset() + 1}
    _require_read_committed()
    assert sorted(read(node, sink, 1, "read_committed")) == sorted(values("in", 6))


# ---- every client's transactions, read by every client ---------------------------------------

MIXED_PARTITIONS = 2


def _confluent_transactions(node, topic: str, tid: str, committed: list[bytes], aborted: list[bytes],
                            partitions: int):
    p = producer(node, tid)
    for values_, commit in ((committed, True), (aborted, False)):
        p.begin_transaction()
        for i, v in enumerate(values_):
            p.produce(topic, value=v, partition=i % partitions)
        p.flush(TIMEOUT_S)
        if commit:
            p.commit_transaction(TIMEOUT_S)
        else:
            p.abort_transaction(TIMEOUT_S)


def _kafka_python_transactions(node, topic: str, tid: str, committed: list[bytes], aborted: list[bytes],
                               partitions: int):
    from kafka import KafkaProducer
    p = KafkaProducer(bootstrap_servers=node.bootstrap, transactional_id=tid)
    try:
        p.init_transactions()
        p.begin_transaction()
        for i, v in enumerate(committed):
            p.send(topic, value=v, partition=i % partitions)
        p.commit_transaction()
        p.begin_transaction()
        for i, v in enumerate(aborted):
            p.send(topic, value=v, partition=i % partitions)
        p.flush()
        p.abort_transaction()
    finally:
        p.close(timeout=10)


def _aiokafka_transactions(node, topic: str, tid: str, committed: list[bytes], aborted: list[bytes],
                           partitions: int):
    from aiokafka import AIOKafkaProducer

    async def run():
        p = AIOKafkaProducer(bootstrap_servers=node.bootstrap, transactional_id=tid)
        await p.start()
        try:
            async with p.transaction():
                for i, v in enumerate(committed):
                    await p.send_and_wait(topic, v, partition=i % partitions)
            await p.begin_transaction()
            for i, v in enumerate(aborted):
                await p.send_and_wait(topic, v, partition=i % partitions)
            await p.abort_transaction()
        finally:
            await p.stop()

    aiokafka_client._run(run(), TIMEOUT_S)


def _kafkajs_transactions(node, topic: str, tid: str, committed: list[bytes], aborted: list[bytes],
                          partitions: int):
    command = json.dumps({"bootstrap": node.bootstrap, "topic": topic, "transactionalId": tid,
                          "committed": [v.decode() for v in committed],
                          "aborted": [v.decode() for v in aborted], "partitions": partitions})
    proc = subprocess.run([kafkajs.NODE, TXN_JS, command], capture_output=True, timeout=TIMEOUT_S + 10,
                          cwd=kafkajs.JS_DIR)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")[-3000:]


def _has(module: str) -> bool:
    try:
        __import__(module)
    except ImportError:
        return False
    return True


# name, transactional producer, consumer driver (tests/integration/clients/), installed
CLIENTS = [
    ("confluent", _confluent_transactions, "confluent", True),
    ("kafka-python", _kafka_python_transactions, "kafka_python", _has("kafka")),
    ("aiokafka", _aiokafka_transactions, "aiokafka_client", _has("aiokafka")),
    ("kafkajs", _kafkajs_transactions, "kafkajs", kafkajs.AVAILABLE),
]


def _by_partition(records: list[tuple[int, bytes]]) -> dict[int, list[bytes]]:
    out: dict[int, list[bytes]] = {p: [] for p in range(MIXED_PARTITIONS)}
    for partition, value in records:
        out[partition].append(value)
    return out


@pytest.fixture(scope="module")
def every_clients_transactions(node, coordinator):
    """One topic of two partitions holding a committed and an aborted transaction of each
    producer client (values spread over both partitions, so every marker lands on both),
    each pair inside a transaction of a second confluent producer that stays open meanwhile
    and ends after them, aborted and committed by turns: the aborted ranges of the
    aborted transactions hold other producers' committed records, and committed records
    sit on both sides of every aborted range. A last committed transaction closes each
    partition. Returns (topic, committed, every record) as (partition, value) in each
    partition's offset order."""
    topic = new_topic(node, partitions=MIXED_PARTITIONS)
    spanning = producer(node, f"tid-{uuid.uuid4().hex[:8]}")
    committed: list[tuple[int, bytes]] = []
    everything: list[tuple[int, bytes]] = []

    def spread(values_: list[bytes]) -> list[tuple[int, bytes]]:
        return [(i % MIXED_PARTITIONS, v) for i, v in enumerate(values_)]

    def spanning_transaction(tag: str) -> list[tuple[int, bytes]]:
        held = spread(values(tag, MIXED_PARTITIONS))
        spanning.begin_transaction()
        for partition, v in held:
            spanning.produce(topic, value=v, partition=partition)
        spanning.flush(TIMEOUT_S)
        return held

    for turn, (name, run, _driver, available) in enumerate(CLIENTS):
        if not available:
            continue
        held = spanning_transaction(f"{name}-spanning")
        mine, theirs = values(f"{name}-commit", 4), values(f"{name}-abort", 3)
        run(node, topic, f"tid-{uuid.uuid4().hex[:8]}", mine, theirs, MIXED_PARTITIONS)
        if turn % 2:
            spanning.commit_transaction(TIMEOUT_S)
            committed += held
        else:
            spanning.abort_transaction(TIMEOUT_S)
        committed += spread(mine)
        everything += held + spread(mine) + spread(theirs)
    last = spanning_transaction("last")
    spanning.commit_transaction(TIMEOUT_S)
    committed += last
    everything += last
    return topic, _by_partition(committed), _by_partition(everything)


def _read_as(driver, node, topic: str, isolation: str, count: int,
             partition_fetch_bytes: int | None = None) -> dict[int, list[bytes]]:
    """The values a consumer of ``driver`` reads at ``isolation``, per partition in offset
    order: the first ``count`` it returns (every partition ends in committed records, so a
    record shown that should not be pushes one that should out of the count)."""
    records = driver.consume_assign(node.bootstrap, topic, range(MIXED_PARTITIONS), count,
                                    timeout=TIMEOUT_S, isolation=isolation,
                                    partition_fetch_bytes=partition_fetch_bytes)
    ordered = sorted(records, key=lambda r: (r.partition, r.offset))
    return _by_partition([(r.partition, r.value) for r in ordered])


@pytest.mark.parametrize("reader", [
    pytest.param(driver, id=name, marks=pytest.mark.skipif(not available, reason=f"{name} is not installed"))
    for name, _run, driver, available in CLIENTS])
def test_each_client_reads_every_clients_committed_transactions_read_committed_and_all_read_uncommitted(
        node, every_clients_transactions, reader):
    """Kafka's read_committed: records up to the last stable offset less the aborted
    transactions' (Fetch's aborted_transactions, filtered by producer id), control batches
    never shown; read_uncommitted: every data record, control batches still never shown.

    Then read_committed again one batch per Fetch (max.partition.fetch.bytes 1, KIP-74's
    first batch), so most responses start inside aborted transactions begun in an earlier
    one and each must list them. Not kafkajs: its filter (filterAbortedMessages) takes at
    most one aborted transaction off the list per record, so a response starting inside two
    of them shows the second's first records, on Kafka as on Strom."""
    driver = importlib.import_module(f"{__package__}.clients.{reader}")
    topic, committed, everything = every_clients_transactions
    _require_read_committed()
    count = sum(map(len, committed.values()))
    assert _read_as(driver, node, topic, "read_committed", count) == committed
    assert _read_as(driver, node, topic, "read_uncommitted", sum(map(len, everything.values()))) == everything
    if reader != "kafkajs":
        assert _read_as(driver, node, topic, "read_committed", count, partition_fetch_bytes=1) == committed


# ---- KIP-890 verification on the partition leader ------------------------------------------------

def test_a_transactional_batch_for_a_partition_not_added_to_the_transaction_is_refused(node, coordinator):
    """transaction.partition.verification.enable (Kafka's default): the leader asks the
    coordinator before the producer's first transactional batch on a partition; one the
    transaction does not hold is refused with INVALID_TXN_STATE and nothing is written."""
    from ext.batch import build_batch

    topic = new_topic(node, partitions=2)
    tid = f"tid-{uuid.uuid4().hex[:8]}"
    P = M.ProduceRequest

    async def scenario():
        conn = KafkaConnection("127.0.0.1", node.broker_port)
        await conn.connect()
        try:
            init = await conn.request(22, 3, M.InitProducerIdRequest(
                transactional_id=tid, transaction_timeout_ms=20000, producer_id=-1, producer_epoch=-1))
            assert init.error_code == Error.NONE
            T = M.AddPartitionsToTxnRequest
            added = await conn.request(24, 3, T(
                v3_and_below_transactional_id=tid, v3_and_below_producer_id=init.producer_id,
                v3_and_below_producer_epoch=init.producer_epoch,
                v3_and_below_topics=[T.AddPartitionsToTxnTopic(name=topic, partitions=[0])]))
            assert added.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == 0

            def batch():
                return build_batch([(b"k", b"v", (), 0)], producer_id=init.producer_id,
                                   producer_epoch=init.producer_epoch, base_sequence=0, is_transactional=True)

            data = [P.TopicProduceData(name=topic, partition_data=[
                P.PartitionProduceData(index=i, records=batch()) for i in (0, 1)])]
            produced = await conn.request(0, 9, P(transactional_id=tid, acks=-1, timeout_ms=10000,
                                                  topic_data=data))
            return {p.index: p.error_code for p in produced.responses[0].partition_responses}
        finally:
            await conn.close()

    assert asyncio.run(scenario()) == {0: Error.NONE, 1: Error.INVALID_TXN_STATE}
    assert read(node, topic, 2, "read_uncommitted", idle_s=1.0) == [b"v"]  # partition 0's only
