"""The metadata image's brokers, as replication needs them.

The Partition core asks one question of the cluster, through ``BrokerRegistry.get``: is this
replica's broker registered, with which broker epoch, fenced or in controlled shutdown (the ISR
eligibility rules). The edge also needs where a broker listens: the replica fetchers connect to
leaders on the inter-broker listener, and a NOT_LEADER_OR_FOLLOWER answer names the new leader's
endpoint (KIP-951) on the listener the request came on.

Both read the current image (metadata/image.py BrokerState, replayed from RegisterBrokerRecord,
FenceBrokerRecord, UnfenceBrokerRecord, ...):

| BrokerState field        | used as                                                        |
|--------------------------|----------------------------------------------------------------|
| broker_epoch             | BrokerLiveness.broker_epoch: a fetch with an older one is fenced |
| fenced                   | BrokerLiveness.fenced: not eligible for the ISR, offline replica |
| in_controlled_shutdown   | BrokerLiveness.in_controlled_shutdown (absent: False)           |
| endpoints, rack          | endpoint on a listener (host, port), rack                       |

The image object is replaced on a metadata snapshot; ``image`` is set on every change, so the
registry always answers from the newest one.
"""
from __future__ import annotations

from typing import Any

from replication.partition import BrokerLiveness


class ImageBrokers:
    """BrokerRegistry over a metadata image, plus endpoints: on the inter-broker listener
    (``listener_name``) unless a caller names another."""

    def __init__(self, listener_name: str, image: Any = None) -> None:
        self.listener_name = listener_name
        self.image = image

    def _state(self, broker_id: int) -> Any:
        if self.image is None:
            return None
        return self.image.brokers.get(broker_id)

    def get(self, broker_id: int) -> BrokerLiveness | None:
        b = self._state(broker_id)
        if b is None:
            return None
        return BrokerLiveness(b.broker_epoch, b.fenced, getattr(b, "in_controlled_shutdown", False))

    def is_alive(self, broker_id: int) -> bool:
        """Registered and unfenced: a leader worth fetching from, a replica online."""
        b = self._state(broker_id)
        return b is not None and not b.fenced

    def endpoint_of(self, broker_id: int) -> tuple[str, int] | None:
        """(host, port) of a registered broker's listener; None if unknown."""
        b = self._state(broker_id)
        return None if b is None else b.endpoint(self.listener_name)

    def node(self, broker_id: int, listener_name: str | None = None) -> tuple[str, int, str | None] | None:
        """(host, port, rack) of an unfenced broker on ``listener_name`` (KIP-951 node
        endpoints); None if it is fenced, unknown or without that listener."""
        b = self._state(broker_id)
        if b is None or b.fenced:
            return None
        endpoint = b.endpoint(listener_name or self.listener_name)
        return None if endpoint is None else (endpoint[0], endpoint[1], b.rack)

    def is_offline_replica(self, broker_id: int) -> bool:
        """Not registered, fenced, or without this listener (Metadata offline_replicas)."""
        b = self._state(broker_id)
        return b is None or b.fenced or b.endpoint(self.listener_name) is None
