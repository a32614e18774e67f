"""The admin APIs authorized as Kafka authorizes them (broker/handlers/admin.py with the
broker's real BrokerAuthorizer over the ACLs each test gives it). What Kafka's controller checks
(ControllerApis) the broker checks before it forwards, with the same ACLs from the same image:
a refused topic or config resource is answered here and never reaches the controller."""
from __future__ import annotations

import asyncio
import os

from broker.authorizer import BrokerAuthorizer
from broker.handlers.admin import AdminApis
from engine.manager import format_log_dir
from metadata.configs import BROKER_RESOURCE, GROUP_RESOURCE, SET, TOPIC_RESOURCE
from metadata.security import (
    ALTER,
    ALTER_CONFIGS,
    CLUSTER,
    CLUSTER_NAME,
    CREATE,
    DELETE,
    DESCRIBE,
    DESCRIBE_CONFIGS,
    GROUP,
    TOPIC,
    AclEntry,
)
from protocol import messages as M
from protocol.context import KafkaPrincipal, RequestContext, Session
from protocol.errors import Error
from protocol.headers import RequestHeader
from strom.config import ServerConfig
from tests.broker.replica_nodes import TOPIC as TOPIC_NAME
from tests.broker.replica_nodes import TOPIC_ID, Cluster, Node
from tests.security.acls import acl

from .test_config import BASE

ALICE = Session("PLAINTEXT", client_address="127.0.0.1", principal=KafkaPrincipal("User", "alice"))


class Controller:
    """Records what reaches it and answers every topic or resource NONE."""

    def __init__(self):
        self.forwarded: list = []

    async def forward(self, api_key, version, req):
        self.forwarded.append((api_key, req))
        if api_key == 19:
            R = M.CreateTopicsResponse
            return R(topics=[R.CreatableTopicResult(name=t.name, error_code=Error.NONE, num_partitions=1,
                                                    replication_factor=1) for t in req.topics])
        if api_key == 20:
            R = M.DeleteTopicsResponse
            names = [t.name for t in req.topics] if req.topics else req.topic_names
            return R(responses=[R.DeletableTopicResult(name=n, error_code=Error.NONE) for n in names])
        if api_key == 37:
            R = M.CreatePartitionsResponse
            return R(results=[R.CreatePartitionsTopicResult(name=t.name, error_code=Error.NONE)
                              for t in req.topics])
        if api_key == 44:
            R = M.IncrementalAlterConfigsResponse
            return R(responses=[R.AlterConfigsResourceResponse(
                error_code=Error.NONE, resource_type=r.resource_type, resource_name=r.resource_name)
                for r in req.resources])
        raise AssertionError(f"not forwarded in these tests: {api_key}")

    async def wait_for_change(self, timeout):
        pass


def admin(*acls: AclEntry) -> tuple[AdminApis, Controller]:
    cluster = Cluster(brokers=(1,))
    cluster.create_topic(replicas=(1,))  # "t"
    config = ServerConfig(BASE)
    held = {a.id: a for a in acls}
    controller = Controller()
    handlers = AdminApis(node_id=1, config=config, image=lambda: cluster.image, controller=controller,
                         topic_log_config=lambda _topic: config.log_config, replicas=None,
                         authorizer=BrokerAuthorizer(lambda: held))
    return handlers, controller


def call(handlers: AdminApis, key: int, version: int, request):
    api = {a.key: a for a in handlers.apis()}[key]
    return asyncio.run(api.fn(RequestContext(RequestHeader(key, version, 1, "test", 2), ALICE), request))


def _create(*names: str):
    R = M.CreateTopicsRequest
    return R(topics=[R.CreatableTopic(name=n, num_partitions=1, replication_factor=1, assignments=[],
                                      configs=[]) for n in names], timeout_ms=1000, validate_only=True)


def test_create_topics_needs_create_on_the_cluster_or_on_each_topic(tmp_path):
    handlers, controller = admin(acl(TOPIC, "mine", CREATE), acl(TOPIC, "mine", DESCRIBE_CONFIGS),
                                 acl(TOPIC, "blind", CREATE))
    response = call(handlers, 19, 7, _create("mine", "blind", "theirs"))
    answered = {t.name: t for t in response.topics}
    assert answered["theirs"].error_code == Error.TOPIC_AUTHORIZATION_FAILED
    assert [t.name for t in controller.forwarded[0][1].topics] == ["mine", "blind"]  # theirs never sent
    # configs only with DESCRIBE_CONFIGS on the topic, as the controller returns them
    assert answered["mine"].error_code == Error.NONE and answered["mine"].configs
    blind = answered["blind"]
    assert (blind.error_code, blind.topic_config_error_code, blind.configs, blind.num_partitions) == \
        (Error.NONE, Error.TOPIC_AUTHORIZATION_FAILED, [], -1)
    handlers, controller = admin(acl(CLUSTER, CLUSTER_NAME, CREATE))
    assert [t.error_code for t in call(handlers, 19, 7, _create("any", "other")).topics] == [Error.NONE] * 2


