"""The broker properties Kafka changes without a restart beyond the topic defaults and the
replication rates: the log cleaner's (LogCleaner.ReconfigurableConfigs), the thread pools'
(DynamicThreadPool, num.network.threads) and the connection limits
(SocketServer.ReconfigurableConfigs), each a ConfigRecord of the BROKER resource once valid as
Kafka's ConfigDef types it; any other broker property stays "Cannot update these configs
dynamically"."""
import pytest

from metadata.configs import APPEND, BROKER_RESOURCE, SERVICE_CONFIGS, SET, check_thread_count
from protocol.errors import Error
from tests.controller.scenario import Scenario
from tests.controller.scenario import broker_configs as resource

BROKER = BROKER_RESOURCE
OK = [(Error.NONE, None)]




@pytest.fixture
def s():
    return Scenario(brokers=2)


@pytest.mark.parametrize("name,value", [
    ("log.cleaner.threads", "2"), ("log.cleaner.io.max.bytes.per.second", "1048576.0"),
    ("log.cleaner.dedupe.buffer.size", "67108864"), ("log.cleaner.io.buffer.size", "65536"),
    ("log.cleaner.io.buffer.load.factor", "0.8"), ("log.cleaner.backoff.ms", "500"),
    ("num.io.threads", "4"), ("num.network.threads", "6"), ("num.replica.fetchers", "2"),
    ("num.recovery.threads.per.data.dir", "2"), ("max.connections", "1000"),
    ("max.connections.per.ip", "100"), ("max.connections.per.ip.overrides", "127.0.0.1:5,[::1]:7"),
    ("max.connection.creation.rate", "50"),
])
def test_kafkas_reconfigurable_broker_configs_are_updated_dynamically(s, name, value):
    assert s.alter_configs(resource("", (name, SET, value))) == OK
    assert s.alter_configs(resource("1", (name, SET, value))) == OK
    assert s.image.configs[(BROKER, "")] == {name: value}
    assert s.image.configs[(BROKER, "1")] == {name: value}


@pytest.mark.parametrize("name,value,message", [
    ("num.io.threads", "0", "Invalid value 0 for configuration num.io.threads: Value must be at least 1"),
    ("max.connections", "-1", "Invalid value -1 for configuration max.connections: Value must be at least 0"),
    ("log.cleaner.backoff.ms", "soon",
     "Invalid value soon for configuration log.cleaner.backoff.ms: Not a number of type LONG"),
    ("log.cleaner.io.buffer.load.factor", "most",
     "Invalid value most for configuration log.cleaner.io.buffer.load.factor: Not a number of type DOUBLE"),
    ("max.connection.creation.rate", "2147483648",
     "Invalid value 2147483648 for configuration max.connection.creation.rate: Not a number of type INT"),
    ("max.connections.per.ip.overrides", "127.0.0.1",
     "Invalid value 127.0.0.1 for configuration max.connections.per.ip.overrides: "
     "Map entry '127.0.0.1' is not of the form 'key:value'"),
])
def test_a_dynamic_broker_config_must_be_of_kafkas_type_and_bound_else_invalid_config(s, name, value,
                                                                                     message):
    assert s.alter_configs(resource("1", (name, SET, value))) == [(Error.INVALID_CONFIG, message)]
    assert s.image.configs.get((BROKER, "1")) is None


def test_a_thread_count_takes_no_append_as_it_is_not_a_list(s):
    assert s.alter_configs(resource("", ("num.io.threads", APPEND, "1"))) == [
        (Error.INVALID_CONFIG, "Config value append is not allowed for config key: num.io.threads")]


@pytest.mark.parametrize("name", ["log.dirs", "broker.rack", "socket.request.max.bytes", "process.roles",
                                  "connections.max.idle.ms"])
def test_a_broker_config_that_is_not_dynamic_cannot_be_updated_dynamically(s, name):
    assert s.alter_configs(resource("1", (name, SET, "1"))) == [
        (Error.INVALID_REQUEST, f"Cannot update these configs dynamically: Set({name})")]


@pytest.mark.parametrize("name,new,current,message", [
    ("num.io.threads", 2, 8, "Dynamic thread count update validation failed for num.io.threads=2, "
                             "value should be at least half the current value 8"),
    ("num.network.threads", 7, 3, "Dynamic thread count update validation failed for num.network.threads=7, "
                                  "value should not be greater than double the current value 3"),
    ("num.replica.fetchers", 0, 1, "Dynamic thread count update validation failed for "
                                   "num.replica.fetchers=0, value should be at least 1"),
    ("log.cleaner.threads", 3, 1, "Log cleaner threads cannot be increased to more than double the "
                                  "current value 1"),
    ("log.cleaner.threads", 1, 4, "Log cleaner threads cannot be reduced to less than half the "
                                  "current value 4"),
    ("log.cleaner.threads", 0, 1, "Log cleaner threads should be at least 1"),
])
def test_a_thread_count_may_be_at_most_doubled_or_halved_at_once(name, new, current, message):
    with pytest.raises(Exception) as e:
        check_thread_count(name, new, current)
    assert (e.value.code, e.value.message) == (Error.INVALID_REQUEST, message)


def test_a_thread_count_within_half_and_double_is_accepted():
    for name in ("num.io.threads", "log.cleaner.threads"):
        check_thread_count(name, 4, 8)
        check_thread_count(name, 16, 8)
        check_thread_count(name, 8, 8)


def test_every_service_config_has_a_type_kafka_defines():
    assert {kind for kind, _ in SERVICE_CONFIGS.values()} <= {"int", "long", "double", "string"}
