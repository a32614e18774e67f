"""Node configuration: Kafka's server.properties names, types and defaults.

An unknown property, or a value of the wrong type or range, stops startup with a message
naming the property. Properties of the log (``log.*``) supply topic defaults through
engine.config.BROKER_SYNONYMS.
"""
from __future__ import annotations

import functools
import re
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from engine.config import BROKER_SYNONYMS, LogConfig, java_integer, log_config_from_broker
from engine.errors import ConfigError
from metadata.configs import (
    GROUP_BOUNDS,
    GROUP_CONFIGS,
    GROUP_HEARTBEAT_INTERVAL,
    GROUP_SESSION_TIMEOUT,
    GroupBounds,
)
from protocol.client import ClientSecurity
from protocol.context import PLAINTEXT, SASL_PROTOCOLS, SECURITY_PROTOCOLS, TLS_PROTOCOLS, KafkaPrincipal
from protocol.limits import ListenerLimits, ListenerQuota
from protocol.limits import resolve_ip_overrides as resolve_addresses
from replication.replica_selector import selector_name
from security import tls
from security.authorizer import STANDARD_AUTHORIZER_NAMES, parse_super_users
from security.sasl.client import listener_authenticator
from security.sasl.config import ListenerSasl, SaslConfigError, listener_sasl

INT, LONG, BOOL, STRING, LIST, DOUBLE = "int", "long", "bool", "string", "list", "double"

