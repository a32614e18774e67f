"""The KRaft state machine for one replica: pure, deterministic, stepped by its caller.

Theory of operation. The driver calls ``step(now_ms, source, message)`` for every inbound message,
``tick(now_ms)`` when ``next_deadline_ms()`` is reached, ``append(now_ms, values)`` for client
writes on the leader, and ``request_failed`` or ``handle_leader_disconnect`` when a Fetch got no
answer (the second when the peer closed or refused the connection). Each call returns a ``Ready``
that the driver must carry out in order:

1. write ``Ready.persist`` (the quorum-state file) if set: durable transitions take effect only
   once this write is done, so it precedes any message;
2. flush the RaftLog (``log_ops`` lists the appends and truncations already applied to it);
3. send ``Ready.messages``;
4. hand entries below ``Ready.high_watermark`` to the listener (they are committed).

The constructor applies the initialization rules (and elects a single voter at once); its
outputs come with the first ``tick``. If the process dies before 1 and 2 complete, nothing of the
step happened as far as the rest of the quorum can tell. Time only enters through ``now_ms`` and
randomness through the injected ``random.Random``, so a seeded simulation replays exactly.

Replication is pull-based (KIP-595): followers and observers send Fetch(fetch_offset,
last_fetched_epoch); the leader answers with entries, parks the Fetch until there is something
new (long poll), or returns a diverging epoch that the follower truncates to, never below its
high watermark. The leader's high watermark is the offset a majority of voters have reached, only
once it is past the epoch start offset (the LeaderChange record of this epoch), and never goes back.
Elections go through pre-vote (KIP-996) so that a voter that cannot reach the leader spins in
Prospective without bumping the epoch. A follower starts that pre-vote after
controller.quorum.fetch.timeout.ms without an answer, or at once when connecting to its leader
is refused (``handle_leader_disconnect``: a crashed process closes its sockets and its port).

Membership (KIP-853, membership.py and reconfig.py): the voter set in force is the latest
VotersRecord in the snapshot and log, committed or not, else the static set given at
construction (kraft.version 0). A replica is a voter only if its replica id *and* directory id
match, so a wiped disk comes back as an observer. Voter changes are leader-side requests
answered to a client token, one at a time. Snapshots (KIP-630, snapshot.py): ``create_snapshot``
writes the listener's state at a committed offset and drops the log below it; a replica behind
the leader's log start is sent the snapshot id and copies it with FetchSnapshot; ``Ready.
snapshot_loaded`` then tells the listener to reload from it.
"""
from __future__ import annotations

from . import messages as m
from .errors import NotLeaderError, RaftInvariantError
from .fetch import FetchHandlers, ParkedFetch
from .kraft_upgrade import KRaftUpgradeHandlers
from .log import Entry, OffsetAndEpoch, RaftLog, Snapshot
from .membership import OffsetHistory
from .quorum_epoch import QuorumEpochHandlers
from .quorum_state import (
    Candidate,
    ElectionState,
    Follower,
    Leader,
    Prospective,
    QuorumConfig,
    QuorumState,
    ReplicaState,
    Resigned,
    Unattached,
)
from .ready import Append, Ready, Truncate
from .reconfig import VoterChangeHandlers
from .snapshot import SnapshotHandlers
from .vote import VoteHandlers
from .voters import Endpoint, KRaftVersion, Voter, VoterSet

__all__ = ["RaftCore", "Ready", "Append", "Truncate", "RaftInvariantError", "NotLeaderError"]

CHECK_QUORUM_TIMEOUT_FACTOR = 1.5

