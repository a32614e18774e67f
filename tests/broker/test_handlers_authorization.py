"""Produce, Fetch, the offsets APIs, InitProducerId, DescribeProducers and the metadata APIs
authorized as Kafka's KafkaApis authorizes them: the real BrokerAuthorizer (the
StandardAuthorizer over the ACLs each test gives it) in front of the handlers of a test broker
(tests/broker/replica_nodes.py), each request from a principal's session. A refusal is an
error code in the answer, never a dropped connection."""
from __future__ import annotations

import asyncio
import uuid

from broker.authorizer import BrokerAuthorizer
from ext.batch import build_batch
from metadata.security import (
    CLUSTER,
    CLUSTER_ACTION,
    CLUSTER_NAME,
    CREATE,
    DELETE,
    DENY,
    DESCRIBE,
    IDEMPOTENT_WRITE,
    PREFIXED,
    READ,
    TRANSACTIONAL_ID,
    WRITE,
)
from metadata.security import TOPIC as TOPICS  # the resource type; TOPIC is the test topic's name
from protocol import messages as M
from protocol.context import KafkaPrincipal
from protocol.dispatch import resolve
from protocol.errors import Error
from tests.broker.replica_nodes import BASE_TS, TOPIC, TOPIC_ID, Cluster, Node, context, records
from tests.security.acls import acl, acls

ALICE = KafkaPrincipal("User", "alice")
ADMIN = KafkaPrincipal("User", "admin")  # a super user
NO_ACLS: dict = {}
OTHER = "other"  # a second topic, no one's ACL names it
OTHER_ID = uuid.UUID("0b7e1a4c-52f5-4d0e-8e2a-6f1c0d9e8b7a").bytes


def node_with(tmp_path, entries: dict, topics=(TOPIC, OTHER)) -> Node:
    """A one-broker cluster holding ``topics`` (one partition each), its handlers behind the
    StandardAuthorizer over ``entries`` (User:admin a super user)."""
    cluster = Cluster(brokers=(1,))
    for name, topic_id in ((TOPIC, TOPIC_ID), (OTHER, OTHER_ID)):
        if name in topics:
            cluster.create_topic(replicas=(1,), name=name, topic_id=topic_id)
    return Node(tmp_path, 1, cluster, authorizer=BrokerAuthorizer(lambda: entries, frozenset({"User:admin"})))


def run(coro):
    return asyncio.run(coro)


def produce_request(*topics: str, transactional_id: str | None = None, batch: bytes | None = None):
    R = M.ProduceRequest
    return R(transactional_id=transactional_id, acks=1, timeout_ms=1000, topic_data=[
        R.TopicProduceData(name=name, partition_data=[R.PartitionProduceData(
            index=0, records=memoryview(bytearray(batch if batch is not None else records(3))))])
        for name in topics])


def produced(response) -> dict:
    return {t.name: t.partition_responses[0].error_code for t in response.responses}


def test_produce_to_a_topic_without_write_answers_topic_authorization_failed(tmp_path):
    """WRITE on a prefix: those topics are appended; another topic, existing or not, answers
    TOPIC_AUTHORIZATION_FAILED (not UNKNOWN_TOPIC_OR_PARTITION: its existence is not told)."""
    async def main():
        node = node_with(tmp_path, acls(acl(TOPICS, TOPIC[:1], WRITE, pattern=PREFIXED)))
        response = await node.call(0, 9, produce_request(TOPIC, OTHER, "missing"), principal=ALICE)
        assert produced(response) == {TOPIC: Error.NONE, OTHER: Error.TOPIC_AUTHORIZATION_FAILED,
                                      "missing": Error.TOPIC_AUTHORIZATION_FAILED}
        assert node.log().log_end_offset == 3
        assert node.logs.get_log(OTHER, 0).log_end_offset == 0
    run(main())


def test_deny_acl_overrides_allow_for_the_same_principal(tmp_path):
    async def main():
        node = node_with(tmp_path, acls(acl(TOPICS, "*", WRITE), acl(TOPICS, OTHER, WRITE, DENY)))
        response = await node.call(0, 9, produce_request(TOPIC, OTHER), principal=ALICE)
        assert produced(response) == {TOPIC: Error.NONE, OTHER: Error.TOPIC_AUTHORIZATION_FAILED}
    run(main())


