"""From a node's server.properties (strom.config.ServerConfig) to a RaftDriverConfig.

| property                                   | RaftDriverConfig / QuorumConfig field         |
|--------------------------------------------|-----------------------------------------------|
| node.id                                    | node_id                                       |
| controller.quorum.voters (id@host:port)    | voters: the static set (kraft.version 0)      |
| controller.quorum.bootstrap.servers        | bootstrap_servers (else the voters' endpoints) |
| controller.quorum.election.timeout.ms      | quorum.election_timeout_ms                    |
| controller.quorum.fetch.timeout.ms         | quorum.fetch_timeout_ms                       |
| controller.quorum.election.backoff.max.ms  | quorum.election_backoff_max_ms                |
| controller.quorum.request.timeout.ms       | quorum.request_timeout_ms                     |
| controller.quorum.retry.backoff.ms         | quorum.retry_backoff_ms                       |
| controller.quorum.append.linger.ms         | append_linger_ms                              |
| controller.quorum.auto.join.enable         | auto_join                                     |

The config object is read by property name only (``config[name]``, ``config.voters``,
``config.node_id``), so raft/ does not depend on the command-line package.
"""
from __future__ import annotations

import re

from .driver import RaftDriverConfig
from .quorum_state import QuorumConfig
from .voters import DEFAULT_LISTENER, Endpoint, VoterSet, static_voter_set

METADATA_PARTITION = "__cluster_metadata-0"
FETCH_MAX_ENTRIES = 5000  # per Fetch answer; Fetch's max_bytes (8 MiB) bounds it too


def parse_bootstrap_servers(items) -> tuple[tuple[str, int], ...]:
    servers = []
    for item in items:
        m = re.match(r"^(\[[^\]]*\]|[^:]+):(\d+)$", item.strip())
        if m is None:
            raise ValueError(f"controller.quorum.bootstrap.servers: expected host:port, got {item!r}")
        servers.append((m.group(1).strip("[]"), int(m.group(2))))
    return tuple(servers)


def quorum_config(config) -> QuorumConfig:
    return QuorumConfig(
        election_timeout_ms=config["controller.quorum.election.timeout.ms"],
        fetch_timeout_ms=config["controller.quorum.fetch.timeout.ms"],
        election_backoff_max_ms=config["controller.quorum.election.backoff.max.ms"],
        request_timeout_ms=config["controller.quorum.request.timeout.ms"],
        retry_backoff_ms=config["controller.quorum.retry.backoff.ms"],
        fetch_max_entries=FETCH_MAX_ENTRIES,
    )


def driver_config(config, cluster_id: str, *, directory_id: bytes | None = None,
                  endpoints: tuple[Endpoint, ...] = (), listener_name: str | None = None,
                  observer: bool = False) -> RaftDriverConfig:
    """A controller passes its directory id and endpoints. ``observer``: a broker, never a
    voter even when it shares its node id with a controller (a combined node): it starts with
    no static voters and learns the leader from the bootstrap servers and its Fetch answers."""
    names = getattr(config, "controller_listener_names", None) or [DEFAULT_LISTENER]
    listener = listener_name or names[0]
    voters = static_voter_set(config.voters, listener) if config.voters and not observer else VoterSet(())
    bootstrap = parse_bootstrap_servers(config["controller.quorum.bootstrap.servers"] or [])
    if not bootstrap:
        bootstrap = tuple(config.voters[i] for i in sorted(config.voters))
    return RaftDriverConfig(
        node_id=config.node_id, cluster_id=cluster_id, voters=voters, endpoints=tuple(endpoints),
        directory_id=directory_id, bootstrap_servers=bootstrap, quorum=quorum_config(config),
        append_linger_ms=config["controller.quorum.append.linger.ms"],
        auto_join=bool(config["controller.quorum.auto.join.enable"]) and bool(endpoints),
        listener_name=listener, observer=observer,
        security=config.client_security(listener) if hasattr(config, "client_security") else None)
