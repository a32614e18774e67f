"""DescribeLogDirs (broker/handlers/admin.py over ReplicaManager.describe_log_dirs): each log dir
of the broker with the size of each partition's log and its offset lag, as Kafka's
ReplicaManager.describeLogDirs; an offline dir answers KAFKA_STORAGE_ERROR and nothing else."""
import asyncio
import os

from broker.handlers.admin import AdminApis
from protocol import messages as M
from protocol.context import RequestContext
from protocol.dispatch import resolve
from protocol.errors import Error
from protocol.headers import RequestHeader
from tests.broker.replica_nodes import TOPIC, Cluster, Node


def run(coro):
    return asyncio.run(coro)


async def describe_log_dirs(node: Node, topics=None, version: int = 4):
    handlers = AdminApis(node_id=node.node_id, config=None, image=None, controller=None,
                         topic_log_config=None, replicas=node.replicas)
    api = {a.key: a for a in handlers.apis()}[35]
    R = M.DescribeLogDirsRequest
    request = R(topics=None if topics is None else [
        R.DescribableLogDirTopic(topic=t, partitions=list(ps)) for t, ps in topics.items()])
    header = RequestHeader(35, version, 1, "test", 2, None)
    return await resolve(await api.fn(RequestContext(header), request))


def test_describe_log_dirs_gives_each_partitions_size_and_lag_and_the_dirs_space(tmp_path):
    async def main():
        cluster = Cluster(brokers=(1,))
        cluster.create_topic(replicas=(1,), partitions=2)
        node = Node(tmp_path, 1, cluster)
        assert (await node.produce(10, acks=1)).error_code == Error.NONE
        response = await describe_log_dirs(node)
        assert response.error_code == Error.NONE
        [result] = response.results
        assert (result.error_code, result.log_dir) == (Error.NONE, os.path.abspath(node.dir))
        assert result.total_bytes > 0 and 0 <= result.usable_bytes <= result.total_bytes
        [topic] = [t for t in result.topics if t.name == TOPIC]
        sizes = {p.partition_index: (p.partition_size, p.offset_lag, p.is_future_key)
                 for p in topic.partitions}
        assert sizes[0] == (node.log(0).size_in_bytes, 0, False) and sizes[0][0] > 0
        assert sizes[1] == (0, 0, False)
        only = await describe_log_dirs(node, {TOPIC: [1], "nope": [0]})
        named = [(t.name, [p.partition_index for p in t.partitions]) for t in only.results[0].topics]
        assert named == [(TOPIC, [1])], "only what was asked for, and no unknown topic"
    run(main())


def test_an_offline_log_dir_answers_kafka_storage_error(tmp_path):
    async def main():
        cluster = Cluster(brokers=(1,))
        cluster.create_topic(replicas=(1,))
        node = Node(tmp_path, 1, cluster)
        log_dir = os.path.abspath(node.dir)
        node.replicas.failure_channel.maybe_add_offline_log_dir(log_dir, "a test", OSError(5, "EIO"))
        [result] = (await describe_log_dirs(node)).results
        assert (result.log_dir, result.error_code, result.topics) == (log_dir, Error.KAFKA_STORAGE_ERROR, [])
    run(main())