def test_transactional_produce_without_write_on_the_transactional_id_fails_every_partition(tmp_path):
    async def main():
        node = node_with(tmp_path, acls(acl(TOPICS, TOPIC, WRITE)))
        batch = build_batch([(b"k", b"v", [], BASE_TS)], producer_id=7, producer_epoch=0, base_sequence=0,
                            is_transactional=True)
        for transactional_id in ("tx", None):
            response = await node.call(0, 9, produce_request(TOPIC, OTHER, transactional_id=transactional_id,
                                                             batch=batch), principal=ALICE)
            assert produced(response) == {TOPIC: Error.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                                          OTHER: Error.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}
        assert node.log().log_end_offset == 0
    run(main())


def test_fetch_of_a_topic_without_read_answers_topic_authorization_failed(tmp_path):
    async def main():
        node = node_with(tmp_path, NO_ACLS)
        await node.call(0, 9, produce_request(TOPIC), principal=ADMIN)
        request = node.fetch_request(0)
        refused = (await node.call(1, 16, request, principal=ALICE)).responses[0].partitions[0]
        assert (refused.error_code, bytes(refused.records)) == (Error.TOPIC_AUTHORIZATION_FAILED, b"")
        node = node_with(tmp_path / "read", acls(acl(TOPICS, TOPIC, READ)))
        await node.call(0, 9, produce_request(TOPIC), principal=ADMIN)
        read = (await node.call(1, 16, node.fetch_request(0), principal=ALICE)).responses[0].partitions[0]
        assert read.error_code == Error.NONE and read.records.size > 0
    run(main())


def test_follower_fetch_without_cluster_action_answers_topic_authorization_failed(tmp_path):
    """A replica's fetch needs CLUSTER_ACTION on the cluster; READ on the topic does not do."""
    async def main():
        node = node_with(tmp_path, acls(acl(TOPICS, TOPIC, READ)))
        pd = (await node.call(1, 16, node.fetch_request(0, replica_id=2, current_leader_epoch=0),
                              principal=ALICE)).responses[0].partitions[0]
        assert pd.error_code == Error.TOPIC_AUTHORIZATION_FAILED
        node = node_with(tmp_path / "second", acls(acl(CLUSTER, CLUSTER_NAME, CLUSTER_ACTION)))
        node.cluster.register(2)
        pd = (await node.call(1, 16, node.fetch_request(0, replica_id=2, current_leader_epoch=0),
                              principal=ALICE)).responses[0].partitions[0]
        assert pd.error_code != Error.TOPIC_AUTHORIZATION_FAILED
    run(main())


def list_offsets_request(*topics: str):
    R = M.ListOffsetsRequest
    return R(replica_id=-1, isolation_level=0, topics=[R.ListOffsetsTopic(name=name, partitions=[
        R.ListOffsetsPartition(partition_index=0, current_leader_epoch=-1, timestamp=-1)])
        for name in topics])


def test_list_offsets_without_describe_answers_topic_authorization_failed(tmp_path):
    async def main():
        node = node_with(tmp_path, acls(acl(TOPICS, TOPIC, DESCRIBE)))
        response = await node.call(2, 7, list_offsets_request(TOPIC, OTHER), principal=ALICE)
        assert {t.name: (t.partitions[0].error_code, t.partitions[0].offset) for t in response.topics} == {
            TOPIC: (Error.NONE, 0), OTHER: (Error.TOPIC_AUTHORIZATION_FAILED, -1)}
    run(main())


def test_write_implies_describe_for_list_offsets(tmp_path):
    async def main():
        node = node_with(tmp_path, acls(acl(TOPICS, TOPIC, WRITE)))
        response = await node.call(2, 7, list_offsets_request(TOPIC), principal=ALICE)
        assert response.topics[0].partitions[0].error_code == Error.NONE
    run(main())


def test_offset_for_leader_epoch_needs_cluster_action_or_describe_on_the_topic(tmp_path):
    async def main():
        R = M.OffsetForLeaderEpochRequest
        P = R.OffsetForLeaderTopic.OffsetForLeaderPartition
        request = R(replica_id=-1, topics=[R.OffsetForLeaderTopic(topic=name, partitions=[
            P(partition=0, current_leader_epoch=-1, leader_epoch=0)]) for name in (TOPIC, OTHER)])

        async def errors(entries):
            node = node_with(tmp_path / str(len(entries)), entries)
            response = await node.call(23, 4, request, principal=ALICE)
            return {t.topic: t.partitions[0].error_code for t in response.topics}
        assert await errors(acls(acl(TOPICS, TOPIC, DESCRIBE))) == {
            TOPIC: Error.NONE, OTHER: Error.TOPIC_AUTHORIZATION_FAILED}
        assert await errors(acls(acl(CLUSTER, CLUSTER_NAME, CLUSTER_ACTION), acl(TOPICS, "x", READ))) == {
            TOPIC: Error.NONE, OTHER: Error.NONE}
    run(main())


