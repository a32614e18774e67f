"""The BROKER_LOGGER config resource (KIP-412) on a broker: DescribeConfigs names every logger of
the process with its effective level, IncrementalAlterConfigs SETs or DELETEs a logger's level
in this process only, as Kafka's ConfigHelper and RuntimeLoggerManager do."""
import asyncio
import logging

import pytest

from broker.authorizer import BrokerAuthorizer
from broker.handlers.admin import AdminApis
from metadata.image import MetadataImage
from protocol import messages as M
from protocol.context import RequestContext
from protocol.headers import RequestHeader
from protocol.log_levels import BROKER_LOGGER_RESOURCE, DYNAMIC_BROKER_LOGGER_CONFIG
from strom.config import ServerConfig

from .test_config import BASE

LOGGER = "strom.test.loggers.child"
INVALID_REQUEST, INVALID_CONFIG, CLUSTER_AUTHORIZATION_FAILED = 42, 40, 31
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


@pytest.fixture
def test_logger():
    """A logger of this process with no level of its own, its parent at WARN; both restored."""
    parent, child = logging.getLogger("strom.test.loggers"), logging.getLogger(LOGGER)
    saved = parent.level, child.level
    parent.setLevel(logging.WARNING)
    child.setLevel(logging.NOTSET)
    yield child
    parent.setLevel(saved[0])
    child.setLevel(saved[1])


def apis(authorizer=None) -> dict:
    handlers = AdminApis(node_id=1, config=ServerConfig(BASE), image=MetadataImage, controller=None,
                         topic_log_config=None, replicas=None,
                         **({"authorizer": authorizer} if authorizer else {}))
    return {a.key: a.fn for a in handlers.apis()}


def ctx(api_key: int, version: int) -> RequestContext:
    return RequestContext(RequestHeader(api_key, version, 1, "test", 2))


def describe(name: str = "1", keys=None, authorizer=None):
    R = M.DescribeConfigsRequest
    request = R(resources=[R.DescribeConfigsResource(resource_type=BROKER_LOGGER_RESOURCE, resource_name=name,
                                                     configuration_keys=keys)],
                include_synonyms=True, include_documentation=False)
    return asyncio.run(apis(authorizer)[32](ctx(32, 4), request)).results[0]


def alter(*ops, name: str = "1", authorizer=None, validate_only=False):
    Inc = M.IncrementalAlterConfigsRequest
    request = Inc(resources=[Inc.AlterConfigsResource(
        resource_type=BROKER_LOGGER_RESOURCE, resource_name=name,
        configs=[Inc.AlterableConfig(name=n, config_operation=op, value=v) for n, op, v in ops])],
        validate_only=validate_only)
    return asyncio.run(apis(authorizer)[44](ctx(44, 1), request)).responses[0]


def test_describe_configs_of_broker_loggers_names_every_logger_with_its_effective_level(test_logger):
    result = describe()
    assert result.error_code == 0
    levels = {c.name: c.value for c in result.configs}
    assert levels["strom.test.loggers"] == "WARN"
    assert levels[LOGGER] == "WARN"  # no level of its own: its ancestor's
    assert levels["root"] == {logging.DEBUG: "DEBUG", logging.INFO: "INFO", logging.WARNING: "WARN",
                              logging.ERROR: "ERROR"}.get(logging.getLogger().level, levels["root"])
    entry = next(c for c in result.configs if c.name == LOGGER)
    assert entry.config_source == DYNAMIC_BROKER_LOGGER_CONFIG
    assert (entry.read_only, entry.is_sensitive, entry.synonyms) == (False, False, [])


def test_describe_configs_of_broker_loggers_answers_the_loggers_asked_for(test_logger):
    result = describe(keys=[LOGGER])
    assert [(c.name, c.value) for c in result.configs] == [(LOGGER, "WARN")]


def test_broker_logger_resource_names_this_broker():
    empty = describe("")
    assert (empty.error_code, empty.error_message) == (INVALID_REQUEST, "Broker id must not be empty")
    other = describe("2")
    assert (other.error_code, other.error_message) == (INVALID_REQUEST,
                                                       "Unexpected broker id, expected 1 but received 2")
    answer = alter((LOGGER, SET, "DEBUG"), name="x")
    assert (answer.error_code, answer.error_message) == (INVALID_REQUEST,
                                                         "Node id must be an integer, but it is: x")
    answer = alter((LOGGER, SET, "DEBUG"), name="2")
    assert (answer.error_code, answer.error_message) == (INVALID_REQUEST,
                                                         "Unexpected node id. Expected 1, but received 2")


