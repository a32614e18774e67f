"""The group handlers (broker/handlers/groups.py) over the coordinator's shell and a real
metadata image: what KafkaApis checks before the coordinator (partitions the image lacks),
OffsetDelete, DescribeGroups' authorized operations, and group configs from the image."""
import asyncio

from broker import authorizer
from broker.groups.runtime import _now_ms
from metadata import security
from protocol import messages as M
from protocol.context import Session
from protocol.errors import Error
from tests.broker.replica_nodes import Cluster
from tests.groups.coordinator_node import CoordinatorNode, create_offsets_topic

ALL_GROUP_OPERATIONS = sum(1 << op for op in (security.READ, security.DESCRIBE, security.DELETE,
                                               security.DESCRIBE_CONFIGS, security.ALTER_CONFIGS))
HEARTBEAT = "consumer.heartbeat.interval.ms"


def run(coro):
    return asyncio.run(coro)


async def _node(tmp_path) -> tuple[Cluster, CoordinatorNode]:
    """The single replica of ``__consumer_offsets``: every write commits at once."""
    cluster = Cluster(brokers=(1,))
    create_offsets_topic(cluster, replicas=(1,))
    node = CoordinatorNode(tmp_path, 1, cluster)
    await node.sync()
    return cluster, node


async def _commit(node, topics: dict[str, dict[int, int]], version: int = 8, group: str = "g"):
    R = M.OffsetCommitRequest
    P = R.OffsetCommitRequestTopic.OffsetCommitRequestPartition
    request = R(group_id=group, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
                topics=[R.OffsetCommitRequestTopic(name=name, partitions=[
                    P(partition_index=p, committed_offset=o, committed_metadata="")
                    for p, o in parts.items()]) for name, parts in topics.items()])
    response = await node.call(8, version, request)
    return {(t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions}


async def _delete_offsets(node, topics: dict[str, list[int]], group: str = "g"):
    R = M.OffsetDeleteRequest
    request = R(group_id=group, topics=[R.OffsetDeleteRequestTopic(name=name, partitions=[
        R.OffsetDeleteRequestTopic.OffsetDeleteRequestPartition(partition_index=p) for p in parts])
        for name, parts in topics.items()])
    response = await node.call(47, 0, request)
    return response.error_code, {(t.name, p.partition_index): p.error_code
                                 for t in response.topics for p in t.partitions}


def test_offset_commit_for_a_topic_or_partition_that_does_not_exist_is_unknown_topic_or_partition(tmp_path):
    async def main():
        _, node = await _node(tmp_path)
        errors = await _commit(node, {"t": {0: 5, 7: 6}, "nope": {0: 1}})
        assert errors == {("t", 0): Error.NONE, ("t", 7): Error.UNKNOWN_TOPIC_OR_PARTITION,
                          ("nope", 0): Error.UNKNOWN_TOPIC_OR_PARTITION}
        assert await node.fetch_offsets((0, 7)) == (Error.NONE, {0: 5, 7: -1})
        assert await node.fetch_offsets((0,), topic="nope") == (Error.NONE, {0: -1})
    run(main())


def test_offset_commit_of_only_unknown_partitions_leaves_the_group_untouched(tmp_path):
    async def main():
        _, node = await _node(tmp_path)
        assert await _commit(node, {"nope": {0: 1}}, group="fresh") == \
            {("nope", 0): Error.UNKNOWN_TOPIC_OR_PARTITION}
        assert "fresh" not in node.core.groups and node.log().log_end_offset == 0
    run(main())


def test_offset_delete_deletes_the_offsets_of_an_empty_group_and_refuses_unknown_partitions(tmp_path):
    async def main():
        _, node = await _node(tmp_path)
        await _commit(node, {"t": {0: 5, 1: 6}})
        code, errors = await _delete_offsets(node, {"t": [0, 9], "nope": [0]})
        assert code == Error.NONE
        assert errors == {("t", 0): Error.NONE, ("t", 9): Error.UNKNOWN_TOPIC_OR_PARTITION,
                          ("nope", 0): Error.UNKNOWN_TOPIC_OR_PARTITION}
        assert await node.fetch_offsets((0, 1)) == (Error.NONE, {0: -1, 1: 6})
    run(main())


def test_offset_delete_of_an_unknown_group_is_group_id_not_found(tmp_path):
    async def main():
        _, node = await _node(tmp_path)
        assert await _delete_offsets(node, {"t": [0]}, group="nobody") == (Error.GROUP_ID_NOT_FOUND, {})
        assert await _delete_offsets(node, {"t": [0]}, group="") == (Error.INVALID_GROUP_ID, {})
        # A group-level error answers no partition, unknown ones included: Kafka's
        # OffsetDeleteResponse.Builder.merge keeps the coordinator's answer whole when it has one.
        assert await _delete_offsets(node, {"t": [0], "nope": [0]}, group="nobody") == \
            (Error.GROUP_ID_NOT_FOUND, {})
    run(main())


def test_describe_groups_returns_authorized_operations_only_when_asked(tmp_path):
    async def main():
        _, node = await _node(tmp_path)
        await _commit(node, {"t": {0: 5}})
        for asked, expected in ((True, ALL_GROUP_OPERATIONS), (False, authorizer.NOT_REQUESTED)):
            request = M.DescribeGroupsRequest(groups=["g", "nobody"], include_authorized_operations=asked)
            found, missing = (await node.call(15, 5, request)).groups
            assert found.error_code == Error.NONE and found.authorized_operations == expected
        # an error answers the default, as Kafka's does
        request = M.DescribeGroupsRequest(groups=["nobody"], include_authorized_operations=True)
        (missing,) = (await node.call(15, 6, request)).groups
        assert missing.error_code == Error.GROUP_ID_NOT_FOUND
        assert missing.authorized_operations == authorizer.NOT_REQUESTED
    run(main())


def test_consumer_group_describe_returns_authorized_operations_only_when_asked(tmp_path):
    async def main():
        _, node = await _node(tmp_path)
        R = M.ConsumerGroupHeartbeatRequest
        await node.call(68, 1, R(group_id="cg", member_id="m1", member_epoch=0, rebalance_timeout_ms=30000,
                                 subscribed_topic_names=["t"], topic_partitions=[]))
        for asked, expected in ((True, ALL_GROUP_OPERATIONS), (False, authorizer.NOT_REQUESTED)):
            request = M.ConsumerGroupDescribeRequest(group_ids=["cg", "nobody"],
                                                     include_authorized_operations=asked)
            found, missing = (await node.call(69, 0, request)).groups
            assert found.error_code == Error.NONE and found.authorized_operations == expected
            assert missing.error_code == Error.GROUP_ID_NOT_FOUND
            assert missing.authorized_operations == authorizer.NOT_REQUESTED
    run(main())


def test_group_configs_of_the_metadata_image_apply_to_the_group(tmp_path):
    async def main():
        cluster, node = await _node(tmp_path)
        cluster.replay(M.ConfigRecord(resource_type=32, resource_name="cg", name=HEARTBEAT, value="7000"))
        await node.sync()
        R = M.ConsumerGroupHeartbeatRequest

        async def heartbeat(group):
            request = R(group_id=group, member_id="m1", member_epoch=0, rebalance_timeout_ms=30000,
                        subscribed_topic_names=["t"], topic_partitions=[])
            return await node.call(68, 1, request)
        assert (await heartbeat("cg")).heartbeat_interval_ms == 7000
        assert (await heartbeat("other")).heartbeat_interval_ms == 5000  # the broker's
        cluster.replay(M.ConfigRecord(resource_type=32, resource_name="cg", name=HEARTBEAT, value=None))
        await node.sync()
        assert (await heartbeat("cg")).heartbeat_interval_ms == 5000
    run(main())


def test_a_member_s_client_host_is_its_connection_s_address_as_kafka_writes_it(tmp_path):
    """JoinGroup and ConsumerGroupHeartbeat record the member's host as InetAddress.toString:
    ``/127.0.0.1``; DescribeGroups and ConsumerGroupDescribe answer it."""
    async def main():
        _, node = await _node(tmp_path)
        session = Session("PLAINTEXT", "PLAINTEXT", client_address="127.0.0.1")
        R = M.JoinGroupRequest
        join = R(group_id="g", session_timeout_ms=10000, rebalance_timeout_ms=10000, member_id="",
                 group_instance_id=None, protocol_type="consumer",
                 protocols=[R.JoinGroupRequestProtocol(name="range", metadata=b"sub")])
        joining = asyncio.ensure_future(node.call(11, 3, join, session=session))
        while not joining.done():  # the initial rebalance delay (0 here) ends at the coordinator's tick
            await asyncio.sleep(0.01)
            node.runtime.run(node.core.tick(_now_ms()))
        assert joining.result().error_code == Error.NONE
        (group,) = (await node.call(15, 5, M.DescribeGroupsRequest(groups=["g"]))).groups
        assert [m.client_host for m in group.members] == ["/127.0.0.1"]
        H = M.ConsumerGroupHeartbeatRequest
        await node.call(68, 1, H(group_id="cg", member_id="m1", member_epoch=0, rebalance_timeout_ms=30000,
                                 subscribed_topic_names=["t"], topic_partitions=[]), session=session)
        (described,) = (await node.call(69, 0, M.ConsumerGroupDescribeRequest(group_ids=["cg"]))).groups
        assert [m.client_host for m in described.members] == ["/127.0.0.1"]
    run(main())


def test_consumer_group_heartbeat_and_describe_answer_unsupported_version_while_group_version_is_0(tmp_path):
    """Kafka's KafkaApis serves the consumer protocol only while group.version is at least 1
    (isConsumerGroupProtocolEnabled): below, ConsumerGroupHeartbeat answers UNSUPPORTED_VERSION
    and ConsumerGroupDescribe the same for every group asked, while the classic protocol goes on;
    back at 1 the consumer protocol is served again, without a restart."""
    async def main():
        cluster, node = await _node(tmp_path)
        H = M.ConsumerGroupHeartbeatRequest
        heartbeat = H(group_id="cg", member_id="m1", member_epoch=0, rebalance_timeout_ms=30000,
                      subscribed_topic_names=["t"], topic_partitions=[])
        describe = M.ConsumerGroupDescribeRequest(group_ids=["cg", "other"])
        cluster.replay(M.FeatureLevelRecord(name="group.version", feature_level=0))
        refused = await node.call(68, 1, heartbeat)
        assert (refused.error_code, refused.member_id, refused.member_epoch, refused.assignment) == (
            Error.UNSUPPORTED_VERSION, None, 0, None)
        described = (await node.call(69, 0, describe)).groups
        assert [(g.group_id, g.error_code, g.members) for g in described] == [
            ("cg", Error.UNSUPPORTED_VERSION, []), ("other", Error.UNSUPPORTED_VERSION, [])]
        assert 68 in node.apis and 69 in node.apis, "still advertised in ApiVersions, as Kafka's"
        # the classic protocol goes on
        joining = asyncio.ensure_future(node.join())
        while not joining.done():
            await asyncio.sleep(0.01)
            node.runtime.run(node.core.tick(_now_ms()))
        assert joining.result().error_code == Error.NONE
        assert await _commit(node, {"t": {0: 5}}, group="h") == {("t", 0): Error.NONE}
        cluster.replay(M.FeatureLevelRecord(name="group.version", feature_level=1))
        joined = await node.call(68, 1, heartbeat)
        assert (joined.error_code, joined.member_id, joined.member_epoch) == (Error.NONE, "m1", 1)
        (found, _) = (await node.call(69, 0, describe)).groups
        assert found.error_code == Error.NONE and [m.member_id for m in found.members] == ["m1"]
    run(main())


def test_consumer_protocol_left_out_of_the_rebalance_protocols_answers_unsupported_version(tmp_path):
    """group.coordinator.rebalance.protocols=classic: KafkaApis still lists ConsumerGroupHeartbeat
    and ConsumerGroupDescribe in ApiVersions and answers them UNSUPPORTED_VERSION
    (testConsumerGroupHeartbeatIsInaccessibleWhenDisabledByStaticConfig)."""
    async def main():
        cluster = Cluster(brokers=(1,))
        create_offsets_topic(cluster, replicas=(1,))
        node = CoordinatorNode(tmp_path, 1, cluster, **{"group.coordinator.rebalance.protocols": "classic"})
        await node.sync()
        assert 68 in node.apis and 69 in node.apis
        H = M.ConsumerGroupHeartbeatRequest
        refused = await node.call(68, 1, H(group_id="cg", member_id="m1", member_epoch=0,
                                           rebalance_timeout_ms=30000, subscribed_topic_names=["t"],
                                           topic_partitions=[]))
        assert refused.error_code == Error.UNSUPPORTED_VERSION
        (described,) = (await node.call(69, 0, M.ConsumerGroupDescribeRequest(group_ids=["cg"]))).groups
        assert described.error_code == Error.UNSUPPORTED_VERSION
    run(main())
