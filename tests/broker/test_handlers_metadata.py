"""Metadata lists leader, leader epoch, replicas, ISR and offline replicas
(broker/handlers/metadata.py)."""
import asyncio

from protocol import messages as M
from protocol.dispatch import resolve
from protocol.errors import Error
from tests.broker.replica_nodes import TOPIC, TOPIC_ID, Cluster, Node, context


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


def test_a_leader_whose_listener_refused_our_fetcher_is_reported_unavailable(tmp_path):
    """Before the controller fences a killed leader, a broker whose replica fetcher found the
    leader's port refused answers LEADER_NOT_AVAILABLE for what it leads, so clients look for
    the new leader at once; partitions it leads itself and other leaders are unaffected."""
    async def main():
        cluster = Cluster(brokers=(1, 2, 3))
        cluster.create_topic(replicas=(2, 1, 3), partitions=1)
        cluster.create_topic(replicas=(1, 2, 3), partitions=1, name="mine", topic_id=bytes([9]) * 16)
        node = Node(tmp_path, 1, cluster)
        node.fetchers.refused.add(2)
        response = await node.metadata()
        by_name = {t.name: t.partitions[0] for t in response.topics}
        assert (by_name["mine"].error_code, by_name["mine"].leader_id) == (Error.NONE, 1)
        gone = [p for name, p in by_name.items() if name != "mine"][0]
        assert (gone.error_code, gone.leader_id) == (Error.LEADER_NOT_AVAILABLE, -1)
        node.fetchers.refused.clear()  # reached again (or the refusal is old)
        again = {t.name: t.partitions[0] for t in (await node.metadata()).topics}
        assert all(p.error_code == Error.NONE for p in again.values())
    run(main())


def test_an_answer_naming_a_gone_leader_waits_for_the_metadata_to_move_its_leadership(tmp_path):
    """A client asks for metadata the moment its connection to a killed leader dies, before
    the controller has fenced it: the answer waits for the next metadata image and names the
    new leader, instead of the dead one (librdkafka would wait a second to ask again)."""
    async def main():
        cluster = Cluster(brokers=(1, 2, 3))
        cluster.create_topic(replicas=(2, 1, 3), partitions=1)
        node = Node(tmp_path, 1, cluster)
        node.fetchers.refused.add(2)
        answer = asyncio.ensure_future(node.metadata())
        await asyncio.sleep(0.05)
        assert not answer.done(), "answered while the metadata still names a gone leader"
        cluster.fence(2)
        cluster.change(leader=1, isr=(1, 3))
        node.sync()
        p = (await asyncio.wait_for(answer, 1)).topics[0].partitions[0]
        assert (p.error_code, p.leader_id, p.leader_epoch) == (Error.NONE, 1, 1)
    run(main())


def test_an_answer_naming_a_gone_leader_waits_no_longer_than_the_hold(tmp_path):
    """Unfenced after GONE_LEADER_HOLD_S (a partition, not a crash): the answer goes out with
    LEADER_NOT_AVAILABLE for what the gone leader leads."""
    from broker.handlers.metadata import GONE_LEADER_HOLD_S

    async def main():
        cluster = Cluster(brokers=(1, 2, 3))
        cluster.create_topic(replicas=(2, 1, 3), partitions=1)
        node = Node(tmp_path, 1, cluster)
        node.fetchers.refused.add(2)
        loop = asyncio.get_running_loop()
        started = loop.time()
        p = (await asyncio.wait_for(node.metadata(), GONE_LEADER_HOLD_S + 1)).topics[0].partitions[0]
        assert loop.time() - started >= GONE_LEADER_HOLD_S * 0.9
        assert (p.error_code, p.leader_id) == (Error.LEADER_NOT_AVAILABLE, -1)
    run(main())


def test_describe_topic_partitions_adds_the_elr_and_last_known_elr_to_the_metadata_view(tmp_path):
    async def main():
        cluster = Cluster(brokers=(1, 2, 3))
        cluster.create_topic(replicas=(1, 2, 3))
        cluster.fence(3)
        cluster.replay(M.PartitionChangeRecord(partition_id=0, topic_id=TOPIC_ID, isr=[1], leader=-2,
                                               eligible_leader_replicas=[2], last_known_elr=[3]))
        node = Node(tmp_path, 1, cluster)
        response = await node.describe_topic_partitions([TOPIC])
        [t] = response.topics
        assert (t.error_code, t.name, t.topic_id, t.is_internal) == (Error.NONE, TOPIC, TOPIC_ID, False)
        [p] = t.partitions
        assert (p.error_code, p.partition_index, p.leader_id, p.leader_epoch) == (Error.NONE, 0, 1, 0)
        assert (p.replica_nodes, p.isr_nodes, p.offline_replicas) == ([1, 2, 3], [1], [3])
        assert (p.eligible_leader_replicas, p.last_known_elr) == ([2], [3])
        assert response.next_cursor is None
    run(main())


def test_describe_topic_partitions_pages_by_the_partition_limit_with_a_cursor(tmp_path):
    async def main():
        cluster = Cluster(brokers=(1,))
        cluster.create_topic(replicas=(1,), partitions=3, name="a", topic_id=bytes([1]) * 16)
        cluster.create_topic(replicas=(1,), partitions=2, name="b", topic_id=bytes([2]) * 16)
        node = Node(tmp_path, 1, cluster)
        seen, cursor = [], None
        while True:
            response = await node.describe_topic_partitions(limit=2, cursor=cursor)
            seen += [(t.name, p.partition_index) for t in response.topics for p in t.partitions]
            if response.next_cursor is None:
                break
            cursor = (response.next_cursor.topic_name, response.next_cursor.partition_index)
        assert seen == [("a", 0), ("a", 1), ("a", 2), ("b", 0), ("b", 1)]
        first = await node.describe_topic_partitions(limit=2)
        assert (first.next_cursor.topic_name, first.next_cursor.partition_index) == ("a", 2)
        after_a = await node.describe_topic_partitions(limit=3)
        assert (after_a.next_cursor.topic_name, after_a.next_cursor.partition_index) == ("b", 0), \
            "a topic filled exactly: the cursor points at the start of the next"
    run(main())