# name -> (type, default). None default = no default (optional or required by role).
PROPERTIES: dict[str, tuple[str, Any]] = {
    "process.roles": (LIST, None),
    "node.id": (INT, None),
    "broker.id": (INT, None),
    "listeners": (LIST, "PLAINTEXT://:9092"),
    "advertised.listeners": (LIST, None),
    # Kafka's default maps each security protocol's name to itself (see listener_security_protocols).
    "listener.security.protocol.map": (LIST, ",".join(f"{p}:{p}" for p in SECURITY_PROTOCOLS)),
    "inter.broker.listener.name": (STRING, None),
    "security.inter.broker.protocol": (STRING, PLAINTEXT),
    "controller.listener.names": (LIST, None),
    # Strom's own: where the process serves /metrics in Prometheus' text format (unset: off).
    "metrics.listener": (STRING, None),
    "controller.quorum.voters": (LIST, ""),
    "controller.quorum.bootstrap.servers": (LIST, ""),
    "controller.quorum.election.timeout.ms": (INT, 1000),
    "controller.quorum.fetch.timeout.ms": (INT, 2000),
    "controller.quorum.election.backoff.max.ms": (INT, 1000),
    "controller.quorum.request.timeout.ms": (INT, 2000),
    "controller.quorum.retry.backoff.ms": (INT, 20),
    "controller.quorum.append.linger.ms": (INT, 25),
    "controller.quorum.auto.join.enable": (BOOL, False),
    "log.dirs": (LIST, None),
    "log.dir": (LIST, "/tmp/kafka-logs"),
    "metadata.log.dir": (STRING, None),
    "metadata.log.segment.bytes": (INT, 1073741824),
    "metadata.max.retention.bytes": (LONG, 104857600),
    "metadata.max.retention.ms": (LONG, 604800000),
    "metadata.log.max.record.bytes.between.snapshots": (LONG, 20971520),
    "num.partitions": (INT, 1),
    "default.replication.factor": (INT, 1),
    "auto.create.topics.enable": (BOOL, True),
    "delete.topic.enable": (BOOL, True),
    "offsets.topic.num.partitions": (INT, 50),
    "offsets.topic.replication.factor": (INT, 3),
    "offsets.topic.segment.bytes": (INT, 104857600),
    "offsets.retention.minutes": (INT, 10080),
    "offsets.retention.check.interval.ms": (LONG, 600000),
    "offsets.commit.timeout.ms": (INT, 5000),
    "offsets.load.buffer.size": (INT, 5242880),
    "transaction.state.log.num.partitions": (INT, 50),
    "transaction.state.log.replication.factor": (INT, 3),
    "transaction.state.log.min.isr": (INT, 2),
    "transactional.id.expiration.ms": (INT, 604800000),
    "transaction.state.log.segment.bytes": (INT, 104857600),
    "transaction.state.log.load.buffer.size": (INT, 5242880),
    "transaction.max.timeout.ms": (INT, 900000),
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": (INT, 10000),
    "transaction.remove.expired.transaction.cleanup.interval.ms": (INT, 3600000),
    "transaction.partition.verification.enable": (BOOL, True),
    # The log cleaner (compaction). Its topic defaults (log.cleaner.delete.retention.ms,
    # log.cleaner.min.compaction.lag.ms, log.cleaner.max.compaction.lag.ms,
    # log.cleaner.min.cleanable.ratio) are engine.config.BROKER_SYNONYMS.
    "log.cleaner.enable": (BOOL, True),
    "log.cleaner.threads": (INT, 1),
    "log.cleaner.dedupe.buffer.size": (LONG, 134217728),
    "log.cleaner.io.buffer.size": (INT, 524288),
    "log.cleaner.io.buffer.load.factor": (DOUBLE, 0.9),
    "log.cleaner.io.max.bytes.per.second": (DOUBLE, 1.7976931348623157e308),
    "log.cleaner.backoff.ms": (LONG, 15000),
    "producer.id.expiration.ms": (INT, 86400000),
    "producer.id.expiration.check.interval.ms": (INT, 600000),
    "group.initial.rebalance.delay.ms": (INT, 3000),
    "group.min.session.timeout.ms": (INT, 6000),
    "group.max.session.timeout.ms": (INT, 1800000),
    "group.max.size": (INT, 2**31 - 1),
    "group.coordinator.rebalance.protocols": (LIST, "classic,consumer"),
    "group.consumer.session.timeout.ms": (INT, GROUP_CONFIGS[GROUP_SESSION_TIMEOUT]),
    "group.consumer.heartbeat.interval.ms": (INT, GROUP_CONFIGS[GROUP_HEARTBEAT_INTERVAL]),
    "group.consumer.max.size": (INT, 2**31 - 1),
    # The bounds of a consumer group's session timeout and heartbeat interval (KIP-848): the
    # broker's own group.consumer.* values must lie within them, and so must a group's
    # consumer.* configs (IncrementalAlterConfigs on the GROUP resource).
    **{prop: (INT, getattr(GroupBounds, bound)) for bound, prop in GROUP_BOUNDS.items()},
    "socket.request.max.bytes": (INT, 104857600),
    # SO_SNDBUF of accepted sockets, SO_RCVBUF of listening ones (accepted sockets inherit it),
    # SO_RCVBUF of the replica fetchers'. -1: the OS's own sizing. Kafka's defaults are 102400,
    # 102400 and 65536; Strom's are -1, because fixed buffers that small cost RF=3 acks=all about
    # a fifth of its throughput on loopback (bench.e2e --replication, measured side by side).
    "socket.send.buffer.bytes": (INT, -1),
    "socket.receive.buffer.bytes": (INT, -1),
    "connections.max.idle.ms": (LONG, 600000),  # < 0: never closed for idleness
    # Bytes of requests in memory across a listener's connections (protocol/limits.py). Kafka's
    # default is -1 (unbounded); Strom bounds memory by default with the least Kafka allows, one
    # request of socket.request.max.bytes. <= 0 (-1): unbounded, as in Kafka.
    "queued.max.request.bytes": (LONG, 104857600),
    "max.connections": (INT, 2**31 - 1),
    "max.connections.per.ip": (INT, 2**31 - 1),
    "max.connections.per.ip.overrides": (STRING, ""),  # host:count,host:count (KIP-402)
    "max.connection.creation.rate": (INT, 2**31 - 1),  # per second, per listener (KIP-612)
    "replica.socket.timeout.ms": (INT, 30000),  # the replica fetcher's request timeout
    "replica.socket.receive.buffer.bytes": (INT, -1),  # see socket.send.buffer.bytes
    # Each request from a broker to the active controller (registration, heartbeat, forwarding,
    # AlterPartition), as Kafka's broker-to-controller channels; a heartbeat's is also at most
    # half of broker.session.timeout.ms (KAFKA-14392).
    "controller.socket.timeout.ms": (INT, 30000),
    "num.network.threads": (INT, 3),
    "num.io.threads": (INT, 8),
    "num.recovery.threads.per.data.dir": (INT, 1),
    "num.replica.fetchers": (INT, 1),
    "replica.lag.time.max.ms": (LONG, 30000),
    "replica.fetch.max.bytes": (INT, 1048576),
    "replica.fetch.wait.max.ms": (INT, 500),
    "replica.fetch.min.bytes": (INT, 1),
    "replica.fetch.backoff.ms": (INT, 1000),
    "replica.high.watermark.checkpoint.interval.ms": (LONG, 5000),
    "replica.fetch.response.max.bytes": (INT, 10485760),
    "log.retention.check.interval.ms": (LONG, 300000),
    "log.flush.scheduler.interval.ms": (LONG, 2**63 - 1),
    "log.flush.offset.checkpoint.interval.ms": (INT, 60000),
    "log.flush.start.offset.checkpoint.interval.ms": (INT, 60000),
    "log.retention.hours": (INT, 168),
    "log.retention.minutes": (INT, None),
    "log.roll.hours": (INT, 168),
    "log.roll.jitter.hours": (INT, 0),
    "fetch.max.bytes": (INT, 57671680),
    "max.incremental.fetch.session.cache.slots": (INT, 1000),
    "max.request.partition.size.limit": (INT, 2000),
    "queued.max.requests": (INT, 500),
    "request.timeout.ms": (INT, 30000),
    "broker.rack": (STRING, None),
    # Fetch from the closest replica (KIP-392): unset, the leader serves every consumer; Kafka's
    # org.apache.kafka.common.replica.RackAwareReplicaSelector (or "rack-aware") names a follower
    # in the consumer's client.rack (replication/replica_selector.py).
    "replica.selector.class": (STRING, None),
    "broker.heartbeat.interval.ms": (INT, 2000),
    "broker.session.timeout.ms": (INT, 9000),
    "initial.broker.registration.timeout.ms": (INT, 60000),
    "auto.leader.rebalance.enable": (BOOL, True),
    "leader.imbalance.check.interval.seconds": (LONG, 300),
    "leader.imbalance.per.broker.percentage": (INT, 10),
    # Strom's own (not Kafka's): the active controller fences a broker this long after the
    # connection its heartbeats come on closes, unless a heartbeat from it arrives first (a
    # dead process closes its sockets; a broker that reconnects heartbeats at once). -1: only
    # broker.session.timeout.ms fences, as in Kafka.
    "strom.broker.disconnect.fence.ms": (INT, 500),
    "unstable.api.versions.enable": (BOOL, False),
    "cluster.id": (STRING, None),
    # TLS (security/tls.py): PEM key and trust stores only. Each may be set for one listener as
    # listener.name.<listener>.<property> (``listener_value``).
    "ssl.keystore.type": (STRING, "JKS"),
    "ssl.keystore.location": (STRING, None),
    "ssl.keystore.certificate.chain": (STRING, None),
    "ssl.keystore.key": (STRING, None),
    "ssl.keystore.password": (STRING, None),
    "ssl.key.password": (STRING, None),
    "ssl.truststore.type": (STRING, "JKS"),
    "ssl.truststore.location": (STRING, None),
    "ssl.truststore.certificates": (STRING, None),
    "ssl.truststore.password": (STRING, None),
    "ssl.client.auth": (STRING, "none"),
    "ssl.enabled.protocols": (LIST, "TLSv1.2,TLSv1.3"),
    "ssl.protocol": (STRING, "TLSv1.3"),
    "ssl.cipher.suites": (LIST, ""),
    "ssl.endpoint.identification.algorithm": (STRING, "https"),
    "ssl.principal.mapping.rules": (STRING, "DEFAULT"),
    "ssl.keymanager.algorithm": (STRING, "SunX509"),
    "ssl.trustmanager.algorithm": (STRING, "PKIX"),
    # A listener's key store replaced without a restart may change its certificate's subject
    # (DN) or drop a subject alternative name only with these (Kafka's BrokerSecurityConfigs).
    "ssl.allow.dn.changes": (BOOL, False),
    "ssl.allow.san.changes": (BOOL, False),
    # SASL (security/sasl/): per listener; the sasl.* ones and connections.max.reauth.ms per
    # mechanism too (listener.name.<listener>.<mechanism>.<property>), as Kafka.
    "sasl.enabled.mechanisms": (LIST, "GSSAPI"),
    "sasl.mechanism.inter.broker.protocol": (STRING, "GSSAPI"),
    "sasl.mechanism.controller.protocol": (STRING, "GSSAPI"),
    "sasl.jaas.config": (STRING, None),
    "sasl.server.max.receive.size": (INT, 524288),
    "connections.max.reauth.ms": (LONG, 0),
    "connection.failed.authentication.delay.ms": (INT, 100),
    "sasl.oauthbearer.jwks.endpoint.url": (STRING, None),
    "sasl.oauthbearer.jwks.endpoint.refresh.ms": (LONG, 3600000),
    "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms": (LONG, 100),
    "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms": (LONG, 10000),
    "sasl.oauthbearer.expected.audience": (LIST, None),
    "sasl.oauthbearer.expected.issuer": (STRING, None),
    "sasl.oauthbearer.sub.claim.name": (STRING, "sub"),
    "sasl.oauthbearer.scope.claim.name": (STRING, "scope"),
    "sasl.oauthbearer.clock.skew.seconds": (INT, 30),
    # The authorizer (broker/authorizer.py): empty for none, else Kafka's StandardAuthorizer.
    "authorizer.class.name": (STRING, ""),
    "super.users": (STRING, None),
    "allow.everyone.if.no.acl.found": (BOOL, False),
    # Client quotas: the rate window, quota.window.num samples of quota.window.size.seconds.
    "quota.window.num": (INT, 11),
    "quota.window.size.seconds": (INT, 1),
    # Replication quotas (broker/replication_quota.py): the bounds, in bytes per second (dynamic
    # too), and their rate window, replication.quota.window.num samples of
    # replication.quota.window.size.seconds.
    "leader.replication.throttled.rate": (LONG, 9223372036854775807),
    "follower.replication.throttled.rate": (LONG, 9223372036854775807),
    "replica.alter.log.dirs.io.max.bytes.per.second": (LONG, 9223372036854775807),
    "replication.quota.window.num": (INT, 11),
    "replication.quota.window.size.seconds": (INT, 1),
}

