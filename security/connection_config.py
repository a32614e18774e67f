"""The dynamic broker configs that any process's running listeners apply from its metadata image
without a restart, a broker's and a controller's alike (Kafka's SocketServer and
ConnectionQuotas as Reconfigurables of DynamicBrokerConfig, added by KafkaBroker and by
ControllerServer):

| properties                                         | applied to                                |
|----------------------------------------------------|-------------------------------------------|
| max.connections, max.connections.per.ip,           | the running listeners (protocol.net.      |
| max.connections.per.ip.overrides,                  | Server.update_limits)                     |
| max.connection.creation.rate                       |                                           |
| listener.name.<l>.max.connections,                 | listener <l> of the running listeners     |
| listener.name.<l>.max.connection.creation.rate     | (protocol.limits.ListenerQuota), the      |
|                                                    | prefixed value (dynamic, else static)     |
|                                                    | over the base property's current one      |
| client quotas of ip entities                       | the listeners' accept (security.quotas.   |
| (connection_creation_rate)                         | IpConnectionQuotas, KIP-612)              |

A value is this node's dynamic one (the BROKER resource of its node id), else the cluster
default's, else the static property (metadata.configs.dynamic_broker_configs); one the image
holds that does not parse (the controller checked it) is logged and the one before it kept. The
listeners' key and trust stores are reloaded by security/tls.py's TlsReloader over the same
values. ``check_listener_limits`` is the check a node makes of a change of its own listeners'
limits before it is stored (Kafka's ListenerConnectionQuota.validateReconfiguration).
"""
from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable
from typing import Any

from metadata.configs import (
    LISTENER_CONNECTION_CONFIGS,
    SERVICE_CONFIGS,
    SET,
    ConfigFailure,
    check_ip_overrides,
    dynamic_broker_configs,
    listener_connection_config,
    parse_listener_connection_config,
    parse_service_config,
    wrapped_config_exception,
)
from protocol.limits import ListenerQuota, resolve_ip_overrides
from security.quotas import IpConnectionQuotas

log = logging.getLogger("strom.security")

CONNECTIONS = ("max.connections", "max.connections.per.ip", "max.connections.per.ip.overrides",
               "max.connection.creation.rate")


def resolve_overrides(value: str) -> dict[str, int]:
    """max.connections.per.ip.overrides keyed by the address a peer shows (protocol.limits'
    resolver); a host that does not resolve is left out and logged."""
    def unresolved(host: str, e: OSError) -> None:
        log.warning("max.connections.per.ip.overrides: cannot resolve %s: %s", host, e)

    return resolve_ip_overrides(check_ip_overrides(value), unresolved)


def check_listener_limits(configs: Iterable[Any], listeners: Iterable[str]) -> None:
    """Kafka's ListenerConnectionQuota.validateReconfiguration of a change (``configs``: an
    IncrementalAlterConfigs resource's) for the node's own ``listeners``: each listener's
    max.connections and max.connection.creation.rate SET must be above 0 (a value that is no
    integer is the controller's to refuse, naming the base property). Raises ConfigFailure."""
    own = {name.upper() for name in listeners}
    for c in configs:
        found = listener_connection_config(c.name)
        if c.config_operation != SET or found is None or found[0] not in own:
            continue
        try:
            value = parse_listener_connection_config(c.name, c.value)
        except ConfigFailure:
            continue
        if value <= 0:
            raise wrapped_config_exception(f"Invalid {found[1]} {value}")