def test_describe_topic_partitions_names_unknown_topics_and_refuses_a_cursor_outside_the_list(tmp_path):
    async def main():
        cluster = Cluster(brokers=(1,))
        cluster.create_topic(replicas=(1,))
        node = Node(tmp_path, 1, cluster)
        response = await node.describe_topic_partitions([TOPIC, "nope", "bad topic!"])
        codes = {t.name: t.error_code for t in response.topics}
        assert codes == {TOPIC: Error.NONE, "nope": Error.UNKNOWN_TOPIC_OR_PARTITION,
                         "bad topic!": Error.INVALID_TOPIC_EXCEPTION}
        everything = await node.describe_topic_partitions()
        assert [t.name for t in everything.topics] == [TOPIC], "listing all topics names no unknown one"
        refused = await node.describe_topic_partitions([TOPIC], cursor=("other", 0))
        assert [(t.name, t.error_code) for t in refused.topics] == [(TOPIC, Error.INVALID_REQUEST)]
        negative = await node.describe_topic_partitions([TOPIC], cursor=(TOPIC, -1))
        assert [t.error_code for t in negative.topics] == [Error.INVALID_REQUEST]
    run(main())


# Kafka's bit sets with no authorizer: every operation the resource type supports
# (AclOperation codes: READ 3, WRITE 4, CREATE 5, DELETE 6, ALTER 7, DESCRIBE 8,
# CLUSTER_ACTION 9, DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11, IDEMPOTENT_WRITE 12).
TOPIC_OPERATIONS = sum(1 << op for op in (3, 4, 5, 6, 7, 8, 10, 11))  # 3576
CLUSTER_OPERATIONS = sum(1 << op for op in (5, 7, 8, 9, 10, 11, 12))  # 8096
NOT_REQUESTED = -2**31


async def metadata_asking(node, version: int, topics=None, cluster_ops: bool = False,
                          topic_ops: bool = False):
    api = {a.key: a for a in node.metadata_handlers().apis()}[3]
    R = M.MetadataRequest
    request = R(topics=topics, allow_auto_topic_creation=False,
                include_cluster_authorized_operations=cluster_ops,
                include_topic_authorized_operations=topic_ops)
    return await resolve(await api.fn(context(3, version), request))


def test_metadata_v8_to_v10_answers_the_authorized_operations_asked_for(tmp_path):
    """Kafka's handleTopicMetadataRequest: with no authorizer, every operation a topic (and
    the cluster) supports, each only when its include_*_authorized_operations is set."""
    async def main():
        cluster = Cluster(brokers=(1,))
        cluster.create_topic(replicas=(1,))
        node = Node(tmp_path, 1, cluster)
        for version in (8, 10):
            both = await metadata_asking(node, version, cluster_ops=True, topic_ops=True)
            assert both.cluster_authorized_operations == CLUSTER_OPERATIONS
            assert [t.topic_authorized_operations for t in both.topics] == [TOPIC_OPERATIONS]
            topics_only = await metadata_asking(node, version, topic_ops=True)
            assert topics_only.cluster_authorized_operations == NOT_REQUESTED
            assert [t.topic_authorized_operations for t in topics_only.topics] == [TOPIC_OPERATIONS]
            neither = await metadata_asking(node, version)
            assert neither.cluster_authorized_operations == NOT_REQUESTED
            assert [t.topic_authorized_operations for t in neither.topics] == [NOT_REQUESTED]
    run(main())


def test_metadata_topic_authorized_operations_cover_a_named_topic_with_an_error_not_an_unknown_id(tmp_path):
    """A topic asked for by name is described (if allowed) whether it exists or not, so it
    carries its operations with UNKNOWN_TOPIC_OR_PARTITION; an unknown topic id names no
    resource and keeps the default. From v11 the cluster's operations are DescribeCluster's."""
    async def main():
        cluster = Cluster(brokers=(1,))
        cluster.create_topic(replicas=(1,))
        node = Node(tmp_path, 1, cluster)
        R = M.MetadataRequest
        topics = [R.MetadataRequestTopic(name=TOPIC), R.MetadataRequestTopic(name="missing"),
                  R.MetadataRequestTopic(name=None, topic_id=bytes([7]) * 16)]
        answer = await metadata_asking(node, 12, topics=topics, topic_ops=True)
        assert [(t.error_code, t.topic_authorized_operations) for t in answer.topics] == [
            (Error.NONE, TOPIC_OPERATIONS), (Error.UNKNOWN_TOPIC_OR_PARTITION, TOPIC_OPERATIONS),
            (Error.UNKNOWN_TOPIC_ID, NOT_REQUESTED)]
        assert answer.topics[0].topic_id == TOPIC_ID
    run(main())


def test_describe_cluster_answers_the_cluster_authorized_operations_when_asked(tmp_path):
    async def main():
        node = Node(tmp_path, 1, Cluster(brokers=(1,)))
        api = {a.key: a for a in node.metadata_handlers().apis()}[60]
        for asked, expected in ((True, CLUSTER_OPERATIONS), (False, NOT_REQUESTED)):
            for version in (0, 1):
                answer = await resolve(await api.fn(context(60, version), M.DescribeClusterRequest(
                    include_cluster_authorized_operations=asked)))
                assert (answer.error_code, answer.cluster_authorized_operations) == (Error.NONE, expected)
    run(main())
