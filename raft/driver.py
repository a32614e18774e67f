"""RaftDriver: the asyncio shell of one KRaft replica around the pure RaftCore.

Theory of operation. The driver owns the core, its RaftLog, the quorum-state file, a monotonic
clock (ms) and a random.Random. Every core call (``step``, ``tick``, ``append``, ``resign``) runs
on the event loop without an await in between, and its Ready is carried out at once, in order:
write the quorum-state file, flush the log, send the messages, reload the listener from a loaded
snapshot, hand committed entries (below the high watermark) to the listener, tell it about a
new (leader, epoch), complete or fail commit waiters. One task ticks the core at
``next_deadline_ms()`` (woken early whenever a step moved the deadline).

Where the core's messages go (``Ready.messages``):

| destination          | message                  | the driver                                      |
|----------------------|--------------------------|-------------------------------------------------|
| replica id >= 0      | a request                | sends it to ``core.endpoint_of(id)``; the answer |
|                      |                          | is stepped with that id as source; a failure or  |
|                      |                          | timeout is stepped as nothing, but a failed      |
|                      |                          | Fetch goes to ``handle_leader_disconnect`` if    |
|                      |                          | the peer closed or refused the connection, else  |
|                      |                          | to ``request_failed``                            |
| -2, -3, ...          | a request (Fetch)        | the same, to controller.quorum.bootstrap.servers |
|                      |                          | entry -2 - id                                    |
| replica id           | a response               | answers the inbound request from that replica   |
|                      |                          | (its handler awaits it; Fetch may be parked)    |
| a ClientToken        | VoterChangeResponse      | answers that admin request                      |
| replica id           | ApiVersionsProbe         | ApiVersions to its endpoint; stepped back as    |
|                      |                          | ApiVersionsProbeResponse (kraft.version range)  |

Inbound requests come through ``apis()`` (Vote, BeginQuorumEpoch, EndQuorumEpoch, Fetch,
FetchSnapshot, DescribeQuorum, AddRaftVoter, RemoveRaftVoter, UpdateRaftVoter) on the
controller listener. The core answers a replica's newer Fetch and drops its parked older one:
the older handler is answered empty. A Fetch without a current leader epoch (-1, brokers'
metadata followers) is not fenced: it is taken as fetching in our epoch.

Writes: ``append`` queues values in the accumulator (raft/accumulator.py) on the leader and
returns the offset the last one gets; ``wait_committed`` parks in the purgatory
(raft/purgatory.py) until the high watermark passes that offset, or fails with NotLeaderError
when this replica stops leading that epoch. Voter-side KIP-853 tasks (UpdateVoter to each new
leader, auto-join) are in raft/voter_client.py.
"""
from __future__ import annotations

import asyncio
import logging
import random
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from protocol.client import ClientSecurity
from protocol.dispatch import Api

from . import messages as m
from . import wire
from .accumulator import BatchAccumulator
from .core import RaftCore
from .errors import NotLeaderError
from .inbound import build_apis
from .log import Entry, OffsetAndEpoch, RaftLog, Snapshot
from .metrics import RaftTimings
from .outbound import OutboundRequests
from .purgatory import CommitPurgatory
from .quorum_file import read_quorum_state, write_quorum_state
from .quorum_state import Candidate, ElectionState, Leader, Prospective, QuorumConfig
from .voter_client import VoterClient
from .voters import DEFAULT_LISTENER, Endpoint, VoterSet

log = logging.getLogger("strom.raft")

COMMIT_CHUNK = 1000  # entries per handle_commit call
DEFAULT_APPEND_LINGER_MS = 25  # controller.quorum.append.linger.ms


class RaftListener(Protocol):
    def handle_commit(self, entries: list[Entry]) -> None:
        """Every committed entry, data and control, once, in offset order."""

    def handle_snapshot(self, snapshot: Snapshot) -> None:
        """Replace the state with the snapshot's; commits continue from its end offset."""

    def handle_leader_change(self, leader_id: int, epoch: int) -> None: ...