class DynamicConnections:
    """The node's SERVICE_CONFIGS values, its listeners' connection limits and its ip quotas
    under each new image (``refresh``), applied to the listeners' server ``attach`` gave
    (``apply_limits``). ``current`` is what a thread count change is checked against (Kafka's
    rule, metadata.configs.check_thread_count). ``role`` names the node in its log lines."""

    role = "node"

    def __init__(self, config: Any, node_id: int):
        self.node_id = node_id
        self.static = {name: config[name] for name in SERVICE_CONFIGS}
        self.current: dict[str, Any] = dict(self.static)
        # listener.name.<l>.max.connections and .max.connection.creation.rate set in the file:
        # (LISTENER, base property) -> value; and those the image sets.
        overrides = getattr(config, "listener_overrides", {})
        self.static_listener: dict[tuple[str, str], int] = {
            (listener, base): value for (listener, mechanism, base), value in overrides.items()
            if mechanism is None and base in LISTENER_CONNECTION_CONFIGS}
        self.dynamic_listener: dict[tuple[str, str], int] = {}
        self.ip_quotas = IpConnectionQuotas(config["quota.window.num"], config["quota.window.size.seconds"])
        self.server: Any = None
        self._seen: tuple = ()

    def attach_server(self, server: Any) -> None:
        """The listeners' server, once it exists: it takes the ip quotas and the limits the
        image has changed already."""
        self.server = server
        server.quotas.ip_throttle = self.ip_quotas.throttle_ms

    def values(self, dynamic: dict[str, str]) -> dict[str, Any]:
        """The SERVICE_CONFIGS' values for this node under its ``dynamic`` broker configs."""
        values = dict(self.static)
        for name, raw in dynamic.items():
            if name not in SERVICE_CONFIGS:
                continue
            try:
                values[name] = parse_service_config(name, raw)
            except ConfigFailure as e:
                log.warning("dynamic broker config not applied: %s", e.message)
                values[name] = self.current[name]
        return values

    def refresh(self, image: Any) -> tuple[dict[str, str], set[str]] | None:
        """A new image: the ip quotas read again, and, when this node's dynamic broker configs
        changed, ``current`` and the listeners' limits recomputed; returns those configs and the
        names of the values that changed ("listener connection limits" for the listeners'), or
        None when the configs are those seen last."""
        self.ip_quotas.update(image.client_quotas)  # a few entities: read again each image
        dynamic = dynamic_broker_configs(image, self.node_id)
        key = tuple(sorted(dynamic.items()))
        if key == self._seen:
            return None
        self._seen = key
        old, self.current = self.current, self.values(dynamic)
        old_listener, self.dynamic_listener = self.dynamic_listener, self.listener_values(dynamic)
        changed = {name for name in self.current if self.current[name] != old[name]}
        if self.dynamic_listener != old_listener:
            changed.add("listener connection limits")
        return dynamic, changed

    def apply(self, image: Any) -> None:
        """Called with each new image: the listeners take the limits that changed."""
        found = self.refresh(image)
        if found is None or not found[1] & {*CONNECTIONS, "listener connection limits"}:
            return
        self.log_changes(found[1])
        try:
            self.apply_limits()
        except Exception:  # the image goes on being applied; the limits stay
            log.exception("dynamic broker configs not applied")

    def log_changes(self, changed: set[str]) -> None:
        new = self.current
        log.info("%s %d applying dynamic broker configs: %s", self.role, self.node_id,
                 ", ".join(f"{name}={new[name]}" if name in new else name for name in sorted(changed)))

    def apply_limits(self) -> None:
        if self.server is not None:
            limits = self.listener_limits(self.server.limits)
            if limits != self.server.limits:
                self.server.update_limits(limits)

    def listener_values(self, dynamic: dict[str, str]) -> dict[tuple[str, str], int]:
        """The listeners' connection limits among this node's ``dynamic`` broker configs:
        (LISTENER, base property) -> value (one that does not parse is logged and left out)."""
        out: dict[tuple[str, str], int] = {}
        for name, raw in dynamic.items():
            found = listener_connection_config(name)
            if found is None:
                continue
            try:
                out[found] = parse_listener_connection_config(name, raw)
            except ConfigFailure as e:
                log.warning("dynamic broker config not applied: %s", e.message)
                if found in self.dynamic_listener:
                    out[found] = self.dynamic_listener[found]
        return out

    def listener_names(self, limits: Any) -> set[str]:
        """The listeners whose own limits are computed: those ``limits`` holds."""
        return set(limits.listeners)

    def listener_limits(self, limits: Any) -> Any:
        """``limits`` (a protocol.limits.ListenerLimits) with the current connection limits: the
        node-wide ones, and each listener's, its prefixed value (the image's, else the file's)
        over the base property's current value, as Kafka's valuesWithPrefixOverride."""
        v = self.current
        overrides = v["max.connections.per.ip.overrides"]
        listeners = {}
        for name in self.listener_names(limits):
            own = [self.dynamic_listener.get((name, base), self.static_listener.get((name, base), v[base]))
                   for base in LISTENER_CONNECTION_CONFIGS]
            listeners[name] = ListenerQuota(max_connections=own[0], max_connection_creation_rate=own[1])
        return dataclasses.replace(
            limits, max_connections=v["max.connections"], max_connections_per_ip=v["max.connections.per.ip"],
            max_connections_per_ip_overrides=resolve_overrides(overrides) if overrides else {},
            max_connection_creation_rate=v["max.connection.creation.rate"], listeners=listeners)