# RPC handlers live one module per RPC (vote.py, quorum_epoch.py, fetch.py).
_HANDLERS = {
    m.VoteRequest: "handle_vote_request",
    m.VoteResponse: "handle_vote_response",
    m.BeginQuorumEpochRequest: "handle_begin_quorum_epoch_request",
    m.BeginQuorumEpochResponse: "handle_begin_quorum_epoch_response",
    m.EndQuorumEpochRequest: "handle_end_quorum_epoch_request",
    m.EndQuorumEpochResponse: "handle_end_quorum_epoch_response",
    m.FetchRequest: "handle_fetch_request",
    m.FetchResponse: "handle_fetch_response",
    m.FetchSnapshotRequest: "handle_fetch_snapshot_request",
    m.FetchSnapshotResponse: "handle_fetch_snapshot_response",
    m.AddVoterRequest: "handle_add_voter_request",
    m.RemoveVoterRequest: "handle_remove_voter_request",
    m.UpdateVoterRequest: "handle_update_voter_request",
    m.ApiVersionsProbeResponse: "handle_api_versions_probe_response",
}


def static_voters(voters) -> VoterSet:
    """``voters``: a VoterSet, or replica ids (simulations: each gets a placeholder endpoint)."""
    if isinstance(voters, VoterSet):
        return voters
    return VoterSet.of(Voter(i, None, (Endpoint("CONTROLLER", f"node-{i}", 0),), 0, 1) for i in voters)


