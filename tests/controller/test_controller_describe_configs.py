"""KIP-919 on a controller: DescribeConfigs of its own BROKER resource (its static configs, with
their sources) and of its BROKER_LOGGER resource (its loggers), and IncrementalAlterConfigs of
its loggers answered by the controller itself, active or not, as Kafka's ControllerApis does."""
import asyncio
import logging

import pytest

from controller.quorum_controller import QuorumController
from protocol import messages as M
from protocol.context import RequestContext
from protocol.headers import RequestHeader
from strom.config import ServerConfig

LOGGER = "strom.test.controller.loggers"
BROKER, BROKER_LOGGER = 4, 8
STATIC_BROKER_CONFIG, DEFAULT_CONFIG, DYNAMIC_BROKER_LOGGER_CONFIG = 4, 5, 6
INVALID_REQUEST, INVALID_CONFIG = 42, 40
SET, DELETE = 0, 1


@pytest.fixture
def test_logger():
    found = logging.getLogger(LOGGER)
    saved = found.level
    found.setLevel(logging.INFO)
    yield found
    found.setLevel(saved)


def controller(node_id: int = 3000) -> QuorumController:
    c = QuorumController(node_id, "describe-configs-test",
                         {"num.partitions": 1, "default.replication.factor": 1})
    c.server_config = ServerConfig({
        "process.roles": "controller", "node.id": str(node_id), "controller.listener.names": "CONTROLLER",
        "listeners": "CONTROLLER://127.0.0.1:9093", "controller.quorum.voters": f"{node_id}@127.0.0.1:9093",
        "log.dirs": "/tmp/unused", "num.io.threads": "4", "ssl.key.password": "secret",
        "sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule required;'})
    return c


def api(c: QuorumController, key: int):
    return {a.key: a for a in c.apis()}[key]


def describe(c: QuorumController, resource_type: int, name: str, keys=None):
    R = M.DescribeConfigsRequest
    request = R(resources=[R.DescribeConfigsResource(resource_type=resource_type, resource_name=name,
                                                     configuration_keys=keys)],
                include_synonyms=True, include_documentation=False)
    ctx = RequestContext(RequestHeader(32, 4, 1, "test", 2))
    return asyncio.run(api(c, 32).fn(ctx, request)).results[0]


def test_a_controller_advertises_describe_configs():
    a = api(controller(), 32)
    assert (a.min_version, a.max_version) == (1, 4)


def test_describe_configs_of_the_controllers_own_broker_resource_gives_its_static_configs():
    result = describe(controller(), BROKER, "3000")
    assert result.error_code == 0
    entries = {c.name: c for c in result.configs}
    io = entries["num.io.threads"]
    assert (io.value, io.config_source, io.read_only, io.is_default) == ("4", STATIC_BROKER_CONFIG, True,
                                                                         False)
    assert [(s.name, s.value, s.source) for s in io.synonyms] == [("num.io.threads", "4",
                                                                   STATIC_BROKER_CONFIG)]
    assert entries["node.id"].value == "3000"
    assert entries["num.network.threads"].config_source == DEFAULT_CONFIG
    for name in ("ssl.key.password", "sasl.jaas.config"):  # Kafka's PASSWORD configs
        password = entries[name]
        assert (password.value, password.is_sensitive, password.config_type) == (None, True, 9), name
        assert [s.value for s in password.synonyms] == [None], name


def test_describe_configs_of_another_nodes_broker_resource_is_invalid_request():
    result = describe(controller(), BROKER, "7")
    assert (result.error_code, result.error_message) == (
        INVALID_REQUEST, "Unexpected broker id, expected 3000 or empty string, but received 7")


def test_describe_configs_of_the_controllers_loggers(test_logger):
    result = describe(controller(), BROKER_LOGGER, "3000", keys=[LOGGER])
    assert [(c.name, c.value, c.config_source) for c in result.configs] == [
        (LOGGER, "INFO", DYNAMIC_BROKER_LOGGER_CONFIG)]
    assert describe(controller(), BROKER_LOGGER, "1").error_code == INVALID_REQUEST


def alter(c: QuorumController, *ops, name="3000"):
    Inc = M.IncrementalAlterConfigsRequest
    request = Inc(resources=[Inc.AlterConfigsResource(
        resource_type=BROKER_LOGGER, resource_name=name,
        configs=[Inc.AlterableConfig(name=n, config_operation=op, value=v) for n, op, v in ops])],
        validate_only=False)
    ctx = RequestContext(RequestHeader(44, 1, 1, "test", 2))
    return asyncio.run(api(c, 44).fn(ctx, request)).responses[0]


def test_a_controller_sets_its_own_loggers_without_being_active(test_logger):
    """No raft attached: the loggers are this process's, never the active controller's work."""
    c = controller()
    answer = alter(c, (LOGGER, SET, "DEBUG"))
    assert (answer.error_code, answer.resource_type, answer.resource_name) == (0, BROKER_LOGGER, "3000")
    assert test_logger.level == logging.DEBUG
    assert alter(c, (LOGGER, DELETE, None)).error_code == 0
    assert test_logger.level == logging.NOTSET
    unknown = alter(c, ("no.such.logger.here", SET, "DEBUG"))
    assert (unknown.error_code, unknown.error_message) == (INVALID_CONFIG,
                                                           "Logger no.such.logger.here does not exist!")
    assert alter(c, (LOGGER, SET, "DEBUG"), name="1").error_code == INVALID_REQUEST


def test_a_controller_process_describes_its_own_properties(tmp_path):
    """The process hands the node's config to its controller: its BROKER resource is not empty."""
    from controller.process import build_controller
    config = ServerConfig({
        "process.roles": "controller", "node.id": "3001", "controller.listener.names": "CONTROLLER",
        "listeners": "CONTROLLER://127.0.0.1:9093", "controller.quorum.voters": "3001@127.0.0.1:9093",
        "log.dirs": str(tmp_path), "num.io.threads": "5"})
    entries = {c.name: c for c in describe(build_controller(config, "describe-configs-test"), BROKER,
                                           "3001").configs}
    assert (entries["num.io.threads"].value, entries["num.io.threads"].config_source) == (
        "5", STATIC_BROKER_CONFIG)
    assert entries["process.roles"].value == "controller"
