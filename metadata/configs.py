"""Config resources as Kafka's admin protocol names them, shared by the controller, which
decides IncrementalAlterConfigs (controller/config_control.py), the broker, which answers
BROKER resources itself and describes every resource (broker/handlers/admin.py), the metadata
image, which stores ConfigRecords by resource, and the group coordinator, which reads a
group's configs.

The request preprocessing Kafka's ConfigAdminManager.preprocess does for every resource, in
its order: a resource named twice (each of the two fails), a key named twice in one resource,
a null value for anything but DELETE, all INVALID_REQUEST (``check_request_shape``). Then each
side checks its operations (``unknown_operation``, before or after its own checks of the
resource name) and the controller the resource type it serves.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from protocol.errors import Error, KafkaError

# ConfigResource.Type ids (a different enum from the ACL resource types of broker/authorizer.py).
TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4
GROUP_RESOURCE = 32  # KIP-848's group configs (ConfigResource.Type.GROUP)

# AlterConfigOp.OpType ids.
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
OP_NAMES = {SET: "SET", DELETE: "DELETE", APPEND: "APPEND", SUBTRACT: "SUBTRACT"}

# Kafka's GroupConfig keys Strom's coordinator honours, with GroupConfig's own defaults; each
# takes its value, when a group does not set it, from the broker property "group." + key.
# share.* and streams.* are Kafka's others: share and streams groups are not served.
GROUP_SESSION_TIMEOUT = "consumer.session.timeout.ms"
GROUP_HEARTBEAT_INTERVAL = "consumer.heartbeat.interval.ms"
GROUP_CONFIGS: dict[str, int] = {GROUP_SESSION_TIMEOUT: 45000, GROUP_HEARTBEAT_INTERVAL: 5000}


@dataclass(frozen=True)
class GroupBounds:
    """The broker-side bounds of a consumer group's session timeout and heartbeat interval:
    group.consumer.min/max.session.timeout.ms and .heartbeat.interval.ms, Kafka's defaults."""
    min_session_timeout_ms: int = 45000
    max_session_timeout_ms: int = 60000
    min_heartbeat_interval_ms: int = 5000
    max_heartbeat_interval_ms: int = 15000


# GroupBounds' fields and the broker properties that set them.
GROUP_BOUNDS = {
    "min_session_timeout_ms": "group.consumer.min.session.timeout.ms",
    "max_session_timeout_ms": "group.consumer.max.session.timeout.ms",
    "min_heartbeat_interval_ms": "group.consumer.min.heartbeat.interval.ms",
    "max_heartbeat_interval_ms": "group.consumer.max.heartbeat.interval.ms",
}


class ConfigFailure(KafkaError):
    """A resource's one error: its code and Kafka's message."""


def check_request_shape(resources: Sequence[Any],
                        wanted: Callable[[Any], bool] = lambda _res: True) -> dict[int, ConfigFailure]:
    """ConfigAdminManager.preprocess over the ``wanted`` resources, by index into
    ``resources``: a resource named twice (both fail), a key named twice, a null value for
    anything but DELETE."""
    failed: dict[int, ConfigFailure] = {}
    seen: dict[tuple[int, str], int] = {}
    for i, res in enumerate(resources):
        if not wanted(res):
            continue
        key = (res.resource_type, res.resource_name)
        if key in seen:
            for j in (seen[key], i):
                failed[j] = ConfigFailure(Error.INVALID_REQUEST, "Each resource must appear at most once.")
        seen[key] = i
    for i, res in enumerate(resources):
        if i in failed or not wanted(res):
            continue
        names = [c.name for c in res.configs]
        if len(set(names)) != len(names):
            failed[i] = ConfigFailure(Error.INVALID_REQUEST, "Error due to duplicate config keys")
            continue
        nulls = [c.name for c in res.configs if c.config_operation != DELETE and c.value is None]
        if nulls:
            failed[i] = ConfigFailure(Error.INVALID_REQUEST,
                                      "Null value not supported for : " + ", ".join(nulls))
    return failed


def unknown_operation(op: int) -> ConfigFailure | None:
    """INVALID_REQUEST for an operation id that is not one of AlterConfigOp.OpType's."""
    if op in OP_NAMES:
        return None
    return ConfigFailure(Error.INVALID_REQUEST, f"Unknown operations type {op}")


