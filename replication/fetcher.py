"""Replica fetchers: the follower side of replication on the wire (Kafka's ReplicaFetcherManager,
ReplicaFetcherThread and AbstractFetcherThread).

Theory of operation. A follower pulls: ``ReplicaFetcherManager`` runs up to num.replica.fetchers
fetchers per source broker (the leader of the partitions it fetches), each a task with its own
connection that sends ONE Fetch at a time carrying all of its partitions that are ready. What to
fetch, and what to do with an answer, is decided by the pure core (replication/follower.py); this
module only carries it over the wire:

| per-partition answer                | what the task does                                          |
|-------------------------------------|-------------------------------------------------------------|
| records (or none), no error         | ``handle_records``: appended byte for byte with the leader's |
|                                     | offsets and epochs (the epoch cache follows), HW and log    |
|                                     | start follow the leader's; then ``on_appended(topic, p)``    |
|                                     | if records came or the HW moved                             |
| diverging_epoch (epoch >= 0)        | ``handle_diverging_epoch``: truncate; the next fetch checks |
|                                     | again (several rounds when the epoch is unknown to us)      |
| OFFSET_OUT_OF_RANGE                 | ListOffsets (replica_id = us) latest and earliest, then     |
|                                     | ``handle_offset_out_of_range`` (truncate, or restart the log |
|                                     | at the leader's log start)                                  |
| NOT_LEADER_OR_FOLLOWER,             | stop fetching it until ``add_partitions`` names another     |
| FENCED_LEADER_EPOCH                 | leader or epoch (our metadata is stale; the new one comes)  |
| UNKNOWN_LEADER_EPOCH, anything else | retry that partition after ``backoff_ms``                    |
| lost connection, timeout            | reconnect after ``backoff_ms`` (the controller moves a dead |
|                                     | leader's partitions and ``add_partitions`` re-targets them)  |

Replication quotas (the follower's, handed in as a ``FollowerQuota``: broker/replication_quota.py):
a partition the quota throttles whose replica here is out of sync (its log end behind the
leader's high watermark in the last answer, or no answer yet) is left out of the fetch while
the follower's replication rate is over follower.replication.throttled.rate (Kafka's
ReplicaFetcherThread.shouldFollowerThrottle), and tried again after ``backoff_ms`` (Kafka's
fetcher waits fetchBackOffMs when nothing is left to fetch); the bytes of every answer for a
throttled partition are recorded in the rate.

An answer is applied only if the partition's fetch state is still the one it was sent with:
a partition removed, re-added with another leader or epoch, or moved on by the task itself
while the Fetch was out has its answer dropped. A task with nothing ready waits for
``add_partitions`` or for the earliest backoff to end; there are no busy loops.

Which fetcher (Kafka's AbstractFetcherManager): a partition goes to the fetcher
``BrokerIdAndFetcherId(leader, fetcher_id(topic, partition, num.replica.fetchers))``, where
``fetcher_id`` is Kafka's ``Utils.abs(31 * topic.hashCode() + partition) % numFetchers`` in Java's
32-bit arithmetic, so a partition sits in the fetcher Kafka would put it in. The id depends on the
partition alone: a new leader takes the partition into its own fetcher of the same id. A new
leader or leader epoch takes the partition out of its fetcher (whose answers for it are then
dropped, as above) and starts it in the other at ``follower.initial_fetch_state``, so truncation
goes exactly as with one fetcher. A fetcher left with no partitions is shut down (its task
cancelled, its connection closed) once the metadata change that emptied it is applied, on the
next loop iteration: Kafka's ReplicaManager calls shutdownIdleFetcherThreads after a change, so a
partition the change stops and starts again keeps its fetcher and connection.

The Fetch (Kafka 4.x replica fetch; version negotiated with ApiVersions on each connection,
the highest both speak in 12..18; 16 when the leader's ApiVersions gives no answer):

| field                          | value                                                       |
|--------------------------------|-------------------------------------------------------------|
| replica_state (v15+)           | replica_id = this broker, replica_epoch = its broker epoch  |
| replica_id (v12-14)            | this broker                                                 |
| max_wait_ms / min_bytes        | replica.fetch.wait.max.ms / replica.fetch.min.bytes         |
| max_bytes                      | replica.fetch.response.max.bytes                            |
| session_id 0, session_epoch -1 | a full fetch every time (no incremental fetch session)      |
| topics[].topic_id (v13+)       | the partition's topic id (the name below v13)               |
| current_leader_epoch           | the leader epoch we follow (the leader fences older/newer)  |
| fetch_offset                   | our log end offset once truncation is done                  |
| last_fetched_epoch             | epoch of our last record, for the leader's divergence check |
| log_start_offset               | ours (the leader's low watermark for DeleteRecords)         |
| partition_max_bytes            | replica.fetch.max.bytes                                     |
| high_watermark (v18)           | ours (KIP-1166's field, which only KRaft acts on: a         |
|                                | partition leader sends its HW with the next records)        |
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any, NamedTuple, Protocol

from engine.log_dir_failure import KafkaStorageError
from protocol import messages as M
from protocol.client import ClientSecurity, ConnectionClosedByPeer, KafkaConnection, listener_refuses
from protocol.java_hash import int32, java_string_hash, kafka_abs
from protocol.list_offsets import EARLIEST, LATEST
from protocol.types import ProtocolError

from . import errors, follower
from .follower import PartitionFetchState
from .log import PartitionLog

log = logging.getLogger("strom.replication.fetcher")

FETCH_KEY, LIST_OFFSETS_KEY, API_VERSIONS_KEY = 1, 2, 18
API_VERSIONS_VERSION = 3
# (lowest usable, highest spoken). Fetch v12 brings last_fetched_epoch and diverging_epoch,
# v13 topic ids, v15 replica_state. ListOffsets v1 is the first with a single offset per answer.
VERSIONS = {FETCH_KEY: (12, 18), LIST_OFFSETS_KEY: (1, 10)}
# What a Strom broker serves, used when ApiVersions gives no answer.
DEFAULT_VERSIONS = {FETCH_KEY: 16, LIST_OFFSETS_KEY: 8}
# Kafka's fetcher stops on a fenced epoch only: NOT_LEADER_OR_FOLLOWER (the leader has not yet
# applied the metadata that made it leader, or had a stale broker epoch of ours) is retried.
STOP_ERRORS = frozenset({errors.FENCED_LEADER_EPOCH})

# What a broken connection, a timeout or an undecodable answer raise from a request.
PROBE_TIMEOUT_S = 0.2  # connecting to a leader that closed our connection: is it still there?
UNREACHABLE_S = 2.0  # how long a refused leader is reported unavailable (fencing takes far less)
REQUEST_FAILURES = (ConnectionError, OSError, TimeoutError, asyncio.TimeoutError, ProtocolError)

TopicPartition = tuple[str, int]


def fetcher_id(topic: str, partition: int, num_fetchers: int) -> int:
    """Kafka's AbstractFetcherManager.getFetcherId: Utils.abs(31 * topic.hashCode() + partition)
    % num.replica.fetchers, with Java's int overflow and Kafka's abs(Integer.MIN_VALUE) = 0."""
    return kafka_abs(int32(31 * java_string_hash(topic) + partition)) % num_fetchers


class BrokerIdAndFetcherId(NamedTuple):
    """One fetcher: its source broker, and its id among that broker's fetchers."""

    broker_id: int
    fetcher_id: int


