"""A controller authorizes every API it serves as Kafka's ControllerApis does, by the
StandardAuthorizer over its own metadata image (controller/authorization.py): the shell of
test_shell (a single-voter raft, the quorum controller) with its APIs behind the authorizer,
each request handed the context of a principal. ACLs are created through the controller's own
CreateAcls by a super user, so they are the image's."""
from __future__ import annotations

import pytest

from broker.metadata_follower import registration_features
from controller.authorization import authorize_apis, error_response
from metadata.security import (
    ALLOW,
    ALTER,
    ALTER_CONFIGS,
    ANY_RESOURCE,
    CLUSTER,
    CLUSTER_ACTION,
    CLUSTER_NAME,
    CREATE,
    DELETE,
    DENY,
    DESCRIBE,
    DESCRIBE_CONFIGS,
    LITERAL,
    OP_ANY,
    PATTERN_ANY,
    PERMISSION_ANY,
    PREFIXED,
    TOPIC,
)
from protocol import messages as M
from protocol.context import KafkaPrincipal, RequestContext, Session
from protocol.errors import Error
from protocol.headers import RequestHeader, encode_response
from protocol.metadata_records import decode_record
from raft import wire
from security.authorizer import CONTROLLER_RULES, AclAuthorizer

from .test_shell import CLUSTER_ID, HOST, Controller, closed_port, eventually, run

ADMIN = "User:admin"  # the super user
BROKER = "User:broker"


class Authorized:
    """The shell's controller with its APIs behind an AclAuthorizer over its own image."""

    def __init__(self, c: Controller, enabled: bool = True, allow_if_no_acl: bool = False):
        self.c = c
        authorizer = AclAuthorizer(lambda: c.controller.state.acls, frozenset({ADMIN}), allow_if_no_acl,
                                   enabled=enabled)
        self.apis = {api.key: api for api in authorize_apis(c.controller.apis() + c.raft.apis(), authorizer,
                                                             lambda: c.controller.state)}

    async def ask(self, principal: str, api_key: int, version: int, req):
        ctx = RequestContext(RequestHeader(api_key, version, 1, "test", 2),
                             Session("CONTROLLER", "SASL_PLAINTEXT", HOST, KafkaPrincipal.parse(principal)))
        return await self.apis[api_key].fn(ctx, req)

    async def allow(self, principal: str, operation: int, resource_type: int = CLUSTER,
                    name: str = CLUSTER_NAME, pattern: int = LITERAL, permission: int = ALLOW) -> None:
        C = M.CreateAclsRequest
        response = await self.ask(ADMIN, 30, 3, C(creations=[C.AclCreation(
            resource_type=resource_type, resource_name=name, resource_pattern_type=pattern,
            principal=principal, host="*", operation=operation, permission_type=permission)]))
        assert [r.error_code for r in response.results] == [Error.NONE]


def scenario(body, enabled: bool = True, allow_if_no_acl: bool = False):
    async def outer():
        async with Controller() as c:
            return await body(Authorized(c, enabled, allow_if_no_acl))
    return run(outer())


def registration(broker_id: int = 1):
    R = M.BrokerRegistrationRequest
    return R(broker_id=broker_id, cluster_id=CLUSTER_ID, incarnation_id=bytes([broker_id]) * 16,
             listeners=[R.Listener(name="PLAINTEXT", host=HOST, port=closed_port())],
             features=registration_features())


def heartbeat(broker_id: int, epoch: int, image):
    return M.BrokerHeartbeatRequest(broker_id=broker_id, broker_epoch=epoch,
                                    current_metadata_offset=image.last_offset)


def create_topics(*names: str):
    R = M.CreateTopicsRequest
    return R(topics=[R.CreatableTopic(name=n, num_partitions=1, replication_factor=1) for n in names],
             timeout_ms=5000)


async def registered(a: Authorized, principal: str = ADMIN) -> None:
    """Broker 1 registered and unfenced, so topics can be placed."""
    response = await a.ask(principal, 62, 3, registration(1))
    assert response.error_code == Error.NONE
    answer = await a.ask(principal, 63, 1, heartbeat(1, response.broker_epoch, a.c.image))
    assert answer.error_code == Error.NONE and answer.is_fenced is False


# ---- what brokers and controllers send each other: CLUSTER_ACTION ---------------------------------

