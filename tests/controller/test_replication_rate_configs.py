"""The replication quotas' rates as dynamic broker configs, as Kafka's DynamicReplicationConfig:
leader.replication.throttled.rate, follower.replication.throttled.rate and
replica.alter.log.dirs.io.max.bytes.per.second, LONG at least 0, for a broker id or the
cluster default, each a ConfigRecord of the BROKER resource."""
import pytest

from metadata.configs import APPEND, BROKER_RESOURCE, DELETE, SET
from protocol.errors import Error
from tests.controller.scenario import Scenario
from tests.controller.scenario import broker_configs as resource

BROKER = BROKER_RESOURCE
OK = [(Error.NONE, None)]
RATES = ("leader.replication.throttled.rate", "follower.replication.throttled.rate",
         "replica.alter.log.dirs.io.max.bytes.per.second")




@pytest.fixture
def s():
    return Scenario(brokers=2)


@pytest.mark.parametrize("name", RATES)
def test_a_replication_rate_is_updated_dynamically_for_a_broker_or_the_cluster_default(s, name):
    assert s.alter_configs(resource("1", (name, SET, "1048576"))) == OK
    assert s.alter_configs(resource("", (name, SET, "0"))) == OK
    assert s.image.configs[(BROKER, "1")] == {name: "1048576"}
    assert s.image.configs[(BROKER, "")] == {name: "0"}
    assert s.alter_configs(resource("1", (name, DELETE, None))) == OK
    assert s.image.configs.get((BROKER, "1")) is None


def test_kafka_reassign_partitions_throttle_sets_both_rates_of_a_broker_in_one_request(s):
    assert s.alter_configs(resource("2", (RATES[0], SET, "5000"), (RATES[1], SET, "5000"))) == OK
    assert s.image.configs[(BROKER, "2")] == {RATES[0]: "5000", RATES[1]: "5000"}


@pytest.mark.parametrize("value,message", [
    ("-1", "Invalid value -1 for configuration leader.replication.throttled.rate: Value must be at least 0"),
    ("fast", "Invalid value fast for configuration leader.replication.throttled.rate: "
             "Not a number of type LONG"),
    ("9223372036854775808", "Invalid value 9223372036854775808 for configuration "
                            "leader.replication.throttled.rate: Not a number of type LONG"),
])
def test_a_replication_rate_is_a_long_of_at_least_zero_else_kafkas_invalid_config(s, value, message):
    assert s.alter_configs(resource("1", (RATES[0], SET, value))) == [(Error.INVALID_CONFIG, message)]
    assert s.image.configs.get((BROKER, "1")) is None


def test_a_replication_rate_takes_no_append_as_it_is_not_a_list(s):
    code, message = s.alter_configs(resource("", (RATES[1], APPEND, "1")))[0]
    assert (code, message) == (Error.INVALID_CONFIG,
                               "Config value append is not allowed for config key: "
                               "follower.replication.throttled.rate")