@dataclass(frozen=True)
class RaftDriverConfig:
    node_id: int
    cluster_id: str
    voters: VoterSet  # controller.quorum.voters: in force until a VotersRecord says otherwise
    endpoints: tuple[Endpoint, ...] = ()  # this replica's controller listeners (none: a broker)
    directory_id: bytes | None = None  # meta.properties directory.id of the metadata log dir
    bootstrap_servers: tuple[tuple[str, int], ...] = ()  # controller.quorum.bootstrap.servers
    quorum: QuorumConfig = QuorumConfig()
    append_linger_ms: int = DEFAULT_APPEND_LINGER_MS
    auto_join: bool = False  # controller.quorum.auto.join.enable
    listener_name: str = DEFAULT_LISTENER
    observer: bool = False  # a broker: never a voter, even sharing a controller's node id
    security: ClientSecurity | None = None  # how it connects to the controller listener (TLS, SASL)


def monotonic_ms() -> int:
    return time.monotonic_ns() // 1_000_000


class QuorumStateStore(Protocol):
    def read(self) -> ElectionState | None: ...

    def write(self, state: ElectionState, kraft_version: int, voter_ids: tuple[int, ...]) -> None:
        """Durably (temp file, fsync, rename): the core's transition takes effect once written."""


class QuorumStateFile:
    """The ``quorum-state`` file of the metadata log directory (raft/quorum_file.py)."""

    def __init__(self, path: str) -> None:
        self.path = path

    def read(self) -> ElectionState | None:
        return read_quorum_state(self.path)

    def write(self, state: ElectionState, kraft_version: int, voter_ids: tuple[int, ...]) -> None:
        write_quorum_state(self.path, state, kraft_version, getattr(state, "voted_directory_id", None),
                           voter_ids)