@dataclass(frozen=True)
class FetcherConfig:
    fetch_wait_max_ms: int = 500  # replica.fetch.wait.max.ms
    fetch_min_bytes: int = 1  # replica.fetch.min.bytes
    fetch_max_bytes: int = 1048576  # replica.fetch.max.bytes, per partition
    response_max_bytes: int = 10485760  # replica.fetch.response.max.bytes
    backoff_ms: int = 1000  # replica.fetch.backoff.ms
    request_timeout_ms: int = 30000  # replica.socket.timeout.ms: connect, ApiVersions and every request
    num_fetchers: int = 1  # num.replica.fetchers: fetchers (connections) per source broker
    socket_receive_buffer_bytes: int = -1  # replica.socket.receive.buffer.bytes; -1: the OS's sizing
    security: ClientSecurity | None = None  # the inter-broker listener's (TLS, SASL)

    def __post_init__(self) -> None:
        if self.num_fetchers < 1:
            raise ValueError(f"num_fetchers must be at least 1, got {self.num_fetchers}")


@dataclass
class FollowerPartition:
    topic_id: bytes
    leader_id: int
    leader_epoch: int
    log: PartitionLog


class UnsupportedVersion(ConnectionError):
    """The leader speaks no Fetch or ListOffsets version a replica fetch can use."""


