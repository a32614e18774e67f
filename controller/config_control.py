"""Dynamic configs: IncrementalAlterConfigs on topics, groups and brokers, as Kafka's
ConfigurationControlManager and ControllerConfigurationValidator decide it (the legacy
AlterConfigs reaches here as the same request, turned into SETs and DELETEs by the broker).

Theory of operation. Each resource is decided on its own: it fails whole, with one error, or
all its changes are written. First the request itself (ControllerApis and the broker's
preprocessing): a resource named twice, a key named twice in one resource, a null value for
anything but DELETE, a resource type not served: INVALID_REQUEST. Then the operations, key by
key, over the resource's current dynamic configs:

| op           | new value                                                                 |
|--------------|---------------------------------------------------------------------------|
| SET (0)      | the value given                                                           |
| DELETE (1)   | none (the default applies again)                                          |
| APPEND (2)   | the current list (the override, else the config's own default), then each |
|              | comma-separated value given that it does not hold yet                     |
| SUBTRACT (3) | the current list less the first occurrence of each value given            |

APPEND and SUBTRACT apply to LIST configs only (a topic's cleanup.policy):
INVALID_CONFIG "Can't APPEND to key X because its type is not LIST." on any other, known or
not. The default a list starts from is the config's own (cleanup.policy: delete), not the
broker's log.* property, as Kafka's KafkaConfigSchema.getDefault. Only a key whose value
changes gets a ConfigRecord (null value: deleted).

Then the whole resulting config is validated as a SET of it would be, and only then is the
resource looked up:

- TOPIC: the name (an empty one is INVALID_REQUEST; an illegal one INVALID_TOPIC_EXCEPTION),
  every name a topic config (INVALID_CONFIG "Unknown topic config name: X"), every value
  valid over the broker defaults (INVALID_CONFIG); then the topic must exist
  (UNKNOWN_TOPIC_OR_PARTITION).
- GROUP (KIP-848, resource type 32): a non-empty name, every name one of GROUP_CONFIGS
  ("Unknown group config name: X"), each an integer of at least 1, and the pair within the
  controller's group.consumer.min/max.* bounds, the session timeout above the heartbeat
  interval; a name left unset counts as GroupConfig's own default (45000 and 5000), not the
  broker's. All INVALID_CONFIG with Kafka's message. The group need not exist: its configs
  live in the image apart from it, and the coordinator reads them when it has the group.
- BROKER (a broker id, or "" for the cluster-wide default): the broker must be registered;
  only the topic configs' broker-wide defaults (log.retention.ms, message.max.bytes, ...) and
  the replication quotas' rates (leader.replication.throttled.rate,
  follower.replication.throttled.rate, replica.alter.log.dirs.io.max.bytes.per.second: LONG,
  at least 0), the log cleaner's (log.cleaner.threads, .io.max.bytes.per.second,
  .dedupe.buffer.size, .io.buffer.size, .io.buffer.load.factor, .backoff.ms), the thread pools'
  (num.io.threads, num.network.threads, num.replica.fetchers,
  num.recovery.threads.per.data.dir) and the connection limits (max.connections,
  max.connections.per.ip, max.connections.per.ip.overrides, max.connection.creation.rate),
  each of Kafka's type and bound (metadata.configs.SERVICE_CONFIGS), may change
  (DYNAMIC_BROKER), any other change than a DELETE is INVALID_REQUEST
  "Cannot update these configs dynamically: Set(...)" as Kafka answers for a config that is
  not dynamic; APPEND and SUBTRACT only to a list (log.cleanup.policy); the resulting values
  must be valid as the topic configs they are defaults of (INVALID_CONFIG). Each change is a
  ConfigRecord of the BROKER resource, which every broker applies from its image without a
  restart (metadata.configs.dynamic_broker_configs). A listener's key and trust stores and
  ssl.client.auth (listener.name.<l>.ssl.*, security/listener_ssl.py) change per broker only,
  never at the cluster default nor without the listener prefix, with Kafka's messages. A
  listener's connection limits (listener.name.<l>.max.connections, .max.connection.creation.rate)
  change at the cluster default and per broker, each of its base property's type; listeners,
  advertised.listeners and listener.security.protocol.map per broker only, "Cannot update these
  configs at default cluster level, broker id must be specified: Set(...)" (the broker checks
  them against its own listeners before it forwards them: broker/handlers/admin.py).
"""
from __future__ import annotations

