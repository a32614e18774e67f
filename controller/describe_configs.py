"""DescribeConfigs on a controller (KIP-919, Kafka's ControllerApis through ConfigHelper): the
BROKER resource of the controller's own id (its properties, each with its source: dynamic for
this node, dynamic cluster default, static, default; read only unless Kafka changes it
dynamically; a password's value withheld as sensitive), the cluster default ("": the dynamic
cluster-wide configs the metadata image holds), and the BROKER_LOGGER resource of its own id
(the process's loggers, protocol/log_levels.py), and a topic (each topic config: its own value,
else the cluster's dynamic default, the controller's static property, the default; the config
types are Kafka's kinds by value: INT-typed sizes show as LONG). Any other resource is
INVALID_REQUEST.

Any controller answers, active or not, from what it has replayed."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from engine.config import BROKER_SYNONYMS, TOPIC_CONFIGS, LogConfig
from metadata.configs import BROKER_RESOURCE, REPLICATION_RATE_CONFIGS, TOPIC_RESOURCE
from metadata.image import MetadataImage
from protocol import log_levels
from protocol import messages as M
from protocol.errors import Error
from security import listener_ssl

SOURCE_DYNAMIC_TOPIC, SOURCE_DYNAMIC_BROKER, SOURCE_DYNAMIC_DEFAULT_BROKER = 1, 2, 3
SOURCE_STATIC_BROKER, SOURCE_DEFAULT = 4, 5
_TOPIC_FROM_BROKER = {topic: broker for broker, topic in BROKER_SYNONYMS.items()}
_TYPES = {"bool": 1, "int": 3, "long": 5, "double": 6}  # lists and the rest: STRING, as brokers
_DYNAMIC = frozenset(BROKER_SYNONYMS) | frozenset(REPLICATION_RATE_CONFIGS)
TYPE_PASSWORD = 9


class NodeConfig(Protocol):
    """What is read of the node's config (strom/config.py's ServerConfig)."""
    values: Mapping[str, Any]
    originals: Mapping[str, str]

    def kind(self, name: str) -> str | None: ...


def sensitive(name: str) -> bool:
    """Kafka's PASSWORD-typed properties: described as sensitive, without their value."""
    return listener_ssl.is_sensitive(name)


def describe_configs(node_id: int, config: NodeConfig | None, image: MetadataImage, req: Any,
                     log_defaults: LogConfig | None = None) -> Any:
    R = M.DescribeConfigsResponse
    results = []
    for res in req.resources:
        out = R.DescribeConfigsResult(resource_type=res.resource_type, resource_name=res.resource_name,
                                      error_code=Error.NONE, configs=[])
        results.append(out)
        try:
            if res.resource_type == log_levels.BROKER_LOGGER_RESOURCE:
                out.configs = log_levels.describe(node_id, res.resource_name, res.configuration_keys)
            elif res.resource_type == BROKER_RESOURCE:
                out.configs = _broker(node_id, config, image, res, req.include_synonyms)
            elif res.resource_type == TOPIC_RESOURCE:
                if res.resource_name not in image.topics:
                    out.error_code = Error.UNKNOWN_TOPIC_OR_PARTITION
                    out.error_message = f"Topic {res.resource_name} does not exist"
                    continue
                out.configs = _topic(config, image, log_defaults or LogConfig(), res, req.include_synonyms)
            else:
                out.error_code = Error.INVALID_REQUEST
                out.error_message = f"Unsupported resource type {res.resource_type} on a controller"
        except log_levels.LoggerFailure as e:
            out.error_code, out.error_message = e.code, e.message
    return R(results=results)