class _PartitionError(Exception):
    def __init__(self, code: int):
        super().__init__(errors.NAMES.get(code, code))
        self.code = code


class FollowerQuota(Protocol):
    """The follower's replication quota as the fetchers use it."""

    @property
    def active(self) -> bool: ...

    def is_throttled(self, topic: str, partition: int) -> bool: ...

    def exceeded(self, now_ms: int) -> bool: ...

    def record(self, size: int, now_ms: int) -> None: ...


@dataclass(eq=False)
class _Fetching:
    """One partition in a source fetcher. ``state`` is replaced (never mutated) on every change,
    so an answer can tell whether the state it was sent with is still current."""

    topic: str
    partition: int
    target: FollowerPartition
    state: PartitionFetchState
    delayed_until: float = 0.0  # loop time; not fetched before
    stopped: bool = False  # NOT_LEADER_OR_FOLLOWER / FENCED_LEADER_EPOCH: wait for add_partitions
    last_error: str | None = None  # logged once while it repeats, every backoff
    in_sync: bool = False  # caught up with the leader's high watermark in the last answer

    def follows(self, target: FollowerPartition) -> bool:
        t = self.target
        return (t.leader_id == target.leader_id and t.leader_epoch == target.leader_epoch
                and t.topic_id == target.topic_id and t.log is target.log)


def _now_ms() -> int:
    return int(time.time() * 1000)


def pick_version(api_key: int, theirs: dict[int, tuple[int, int]]) -> int:
    lo, hi = VERSIONS[api_key]
    served = theirs.get(api_key)
    if served is None or served[1] < lo or served[0] > hi:
        raise UnsupportedVersion(f"{M.API_NAMES[api_key]} {served} has no version in {lo}..{hi}")
    return min(hi, served[1])