from controller.result import ControllerResult
from engine.config import BROKER_SYNONYMS, TOPIC_CONFIGS, TOPIC_LIST_CONFIGS, LogConfig, java_integer
from engine.errors import ConfigError
from metadata.configs import (
    APPEND,
    BROKER_RESOURCE,
    DELETE,
    GROUP_CONFIGS,
    GROUP_HEARTBEAT_INTERVAL,
    GROUP_RESOURCE,
    GROUP_SESSION_TIMEOUT,
    LISTENER_CONFIGS,
    OP_NAMES,
    REPLICATION_RATE_CONFIGS,
    SERVICE_CONFIGS,
    SET,
    SUBTRACT,
    TOPIC_RESOURCE,
    ConfigFailure,
    GroupBounds,
    check_replication_rate,
    check_request_shape,
    listener_connection_config,
    not_dynamic,
    parse_listener_connection_config,
    parse_service_config,
    unknown_operation,
)
from metadata.image import MetadataImage
from protocol import messages as M
from protocol.errors import Error
from protocol.topics import topic_name_error
from security import listener_ssl

SERVED_RESOURCES = (TOPIC_RESOURCE, BROKER_RESOURCE, GROUP_RESOURCE)
# The broker properties Kafka changes without a restart that Strom applies: the topic configs'
# broker-wide defaults (DynamicLogConfig.ReconfigurableConfigs: log.retention.ms,
# log.segment.bytes, log.cleanup.policy, message.max.bytes, ...) and the replication quotas'
# rates (DynamicReplicationConfig), which broker/server.py applies from each image, and the log
# cleaner's, the thread pools' and the connection limits' (metadata.configs.SERVICE_CONFIGS),
# which broker/dynamic_config.py applies.
# The coarser forms of the time properties, dynamic too (every synonym of a topic config is, in
# Kafka's DynamicLogConfig): INT with Kafka's bound; the finest form set anywhere wins
# (ms > minutes > hours, engine.config.log_config_from_broker).
TIME_FORMS: dict[str, int | None] = {"log.retention.minutes": None, "log.retention.hours": None,
                                     "log.roll.hours": 1, "log.roll.jitter.hours": 0}
DYNAMIC_BROKER = (frozenset(BROKER_SYNONYMS) | frozenset(REPLICATION_RATE_CONFIGS)
                  | frozenset(SERVICE_CONFIGS) | frozenset(TIME_FORMS))


def check_time_form(name: str, value: str) -> None:
    """A coarser time property's value as Kafka's ConfigDef parses an INT with its bound."""
    try:
        parsed = int(value.strip())
    except ValueError:
        parsed = None
    if parsed is None or not -(2**31) <= parsed < 2**31:
        raise ConfigFailure(Error.INVALID_CONFIG, f"Invalid value {value} for configuration {name}: "
                                                  "Not a number of type INT")
    least = TIME_FORMS[name]
    if least is not None and parsed < least:
        raise ConfigFailure(Error.INVALID_CONFIG, f"Invalid value {parsed} for configuration {name}: "
                                                  f"Value must be at least {least}")


def java_split(value: str) -> list[str]:
    """String.split(","): trailing empty strings dropped, an empty string is [""]."""
    parts = value.split(",")
    while len(parts) > 1 and parts[-1] == "":
        parts.pop()
    return parts


def apply_list_op(op: int, current: str | None, default: str | None, value: str) -> str:
    """APPEND or SUBTRACT ``value`` (comma-separated) on a list config's current value, or its
    default when it has none, as Kafka's ConfigurationControlManager: empty parts of the old
    value are dropped; APPEND adds what is not there yet, SUBTRACT removes one occurrence."""
    base = current if current is not None else default
    parts = [p for p in java_split(base) if p] if base else []
    for item in java_split(value):
        if op == APPEND:
            if item not in parts:
                parts.append(item)
        elif item in parts:
            parts.remove(item)
    return ",".join(parts)


def request_failures(req) -> dict[int, ConfigFailure]:
    """The resources refused before any is decided, by index into req.resources: the
    preprocessing every resource gets (metadata.configs.check_request_shape), then an unknown
    operation or a resource type not served here."""
    failed = check_request_shape(req.resources)
    for i, res in enumerate(req.resources):
        if i in failed:
            continue
        bad = next((f for f in (unknown_operation(c.config_operation) for c in res.configs) if f), None)
        if bad is not None:
            failed[i] = bad
        elif res.resource_type not in SERVED_RESOURCES:
            failed[i] = ConfigFailure(Error.INVALID_REQUEST, f"Unknown resource type {res.resource_type}")
    return failed


