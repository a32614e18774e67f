"""Transaction version 2 (KIP-890 part 2) against one real node, driven at the protocol level
(no installed client runs it): the broker advertises transaction.version 2 as finalized
(ApiVersions' FinalizedFeatures), a client of that version sends no AddPartitionsToTxn or
AddOffsetsToTxn (Produce v12's partition is added by its leader, TxnOffsetCommit v5's by the
group coordinator), EndTxn v5 answers the bumped epoch, the next transaction runs at it, a
zombie at an older epoch is fenced, and a read_committed consumer (confluent-kafka) sees exactly
the committed records."""
from __future__ import annotations

import asyncio
import time
import uuid

import pytest

from protocol import messages as M
from protocol.client import KafkaConnection
from protocol.errors import Error

from .clients import confluent as reference

confluent_kafka = pytest.importorskip("confluent_kafka")

pytestmark = [
    pytest.mark.timeout(120),
]

TIMEOUT_S = 30.0
RETRIABLE = {Error.COORDINATOR_NOT_AVAILABLE, Error.COORDINATOR_LOAD_IN_PROGRESS, Error.NOT_COORDINATOR,
             Error.CONCURRENT_TRANSACTIONS, Error.NOT_ENOUGH_REPLICAS, Error.UNKNOWN_TOPIC_OR_PARTITION,
             Error.NOT_LEADER_OR_FOLLOWER}


async def until(send, code_of, what: str):
    """``send()`` again while its answer's error (``code_of``) is retriable; the last answer."""
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        response = await send()
        if code_of(response) not in RETRIABLE or time.monotonic() > deadline:
            return response
        await asyncio.sleep(0.1)


def test_a_client_of_transaction_version_2_commits_aborts_and_is_fenced_as_kafka_4_answers(shared_node):
    from ext.batch import build_batch

    node = shared_node
    topic = f"tv2-{uuid.uuid4().hex[:10]}"
    reference.create_topic(node.bootstrap, topic, partitions=2)
    tid = f"tv2-{uuid.uuid4().hex[:8]}"
    group = f"tv2-group-{uuid.uuid4().hex[:8]}"
    P = M.ProduceRequest

    async def produce(conn, pid: int, epoch: int, values: dict[int, bytes], seq: int = 0):
        data = [P.TopicProduceData(name=topic, partition_data=[
            P.PartitionProduceData(index=i, records=build_batch(
                [(b"k", v, (), int(time.time() * 1000))], producer_id=pid, producer_epoch=epoch,
                base_sequence=seq, is_transactional=True)) for i, v in sorted(values.items())])]
        r = await until(lambda: conn.request(0, 12, P(transactional_id=tid, acks=-1, timeout_ms=10000,
                                                      topic_data=data)),
                        lambda r: max((p.error_code for p in r.responses[0].partition_responses),
                                      key=lambda c: c in RETRIABLE), "produce")
        return {p.index: p.error_code for p in r.responses[0].partition_responses}

    async def end(conn, pid: int, epoch: int, commit: bool):
        return await until(lambda: conn.request(26, 5, M.EndTxnRequest(
            transactional_id=tid, producer_id=pid, producer_epoch=epoch, committed=commit)),
            lambda r: r.error_code, "end")

    async def scenario():
        conn = KafkaConnection("127.0.0.1", node.broker_port)
        await conn.connect()
        try:
            versions = await conn.request(18, 3, M.ApiVersionsRequest(
                client_software_name="tv2", client_software_version="1"))
            served = {a.api_key: a.max_version for a in versions.api_keys}
            finalized = {f.name: f.max_version_level for f in versions.finalized_features}
            supported = {f.name: (f.min_version, f.max_version) for f in versions.supported_features}
            # what Java's TransactionManager turns transaction version 2 on from
            assert finalized.get("transaction.version") == 2 and versions.finalized_features_epoch >= 0
            assert supported["transaction.version"][1] == 2
            assert served[0] >= 12 and served[28] >= 5 and served[26] >= 5

            found = await until(lambda: conn.request(10, 4, M.FindCoordinatorRequest(
                key_type=1, coordinator_keys=[tid])), lambda r: r.coordinators[0].error_code, "find")
            assert found.coordinators[0].error_code == Error.NONE
            init = await until(lambda: conn.request(22, 5, M.InitProducerIdRequest(
                transactional_id=tid, transaction_timeout_ms=20000, producer_id=-1, producer_epoch=-1)),
                lambda r: r.error_code, "init")
            assert init.error_code == Error.NONE
            pid, epoch = init.producer_id, init.producer_epoch

            # Transaction 1: two partitions and the group's offsets, no AddPartitionsToTxn or
            # AddOffsetsToTxn: the leader and the group coordinator add them.
            assert await produce(conn, pid, epoch, {0: b"c0", 1: b"c1"}) == {0: Error.NONE, 1: Error.NONE}
            T = M.TxnOffsetCommitRequest
            offsets = await until(lambda: conn.request(28, 5, T(
                transactional_id=tid, group_id=group, producer_id=pid, producer_epoch=epoch,
                generation_id=-1, member_id="", topics=[T.TxnOffsetCommitRequestTopic(
                    name=topic, partitions=[T.TxnOffsetCommitRequestPartition(
                        partition_index=0, committed_offset=7, committed_leader_epoch=-1)])])),
                lambda r: r.topics[0].partitions[0].error_code, "offsets")
            assert offsets.topics[0].partitions[0].error_code == Error.NONE
            described = await conn.request(65, 0, M.DescribeTransactionsRequest(transactional_ids=[tid]))
            held = {(t.topic, p) for t in described.transaction_states[0].topics for p in t.partitions}
            assert {tp for tp in held if tp[0] == topic} == {(topic, 0), (topic, 1)}
            assert any(t == "__consumer_offsets" for t, _ in held)
            committed = await end(conn, pid, epoch, True)
            assert committed.error_code == Error.NONE
            assert (committed.producer_id, committed.producer_epoch) == (pid, epoch + 1)  # the bumped epoch

            # Transaction 2, at the bumped epoch: aborted.
            assert await produce(conn, pid, epoch + 1, {0: b"a0"}) == {0: Error.NONE}
            aborted = await end(conn, pid, epoch + 1, False)
            assert aborted.error_code == Error.NONE
            assert (aborted.producer_id, aborted.producer_epoch) == (pid, epoch + 2)

            # A zombie at the first epoch is fenced, its records not written.
            assert await produce(conn, pid, epoch, {1: b"zombie"}, seq=1) == {1: Error.INVALID_PRODUCER_EPOCH}
            assert (await end(conn, pid, epoch, True)).error_code == Error.PRODUCER_FENCED
        finally:
            await conn.close()

    asyncio.run(scenario())

    c = confluent_kafka.Consumer({"bootstrap.servers": node.bootstrap, "group.id": group,
                                  "isolation.level": "read_committed", "enable.auto.commit": False,
                                  "auto.offset.reset": "earliest"})
    try:
        committed = c.committed([confluent_kafka.TopicPartition(topic, 0)], timeout=TIMEOUT_S)
        assert committed[0].offset == 7  # the transaction's offset commit, visible once committed
        c.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in (0, 1)])
        seen: list[bytes] = []
        deadline = time.monotonic() + TIMEOUT_S
        idle_until = None
        while time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is None:
                if len(seen) >= 2:
                    idle_until = idle_until or time.monotonic() + 1.0
                    if time.monotonic() > idle_until:
                        break
                continue
            if m.error() is None:
                seen.append(m.value())
                idle_until = None
    finally:
        c.close()
    assert sorted(seen) == [b"c0", b"c1"]