def test_delete_topics_needs_describe_and_delete_on_each_topic_unless_delete_on_the_cluster(tmp_path):
    handlers, controller = admin(acl(TOPIC, "gone", DELETE), acl(TOPIC, "t", DESCRIBE))
    request = M.DeleteTopicsRequest(topic_names=["gone", "t", "theirs"], timeout_ms=1000)
    response = call(handlers, 20, 5, request)
    assert {r.name: r.error_code for r in response.responses} == {
        "gone": Error.NONE, "t": Error.TOPIC_AUTHORIZATION_FAILED, "theirs": Error.TOPIC_AUTHORIZATION_FAILED}
    assert controller.forwarded[0][1].topic_names == ["gone"]
    # by id: a topic alice may not DESCRIBE is answered without its name
    S = M.DeleteTopicsRequest.DeleteTopicState
    handlers, controller = admin()
    response = call(handlers, 20, 6, M.DeleteTopicsRequest(topics=[S(name=None, topic_id=TOPIC_ID)],
                                                           timeout_ms=1000))
    (refused,) = response.responses
    assert (refused.name, refused.error_code) == (None, Error.TOPIC_AUTHORIZATION_FAILED)
    assert controller.forwarded == []
    handlers, controller = admin(acl(CLUSTER, CLUSTER_NAME, DELETE))
    response = call(handlers, 20, 5, M.DeleteTopicsRequest(topic_names=["gone"], timeout_ms=1000))
    assert [r.error_code for r in response.responses] == [Error.NONE]


def test_create_partitions_without_alter_on_a_topic_answers_topic_authorization_failed(tmp_path):
    handlers, controller = admin(acl(TOPIC, "t", ALTER))
    R = M.CreatePartitionsRequest
    request = R(topics=[R.CreatePartitionsTopic(name=n, count=3, assignments=None) for n in ("t", "u")],
                timeout_ms=1000, validate_only=False)
    response = call(handlers, 37, 3, request)
    assert {r.name: r.error_code for r in response.results} == {
        "t": Error.NONE, "u": Error.TOPIC_AUTHORIZATION_FAILED}
    assert [t.name for t in controller.forwarded[0][1].topics] == ["t"]


def test_describe_configs_without_describe_configs_answers_the_resource_types_authorization_failed(tmp_path):
    handlers, _ = admin(acl(TOPIC, "t", DESCRIBE_CONFIGS))
    R = M.DescribeConfigsRequest
    request = R(resources=[R.DescribeConfigsResource(resource_type=kind, resource_name=name,
                                                     configuration_keys=None)
                           for kind, name in ((TOPIC_RESOURCE, "t"), (TOPIC_RESOURCE, "u"),
                                              (BROKER_RESOURCE, "1"), (GROUP_RESOURCE, "g"))],
                include_synonyms=False, include_documentation=False)
    results = call(handlers, 32, 4, request).results
    assert [(r.resource_name, r.error_code) for r in results] == [
        ("t", Error.NONE), ("u", Error.TOPIC_AUTHORIZATION_FAILED), ("1", Error.CLUSTER_AUTHORIZATION_FAILED),
        ("g", Error.GROUP_AUTHORIZATION_FAILED)]
    assert results[0].configs and not any(r.configs for r in results[1:])


def test_alter_configs_without_alter_configs_are_refused_here_and_never_forwarded(tmp_path):
    handlers, controller = admin(acl(TOPIC, "t", ALTER_CONFIGS), acl(GROUP, "g", ALTER_CONFIGS))
    Inc = M.IncrementalAlterConfigsRequest
    request = Inc(resources=[Inc.AlterConfigsResource(resource_type=kind, resource_name=name, configs=[
        Inc.AlterConfigsResource.AlterableConfig(name=key, config_operation=SET, value="1000")])
        for kind, name, key in ((TOPIC_RESOURCE, "t", "retention.ms"), (TOPIC_RESOURCE, "u", "retention.ms"),
                                (GROUP_RESOURCE, "g", "consumer.session.timeout.ms"),
                                (GROUP_RESOURCE, "h", "consumer.session.timeout.ms"),
                                (BROKER_RESOURCE, "1", "log.retention.ms"))], validate_only=False)
    answered = [(r.resource_name, r.error_code) for r in call(handlers, 44, 1, request).responses]
    assert answered == [("t", Error.NONE), ("u", Error.TOPIC_AUTHORIZATION_FAILED), ("g", Error.NONE),
                        ("h", Error.GROUP_AUTHORIZATION_FAILED), ("1", Error.CLUSTER_AUTHORIZATION_FAILED)]
    assert [r.resource_name for r in controller.forwarded[0][1].resources] == ["t", "g"]
    # the legacy AlterConfigs the same way
    A = M.AlterConfigsRequest
    legacy = A(resources=[A.AlterConfigsResource(resource_type=TOPIC_RESOURCE, resource_name=n, configs=[
        A.AlterConfigsResource.AlterableConfig(name="retention.ms", value="1000")]) for n in ("u", "t")],
        validate_only=False)
    assert [(r.resource_name, r.error_code) for r in call(handlers, 33, 2, legacy).responses] == [
        ("u", Error.TOPIC_AUTHORIZATION_FAILED), ("t", Error.NONE)]
    assert [r.resource_name for r in controller.forwarded[1][1].resources] == ["t"]