# Broker properties Kafka updates dynamically that are no topic config's default: the
# replication quotas' rates (DynamicReplicationConfig), LONG, at least 0, default Long.MAX_VALUE
# (unbounded), for a broker id or the cluster default.
REPLICATION_RATE_CONFIGS = ("leader.replication.throttled.rate", "follower.replication.throttled.rate",
                            "replica.alter.log.dirs.io.max.bytes.per.second")
LONG_MAX = 2**63 - 1


def check_replication_rate(name: str, value: str) -> None:
    """A replication rate's value as Kafka's ConfigDef parses a LONG with atLeast(0): raises
    INVALID_CONFIG with Kafka's message."""
    try:
        rate = int(value.strip())
    except ValueError:
        raise ConfigFailure(Error.INVALID_CONFIG, f"Invalid value {value} for configuration {name}: "
                                                  "Not a number of type LONG") from None
    if not -(2**63) <= rate <= LONG_MAX:
        raise ConfigFailure(Error.INVALID_CONFIG, f"Invalid value {value} for configuration {name}: "
                                                  "Not a number of type LONG")
    if rate < 0:
        raise ConfigFailure(Error.INVALID_CONFIG, f"Invalid value {rate} for configuration {name}: "
                                                  "Value must be at least 0")


# The other broker properties Kafka changes without a restart that Strom takes from the image
# (broker/dynamic_config.py applies them): LogCleaner.ReconfigurableConfigs, DynamicThreadPool's
# and num.network.threads, and SocketServer.ReconfigurableConfigs; each with Kafka's type and
# its atLeast bound (None: no bound).
INT, LONG, DOUBLE, STRING = "int", "long", "double", "string"
SERVICE_CONFIGS: dict[str, tuple[str, int | None]] = {
    "log.cleaner.threads": (INT, 0),
    "log.cleaner.dedupe.buffer.size": (LONG, None),
    "log.cleaner.io.buffer.size": (INT, 0),
    "log.cleaner.io.buffer.load.factor": (DOUBLE, None),
    "log.cleaner.io.max.bytes.per.second": (DOUBLE, None),
    "log.cleaner.backoff.ms": (LONG, 0),
    "num.io.threads": (INT, 1),
    "num.network.threads": (INT, 1),
    "num.replica.fetchers": (INT, None),
    "num.recovery.threads.per.data.dir": (INT, 1),
    "max.connections": (INT, 0),
    "max.connections.per.ip": (INT, 0),
    "max.connections.per.ip.overrides": (STRING, None),
    "max.connection.creation.rate": (INT, 0),
}
# Thread counts Kafka lets change by at most a factor of two at a time (DynamicThreadPool,
# DataPlaneAcceptor, LogCleaner.validateReconfiguration).
THREAD_COUNTS = ("num.io.threads", "num.network.threads", "num.replica.fetchers",
                 "num.recovery.threads.per.data.dir")
CLEANER_THREADS = "log.cleaner.threads"
_TYPE_NAMES = {INT: "INT", LONG: "LONG", DOUBLE: "DOUBLE"}


def parse_service_config(name: str, value: str) -> int | float | str:
    """A SERVICE_CONFIGS value as Kafka's ConfigDef parses it: raises INVALID_CONFIG with
    Kafka's message for one that is not of its type or below its bound."""
    kind, least = SERVICE_CONFIGS[name]
    if kind == STRING:
        if name == "max.connections.per.ip.overrides":
            check_ip_overrides(value)
        return value
    text = value.strip()
    wrong = ConfigFailure(Error.INVALID_CONFIG, f"Invalid value {value} for configuration {name}: "
                                                f"Not a number of type {_TYPE_NAMES[kind]}")
    parsed: int | float
    try:
        parsed = float(text) if kind == DOUBLE else int(text)
    except ValueError:
        raise wrong from None
    bits = 31 if kind == INT else 63
    if kind != DOUBLE and not -(2**bits) <= parsed < 2**bits:
        raise wrong
    if least is not None and parsed < least:
        raise ConfigFailure(Error.INVALID_CONFIG, f"Invalid value {parsed} for configuration {name}: "
                                                  f"Value must be at least {least}")
    return parsed


