"""Metadata lists leader, leader epoch, replicas, ISR and offline replicas
(broker/handlers/metadata.py)."""
import asyncio

from protocol.errors import Error
from tests.broker.replica_nodes import Cluster, Node


def run(coro):
    return asyncio.run(coro)


def test_metadata_lists_leader_epoch_replicas_isr_and_offline_replicas(tmp_path):
    async def main():
        cluster = Cluster(brokers=(1, 2, 3))
        cluster.create_topic(replicas=(1, 2, 3))
        cluster.fence(3)
        cluster.change(isr=(1, 2))
        node = Node(tmp_path, 1, cluster)
        response = await node.metadata()
        p = response.topics[0].partitions[0]
        assert (p.error_code, p.leader_id, p.leader_epoch) == (Error.NONE, 1, 0)
        assert (p.replica_nodes, p.isr_nodes, p.offline_replicas) == ([1, 2, 3], [1, 2], [3])
        assert sorted(b.node_id for b in response.brokers) == [1, 2]
    run(main())


def test_a_partition_without_a_leader_answers_leader_not_available(tmp_path):
    async def main():
        cluster = Cluster(brokers=(1, 2))
        cluster.create_topic(replicas=(1, 2), partitions=2)
        cluster.change(partition=1, leader=-1, isr=(2,))
        node = Node(tmp_path, 1, cluster)
        response = await node.metadata()
        led, offline = response.topics[0].partitions
        assert (led.error_code, led.leader_id) == (Error.NONE, 1)
        assert offline.error_code == Error.LEADER_NOT_AVAILABLE
        assert (offline.leader_id, offline.leader_epoch) == (-1, 1)
    run(main())


def test_a_replica_on_an_unregistered_broker_is_offline(tmp_path):
    async def main():
        cluster = Cluster(brokers=(1, 2))
        cluster.create_topic(replicas=(1, 2, 4))
        node = Node(tmp_path, 1, cluster)
        p = (await node.metadata()).topics[0].partitions[0]
        assert p.offline_replicas == [4]
    run(main())