def test_delete_records_without_delete_answers_topic_authorization_failed(tmp_path):
    async def main():
        node = node_with(tmp_path, acls(acl(TOPICS, TOPIC, DELETE), acl(TOPICS, OTHER, WRITE)))
        for name in (TOPIC, OTHER):
            await node.call(0, 9, produce_request(name), principal=ADMIN)
        R = M.DeleteRecordsRequest
        P = R.DeleteRecordsTopic.DeleteRecordsPartition
        request = R(timeout_ms=1000, topics=[R.DeleteRecordsTopic(name=name, partitions=[
            P(partition_index=0, offset=2)]) for name in (TOPIC, OTHER)])
        response = await node.call(21, 2, request, principal=ALICE)
        results = {t.name: (p.error_code, p.low_watermark) for t in response.topics for p in t.partitions}
        assert results == {TOPIC: (Error.NONE, 2), OTHER: (Error.TOPIC_AUTHORIZATION_FAILED, -1)}
        assert node.logs.get_log(OTHER, 0).log_start_offset == 0
    run(main())


def test_init_producer_id_transactional_needs_write_on_the_transactional_id(tmp_path):
    async def main():
        R = M.InitProducerIdRequest
        node = node_with(tmp_path, acls(acl(TRANSACTIONAL_ID, "tx-", WRITE, pattern=PREFIXED),
                                        acl(TOPICS, "*", WRITE)))
        for transactional_id, code in (("other", Error.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
                                       ("tx-1", Error.COORDINATOR_NOT_AVAILABLE)):  # no coordinator here
            reply = await node.call(22, 4, R(transactional_id=transactional_id, transaction_timeout_ms=60000,
                                             producer_id=-1, producer_epoch=-1), principal=ALICE)
            assert reply.error_code == code
    run(main())


def test_init_producer_id_idempotent_needs_idempotent_write_or_write_on_some_topic(tmp_path):
    """Kafka's authorizeByResourceType: WRITE on any topic (here a prefix) will do."""
    async def main():
        request = M.InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000, producer_id=-1,
                                          producer_epoch=-1)
        for i, entries in enumerate((NO_ACLS, acls(acl(TOPICS, TOPIC, READ)))):
            node = node_with(tmp_path / f"refused-{i}", entries)
            reply = await node.call(22, 4, request, principal=ALICE)
            assert (reply.error_code, reply.producer_id) == (Error.CLUSTER_AUTHORIZATION_FAILED, -1)
        for i, entries in enumerate((acls(acl(CLUSTER, CLUSTER_NAME, IDEMPOTENT_WRITE)),
                                     acls(acl(TOPICS, "pre", WRITE, pattern=PREFIXED)))):
            node = node_with(tmp_path / f"allowed-{i}", entries)
            reply = await node.call(22, 4, request, principal=ALICE)
            assert (reply.error_code, reply.producer_id, reply.producer_epoch) == (Error.NONE, 1000, 0)
    run(main())


def test_describe_producers_without_read_answers_topic_authorization_failed(tmp_path):
    async def main():
        node = node_with(tmp_path, acls(acl(TOPICS, TOPIC, READ)))
        R = M.DescribeProducersRequest
        request = R(topics=[R.TopicRequest(name=name, partition_indexes=[0]) for name in (TOPIC, OTHER)])
        response = await node.call(61, 0, request, principal=ALICE)
        assert {t.name: t.partitions[0].error_code for t in response.topics} == {
            TOPIC: Error.NONE, OTHER: Error.TOPIC_AUTHORIZATION_FAILED}
    run(main())


async def metadata(node, topics=None, version: int = 12, principal=ALICE, controller=None, topic_ops=False):
    R = M.MetadataRequest
    asked = None if topics is None else [R.MetadataRequestTopic(name=None, topic_id=t) if isinstance(t, bytes)
                                         else R.MetadataRequestTopic(name=t) for t in topics]
    request = R(topics=asked, allow_auto_topic_creation=True, include_topic_authorized_operations=topic_ops)
    api = {a.key: a for a in node.metadata_handlers(controller).apis()}[3]
    return await resolve(await api.fn(context(3, version, principal=principal), request))