def test_a_broker_principal_without_cluster_action_gets_cluster_authorization_failed_on_broker_heartbeat():
    async def body(a):
        registered_as = await a.ask(BROKER, 62, 3, registration(1))
        beat = await a.ask(BROKER, 63, 1, heartbeat(1, 0, a.c.image))
        return registered_as.error_code, beat.error_code, dict(a.c.image.brokers)
    registered_as, beat, brokers = scenario(body)
    assert (registered_as, beat, brokers) == (Error.CLUSTER_AUTHORIZATION_FAILED,
                                              Error.CLUSTER_AUTHORIZATION_FAILED, {})


def test_a_super_user_broker_registers_and_heartbeats_without_any_acl():
    async def body(a):
        await registered(a, ADMIN)
        return a.c.image.brokers[1].fenced
    assert scenario(body) is False


def test_cluster_action_on_the_cluster_lets_a_broker_register_and_heartbeat():
    async def body(a):
        await a.allow(BROKER, CLUSTER_ACTION)
        await registered(a, BROKER)
        return a.c.image.brokers[1].fenced
    assert scenario(body) is False


def test_a_deny_of_cluster_action_overrides_an_allow_of_all_for_a_broker():
    async def body(a):
        await a.allow(BROKER, 2)  # ALL
        await a.allow(BROKER, CLUSTER_ACTION, permission=DENY)
        return (await a.ask(BROKER, 62, 3, registration(1))).error_code
    assert scenario(body) == Error.CLUSTER_AUTHORIZATION_FAILED


def test_raft_vote_and_fetch_between_controllers_need_cluster_action():
    # Refused before the request is looked at: raft's answer with the error at its top.
    async def body(a):
        refused_vote = await a.ask(BROKER, wire.VOTE, 2, M.REQUESTS[wire.VOTE].cls())
        refused_fetch = await a.ask(BROKER, 1, 17, M.REQUESTS[1].cls())
        return refused_vote, refused_fetch
    vote, fetch = scenario(body)
    assert vote.error_code == Error.CLUSTER_AUTHORIZATION_FAILED
    assert fetch.error_code == Error.CLUSTER_AUTHORIZATION_FAILED


# ---- administration of the cluster ----------------------------------------------------------------

def describe_acls_request():
    return M.DescribeAclsRequest(resource_type_filter=ANY_RESOURCE, resource_name_filter=None,
                                 pattern_type_filter=PATTERN_ANY, principal_filter=None, host_filter=None,
                                 operation=OP_ANY, permission_type=PERMISSION_ANY)


def test_describe_acls_on_a_controller_without_an_authorizer_answers_security_disabled():
    async def body(a):
        C = M.CreateAclsRequest
        described = await a.ask(BROKER, 29, 3, describe_acls_request())
        created = await a.ask(BROKER, 30, 3, C(creations=[C.AclCreation(
            resource_type=TOPIC, resource_name="t", resource_pattern_type=LITERAL, principal="User:alice",
            host="*", operation=ALTER, permission_type=ALLOW)]))
        D = M.DeleteAclsRequest
        deleted = await a.ask(BROKER, 31, 3, D(filters=[D.DeleteAclsFilter(
            resource_type_filter=ANY_RESOURCE, resource_name_filter=None, pattern_type_filter=PATTERN_ANY,
            principal_filter=None, host_filter=None, operation=OP_ANY, permission_type=PERMISSION_ANY)]))
        return described, created, deleted, dict(a.c.image.acls)
    described, created, deleted, acls = scenario(body, enabled=False)
    assert described.error_code == Error.SECURITY_DISABLED
    assert [r.error_code for r in created.results] == [Error.SECURITY_DISABLED]
    assert [r.error_code for r in deleted.filter_results] == [Error.SECURITY_DISABLED]
    assert acls == {}


def test_create_acls_needs_alter_and_describe_acls_describe_on_the_cluster_alter_implying_describe():
    async def body(a):
        C = M.CreateAclsRequest
        creation = C(creations=[C.AclCreation(
            resource_type=TOPIC, resource_name="t", resource_pattern_type=LITERAL, principal="User:bob",
            host="*", operation=ALTER, permission_type=ALLOW)])
        refused = await a.ask("User:alice", 30, 3, creation)
        undescribed = await a.ask("User:alice", 29, 3, describe_acls_request())
        await a.allow("User:alice", ALTER)
        created = await a.ask("User:alice", 30, 3, creation)
        described = await a.ask("User:alice", 29, 3, describe_acls_request())
        return refused, undescribed, created, described
    refused, undescribed, created, described = scenario(body)
    assert [r.error_code for r in refused.results] == [Error.CLUSTER_AUTHORIZATION_FAILED]
    assert undescribed.error_code == Error.CLUSTER_AUTHORIZATION_FAILED
    assert [r.error_code for r in created.results] == [Error.NONE]
    assert described.error_code == Error.NONE
    assert {r.resource_name for r in described.resources} == {"t", CLUSTER_NAME}