def _broker(node_id: int, config: NodeConfig | None, image: MetadataImage, res: Any, synonyms: bool) -> list:
    R = M.DescribeConfigsResponse.DescribeConfigsResourceResult
    S = R.DescribeConfigsSynonym
    wanted = set(res.configuration_keys) if res.configuration_keys else None
    if res.resource_name == "":
        dynamic = image.configs.get((BROKER_RESOURCE, ""), {})
        shown = {n: None if sensitive(n) else v for n, v in dynamic.items()}
        return [R(name=n, value=shown[n], read_only=False, config_source=SOURCE_DYNAMIC_DEFAULT_BROKER,
                  is_default=False, is_sensitive=sensitive(n),
                  config_type=TYPE_PASSWORD if sensitive(n) else _type(config, n),
                  synonyms=[S(name=n, value=shown[n], source=SOURCE_DYNAMIC_DEFAULT_BROKER)]
                  if synonyms else [])
                for n in sorted(dynamic) if wanted is None or n in wanted]
    try:
        requested = int(res.resource_name)
    except ValueError:
        raise log_levels.LoggerFailure(
            Error.INVALID_REQUEST, f"Broker id must be an integer, but it is: {res.resource_name}") from None
    if requested != node_id:
        raise log_levels.LoggerFailure(Error.INVALID_REQUEST,
                                       f"Unexpected broker id, expected {node_id} or empty string, "
                                       f"but received {res.resource_name}")
    if config is None:
        return []
    own = image.configs.get((BROKER_RESOURCE, str(node_id)), {})
    default = image.configs.get((BROKER_RESOURCE, ""), {})
    out = []
    for name in sorted(n for n, v in config.values.items() if v is not None):
        if wanted is not None and name not in wanted:
            continue
        text = _text(config.values[name])
        layers = ((SOURCE_DYNAMIC_BROKER, own), (SOURCE_DYNAMIC_DEFAULT_BROKER, default))
        chain = [(src, table[name]) for src, table in layers if name in table]
        chain.append((SOURCE_STATIC_BROKER if name in config.originals else SOURCE_DEFAULT, text))
        hidden = sensitive(name)
        source, value = chain[0]
        out.append(R(name=name, value=None if hidden else value, read_only=name not in _DYNAMIC,
                     config_source=source, is_default=source == SOURCE_DEFAULT, is_sensitive=hidden,
                     config_type=TYPE_PASSWORD if hidden else _type(config, name),
                     synonyms=[S(name=name, value=None if hidden else v, source=src) for src, v in chain]
                     if synonyms else []))
    return out


def _topic(config: NodeConfig | None, image: MetadataImage, log_defaults: LogConfig, res: Any,
           synonyms: bool) -> list:
    """A topic's every config: its own value, else its broker property's (the cluster's dynamic
    default, the controller's static one, the default), synonyms in that order."""
    R = M.DescribeConfigsResponse.DescribeConfigsResourceResult
    S = R.DescribeConfigsSynonym
    own = image.topic_config(res.resource_name)
    cluster = image.configs.get((BROKER_RESOURCE, ""), {})
    wanted = set(res.configuration_keys) if res.configuration_keys else None
    out = []
    for name in sorted(TOPIC_CONFIGS):
        if wanted is not None and name not in wanted:
            continue
        spec = TOPIC_CONFIGS[name]
        default = _text(getattr(log_defaults, spec.attr))
        chain = [(SOURCE_DYNAMIC_TOPIC, name, own[name])] if name in own else []
        prop = _TOPIC_FROM_BROKER.get(name)
        if prop is not None and prop in cluster:
            chain.append((SOURCE_DYNAMIC_DEFAULT_BROKER, prop, cluster[prop]))
        if prop is not None and config is not None and prop in config.originals:
            chain.append((SOURCE_STATIC_BROKER, prop, default))
        else:
            chain.append((SOURCE_DEFAULT, prop or name, default))
        source, _, value = chain[0]
        kind = 7 if spec.is_list else {bool: 1, int: 5, float: 6}.get(spec.kind, 2)
        out.append(R(name=name, value=value, read_only=False, config_source=source,
                     is_default=source == SOURCE_DEFAULT, is_sensitive=False, config_type=kind,
                     synonyms=[S(name=n, value=v, source=src) for src, n, v in chain] if synonyms else []))
    return out


def _type(config: NodeConfig | None, name: str) -> int:
    kind = config.kind(name) if config is not None else None
    return _TYPES.get((kind or "string").lower(), 2)


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (list, tuple)):
        return ",".join(map(str, value))
    return str(value)