def test_metadata_leaves_out_topics_the_principal_cannot_describe(tmp_path):
    """All topics: only the described ones. Named, or by id: TOPIC_AUTHORIZATION_FAILED, by name
    without its topic id and whether it exists or not, by id with the id. The authorized
    operations go to the topics described only."""
    async def main():
        node = node_with(tmp_path, acls(acl(TOPICS, TOPIC, READ)))
        everything = await metadata(node)
        assert [(t.name, t.error_code) for t in everything.topics] == [(TOPIC, Error.NONE)]
        named = await metadata(node, [TOPIC, OTHER, "missing"], topic_ops=True)
        assert [(t.name, t.error_code, t.topic_id) for t in named.topics] == [
            (TOPIC, Error.NONE, TOPIC_ID), (OTHER, Error.TOPIC_AUTHORIZATION_FAILED, bytes(16)),
            ("missing", Error.TOPIC_AUTHORIZATION_FAILED, bytes(16))]
        read_and_describe = (1 << READ) | (1 << DESCRIBE)
        assert [t.topic_authorized_operations for t in named.topics] == [read_and_describe, -2**31, -2**31]
        by_id = await metadata(node, [OTHER_ID])
        assert [(t.name, t.error_code, t.topic_id) for t in by_id.topics] == [
            (None, Error.TOPIC_AUTHORIZATION_FAILED, OTHER_ID)]
        assert {t.name for t in (await metadata(node, principal=ADMIN)).topics} == {TOPIC, OTHER}
    run(main())


class CreatingController:
    """The controller's channel as auto-creation uses it: CreateTopics creates each topic in
    the test's metadata image at once."""

    def __init__(self, cluster: Cluster):
        self.cluster = cluster
        self.created: list[str] = []

    async def forward(self, api_key: int, version: int, request):
        for t in request.topics:
            self.created.append(t.name)
            self.cluster.create_topic(replicas=(1,), name=t.name, topic_id=uuid.uuid4().bytes)

    async def wait_for_change(self, timeout: float) -> None:
        await asyncio.sleep(0)


def test_metadata_auto_creation_needs_create_on_the_cluster_or_the_topic(tmp_path):
    async def main():
        node = node_with(tmp_path, acls(acl(TOPICS, "new", DESCRIBE, pattern=PREFIXED),
                                        acl(TOPICS, "new-ok", CREATE)))
        controller = CreatingController(node.cluster)
        answer = await metadata(node, ["new-ok", "new-no"], controller=controller)
        assert [(t.name, t.error_code) for t in answer.topics] == [
            ("new-ok", Error.NONE), ("new-no", Error.TOPIC_AUTHORIZATION_FAILED)]
        assert controller.created == ["new-ok"]
        node = node_with(tmp_path / "cluster", acls(acl(TOPICS, "new", DESCRIBE, pattern=PREFIXED),
                                                    acl(CLUSTER, CLUSTER_NAME, CREATE)))
        controller = CreatingController(node.cluster)
        answer = await metadata(node, ["new-no"], controller=controller)
        assert [(t.name, t.error_code) for t in answer.topics] == [("new-no", Error.NONE)]
    run(main())


def test_describe_cluster_answers_every_principal_and_no_operations_without_describe(tmp_path):
    async def main():
        node = node_with(tmp_path, NO_ACLS)
        api = {a.key: a for a in node.metadata_handlers().apis()}[60]
        request = M.DescribeClusterRequest(include_cluster_authorized_operations=True)
        answer = await resolve(await api.fn(context(60, 1, principal=ALICE), request))
        assert (answer.error_code, answer.cluster_authorized_operations) == (Error.NONE, 0)
        assert [b.broker_id for b in answer.brokers] == [1]
        node = node_with(tmp_path / "describe", acls(acl(CLUSTER, CLUSTER_NAME, DESCRIBE)))
        api = {a.key: a for a in node.metadata_handlers().apis()}[60]
        answer = await resolve(await api.fn(context(60, 1, principal=ALICE), request))
        assert answer.cluster_authorized_operations == 1 << DESCRIBE
    run(main())


def test_describe_topic_partitions_refuses_a_named_topic_without_describe_and_leaves_it_out_of_all(tmp_path):
    async def main():
        node = node_with(tmp_path, acls(acl(TOPICS, TOPIC, DESCRIBE)))
        api = {a.key: a for a in node.metadata_handlers().apis()}[75]
        R = M.DescribeTopicPartitionsRequest
        named = await resolve(await api.fn(context(75, 0, principal=ALICE), R(
            topics=[R.TopicRequest(name=OTHER), R.TopicRequest(name=TOPIC)], response_partition_limit=100)))
        assert [(t.name, t.error_code, t.topic_authorized_operations) for t in named.topics] == [
            (TOPIC, Error.NONE, 1 << DESCRIBE), (OTHER, Error.TOPIC_AUTHORIZATION_FAILED, -2**31)]
        everything = await resolve(await api.fn(context(75, 0, principal=ALICE), R(
            topics=[], response_partition_limit=100)))
        assert [t.name for t in everything.topics] == [TOPIC]
    run(main())
