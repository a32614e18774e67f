"""The ReplicaManager's counts behind the broker's metrics: MessagesInPerSec and BytesInPerSec as
Kafka's appendToLocalLog marks them (records and batch bytes appended as leader, a duplicate
not), BytesOutPerSec for a consumer's read, IsrShrinksPerSec and IsrExpandsPerSec when an ISR
change is committed."""
import asyncio

from protocol.errors import Error
from protocol.metrics import BrokerTopicStats, Registry
from replication.isr import LeaderAndIsr
from tests.broker.replica_nodes import TOPIC, TOPIC_ID, Cluster, Node, records, settle


def counted(tmp_path, node_id: int, cluster: Cluster, **kw) -> tuple[Node, BrokerTopicStats]:
    node = Node(tmp_path, node_id, cluster, **kw)
    stats = node.replicas.topic_stats = BrokerTopicStats(Registry())
    return node, stats


def test_messages_in_counts_records_appended_as_leader_and_bytes_in_the_batch_bytes(tmp_path):
    async def main():
        cluster = Cluster(brokers=(1,))
        cluster.create_topic(replicas=(1,))
        node, stats = counted(tmp_path, 1, cluster)
        assert (await node.produce(7, acks=1)).error_code == Error.NONE
        assert (await node.produce(3, acks=1)).error_code == Error.NONE
        assert stats.topics[TOPIC][:2] == [10, len(records(7)) + len(records(3))]
        part, _ = await node.fetch(0)
        assert stats.topics[TOPIC][2] == len(records(7)) + len(records(3)) == part.records.size
    asyncio.run(main())


def test_a_duplicate_batch_of_an_idempotent_producer_is_not_counted_again(tmp_path):
    async def main():
        cluster = Cluster(brokers=(1,))
        cluster.create_topic(replicas=(1,))
        node, stats = counted(tmp_path, 1, cluster)
        for _ in range(2):
            response = await node.produce(5, acks=1, producer_id=9, producer_epoch=0, base_sequence=0)
            assert response.error_code == Error.NONE
        assert stats.topics[TOPIC][0] == 5
    asyncio.run(main())


def test_isr_shrinks_and_expands_count_the_changes_committed(tmp_path):
    async def main():
        cluster = Cluster()
        cluster.create_topic(replicas=(1, 2, 3))
        node, _ = counted(tmp_path, 1, cluster, replica_lag_time_max_ms=1000)
        await node.produce(10, acks=1)
        await settle()
        node.clock.now += 1001
        await node.replica_fetch(2, 10, last_fetched_epoch=0)  # replica 3 never fetches
        node.replicas.maybe_shrink_isr()
        (_, _, sent), = node.alter.submitted
        assert (node.replicas.isr_shrinks, node.replicas.isr_expands) == (0, 0)  # proposed only
        node.replicas.handle_alter_partition_result(
            TOPIC_ID, 0, sent, Error.NONE, LeaderAndIsr.build(1, 0, [(1, -1), (2, -1)], 0, 1))
        assert (node.replicas.isr_shrinks, node.replicas.isr_expands) == (1, 0)
        await node.replica_fetch(3, 10, last_fetched_epoch=0)
        sent = node.alter.submitted[-1][2]
        assert sent.isr == (1, 2, 3)
        node.replicas.handle_alter_partition_result(
            TOPIC_ID, 0, sent, Error.NONE, LeaderAndIsr.build(1, 0, [(1, -1), (2, -1), (3, -1)], 0, 2))
        assert (node.replicas.isr_shrinks, node.replicas.isr_expands) == (1, 1)
    asyncio.run(main())