def validate_group_config(configs: dict[str, str], bounds: GroupBounds) -> None:
    """Kafka's GroupConfig.validate over a group's whole resulting config."""
    for name in configs:
        if name not in GROUP_CONFIGS:
            raise ConfigFailure(Error.INVALID_CONFIG, f"Unknown group config name: {name}")
    values = dict(GROUP_CONFIGS)
    for name, raw in configs.items():
        not_int = ConfigFailure(Error.INVALID_CONFIG,
                                f"Invalid value {raw} for configuration {name}: Not a number of type INT")
        try:
            value = java_integer(name, raw)
        except ConfigError:
            raise not_int from None
        if not -(2**31) <= value < 2**31:
            raise not_int
        if value < 1:
            raise ConfigFailure(Error.INVALID_CONFIG,
                                f"Invalid value {value} for configuration {name}: Value must be at least 1")
        values[name] = value
    heartbeat, session = values[GROUP_HEARTBEAT_INTERVAL], values[GROUP_SESSION_TIMEOUT]
    for name, value, least, most in (
            (GROUP_HEARTBEAT_INTERVAL, heartbeat,
             bounds.min_heartbeat_interval_ms, bounds.max_heartbeat_interval_ms),
            (GROUP_SESSION_TIMEOUT, session, bounds.min_session_timeout_ms, bounds.max_session_timeout_ms)):
        kind = "session.timeout.ms" if name == GROUP_SESSION_TIMEOUT else "heartbeat.interval.ms"
        if value < least:
            raise ConfigFailure(Error.INVALID_CONFIG,
                                f"{name} must be greater than or equal to group.consumer.min.{kind}")
        if value > most:
            raise ConfigFailure(Error.INVALID_CONFIG,
                                f"{name} must be less than or equal to group.consumer.max.{kind}")
    if session <= heartbeat:
        raise ConfigFailure(Error.INVALID_CONFIG,
                            f"{GROUP_SESSION_TIMEOUT} must be greater than {GROUP_HEARTBEAT_INTERVAL}")