class RaftCore(VoteHandlers, QuorumEpochHandlers, FetchHandlers, SnapshotHandlers, VoterChangeHandlers,
               KRaftUpgradeHandlers):
    def __init__(self, local_id: int, voters, log: RaftLog, rng,
                 stored: ElectionState | None, now_ms: int, config: QuorumConfig | None = None, *,
                 directory_id: bytes | None = None, endpoints: tuple[Endpoint, ...] = (),
                 bootstrap_ids: tuple[int, ...] = (), observer: bool = False) -> None:
        """``voters``: the static voter set (kraft.version 0; replica ids or a VoterSet), used
        until a VotersRecord in the snapshot or log says otherwise. ``bootstrap_ids``: negative
        ids the driver maps to controller.quorum.bootstrap.servers, for observers' discovery."""
        self.local_id = local_id
        self.log = log
        self.config = config or QuorumConfig()
        self.rng = rng
        self.directory_id = directory_id
        self.bootstrap_ids = tuple(bootstrap_ids)
        self.voter_history: OffsetHistory[VoterSet] = OffsetHistory(static_voters(voters))
        self.kraft_history: OffsetHistory[int] = OffsetHistory(0)
        self._load_membership()
        self.quorum = QuorumState(local_id, self.voter_history.latest(), self.config, rng, directory_id,
                                  observer)
        self._endpoints = tuple(endpoints)
        self.observers: dict[tuple[int, bytes | None], ReplicaState] = {}
        self._pending_change = None  # the one voter change in progress (reconfig.py)
        self._now = now_ms
        self._leader_at_start = (m.NO_LEADER, -1)
        self._parked: dict[int, ParkedFetch] = {}
        self._discovery_until_ms = now_ms  # observers: next Fetch to a bootstrap voter
        self._ready = Ready()
        self._hw_at_start = log.high_watermark
        self._snapshot_loaded = None
        self.quorum.initialize(stored, log.end_offset().epoch, now_ms)
        s = self.quorum.state
        if self.quorum.voters == {local_id} and self.quorum.is_voter:
            if isinstance(s, Resigned):
                self.quorum.become_unattached(s.epoch + 1, now_ms)
            if not isinstance(self.quorum.state, Candidate):
                self.quorum.become_prospective(now_ms, retries=1)
                self.quorum.become_candidate(now_ms)
            self._maybe_become_leader(now_ms)
        elif isinstance(s, Candidate):
            self._send_vote_requests(pre_vote=False)
        elif isinstance(s, Resigned):
            self._send_end_quorum_epoch(now_ms)

    # ---- the driver's API ------------------------------------------------------------------
    @property
    def state(self):
        return self.quorum.state

    def step(self, now_ms: int, source, message: m.Message) -> Ready:
        self._now = now_ms
        getattr(self, _HANDLERS[type(message)])(now_ms, source, message)
        return self._take_ready()

    def tick(self, now_ms: int) -> Ready:
        self._now = now_ms
        s = self.quorum.state
        if isinstance(s, Leader):
            self._poll_leader(now_ms, s)
        elif isinstance(s, Follower):
            self._poll_follower(now_ms, s)
        elif isinstance(s, Candidate):
            self._poll_candidate(now_ms, s)
        elif isinstance(s, Prospective):
            if now_ms >= s.election_deadline_ms:
                self._after_prospective_loss(now_ms, s)
        elif isinstance(s, Resigned):
            if now_ms >= s.election_deadline_ms:
                self.quorum.become_unattached(s.epoch + 1, now_ms)
            elif now_ms >= s.end_quorum_deadline_ms:
                self._send_end_quorum_epoch(now_ms)
        elif isinstance(s, Unattached):
            self._poll_unattached(now_ms, s)
        return self._take_ready()

    def append(self, now_ms: int, values: list) -> Ready:
        """Leader only: append ``values`` as entries of this epoch; ``Ready.appended_offset`` is
        the offset of the first."""
        self._now = now_ms
        s = self.quorum.state
        if not isinstance(s, Leader):
            raise NotLeaderError(f"{self.local_id} is {s.name}")
        base = self._append_as_leader(now_ms, s, values)
        ready = self._take_ready()
        ready.appended_offset = base
        return ready

    def upgrade_kraft_version(self, now_ms: int, version: int, validate_only: bool = False,
                              epoch: int | None = None) -> Ready:
        """Leader only: upgrade kraft.version (kraft_upgrade.py); ``Ready.appended_offset`` is the
        KRaftVersionRecord's offset, None when nothing was appended (validate_only, or already
        in force). Raises KRaftUpgradeError (refused) or NotLeaderError, having changed nothing.
        ``epoch``: the epoch the caller believes it leads in (None: the current one)."""
        self._now = now_ms
        offset = self._upgrade_kraft_version(now_ms, version, validate_only, epoch)
        ready = self._take_ready()
        ready.appended_offset = offset
        return ready

    def request_failed(self, now_ms: int, destination: int, request: m.Message) -> Ready:
        """The driver could not get an answer to ``request`` (timed out, or failed here): a
        Fetch is sent again after retry.backoff.ms rather than the request timeout. A Fetch
        whose connection the peer closed or refused goes to ``handle_leader_disconnect``."""
        self._now = now_ms
        if isinstance(request, m.FetchRequest | m.FetchSnapshotRequest):
            self._fetch_failed(now_ms, destination)
        return self._take_ready()

    def handle_leader_disconnect(self, now_ms: int, leader_id: int, refused: bool = False) -> Ready:
        """A Fetch to ``leader_id`` failed because the peer closed the connection (end of
        stream, reset) or, ``refused``, because nothing accepts connections at its address.

        A crashed process does both: its sockets close, and connecting again is refused. A close
        alone proves little (a live leader may drop a connection), so the follower fetches again
        at once, on a new connection. A refusal means no process listens there: the follower
        does what a fetch timeout does, without waiting out controller.quorum.fetch.timeout.ms —
        a voter becomes Prospective and canvasses with pre-votes (the epoch does not change,
        nothing is persisted), an observer looks for the leader anew. That cannot depose a live
        leader: every voter still fetching from it refuses the pre-vote. A failure of anything
        but our leader's connection in our epoch is an ordinary failed Fetch, and a partition,
        which closes nothing, still waits for the timeout.
        """
        self._now = now_ms
        s = self.quorum.state
        if not isinstance(s, Follower) or leader_id != s.leader_id:
            self._fetch_failed(now_ms, leader_id)
        elif refused:
            self._fetch_timed_out(now_ms, s)
        else:
            s.fetch_in_flight_until_ms = now_ms  # the next tick, at once, fetches again
        return self._take_ready()

    def resign(self, now_ms: int) -> Ready:
        """Graceful hand-off: Resigned, EndQuorumEpoch with successors by descending fetch offset."""
        self._now = now_ms
        s = self.quorum.state
        if isinstance(s, Leader):
            self._resign(now_ms, s)
        return self._take_ready()

    def next_deadline_ms(self) -> int:
        s = self.quorum.state
        if isinstance(s, Leader):
            deadlines = [s.check_quorum_start_ms + self._check_quorum_timeout_ms(),
                         s.begin_quorum_deadline_ms]
            deadlines += [p.deadline_ms for p in self._parked.values()]
            if self._pending_change is not None:
                deadlines.append(self._pending_change.deadline_ms)
            return min(deadlines)
        if isinstance(s, Follower):
            retry = s.fetch_in_flight_until_ms if s.fetch_in_flight_until_ms is not None else 0
            return min(s.fetch_deadline_ms, retry)
        if isinstance(s, Candidate) and s.backoff_until_ms is not None:
            return s.backoff_until_ms
        if isinstance(s, Unattached) and not self.quorum.is_voter:
            return self._discovery_until_ms
        if isinstance(s, Resigned) and s.unacked_voters:
            return min(s.election_deadline_ms, s.end_quorum_deadline_ms)
        return s.election_deadline_ms

    # ---- timers ----------------------------------------------------------------------------
    def _poll_leader(self, now_ms: int, s: Leader) -> None:
        if now_ms >= s.check_quorum_start_ms + self._check_quorum_timeout_ms():
            self._resign(now_ms, s)
            return
        self._poll_voter_change(now_ms)
        if now_ms >= s.begin_quorum_deadline_ms:
            for voter in sorted(s.voters - {self.local_id}):
                if not s.replicas[voter].acknowledged:
                    self._send_begin_quorum_epoch(s, voter)
            s.begin_quorum_deadline_ms = now_ms + self.config.fetch_timeout_ms // 2
        for replica_id, parked in list(self._parked.items()):
            if now_ms >= parked.deadline_ms:
                del self._parked[replica_id]
                self._answer_fetch(replica_id, parked.request, s, [])

    def _poll_follower(self, now_ms: int, s: Follower) -> None:
        if now_ms >= s.fetch_deadline_ms:
            self._fetch_timed_out(now_ms, s)
        elif s.fetch_in_flight_until_ms is None or now_ms >= s.fetch_in_flight_until_ms:
            self._send_fetch(now_ms, s.leader_id, s)

    def _fetch_timed_out(self, now_ms: int, s: Follower) -> None:
        """No leader to fetch from: a voter canvasses (pre-vote), an observer looks anew."""
        if self.quorum.is_voter:
            self.quorum.become_prospective(now_ms, retries=1)
            self._send_vote_requests(pre_vote=True)
        else:
            self.quorum.become_unattached(s.epoch, now_ms)

    def _fetch_failed(self, now_ms: int, destination: int) -> None:
        s = self.quorum.state
        retry_at = now_ms + self.config.retry_backoff_ms
        if isinstance(s, Follower) and destination == s.leader_id:
            s.fetch_in_flight_until_ms = retry_at
        elif isinstance(s, Unattached) and not self.quorum.is_voter:
            self._discovery_until_ms = min(self._discovery_until_ms, retry_at)

    def _poll_candidate(self, now_ms: int, s: Candidate) -> None:
        if not self.quorum.is_voter:  # removed from the voter set while campaigning
            self.quorum.become_unattached(s.epoch, now_ms)
            return
        if s.backoff_until_ms is not None:
            if now_ms >= s.backoff_until_ms:
                self.quorum.become_prospective(now_ms, retries=s.retries + 1)
                self._send_vote_requests(pre_vote=True)
        elif now_ms >= s.election_deadline_ms:
            s.backoff_until_ms = now_ms + self._binary_exponential_backoff_ms(s.retries)

    def _poll_unattached(self, now_ms: int, s: Unattached) -> None:
        if self.quorum.is_voter:
            if now_ms >= s.election_deadline_ms:
                self.quorum.become_prospective(now_ms, retries=1)
                self._send_vote_requests(pre_vote=True)
        elif now_ms >= self._discovery_until_ms:
            # An observer learns the leader from any voter's answer to a Fetch: one of the
            # bootstrap servers if configured (KIP-853), else one of the voters.
            targets = self.bootstrap_ids or tuple(sorted(self.quorum.voters - {self.local_id}))
            if targets:
                self._send(self.rng.choice(targets), self._build_fetch(s.epoch))
            self._discovery_until_ms = now_ms + self.config.request_timeout_ms

    def _check_quorum_timeout_ms(self) -> int:
        if self.quorum.voters == {self.local_id}:
            return 1 << 62  # a single voter never loses its quorum
        return int(self.config.fetch_timeout_ms * CHECK_QUORUM_TIMEOUT_FACTOR)

    def _binary_exponential_backoff_ms(self, retries: int) -> int:
        c = self.config
        return min(c.election_backoff_base_ms * self.rng.randrange(2 << min(20, retries - 1)),
                   c.election_backoff_max_ms)

    def _strict_exponential_backoff_ms(self, position: int) -> int:
        if position == 0:
            return 0
        c = self.config
        return min(c.election_backoff_max_ms, c.election_backoff_base_ms << (position - 1))

    # ---- epoch changes learned from any message ----------------------------------------------
    def _maybe_transition(self, now_ms: int, epoch: int, leader_id: int, from_leader: bool) -> bool:
        """Follow what a message says about (leader, epoch); True if the role changed.

        ``from_leader``: the leader itself speaks (BeginQuorumEpoch, Fetch answers). Hearsay about
        the current epoch (Vote answers) only matters when we know no leader, so that a pre-vote
        granted by a follower of the failed leader is not mistaken for a reason to step back.
        """
        q = self.quorum
        s = q.state
        if epoch > s.epoch:
            if leader_id != m.NO_LEADER and not q.is_self(leader_id) and q.has_endpoint(leader_id):
                self._leave_leadership()
                q.become_follower(epoch, leader_id, now_ms)
            else:
                # A leader named after us is a former incarnation (a wiped disk): not ours to follow.
                self._leave_leadership()
                q.become_unattached(epoch, now_ms, m.NO_LEADER if q.is_self(leader_id) else leader_id)
            return True
        if (epoch < s.epoch or leader_id == m.NO_LEADER or q.is_self(leader_id)
                or not q.has_endpoint(leader_id)):
            return False
        if isinstance(s, Leader | Resigned):
            raise RaftInvariantError(f"{leader_id} claims epoch {epoch} led by {self.local_id}")
        if isinstance(s, Follower):
            return False
        if from_leader or q.leader_id() == m.NO_LEADER:
            q.become_follower(epoch, leader_id, now_ms)
            return True
        return False

    def _leave_leadership(self) -> None:
        self._parked.clear()
        self._abort_voter_change()

    # ---- the log and the voter set read from it (membership.py) -------------------------------
    @property
    def kraft_version(self) -> int:
        return self.kraft_history.latest()

    @property
    def voter_set(self) -> VoterSet:
        return self.voter_history.latest()

    def endpoint_of(self, replica_id: int) -> Endpoint | None:
        """Where to send to a replica: its voter entry, or what its own messages told us."""
        endpoints = self.quorum.endpoints_of(replica_id)
        return endpoints[0] if endpoints else None

    def _learn_endpoints(self, leader_id: int, endpoints: tuple[Endpoint, ...]) -> None:
        if endpoints and leader_id >= 0 and not self.quorum.is_self(leader_id):
            self.quorum.learned_endpoints[leader_id] = tuple(endpoints)

    def local_endpoints(self) -> tuple[Endpoint, ...]:
        if self._endpoints:
            return self._endpoints
        voter = self.voter_set.get(self.local_id)
        return voter.endpoints if voter is not None else ()

    def _load_membership(self) -> None:
        snapshot_id = self.log.latest_snapshot_id()
        if snapshot_id is not None:
            snapshot = self.log.read_snapshot(snapshot_id)
            self.kraft_history.reset(snapshot_id.offset - 1, snapshot.kraft_version)
            if snapshot.voters is not None:
                self.voter_history.reset(snapshot_id.offset - 1, snapshot.voters)
        offset, end = self.log.log_start_offset, self.log.end_offset().offset
        while offset < end:
            entries = self.log.read(offset, 1000)
            if not entries:
                break
            self._read_control(entries)
            offset = entries[-1].offset + 1

    def _read_control(self, entries: list[Entry]) -> bool:
        """Track VotersRecord and KRaftVersionRecord entries; True if the voter set changed."""
        changed = False
        for entry in entries:
            if isinstance(entry.value, VoterSet):
                self.voter_history.add(entry.offset, entry.value)
                changed = True
            elif isinstance(entry.value, KRaftVersion):
                self.kraft_history.add(entry.offset, entry.value.version)
        return changed

    def _log_append(self, entries: list[Entry]) -> None:
        self.log.append(entries)
        self._ready.log_ops.append(Append(entries[0].offset, entries[-1].offset, entries[-1].epoch))
        if self._read_control(entries):
            self._set_voter_set(self.voter_history.latest())

    def _log_truncate(self, offset: int) -> None:
        self.log.truncate_to(offset)
        self._ready.log_ops.append(Truncate(offset))
        self.kraft_history.truncate(offset)
        if self.voter_history.truncate(offset):
            self._set_voter_set(self.voter_history.latest())

    def _set_voter_set(self, voter_set: VoterSet) -> None:
        q = self.quorum
        q.voter_set, q.voters = voter_set, voter_set.ids()
        s = q.state
        if isinstance(s, Leader):
            # Progress is per replica key: a voter re-added with a new directory id (a replaced
            # disk) starts from what that replica fetched as an observer, never from the old one's.
            s.voters = q.voters
            replicas = {}
            for voter in voter_set.voters:
                r = s.replicas.get(voter.id)
                if r is None or r.directory_id != voter.directory_id:
                    r = (self.observers.pop((voter.id, voter.directory_id), None)
                         or ReplicaState(directory_id=voter.directory_id))
                replicas[voter.id] = r
            if self.local_id in s.replicas:
                replicas.setdefault(self.local_id, s.replicas[self.local_id])
            s.replicas = replicas

    # ---- snapshots and the describe view --------------------------------------------------------
    def create_snapshot(self, end_offset: int, values: list) -> OffsetAndEpoch:
        """Snapshot the state machine at a committed ``end_offset`` (it holds the entries below)."""
        if not self.log.log_start_offset < end_offset <= self.log.high_watermark:
            raise ValueError(f"snapshot end offset {end_offset} outside ({self.log.log_start_offset}, "
                             f"{self.log.high_watermark}]")
        epoch = self.log.read(end_offset - 1, 1)[0].epoch
        snapshot_id = OffsetAndEpoch(end_offset, epoch)
        kraft_version = self.kraft_history.at(end_offset)
        voters = self.voter_history.at(end_offset) if kraft_version >= 1 else None
        self.log.create_snapshot(Snapshot(snapshot_id, kraft_version, voters, list(values)))
        self.log.delete_before_snapshot(snapshot_id)
        self.voter_history.trim_before(end_offset)
        self.kraft_history.trim_before(end_offset)
        return snapshot_id

    # ---- output ------------------------------------------------------------------------------
    def _send(self, destination: int, message: m.Message) -> None:
        self._ready.messages.append((destination, message))

    def _take_ready(self) -> Ready:
        ready, self._ready = self._ready, Ready()
        ready.persist = self.quorum.take_pending_write()
        hw = self.log.high_watermark
        if hw > self._hw_at_start:
            ready.high_watermark = hw
        self._hw_at_start = hw
        ready.snapshot_loaded, self._snapshot_loaded = self._snapshot_loaded, None
        leader = (self.quorum.leader_id(), self.quorum.epoch)
        ready.leader_changed = leader != self._leader_at_start
        self._leader_at_start = leader
        return ready

