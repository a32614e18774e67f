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
| max.connections*, listener.name.<l>.max.conn-      | the running listeners, as a controller's  |
| ection*, client quotas of ip entities              | (security.connection_config's table)      |
| listeners, advertised.listeners,                   | the listeners (``apply_listeners``, Kafka's |
| listener.security.protocol.map                     | DynamicListenerConfig.reconfigure): one   |
|                                                    | added is bound and accepts, one removed   |
|                                                    | stops and its connections close. A KRaft  |
|                                                    | broker refuses any change of its          |
|                                                    | registered endpoints and of an existing   |
|                                                    | listener's protocol (``check_listener_    |
|                                                    | change``, before forwarding), so only     |
|                                                    | listeners it does not advertise come and  |
|                                                    | go; a SASL one is refused (its            |
|                                                    | authenticators are made at startup)       |
| num.io.threads, num.network.threads,               | nothing: accepted as Kafka does, without  |
| num.recovery.threads.per.data.dir                  | effect here (strom.config.WITHOUT_EFFECT) |

A value is this broker's dynamic one, else the cluster default's, else the static property
(metadata.configs.dynamic_broker_configs); one the image holds that does not parse (the
controller checked it) is logged and the one before it kept. ``current`` is what a thread count
change is checked against (Kafka's rule, metadata.configs.check_thread_count). The connection
limits and the ip quotas are applied by security/connection_config.py's DynamicConnections, which
a controller's listeners use too (controller/dynamic_config.py); the cleaner, the fetchers and
the listeners themselves are the broker's alone.
"""
from __future__ import annotations

import logging
from typing import Any

from metadata.configs import (
    LISTENER_CONFIGS,
    LISTENER_CONNECTION_CONFIGS,
    ConfigFailure,
    wrapped_config_exception,
)
from protocol.errors import Error
from security.connection_config import DynamicConnections

CLEANER = ("log.cleaner.threads", "log.cleaner.dedupe.buffer.size", "log.cleaner.io.buffer.size",
           "log.cleaner.io.buffer.load.factor", "log.cleaner.io.max.bytes.per.second",
           "log.cleaner.backoff.ms")
FETCHERS = "num.replica.fetchers"

log = logging.getLogger("strom.broker")


class DynamicBrokerConfig(DynamicConnections):
    """Applies the image's dynamic broker configs (see the module doc) to what ``attach`` gave:
    the cleaner thread, the replica fetcher manager and the listeners' server, each optional.
    The connection limits and ip quotas are security.connection_config's, as a controller's."""

    role = "broker"

    def __init__(self, config: Any, node_id: int):
        super().__init__(config, node_id)
        # listeners, advertised.listeners, listener.security.protocol.map: the file's config, the
        # image's values of them applied last, and the broker listeners bound now, by name.
        self.config = config
        self.listener_configs: dict[str, str] = {}
        self.unbound: set[str] = set()  # broker listeners removed since start
        self.bound = {lsn.name.upper(): lsn for lsn in config.broker_listeners()} \
            if hasattr(config, "broker_listeners") else {}
        self.cleaner: Any = None
        self.fetchers: Any = None

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
            self.attach_server(server)
            if self.listener_configs:
                self.apply_listeners(self.listener_configs)
            self.apply_limits()

    def apply(self, image: Any) -> None:
        """Called with each new image: applies what changed."""
        found = self.refresh(image)
        if found is None:
            return
        dynamic, changed = found
        new = self.current
        listener_configs = {k: v for k, v in dynamic.items() if k in LISTENER_CONFIGS}
        if listener_configs != self.listener_configs:
            self.listener_configs = listener_configs
            changed.add("listeners")
            if self.server is not None:
                try:
                    self.apply_listeners(listener_configs)
                except Exception:  # the image goes on being applied; the listeners stay
                    log.exception("dynamic listeners not applied")
        if not changed:
            return
        self.log_changes(changed)
        try:
            if changed & set(CLEANER) and self.cleaner is not None:
                self.cleaner.reconfigure(new)
            if FETCHERS in changed and self.fetchers is not None:
                self.fetchers.resize(new[FETCHERS])
            self.apply_limits()
        except Exception:  # the image goes on being applied; what was not reconfigured stays
            log.exception("dynamic broker configs not applied")

    def apply_listeners(self, values: dict[str, str]) -> None:
        """The image's listeners (Kafka's DynamicListenerConfig.reconfigure): each broker listener
        they add is bound and accepts, each they remove stops and its connections close. A
        config that does not hold, or changes what the broker registered (the broker that
        forwarded the change checked it; a controller takes it as it is), is logged and the
        listeners stay as they are."""
        try:
            new = type(self.config)({**self.config.originals, **values})
            check_listener_change(self.config, new)
        except (ValueError, ConfigFailure) as e:
            log.warning("broker %d does not apply its dynamic listeners: %s", self.node_id,
                        e.message if isinstance(e, ConfigFailure) else e)
            return
        wanted = {lsn.name.upper(): lsn for lsn in new.broker_listeners()}
        for name in [n for n in self.bound if n not in wanted]:
            self.server.remove_listener(name)
            del self.bound[name]
            self.unbound.add(name)
            log.info("broker %d stopped listening on %s", self.node_id, name)
        for name, lsn in wanted.items():
            if name in self.bound:
                continue
            try:
                port = self.server.add_listener(lsn.host, lsn.port, name, **new.listener_binding(name))
            except OSError as e:
                log.warning("broker %d cannot listen on %s (%s): %s", self.node_id, lsn, name, e)
                continue
            self.bound[name] = lsn
            self.unbound.discard(name)
            for base in LISTENER_CONNECTION_CONFIGS:  # its file's prefixed limits, if any
                value = new.listener_overrides.get((name, None, base))
                if value is not None:
                    self.static_listener[(name, base)] = value
            log.info("broker %d listening on %s:%d (%s)", self.node_id, lsn.host, port, name)

    def listener_names(self, limits: Any) -> set[str]:
        """The listeners in ``limits`` and those bound since, less those removed since."""
        return (set(limits.listeners) | set(self.bound)) - self.unbound


def check_listener_change(old: Any, new: Any) -> None:
    """A KRaft broker's DynamicListenerConfig.validateReconfiguration of new listeners,
    advertised.listeners or listener.security.protocol.map (``new``: the config with them, a
    strom.config.ServerConfig as ``old``): an existing listener keeps its security protocol, and
    the endpoints the broker registered (its advertised listeners) may not change at all; raises
    Kafka's wrapped answer, INVALID_REQUEST."""
    for lsn in new.broker_listeners():
        added = not any(o.name == lsn.name for o in old.listeners)
        if added and new.security_protocol(lsn.name).startswith("SASL"):
            raise ConfigFailure(Error.INVALID_REQUEST,
                                f"Listener {lsn.name}: a SASL listener is not added without a restart "
                                "(its authenticators are made at startup)")
    for lsn in new.listeners:
        if any(o.name == lsn.name for o in old.listeners) and \
                new.security_protocol(lsn.name) != old.security_protocol(lsn.name):
            raise wrapped_config_exception("Security protocol cannot be updated for existing listener "
                                           f"{lsn.name}")

    def registered(config: Any) -> dict[str, tuple[str, int, str]]:
        return {lsn.name: (lsn.host, lsn.port, config.security_protocol(lsn.name))
                for lsn in config.advertised_broker_listeners()}

    if registered(old) != registered(new):
        raise wrapped_config_exception("Advertised listeners cannot be altered when using a "
                                       "Raft-based metadata quorum.")
