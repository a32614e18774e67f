"""Brokers and their lifecycle: registration, heartbeats, sessions, fencing, controlled shutdown.

Theory of operation (Kafka's ClusterControlManager and BrokerHeartbeatManager). A broker's
registration lives in the metadata image; its *session* lives only in the memory of the
active controller, which alone fences and unfences. A broker moves between four states:

    FENCED --heartbeat, caught up with its registration--> UNFENCED
    UNFENCED --want_shut_down, leads partitions--> CONTROLLED_SHUTDOWN
    UNFENCED --want_shut_down, leads nothing / want_fence--> SHUTDOWN_NOW (fenced)
    CONTROLLED_SHUTDOWN --leads nothing, every active broker has seen it--> SHUTDOWN_NOW
    UNFENCED / CONTROLLED_SHUTDOWN --session expired or connection lost--> FENCED

- Registration is refused (UNSUPPORTED_VERSION) unless the broker supports every finalized
  feature level (``unsupported_feature``). A new incarnation gets a new broker epoch, the offset of its
  RegisterBrokerRecord (first in its batch), and starts fenced; what its previous
  incarnation held (ISR places, leaderships, and its ELR places unless it shut down cleanly,
  i.e. previous_broker_epoch names the epoch it had) is given up in the same batch. The same
  incarnation registering again keeps its epoch. A different incarnation is refused
  (DUPLICATE_BROKER_REGISTRATION) while the registered one still has a live session.
- A heartbeat unfences the broker once its metadata offset has reached its registration,
  and then elects it where partitions have no leader.
- Fencing (a session older than broker.session.timeout.ms, found by ``tick``) takes the
  broker out of every ISR and elects new leaders in the same batch as the
  BrokerRegistrationChangeRecord that fences it.
- Controlled shutdown: the BrokerRegistrationChangeRecord marking it and the partition
  changes moving its leaderships away and taking it out of ISRs are one batch; the
  shutdown is granted (should_shut_down, and the broker is fenced) once it leads nothing
  and every active broker's metadata offset has passed that batch.
- Fast fencing (Strom's own; Kafka waits out the session): the shell reports the close of
  the connection a broker heartbeats on (``connection_closed``). A process that dies
  closes its sockets; if no heartbeat from that broker follows within
  strom.broker.disconnect.fence.ms, ``tick`` fences it. A broker that reconnects
  heartbeats at once on its new connection, which cancels it; a network partition closes
  nothing and falls back to the session timeout. The shell also tries the broker's own
  listener at once: refused means nothing listens there any more (``listener_refused``), and
  the broker is fenced at the next tick without waiting out the grace.

A new active controller starts every session afresh (``activate``): the previous one's
clock is not trusted, so a broker is never fenced for a heartbeat that went to it. The shell
then tries every unfenced broker's listener once: a refusal from a broker not heard from
since counts as its connection closing then, so a broker that died with the previous active
controller is fenced after the grace period, not after broker.session.timeout.ms.
"""
from __future__ import annotations

import enum
import logging
from dataclasses import dataclass
from typing import Any

from controller.replication_control import ReplicationControl
from controller.result import ControllerResult
from metadata.image import MetadataImage
from protocol import messages as M
from protocol.errors import Error

log = logging.getLogger(__name__)

METADATA_VERSION = "metadata.version"
# What a broker that names no metadata.version is taken to support: 3.0-IV1, the first KRaft level.
FIRST_KRAFT_METADATA_LEVEL = 1


def unsupported_feature(image: MetadataImage, features: list[Any]) -> str | None:
    """Why a broker registering with ``features`` (BrokerRegistrationRequest.Feature: name and
    supported range) cannot join, or None (Kafka's ClusterControlManager.registerBroker): the
    finalized level of each feature it names, 0 where none is finalized (1 for
    metadata.version), must be in its range; a broker naming no metadata.version supports only
    the first KRaft level; and a feature finalized above 0 that it does not name is one it
    supports only at level 0."""
    ranges = {f.name: (f.min_supported_version, f.max_supported_version) for f in features}
    ranges.setdefault(METADATA_VERSION, (FIRST_KRAFT_METADATA_LEVEL, FIRST_KRAFT_METADATA_LEVEL))
    finalized = {name: level for name, level in image.features.items() if level != 0}
    for name in finalized.keys() - ranges.keys():
        ranges[name] = (0, 0)
    for name, (lo, hi) in sorted(ranges.items()):
        level = finalized.get(name, FIRST_KRAFT_METADATA_LEVEL if name == METADATA_VERSION else 0)
        if not lo <= level <= hi:
            return (f"Unable to register because the broker does not support finalized version {level} "
                    f"of {name}. The broker wants a version between {lo} and {hi}, inclusive.")
    return None

