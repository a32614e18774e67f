"""The KRaft state machine for one replica: pure, deterministic, stepped by its caller.

Theory of operation. The driver calls ``step(now_ms, source, message)`` for every inbound message,
``tick(now_ms)`` when ``next_deadline_ms()`` is reached and ``append(now_ms, values)`` for client
writes on the leader. Each call returns a ``Ready`` that the driver must carry out in order:

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
Prospective without bumping the epoch.
"""
from __future__ import annotations

from . import messages as m
from .errors import NotLeaderError, RaftInvariantError
from .fetch import FetchHandlers, ParkedFetch
from .log import RaftLog
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
from .vote import VoteHandlers

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
}


class RaftCore(VoteHandlers, QuorumEpochHandlers, FetchHandlers):
    def __init__(self, local_id: int, voters: frozenset[int], log: RaftLog, rng,
                 stored: ElectionState | None, now_ms: int, config: QuorumConfig | None = None) -> None:
        self.local_id = local_id
        self.log = log
        self.config = config or QuorumConfig()
        self.rng = rng
        self.quorum = QuorumState(local_id, frozenset(voters), self.config, rng)
        self.observers: dict[int, ReplicaState] = {}
        self._parked: dict[int, ParkedFetch] = {}
        self._discovery_until_ms = now_ms  # observers: next Fetch to a bootstrap voter
        self._ready = Ready()
        self._hw_at_start = log.high_watermark
        self.quorum.initialize(stored, log.end_offset().epoch, now_ms)
        s = self.quorum.state
        if self.quorum.voters == {local_id}:
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

    def step(self, now_ms: int, source: int, message: m.Message) -> Ready:
        getattr(self, _HANDLERS[type(message)])(now_ms, source, message)
        return self._take_ready()

    def tick(self, now_ms: int) -> Ready:
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
        s = self.quorum.state
        if not isinstance(s, Leader):
            raise NotLeaderError(f"{self.local_id} is {s.name}")
        self._append_as_leader(now_ms, s, values)
        return self._take_ready()

    def resign(self, now_ms: int) -> Ready:
        """Graceful hand-off: Resigned, EndQuorumEpoch with successors by descending fetch offset."""
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
        if now_ms >= s.begin_quorum_deadline_ms:
            for voter in sorted(s.voters - {self.local_id}):
                if not s.replicas[voter].acknowledged:
                    self._send(voter, m.BeginQuorumEpochRequest(self.local_id, s.epoch, voter))
            s.begin_quorum_deadline_ms = now_ms + self.config.fetch_timeout_ms // 2
        for replica_id, parked in list(self._parked.items()):
            if now_ms >= parked.deadline_ms:
                del self._parked[replica_id]
                self._answer_fetch(replica_id, parked.request, s, [])

    def _poll_follower(self, now_ms: int, s: Follower) -> None:
        if now_ms >= s.fetch_deadline_ms:
            if self.quorum.is_voter:
                self.quorum.become_prospective(now_ms, retries=1)
                self._send_vote_requests(pre_vote=True)
            else:
                self.quorum.become_unattached(s.epoch, now_ms)
            return
        if s.fetch_in_flight_until_ms is None or now_ms >= s.fetch_in_flight_until_ms:
            self._send_fetch(now_ms, s.leader_id, s)

    def _poll_candidate(self, now_ms: int, s: Candidate) -> None:
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
            # An observer learns the leader from any voter's answer to a Fetch.
            voter = self.rng.choice(sorted(self.quorum.voters))
            self._send(voter, self._build_fetch(s.epoch))
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
            if leader_id not in (m.NO_LEADER, self.local_id) and q.has_endpoint(leader_id):
                self._leave_leadership()
                q.become_follower(epoch, leader_id, now_ms)
            else:
                self._leave_leadership()
                q.become_unattached(epoch, now_ms, leader_id)
            return True
        if epoch < s.epoch or leader_id in (m.NO_LEADER, self.local_id) or not q.has_endpoint(leader_id):
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
        return ready

