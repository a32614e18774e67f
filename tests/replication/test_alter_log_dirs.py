"""AlterReplicaLogDirs (broker/handlers/admin.py over ReplicaManager.alter_replica_log_dirs):
Kafka's answers for a dir not among log.dirs, a partition not here, and the dir the replica is
in already; advertised once served."""
import asyncio
import os

from broker.handlers.admin import AdminApis
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
