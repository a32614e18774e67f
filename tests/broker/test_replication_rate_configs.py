"""The replication quotas' rates at the broker: a change of leader/follower.replication.throttled.rate
or replica.alter.log.dirs.io.max.bytes.per.second passes the broker's preprocessing (it goes to
the controller), and DescribeConfigs of a broker lists each as a dynamic LONG whose default is
Long.MAX_VALUE, then the cluster default's and the broker's own value from the image."""
import asyncio

from broker.handlers.admin import AdminApis
from metadata.configs import APPEND, BROKER_RESOURCE, SET
from protocol import messages as M
from protocol.context import RequestContext
from protocol.headers import RequestHeader
from strom.config import ServerConfig
from tests.broker.replica_nodes import Cluster

from .test_config import BASE

DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG, DEFAULT_CONFIG, LONG = 2, 3, 5, 5
RATES = ("leader.replication.throttled.rate", "follower.replication.throttled.rate",
         "replica.alter.log.dirs.io.max.bytes.per.second")


def handlers(cluster: Cluster) -> AdminApis:
    return AdminApis(node_id=1, config=ServerConfig(dict(BASE)), image=lambda: cluster.image, controller=None,
                     topic_log_config=None, replicas=None)


def described(cluster: Cluster) -> dict:
    api = {a.key: a for a in handlers(cluster).apis()}[32]
    R = M.DescribeConfigsRequest
    request = R(resources=[R.DescribeConfigsResource(resource_type=BROKER_RESOURCE, resource_name="1",
                                                     configuration_keys=None)],
                include_synonyms=False, include_documentation=False)
    (result,) = asyncio.run(api.fn(RequestContext(RequestHeader(32, 4, 1, "test", 2)), request)).results
    return {c.name: (c.value, c.config_source, c.config_type, c.read_only) for c in result.configs}


def preprocessed(*ops) -> dict:
    R = M.IncrementalAlterConfigsRequest
    req = R(resources=[R.AlterConfigsResource(resource_type=BROKER_RESOURCE, resource_name="1", configs=[
        R.AlterConfigsResource.AlterableConfig(name=n, config_operation=op, value=v) for n, op, v in ops])])
    return handlers(Cluster(brokers=(1,)))._broker_resources(req)


def test_a_replication_rate_change_is_not_refused_as_static_and_goes_to_the_controller():
    assert preprocessed(*[(n, SET, "1000") for n in RATES]) == {}


def test_append_to_a_replication_rate_is_refused_as_kafka_refuses_it_for_a_long():
    assert preprocessed((RATES[0], APPEND, "1")) == {0: (40, "Config value append is not allowed for config "
                                                              "key: leader.replication.throttled.rate")}


def test_describe_configs_of_a_broker_gives_each_replication_rate_its_default_then_its_dynamic_value():
    cluster = Cluster(brokers=(1,))
    for name in RATES:
        assert described(cluster)[name] == (str(2**63 - 1), DEFAULT_CONFIG, LONG, False)
    cluster.image.configs[(BROKER_RESOURCE, "")] = {RATES[0]: "2000"}
    cluster.image.configs[(BROKER_RESOURCE, "1")] = {RATES[1]: "1000"}
    now = described(cluster)
    assert now[RATES[0]] == ("2000", DYNAMIC_DEFAULT_BROKER_CONFIG, LONG, False)
    assert now[RATES[1]] == ("1000", DYNAMIC_BROKER_CONFIG, LONG, False)