def test_describe_quorum_needs_describe_on_the_cluster():
    async def body(a):
        R = M.DescribeQuorumRequest
        request = R(topics=[R.TopicData(topic_name=wire.METADATA_TOPIC,
                                        partitions=[R.TopicData.PartitionData(partition_index=0)])])
        refused = await a.ask("User:alice", wire.DESCRIBE_QUORUM, 2, request)
        await a.allow("User:alice", DESCRIBE)
        return refused, await a.ask("User:alice", wire.DESCRIBE_QUORUM, 2, request)
    refused, described = scenario(body)
    assert refused.error_code == Error.CLUSTER_AUTHORIZATION_FAILED
    assert described.error_code == Error.NONE and described.topics[0].partitions[0].leader_id == 1


def feature_levels(c: Controller) -> list[tuple[str, int]]:
    """The FeatureLevelRecords in the controller's metadata log, in order."""
    found = []
    for entry in c.raft.log.entries:
        if isinstance(entry.value, (bytes, bytearray, memoryview)):
            record = decode_record(entry.value)[2]
            if isinstance(record, M.FeatureLevelRecord):
                found.append((record.name, record.feature_level))
    return found


def test_update_features_needs_alter_on_the_cluster_and_writes_nothing_without_it():
    # Kafka's ControllerApis.handleUpdateFeatures: ALTER on the cluster before the
    # FeatureControlManager sees the request.
    R = M.UpdateFeaturesRequest
    request = R(feature_updates=[R.FeatureUpdateKey(feature="transaction.version", max_version_level=0,
                                                    upgrade_type=2)])  # SAFE_DOWNGRADE

    async def body(a):
        await eventually(lambda: "transaction.version" in a.c.image.features, what="the bootstrap features")
        before = feature_levels(a.c)
        refused = await a.ask("User:alice", 57, 1, request)
        after_refusal = feature_levels(a.c), dict(a.c.image.features)
        await a.allow("User:alice", ALTER)
        taken = await a.ask("User:alice", 57, 1, request)
        return before, refused, after_refusal, taken, feature_levels(a.c), dict(a.c.image.features)
    before, refused, (levels, features), taken, levels_after, features_after = scenario(body)
    assert refused.error_code == Error.CLUSTER_AUTHORIZATION_FAILED
    assert levels == before and features["transaction.version"] == 2
    assert taken.error_code == Error.NONE
    assert [(r.feature, r.error_code) for r in taken.results] == [("transaction.version", Error.NONE)]
    assert levels_after == before + [("transaction.version", 0)]
    assert "transaction.version" not in features_after


def test_a_forwarding_broker_with_cluster_action_passes_the_admin_checks():
    # Brokers authorize a client's admin request themselves and forward it on their own
    # connection, as Kafka's Envelope lets a CLUSTER_ACTION principal act for a client.
    async def body(a):
        await a.allow(BROKER, CLUSTER_ACTION)
        await registered(a, BROKER)
        created = await a.ask(BROKER, 19, 7, create_topics("orders"))
        described = await a.ask(BROKER, 29, 3, describe_acls_request())
        return created, described
    created, described = scenario(body)
    assert [(t.name, t.error_code) for t in created.topics] == [("orders", Error.NONE)]
    assert described.error_code == Error.NONE


# ---- per resource ---------------------------------------------------------------------------------

def test_create_topics_needs_create_on_the_cluster_or_on_each_topic():
    async def body(a):
        await registered(a)
        await a.allow("User:alice", CREATE, TOPIC, "orders-", PREFIXED)
        mixed = await a.ask("User:alice", 19, 7, create_topics("orders-1", "payments"))
        await a.allow("User:bob", CREATE)
        anywhere = await a.ask("User:bob", 19, 7, create_topics("payments"))
        return mixed, anywhere, sorted(a.c.image.topics)
    mixed, anywhere, topics = scenario(body)
    assert {t.name: t.error_code for t in mixed.topics} == {
        "orders-1": Error.NONE, "payments": Error.TOPIC_AUTHORIZATION_FAILED}
    assert [(t.name, t.error_code) for t in anywhere.topics] == [("payments", Error.NONE)]
    assert topics == ["orders-1", "payments"]