PRODUCER_ID_BLOCK = 1000
FENCE, UNFENCE = 1, -1  # BrokerRegistrationChangeRecord.fenced


class BrokerControlState(enum.Enum):
    FENCED = "fenced"
    UNFENCED = "unfenced"
    CONTROLLED_SHUTDOWN = "controlled_shutdown"
    SHUTDOWN_NOW = "shutdown_now"

    @property
    def fenced(self) -> bool:
        return self in (BrokerControlState.FENCED, BrokerControlState.SHUTDOWN_NOW)


@dataclass
class BrokerSession:
    """The active controller's memory of one broker (never written to the log)."""

    last_contact_ms: int
    metadata_offset: int = -1  # from its latest heartbeat
    # The last offset of the batch that began its controlled shutdown; -1: not shutting down.
    controlled_shutdown_offset: int = -1
    connection: Any = None  # the connection its latest heartbeat came on
    disconnected_ms: int | None = None  # when that connection closed, if no heartbeat since


class ClusterControl:
    def __init__(self, cluster_id: str, replication: ReplicationControl,
                 session_timeout_ms: int = 9000, disconnect_fence_ms: int = 500):
        self.cluster_id = cluster_id
        self.replication = replication
        self.session_timeout_ms = session_timeout_ms
        self.disconnect_fence_ms = disconnect_fence_ms  # < 0: never fence on a closed connection
        self.sessions: dict[int, BrokerSession] = {}

    # ---- activation ----------------------------------------------------------------------
    def activate(self, image: MetadataImage, now_ms: int) -> None:
        self.sessions = {b: BrokerSession(now_ms) for b in image.brokers}

    def deactivate(self) -> None:
        self.sessions = {}

    def _session(self, broker_id: int, now_ms: int) -> BrokerSession:
        session = self.sessions.get(broker_id)
        if session is None:
            session = self.sessions[broker_id] = BrokerSession(now_ms)
        return session

    def has_valid_session(self, image: MetadataImage, broker_id: int, now_ms: int) -> bool:
        b = image.brokers.get(broker_id)
        session = self.sessions.get(broker_id)
        return (b is not None and not b.fenced and session is not None
                and session.disconnected_ms is None
                and now_ms - session.last_contact_ms <= self.session_timeout_ms)

    # ---- BrokerRegistration (key 62) -------------------------------------------------------
    def register(self, image: MetadataImage, req, version: int, next_offset: int, now_ms: int,
                 connection: Any = None) -> ControllerResult:
        R = M.BrokerRegistrationResponse
        if req.cluster_id != self.cluster_id:
            return ControllerResult([], R(error_code=Error.INCONSISTENT_CLUSTER_ID))
        unsupported = unsupported_feature(image, req.features)
        if unsupported is not None:
            log.info("BrokerRegistration of broker %d refused: %s", req.broker_id, unsupported)
            return ControllerResult([], R(error_code=Error.UNSUPPORTED_VERSION))
        existing = image.brokers.get(req.broker_id)
        same_incarnation = existing is not None and existing.incarnation_id == req.incarnation_id
        if (existing is not None and not same_incarnation
                and self.has_valid_session(image, req.broker_id, now_ms)):
            return ControllerResult([], R(error_code=Error.DUPLICATE_BROKER_REGISTRATION))
        record = M.RegisterBrokerRecord(
            broker_id=req.broker_id, incarnation_id=req.incarnation_id, broker_epoch=next_offset,
            end_points=[M.RegisterBrokerRecord.BrokerEndpoint(
                name=lsn.name, host=lsn.host, port=lsn.port, security_protocol=lsn.security_protocol)
                for lsn in req.listeners],
            features=[M.RegisterBrokerRecord.BrokerFeature(
                name=f.name, min_supported_version=f.min_supported_version,
                max_supported_version=f.max_supported_version) for f in req.features],
            rack=req.rack, fenced=True)
        records: list[Any] = [record]
        if same_incarnation:  # the same process again: nothing of it was lost
            assert existing is not None
            record.broker_epoch = existing.broker_epoch
            record.fenced = existing.fenced
            record.in_controlled_shutdown = existing.in_controlled_shutdown
        else:
            clean = (existing is not None and version >= 3
                     and req.previous_broker_epoch == existing.broker_epoch)
            records += self.replication.broker_new_incarnation(image, req.broker_id, clean)
            self.sessions[req.broker_id] = BrokerSession(now_ms, connection=connection)
        return ControllerResult(records, R(error_code=Error.NONE, broker_epoch=record.broker_epoch))

    # ---- BrokerHeartbeat (key 63) ----------------------------------------------------------
    def heartbeat(self, image: MetadataImage, req, next_offset: int, now_ms: int,
                  connection: Any = None) -> ControllerResult:
        R = M.BrokerHeartbeatResponse
        broker = image.brokers.get(req.broker_id)
        if broker is None or broker.broker_epoch != req.broker_epoch:
            return ControllerResult([], R(error_code=Error.STALE_BROKER_EPOCH, is_fenced=True))
        session = self._session(req.broker_id, now_ms)
        current, following = self._next_state(image, req, session)
        records: list[Any] = []
        if following is not current:
            if following.fenced and not broker.fenced:
                records = self.fence(image, [req.broker_id])
            elif following is BrokerControlState.UNFENCED:
                records = [M.BrokerRegistrationChangeRecord(
                    broker_id=req.broker_id, broker_epoch=broker.broker_epoch, fenced=UNFENCE)]
                records += self.replication.broker_unfenced(image, req.broker_id)
            elif following is BrokerControlState.CONTROLLED_SHUTDOWN:
                records = self._controlled_shutdown(image, req.broker_id)
        session.last_contact_ms = now_ms
        session.metadata_offset = req.current_metadata_offset
        session.connection = connection
        session.disconnected_ms = None
        if following.fenced:
            session.controlled_shutdown_offset = -1
        elif following is BrokerControlState.CONTROLLED_SHUTDOWN and session.controlled_shutdown_offset < 0:
            # Complete once every active broker has replayed this batch (or, taken over
            # from a previous controller, everything before it).
            session.controlled_shutdown_offset = next_offset + len(records) - 1
        return ControllerResult(records, R(
            error_code=Error.NONE, is_caught_up=req.current_metadata_offset >= broker.broker_epoch,
            is_fenced=following.fenced, should_shut_down=following is BrokerControlState.SHUTDOWN_NOW))

    def _current_state(self, image: MetadataImage, broker_id: int,
                       session: BrokerSession) -> BrokerControlState:
        broker = image.brokers[broker_id]
        if broker.fenced:
            return BrokerControlState.FENCED
        if session.controlled_shutdown_offset >= 0 or broker.in_controlled_shutdown:
            return BrokerControlState.CONTROLLED_SHUTDOWN
        return BrokerControlState.UNFENCED

    def _next_state(self, image: MetadataImage, req,
                    session: BrokerSession) -> tuple[BrokerControlState, BrokerControlState]:
        """Kafka's calculateNextBrokerState: (current, next)."""
        S = BrokerControlState
        current = self._current_state(image, req.broker_id, session)
        broker = image.brokers[req.broker_id]
        if current is S.FENCED:
            if req.want_shut_down:
                return current, S.SHUTDOWN_NOW
            if not req.want_fence and req.current_metadata_offset >= broker.broker_epoch:
                return current, S.UNFENCED
            return current, S.FENCED
        if current is S.UNFENCED:
            if req.want_fence:
                return current, S.SHUTDOWN_NOW if req.want_shut_down else S.FENCED
            if req.want_shut_down:
                if self.replication.has_leaderships(image, req.broker_id):
                    return current, S.CONTROLLED_SHUTDOWN
                return current, S.SHUTDOWN_NOW
            return current, S.UNFENCED
        # CONTROLLED_SHUTDOWN
        if self.replication.has_leaderships(image, req.broker_id):
            return current, S.CONTROLLED_SHUTDOWN
        if session.controlled_shutdown_offset < 0:
            return current, S.CONTROLLED_SHUTDOWN  # taken over mid-shutdown: set below, then wait
        if session.controlled_shutdown_offset <= self.lowest_active_offset(image):
            return current, S.SHUTDOWN_NOW
        return current, S.CONTROLLED_SHUTDOWN

    def lowest_active_offset(self, image: MetadataImage) -> int:
        """The lowest metadata offset any active broker has reported (no active broker: no
        bound)."""
        offsets = [s.metadata_offset for b, s in self.sessions.items()
                   if image.is_active_broker(b) and s.controlled_shutdown_offset < 0]
        return min(offsets) if offsets else 2**63 - 1

    def _controlled_shutdown(self, image: MetadataImage, broker_id: int) -> list[Any]:
        broker = image.brokers[broker_id]
        records: list[Any] = []
        if not broker.in_controlled_shutdown:
            records.append(M.BrokerRegistrationChangeRecord(
                broker_id=broker_id, broker_epoch=broker.broker_epoch, in_controlled_shutdown=1))
        return records + self.replication.broker_fenced(image, [broker_id])

    # ---- UnregisterBroker (key 64) ---------------------------------------------------------
    def unregister(self, image: MetadataImage, broker_id: int) -> ControllerResult:
        """Kafka's ReplicationControlManager.unregisterBroker: an unknown id is
        BROKER_ID_NOT_REGISTERED; a registered broker, fenced or not (Kafka refuses neither),
        leaves every ISR and leadership, then its registration goes with its epoch."""
        R = M.UnregisterBrokerResponse
        broker = image.brokers.get(broker_id)
        if broker is None:
            return ControllerResult([], R(error_code=Error.BROKER_ID_NOT_REGISTERED,
                                          error_message=f"Broker ID {broker_id} is not currently registered"))
        records = self.replication.broker_fenced(image, [broker_id])
        records.append(M.UnregisterBrokerRecord(broker_id=broker_id, broker_epoch=broker.broker_epoch))
        self.sessions.pop(broker_id, None)
        return ControllerResult(records, R(error_code=Error.NONE, error_message=None))

    # ---- fencing ---------------------------------------------------------------------------
    def fence(self, image: MetadataImage, broker_ids: list[int]) -> list[Any]:
        """Partition changes first (out of ISRs, new leaders), then the fencing itself."""
        records = self.replication.broker_fenced(image, broker_ids)
        for b in broker_ids:
            records.append(M.BrokerRegistrationChangeRecord(
                broker_id=b, broker_epoch=image.brokers[b].broker_epoch, fenced=FENCE))
        return records

    def heard_from(self, image: MetadataImage, broker_id: int, broker_epoch: int, now_ms: int,
                   connection: Any = None) -> None:
        """A heartbeat arrived (it may wait its turn to be decided): the broker is alive, on
        this connection, whatever the timers find meanwhile."""
        broker = image.brokers.get(broker_id)
        session = self.sessions.get(broker_id)
        if broker is None or session is None or broker.broker_epoch != broker_epoch:
            return
        session.last_contact_ms = max(session.last_contact_ms, now_ms)
        session.connection = connection
        session.disconnected_ms = None

    def connection_closed(self, connection: Any, now_ms: int) -> None:
        for session in self.sessions.values():
            if session.connection is connection and session.disconnected_ms is None:
                session.disconnected_ms = now_ms

    def broker_of(self, connection: Any) -> int | None:
        """The broker whose latest heartbeat came on ``connection``."""
        for broker_id, session in self.sessions.items():
            if session.connection is connection:
                return broker_id
        return None

    def listener_refused(self, broker_id: int, now_ms: int) -> None:
        """The broker's own listener refused a connection: nothing listens there.

        - After its heartbeat connection closed (and no heartbeat since), the process is gone:
          fenced at the next ``tick`` instead of after the grace period.
        - Not heard from since this controller activated (the previous active controller may
          have died with it): as if its connection closed now, so it is fenced after the grace
          period unless a heartbeat comes first (a live broker heartbeats at once on its new
          connection to this controller; its advertised address may just not be reachable
          from here).
        - Heartbeating on an open connection: nothing (the address is not reachable from here).
        Nothing either when fast fencing is off."""
        session = self.sessions.get(broker_id)
        if session is None or self.disconnect_fence_ms < 0:
            return
        if session.disconnected_ms is not None:
            session.disconnected_ms = min(session.disconnected_ms, now_ms - self.disconnect_fence_ms)
        elif session.connection is None:
            session.disconnected_ms = now_ms

    def expired(self, image: MetadataImage, now_ms: int) -> list[int]:
        """Unfenced brokers whose session timed out or whose connection closed for good."""
        out = []
        for broker_id in sorted(image.brokers):
            if image.brokers[broker_id].fenced:
                continue
            session = self._session(broker_id, now_ms)
            if now_ms - session.last_contact_ms > self.session_timeout_ms:
                out.append(broker_id)
            elif (session.disconnected_ms is not None and self.disconnect_fence_ms >= 0
                  and now_ms - session.disconnected_ms >= self.disconnect_fence_ms):
                out.append(broker_id)
        return out

    def tick(self, image: MetadataImage, now_ms: int) -> list[Any]:
        """The records fencing every broker whose session has ended (empty: nothing to do)."""
        expired = self.expired(image, now_ms)
        return self.fence(image, expired) if expired else []

    # ---- AllocateProducerIds (key 67) ------------------------------------------------------
    @staticmethod
    def allocate_producer_ids(image: MetadataImage, req) -> ControllerResult:
        """A block of producer ids for a broker's InitProducerId (ProducerIdsRecord)."""
        R = M.AllocateProducerIdsResponse
        broker = image.brokers.get(req.broker_id)
        if broker is None or broker.broker_epoch != req.broker_epoch:
            return ControllerResult([], R(error_code=Error.STALE_BROKER_EPOCH))
        start = image.next_producer_id
        record = M.ProducerIdsRecord(broker_id=req.broker_id, broker_epoch=req.broker_epoch,
                                     next_producer_id=start + PRODUCER_ID_BLOCK)
        return ControllerResult([record], R(error_code=Error.NONE, producer_id_start=start,
                                            producer_id_len=PRODUCER_ID_BLOCK))
