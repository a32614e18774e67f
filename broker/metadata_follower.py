"""The broker as a KRaft observer of the metadata log, and its link to the active controller.

A RaftDriver without endpoints (it never votes) fetches ``__cluster_metadata-0`` from the raft
leader, found through controller.quorum.bootstrap.servers (or the voters), and hands every
committed record to this class (the RaftListener), which replays it into the broker's
MetadataImage and tells the broker what changed. The metadata log is kept in memory: a broker
restarting replays it (or the leader's snapshot) from the controllers.

The active controller is the raft leader. The broker registers with it (BrokerRegistration),
heartbeats (BrokerHeartbeat) so it is unfenced once caught up with its own registration, and
forwards admin requests to it; an answer of NOT_CONTROLLER, or a lost connection, waits for the
next leader and sends again.

Broker lifecycle, as the controller sees it:

- registration: a new process is a new incarnation (a fresh incarnation id); its first
  registration names ``previous_broker_epoch``, the epoch it had before a clean shutdown
  (-1: none, or unknown), so that a clean restart keeps its places as an eligible leader
  replica (KIP-966). A refusal the controller may lift (another incarnation's session still
  live, NOT_CONTROLLER) is retried until the registration timeout.
- every request waits controller.socket.timeout.ms for its answer (a heartbeat at most half of
  broker.session.timeout.ms), or until the raft leader changes, then goes again on a new
  connection; forwarded requests give up after FORWARD_TIMEOUT_S in all.
- heartbeats every broker.heartbeat.interval.ms, and at once on every new connection to the
  controller: the active controller fences a broker soon after the connection its heartbeats
  came on closes, unless a heartbeat follows, so a broker that merely reconnected must say
  so at once.
- ``controlled_shutdown()`` (on SIGTERM, before stopping): heartbeats with want_shut_down
  until the controller answers should_shut_down, which it does once it has moved this
  broker's leaderships away and taken it out of every ISR; bounded by a timeout.
"""
from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable
from typing import Any

from metadata.image import MetadataImage
from protocol import messages as M
from protocol.client import KafkaConnection
from protocol.errors import Error
from protocol.metadata_records import decode_record
from raft.driver import RaftDriver, RaftDriverConfig
from raft.engine_log import CheckpointFormat
from raft.log import Entry, MemoryRaftLog, Snapshot
from raft.metrics import PREFIX as RAFT_PREFIX
from raft.metrics import register_raft

log = logging.getLogger("strom.broker.metadata")

HEARTBEAT_VERSION = 1
REGISTRATION_VERSION = 3
# The features this broker supports, (name, min, max), registered with the controller (which
# refuses the registration when a finalized level is outside its range) and answered in
# ApiVersions (KIP-584): metadata.version 3.0-IV1 to 4.0-IV3, KIP-966's ELR, and
# transaction.version 2 (KIP-890 part 2: the partition leader adds a Produce v12's partition to
# its transaction, the coordinator a TxnOffsetCommit v5's, EndTxn v5 bumps the epoch), and
# group.version 1 (KIP-848: ConsumerGroupHeartbeat and ConsumerGroupDescribe served).
SUPPORTED_FEATURES = (("metadata.version", 1, 25), ("eligible.leader.replicas.version", 0, 1),
                      ("transaction.version", 0, 2), ("group.version", 0, 1), ("kraft.version", 0, 1))


def supported_features() -> list:
    """SUPPORTED_FEATURES as ApiVersionsResponse.SupportedFeatureKey entries."""
    K = M.ApiVersionsResponse.SupportedFeatureKey
    return [K(name=name, min_version=lo, max_version=hi) for name, lo, hi in SUPPORTED_FEATURES]


def registration_features() -> list:
    """SUPPORTED_FEATURES as BrokerRegistrationRequest.Feature entries."""
    F = M.BrokerRegistrationRequest.Feature
    return [F(name=name, min_supported_version=lo, max_supported_version=hi)
            for name, lo, hi in SUPPORTED_FEATURES]


FORWARD_TIMEOUT_S = 30.0
CONTROLLED_SHUTDOWN_POLL_S = 0.05
# Registration answers the controller may later lift: retried until the registration timeout.
RETRIABLE_REGISTRATION = (Error.DUPLICATE_BROKER_REGISTRATION, Error.NOT_CONTROLLER,
                          Error.REQUEST_TIMED_OUT)


