"""A broker's group coordinator without sockets, for tests of its replicated writes.

Each CoordinatorNode is a Node of tests/broker/replica_nodes.py (a ReplicaManager over
tmp-dir logs, its metadata image changed by replaying records) with the group coordinator's
shell (broker/groups/runtime.py) and the group request handlers on top. The test plays the
followers of ``__consumer_offsets`` by fetching from the leader itself (``replica_fetch``),
which is what moves the high watermark.
"""
from __future__ import annotations

import asyncio
import uuid
from types import SimpleNamespace

from broker.groups.runtime import GroupCoordinatorRuntime
from broker.groups.storage import OFFSETS_TOPIC
from broker.handlers.groups import GroupApis
from protocol import messages as M
from protocol.context import NO_SESSION, RequestContext, Session
from protocol.headers import RequestHeader
from tests.broker.replica_nodes import LISTENER, Node, broker_epoch

OFFSETS_ID = uuid.UUID("0c0ffee0-3a55-4d5e-9d43-0a1b2c3d4e5f").bytes


def create_offsets_topic(cluster, replicas=(1, 2, 3), isr=None, configs=None) -> None:
    """``__consumer_offsets``, and the topic ``t`` (2 partitions) whose offsets the tests
    commit: OffsetCommit answers UNKNOWN_TOPIC_OR_PARTITION for a partition the image lacks."""
    cluster.create_topic(replicas=replicas, isr=isr, name=OFFSETS_TOPIC, topic_id=OFFSETS_ID,
                         configs=configs)
    cluster.create_topic(replicas=replicas, partitions=2)


class _MetadataFollower:
    """What the shell asks of the broker's metadata follower: no controller here."""

    async def wait_for_change(self, timeout: float) -> None:
        await asyncio.sleep(timeout)

    async def forward(self, api_key, version, request):
        raise ConnectionError("no controller in this test")


