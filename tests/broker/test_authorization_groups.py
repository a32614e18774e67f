"""The group APIs authorized as Kafka's KafkaApis authorizes them (broker/handlers/groups.py with
the broker's real BrokerAuthorizer over the ACLs each test gives it): READ on the group to join,
sync, heartbeat, leave and commit; DESCRIBE on the group to fetch offsets, describe it and find
its coordinator; DELETE to delete it or its offsets; READ or DESCRIBE on each topic named, each
refusal answered with its *_AUTHORIZATION_FAILED code, never a dropped request."""
from __future__ import annotations

import asyncio

from broker.authorizer import NOT_REQUESTED, BrokerAuthorizer
from metadata.security import (
    ALL,
    CLUSTER,
    CLUSTER_NAME,
    DELETE,
    DENY,
    DESCRIBE,
    GROUP,
    PREFIXED,
    READ,
    TOPIC,
    TRANSACTIONAL_ID,
    WRITE,
    AclEntry,
)
from protocol import messages as M
from protocol.context import KafkaPrincipal, Session
from protocol.errors import Error
from tests.broker.replica_nodes import LISTENER, Cluster
from tests.groups.coordinator_node import CoordinatorNode, create_offsets_topic
from tests.security.acls import acl

ALICE = Session(LISTENER, client_address="127.0.0.1", principal=KafkaPrincipal("User", "alice"))
ADMIN = Session(LISTENER, client_address="127.0.0.1", principal=KafkaPrincipal("User", "admin"))


async def _node(tmp_path, *acls: AclEntry) -> tuple[CoordinatorNode, dict]:
    """A group coordinator leading ``__consumer_offsets`` (topic ``t``, 2 partitions), its
    handlers authorized over ``acls`` (the dict the test may change), ``User:admin`` a super user."""
    cluster = Cluster(brokers=(1,))
    create_offsets_topic(cluster, replicas=(1,))
    node = CoordinatorNode(tmp_path, 1, cluster)
    await node.sync()
    held = {a.id: a for a in acls}
    node.handlers.authorizer = BrokerAuthorizer(lambda: held, frozenset({"User:admin"}))
    return node, held


def run(coro):
    return asyncio.run(coro)


def _commit_request(group: str = "g", topics=(("t", (0,)),)):
    R = M.OffsetCommitRequest
    P = R.OffsetCommitRequestTopic.OffsetCommitRequestPartition
    return R(group_id=group, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
             topics=[R.OffsetCommitRequestTopic(name=name, partitions=[
                 P(partition_index=p, committed_offset=5, committed_metadata="") for p in parts])
                 for name, parts in topics])