def test_a_created_topics_configs_are_returned_only_with_describe_configs_on_it():
    async def body(a):
        await registered(a)
        await a.allow("User:alice", CREATE, TOPIC, "orders-", PREFIXED)
        hidden = await a.ask("User:alice", 19, 7, create_topics("orders-1"))
        await a.allow("User:alice", ALTER_CONFIGS, TOPIC, "orders-", PREFIXED)  # implies DESCRIBE_CONFIGS
        shown = await a.ask("User:alice", 19, 7, create_topics("orders-2"))
        return hidden.topics[0], shown.topics[0]
    hidden, shown = scenario(body)
    assert hidden.error_code == Error.NONE
    assert (hidden.topic_config_error_code, hidden.configs) == (Error.TOPIC_AUTHORIZATION_FAILED, [])
    assert shown.topic_config_error_code == Error.NONE


def test_delete_topics_needs_describe_and_delete_on_each_topic_and_hides_a_name_not_described():
    async def body(a):
        await registered(a)
        await a.ask(ADMIN, 19, 7, create_topics("orders", "secret", "audit"))
        ids = {name: t.topic_id for name, t in a.c.image.topics.items()}
        await a.allow("User:alice", DELETE, TOPIC, "orders")
        await a.allow("User:alice", DESCRIBE, TOPIC, "audit")
        R = M.DeleteTopicsRequest
        response = await a.ask("User:alice", 20, 6, R(topics=[
            R.DeleteTopicState(name="orders", topic_id=bytes(16)),
            R.DeleteTopicState(name=None, topic_id=ids["secret"]),
            R.DeleteTopicState(name=None, topic_id=ids["audit"])], timeout_ms=5000))
        return response, sorted(a.c.image.topics), ids
    response, left, ids = scenario(body)
    by_id = {r.topic_id: (r.name, r.error_code) for r in response.responses}
    assert by_id[ids["orders"]] == ("orders", Error.NONE)
    assert by_id[ids["secret"]] == (None, Error.TOPIC_AUTHORIZATION_FAILED)
    assert by_id[ids["audit"]] == ("audit", Error.TOPIC_AUTHORIZATION_FAILED)
    assert left == ["audit", "secret"]


def test_create_partitions_needs_alter_on_each_topic():
    async def body(a):
        await registered(a)
        await a.ask(ADMIN, 19, 7, create_topics("orders", "payments"))
        await a.allow("User:alice", ALTER, TOPIC, "orders")
        R = M.CreatePartitionsRequest
        response = await a.ask("User:alice", 37, 3, R(topics=[
            R.CreatePartitionsTopic(name=n, count=2, assignments=None) for n in ("orders", "payments")],
            timeout_ms=5000, validate_only=False))
        return response, {n: len(t.partitions) for n, t in a.c.image.topics.items()}
    response, counts = scenario(body)
    assert {r.name: r.error_code for r in response.results} == {
        "orders": Error.NONE, "payments": Error.TOPIC_AUTHORIZATION_FAILED}
    assert counts == {"orders": 2, "payments": 1}


def test_incremental_alter_configs_needs_alter_configs_on_the_topic_the_group_or_the_cluster():
    async def body(a):
        await registered(a)
        await a.ask(ADMIN, 19, 7, create_topics("orders", "payments"))
        await a.allow("User:alice", ALTER_CONFIGS, TOPIC, "orders")
        R = M.IncrementalAlterConfigsRequest
        A = R.AlterConfigsResource

        def resource(resource_type, name, config):
            return A(resource_type=resource_type, resource_name=name, configs=[
                A.AlterableConfig(name=config, config_operation=0, value="60000")])
        response = await a.ask("User:alice", 44, 1, R(resources=[
            resource(2, "orders", "retention.ms"), resource(2, "payments", "retention.ms"),
            resource(32, "g", "consumer.session.timeout.ms"), resource(4, "1", "log.retention.ms")],
            validate_only=True))
        return response
    response = scenario(body)
    assert {(r.resource_type, r.resource_name): r.error_code for r in response.responses} == {
        (2, "orders"): Error.NONE, (2, "payments"): Error.TOPIC_AUTHORIZATION_FAILED,
        (32, "g"): Error.GROUP_AUTHORIZATION_FAILED, (4, "1"): Error.CLUSTER_AUTHORIZATION_FAILED}