class RaftDriver(OutboundRequests):
    def __init__(self, config: RaftDriverConfig, log_: RaftLog, quorum_state: str | QuorumStateStore,
                 listener: RaftListener, *, rng: random.Random | None = None,
                 clock: Callable[[], int] = monotonic_ms) -> None:
        self.config = config
        self.init_outbound()
        self.log = log_
        self.store = QuorumStateFile(quorum_state) if isinstance(quorum_state, str) else quorum_state
        self.listener = listener
        self.rng = rng or random.Random()
        self.clock = clock
        self.core: RaftCore | None = None
        self.accumulator = BatchAccumulator()
        self.purgatory = CommitPurgatory()
        self.voter_client = VoterClient(self)
        self._awaiting: dict[tuple[object, type], deque[tuple[asyncio.Future, object]]] = {}
        self._applied = 0  # the listener has every committed entry below this offset
        self._role: tuple[str, int] | None = None
        self._leader = (m.NO_LEADER, -1)
        self._membership: tuple | None = None  # what the voter client acts on (voter_client.py)
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task | None = None
        self._linger: asyncio.TimerHandle | None = None
        self._handing_over = 0  # values drained from the accumulator, not yet in the log
        self.closed = False
        # raft-metrics' latencies and appended records (raft/metrics.py), counted as they happen:
        # each appended batch's last offset and its time, until the high watermark passes it;
        # the time an election started, until a leader is known.
        self.timings = RaftTimings()
        self._appended_at: deque[tuple[int, int]] = deque()
        self._election_start_ms: int | None = None

    # ---- lifecycle -------------------------------------------------------------------------------
    async def start(self) -> None:
        c = self.config
        now = self.clock()
        bootstrap_ids = tuple(-2 - i for i in range(len(c.bootstrap_servers)))
        self.core = RaftCore(c.node_id, c.voters, self.log, self.rng, self.store.read(), now, c.quorum,
                             directory_id=c.directory_id, endpoints=c.endpoints, bootstrap_ids=bootstrap_ids,
                             observer=c.observer)
        snapshot_id = self.log.latest_snapshot_id()
        if snapshot_id is not None:
            self.listener.handle_snapshot(self.log.read_snapshot(snapshot_id))
            self._applied = snapshot_id.offset
        else:
            self._applied = self.log.log_start_offset
        self._run_core(self.core.tick)
        self._task = asyncio.get_running_loop().create_task(self._tick_loop(), name=f"raft-{c.node_id}")
        self.voter_client.start()

    async def close(self, graceful: bool = True) -> None:
        if self.closed or self.core is None:
            self.closed = True
            return
        if graceful and self.is_leader():
            self._drain()
            self._run_core(self.core.resign)
            sends = [t for t in self.sends if t.get_name() == "EndQuorumEpoch"]
            if sends:
                await asyncio.wait(sends, timeout=self.config.quorum.request_timeout_ms / 1000)
        self.closed = True
        if self._linger is not None:
            self._linger.cancel()
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)
        await self.voter_client.close()
        closed = NotLeaderError(f"raft node {self.config.node_id} is closed")
        self.purgatory.fail_all(closed)
        self.accumulator.drain()
        for waiters in self._awaiting.values():
            for fut, request in waiters:
                if not fut.done():
                    fut.set_result(self.fallback_answer(request, m.NOT_LEADER_OR_FOLLOWER))
        self._awaiting.clear()
        await self.close_io()

    # ---- state -----------------------------------------------------------------------------------
    @property
    def task(self) -> asyncio.Task | None:
        """The tick loop: it ends only on close, or with the exception that broke the core."""
        return self._task

    def leader_and_epoch(self) -> tuple[int, int]:
        q = self.core.quorum
        return q.leader_id(), q.epoch

    def is_leader(self) -> bool:
        return isinstance(self.core.state, Leader)

    def describe(self):
        """raft.reconfig.QuorumDescription on the leader, None elsewhere."""
        return self.core.describe()

    def now_ms(self) -> int:
        return self.clock()

    # ---- writes ----------------------------------------------------------------------------------
    def append(self, values: list[bytes]) -> int:
        """Queue values for the log (leader only); returns the offset the last one will get."""
        s = self.core.state if self.core is not None and not self.closed else None
        if not isinstance(s, Leader):
            raise NotLeaderError(f"raft node {self.config.node_id} is not the leader")
        if not values:
            raise ValueError("nothing to append")
        if self.accumulator and self.accumulator.epoch != s.epoch:
            self._drain()
        last = self.accumulator.append(values, self._log_end_offset(), s.epoch)
        loop = asyncio.get_running_loop()
        if self.accumulator.is_full():
            loop.call_soon(self._drain)
        elif self._linger is None:
            self._linger = loop.call_later(self.config.append_linger_ms / 1000, self._drain)
        return last

    def kraft_version(self) -> int | None:
        """The kraft.version the replica's log holds (None before it starts): the finalized level
        ApiVersions reports, as Kafka's raft client's kraftVersion()."""
        return None if self.core is None else self.core.kraft_version

    def upgrade_kraft_version(self, version: int, validate_only: bool = False,
                              epoch: int | None = None) -> int | None:
        """Leader only: upgrade kraft.version (raft/kraft_upgrade.py); the offset of the appended
        KRaftVersionRecord, None when nothing was appended. Raises KRaftUpgradeError when refused,
        NotLeaderError when not the leader."""
        if self.core is None or self.closed:
            raise NotLeaderError(f"raft node {self.config.node_id} is not the leader")
        if self.accumulator:
            self._drain()  # pending values go first
        ready = self.core.upgrade_kraft_version(self.clock(), version, validate_only, epoch)
        self._execute(ready)
        return ready.appended_offset

    async def wait_committed(self, offset: int, timeout_s: float) -> None:
        """Until the high watermark passes ``offset`` (and the listener has the entry)."""
        if offset < self._applied:
            return
        s = self.core.state
        if not isinstance(s, Leader) or self.closed:
            raise NotLeaderError(f"raft node {self.config.node_id} is not the leader")
        async with asyncio.timeout(timeout_s):
            await self.purgatory.watch(offset, s.epoch)

    def create_snapshot(self, committed_offset: int, values: list[bytes]) -> OffsetAndEpoch:
        """Snapshot the listener's state holding every entry below ``committed_offset``."""
        if committed_offset > self._applied:
            raise ValueError(f"snapshot at {committed_offset}, the listener has {self._applied}")
        return self.core.create_snapshot(committed_offset, values)

    def _drain(self) -> None:
        if self._linger is not None:
            self._linger.cancel()
            self._linger = None
        if not self.accumulator or self.closed:
            return
        base, epoch, batches = self.accumulator.drain()
        s = self.core.state
        if not isinstance(s, Leader) or s.epoch != epoch:
            return  # their waiters failed with the epoch
        if self.log.end_offset().offset != base:
            self._displaced(base)
            return
        # A listener may append while a batch goes in (from handle_commit): its values go after
        # every drained one, so the log end offset it sees counts those still to come.
        self._handing_over = sum(len(values) for values in batches)
        try:
            for values in batches:
                self._handing_over -= len(values)
                self._run_core(self.core.append, values)
                self.timings.append_records_total += len(values)
                self._appended_at.append((self.log.end_offset().offset - 1, self.clock()))
        finally:
            self._handing_over = 0

    def _log_end_offset(self) -> int:
        return self.log.end_offset().offset + self._handing_over

    def _displaced(self, base: int) -> None:
        log.error("raft: node %d: the log end offset moved past %d under pending appends; dropping them",
                  self.config.node_id, base)
        self.purgatory.fail_from(base, NotLeaderError("the append was displaced by a control record"))

    # ---- running the core --------------------------------------------------------------------------
    def step(self, source, message) -> None:
        if self.closed:
            return
        if self.accumulator and isinstance(message, (m.AddVoterRequest, m.RemoveVoterRequest,
                                                     m.UpdateVoterRequest, m.ApiVersionsProbeResponse)):
            self._drain()  # these may append a VotersRecord: pending values go first
        self._run_core(self.core.step, source, message)

    def _run_core(self, fn, *args) -> None:
        self._execute(fn(self.clock(), *args))

    def _execute(self, ready) -> None:
        core = self.core
        if ready.persist is not None:
            self.store.write(ready.persist, core.kraft_version, tuple(sorted(core.voter_set.ids())))
        if ready.log_ops:
            self.log.flush()
        for destination, message in ready.messages:
            self._dispatch(destination, message)
        if self.accumulator and self._log_end_offset() != self.accumulator.base_offset:
            self._displaced(self.accumulator.drain()[0])
        if ready.snapshot_loaded is not None:
            self.listener.handle_snapshot(self.log.read_snapshot(ready.snapshot_loaded))
            self._applied = ready.snapshot_loaded.offset
        self._deliver_commits()
        self._maybe_log_role()
        leader = self.leader_and_epoch()
        if leader != self._leader:
            self._leader = leader
            self.listener.handle_leader_change(*leader)
        membership = (leader, core.kraft_version, id(core.voter_set), type(core.state))
        if membership != self._membership:
            self._membership = membership
            self.voter_client.wake()
        s = core.state
        if not isinstance(s, Leader) or s.epoch != self.purgatory.epoch:
            self.purgatory.fail_all(NotLeaderError(f"raft node {self.config.node_id} lost leadership "
                                                   f"of epoch {self.purgatory.epoch}"))
            if not isinstance(s, Leader):
                self._answer_parked_fetches()
        self._wakeup.set()

    def _deliver_commits(self) -> None:
        hw = self.log.high_watermark
        appended = self._appended_at
        if appended and appended[0][0] < hw:
            now = self.clock()
            while appended and appended[0][0] < hw:
                self.timings.commit(now - appended.popleft()[1])
        while self._applied < hw:
            entries = [e for e in self.log.read(self._applied, min(hw - self._applied, COMMIT_CHUNK))
                       if e.offset < hw]
            if not entries:
                break
            self.listener.handle_commit(entries)
            self._applied = entries[-1].offset + 1
        self.purgatory.complete(self._applied)

    def _maybe_log_role(self) -> None:
        s = self.core.state
        role = (s.name, s.epoch)
        if role != self._role:
            self._role = role
            log.info("raft: node %d became %s in epoch %d", self.config.node_id, s.name, s.epoch)
            self._time_election(s)

    def _time_election(self, s) -> None:
        """KafkaRaftMetrics' election latency: from the election's start (this node a
        prospective voter or a candidate) to a known leader; a leader's uncommitted appends are
        not timed past its leadership."""
        if not isinstance(s, Leader):
            self._appended_at.clear()
        if isinstance(s, (Prospective, Candidate)):
            if self._election_start_ms is None:
                self._election_start_ms = self.clock()
        elif self._election_start_ms is not None and self.core.quorum.leader_id() != m.NO_LEADER:
            self.timings.election(self.clock() - self._election_start_ms)
            self._election_start_ms = None

    async def _tick_loop(self) -> None:
        while not self.closed:
            delay = self.core.next_deadline_ms() - self.clock()
            if delay > 0:
                self._wakeup.clear()
                try:
                    async with asyncio.timeout(delay / 1000):
                        await self._wakeup.wait()
                except TimeoutError:
                    pass
                continue
            try:
                self._run_core(self.core.tick)
            except Exception:
                log.exception("raft: node %d: tick failed", self.config.node_id)
                raise

    # ---- answers to inbound requests ----------------------------------------------------------------
    def _dispatch(self, destination, message) -> None:
        if isinstance(message, m.ApiVersionsProbe):
            self.spawn(self.probe(message), "ApiVersions")
        elif type(message) in wire.REQUEST_KEYS:
            self.spawn(self.send(destination, message), type(message).__name__.removesuffix("Request"))
        else:
            waiters = self._awaiting.get((destination, type(message)))
            if waiters:
                fut, _ = waiters.popleft()
                if not waiters:
                    del self._awaiting[(destination, type(message))]
                if not fut.done():
                    fut.set_result(message)

    def expect(self, source, response_type: type, request) -> asyncio.Future:
        fut = asyncio.get_running_loop().create_future()
        self._awaiting.setdefault((source, response_type), deque()).append((fut, request))
        return fut

    def forget(self, source, response_type: type, fut: asyncio.Future) -> None:
        waiters = self._awaiting.get((source, response_type))
        if waiters:
            self._awaiting[(source, response_type)] = deque(w for w in waiters if w[0] is not fut)
            if not self._awaiting[(source, response_type)]:
                del self._awaiting[(source, response_type)]

    def answer_older_fetches(self, source) -> None:
        """The core drops a replica's parked Fetch when a newer one comes: answer it empty."""
        for fut, request in self._awaiting.pop((source, m.FetchResponse), ()):
            if not fut.done():
                fut.set_result(self.fallback_answer(request, m.NONE))

    def _answer_parked_fetches(self) -> None:
        for key in [k for k in self._awaiting if k[1] is m.FetchResponse]:
            for fut, request in self._awaiting.pop(key):
                if not fut.done():
                    fut.set_result(self.fallback_answer(request, m.NOT_LEADER_OR_FOLLOWER))

    def fallback_answer(self, request, error: int):
        """What the driver answers for the core: an empty Fetch, or an error."""
        leader_id, epoch = self.leader_and_epoch()
        if isinstance(request, m.FetchRequest):
            hw = self.log.high_watermark if error == m.NONE else -1
            endpoints = self.leader_endpoints(leader_id)
            return m.FetchResponse(error, leader_id, epoch, hw, None, (), request.fetch_offset,
                                   request.last_fetched_epoch, leader_endpoints=endpoints)
        if isinstance(request, m.FetchSnapshotRequest):
            return m.FetchSnapshotResponse(error, leader_id, epoch, request.snapshot_id, -1, request.position,
                                           b"")
        if isinstance(request, (m.AddVoterRequest, m.RemoveVoterRequest, m.UpdateVoterRequest)):
            return m.VoterChangeResponse(error, "no answer from the quorum in time", leader_id, epoch)
        if isinstance(request, m.VoteRequest):
            return m.VoteResponse(error, leader_id, epoch, False, request.pre_vote)
        response = (m.BeginQuorumEpochResponse if isinstance(request, m.BeginQuorumEpochRequest)
                    else m.EndQuorumEpochResponse)
        return response(error, leader_id, epoch)

    def leader_endpoints(self, leader_id: int) -> tuple[Endpoint, ...]:
        if leader_id == self.config.node_id:
            return self.core.local_endpoints()
        endpoint = self.core.endpoint_of(leader_id) if leader_id >= 0 else None
        return (endpoint,) if endpoint is not None else ()

    def apis(self) -> list[Api]:
        """The KRaft RPCs this replica serves on the controller listener."""
        return build_apis(self)
