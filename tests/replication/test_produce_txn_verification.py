"""KIP-890's verification of a transactional produce (broker/handlers/produce.py over the
ReplicaManager and Log): the partition's VerificationGuard is taken before the transaction
coordinator is asked, so a marker of the producer that lands while it is asked voids the
verification and the late batch is refused, as Kafka's UnifiedLog does."""
import asyncio

from engine.control import CONTROL_ABORT, build_end_txn_marker_batch
from engine.log import ORIGIN_COORDINATOR
from ext.batch import build_batch
from protocol import messages as M
from protocol.errors import Error
from tests.broker.replica_nodes import BASE_TS, TOPIC, TOPIC_ID, Cluster, Node, settle

PID = 7


class _HeldCoordinator:
    """``broker.transactions`` as the produce path asks it: every partition is in the
    transaction, once ``hold`` is set."""

    verification_enabled = True

    def __init__(self):
        self.hold = asyncio.Event()
        self.asked = 0

    async def verify(self, transactional_id, producer_id, producer_epoch, partitions):
        self.asked += 1
        await self.hold.wait()
        return dict.fromkeys(partitions, Error.NONE)


async def _produce(node: Node, seq: int):
    R = M.ProduceRequest
    batch = build_batch([(b"k", b"v%d" % i, [], BASE_TS + i) for i in range(2)], producer_id=PID,
                        producer_epoch=0, base_sequence=seq, is_transactional=True)
    request = R(transactional_id="tx", acks=1, timeout_ms=5000, topic_data=[R.TopicProduceData(
        name=TOPIC, topic_id=TOPIC_ID, partition_data=[R.PartitionProduceData(
            index=0, records=memoryview(bytearray(batch)))])])
    response = await node.call(0, 11, request)
    return response.responses[0].partition_responses[0]


def test_a_marker_landing_while_a_produce_is_verified_refuses_the_batch_and_the_lso_moves_on(tmp_path):
    async def main():
        cluster = Cluster(brokers=(1,))
        cluster.create_topic(replicas=(1,))
        node = Node(tmp_path, 1, cluster)
        node.broker.transactions = txns = _HeldCoordinator()
        produce = asyncio.ensure_future(_produce(node, 0))
        await settle()
        assert txns.asked == 1 and not produce.done()
        # The coordinator's timeout abort of the producer's transaction lands meanwhile.
        marker = bytearray(build_end_txn_marker_batch(CONTROL_ABORT, PID, 0, 0, BASE_TS))
        assert node.replicas.append_local(TOPIC, 0, marker, origin=ORIGIN_COORDINATOR).error == Error.NONE
        log = node.log()
        end = log.log_end_offset
        txns.hold.set()
        pr = await asyncio.wait_for(produce, 1)
        assert pr.error_code == Error.INVALID_TXN_STATE
        assert log.log_end_offset == end and not log.producer_state.ongoing
        assert log.last_stable_offset == log.high_watermark == end
        # Verified with no marker in between: appended, its transaction open.
        txns.hold.set()
        pr = await asyncio.wait_for(_produce(node, 0), 1)
        assert (pr.error_code, pr.base_offset) == (Error.NONE, end)
        assert log.producer_state.ongoing == {PID: end}
    asyncio.run(main())