def _errors(response) -> dict:
    return {(t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions}


def _join_request(group: str = "g"):
    R = M.JoinGroupRequest
    return R(group_id=group, session_timeout_ms=10000, rebalance_timeout_ms=10000, member_id="",
             group_instance_id=None, protocol_type="consumer",
             protocols=[R.JoinGroupRequestProtocol(name="range", metadata=b"sub")])


def test_join_group_without_read_on_the_group_answers_group_authorization_failed(tmp_path):
    async def main():
        node, _ = await _node(tmp_path, acl(GROUP, "g", DESCRIBE), acl(GROUP, "other", READ))
        response = await node.call(11, 5, _join_request(), session=ALICE)
        assert response.error_code == Error.GROUP_AUTHORIZATION_FAILED and response.member_id == ""
        assert "g" not in node.core.groups  # the coordinator never saw it
        # a super user needs no ACL
        response = await node.call(11, 5, _join_request(), session=ADMIN)
        assert response.error_code == Error.MEMBER_ID_REQUIRED
    run(main())


def test_join_group_with_read_on_a_prefix_of_the_group_reaches_the_coordinator(tmp_path):
    async def main():
        node, _ = await _node(tmp_path, acl(GROUP, "app-", READ, pattern=PREFIXED))
        assert (await node.call(11, 5, _join_request("app-1"), session=ALICE)).error_code == \
            Error.MEMBER_ID_REQUIRED
        assert (await node.call(11, 5, _join_request("ap"), session=ALICE)).error_code == \
            Error.GROUP_AUTHORIZATION_FAILED
    run(main())


def test_a_deny_of_read_on_the_group_overrides_an_allow_of_all(tmp_path):
    async def main():
        node, _ = await _node(tmp_path, acl(GROUP, "*", ALL), acl(GROUP, "g", READ, DENY))
        assert (await node.call(11, 5, _join_request(), session=ALICE)).error_code == \
            Error.GROUP_AUTHORIZATION_FAILED
        assert (await node.call(11, 5, _join_request("h"), session=ALICE)).error_code == \
            Error.MEMBER_ID_REQUIRED
    run(main())


def test_sync_heartbeat_and_leave_group_without_read_on_the_group_answer_group_authorization_failed(tmp_path):
    async def main():
        node, _ = await _node(tmp_path, acl(GROUP, "g", DESCRIBE))
        sync = M.SyncGroupRequest(group_id="g", generation_id=1, member_id="m", group_instance_id=None,
                                  assignments=[])
        assert (await node.call(14, 3, sync, session=ALICE)).error_code == Error.GROUP_AUTHORIZATION_FAILED
        heartbeat = M.HeartbeatRequest(group_id="g", generation_id=1, member_id="m", group_instance_id=None)
        assert (await node.call(12, 3, heartbeat, session=ALICE)).error_code == \
            Error.GROUP_AUTHORIZATION_FAILED
        R = M.LeaveGroupRequest
        leave = R(group_id="g", members=[R.MemberIdentity(member_id="m", group_instance_id=None)])
        response = await node.call(13, 3, leave, session=ALICE)
        assert response.error_code == Error.GROUP_AUTHORIZATION_FAILED and response.members == []
    run(main())


def test_offset_commit_without_read_on_the_group_fails_every_partition_with_group_authorization_failed(
        tmp_path):
    async def main():
        node, _ = await _node(tmp_path, acl(TOPIC, "t", READ))
        response = await node.call(8, 8, _commit_request(topics=(("t", (0, 1)), ("nope", (0,)))),
                                   session=ALICE)
        assert _errors(response) == dict.fromkeys([("t", 0), ("t", 1), ("nope", 0)],
                                                  Error.GROUP_AUTHORIZATION_FAILED)
        assert node.log().log_end_offset == 0
    run(main())


def test_offset_commit_without_read_on_a_topic_answers_topic_authorization_failed_for_its_partitions(
        tmp_path):
    async def main():
        node, _ = await _node(tmp_path, acl(GROUP, "g", READ), acl(TOPIC, "t", READ))
        response = await node.call(8, 8, _commit_request(topics=(("t", (0, 9)), ("secret", (0, 1)))),
                                   session=ALICE)
        # an unauthorized topic is refused before the image is asked whether it exists
        assert _errors(response) == {("t", 0): Error.NONE, ("t", 9): Error.UNKNOWN_TOPIC_OR_PARTITION,
                                     ("secret", 0): Error.TOPIC_AUTHORIZATION_FAILED,
                                     ("secret", 1): Error.TOPIC_AUTHORIZATION_FAILED}
    run(main())


def _fetch_request(group: str = "g", topics=(("t", (0, 1)),), all_topics: bool = False):
    R = M.OffsetFetchRequest
    G = R.OffsetFetchRequestGroup
    return R(require_stable=False, groups=[G(group_id=group, member_id=None, member_epoch=-1, topics=None
                                             if all_topics else [G.OffsetFetchRequestTopics(
                                                 name=name, partition_indexes=list(parts))
                                                 for name, parts in topics])])


def test_offset_fetch_without_describe_on_the_group_answers_group_authorization_failed(tmp_path):
    async def main():
        node, _ = await _node(tmp_path, acl(TOPIC, "t", DESCRIBE))
        (group,) = (await node.call(9, 8, _fetch_request(), session=ALICE)).groups
        assert group.error_code == Error.GROUP_AUTHORIZATION_FAILED and group.topics == []
        R = M.OffsetFetchRequest  # below v8: the top-level error, no topics
        v7 = await node.call(9, 7, R(group_id="g", require_stable=False, topics=[
            R.OffsetFetchRequestTopic(name="t", partition_indexes=[0])]), session=ALICE)
        assert v7.error_code == Error.GROUP_AUTHORIZATION_FAILED and v7.topics == []
    run(main())


def test_offset_fetch_leaves_out_the_topics_the_principal_cannot_describe_and_refuses_those_it_names(
        tmp_path):
    async def main():
        node, _ = await _node(tmp_path, acl(GROUP, "g", READ), acl(TOPIC, "t", READ))
        # the group's offsets for t and for a topic alice may not see, committed by a super user
        await node.call(8, 8, _commit_request(topics=(("t", (0,)),)), session=ADMIN)
        node.broker.image.topics["hidden"] = node.broker.image.topics["t"]  # the same partitions
        await node.call(8, 8, _commit_request(topics=(("hidden", (0,)),)), session=ADMIN)
        (group,) = (await node.call(9, 8, _fetch_request(all_topics=True), session=ALICE)).groups
        assert group.error_code == Error.NONE
        assert [(t.name, [(p.partition_index, p.committed_offset) for p in t.partitions])
                for t in group.topics] == [("t", [(0, 5)])]
        (group,) = (await node.call(9, 8, _fetch_request(topics=(("t", (0,)), ("hidden", (0,)))),
                                    session=ALICE)).groups
        assert {(t.name, p.partition_index): (p.committed_offset, p.error_code)
                for t in group.topics for p in t.partitions} == {
            ("t", 0): (5, Error.NONE), ("hidden", 0): (-1, Error.TOPIC_AUTHORIZATION_FAILED)}
    run(main())


def test_describe_groups_without_describe_answers_group_authorization_failed_and_operations_per_principal(
        tmp_path):
    async def main():
        node, _ = await _node(tmp_path, acl(GROUP, "g", READ))
        await node.call(8, 8, _commit_request(), session=ADMIN)
        request = M.DescribeGroupsRequest(groups=["g", "other"], include_authorized_operations=True)
        found, refused = (await node.call(15, 5, request, session=ALICE)).groups
        # READ implies DESCRIBE; the bit set is what alice may do
        assert found.error_code == Error.NONE and found.authorized_operations == (1 << READ) | (1 << DESCRIBE)
        assert (refused.group_id, refused.error_code, refused.group_state) == \
            ("other", Error.GROUP_AUTHORIZATION_FAILED, "")
        assert refused.authorized_operations == NOT_REQUESTED
    run(main())


def test_consumer_group_heartbeat_and_describe_need_read_and_describe_on_the_group(tmp_path):
    async def main():
        node, _ = await _node(tmp_path, acl(GROUP, "cg", DESCRIBE))
        R = M.ConsumerGroupHeartbeatRequest
        heartbeat = R(group_id="cg", member_id="m1", member_epoch=0, rebalance_timeout_ms=30000,
                      subscribed_topic_names=["t"], topic_partitions=[])
        assert (await node.call(68, 1, heartbeat, session=ALICE)).error_code == \
            Error.GROUP_AUTHORIZATION_FAILED
        assert (await node.call(68, 1, heartbeat, session=ADMIN)).error_code == Error.NONE
        request = M.ConsumerGroupDescribeRequest(group_ids=["cg", "nope"], include_authorized_operations=True)
        found, refused = (await node.call(69, 0, request, session=ALICE)).groups
        assert found.error_code == Error.NONE and found.authorized_operations == 1 << DESCRIBE
        assert (refused.group_id, refused.error_code) == ("nope", Error.GROUP_AUTHORIZATION_FAILED)
    run(main())


def test_list_groups_lists_only_the_groups_the_principal_may_describe_unless_it_may_describe_the_cluster(
        tmp_path):
    async def main():
        node, held = await _node(tmp_path, acl(GROUP, "g", DESCRIBE))
        for group in ("g", "h"):
            await node.call(8, 8, _commit_request(group), session=ADMIN)
        response = await node.call(16, 4, M.ListGroupsRequest(states_filter=[]), session=ALICE)
        assert (response.error_code, [g.group_id for g in response.groups]) == (Error.NONE, ["g"])
        cluster = acl(CLUSTER, CLUSTER_NAME, DESCRIBE)
        held[cluster.id] = cluster
        response = await node.call(16, 4, M.ListGroupsRequest(states_filter=[]), session=ALICE)
        assert [g.group_id for g in response.groups] == ["g", "h"]
    run(main())


def test_delete_groups_without_delete_on_a_group_answers_group_authorization_failed_for_it_alone(tmp_path):
    async def main():
        node, _ = await _node(tmp_path, acl(GROUP, "g", DELETE), acl(GROUP, "h", READ))
        for group in ("g", "h"):
            await node.call(8, 8, _commit_request(group), session=ADMIN)
        response = await node.call(42, 2, M.DeleteGroupsRequest(groups_names=["h", "g"]), session=ALICE)
        assert [(r.group_id, r.error_code) for r in response.results] == [
            ("h", Error.GROUP_AUTHORIZATION_FAILED), ("g", Error.NONE)]
        assert "h" in node.core.groups and "g" not in node.core.groups
    run(main())


def test_offset_delete_needs_delete_on_the_group_and_read_on_each_topic(tmp_path):
    async def main():
        node, _ = await _node(tmp_path, acl(GROUP, "g", DELETE))
        await node.call(8, 8, _commit_request(topics=(("t", (0, 1)),)), session=ADMIN)
        R = M.OffsetDeleteRequest
        request = R(group_id="g", topics=[R.OffsetDeleteRequestTopic(name="t", partitions=[
            R.OffsetDeleteRequestTopic.OffsetDeleteRequestPartition(partition_index=0)])])
        response = await node.call(47, 0, request, session=ALICE)
        assert response.error_code == Error.NONE
        assert _errors(response) == {("t", 0): Error.TOPIC_AUTHORIZATION_FAILED}
        request.group_id = "h"
        response = await node.call(47, 0, request, session=ALICE)
        assert (response.error_code, response.topics) == (Error.GROUP_AUTHORIZATION_FAILED, [])
        (group,) = (await node.call(9, 8, _fetch_request(), session=ADMIN)).groups
        assert [p.committed_offset for p in group.topics[0].partitions] == [5, 5]  # nothing deleted
    run(main())


def test_find_coordinator_needs_describe_on_the_group_or_the_transactional_id(tmp_path):
    async def main():
        node, _ = await _node(tmp_path, acl(GROUP, "g", DESCRIBE))
        R = M.FindCoordinatorRequest
        v4 = await node.call(10, 4, R(key_type=0, coordinator_keys=["g", "h"]), LISTENER, session=ALICE)
        assert [(c.key, c.error_code) for c in v4.coordinators] == [
            ("g", Error.NONE), ("h", Error.GROUP_AUTHORIZATION_FAILED)]
        v3 = await node.call(10, 3, R(key="h", key_type=0), LISTENER, session=ALICE)
        assert (v3.error_code, v3.node_id, v3.host, v3.port) == (Error.GROUP_AUTHORIZATION_FAILED, -1, "", -1)
        v4 = await node.call(10, 4, R(key_type=1, coordinator_keys=["tx"]), LISTENER, session=ALICE)
        assert [c.error_code for c in v4.coordinators] == [Error.TRANSACTIONAL_ID_AUTHORIZATION_FAILED]
    run(main())


def test_txn_offset_commit_needs_write_on_the_transactional_id_read_on_the_group_and_on_each_topic(
        tmp_path):
    async def main():
        node, held = await _node(tmp_path, acl(GROUP, "g", READ), acl(TOPIC, "t", READ))
        R = M.TxnOffsetCommitRequest
        T = R.TxnOffsetCommitRequestTopic
        request = R(transactional_id="tx", group_id="g", producer_id=1, producer_epoch=0, generation_id=-1,
                    member_id="", group_instance_id=None, topics=[
                        T(name=name, partitions=[T.TxnOffsetCommitRequestPartition(
                            partition_index=0, committed_offset=5, committed_metadata="")])
                        for name in ("t", "secret")])

        async def errors(version: int = 3):
            return _errors(await node.call(28, version, request, session=ALICE))

        assert await errors() == dict.fromkeys([("t", 0), ("secret", 0)],
                                               Error.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        write = acl(TRANSACTIONAL_ID, "tx", WRITE)
        held[write.id] = write
        request.group_id = "h"
        assert await errors() == dict.fromkeys([("t", 0), ("secret", 0)], Error.GROUP_AUTHORIZATION_FAILED)
        request.group_id = "g"
        answered = await errors()
        # t reaches the coordinator (no transaction coordinator here: it cannot verify it)
        assert answered[("secret", 0)] == Error.TOPIC_AUTHORIZATION_FAILED
        assert answered[("t", 0)] != Error.TOPIC_AUTHORIZATION_FAILED
    run(main())
