"""Config changes at the broker: BROKER resources answered here as Kafka's ConfigAdminManager
preprocesses them (no broker property is dynamic here), the rest forwarded to the controller
and the answers put back in the request's order; DescribeConfigs of a group (KIP-848)."""
import asyncio
from types import SimpleNamespace

from broker.handlers.admin import AdminApis
from controller.config_control import ConfigControl
from metadata.configs import APPEND, BROKER_RESOURCE, DELETE, GROUP_RESOURCE, SET, SUBTRACT
from protocol import messages as M
from protocol.context import RequestContext
from protocol.errors import Error
from protocol.headers import RequestHeader
from strom.config import ServerConfig
from tests.broker.replica_nodes import TOPIC, Cluster

from .test_config import BASE

GROUP, BROKER = GROUP_RESOURCE, BROKER_RESOURCE
GROUP_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG, INT = 8, 4, 5, 3
Inc = M.IncrementalAlterConfigsRequest


class Follower:
    """Forwards to a controller's config manager over the same image, as the active controller
    would decide it, and counts what reached it."""

    def __init__(self, image):
        self.image, self.control, self.forwarded = image, ConfigControl(), []

    async def forward(self, key, version, req):
        assert key == 44
        self.forwarded.append(req)
        result = self.control.incremental_alter_configs(self.image, req)
        for offset, record in enumerate(result.records, self.image.last_offset + 1):
            self.image.replay(offset, record)
        return result.response

    async def wait_for_change(self, timeout):
        pass


def broker_node(props=None):
    cluster = Cluster(brokers=(1,))
    cluster.create_topic(replicas=(1,))
    return SimpleNamespace(image=cluster.image, config=ServerConfig({**BASE, **(props or {})}), node_id=1,
                           follower=Follower(cluster.image), topic_log_config=None)


def call(broker, key, version, request):
    handlers = AdminApis(node_id=broker.node_id, config=broker.config, image=lambda: broker.image,
                         controller=broker.follower, topic_log_config=broker.topic_log_config, replicas=None)
    api = {a.key: a for a in handlers.apis()}[key]
    return asyncio.run(api.fn(RequestContext(RequestHeader(key, version, 1, "test", 2)), request))


def incremental(broker, *resources):
    request = Inc(resources=[Inc.AlterConfigsResource(resource_type=t, resource_name=n, configs=[
        Inc.AlterConfigsResource.AlterableConfig(name=k, config_operation=op, value=v) for k, op, v in ops])
        for t, n, ops in resources], validate_only=False)
    return [(r.resource_type, r.resource_name, r.error_code, r.error_message)
            for r in call(broker, 44, 1, request).responses]


def test_append_to_a_non_list_broker_config_is_invalid_config_as_kafka_says():
    broker = broker_node()
    assert incremental(broker, (BROKER, "1", [("num.partitions", APPEND, "2")])) == [(
        BROKER, "1", Error.INVALID_CONFIG,
        "Config value append is not allowed for config key: num.partitions")]
    assert incremental(broker, (BROKER, "", [("log.retention.ms", SUBTRACT, "2")])) == [(
        BROKER, "", Error.INVALID_CONFIG,
        "Config value subtract is not allowed for config key: log.retention.ms")]
    assert broker.follower.forwarded == []


def test_a_broker_config_that_is_not_dynamic_is_refused_as_kafka_refuses_it():
    broker = broker_node()
    refused = "Cannot update these configs dynamically: Set(num.partitions)"
    assert incremental(broker, (BROKER, "1", [("log.cleanup.policy", APPEND, "compact"),
                                              ("num.partitions", SET, "3")])) == [
        (BROKER, "1", Error.INVALID_REQUEST, refused)]
    assert broker.follower.forwarded == []
    assert broker.image.configs.get((BROKER, "1")) is None


def test_a_dynamic_broker_config_goes_to_the_controller_and_describes_as_dynamic():
    broker = broker_node({"log.retention.ms": "5000"})
    assert incremental(broker, (BROKER, "", [("log.retention.ms", SET, "7000")]),
                       (BROKER, "1", [("message.max.bytes", SET, "2048")])) == [
        (BROKER, "", Error.NONE, None), (BROKER, "1", Error.NONE, None)]
    assert broker.image.configs[(BROKER, "")] == {"log.retention.ms": "7000"}
    D = M.DescribeConfigsRequest
    result = call(broker, 32, 4, D(resources=[D.DescribeConfigsResource(
        resource_type=BROKER, resource_name="1",
        configuration_keys=["log.retention.ms", "message.max.bytes"])],
        include_synonyms=True)).results[0]
    retention, max_bytes = result.configs
    assert (retention.value, retention.config_source, retention.read_only) == ("7000", 3, False)
    assert [(s.source, s.value) for s in retention.synonyms] == [(3, "7000"), (STATIC_BROKER_CONFIG, "5000")]
    assert (max_bytes.value, max_bytes.config_source) == ("2048", 2)
    default = call(broker, 32, 4, D(resources=[D.DescribeConfigsResource(
        resource_type=BROKER, resource_name="", configuration_keys=None)], include_synonyms=True)).results[0]
    assert [(c.name, c.value, c.config_source) for c in default.configs] == [("log.retention.ms", "7000", 3)]