class ReplicaFetcherManager:
    """Every partition this broker follows, grouped by source broker and fetcher id, one fetcher
    task each (Kafka's AbstractFetcherManager)."""

    def __init__(self, local_broker_id: int, broker_epoch: Callable[[], int],
                 endpoint_of: Callable[[int], tuple[str, int] | None], config: FetcherConfig,
                 on_appended: Callable[[str, int], None], quota: FollowerQuota | None = None):
        self.local_broker_id = local_broker_id
        self.quota = quota
        self.broker_epoch = broker_epoch
        self.endpoint_of = endpoint_of
        self.config = config
        self.on_appended = on_appended
        self._fetchers: dict[BrokerIdAndFetcherId, _SourceFetcher] = {}
        # Invariant: every partition's fetcher is in _fetchers and has it in its partitions.
        self._fetcher_of: dict[TopicPartition, BrokerIdAndFetcherId] = {}
        self._stopping: set[asyncio.Task] = set()
        self._idle_check: asyncio.Handle | None = None  # shutdown_idle_fetchers, scheduled
        self._closed = False
        # Leaders whose listener refused us (loop time of the refusal), until we reach them
        # again: their process is gone, though the controller may not have fenced them yet.
        self._refused: dict[int, float] = {}
        # Leaders that closed a connection of ours -> probes running (one per fetcher at most).
        self._probing: dict[int, int] = {}

    def refused(self, broker_id: int) -> None:
        self._refused[broker_id] = asyncio.get_running_loop().time()

    @contextlib.contextmanager
    def probing(self, broker_id: int) -> Iterator[None]:
        """While we probe the listener of a leader that closed our connection, it counts as
        unreachable: a Metadata answer waits for the probe rather than naming it."""
        self._probing[broker_id] = self._probing.get(broker_id, 0) + 1
        try:
            yield
        finally:
            left = self._probing.pop(broker_id) - 1
            if left:
                self._probing[broker_id] = left

    def unreachable(self, broker_id: int) -> bool:
        """Did ``broker_id``'s listener refuse us within UNREACHABLE_S, with no connection since?
        Metadata then answers LEADER_NOT_AVAILABLE for what it leads, so a client whose
        connection to it just died looks for the new leader at once (librdkafka keeps
        producing to a leader that metadata still names, and backs off its refreshes); the
        controller fences it within tens of milliseconds and elects the new leader."""
        if broker_id in self._probing:  # it closed our connection; its listener answers soon
            return True
        refused_at = self._refused.get(broker_id)
        return refused_at is not None and asyncio.get_running_loop().time() - refused_at < UNREACHABLE_S

    def add_partitions(self, partitions: dict[TopicPartition, FollowerPartition]) -> None:
        """(Re)start fetching each partition from its leader at follower.initial_fetch_state, in
        the fetcher Kafka's rule picks (Kafka's addFetcherForPartitions). A partition already
        fetched from that leader in that epoch keeps its state (Kafka's addPartitions), unless it
        was stopped by NOT_LEADER_OR_FOLLOWER / FENCED_LEADER_EPOCH."""
        if self._closed:
            return
        for tp, target in partitions.items():
            key = BrokerIdAndFetcherId(target.leader_id, fetcher_id(tp[0], tp[1], self.config.num_fetchers))
            old_key = self._fetcher_of.get(tp)
            if old_key is not None:
                old = self._fetchers[old_key]
                current = old.partitions.get(tp)
                if old_key == key and current is not None and current.follows(target):
                    continue
                old.partitions.pop(tp, None)
                del self._fetcher_of[tp]
            state = follower.initial_fetch_state(target.log, target.leader_epoch)
            fetcher = self._fetchers.get(key)
            if fetcher is None:
                fetcher = self._fetchers[key] = _SourceFetcher(self, key)
            fetcher.partitions[tp] = _Fetching(tp[0], tp[1], target, state)
            self._fetcher_of[tp] = key
            fetcher.wakeup.set()
            log.info("fetching %s-%d from broker %d (fetcher %d) in leader epoch %d at offset %d "
                     "(last epoch %d)", tp[0], tp[1], key.broker_id, key.fetcher_id, target.leader_epoch,
                     state.fetch_offset, state.last_fetched_epoch)
        self._shutdown_idle_fetchers_soon()

    def resize(self, num_fetchers: int) -> None:
        """num.replica.fetchers changed without a restart (Kafka's resizeThreadPool): each
        partition whose fetcher Kafka's rule now puts elsewhere moves there, fetching again from
        its log's end (an answer on its way to the old fetcher is dropped); fetchers left
        without partitions stop."""
        if num_fetchers < 1 or num_fetchers == self.config.num_fetchers:
            return
        self.config = replace(self.config, num_fetchers=num_fetchers)
        moved = {}
        for tp, key in self._fetcher_of.items():
            entry = self._fetchers[key].partitions.get(tp)
            if entry is not None and key.fetcher_id != fetcher_id(tp[0], tp[1], num_fetchers):
                moved[tp] = entry.target
        self.add_partitions(moved)
        self._shutdown_idle_fetchers_soon()

    def remove_partitions(self, tps) -> None:
        """Stop fetching; an answer already on its way for them is dropped."""
        for tp in tps:
            key = self._fetcher_of.pop(tuple(tp), None)
            if key is not None:
                self._fetchers[key].partitions.pop(tuple(tp), None)
        self._shutdown_idle_fetchers_soon()

    def fetch_state(self, topic: str, partition: int) -> PartitionFetchState | None:
        """The partition's current fetch state (None when not fetched or stopped)."""
        key = self._fetcher_of.get((topic, partition))
        if key is None:
            return None
        entry = self._fetchers[key].partitions.get((topic, partition))
        return None if entry is None or entry.stopped else entry.state

    def sources(self) -> dict[int, list[TopicPartition]]:
        """The partitions fetched from each source broker, whichever fetcher has them."""
        out: dict[int, list[TopicPartition]] = {}
        for key, f in self._fetchers.items():
            if f.partitions:
                out.setdefault(key.broker_id, []).extend(f.partitions)
        return {source: sorted(tps) for source, tps in out.items()}

    def fetchers(self) -> dict[BrokerIdAndFetcherId, list[TopicPartition]]:
        """Every running fetcher and its partitions (an empty list: idle, shut down on the next
        loop iteration)."""
        return {key: sorted(f.partitions) for key, f in self._fetchers.items()}

    def shutdown_idle_fetchers(self) -> None:
        """Stop every fetcher left with no partitions (Kafka's shutdownIdleFetcherThreads): its
        task is cancelled and its connection closed."""
        self._idle_check = None
        for key in [k for k, f in self._fetchers.items() if not f.partitions]:
            task = self._fetchers.pop(key).stop()
            self._stopping.add(task)
            task.add_done_callback(self._stopping.discard)

    async def close(self) -> None:
        self._closed = True
        if self._idle_check is not None:
            self._idle_check.cancel()
            self._idle_check = None
        for fetcher in self._fetchers.values():
            self._stopping.add(fetcher.stop())
        self._fetchers.clear()
        self._fetcher_of.clear()
        await asyncio.gather(*self._stopping, return_exceptions=True)
        self._stopping.clear()

    def _shutdown_idle_fetchers_soon(self) -> None:
        """Shut down the fetchers left idle once the caller's metadata change is applied: the
        ReplicaManager applies a change in one synchronous call, so the next loop iteration
        comes after it."""
        if self._idle_check is None and any(not f.partitions for f in self._fetchers.values()):
            self._idle_check = asyncio.get_running_loop().call_soon(self.shutdown_idle_fetchers)