class ConfigControl:
    """Decides IncrementalAlterConfigs over the image: records for what changes, an error per
    resource for what may not."""

    def __init__(self, log_defaults: LogConfig | None = None, group_bounds: GroupBounds | None = None):
        self.log_defaults = log_defaults or LogConfig()
        self.group_bounds = group_bounds or GroupBounds()
        self._list_defaults = LogConfig().to_properties()  # the topic configs' own defaults

    def incremental_alter_configs(self, image: MetadataImage, req) -> ControllerResult:
        R = M.IncrementalAlterConfigsResponse
        results, records = [], []
        failed = request_failures(req)
        for i, res in enumerate(req.resources):
            result = R.AlterConfigsResourceResponse(resource_type=res.resource_type,
                                                    resource_name=res.resource_name, error_message=None)
            results.append(result)
            try:
                if i in failed:
                    raise failed[i]
                changes = self._alter(image, res)
            except ConfigFailure as e:
                result.error_code, result.error_message = e.code, e.message
                continue
            if not req.validate_only:
                records += [M.ConfigRecord(resource_type=res.resource_type, resource_name=res.resource_name,
                                           name=name, value=value) for name, value in changes]
        return ControllerResult(records, R(responses=results))

    def _alter(self, image: MetadataImage, res) -> list[tuple[str, str | None]]:
        if res.resource_type == BROKER_RESOURCE:
            return self._alter_broker(image, res)
        if res.resource_type == TOPIC_RESOURCE:
            current = image.topic_config(res.resource_name)
            splittable, defaults = TOPIC_LIST_CONFIGS, self._list_defaults
        else:
            current = image.group_config(res.resource_name)
            splittable, defaults = frozenset(), {}
        resulting = dict(current)
        changes: list[tuple[str, str | None]] = []
        for c in res.configs:
            old = current.get(c.name)
            if c.config_operation == SET:
                new = c.value
            elif c.config_operation == DELETE:
                new = None
            else:
                if c.name not in splittable:
                    raise ConfigFailure(Error.INVALID_CONFIG, f"Can't {OP_NAMES[c.config_operation]} to key "
                                                              f"{c.name} because its type is not LIST.")
                new = apply_list_op(c.config_operation, old, defaults.get(c.name), c.value)
            if new != old:
                changes.append((c.name, new))
            if new is None:
                resulting.pop(c.name, None)
            else:
                resulting[c.name] = new
        if res.resource_type == TOPIC_RESOURCE:
            self._validate_topic(image, res.resource_name, resulting)
        else:
            if not res.resource_name:
                raise ConfigFailure(Error.INVALID_REQUEST, "Default group resources are not allowed.")
            validate_group_config(resulting, self.group_bounds)
        return changes

    def _validate_topic(self, image: MetadataImage, topic: str, configs: dict[str, str]) -> None:
        if not topic:
            raise ConfigFailure(Error.INVALID_REQUEST, "Default topic resources are not allowed.")
        why = topic_name_error(topic)
        if why is not None:
            raise ConfigFailure(Error.INVALID_TOPIC_EXCEPTION, why)
        for name in configs:
            if name not in TOPIC_CONFIGS:
                raise ConfigFailure(Error.INVALID_CONFIG, f"Unknown topic config name: {name}")
        try:
            self.log_defaults.with_overrides(configs)
        except ConfigError as e:
            raise ConfigFailure(Error.INVALID_CONFIG, str(e)) from None
        if topic not in image.topics:
            raise ConfigFailure(Error.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{topic}' does not exist.")

    def _alter_broker(self, image: MetadataImage, res) -> list[tuple[str, str | None]]:
        name = res.resource_name
        if name:
            try:
                broker_id = int(name)
            except ValueError:
                raise ConfigFailure(Error.INVALID_REQUEST,
                                    "Unable to parse broker name as a base 10 number.") from None
            if broker_id < 0:
                raise ConfigFailure(Error.INVALID_REQUEST, "Invalid negative broker ID.")
            if broker_id not in image.brokers:
                raise ConfigFailure(Error.BROKER_ID_NOT_REGISTERED, f"No node with id {broker_id} found.")
        setting = [c.name for c in res.configs if c.config_operation != DELETE]
        refused = [n for n in setting if n not in DYNAMIC_BROKER and n not in listener_ssl.RECONFIGURABLE
                   and listener_ssl.listener_ssl_name(n) is None and listener_connection_config(n) is None
                   and n not in LISTENER_CONFIGS]
        if refused:
            raise not_dynamic(refused)
        per_broker = [n for n in setting if n in LISTENER_CONFIGS]
        if per_broker and not name:
            raise ConfigFailure(Error.INVALID_REQUEST,
                                "Cannot update these configs at default cluster level, broker id must be "
                                f"specified: Set({', '.join(per_broker)})")
        security = listener_ssl.refusal(setting, per_broker=bool(name))  # the listeners' TLS, per broker
        if security is not None:
            raise ConfigFailure(Error.INVALID_REQUEST, security)
        current = image.configs.get((BROKER_RESOURCE, name), {})
        changes: list[tuple[str, str | None]] = []
        resulting = dict(current)
        for c in res.configs:
            new: str | None
            if c.config_operation in (APPEND, SUBTRACT):
                topic = BROKER_SYNONYMS.get(c.name)
                if topic not in TOPIC_LIST_CONFIGS:
                    verb = "append" if c.config_operation == APPEND else "subtract"
                    raise ConfigFailure(Error.INVALID_CONFIG,
                                        f"Config value {verb} is not allowed for config key: {c.name}")
                new = apply_list_op(c.config_operation, current.get(c.name),
                                    self._list_defaults.get(topic), c.value)
            else:
                new = c.value if c.config_operation == SET else None
            if new != current.get(c.name):
                changes.append((c.name, new))
            if new is None:
                resulting.pop(c.name, None)
            else:
                resulting[c.name] = new
        for prop, value in resulting.items():  # each as the topic config it is the default of
            if prop in REPLICATION_RATE_CONFIGS:
                check_replication_rate(prop, value)
                continue
            if prop in SERVICE_CONFIGS:
                parse_service_config(prop, value)
                continue
            if listener_connection_config(prop) is not None:
                parse_listener_connection_config(prop, value)
                continue
            if prop in TIME_FORMS:
                check_time_form(prop, value)
                continue
            if prop not in DYNAMIC_BROKER:
                continue
            try:
                LogConfig().with_overrides({BROKER_SYNONYMS[prop]: value})
            except ConfigError as e:
                reason = str(e).split(": ", 1)[-1]
                raise ConfigFailure(Error.INVALID_CONFIG,
                                    f"Invalid value {value} for configuration {prop}: {reason}") from None
        return changes