class CoordinatorNode:
    def __init__(self, tmp_path, node_id: int, cluster, commit_timeout_ms: int = 5000, **properties):
        """``properties``: further broker properties, by Kafka name."""
        self.node = Node(tmp_path, node_id, cluster)
        if "group.version" not in cluster.image.features:  # as a new cluster bootstraps it
            cluster.replay(M.FeatureLevelRecord(name="group.version", feature_level=1))
        config = {
            "group.initial.rebalance.delay.ms": 0, "group.min.session.timeout.ms": 6000,
            "group.max.session.timeout.ms": 1800000, "group.max.size": 100,
            "offsets.commit.timeout.ms": commit_timeout_ms, "offsets.topic.num.partitions": 1,
            "offsets.topic.replication.factor": 3, "offsets.topic.segment.bytes": 1 << 20,
            **properties,
        }
        self.broker = SimpleNamespace(config=config, image=cluster.image, node_id=node_id,
                                      replicas=self.node.replicas, follower=_MetadataFollower(),
                                      listener_name=LISTENER)
        self.runtime = self.broker.groups = GroupCoordinatorRuntime(self.broker)
        # no transaction coordinator runs here unless a test sets handlers.transactions
        self.handlers = GroupApis(self.runtime, None, lambda: self.broker.image, LISTENER)
        self.apis = {api.key: api for api in self.handlers.apis()}

    @property
    def core(self):
        return self.runtime.core

    def log(self):
        return self.node.logs.get_log(OFFSETS_TOPIC, 0)

    async def sync(self) -> None:
        """The metadata changed: the ReplicaManager applies it, then the coordinator loads
        and unloads what it leads, as the broker does."""
        self.node.sync()
        self.runtime._reconcile()
        await asyncio.gather(*self.runtime._loads.values())

    async def replica_fetch(self, replica_id: int, fetch_offset: int, leader_epoch: int = 0,
                            last_fetched_epoch: int = 0):
        """A follower's fetch of ``__consumer_offsets-0`` at ``fetch_offset``: it now holds
        everything below it, which may move the high watermark."""
        result = self.node.replicas.read_for_follower(
            OFFSETS_TOPIC, 0, replica_id, broker_epoch(replica_id), leader_epoch, fetch_offset,
            last_fetched_epoch, 0, 1 << 20)
        assert result.error == 0, result
        await settle()
        return result

    async def call(self, api_key: int, version: int, request, listener_name: str | None = None,
                   session: Session = NO_SESSION):
        """The handler's answer to a request that came on ``listener_name`` (None: no listener)
        over a connection of ``session`` (its principal)."""
        header = RequestHeader(api_key, version, 1, "test", 2 if version >= 9 else 1, listener_name)
        return await self.apis[api_key].fn(RequestContext(header, session), request)

    # ---- requests ---------------------------------------------------------------------------

    async def commit(self, offsets: dict[int, int], group: str = "g", topic: str = "t",
                     generation: int = -1, member_id: str = "", version: int = 8) -> list[int]:
        """OffsetCommit of {partition: offset}: the error per partition."""
        R = M.OffsetCommitRequest
        request = R(group_id=group, generation_id_or_member_epoch=generation, member_id=member_id,
                    group_instance_id=None, topics=[R.OffsetCommitRequestTopic(name=topic, partitions=[
                        R.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
                            partition_index=p, committed_offset=o, committed_metadata="")
                        for p, o in offsets.items()])])
        response = await self.call(8, version, request)
        return [p.error_code for p in response.topics[0].partitions]

    async def fetch_offsets(self, partitions=(0,), group: str = "g", topic: str = "t",
                            require_stable: bool = False) -> tuple[int, dict[int, int]]:
        """OffsetFetch v7: (error, {partition: committed offset or -1})."""
        R = M.OffsetFetchRequest
        request = R(group_id=group, require_stable=require_stable, topics=[
            R.OffsetFetchRequestTopic(name=topic, partition_indexes=list(partitions))])
        response = await self.call(9, 7, request)
        return response.error_code, {p.partition_index: p.committed_offset
                                     for t in response.topics for p in t.partitions}

    async def join(self, group: str = "g", member_id: str = "", version: int = 3):
        R = M.JoinGroupRequest
        request = R(group_id=group, session_timeout_ms=10000, rebalance_timeout_ms=10000,
                    member_id=member_id, group_instance_id=None, protocol_type="consumer",
                    protocols=[R.JoinGroupRequestProtocol(name="range", metadata=b"sub")])
        return await self.call(11, version, request)

    async def sync_group(self, member_id: str, generation: int, assignment: bytes | None = None,
                         group: str = "g"):
        R = M.SyncGroupRequest
        assignments = [] if assignment is None else [
            R.SyncGroupRequestAssignment(member_id=member_id, assignment=assignment)]
        request = R(group_id=group, generation_id=generation, member_id=member_id,
                    group_instance_id=None, assignments=assignments)
        return await self.call(14, 3, request)

    async def heartbeat(self, member_id: str, generation: int, group: str = "g") -> int:
        request = M.HeartbeatRequest(group_id=group, generation_id=generation, member_id=member_id,
                                     group_instance_id=None)
        return (await self.call(12, 3, request)).error_code

    async def describe(self, group: str = "g"):
        """DescribeGroups v5 of one group: its DescribedGroup."""
        request = M.DescribeGroupsRequest(groups=[group], include_authorized_operations=False)
        response = await self.call(15, 5, request)
        [described] = response.groups
        return described

    async def list_groups(self):
        """ListGroups v4: (error, [(group id, state)])."""
        response = await self.call(16, 4, M.ListGroupsRequest(states_filter=[]))
        return response.error_code, [(g.group_id, g.group_state) for g in response.groups]


async def settle() -> None:
    """Let the coordinator's tasks and callbacks run up to their next wait."""
    for _ in range(20):
        await asyncio.sleep(0)
