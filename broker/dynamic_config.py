"""The dynamic broker configs a broker applies from its metadata image without a restart, beyond
the topics' defaults and the replication quotas (broker/server.py applies those), as Kafka's
DynamicBrokerConfig hands each change to its Reconfigurables:

| properties                                         | applied to                                |
|----------------------------------------------------|-------------------------------------------|
| log.cleaner.threads, .dedupe.buffer.size,          | the running cleaner (a new Cleaner for its |
| .io.buffer.size, .io.buffer.load.factor,           | next pass: off_loop.CleanerThread.        |
| .io.max.bytes.per.second, .backoff.ms              | reconfigure)                              |
| num.replica.fetchers                               | the replica fetchers (ReplicaFetcher-     |
|                                                    | Manager.resize)                           |
| max.connections, max.connections.per.ip,           | the running listeners (protocol.net.      |
| max.connections.per.ip.overrides,                  | Server.update_limits)                     |
| max.connection.creation.rate                       |                                           |
| num.io.threads, num.network.threads,               | nothing: accepted as Kafka does, without  |
| num.recovery.threads.per.data.dir                  | effect here (strom.config.WITHOUT_EFFECT) |
| client quotas of ip entities                       | the listeners' accept (security.quotas.   |
| (connection_creation_rate)                         | IpConnectionQuotas, KIP-612)              |

A value is this broker's dynamic one, else the cluster default's, else the static property
(metadata.configs.dynamic_broker_configs); one the image holds that does not parse (the
controller checked it) is logged and the one before it kept. ``current`` is what a thread count
change is checked against (Kafka's rule, metadata.configs.check_thread_count).
"""
from __future__ import annotations

import dataclasses
import ipaddress
import logging
import socket
from typing import Any

from metadata.configs import (
    SERVICE_CONFIGS,
    ConfigFailure,
    check_ip_overrides,
    dynamic_broker_configs,
    parse_service_config,
)
from security.quotas import IpConnectionQuotas

log = logging.getLogger("strom.broker")

CLEANER = ("log.cleaner.threads", "log.cleaner.dedupe.buffer.size", "log.cleaner.io.buffer.size",
           "log.cleaner.io.buffer.load.factor", "log.cleaner.io.max.bytes.per.second",
           "log.cleaner.backoff.ms")
FETCHERS = "num.replica.fetchers"
CONNECTIONS = ("max.connections", "max.connections.per.ip", "max.connections.per.ip.overrides",
               "max.connection.creation.rate")


def resolve_overrides(value: str) -> dict[str, int]:
    """max.connections.per.ip.overrides keyed by the address a peer shows (an IP as written, a
    host name resolved; one that does not resolve is left out and logged)."""
    out: dict[str, int] = {}
    for host, n in check_ip_overrides(value).items():
        try:
            out[str(ipaddress.ip_address(host))] = n
            continue
        except ValueError:
            pass
        try:
            infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
        except OSError as e:
            log.warning("max.connections.per.ip.overrides: cannot resolve %s: %s", host, e)
            continue
        for info in infos:
            out[str(ipaddress.ip_address(info[4][0]))] = n
    return out


class DynamicBrokerConfig:
    """Applies the image's dynamic broker configs (see the module doc) to what ``attach`` gave:
    the cleaner thread, the replica fetcher manager and the listeners' server, each optional."""

    def __init__(self, config: Any, node_id: int):
        self.node_id = node_id
        self.static = {name: config[name] for name in SERVICE_CONFIGS}
        self.current: dict[str, Any] = dict(self.static)
        self.ip_quotas = IpConnectionQuotas(config["quota.window.num"], config["quota.window.size.seconds"])
        self.cleaner: Any = None
        self.fetchers: Any = None
        self.server: Any = None
        self._seen: tuple = ()

    def attach(self, cleaner: Any = None, fetchers: Any = None, server: Any = None) -> None:
        """What the values apply to, once it exists; each made with the static properties gets
        the values the image has changed already."""
        differs = {name for name in self.current if self.current[name] != self.static[name]}
        if cleaner is not None:
            self.cleaner = cleaner
            if differs & set(CLEANER):
                cleaner.reconfigure(self.current)
        if fetchers is not None:
            self.fetchers = fetchers
            if FETCHERS in differs:
                fetchers.resize(self.current[FETCHERS])
        if server is not None:
            self.server = server
            server.quotas.ip_throttle = self.ip_quotas.throttle_ms
            if differs & set(CONNECTIONS):
                server.update_limits(self.listener_limits(server.limits))

    def values(self, image: Any) -> dict[str, Any]:
        """The SERVICE_CONFIGS' values for this broker under ``image``."""
        dynamic = dynamic_broker_configs(image, self.node_id)
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

    def apply(self, image: Any) -> None:
        """Called with each new image: applies what changed."""
        self.ip_quotas.update(image.client_quotas)  # a few entities: read again each image
        key = tuple(sorted(dynamic_broker_configs(image, self.node_id).items()))
        if key == self._seen:
            return
        self._seen = key
        old, new = self.current, self.values(image)
        self.current = new
        changed = {name for name in new if new[name] != old[name]}
        if not changed:
            return
        log.info("broker %d applying dynamic broker configs: %s", self.node_id,
                 ", ".join(f"{name}={new[name]}" for name in sorted(changed)))
        try:
            if changed & set(CLEANER) and self.cleaner is not None:
                self.cleaner.reconfigure(new)
            if FETCHERS in changed and self.fetchers is not None:
                self.fetchers.resize(new[FETCHERS])
            if changed & set(CONNECTIONS) and self.server is not None:
                self.server.update_limits(self.listener_limits(self.server.limits))
        except Exception:  # the image goes on being applied; what was not reconfigured stays
            log.exception("dynamic broker configs not applied")

    def listener_limits(self, limits: Any) -> Any:
        """``limits`` (a protocol.limits.ListenerLimits) with the current connection limits."""
        v = self.current
        overrides = v["max.connections.per.ip.overrides"]
        return dataclasses.replace(
            limits, max_connections=v["max.connections"], max_connections_per_ip=v["max.connections.per.ip"],
            max_connections_per_ip_overrides=resolve_overrides(overrides) if overrides else {},
            max_connection_creation_rate=v["max.connection.creation.rate"])