# Properties that listener.name.<listener>.<property> may set for one listener (as Kafka's
# per-listener configs): these prefixes, and these names.
LISTENER_PREFIXES = ("ssl.", "sasl.")
LISTENER_PROPERTIES = frozenset({"connections.max.reauth.ms", "max.connections",
                                 "max.connection.creation.rate", "principal.builder.class"})
_LISTENER_OVERRIDE = re.compile(r"^listener\.name\.(?P<listener>[A-Za-z0-9_]+)\.(?P<rest>.+)$")

METADATA_LOG_SEGMENT_MIN_BYTES = 8 << 20  # Kafka's metadata.log.segment.min.bytes
_SNAPSHOT_RETENTION = "a controller deletes its metadata log's segments below a snapshot once it is written"

# Kafka properties Strom accepts so that a Kafka server.properties starts unchanged, but that
# change nothing here, with why. A node names each one its config sets (``without_effect``).
WITHOUT_EFFECT: dict[str, str] = {
    "num.network.threads": "one asyncio loop per process serves every socket",
    "num.io.threads": "requests are handled on the process's one event loop",
    "num.recovery.threads.per.data.dir": "logs are recovered one after another at startup",
    "queued.max.requests": "no queue sits between network and request threads; "
                           "queued.max.request.bytes bounds the requests held in memory",
    "request.timeout.ms": "a broker's requests to the controller time out after "
                          "controller.socket.timeout.ms, its replica fetches after replica.socket.timeout.ms",
    "unstable.api.versions.enable": "no unstable API version is served",
    "metadata.max.retention.bytes": _SNAPSHOT_RETENTION,
    "metadata.max.retention.ms": _SNAPSHOT_RETENTION,
    "ssl.keymanager.algorithm": "Python's ssl module (OpenSSL) reads the PEM key store",
    "ssl.trustmanager.algorithm": "Python's ssl module (OpenSSL) checks certificates against the PEM "
                                  "trust store",
}
for _broker_name in BROKER_SYNONYMS:
    PROPERTIES.setdefault(_broker_name, (STRING, None))  # validated by engine.config

