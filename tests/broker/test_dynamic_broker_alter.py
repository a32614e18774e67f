"""A broker's preprocessing of its dynamic configs beyond the topic defaults, as Kafka's
ConfigAdminManager with DynamicBrokerConfig.validate: a thread count may change by at most a
factor of two from this broker's current value (else INVALID_REQUEST with Kafka's message,
never forwarded); the change reaches the image through the controller, and DescribeConfigs
lists these configs as not read-only with their dynamic source."""
from metadata.configs import BROKER_RESOURCE, SET
from protocol import messages as M
from protocol.errors import Error

from .test_config_alter import broker_node, call, incremental

BROKER = BROKER_RESOURCE
DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG = 2, 3


def test_a_thread_count_within_half_and_double_goes_to_the_controller():
    broker = broker_node()
    assert incremental(broker, (BROKER, "", [("num.io.threads", SET, "16"),
                                             ("log.cleaner.threads", SET, "2")]),
                       (BROKER, "1", [("num.replica.fetchers", SET, "2")])) == [
        (BROKER, "", Error.NONE, None), (BROKER, "1", Error.NONE, None)]
    assert broker.image.configs[(BROKER, "")] == {"num.io.threads": "16", "log.cleaner.threads": "2"}
    assert broker.image.configs[(BROKER, "1")] == {"num.replica.fetchers": "2"}


def test_a_thread_count_more_than_doubled_is_refused_against_the_current_value():
    broker = broker_node({"num.network.threads": "3"})
    assert incremental(broker, (BROKER, "1", [("num.network.threads", SET, "7")])) == [(
        BROKER, "1", Error.INVALID_REQUEST, "Dynamic thread count update validation failed for "
        "num.network.threads=7, value should not be greater than double the current value 3")]
    assert broker.follower.forwarded == []
    assert incremental(broker, (BROKER, "", [("num.network.threads", SET, "6")])) == [
        (BROKER, "", Error.NONE, None)]
    # the current value is now the cluster default's 6: 12 is double it
    assert incremental(broker, (BROKER, "1", [("num.network.threads", SET, "12")])) == [
        (BROKER, "1", Error.NONE, None)]
    assert incremental(broker, (BROKER, "", [("log.cleaner.threads", SET, "3")])) == [(
        BROKER, "", Error.INVALID_REQUEST,
        "Log cleaner threads cannot be increased to more than double the current value 1")]


def test_connection_limits_are_dynamic_and_describe_as_not_read_only():
    broker = broker_node()
    assert incremental(broker, (BROKER, "", [("max.connections", SET, "500")]),
                       (BROKER, "1", [("max.connection.creation.rate", SET, "20")])) == [
        (BROKER, "", Error.NONE, None), (BROKER, "1", Error.NONE, None)]
    D = M.DescribeConfigsRequest
    request = D(resources=[D.DescribeConfigsResource(
        resource_type=BROKER, resource_name="1",
        configuration_keys=["max.connections", "max.connection.creation.rate", "num.io.threads",
                            "log.cleaner.backoff.ms", "socket.request.max.bytes"])],
        include_synonyms=False, include_documentation=False)
    entries = {c.name: (c.value, c.read_only, c.config_source)
               for c in call(broker, 32, 4, request).results[0].configs}
    assert entries["max.connections"] == ("500", False, DYNAMIC_DEFAULT_BROKER_CONFIG)
    assert entries["max.connection.creation.rate"] == ("20", False, DYNAMIC_BROKER_CONFIG)
    assert entries["num.io.threads"][1] is False
    assert entries["log.cleaner.backoff.ms"][1] is False
    assert entries["socket.request.max.bytes"][1] is True, "not dynamic: read only"


def test_max_connections_per_ip_may_be_zero_only_with_overrides_as_kafkas_config_requires():
    broker = broker_node()
    refused = ("requirement failed: max.connections.per.ip can be set to zero only if "
               "max.connections.per.ip.overrides property is set.")
    assert incremental(broker, (BROKER, "", [("max.connections.per.ip", SET, "0")])) == [
        (BROKER, "", Error.INVALID_REQUEST, refused)]
    assert broker.follower.forwarded == []
    assert incremental(broker, (BROKER, "", [("max.connections.per.ip", SET, "0"),
                                             ("max.connections.per.ip.overrides", SET, "10.0.0.1:5")])) == [
        (BROKER, "", Error.NONE, None)]
    assert incremental(broker, (BROKER, "1", [("max.connections.per.ip.overrides", SET, "")])) == [
        (BROKER, "1", Error.INVALID_REQUEST, refused)], "this broker's own value over the default's"