def test_cluster_admin_apis_need_alter_or_describe_on_the_cluster(tmp_path):
    handlers, controller = admin(acl(TOPIC, "t", ALTER))
    E = M.ElectLeadersRequest
    elect = call(handlers, 43, 2, E(election_type=0, timeout_ms=1000, topic_partitions=[
        E.TopicPartitions(topic="t", partitions=[0])]))
    assert elect.error_code == Error.CLUSTER_AUTHORIZATION_FAILED
    assert [p.error_code for t in elect.replica_election_results for p in t.partition_result] == \
        [Error.CLUSTER_AUTHORIZATION_FAILED]
    A = M.AlterPartitionReassignmentsRequest
    alter = call(handlers, 45, 0, A(timeout_ms=1000, topics=[A.ReassignableTopic(name="t", partitions=[
        A.ReassignableTopic.ReassignablePartition(partition_index=0, replicas=[1])])]))
    assert alter.error_code == Error.CLUSTER_AUTHORIZATION_FAILED
    assert [p.error_code for t in alter.responses for p in t.partitions] == \
        [Error.CLUSTER_AUTHORIZATION_FAILED]
    listed = call(handlers, 46, 0, M.ListPartitionReassignmentsRequest(timeout_ms=1000, topics=None))
    assert listed.error_code == Error.CLUSTER_AUTHORIZATION_FAILED
    dirs = call(handlers, 35, 4, M.DescribeLogDirsRequest(topics=None))
    assert (dirs.error_code, dirs.results) == (Error.CLUSTER_AUTHORIZATION_FAILED, [])
    assert controller.forwarded == []


def test_alter_replica_log_dirs_without_alter_on_the_cluster_answers_cluster_authorization_failed(tmp_path):
    # Kafka's KafkaApis.handleAlterReplicaLogDirsRequest: without ALTER on the cluster every
    # partition of the request answers CLUSTER_AUTHORIZATION_FAILED and no replica moves.
    async def main():
        cluster = Cluster(brokers=(1,))
        cluster.create_topic(replicas=(1,), partitions=2)
        node = Node(tmp_path, 1, cluster)
        other = str(tmp_path / "broker-1-b")
        format_log_dir(other, "test-cluster", 1)
        node.logs.log_dirs.append(other)  # a second log dir (JBOD)
        for index in (0, 1):
            assert (await node.produce(5, acks=1, partition=index)).error_code == Error.NONE
        node.replicas._alter_log_dirs_rate = 0.0  # an accepted move holds its future log
        R = M.AlterReplicaLogDirsRequest
        request = R(dirs=[R.AlterReplicaLogDir(path=other, topics=[
            R.AlterReplicaLogDir.AlterReplicaLogDirTopic(name=name, partitions=[0, 1])
            for name in (TOPIC_NAME, "absent")])])

        async def alter(*acls: AclEntry) -> dict:
            held = {a.id: a for a in acls}
            handlers = AdminApis(node_id=1, config=None, image=lambda: cluster.image, controller=None,
                                 topic_log_config=None, replicas=node.replicas,
                                 authorizer=BrokerAuthorizer(lambda: held))
            api = {a.key: a for a in handlers.apis()}[34]
            response = await api.fn(RequestContext(RequestHeader(34, 2, 1, "test", 2), ALICE), request)
            return {(t.topic_name, p.partition_index): p.error_code
                    for t in response.results for p in t.partitions}

        refused = await alter(acl(TOPIC, TOPIC_NAME, ALTER), acl(CLUSTER, CLUSTER_NAME, DESCRIBE))
        assert refused == {(name, i): Error.CLUSTER_AUTHORIZATION_FAILED
                           for name in (TOPIC_NAME, "absent") for i in (0, 1)}
        assert node.logs.future_logs == {}
        assert [e.name for e in os.scandir(other) if e.name.startswith(TOPIC_NAME)] == []
        assert {node.log(i).parent_dir for i in (0, 1)} == {os.path.abspath(node.dir)}
        taken = await alter(acl(CLUSTER, CLUSTER_NAME, ALTER))
        assert taken == {(TOPIC_NAME, 0): Error.NONE, (TOPIC_NAME, 1): Error.NONE,
                         ("absent", 0): Error.REPLICA_NOT_AVAILABLE,
                         ("absent", 1): Error.REPLICA_NOT_AVAILABLE}
        assert sorted(node.logs.future_logs) == [(TOPIC_NAME, 0), (TOPIC_NAME, 1)]
        assert {node.logs.future_dir_of(TOPIC_NAME, i) for i in (0, 1)} == {other}
        await node.replicas.log_dir_mover.stop()
        node.logs.shutdown()
    asyncio.run(main())