_LISTENER = re.compile(r"^(?P<name>[A-Za-z0-9_]+)://(?P<host>\[[^\]]*\]|[^:/]*):(?P<port>\d+)$")


@dataclass(frozen=True)
class Listener:
    name: str
    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.name}://{self.host}:{self.port}"


def parse_listeners(name: str, values: list[str]) -> list[Listener]:
    out = []
    for value in values:
        m = _LISTENER.match(value)
        if m is None:
            raise ConfigError(name, f"expected NAME://host:port, got {value!r}")
        out.append(Listener(m.group("name").upper(), m.group("host").strip("[]"), int(m.group("port"))))
    names = [lsn.name for lsn in out]
    if len(set(names)) != len(names):
        raise ConfigError(name, f"listener names must be unique: {', '.join(names)}")
    return out


def parse_metrics_listener(value: str | None) -> tuple[str, int] | None:
    """metrics.listener: ``http://host:port`` (an empty host: every interface); None when unset."""
    if not value:
        return None
    m = re.fullmatch(r"http://(\[[0-9A-Fa-f:.]+\]|[^:/\[\]@ ]*):(\d{1,5})/?", value.strip())
    if m is None or int(m.group(2)) > 65535:
        raise ConfigError("metrics.listener", f"expected http://host:port, got {value!r}")
    return m.group(1).strip("[]"), int(m.group(2))


def parse_voters(value: list[str]) -> dict[int, tuple[str, int]]:
    """controller.quorum.voters: id@host:port,..."""
    voters = {}
    for item in value:
        m = re.match(r"^(\d+)@(\[[^\]]*\]|[^:]+):(\d+)$", item)
        if m is None:
            raise ConfigError("controller.quorum.voters", f"expected id@host:port, got {item!r}")
        voters[int(m.group(1))] = (m.group(2).strip("[]"), int(m.group(3)))
    return voters


def parse_ip_overrides(value: str) -> dict[str, int]:
    """max.connections.per.ip.overrides: host:count,... (a host name or an IP; IPv6 as [::1]:5 or ::1:5)."""
    name = "max.connections.per.ip.overrides"
    out: dict[str, int] = {}
    for item in (part.strip() for part in value.split(",")):
        if not item:
            continue
        host, sep, count = item.rpartition(":")
        host = host.strip().strip("[]")
        if not sep or not host or not re.fullmatch(r"[A-Za-z0-9._:%-]+", host):
            raise ConfigError(name, f"expected host:count, got {item!r}")
        try:
            n = int(count)
        except ValueError:
            raise ConfigError(name, f"expected host:count with an integer count, got {item!r}") from None
        if n < 0:
            raise ConfigError(name, f"a count must be at least 0, got {item!r}")
        out[host] = n
    return out


def resolve_ip_overrides(overrides: dict[str, int]) -> dict[str, int]:
    """The overrides keyed by the address a peer's connection shows (host names resolved once);
    a host that does not resolve stops startup naming the property."""
    def unresolved(host: str, e: OSError) -> None:
        raise ConfigError("max.connections.per.ip.overrides", f"cannot resolve {host!r}: {e}") from None

    return resolve_addresses(overrides, unresolved)


def _convert(name: str, kind: str, raw: Any) -> Any:
    text = str(raw).strip()
    if kind in (INT, LONG):
        value = java_integer(name, text)
        limit = 2**31 if kind == INT else 2**63
        if not -limit <= value < limit:
            raise ConfigError(name, f"out of range: {value}")
        return value
    if kind == DOUBLE:
        try:
            return float(text)
        except ValueError:
            raise ConfigError(name, f"expected a number, got {raw!r}") from None
    if kind == BOOL:
        if text.lower() not in ("true", "false"):
            raise ConfigError(name, f"expected true or false, got {raw!r}")
        return text.lower() == "true"
    if kind == LIST:
        return [item.strip() for item in text.split(",") if item.strip()]
    return text


