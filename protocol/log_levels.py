"""The loggers of this process and their levels, read and set at run time: Kafka's
BROKER_LOGGER config resource (KIP-412, ConfigResource type 8), which brokers and controllers
both serve, each for its own node id, in DescribeConfigs and IncrementalAlterConfigs.

Kafka's level names stand for Python's logging levels: FATAL is CRITICAL, WARN is WARNING,
TRACE is level 5 (below DEBUG); a level between two of them is shown as the next one up (the
first whose messages it lets through), and a level above CRITICAL as OFF. A logger is one
Python's logging has created (``logging.getLogger(name)``; ``root`` is the root logger), as
log4j's LogManager.exists finds only loggers that exist. Describing gives each logger's
effective level (its own, else its nearest ancestor's with one, as Kafka's resolveLevel);
DELETE unsets a logger's own level, so it follows its ancestors again; the root's level cannot
be removed. Changes apply to this process only and are not stored: a restart starts from the
logging configuration again, as in Kafka.

``describe`` and ``alter`` answer a resource as Kafka's ConfigHelper and RuntimeLoggerManager
do: the resource name must be this node's id; every change of a resource is checked before any
is made, so a bad one changes nothing.
"""
from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from protocol import messages as M
from protocol.errors import Error

BROKER_LOGGER_RESOURCE = 8  # ConfigResource.Type.BROKER_LOGGER
DYNAMIC_BROKER_LOGGER_CONFIG = 6  # DescribeConfigs' config source
ROOT_LOGGER = "root"
TRACE = 5
OFF = logging.CRITICAL + 10
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3  # AlterConfigOp.OpType
# LogLevelConfig.VALID_LOG_LEVELS, the levels a logger may be set to.
LEVELS = {"FATAL": logging.CRITICAL, "ERROR": logging.ERROR, "WARN": logging.WARNING,
          "INFO": logging.INFO, "DEBUG": logging.DEBUG, "TRACE": TRACE}
VALID_LOG_LEVELS_STRING = ", ".join(sorted(LEVELS))
_BY_VALUE = sorted((value, name) for name, value in LEVELS.items())
if logging.getLevelName(TRACE) != "TRACE":
    logging.addLevelName(TRACE, "TRACE")


class LoggerFailure(Exception):
    """A resource's one error: its code and Kafka's message."""

    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


def level_name(level: int) -> str:
    """Kafka's name of a Python logging level: the first of Kafka's levels it lets through."""
    for value, name in _BY_VALUE:
        if level <= value:
            return name
    return "OFF"


def _existing(name: str) -> logging.Logger | None:
    if name == ROOT_LOGGER:
        return logging.getLogger()
    found = logging.Logger.manager.loggerDict.get(name)
    return found if isinstance(found, logging.Logger) else None


def loggers() -> dict[str, str]:
    """Every logger of the process by name (the root as ``root``) with its effective level."""
    out = {ROOT_LOGGER: level_name(logging.getLogger().level)}
    for name, found in list(logging.Logger.manager.loggerDict.items()):
        if isinstance(found, logging.Logger):
            out[name] = level_name(found.getEffectiveLevel())
    return out


def describe(node_id: int, resource_name: str, keys: Sequence[str] | None) -> list[Any]:
    """The DescribeConfigs entries of the BROKER_LOGGER resource ``resource_name``, sorted by
    name, only ``keys`` when given; raises LoggerFailure when the name is not this node's."""
    if not resource_name:
        raise LoggerFailure(Error.INVALID_REQUEST, "Broker id must not be empty")
    if _node_id(resource_name, "Broker") != node_id:
        raise LoggerFailure(Error.INVALID_REQUEST,
                            f"Unexpected broker id, expected {node_id} but received {resource_name}")
    R = M.DescribeConfigsResponse.DescribeConfigsResourceResult
    wanted = set(keys) if keys else None
    return [R(name=name, value=level, read_only=False, config_source=DYNAMIC_BROKER_LOGGER_CONFIG,
              is_default=False, is_sensitive=False, synonyms=[], config_type=0, documentation=None)
            for name, level in sorted(loggers().items()) if wanted is None or name in wanted]


def _node_id(resource_name: str, what: str) -> int:
    try:
        return int(resource_name)
    except ValueError:
        raise LoggerFailure(Error.INVALID_REQUEST,
                            f"{what} id must be an integer, but it is: {resource_name}") from None


def alter(node_id: int, resource_name: str, configs: Sequence[Any], validate_only: bool) -> None:
    """RuntimeLoggerManager.applyChangesForResource after authorization: the name must be this
    node's id, each change valid; then each SET or DELETE applied (none with ``validate_only``).
    Raises LoggerFailure."""
    requested = _node_id(resource_name, "Node")
    if requested != node_id:
        raise LoggerFailure(Error.INVALID_REQUEST,
                            f"Unexpected node id. Expected {node_id}, but received {resource_name}")
    for op in configs:
        _check(op)
    if validate_only:
        return
    for op in configs:
        found = _existing(op.name)
        assert found is not None  # checked above
        if op.config_operation == SET:
            found.setLevel(LEVELS[op.value])
            logging.getLogger("strom").warning("Updated the log level of %s to %s", op.name, op.value)
        else:
            found.setLevel(logging.NOTSET)
            logging.getLogger("strom").warning("Unset the log level of %s", op.name)


def _check(op: Any) -> None:
    name = op.name
    if op.config_operation in (SET, DELETE):
        if _existing(name) is None:
            raise LoggerFailure(Error.INVALID_CONFIG, f"Logger {name} does not exist!")
        if op.config_operation == SET and op.value not in LEVELS:
            raise LoggerFailure(Error.INVALID_CONFIG,
                                f"Cannot set the log level of {name} to {op.value} as it is not a supported "
                                f"log level. Valid log levels are {VALID_LOG_LEVELS_STRING}")
        if op.config_operation == DELETE and name == ROOT_LOGGER:
            raise LoggerFailure(Error.INVALID_REQUEST,
                                f"Removing the log level of the {ROOT_LOGGER} logger is not allowed")
        return
    verb = {APPEND: "APPEND", SUBTRACT: "SUBTRACT"}.get(op.config_operation)
    if verb is not None:
        raise LoggerFailure(Error.INVALID_REQUEST,
                            f"{verb} operation is not allowed for the BROKER_LOGGER resource")
    raise LoggerFailure(Error.INVALID_REQUEST, f"Unknown operation type {op.config_operation} is not allowed "
                                               "for the BROKER_LOGGER resource")