def test_set_changes_the_level_of_a_logger_in_this_process_and_delete_unsets_it(test_logger):
    assert alter((LOGGER, SET, "DEBUG")).error_code == 0
    assert test_logger.level == logging.DEBUG and test_logger.isEnabledFor(logging.DEBUG)
    assert {c.name: c.value for c in describe().configs}[LOGGER] == "DEBUG"
    assert alter((LOGGER, SET, "TRACE")).error_code == 0
    assert test_logger.isEnabledFor(5)
    assert {c.name: c.value for c in describe().configs}[LOGGER] == "TRACE"
    assert alter((LOGGER, DELETE, None)).error_code == 0
    assert test_logger.level == logging.NOTSET
    assert {c.name: c.value for c in describe().configs}[LOGGER] == "WARN"


def test_validate_only_changes_nothing(test_logger):
    assert alter((LOGGER, SET, "ERROR"), validate_only=True).error_code == 0
    assert test_logger.level == logging.NOTSET


def test_an_unknown_logger_or_level_is_invalid_config_with_kafkas_message(test_logger):
    answer = alter(("no.such.logger.anywhere", SET, "DEBUG"))
    assert (answer.error_code, answer.error_message) == (INVALID_CONFIG,
                                                         "Logger no.such.logger.anywhere does not exist!")
    answer = alter((LOGGER, SET, "LOUD"))
    assert (answer.error_code, answer.error_message) == (
        INVALID_CONFIG, f"Cannot set the log level of {LOGGER} to LOUD as it is not a supported log level. "
                        "Valid log levels are DEBUG, ERROR, FATAL, INFO, TRACE, WARN")
    assert test_logger.level == logging.NOTSET


def test_append_and_subtract_are_invalid_request_for_broker_loggers(test_logger):
    answer = alter((LOGGER, APPEND, "DEBUG"))
    assert (answer.error_code, answer.error_message) == (
        INVALID_REQUEST, "APPEND operation is not allowed for the BROKER_LOGGER resource")
    answer = alter((LOGGER, SUBTRACT, "DEBUG"))
    assert (answer.error_code, answer.error_message) == (
        INVALID_REQUEST, "SUBTRACT operation is not allowed for the BROKER_LOGGER resource")


def test_removing_the_root_loggers_level_is_not_allowed():
    answer = alter(("root", DELETE, None))
    assert (answer.error_code, answer.error_message) == (
        INVALID_REQUEST, "Removing the log level of the root logger is not allowed")


def test_one_bad_change_changes_nothing_of_its_resource(test_logger):
    answer = alter((LOGGER, SET, "DEBUG"), ("no.such.logger.anywhere", SET, "DEBUG"))
    assert answer.error_code == INVALID_CONFIG
    assert test_logger.level == logging.NOTSET


class DenyAll(BrokerAuthorizer):
    def __init__(self):
        pass

    def authorize(self, ctx, operation, resource_type, name, **_kw) -> bool:
        return False


def test_broker_loggers_need_describe_configs_and_alter_configs_on_the_cluster(test_logger):
    assert describe(authorizer=DenyAll()).error_code == CLUSTER_AUTHORIZATION_FAILED
    assert alter((LOGGER, SET, "DEBUG"), authorizer=DenyAll()).error_code == CLUSTER_AUTHORIZATION_FAILED
    assert test_logger.level == logging.NOTSET


def test_legacy_alter_configs_refuses_broker_loggers():
    A = M.AlterConfigsRequest
    request = A(resources=[A.AlterConfigsResource(resource_type=BROKER_LOGGER_RESOURCE, resource_name="1",
                                                  configs=[A.AlterableConfig(name=LOGGER, value="DEBUG")])],
                validate_only=False)
    answer = asyncio.run(apis()[33](ctx(33, 2), request)).responses[0]
    assert (answer.error_code, answer.error_message) == (
        INVALID_REQUEST, "AlterConfigs is deprecated and does not support the resource type BROKER_LOGGER")
