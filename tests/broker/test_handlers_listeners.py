"""Every answer that names brokers names them by the listener the request came on (Kafka's
RequestContext.listenerName): Metadata's brokers and partition leaders, DescribeCluster's
brokers, FindCoordinator's host and port, and the KIP-951 leader endpoints of Produce and Fetch.

A broker without that listener is left out of the broker lists; a partition it leads answers
LISTENER_NOT_FOUND (Metadata v6+; LEADER_NOT_AVAILABLE before), a group it coordinates
COORDINATOR_NOT_AVAILABLE, and a NOT_LEADER_OR_FOLLOWER answer names it as leader with no
endpoint. A request on no listener (a call from inside the broker) is answered with the
inter-broker listener's endpoints.

The brokers here register PLAINTEXT (the inter-broker listener) and EXTERNAL, each with its own
hosts and ports (tests/broker/replica_nodes.py)."""
import asyncio

from protocol import messages as M
from protocol.errors import Error
from tests.broker.replica_nodes import (
    EXTERNAL,
    LISTENER,
    TOPIC,
    Cluster,
    Node,
    endpoint_host,
    endpoint_port,
    records,
)
from tests.groups.coordinator_node import CoordinatorNode, create_offsets_topic

BOTH = (LISTENER, EXTERNAL)


def run(coro):
    return asyncio.run(coro)


def endpoints(broker_ids, listener: str) -> list[tuple[int, str, int]]:
    return [(b, endpoint_host(b, listener), endpoint_port(b, listener)) for b in broker_ids]


def listed(brokers) -> list[tuple[int, str, int]]:
    return [(b.broker_id if "broker_id" in b._fields else b.node_id, b.host, b.port) for b in brokers]


def test_metadata_names_brokers_by_the_listener_the_request_came_on(tmp_path):
    async def main():
        cluster = Cluster(brokers=(1, 2, 3), listeners=BOTH)
        cluster.create_topic(replicas=(2, 1, 3))
        node = Node(tmp_path, 1, cluster)
        for listener in BOTH:
            response = await node.metadata(listener_name=listener)
            assert listed(response.brokers) == endpoints((1, 2, 3), listener)
            p = response.topics[0].partitions[0]
            assert (p.error_code, p.leader_id, p.offline_replicas) == (Error.NONE, 2, [])
        inside = await node.metadata()  # on no listener: the inter-broker one
        assert listed(inside.brokers) == endpoints((1, 2, 3), LISTENER)
    run(main())


def test_a_broker_without_the_requests_listener_is_left_out_and_what_it_leads_is_listener_not_found(
        tmp_path):
    """As Kafka's KRaftMetadataCache: the leader is registered but has no endpoint on the
    client's listener, a configuration error that v6+ names (LISTENER_NOT_FOUND); a leader that
    is not registered at all stays LEADER_NOT_AVAILABLE."""
    async def main():
        cluster = Cluster(brokers=(1, 2), listeners=BOTH)
        cluster.register(3, listeners=(LISTENER,))
        cluster.create_topic(replicas=(3, 1, 2))
        cluster.create_topic(replicas=(4, 1), name="unregistered", topic_id=bytes([9]) * 16)
        node = Node(tmp_path, 1, cluster)

        response = await node.metadata(listener_name=EXTERNAL)
        assert listed(response.brokers) == endpoints((1, 2), EXTERNAL)
        by_name = {t.name: t.partitions[0] for t in response.topics}
        p = by_name[TOPIC]
        assert (p.error_code, p.leader_id, p.leader_epoch) == (Error.LISTENER_NOT_FOUND, -1, 0)
        assert (p.replica_nodes, p.offline_replicas) == ([3, 1, 2], [3])
        gone = by_name["unregistered"]
        assert (gone.error_code, gone.leader_id) == (Error.LEADER_NOT_AVAILABLE, -1)

        v5 = await node.metadata(version=5, listener_name=EXTERNAL)
        old = {t.name: t.partitions[0] for t in v5.topics}
        assert (old[TOPIC].error_code, old[TOPIC].leader_id) == (Error.LEADER_NOT_AVAILABLE, -1)

        inside = await node.metadata(listener_name=LISTENER)
        assert listed(inside.brokers) == endpoints((1, 2, 3), LISTENER)
        p = {t.name: t.partitions[0] for t in inside.topics}[TOPIC]
        assert (p.error_code, p.leader_id, p.offline_replicas) == (Error.NONE, 3, [])
    run(main())