class LeaderChanged(Exception):
    """The raft leader changed while a request to the last one waited for its answer."""


class MemoryQuorumState:
    """An observer has no vote to remember: its election state lives in memory."""

    def __init__(self) -> None:
        self.state = None

    def read(self):
        return self.state

    def write(self, state, kraft_version: int, voter_ids) -> None:
        self.state = state


class ObserverLog(MemoryRaftLog):
    """The broker's replica of the metadata log. An observer never leads, so every entry
    appended came from a fetch of the leader's log: ``fetched_records`` is KafkaRaftMetrics'
    fetch-records, a plain count."""

    def __init__(self, snapshot_codec=CheckpointFormat) -> None:
        super().__init__(snapshot_codec)
        self.fetched_records = 0

    def append(self, entries: list[Entry]) -> None:
        super().append(entries)
        self.fetched_records += len(entries)


def register_observer_metrics(registry, driver: Callable[[], Any]) -> None:
    """raft-metrics as a broker's raft client registers them (current-state "observer", the
    leader, epoch, high watermark, log end offset and voters it has learned), read on scrape
    from ``driver()``, and fetch-records as the counter ``kafka_server_raftmetrics_fetch_records_total``
    (Prometheus' rate() of it is fetch-records-rate)."""
    register_raft(registry, driver)

    def fetched() -> int:
        raft = driver()
        return getattr(getattr(raft, "log", None), "fetched_records", 0)

    registry.counter_fn(RAFT_PREFIX + "fetch_records_total", "KRaft's raft-metrics fetch-records", fetched)


def not_controller(response: Any) -> bool:
    """NOT_CONTROLLER anywhere in an answer of the controller's APIs."""
    if getattr(response, "error_code", None) == Error.NOT_CONTROLLER:
        return True
    for name in ("topics", "responses", "results"):
        items = getattr(response, name, None) or []
        if any(getattr(item, "error_code", None) == Error.NOT_CONTROLLER for item in items):
            return True
    return False


