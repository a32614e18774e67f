"""BeginQuorumEpoch and EndQuorumEpoch: a leader announcing itself and handing over.

Pull-based replication means the leader cannot heartbeat; instead it sends BeginQuorumEpoch once
per epoch, resending every fetch.timeout/2 to voters that have neither fetched nor answered. A
leader that resigns (graceful hand-off or failed check-quorum) sends EndQuorumEpoch with its
preferred successors ordered by descending fetch offset; a follower at position p shortens its
fetch timer to the strict exponential backoff min(backoff max, base * 2^(p-1)), 0 for p = 0,
so the most caught-up voter is the first to canvass.
"""
from __future__ import annotations

from . import messages as m
from .core_view import CoreView
from .quorum_state import Follower, Leader, Resigned


class QuorumEpochHandlers(CoreView):
    def handle_begin_quorum_epoch_request(self, now_ms: int, source: int,
                                        req: m.BeginQuorumEpochRequest) -> None:
        q = self.quorum
        # KIP-853: a replica just added accepts it before it has read the VotersRecord.
        if req.voter_directory_id is not None and req.voter_directory_id != self.directory_id:
            error = m.INVALID_VOTER_KEY
        elif req.leader_epoch < q.epoch:
            error = m.FENCED_LEADER_EPOCH
        else:
            self._learn_endpoints(req.leader_id, req.leader_endpoints)
            self._maybe_transition(now_ms, req.leader_epoch, req.leader_id, from_leader=True)
            error = m.NONE
        self._send(source, m.BeginQuorumEpochResponse(error, q.leader_id(), q.epoch))

    def _send_begin_quorum_epoch(self, s: Leader, voter_id: int) -> None:
        voter = self.voter_set.get(voter_id)
        directory_id = voter.directory_id if voter is not None else None
        self._send(voter_id, m.BeginQuorumEpochRequest(self.local_id, s.epoch, voter_id, directory_id,
                                                       self.local_endpoints()))

    def handle_begin_quorum_epoch_response(self, now_ms: int, source: int,
                                         resp: m.BeginQuorumEpochResponse) -> None:
        if self._maybe_transition(now_ms, resp.leader_epoch, resp.leader_id, from_leader=False):
            return
        s = self.quorum.state
        if isinstance(s, Leader) and resp.error_code == m.NONE and resp.leader_epoch == s.epoch:
            if source in s.replicas:
                s.replicas[source].acknowledged = True

    def _send_end_quorum_epoch(self, now_ms: int) -> None:
        s = self.quorum.state
        assert isinstance(s, Resigned)
        for voter in sorted(s.unacked_voters):
            self._send(voter, m.EndQuorumEpochRequest(self.local_id, s.epoch, s.preferred_successors))
        s.end_quorum_deadline_ms = now_ms + self.config.request_timeout_ms

    def _resign(self, now_ms: int, s: Leader) -> None:
        others = [v for v in s.voters if v != self.local_id]
        successors = tuple(sorted(others, key=lambda v: (-s.replicas[v].end_offset, v)))
        self._leave_leadership()
        self.quorum.become_resigned(now_ms, successors)
        self._send_end_quorum_epoch(now_ms)

    def handle_end_quorum_epoch_request(self, now_ms: int, source: int, req: m.EndQuorumEpochRequest) -> None:
        q = self.quorum
        if req.leader_epoch < q.epoch:
            error = m.FENCED_LEADER_EPOCH
        else:
            error = m.NONE
            if req.leader_epoch > q.epoch:
                self._maybe_transition(now_ms, req.leader_epoch, req.leader_id, from_leader=True)
            s = q.state
            if isinstance(s, Follower) and s.leader_id == req.leader_id:
                # Most caught-up successors go first: strict exponential backoff by position.
                successors = req.preferred_successors
                if self.local_id in successors:
                    backoff = self._strict_exponential_backoff_ms(successors.index(self.local_id))
                else:
                    backoff = self.config.election_backoff_max_ms
                s.fetch_deadline_ms = min(s.fetch_deadline_ms, now_ms + backoff)
        self._send(source, m.EndQuorumEpochResponse(error, q.leader_id(), q.epoch))

    def handle_end_quorum_epoch_response(self, now_ms: int, source: int,
                                       resp: m.EndQuorumEpochResponse) -> None:
        s = self.quorum.state
        if isinstance(s, Resigned) and resp.leader_epoch == s.epoch:
            s.unacked_voters.discard(source)
        else:
            self._maybe_transition(now_ms, resp.leader_epoch, resp.leader_id, from_leader=False)