class ServerConfig:
    """Typed access by Kafka property name: ``config["num.partitions"]``."""

    def __init__(self, props: dict[str, str]):
        self.originals = dict(props)
        self.values: dict[str, Any] = {}
        # listener.name.<listener>.[<mechanism>.]<property>: (LISTENER, mechanism or None, property) -> value
        self.listener_overrides: dict[tuple[str, str | None, str], Any] = {}
        self._override_names: dict[tuple[str, str | None, str], str] = {}
        for name, raw in props.items():
            override = _LISTENER_OVERRIDE.match(name)
            if override is not None:
                key = _listener_override_key(name, override.group("listener"), override.group("rest"))
                self.listener_overrides[key] = _convert(name, PROPERTIES[key[2]][0], raw)
                self._override_names[key] = name
                continue
            spec = PROPERTIES.get(name)
            if spec is None:
                raise ConfigError(name, "unknown property")
            self.values[name] = _convert(name, spec[0], raw)
        for name, (kind, default) in PROPERTIES.items():
            if name not in self.values and default is not None:
                self.values[name] = _convert(name, kind, default)
        self._validate()
        self.log_config: LogConfig = log_config_from_broker(props)

    def __getitem__(self, name: str) -> Any:
        return self.values.get(name)

    def get(self, name: str, default: Any = None) -> Any:
        return self.values.get(name, default)

    @staticmethod
    def kind(name: str) -> str | None:
        """The type a property is declared with (INT, LONG, BOOL, ...), None if unknown."""
        spec = PROPERTIES.get(name)
        return None if spec is None else spec[0]

    def listener_value(self, listener_name: str | None, name: str, mechanism: str | None = None) -> Any:
        """``name`` for one listener: listener.name.<listener>.<mechanism>.<name> (SASL properties),
        else listener.name.<listener>.<name>, else ``name`` itself (Kafka's per-listener configs)."""
        if listener_name is not None:
            listener = listener_name.upper()
            for key in ((listener, mechanism.lower(), name) if mechanism else None, (listener, None, name)):
                if key is not None and key in self.listener_overrides:
                    return self.listener_overrides[key]
        return self.values.get(name)

    def listener_property_name(self, listener_name: str | None, name: str) -> str:
        """The property that sets ``name`` for a listener: its listener.name.* override where set."""
        key = ((listener_name or "").upper(), None, name)
        return self._override_names.get(key, name)

    def metrics_address(self, role: str) -> tuple[str, int] | None:
        """Where the process of ``role`` serves /metrics: metrics.listener's host and port. A
        combined node runs its roles as two processes: the broker's serves metrics.listener and
        the controller's the next port (each any free port when the port is 0)."""
        if self.metrics_listener is None:
            return None
        host, port = self.metrics_listener
        if role == "controller" and "broker" in self.roles and port:
            port += 1
        return host, port

    def security_protocol(self, listener_name: str) -> str:
        """A listener's security protocol (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)."""
        return self.listener_security_protocols.get(listener_name.upper(), PLAINTEXT)

    def ssl_server_context(self, listener_name: str) -> ssl.SSLContext | None:
        """The TLS context a listener serves with; None for a PLAINTEXT or SASL_PLAINTEXT one."""
        if self.security_protocol(listener_name) not in TLS_PROTOCOLS:
            return None
        name = listener_name.upper()
        if name not in self._server_contexts:
            self._server_contexts[name] = self._tls(tls.server_context, name)
        return self._server_contexts[name]

    def listener_binding(self, listener_name: str) -> dict[str, Any]:
        """What protocol.net.Server.bind takes for a listener's security: its protocol, its TLS
        context and how a TLS connection's principal is named."""
        context = self.ssl_server_context(listener_name)
        principal: Callable[[ssl.SSLObject | None], KafkaPrincipal] | None = None
        if context is not None:
            mapper = self._tls(tls.principal_mapper, listener_name.upper())
            principal = functools.partial(tls.peer_principal, mapper=mapper)
        return {"security_protocol": self.security_protocol(listener_name), "ssl_context": context,
                "principal": principal}

    def client_security(self, listener_name: str) -> ClientSecurity:
        """How this node connects to another's ``listener_name`` (the inter-broker listener, a
        controller listener): TLS with this listener's trust and key stores where it is SSL or
        SASL_SSL, then SASL where it is SASL_PLAINTEXT or SASL_SSL (sasl.mechanism.controller.protocol
        on a controller listener, else sasl.mechanism.inter.broker.protocol, with the listener's
        sasl.jaas.config username and password). Made once per listener."""
        name = listener_name.upper()
        if name not in self._client_security:
            context = authenticate = None
            if self.security_protocol(name) in TLS_PROTOCOLS:
                context = self._tls(tls.client_context, name)
            if self.security_protocol(name) in SASL_PROTOCOLS:
                mechanism = ("sasl.mechanism.controller.protocol" if name in self.controller_listener_names
                             else "sasl.mechanism.inter.broker.protocol")
                authenticate = self._sasl(listener_authenticator, name, mechanism)
            self._client_security[name] = ClientSecurity(ssl_context=context, authenticate=authenticate)
        return self._client_security[name]

    def listener_sasl(self, listener_name: str) -> ListenerSasl | None:
        """A SASL listener's mechanisms and what each authenticates against (read once); None
        for a listener that is not SASL_PLAINTEXT or SASL_SSL."""
        name = listener_name.upper()
        if self.security_protocol(name) not in SASL_PROTOCOLS:
            return None
        if name not in self._listener_sasl:
            self._listener_sasl[name] = self._sasl(listener_sasl, name)
        return self._listener_sasl[name]

    def _sasl(self, make: Callable[..., Any], *args: Any) -> Any:
        try:
            return make(self, *args)
        except SaslConfigError as e:
            raise ConfigError(e.name, e.message) from None

    def _validate_sasl(self) -> None:
        """Each SASL listener's settings, the inter-broker mechanism among its listener's enabled
        ones (Kafka's KafkaConfig), and the mechanism and credentials this node authenticates
        with to the SASL listeners it connects to: a bad one stops startup naming its property."""
        for lsn in self.listeners:
            self.listener_sasl(lsn.name)
        outgoing = []
        if "broker" in self.roles:
            outgoing.append(self.inter_broker_listener_name)
            sasl = self.listener_sasl(self.inter_broker_listener_name)
            mechanism = self.values["sasl.mechanism.inter.broker.protocol"]
            if sasl is not None and mechanism not in sasl.mechanisms:
                raise ConfigError("sasl.mechanism.inter.broker.protocol",
                                  "sasl.mechanism.inter.broker.protocol must be included in "
                                  "sasl.enabled.mechanisms when SASL is used for inter-broker communication")
        for name in outgoing + self.controller_listener_names[:1]:
            if self.security_protocol(name) in SASL_PROTOCOLS:
                self.client_security(name)

    def _tls(self, make: Callable[[Any, str], Any], listener_name: str) -> Any:
        try:
            return make(self, listener_name)
        except tls.SslConfigError as e:
            raise ConfigError(self.listener_property_name(listener_name, e.name), e.message) from None

    def without_effect(self) -> dict[str, str]:
        """The properties this config sets that change nothing in Strom, with why."""
        return {name: why for name, why in WITHOUT_EFFECT.items() if name in self.originals}

    def _validate(self) -> None:
        roles = self.values.get("process.roles")
        if not roles:
            raise ConfigError("process.roles", "required: broker, controller, or both")
        bad = set(roles) - {"broker", "controller"}
        if bad:
            raise ConfigError("process.roles", f"unknown roles {sorted(bad)}")
        if self.values.get("node.id") is None:
            if self.values.get("broker.id") is None:
                raise ConfigError("node.id", "required")
            self.values["node.id"] = self.values["broker.id"]
        if self.values["node.id"] < 0:
            raise ConfigError("node.id", "must be >= 0")
        self.listeners = parse_listeners("listeners", self.values["listeners"])
        advertised = self.values.get("advertised.listeners")
        self.advertised = parse_listeners("advertised.listeners", advertised) if advertised else None
        controller_names = [n.upper() for n in self.values.get("controller.listener.names") or []]
        if not controller_names:
            raise ConfigError("controller.listener.names", "required in KRaft mode")
        self.controller_listener_names = controller_names
        self.voters = parse_voters(self.values.get("controller.quorum.voters", []))
        if not self.voters and not self.values.get("controller.quorum.bootstrap.servers"):
            raise ConfigError("controller.quorum.voters",
                              "set it or controller.quorum.bootstrap.servers")
        listener_names = {lsn.name for lsn in self.listeners}
        if "controller" in self.roles:
            if not set(controller_names) & listener_names:
                raise ConfigError("listeners", f"no controller listener ({', '.join(controller_names)})")
        if "broker" in self.roles:
            if not listener_names - set(controller_names):
                raise ConfigError("listeners", "a broker needs a listener that is not a controller listener")
        for name in ("num.partitions", "default.replication.factor", "offsets.topic.num.partitions",
                     "controller.socket.timeout.ms", "num.replica.fetchers",
                     "max.request.partition.size.limit"):
            if self.values[name] < 1:
                raise ConfigError(name, "must be at least 1")
        if self.values["socket.request.max.bytes"] < 1:
            raise ConfigError("socket.request.max.bytes", "must be at least 1")
        least = METADATA_LOG_SEGMENT_MIN_BYTES
        if self.values["metadata.log.segment.bytes"] < least:
            raise ConfigError("metadata.log.segment.bytes", f"must be at least {least}")
        if self.values["log.roll.jitter.hours"] < 0:
            raise ConfigError("log.roll.jitter.hours", "must be at least 0")
        for name in ("log.flush.scheduler.interval.ms", "log.flush.offset.checkpoint.interval.ms",
                     "log.flush.start.offset.checkpoint.interval.ms"):
            if self.values[name] < 1:
                raise ConfigError(name, "must be at least 1")
        for name in ("offsets.retention.minutes", "offsets.retention.check.interval.ms",
                     "producer.id.expiration.ms", "producer.id.expiration.check.interval.ms",
                     "quota.window.num", "quota.window.size.seconds",
                     "replication.quota.window.num", "replication.quota.window.size.seconds"):
            if self.values[name] < 1:
                raise ConfigError(name, "must be at least 1")  # Kafka's atLeast(1)
        authorizer_class = self.values["authorizer.class.name"]
        if authorizer_class and authorizer_class not in STANDARD_AUTHORIZER_NAMES:
            raise ConfigError("authorizer.class.name", f"unknown authorizer {authorizer_class!r}: Strom runs "
                              "org.apache.kafka.metadata.authorizer.StandardAuthorizer, or none (empty)")
        try:
            parse_super_users(self.values.get("super.users"))
        except ValueError as e:
            raise ConfigError("super.users", str(e)) from None
        self._validate_group_consumer()
        self._validate_listener_limits()
        self._validate_security_protocols()
        self._validate_network()
        self._validate_replica_selector()
        self.metrics_listener = parse_metrics_listener(self.values.get("metrics.listener"))
        self._server_contexts: dict[str, ssl.SSLContext] = {}
        self._client_security: dict[str, ClientSecurity] = {}
        for lsn in self.listeners:  # a bad ssl.* value stops startup naming it
            self.listener_binding(lsn.name)
        self._listener_sasl: dict[str, ListenerSasl] = {}
        self._validate_sasl()

    def _validate_group_consumer(self) -> None:
        """Kafka's GroupCoordinatorConfig: each bound at least 1, min <= max, the broker's own
        session timeout and heartbeat interval within their bounds, the interval below the timeout."""
        v = self.values
        for kind in ("session.timeout.ms", "heartbeat.interval.ms"):
            value, least, most = (f"group.consumer.{kind}", f"group.consumer.min.{kind}",
                                  f"group.consumer.max.{kind}")
            for name in (value, least, most):
                if v[name] < 1:
                    raise ConfigError(name, "must be at least 1")
            if v[most] < v[least]:
                raise ConfigError(most, f"must be greater than or equal to {least}")
            if v[value] < v[least]:
                raise ConfigError(value, f"must be greater than or equal to {least}")
            if v[value] > v[most]:
                raise ConfigError(value, f"must be less than or equal to {most}")
        if v["group.consumer.heartbeat.interval.ms"] >= v["group.consumer.session.timeout.ms"]:
            raise ConfigError("group.consumer.heartbeat.interval.ms",
                              "must be less than group.consumer.session.timeout.ms")

    def _validate_listener_limits(self) -> None:
        v = self.values
        queued = v["queued.max.request.bytes"]
        if 0 < queued < v["socket.request.max.bytes"]:
            raise ConfigError("queued.max.request.bytes",
                              f"must be at least socket.request.max.bytes ({v['socket.request.max.bytes']}), "
                              "or -1 for unbounded")
        for name in ("max.connections", "max.connections.per.ip", "max.connection.creation.rate"):
            if v[name] < 0:
                raise ConfigError(name, "must be at least 0")
        self.max_connections_per_ip_overrides = parse_ip_overrides(v["max.connections.per.ip.overrides"])
        if v["max.connections.per.ip"] == 0 and not self.max_connections_per_ip_overrides:
            raise ConfigError("max.connections.per.ip",
                              "can be 0 only if max.connections.per.ip.overrides is set")
        wait_ms = v["replica.fetch.wait.max.ms"]
        if v["replica.socket.timeout.ms"] < wait_ms:
            raise ConfigError("replica.socket.timeout.ms", f"must be at least replica.fetch.wait.max.ms "
                              f"({wait_ms}) to prevent unnecessary socket timeouts")

    def _validate_replica_selector(self) -> None:
        try:
            selector_name(self.values.get("replica.selector.class"))
        except ValueError as e:
            raise ConfigError("replica.selector.class", str(e).split(": ", 1)[1]) from None

    def _validate_security_protocols(self) -> None:
        """listener.security.protocol.map as Kafka's effectiveListenerSecurityProtocolMap reads it:
        NAME:PROTOCOL pairs; left at its default, a listener named after no protocol (CONTROLLER,
        EXTERNAL) is PLAINTEXT. Set explicitly, it must name every listener's protocol."""
        name = "listener.security.protocol.map"
        mapping: dict[str, str] = {}
        for item in self.values[name]:
            listener, sep, protocol = item.partition(":")
            if not sep or not listener.strip():
                raise ConfigError(name, f"expected LISTENER:PROTOCOL, got {item!r}")
            protocol = protocol.strip().upper()
            if protocol not in SECURITY_PROTOCOLS:
                raise ConfigError(name, f"unknown security protocol {protocol} (expected one of "
                                  f"{', '.join(SECURITY_PROTOCOLS)})")
            mapping[listener.strip().upper()] = protocol
        used = [lsn.name for lsn in self.listeners] + self.controller_listener_names
        for listener in used:
            if listener not in mapping:
                if name in self.originals:
                    raise ConfigError(name, f"no security protocol defined for listener {listener}")
                mapping[listener] = PLAINTEXT
        self.listener_security_protocols = mapping

    def _validate_network(self) -> None:
        """fetch.max.bytes and the inter-broker listener as Kafka's KafkaConfig validates them; the
        socket buffer sizes as Java's sockets take them (Kafka declares no range: 0 or below -1
        fails when a socket is opened)."""
        v = self.values
        if v["fetch.max.bytes"] < 1024:
            raise ConfigError("fetch.max.bytes", "must be at least 1024")
        for name in ("socket.send.buffer.bytes", "socket.receive.buffer.bytes",
                     "replica.socket.receive.buffer.bytes"):
            if v[name] < 1 and v[name] != -1:
                raise ConfigError(name, "must be -1 (the OS default) or at least 1")
        # Unset, Kafka's inter-broker listener is named after security.inter.broker.protocol (default
        # PLAINTEXT); only one of the two may be set. Names are normalised to upper case.
        name = v.get("inter.broker.listener.name")
        protocol = v["security.inter.broker.protocol"].upper()
        if name is not None and "security.inter.broker.protocol" in self.originals:
            raise ConfigError("security.inter.broker.protocol", "only one of inter.broker.listener.name and "
                              "security.inter.broker.protocol should be set")
        if protocol not in SECURITY_PROTOCOLS:
            raise ConfigError("security.inter.broker.protocol", f"unknown security protocol {protocol}")
        self.inter_broker_listener_name = protocol if name is None else name.upper()
        if "broker" in self.roles:
            names = [lsn.name for lsn in self.advertised_broker_listeners()]
            if self.inter_broker_listener_name not in names:
                raise ConfigError("inter.broker.listener.name",
                                  "must be a listener name defined in advertised.listeners. The valid "
                                  f"options based on currently configured listeners are {','.join(names)}")

    def listener_limits(self) -> ListenerLimits:
        """What protocol.net.Server enforces on this node's listeners (broker or controller)."""
        v = self.values
        return ListenerLimits(
            queued_max_request_bytes=v["queued.max.request.bytes"],
            max_connections=v["max.connections"],
            max_connections_per_ip=v["max.connections.per.ip"],
            max_connections_per_ip_overrides=resolve_ip_overrides(self.max_connections_per_ip_overrides),
            max_connection_creation_rate=v["max.connection.creation.rate"],
            connections_max_idle_ms=v["connections.max.idle.ms"],
            # Each listener's own: listener.name.<l>.max.connections and .max.connection.creation.rate,
            # else the broker-wide property (Kafka's valuesWithPrefixOverride).
            listeners={lsn.name.upper(): ListenerQuota(
                max_connections=self.listener_value(lsn.name, "max.connections"),
                max_connection_creation_rate=self.listener_value(lsn.name, "max.connection.creation.rate"))
                for lsn in self.listeners},
            inter_broker_listener=self.inter_broker_listener_name if "broker" in self.roles else None)

    @property
    def roles(self) -> list[str]:
        return self.values["process.roles"]

    @property
    def node_id(self) -> int:
        return self.values["node.id"]

    @property
    def log_dirs(self) -> list[str]:
        return self.values.get("log.dirs") or self.values["log.dir"]

    @property
    def metadata_log_dir(self) -> str:
        return self.values.get("metadata.log.dir") or self.log_dirs[0]

    def broker_listeners(self) -> list[Listener]:
        return [lsn for lsn in self.listeners if lsn.name not in self.controller_listener_names]

    def controller_listeners(self) -> list[Listener]:
        return [lsn for lsn in self.listeners if lsn.name in self.controller_listener_names]

    def advertised_controller_listeners(self) -> list[Listener]:
        """How other controllers reach this one (KIP-853 voter endpoints), in
        controller.listener.names order: an advertised.listeners entry of that name, else the
        listeners entry; an empty host is localhost (as Kafka's kafka-metadata-quorum)."""
        by_name = {lsn.name: lsn for lsn in self.listeners}
        by_name.update({lsn.name: lsn for lsn in self.advertised or []})
        return [Listener(by_name[name].name, by_name[name].host or "localhost", by_name[name].port)
                for name in self.controller_listener_names if name in by_name]

    def advertised_broker_listeners(self) -> list[Listener]:
        """How others reach this broker, as its BrokerRegistration lists them: advertised.listeners
        (else listeners, an empty host being localhost) but the controller listeners, the
        inter-broker listener first (Kafka's ListenerInfo: the first is the inter-broker one)."""
        if self.advertised:
            out = [lsn for lsn in self.advertised if lsn.name not in self.controller_listener_names]
        else:
            out = [Listener(lsn.name, lsn.host or "localhost", lsn.port) for lsn in self.broker_listeners()]
        return sorted(out, key=lambda lsn: lsn.name != self.inter_broker_listener_name)


def _listener_override_key(name: str, listener: str, rest: str) -> tuple[str, str | None, str]:
    """listener.name.<listener>.<property>, or .<mechanism>.<property> for a sasl.* property; a
    property that is not one a listener may set is an unknown property, named in full."""
    if rest in PROPERTIES and (rest.startswith(LISTENER_PREFIXES) or rest in LISTENER_PROPERTIES):
        return listener.upper(), None, rest
    mechanism, _, prop = rest.partition(".")
    if (prop.startswith("sasl.") or prop == "connections.max.reauth.ms") and prop in PROPERTIES and mechanism:
        return listener.upper(), mechanism.lower(), prop
    raise ConfigError(name, "unknown property")


def read_config_file(path: str) -> ServerConfig:
    from engine.checkpoint import read_properties

    try:
        props = read_properties(path)
    except FileNotFoundError:
        raise ConfigError("--config", f"no such file: {path}") from None
    return ServerConfig(props)
