"""AlterReplicaLogDirs (broker/handlers/admin.py over ReplicaManager.alter_replica_log_dirs):
Kafka's answers for a dir not among log.dirs, a partition not here, and the dir the replica is
in already; advertised once served."""
import asyncio
import os

from broker.handlers.admin import AdminApis
from engine.manager import format_log_dir
from protocol import messages as M
from protocol.context import RequestContext
from protocol.dispatch import resolve
from protocol.errors import Error
from protocol.headers import RequestHeader
from tests.broker.replica_nodes import TOPIC, Cluster, Node


async def alter(node: Node, path: str, topics: dict, version: int = 2):
    apis = {a.key: a for a in AdminApis(node_id=node.node_id, config=None, image=None, controller=None,
                                        topic_log_config=None, replicas=node.replicas).apis()}
    assert (apis[34].min_version, apis[34].max_version) == (1, 2)
    R = M.AlterReplicaLogDirsRequest
    request = R(dirs=[R.AlterReplicaLogDir(path=path, topics=[
        R.AlterReplicaLogDir.AlterReplicaLogDirTopic(name=t, partitions=ps) for t, ps in topics.items()])])
    response = await resolve(await apis[34].fn(RequestContext(RequestHeader(34, version, 1, "t", 2, None)),
                                               request))
    return {(t.topic_name, p.partition_index): p.error_code for t in response.results for p in t.partitions}


def test_alter_replica_log_dirs_answers_as_kafka_for_unknown_dirs_missing_replicas_and_the_same_dir(tmp_path):
    async def main():
        cluster = Cluster(brokers=(1,))
        cluster.create_topic(replicas=(1,))
        node = Node(tmp_path, 1, cluster)
        assert (await node.produce(5, acks=1)).error_code == Error.NONE
        here = os.path.abspath(node.dir)
        elsewhere = str(tmp_path / "elsewhere")
        assert await alter(node, elsewhere, {TOPIC: [0]}) == {(TOPIC, 0): Error.LOG_DIR_NOT_FOUND}
        assert await alter(node, here, {"absent": [0]}) == {("absent", 0): Error.REPLICA_NOT_AVAILABLE}
        assert await alter(node, here, {TOPIC: [0]}) == {(TOPIC, 0): Error.NONE}
        assert node.logs.future_logs == {}
    asyncio.run(main())


async def describe(node: Node):
    apis = {a.key: a for a in AdminApis(node_id=node.node_id, config=None, image=None, controller=None,
                                        topic_log_config=None, replicas=node.replicas).apis()}
    response = await resolve(await apis[35].fn(RequestContext(RequestHeader(35, 4, 1, "t", 2, None)),
                                               M.DescribeLogDirsRequest(topics=None)))
    return {(r.log_dir, t.name, p.partition_index): (p.is_future_key, p.offset_lag)
            for r in response.results for t in r.topics for p in t.partitions}


def test_a_leader_moved_to_another_log_dir_under_produce_keeps_every_record(tmp_path):
    """The future replica shows in DescribeLogDirs (isFutureKey, its lag) while the move is held
    at a zero replica.alter.log.dirs.io.max.bytes.per.second; once let go, the copy catches up
    with the appends made meanwhile and the leader serves from the new dir."""
    async def main():
        cluster = Cluster(brokers=(1,))
        cluster.create_topic(replicas=(1,))
        node = Node(tmp_path, 1, cluster)
        other = str(tmp_path / "broker-1-b")
        format_log_dir(other, "test-cluster", 1)
        node.logs.log_dirs.append(other)  # a second log dir (JBOD)
        assert (await node.produce(10, acks=1)).error_code == Error.NONE
        node.replicas._alter_log_dirs_rate = 0.0
        assert await alter(node, other, {TOPIC: [0]}) == {(TOPIC, 0): Error.NONE}
        here = os.path.abspath(node.dir)
        dirs = await describe(node)
        assert dirs[(here, TOPIC, 0)] == (False, 0)
        assert dirs[(other, TOPIC, 0)] == (True, 10)
        node.replicas._alter_log_dirs_rate = None
        produced = 10
        for _ in range(2000):
            if node.log().parent_dir == other:
                break
            if produced < 200:
                assert (await node.produce(10, acks=1)).error_code == Error.NONE
                produced += 10
            await asyncio.sleep(0.01)
        assert node.log().parent_dir == other and node.partition().log is node.log()
        assert (await node.produce(10, acks=1)).error_code == Error.NONE
        produced += 10
        assert node.log().log_end_offset == produced
        fetched, _ = await node.fetch(0)
        assert (fetched.error_code, fetched.high_watermark) == (Error.NONE, produced) and fetched.records
        assert not any(future for future, _ in (await describe(node)).values())
        assert not os.path.exists(os.path.join(here, f"{TOPIC}-0"))
        node.logs.shutdown()
    asyncio.run(main())