class _SourceFetcher:
    """One fetcher of one source broker: one connection, one Fetch in flight, the partitions the
    broker leads for us that Kafka's rule gives this fetcher id."""

    def __init__(self, manager: ReplicaFetcherManager, key: BrokerIdAndFetcherId):
        self.manager = manager
        self.config = manager.config
        self.source_id = key.broker_id
        self.fetcher_id = key.fetcher_id
        self.partitions: dict[TopicPartition, _Fetching] = {}
        self.wakeup = asyncio.Event()
        self.conn: KafkaConnection | None = None
        self.endpoint: tuple[str, int] | None = None
        self.versions: dict[int, int] = {}
        self._failing = False  # log a dead leader once per outage, not every backoff
        self.running = True
        self.task = asyncio.get_running_loop().create_task(
            self._run(),
            name=f"replica-fetcher-{manager.local_broker_id}-{self.fetcher_id}-from-{self.source_id}")

    def stop(self) -> asyncio.Task:
        self.running = False
        self.task.cancel()
        return self.task

    # ---- the loop -----------------------------------------------------------------------------

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        backoff = self.config.backoff_ms / 1000
        try:
            while self.running:  # checked too, in case a cancel is lost inside a library call
                now = loop.time()
                ready = [e for e in self.partitions.values() if not e.stopped and e.delayed_until <= now]
                ready = self._unthrottled(ready, now)
                if not ready:
                    await self._wait_for_work(now)
                    continue
                if not await self._connect():
                    await asyncio.sleep(backoff)
                    continue
                await self._fetch(ready)
        finally:
            await self._disconnect()

    async def _wait_for_work(self, now: float) -> None:
        self.wakeup.clear()
        delays = [e.delayed_until for e in self.partitions.values() if not e.stopped]
        timeout = max(0.0, min(delays) - now) if delays else None
        try:
            async with asyncio.timeout(timeout):  # not wait_for: on 3.11 it may swallow a cancel
                await self.wakeup.wait()
        except TimeoutError:
            pass

    def _unthrottled(self, ready: list[_Fetching], now: float) -> list[_Fetching]:
        """``ready`` less the partitions the follower's quota holds back (shouldFollowerThrottle),
        which are delayed by ``backoff_ms``."""
        quota = self.manager.quota
        if quota is None or not quota.active or not ready:
            return ready
        held = [e for e in ready if not e.in_sync and quota.is_throttled(e.topic, e.partition)]
        if not held or not quota.exceeded(_now_ms()):
            return ready
        for entry in held:
            entry.delayed_until = now + self.config.backoff_ms / 1000
        waiting = set(held)
        return [e for e in ready if e not in waiting]

    def _delay(self, entry: _Fetching) -> None:
        entry.delayed_until = asyncio.get_running_loop().time() + self.config.backoff_ms / 1000

    def _current(self, entry: _Fetching, state: PartitionFetchState) -> bool:
        """Is ``entry`` still fetched here with the state a request was sent with?"""
        return (self.partitions.get((entry.topic, entry.partition)) is entry and entry.state is state
                and not entry.stopped)

    # ---- the connection -----------------------------------------------------------------------

    async def _connect(self) -> bool:
        endpoint = self.manager.endpoint_of(self.source_id)
        if endpoint is None:
            self._failed(f"broker {self.source_id} has no known endpoint")
            return False
        if self.conn is not None and self.conn.connected and self.endpoint == tuple(endpoint):
            return True
        await self._disconnect()
        host, port = endpoint
        timeout = self.config.request_timeout_ms / 1000
        # Kafka's client id of a replica fetcher: the leader's logs tell the fetchers apart.
        conn = KafkaConnection(host, port, f"broker-{self.manager.local_broker_id}-fetcher-{self.fetcher_id}",
                               receive_buffer_bytes=self.config.socket_receive_buffer_bytes,
                               security=self.config.security)
        try:
            await conn.connect(timeout)
            self.versions = await self._negotiate(conn, timeout)
        except REQUEST_FAILURES as e:
            await conn.close()
            if isinstance(e, ConnectionRefusedError):
                self.manager.refused(self.source_id)
            self._failed(f"cannot reach broker {self.source_id} at {host}:{port}: {e}")
            return False
        self.conn, self.endpoint = conn, tuple(endpoint)
        self.manager._refused.pop(self.source_id, None)
        if self._failing:
            log.info("reached broker %d at %s:%d again", self.source_id, host, port)
        self._failing = False
        return True

    async def _negotiate(self, conn: KafkaConnection, timeout: float) -> dict[int, int]:
        body = M.ApiVersionsRequest(client_software_name="strom", client_software_version="0")
        answer = await conn.request(API_VERSIONS_KEY, API_VERSIONS_VERSION, body, timeout)
        if answer.error_code != errors.NONE or not answer.api_keys:
            return dict(DEFAULT_VERSIONS)
        theirs = {a.api_key: (a.min_version, a.max_version) for a in answer.api_keys}
        return {key: pick_version(key, theirs) for key in VERSIONS}

    async def _disconnect(self) -> None:
        conn, self.conn, self.endpoint = self.conn, None, None
        if conn is not None:
            await conn.close()

    def _failed(self, why: str) -> None:
        if not self._failing:
            log.warning("replica fetcher: %s; retrying every %d ms", why, self.config.backoff_ms)
        self._failing = True

    async def _request(self, api_key: int, body: Any) -> Any:
        """One request on the connection; a failure closes it, waits out the backoff and raises."""
        try:
            if self.conn is None:  # an earlier request of this round failed
                raise ConnectionError(f"not connected to broker {self.source_id}")
            return await self.conn.request(api_key, self.versions[api_key], body,
                                           self.config.request_timeout_ms / 1000)
        except REQUEST_FAILURES as e:
            self._failed(f"{M.API_NAMES[api_key]} to broker {self.source_id} failed: {e!r}")
            endpoint = self.endpoint
            await self._disconnect()
            if isinstance(e, ConnectionClosedByPeer) and endpoint is not None:
                await self._probe(endpoint)
            await asyncio.sleep(self.config.backoff_ms / 1000)
            raise

    async def _probe(self, endpoint: tuple[str, int]) -> None:
        """The leader closed our connection: a refused connection to its listener means its
        process is gone (``ReplicaFetcherManager.unreachable``) until we reach it again."""
        with self.manager.probing(self.source_id):
            if await listener_refuses(*endpoint, PROBE_TIMEOUT_S):
                self.manager.refused(self.source_id)

    # ---- Fetch --------------------------------------------------------------------------------

    def _build_fetch(self, sent: list[tuple[_Fetching, PartitionFetchState]]) -> Any:
        R = M.FetchRequest
        version = self.versions[FETCH_KEY]
        local = self.manager.local_broker_id
        topics: dict[Any, Any] = {}
        for entry, state in sent:
            key = entry.target.topic_id if version >= 13 else entry.topic
            topic = topics.get(key)
            if topic is None:
                topic = topics[key] = R.FetchTopic(topic=entry.topic, topic_id=entry.target.topic_id,
                                                   partitions=[])
            topic.partitions.append(R.FetchPartition(
                partition=entry.partition,
                current_leader_epoch=state.current_leader_epoch,
                fetch_offset=state.fetch_offset,
                last_fetched_epoch=state.last_fetched_epoch,
                log_start_offset=entry.target.log.log_start_offset,
                partition_max_bytes=self.config.fetch_max_bytes,
                high_watermark=entry.target.log.high_watermark,
            ))
        return R(
            replica_id=local,
            replica_state=R.ReplicaState(replica_id=local, replica_epoch=self.manager.broker_epoch()),
            max_wait_ms=self.config.fetch_wait_max_ms,
            min_bytes=self.config.fetch_min_bytes,
            max_bytes=self.config.response_max_bytes,
            isolation_level=0,
            session_id=0,
            session_epoch=-1,
            topics=list(topics.values()),
            forgotten_topics_data=[],
            rack_id="",
        )

    async def _fetch(self, ready: list[_Fetching]) -> None:
        sent = [(entry, entry.state) for entry in ready]
        try:
            response = await self._request(FETCH_KEY, self._build_fetch(sent))
        except REQUEST_FAILURES:
            return
        if response.error_code != errors.NONE:
            log.warning("Fetch from broker %d answered %s", self.source_id,
                        errors.NAMES.get(response.error_code, response.error_code))
            for entry, _ in sent:
                self._delay(entry)
            return
        by_topic_id = self.versions[FETCH_KEY] >= 13
        answers = {}
        for topic in response.responses or []:
            key = bytes(topic.topic_id) if by_topic_id else topic.topic
            for pd in topic.partitions or []:
                answers[(key, pd.partition_index)] = pd
        out_of_range = []
        for entry, state in sent:
            key = bytes(entry.target.topic_id) if by_topic_id else entry.topic
            pd = answers.get((key, entry.partition))
            if not self._current(entry, state):
                continue  # removed, re-added or moved on while the Fetch was out: dropped
            if pd is None:  # a full fetch answers every partition; never spin on one that is not
                self._partition_error(entry, errors.UNKNOWN_SERVER_ERROR)
            elif pd.error_code == errors.OFFSET_OUT_OF_RANGE:
                out_of_range.append((entry, state))
            elif pd.error_code != errors.NONE:
                self._partition_error(entry, pd.error_code)
            else:
                self._apply(entry, state, pd)
        for entry, state in out_of_range:  # after the others: each costs round trips
            if self._current(entry, state):
                await self._handle_offset_out_of_range(entry, state)

    def _apply(self, entry: _Fetching, state: PartitionFetchState, pd: Any) -> None:
        target = entry.target
        diverging = pd.diverging_epoch
        records = pd.records if pd.records is not None else b""
        try:
            if diverging is not None and diverging.epoch >= 0:
                entry.state = follower.handle_diverging_epoch(target.log, state, diverging.epoch,
                                                              diverging.end_offset)
                log.info("%s-%d: the leader's epoch %d ends at %d; truncated to %d",
                         entry.topic, entry.partition, diverging.epoch, diverging.end_offset,
                         entry.state.fetch_offset)
                return
            high_watermark = target.log.high_watermark
            entry.state, info = follower.handle_records(target.log, state, records, pd.high_watermark,
                                                        pd.log_start_offset, _now_ms())
        except KafkaStorageError:
            entry.stopped = True  # its log dir is offline; the log dir failure channel said so
            return
        except Exception as e:
            if entry.last_error != repr(e):
                log.exception("%s-%d: cannot apply the answer of broker %d at offset %d; retrying every "
                              "%d ms", entry.topic, entry.partition, self.source_id, state.fetch_offset,
                              self.config.backoff_ms)
            entry.last_error = repr(e)
            self._delay(entry)
            return
        entry.last_error = None
        entry.in_sync = target.log.log_end_offset >= pd.high_watermark
        quota = self.manager.quota
        if quota is not None and len(records) and quota.is_throttled(entry.topic, entry.partition):
            quota.record(len(records), _now_ms())
        # New records, or a new high watermark: consumers reading from this follower (KIP-392)
        # wait on both, as Kafka's fetcher completes delayed fetches on a high watermark move.
        appended = len(records) and info.last_offset >= info.first_offset
        if appended or target.log.high_watermark != high_watermark:
            try:
                self.manager.on_appended(entry.topic, entry.partition)
            except Exception:
                log.exception("on_appended failed for %s-%d", entry.topic, entry.partition)

    def _partition_error(self, entry: _Fetching, code: int) -> None:
        name = errors.NAMES.get(code, code)
        if code in STOP_ERRORS:
            entry.stopped = True
            log.info("%s-%d: broker %d answered %s for leader epoch %d; waiting for new metadata",
                     entry.topic, entry.partition, self.source_id, name, entry.state.current_leader_epoch)
        else:
            if entry.last_error != name:
                log.info("%s-%d: broker %d answered %s; retrying every %d ms", entry.topic, entry.partition,
                         self.source_id, name, self.config.backoff_ms)
            entry.last_error = name
            self._delay(entry)

    # ---- ListOffsets --------------------------------------------------------------------------

    async def _handle_offset_out_of_range(self, entry: _Fetching, state: PartitionFetchState) -> None:
        try:
            leader_end = await self._list_offset(entry, state, LATEST)
            leader_start = await self._list_offset(entry, state, EARLIEST)
        except REQUEST_FAILURES:
            return
        except _PartitionError as e:
            if self._current(entry, state):
                self._partition_error(entry, e.code)
            return
        if not self._current(entry, state):
            return
        try:
            entry.state = follower.handle_offset_out_of_range(entry.target.log, state, leader_start,
                                                              leader_end)
        except KafkaStorageError:
            entry.stopped = True  # its log dir is offline
            return
        except Exception:
            log.exception("%s-%d: cannot reset to the leader's log [%d, %d)", entry.topic, entry.partition,
                          leader_start, leader_end)
            self._delay(entry)
            return
        log.info("%s-%d: offset %d out of the leader's range [%d, %d); fetching from %d", entry.topic,
                 entry.partition, state.fetch_offset, leader_start, leader_end, entry.state.fetch_offset)

    async def _list_offset(self, entry: _Fetching, state: PartitionFetchState, timestamp: int) -> int:
        R = M.ListOffsetsRequest
        request = R(replica_id=self.manager.local_broker_id, isolation_level=0, topics=[
            R.ListOffsetsTopic(name=entry.topic, partitions=[R.ListOffsetsPartition(
                partition_index=entry.partition, current_leader_epoch=state.current_leader_epoch,
                timestamp=timestamp)])],
            timeout_ms=self.config.request_timeout_ms)
        response = await self._request(LIST_OFFSETS_KEY, request)
        for topic in response.topics or []:
            for p in topic.partitions or []:
                if topic.name == entry.topic and p.partition_index == entry.partition:
                    if p.error_code != errors.NONE:
                        raise _PartitionError(p.error_code)
                    return p.offset
        raise _PartitionError(errors.UNKNOWN_SERVER_ERROR)


__all__ = ["BrokerIdAndFetcherId", "FetcherConfig", "FollowerPartition", "ReplicaFetcherManager",
           "UnsupportedVersion", "fetcher_id"]
