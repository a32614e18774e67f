"""Vote (KIP-595) and pre-vote (KIP-996): asking for votes, granting them, counting them.

Granting rules, in order: the request's epoch must not be below ours; a standard vote's
last_offset_epoch must be below its epoch (a pre-vote's not above); a standard vote with a higher
epoch first moves us to Unattached in that epoch (durable); the candidate's log must be at least
as up-to-date as ours, compared by (last epoch, log end offset); then the role decides
(``can_grant_vote``): one standard vote per epoch, none once a leader is known in the epoch, and
a follower grants pre-votes only until its first successful Fetch from its leader. A standard vote
is persisted (quorum-state write) before the answer leaves.

Two voters that lose their leader at nearly the same moment (its process died and closed both
connections) canvass at once: with equal logs the lower id goes first; and a pre-vote request
from a voter that refused ours (it still followed then) makes us ask it again, since its refusal
no longer holds. Neither rule grants anything a voter without a live leader would not grant.
"""
from __future__ import annotations

from dataclasses import replace

from . import messages as m
from .core_view import CoreView
from .log import LeaderChange
from .quorum_state import Candidate, Follower, Leader, Prospective, Unattached
from .voters import KRaftVersion


class VoteHandlers(CoreView):
    def _send_vote_requests(self, pre_vote: bool) -> None:
        s = self.quorum.state
        assert isinstance(s, (Prospective, Candidate))
        for voter in s.election.unrecorded():
            self._send_vote_request(voter, pre_vote)

    def _send_vote_request(self, voter: int, pre_vote: bool) -> None:
        s = self.quorum.state
        end = self.log.end_offset()
        v = self.voter_set.get(voter)
        self._send(voter, m.VoteRequest(self.local_id, s.epoch, end.epoch, end.offset, pre_vote, voter,
                                        self.directory_id, v.directory_id if v is not None else None))

    def handle_vote_request(self, now_ms: int, source: int, req: m.VoteRequest) -> None:
        q = self.quorum

        def answer(error: int, granted: bool) -> None:
            self._send(source, m.VoteResponse(error, q.leader_id(), q.epoch, granted, req.pre_vote))

        # KIP-853: answer whether or not either side is in our voter set (it may be stale), but
        # only when the request is meant for this replica key.
        if req.voter_id != self.local_id:
            return answer(m.INCONSISTENT_VOTER_SET, False)
        if req.voter_directory_id is not None and req.voter_directory_id != self.directory_id:
            return answer(m.INVALID_VOTER_KEY, False)
        if req.replica_epoch < q.epoch:
            return answer(m.FENCED_LEADER_EPOCH, False)
        if (req.last_offset_epoch > req.replica_epoch
                or (not req.pre_vote and req.last_offset_epoch >= req.replica_epoch)):
            return answer(m.INVALID_REQUEST, False)
        if not req.pre_vote and req.replica_epoch > q.epoch:
            self._leave_leadership()
            q.become_unattached(req.replica_epoch, now_ms)
        end = self.log.end_offset()
        log_up_to_date = (req.last_offset_epoch, req.last_offset) >= end.key()
        if (req.pre_vote and isinstance(q.state, Prospective) and req.replica_id > self.local_id
                and req.replica_id not in q.state.election.rejected
                and (req.last_offset_epoch, req.last_offset) == end.key()):
            # Two voters canvassing at once with equal logs would both become candidates and
            # split the vote, which costs an election timeout: between them, the lower id goes
            # first — unless the other already refused us, then it goes. Only a pre-vote is
            # refused (no epoch or vote changes), so safety is untouched.
            return answer(m.NONE, False)
        granted = self._can_grant_vote(req.replica_id, log_up_to_date, req.pre_vote, req.replica_directory_id)
        if granted and not req.pre_vote and isinstance(q.state, Unattached | Prospective):
            q.add_vote(req.replica_id, now_ms, req.replica_directory_id)
        answer(m.NONE, granted)
        s = q.state
        if (req.pre_vote and not granted and isinstance(s, Prospective) and req.replica_epoch == s.epoch
                and req.replica_id in s.election.rejected):
            # It canvasses, so it has lost the leader too: the refusal it gave us while it still
            # followed is stale. Ask again, or the two would hold each other's refusals until an
            # election timeout (the one with the longer log, refused here, can never win).
            s.election.rejected.discard(req.replica_id)
            self._send_vote_request(req.replica_id, pre_vote=True)

    def _can_grant_vote(self, candidate_id: int, log_up_to_date: bool, pre_vote: bool,
                        candidate_directory_id: bytes | None = None) -> bool:
        s = self.quorum.state
        if isinstance(s, Unattached | Prospective):
            if s.voted_id != m.NO_LEADER:
                if pre_vote:
                    return log_up_to_date
                voted_directory = self.quorum.voted_directory_id
                return s.voted_id == candidate_id and voted_directory in (None, candidate_directory_id)
            if s.leader_id != m.NO_LEADER:
                return pre_vote and log_up_to_date
            return log_up_to_date
        if isinstance(s, Candidate):
            return pre_vote and log_up_to_date
        if isinstance(s, Follower):
            # KIP-996: a follower still fetching successfully keeps the leader it has.
            return pre_vote and not s.has_fetched and log_up_to_date
        return False

    def handle_vote_response(self, now_ms: int, source: int, resp: m.VoteResponse) -> None:
        s = self.quorum.state
        if resp.error_code == m.UNSUPPORTED_VERSION and resp.pre_vote and isinstance(s, Prospective):
            # A voter too old for Vote v2 cannot pre-vote: fall back to a real candidacy at once.
            self._become_candidate(now_ms)
            return
        if self._maybe_transition(now_ms, resp.leader_epoch, resp.leader_id, from_leader=False):
            return
        s = self.quorum.state
        if resp.leader_epoch != s.epoch or resp.error_code != m.NONE:
            return
        if isinstance(s, Prospective) and resp.pre_vote:
            s.election.record(source, resp.vote_granted)
            if s.election.is_granted():
                self._become_candidate(now_ms)
            elif s.election.is_rejected():
                self._after_prospective_loss(now_ms, s)
        elif isinstance(s, Candidate) and not resp.pre_vote:
            s.election.record(source, resp.vote_granted)
            if s.election.is_granted():
                self._maybe_become_leader(now_ms)
            elif s.election.is_rejected() and s.backoff_until_ms is None:
                s.backoff_until_ms = now_ms + self._binary_exponential_backoff_ms(s.retries)

    def _become_candidate(self, now_ms: int) -> None:
        self.quorum.become_candidate(now_ms)
        self._send_vote_requests(pre_vote=False)
        self._maybe_become_leader(now_ms)

    def _after_prospective_loss(self, now_ms: int, s: Prospective) -> None:
        if (s.leader_id != m.NO_LEADER and not self.quorum.is_self(s.leader_id)
                and self.quorum.has_endpoint(s.leader_id)):
            self.quorum.become_follower(s.epoch, s.leader_id, now_ms)
        else:
            self.quorum.become_unattached(s.epoch, now_ms, s.leader_id)

    def _maybe_become_leader(self, now_ms: int) -> None:
        s = self.quorum.state
        if not isinstance(s, Candidate) or not s.election.is_granted():
            return
        self.quorum.become_leader(now_ms, self.log.end_offset().offset)
        leader = self.quorum.state
        assert isinstance(leader, Leader)
        voters = tuple(sorted(self.quorum.voters))
        values: list[object] = [LeaderChange(self.local_id, voters)]
        voter_set = self.voter_set
        me = voter_set.get(self.local_id)
        if self.kraft_version >= 1 and me is not None and self._endpoints and me.endpoints != self._endpoints:
            # KIP-853 "Automatic endpoint discovery": a new leader records where it listens now.
            voter_set = voter_set.updating(replace(me, endpoints=self._endpoints))
        if self.kraft_version >= 1 and self.voter_history.latest_offset() < self.log.log_start_offset:
            # KIP-853 "First leader": the voter set only in the bootstrap snapshot goes to the log.
            values += [KRaftVersion(self.kraft_version), voter_set]
        elif voter_set != self.voter_set:
            values.append(voter_set)
        self._append_as_leader(now_ms, leader, values)
        for voter in voters:
            if voter != self.local_id:
                self._send_begin_quorum_epoch(leader, voter)
        leader.begin_quorum_deadline_ms = now_ms + self.config.fetch_timeout_ms // 2

