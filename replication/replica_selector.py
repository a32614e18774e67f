"""Which replica a consumer should read from (KIP-392, fetch from the closest replica): a pure rule.

Theory of operation. A leader answering a consumer's Fetch (v11+, which carries the client's
rack) asks the configured selector (``replica.selector.class``) for the replica the consumer
should read this partition from. Kafka's ReplicaManager.findPreferredReadReplica builds the
candidates and its RackAwareReplicaSelector picks one; both halves are here, as data in, a broker
id out:

| step         | rule                                                                           |
|--------------|--------------------------------------------------------------------------------|
| candidates   | the leader, always; a follower only if it is in the ISR and its log start      |
|              | offset <= the fetch offset <= its log end offset (as of its last fetch)        |
| endpoint     | a follower with no endpoint on the request's listener (fenced, unregistered,   |
|              | or without that listener) has no rack and is never named                       |
| rack-aware   | no client rack: the leader. Else the candidates in the client's rack: none, or |
|              | the leader among them: the leader; else the most caught up of them (highest    |
|              | log end offset, then the shortest time since it was last caught up; Kafka's    |
|              | ReplicaView.comparator, whose max it takes), ties to the highest broker id     |
| answer       | the chosen follower's id, or None when the leader serves (Kafka never sends    |
|              | the leader as preferred_read_replica)                                          |

No selector configured (the default): None always; the leader serves every consumer, as before
KIP-392. Nothing here does IO or reads a clock: the caller passes each follower's state.
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

RACK_AWARE = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
RACK_AWARE_ALIAS = "rack-aware"
SELECTORS = {RACK_AWARE: RACK_AWARE, RACK_AWARE_ALIAS: RACK_AWARE}
CONFIG = "replica.selector.class"


def selector_name(value: str | None) -> str | None:
    """The selector ``replica.selector.class`` names (None: unset, no selection). Raises
    ValueError, naming the property, for a class Strom does not have."""
    if value is None or not value.strip():
        return None
    name = SELECTORS.get(value.strip())
    if name is None:
        raise ValueError(f"{CONFIG}: unknown replica selector {value!r}; the one served is "
                         f"{RACK_AWARE} (or {RACK_AWARE_ALIAS!r})")
    return name


class FollowerView(NamedTuple):
    """A follower as the leader sees it when a consumer's Fetch arrives."""
    broker_id: int
    rack: str | None  # of its endpoint on the request's listener; None: no rack
    has_endpoint: bool  # registered, unfenced and listening on the request's listener
    in_isr: bool
    log_start_offset: int  # as of its last fetch
    log_end_offset: int  # as of its last fetch
    time_since_caught_up_ms: int  # now - its last caught-up time


def eligible(follower: FollowerView, fetch_offset: int) -> bool:
    """May the consumer read ``fetch_offset`` there? In the ISR, and the offset within its log."""
    return (follower.in_isr and follower.log_start_offset <= fetch_offset
            and follower.log_end_offset >= fetch_offset)


def preferred_read_replica(selector: str | None, client_rack: str | None, leader_rack: str | None,
                           followers: Iterable[FollowerView], fetch_offset: int) -> int | None:
    """The follower a consumer in ``client_rack`` should fetch ``fetch_offset`` from, or None
    when the leader (whose broker is in ``leader_rack``) serves it."""
    if selector != RACK_AWARE or not client_rack:
        return None
    if leader_rack == client_rack:
        return None
    same_rack = [f for f in followers
                 if f.has_endpoint and f.rack == client_rack and eligible(f, fetch_offset)]
    if not same_rack:
        return None
    best = max(same_rack, key=lambda f: (f.log_end_offset, -f.time_since_caught_up_ms, f.broker_id))
    return best.broker_id


__all__ = ["CONFIG", "RACK_AWARE", "RACK_AWARE_ALIAS", "FollowerView", "eligible",
           "preferred_read_replica", "selector_name"]