def test_describe_cluster_names_brokers_by_the_listener_the_request_came_on(tmp_path):
    async def main():
        cluster = Cluster(brokers=(1, 2), listeners=BOTH)
        cluster.register(3, listeners=(LISTENER,))
        node = Node(tmp_path, 1, cluster)
        response = await node.describe_cluster(listener_name=EXTERNAL)
        assert listed(response.brokers) == endpoints((1, 2), EXTERNAL)
        response = await node.describe_cluster(listener_name=LISTENER)
        assert listed(response.brokers) == endpoints((1, 2, 3), LISTENER)
    run(main())


def test_find_coordinator_answers_with_the_listener_the_request_came_on(tmp_path):
    async def main():
        cluster = Cluster(brokers=(1, 2, 3), listeners=BOTH)
        create_offsets_topic(cluster, replicas=(2, 1, 3))
        node = CoordinatorNode(tmp_path, 1, cluster)
        R = M.FindCoordinatorRequest
        for listener in BOTH:
            v3 = await node.call(10, 3, R(key="g", key_type=0), listener_name=listener)
            assert [(v3.error_code, v3.node_id, v3.host, v3.port)] == [
                (Error.NONE, *e) for e in endpoints((2,), listener)]
            v4 = await node.call(10, 4, R(key_type=0, coordinator_keys=["g"]), listener_name=listener)
            assert [(c.error_code, c.node_id, c.host, c.port) for c in v4.coordinators] == [
                (Error.NONE, *e) for e in endpoints((2,), listener)]

        cluster.register(2, listeners=(LISTENER,))  # the coordinator lost its EXTERNAL listener
        v3 = await node.call(10, 3, R(key="g", key_type=0), listener_name=EXTERNAL)
        assert (v3.error_code, v3.node_id, v3.host, v3.port) == (Error.COORDINATOR_NOT_AVAILABLE, -1, "", -1)
    run(main())


def _produce_request():
    R = M.ProduceRequest
    return R(transactional_id=None, acks=1, timeout_ms=1000, topic_data=[R.TopicProduceData(
        name=TOPIC, partition_data=[R.PartitionProduceData(index=0, records=memoryview(records(1)))])])


def test_a_not_leader_answer_names_the_new_leader_on_the_clients_listener(tmp_path):
    async def main():
        cluster = Cluster(brokers=(1, 2, 3), listeners=BOTH)
        cluster.create_topic(replicas=(1, 2, 3), leader=1)
        follower = Node(tmp_path, 2, cluster)
        for listener in BOTH:
            response = await follower.call(0, 10, _produce_request(), listener_name=listener)
            pr = response.responses[0].partition_responses[0]
            assert (pr.error_code, pr.current_leader.leader_id) == (Error.NOT_LEADER_OR_FOLLOWER, 1)
            assert listed(response.node_endpoints) == endpoints((1,), listener)

        cluster.register(1, listeners=(LISTENER,))  # the leader without EXTERNAL: named, no endpoint
        follower.sync()
        response = await follower.call(0, 10, _produce_request(), listener_name=EXTERNAL)
        pr = response.responses[0].partition_responses[0]
        assert (pr.error_code, pr.current_leader.leader_id) == (Error.NOT_LEADER_OR_FOLLOWER, 1)
        assert response.node_endpoints == []
    run(main())


def test_a_fetch_not_leader_answer_names_the_leader_on_the_clients_listener(tmp_path):
    async def main():
        cluster = Cluster(brokers=(1, 2, 3), listeners=BOTH)
        cluster.create_topic(replicas=(1, 2), leader=1)
        follower = Node(tmp_path, 3, cluster)  # no replica here (a follower serves v11+ consumers)
        for listener in BOTH:
            response = await follower.call(1, 16, follower.fetch_request(0), listener_name=listener)
            pd = response.responses[0].partitions[0]
            assert (pd.error_code, pd.current_leader.leader_id) == (Error.NOT_LEADER_OR_FOLLOWER, 1)
            assert listed(response.node_endpoints) == endpoints((1,), listener)
    run(main())