def test_describe_configs_on_a_controller_needs_describe_configs_on_the_cluster_or_the_topic():
    # Kafka's ConfigHelper: a broker's and a broker logger's configs are the cluster's, a topic's
    # the topic's; each refused alone with its type's error and Errors' message.
    def request():
        R = M.DescribeConfigsRequest
        D = R.DescribeConfigsResource
        return R(resources=[D(resource_type=t, resource_name=n, configuration_keys=None)
                            for t, n in ((4, "1"), (8, "1"), (2, "orders"), (2, "payments"))],
                 include_synonyms=False, include_documentation=False)

    async def body(a):
        await registered(a)
        await a.ask(ADMIN, 19, 7, create_topics("orders", "payments"))
        await a.allow("User:alice", DESCRIBE_CONFIGS, TOPIC, "orders")
        refused = await a.ask("User:alice", 32, 4, request())
        await a.allow("User:alice", DESCRIBE_CONFIGS)
        allowed = await a.ask("User:alice", 32, 4, request())
        return refused, allowed
    refused, allowed = scenario(body)
    assert {(r.resource_type, r.resource_name): (r.error_code, r.error_message) for r in refused.results
            if r.error_code} == {
        (4, "1"): (Error.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed."),
        (8, "1"): (Error.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed."),
        (2, "payments"): (Error.TOPIC_AUTHORIZATION_FAILED, "Topic authorization failed.")}
    assert [r.resource_name for r in refused.results if not r.error_code] == ["orders"]
    assert [r.configs for r in refused.results if r.error_code] == [[], [], []]
    assert {(r.resource_type, r.resource_name): r.error_code for r in allowed.results} == {
        (4, "1"): Error.NONE, (8, "1"): Error.NONE, (2, "orders"): Error.NONE,
        (2, "payments"): Error.TOPIC_AUTHORIZATION_FAILED}


def test_altering_a_controllers_loggers_needs_cluster_action_not_alter_configs():
    # Kafka's ControllerApis hands a BROKER_LOGGER resource to its RuntimeLoggerManager with
    # CLUSTER_ACTION on the cluster; ALTER_CONFIGS on the cluster is not enough.
    def request():
        R = M.IncrementalAlterConfigsRequest
        A = R.AlterConfigsResource
        return R(resources=[A(resource_type=8, resource_name="1", configs=[
            A.AlterableConfig(name="strom.controller", config_operation=0, value="DEBUG")])],
                 validate_only=True)

    async def body(a):
        await a.allow("User:alice", ALTER_CONFIGS)
        refused = await a.ask("User:alice", 44, 1, request())
        await a.allow("User:bob", CLUSTER_ACTION)
        allowed = await a.ask("User:bob", 44, 1, request())
        return refused, allowed
    refused, allowed = scenario(body)
    assert [(r.resource_type, r.error_code, r.error_message) for r in refused.responses] == [
        (8, Error.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.")]
    assert [(r.resource_type, r.error_code) for r in allowed.responses] == [(8, Error.NONE)]


def test_allow_everyone_if_no_acl_found_lets_brokers_in_until_an_acl_names_the_cluster():
    async def body(a):
        first = (await a.ask(BROKER, 62, 3, registration(1))).error_code
        await a.allow("User:alice", DESCRIBE)
        then = (await a.ask(BROKER, 62, 3, registration(2))).error_code
        return first, then
    assert scenario(body, allow_if_no_acl=True) == (Error.NONE, Error.CLUSTER_AUTHORIZATION_FAILED)


# ---- every refusal in its API's own shape -----------------------------------------------------

SERVED = {19, 20, 29, 30, 31, 32, 37, 43, 44, 45, 46, 49, 50, 51, 56, 57, 60, 62, 63, 64, 67, *wire.VERSIONS}


@pytest.mark.parametrize("api_key", sorted(SERVED))
def test_a_refused_request_is_answered_in_its_apis_shape_at_every_version(api_key):
    # Never a dropped connection: the answer encodes at each version served.
    name = M.API_NAMES[api_key]
    assert name in CONTROLLER_RULES, f"{name} has a rule"
    versions = M.REQUESTS[api_key].message.versions
    request = M.REQUESTS[api_key].cls()
    for field in ("topics", "resources", "creations", "filters", "deletions", "upsertions", "entries"):
        if field in request._fields:
            setattr(request, field, [])
    if "topic_names" in request._fields:
        request.topic_names = []
    for version in range(versions.lo, versions.hi + 1):
        answer = error_response(api_key, version, request, Error.CLUSTER_AUTHORIZATION_FAILED, "refused")
        assert encode_response(api_key, version, 7, answer)