def test_a_broker_resource_must_name_this_broker():
    broker = broker_node()
    assert incremental(broker, (BROKER, "2", [("num.partitions", DELETE, None)]),
                       (BROKER, "x", [("num.partitions", DELETE, None)])) == [
        (BROKER, "2", Error.INVALID_REQUEST, "Unexpected broker id, expected 1, but received 2"),
        (BROKER, "x", Error.INVALID_REQUEST, "Node id must be an integer, but it is: x")]


def test_answers_come_back_in_the_requests_order_with_only_the_rest_forwarded():
    broker = broker_node()
    answers = incremental(broker, (GROUP, "g", [("consumer.session.timeout.ms", SET, "50000")]),
                          (BROKER, "1", [("num.partitions", SET, "3")]),
                          (2, TOPIC, [("cleanup.policy", APPEND, "compact")]))
    assert [(t, n, code) for t, n, code, _ in answers] == [
        (GROUP, "g", Error.NONE), (BROKER, "1", Error.INVALID_REQUEST), (2, TOPIC, Error.NONE)]
    (forwarded,) = broker.follower.forwarded
    assert [r.resource_type for r in forwarded.resources] == [GROUP, 2]
    assert broker.image.topic_config(TOPIC) == {"cleanup.policy": "delete,compact"}


def test_legacy_alter_configs_replaces_a_groups_whole_set_of_configs():
    broker = broker_node()
    incremental(broker, (GROUP, "g", [("consumer.session.timeout.ms", SET, "50000")]))
    A = M.AlterConfigsRequest
    request = A(resources=[A.AlterConfigsResource(resource_type=GROUP, resource_name="g", configs=[
        A.AlterConfigsResource.AlterableConfig(name="consumer.heartbeat.interval.ms", value="6000")])],
        validate_only=False)
    (answer,) = call(broker, 33, 1, request).responses
    assert answer.error_code == Error.NONE
    assert broker.image.group_config("g") == {"consumer.heartbeat.interval.ms": "6000"}


def describe_group(broker, group, names=None, synonyms=False):
    R = M.DescribeConfigsRequest
    request = R(resources=[R.DescribeConfigsResource(resource_type=GROUP, resource_name=group,
                                                     configuration_keys=names)],
                include_synonyms=synonyms, include_documentation=False)
    (result,) = call(broker, 32, 4, request).results
    return result


def test_describe_configs_of_a_group_gives_its_own_value_else_the_brokers_with_the_source():
    broker = broker_node({"group.consumer.heartbeat.interval.ms": "4000",
                          "group.consumer.min.heartbeat.interval.ms": "1000"})
    incremental(broker, (GROUP, "g", [("consumer.session.timeout.ms", SET, "50000")]))
    result = describe_group(broker, "g")
    assert result.error_code == Error.NONE
    assert {c.name: (c.value, c.config_source, c.config_type, c.read_only) for c in result.configs} == {
        "consumer.session.timeout.ms": ("50000", GROUP_CONFIG, INT, False),
        "consumer.heartbeat.interval.ms": ("4000", STATIC_BROKER_CONFIG, INT, False)}
    other = describe_group(broker, "never-seen", names=["consumer.session.timeout.ms", "no.such"])
    assert [(c.name, c.value, c.config_source) for c in other.configs] == [
        ("consumer.session.timeout.ms", "45000", DEFAULT_CONFIG)]


def test_describe_configs_of_a_group_lists_synonyms_from_the_most_specific():
    broker = broker_node({"group.consumer.session.timeout.ms": "50000"})
    incremental(broker, (GROUP, "g", [("consumer.session.timeout.ms", SET, "55000")]))
    (entry,) = describe_group(broker, "g", names=["consumer.session.timeout.ms"], synonyms=True).configs
    assert [(s.name, s.value, s.source) for s in entry.synonyms] == [
        ("consumer.session.timeout.ms", "55000", GROUP_CONFIG),
        ("group.consumer.session.timeout.ms", "50000", STATIC_BROKER_CONFIG),
        ("group.consumer.session.timeout.ms", "45000", DEFAULT_CONFIG)]


def test_describe_configs_of_the_default_group_is_refused():
    result = describe_group(broker_node(), "")
    assert (result.error_code, result.error_message) == (Error.INVALID_REQUEST,
                                                         "Group name must not be empty")
