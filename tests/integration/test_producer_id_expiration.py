"""producer.id.expiration.ms on a real node: the broker's periodic check
(producer.id.expiration.check.interval.ms) forgets an idle idempotent producer: its
out-of-sequence batch, refused as OUT_OF_ORDER_SEQUENCE_NUMBER while the broker remembers it,
gets UNKNOWN_PRODUCER_ID once forgotten."""
import asyncio
import time

import pytest

from ext.batch import build_batch
from protocol import messages as M
from protocol.client import KafkaConnection
from protocol.errors import Error

from .cluster import StromNode

pytestmark = pytest.mark.timeout(120)
EXPIRATION_MS = 1000


async def _produce(conn, pid: int, seq: int, ts: int):
    R = M.ProduceRequest
    data = build_batch([(None, b"v", [], ts)], producer_id=pid, producer_epoch=0, base_sequence=seq)
    response = await conn.request(0, 9, R(acks=-1, timeout_ms=5000, topic_data=[R.TopicProduceData(
        name="idle", partition_data=[R.PartitionProduceData(index=0, records=data)])]))
    return response.responses[0].partition_responses[0]


def test_an_idle_producer_is_forgotten_after_producer_id_expiration_ms(tmp_path):
    node = StromNode(base_dir=str(tmp_path), extra={"producer.id.expiration.ms": EXPIRATION_MS,
                                                    "producer.id.expiration.check.interval.ms": 100})

    async def body():
        conn = KafkaConnection("127.0.0.1", node.broker_port)
        await conn.connect()
        try:
            R = M.CreateTopicsRequest
            created = await conn.request(19, 7, R(topics=[R.CreatableTopic(
                name="idle", num_partitions=1, replication_factor=1)], timeout_ms=10000))
            assert created.topics[0].error_code == Error.NONE
            init = await conn.request(22, 4, M.InitProducerIdRequest(transactional_id=None,
                                                                      transaction_timeout_ms=60000))
            pid, ts = init.producer_id, int(time.time() * 1000)
            assert (await _produce(conn, pid, 0, ts)).error_code == Error.NONE
            assert (await _produce(conn, pid, 5, ts)).error_code == Error.OUT_OF_ORDER_SEQUENCE_NUMBER
            async with asyncio.timeout(15):
                while (answer := await _produce(conn, pid, 5, ts)).error_code != Error.UNKNOWN_PRODUCER_ID:
                    assert answer.error_code == Error.OUT_OF_ORDER_SEQUENCE_NUMBER
                    await asyncio.sleep(0.05)
            forgotten_after = int(time.time() * 1000) - ts
            assert forgotten_after >= EXPIRATION_MS
        finally:
            await conn.close()

    node.start()
    try:
        asyncio.run(body())
        assert node.stop() == 0
    finally:
        node.close()