# A listener's connection limits (SocketServer.ListenerReconfigurableConfigs): dynamic with the
# listener prefix, listener.name.<l>.<name>, at the cluster default as per broker (Kafka's
# ClusterLevelListenerConfigs); each of its base property's type and bound.
LISTENER_CONNECTION_CONFIGS = ("max.connections", "max.connection.creation.rate")
# The listeners themselves (DynamicListenerConfig): per broker only.
LISTENER_CONFIGS = ("listeners", "advertised.listeners", "listener.security.protocol.map")
_LISTENER_PREFIX = "listener.name."


def listener_connection_config(name: str) -> tuple[str, str] | None:
    """``listener.name.<l>.max.connections`` or ``.max.connection.creation.rate``: (the listener,
    upper case, and the base property); None for any other name."""
    if not name.startswith(_LISTENER_PREFIX):
        return None
    listener, _, base = name[len(_LISTENER_PREFIX):].partition(".")
    if not listener or base not in LISTENER_CONNECTION_CONFIGS:
        return None
    return listener.upper(), base


def parse_listener_connection_config(name: str, value: str) -> int:
    """A listener's connection limit as its base property parses (Kafka's validateConfigTypes
    checks the base name): raises INVALID_CONFIG naming the base property."""
    found = listener_connection_config(name)
    assert found is not None, name
    parsed = parse_service_config(found[1], value)
    assert isinstance(parsed, int)
    return parsed


def wrapped_config_exception(message: str) -> ConfigFailure:
    """Kafka's answer when a reconfigurable refuses a broker config change: processReconfiguration
    wraps its ConfigException in ConfigException("Invalid dynamic configuration", e), whose
    two-argument form reads as a name and value, and the broker answers INVALID_REQUEST."""
    return ConfigFailure(Error.INVALID_REQUEST,
                         f"Invalid value org.apache.kafka.common.config.ConfigException: {message} "
                         "for configuration Invalid dynamic configuration")


def check_ip_overrides(value: str) -> dict[str, int]:
    """max.connections.per.ip.overrides as Kafka's getMap: host:count pairs, comma-separated."""
    out: dict[str, int] = {}
    for item in (part.strip() for part in value.split(",")):
        if not item:
            continue
        host, sep, count = item.rpartition(":")
        try:
            n = int(count)
        except ValueError:
            n = -1
        if not sep or not host.strip().strip("[]") or n < 0:
            raise ConfigFailure(Error.INVALID_CONFIG,
                                f"Invalid value {value} for configuration max.connections.per.ip.overrides: "
                                f"Map entry '{item}' is not of the form 'key:value'")
        out[host.strip().strip("[]")] = n
    return out


def check_thread_count(name: str, new: int, current: int) -> None:
    """Kafka's rule for a thread count changed without a restart: at least 1, at least half the
    current value, at most double it; raises INVALID_REQUEST with Kafka's message (its broker
    turns the ConfigException into one)."""
    if new == current:
        return
    if name == CLEANER_THREADS:
        checks = ((new < 1, "Log cleaner threads should be at least 1"),
                  (new < current // 2,
                   f"Log cleaner threads cannot be reduced to less than half the current value {current}"),
                  (new > current * 2,
                   "Log cleaner threads cannot be increased to more than double the current value "
                   f"{current}"))
    else:
        head = f"Dynamic thread count update validation failed for {name}={new}"
        checks = ((new <= 0, f"{head}, value should be at least 1"),
                  (new < current // 2, f"{head}, value should be at least half the current value {current}"),
                  (new > current * 2,
                   f"{head}, value should not be greater than double the current value {current}"))
    for failed, message in checks:
        if failed:
            raise ConfigFailure(Error.INVALID_REQUEST, message)


def not_dynamic(names: list[str]) -> ConfigFailure:
    """Kafka's answer to a change of a broker config that cannot be updated dynamically."""
    return ConfigFailure(Error.INVALID_REQUEST,
                         f"Cannot update these configs dynamically: Set({', '.join(names)})")


def dynamic_broker_configs(image: Any, node_id: int) -> dict[str, str]:
    """The broker properties changed without a restart for broker ``node_id``: the cluster
    default's ConfigRecords (BROKER resource "") overlaid with the broker's own (its id), as
    Kafka's DynamicBrokerConfig layers them over the static properties."""
    configs = image.configs
    return {**configs.get((BROKER_RESOURCE, ""), {}), **configs.get((BROKER_RESOURCE, str(node_id)), {})}