class MetadataFollower:
    def __init__(self, node_id: int, cluster_id: str, raft_config: RaftDriverConfig,
                 listeners: list, rack: str | None, on_change: Callable[[MetadataImage], None],
                 heartbeat_ms: int = 2000, request_timeout_ms: int = 30000,
                 heartbeat_timeout_ms: int = 4500):
        self.node_id = node_id
        self.cluster_id = cluster_id
        self.listeners = listeners
        self.rack = rack
        self.on_change = on_change
        self.heartbeat_ms = heartbeat_ms
        # controller.socket.timeout.ms: one request's wait for an answer before the connection
        # is dropped and the request sent again (on a new connection, maybe to a new leader).
        self.request_timeout_s = request_timeout_ms / 1000
        self.heartbeat_timeout_s = heartbeat_timeout_ms / 1000  # also at most half the session
        self.image = MetadataImage()
        self.applied_offset = 0
        self.broker_epoch = -1
        self.fenced = True
        self.ready_to_unfence = True  # False while the broker's logs load (want_fence)
        self.changed = asyncio.Event()
        self.leader_changed = asyncio.Event()
        self.raft = RaftDriver(raft_config, ObserverLog(), MemoryQuorumState(), self)
        self._conn: KafkaConnection | None = None
        self._conn_leader = (-1, -1)
        self._tasks: list[asyncio.Task] = []
        self.incarnation_id = os.urandom(16)
        self.previous_broker_epoch = -1  # set before start(): the epoch of a clean shutdown
        self._heartbeat_now = asyncio.Event()  # a new connection: heartbeat on it at once

    def register_metrics(self, registry) -> None:
        """This broker's raft-metrics, as an observer of the metadata log, in ``registry``."""
        register_observer_metrics(registry, lambda: self.raft)

    # ---- the RaftListener ------------------------------------------------------------------
    def handle_commit(self, entries: list[Entry]) -> None:
        changed = False
        for entry in entries:
            if isinstance(entry.value, bytes | bytearray | memoryview):
                self.image.replay(entry.offset, decode_record(entry.value)[2])
                changed = True
            self.applied_offset = entry.offset + 1
        if changed:
            self._changed()

    def handle_snapshot(self, snapshot: Snapshot) -> None:
        self.image = MetadataImage()
        for value in snapshot.values:
            self.image.replay(snapshot.snapshot_id.offset - 1, decode_record(value)[2])
        self.applied_offset = snapshot.snapshot_id.offset
        self._changed()

    def handle_leader_change(self, leader_id: int, epoch: int) -> None:
        self.leader_changed.set()
        self.leader_changed = asyncio.Event()

    def _changed(self) -> None:
        self.on_change(self.image)
        self.changed.set()
        self.changed = asyncio.Event()

    # ---- the active controller -----------------------------------------------------------------
    async def _connection(self) -> KafkaConnection:
        """A connection to the raft leader, waiting for one to be known."""
        while True:
            leader, epoch = self.raft.leader_and_epoch()
            endpoint = self.raft.core.endpoint_of(leader) if leader >= 0 else None
            if endpoint is None:
                await self._wait_leader_change(0.5)
                continue
            if self._conn is not None and self._conn.connected and self._conn_leader == (leader, epoch):
                return self._conn
            await self._drop_connection()
            conn = KafkaConnection(endpoint.host, endpoint.port, client_id=f"broker-{self.node_id}",
                                   security=self.raft.config.security)
            try:
                await conn.connect()
            except OSError:
                await self._wait_leader_change(0.2)
                continue
            self._conn, self._conn_leader = conn, (leader, epoch)
            if self.broker_epoch >= 0:
                self._heartbeat_now.set()
            return conn

    async def _drop_connection(self) -> None:
        if self._conn is not None:
            conn, self._conn = self._conn, None
            await conn.close()

    async def _wait_leader_change(self, timeout: float) -> None:
        try:
            async with asyncio.timeout(timeout):
                await self.leader_changed.wait()
        except TimeoutError:
            pass

    async def _send(self, api_key: int, version: int, request, timeout: float = FORWARD_TIMEOUT_S):
        """Send to the active controller until it answers as one (or the time is up)."""
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            remaining = deadline - asyncio.get_running_loop().time()
            if remaining <= 0:
                raise TimeoutError(f"no active controller answered API {api_key} in {timeout} s")
            try:
                async with asyncio.timeout(remaining):
                    conn = await self._connection()
                response = await self._request(conn, api_key, version, request,
                                               min(remaining, self.request_timeout_s))
            except LeaderChanged:
                await self._drop_connection()
                continue
            except (ConnectionError, OSError):
                await self._drop_connection()
                await self._wait_leader_change(0.2)
                continue
            except TimeoutError:
                await self._drop_connection()
                continue
            if not_controller(response):
                await self._wait_leader_change(0.2)
                continue
            return response

    async def _request(self, conn: KafkaConnection, api_key: int, version: int, request, timeout: float):
        """One request on ``conn``; LeaderChanged if the raft leader changes before the answer
        comes (a request to an isolated old controller is not waited for to its timeout)."""
        changed = self.leader_changed
        answer = asyncio.ensure_future(conn.request(api_key, version, request, timeout=timeout))
        change = asyncio.ensure_future(changed.wait())
        try:
            await asyncio.wait({answer, change}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            change.cancel()
            if not answer.done():
                answer.cancel()  # asked to stop: it has not, until it runs once more
        if not answer.done():
            raise LeaderChanged()
        return answer.result()

    async def forward(self, api_key: int, version: int, request):
        """Send an admin request to the active controller and return its answer."""
        return await self._send(api_key, version, request)

    # ---- lifecycle -----------------------------------------------------------------------------
    async def start(self, timeout: float = 60.0, recover: Callable[[], None] | None = None) -> None:
        """Observe the metadata log, register, then heartbeat until unfenced, as Kafka's
        BrokerLifecycleManager: fenced by choice (want_fence) until the controller says this
        broker caught up with the metadata log (its own registration replayed), then
        ``recover()`` (the broker loads its logs with the topics' configs the image now holds),
        and only then asking to be unfenced, so that no leadership comes to logs not loaded."""
        await self.raft.start()
        async with asyncio.timeout(timeout):
            await self._register()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        if recover is not None:
            self.ready_to_unfence = False
            while True:
                if loop.time() > deadline:
                    raise TimeoutError("the controller did not see this broker catch up with its metadata")
                response = await self._heartbeat()
                if response is not None and response.error_code == Error.NONE and response.is_caught_up:
                    break
                await asyncio.sleep(0.05)
            recover()
            self.ready_to_unfence = True
        self._tasks = [loop.create_task(self._heartbeat_loop())]
        while self.fenced:
            if loop.time() > deadline:
                raise TimeoutError("the controller did not unfence this broker")
            await self._heartbeat()
            if self.fenced:
                await asyncio.sleep(0.05)

    async def _register(self) -> None:
        R = M.BrokerRegistrationRequest
        request = R(
            broker_id=self.node_id, cluster_id=self.cluster_id, incarnation_id=self.incarnation_id,
            listeners=[R.Listener(name=lsn.name, host=lsn.host, port=lsn.port, security_protocol=0)
                       for lsn in self.listeners],
            features=registration_features(),
            rack=self.rack,
            previous_broker_epoch=self.broker_epoch if self.broker_epoch >= 0 else self.previous_broker_epoch,
        )
        while True:
            response = await self._send(62, REGISTRATION_VERSION, request)
            if response.error_code not in RETRIABLE_REGISTRATION:
                break
            log.info("broker %d: registration answered %s, retrying", self.node_id,
                     Error(response.error_code).name)
            await asyncio.sleep(0.2)
        if response.error_code != Error.NONE:
            reason = (" (the cluster has finalized a feature level this broker does not support: "
                      "the active controller logs which)" if response.error_code == Error.UNSUPPORTED_VERSION
                      else "")
            raise RuntimeError(f"broker registration refused: {Error(response.error_code).name}{reason}")
        self.broker_epoch = response.broker_epoch

    async def _heartbeat(self, want_shut_down: bool = False):
        """One heartbeat; the answer, or None when no controller answered in time."""
        request = M.BrokerHeartbeatRequest(
            broker_id=self.node_id, broker_epoch=self.broker_epoch,
            current_metadata_offset=self.applied_offset - 1, want_fence=not self.ready_to_unfence,
            want_shut_down=want_shut_down)
        try:
            response = await self._send(63, HEARTBEAT_VERSION, request, timeout=self.heartbeat_timeout_s)
        except TimeoutError:
            return None
        if response.error_code == Error.STALE_BROKER_EPOCH and not want_shut_down:
            await self._register()
            return response
        if response.error_code == Error.NONE:
            self.fenced = response.is_fenced
        return response

    async def _heartbeat_loop(self) -> None:
        while True:
            try:
                async with asyncio.timeout(self.heartbeat_ms / 1000):
                    await self._heartbeat_now.wait()
            except TimeoutError:
                pass
            self._heartbeat_now.clear()
            try:
                await self._heartbeat()
            except (RuntimeError, TimeoutError) as e:  # a refused re-registration: keep trying
                log.warning("broker %d: heartbeat failed: %s", self.node_id, e)

    async def controlled_shutdown(self, timeout: float = 30.0) -> bool:
        """Ask the active controller to let this broker go: it moves the broker's leaderships
        away and takes it out of every ISR, then answers should_shut_down (True). False if it
        did not within ``timeout`` seconds (the broker stops anyway; the controller fences it
        when its connection closes)."""
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []
        if self.broker_epoch < 0:
            return True  # never registered: nothing to hand over
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while loop.time() < deadline:
            try:
                async with asyncio.timeout(max(0.001, deadline - loop.time())):
                    response = await self._heartbeat(want_shut_down=True)
            except (TimeoutError, RuntimeError):
                break
            if response is not None and response.error_code == Error.NONE and response.should_shut_down:
                log.info("broker %d: controlled shutdown granted", self.node_id)
                return True
            await asyncio.sleep(CONTROLLED_SHUTDOWN_POLL_S)
        log.warning("broker %d: controlled shutdown not granted in %.1f s", self.node_id, timeout)
        return False

    async def wait_for_change(self, timeout: float) -> None:
        try:
            async with asyncio.timeout(timeout):
                await self.changed.wait()
        except TimeoutError:
            pass

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._drop_connection()
        await self.raft.close(graceful=False)
