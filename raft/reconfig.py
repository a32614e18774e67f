"""Voter changes (KIP-853): AddVoter, RemoveVoter and UpdateVoter on the leader, one at a time.

Theory of operation. The voter set in force is the latest VotersRecord in the log, committed or
not (membership.py), so a change takes effect on each replica as soon as it reads the record,
and is safe because it adds or removes exactly one voter and is committed by the majority of
the new set before the next change may start. The leader refuses a change (REQUEST_TIMED_OUT)
while another is in progress or a VotersRecord is uncommitted, and until the LeaderChange record
of its epoch is committed (a competing set from an earlier leader differs by one voter at most).

| stage        | AddVoter                                    | RemoveVoter / UpdateVoter         |
|--------------|---------------------------------------------|-----------------------------------|
| catching_up  | its fetch offset (as an observer, same      |                                   |
|              | replica key) reaches the high watermark     |                                   |
| probing      | ApiVersions to its endpoint: kraft.version  |                                   |
|              | range must hold the current version         |                                   |
| committing   | VotersRecord appended; answered when the    | same                              |
|              | high watermark passes it                    |                                   |

A leader that removes itself stays leader, not counting itself for the high watermark, until
the record commits, then resigns. Past ``timeout_ms`` the request is answered REQUEST_TIMED_OUT;
an appended record stays and commits (or is truncated) like any other. Losing leadership answers
NOT_LEADER_OR_FOLLOWER.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from . import messages as m
from .core_view import CoreView
from .quorum_state import Leader, ReplicaState
from .voters import Voter, VoterSet

DEFAULT_VOTER_CHANGE_TIMEOUT_MS = 30_000


@dataclass
class PendingVoterChange:
    kind: str  # "add", "remove" or "update"
    client: object  # the token to answer; None once answered
    voter: Voter
    deadline_ms: int
    stage: str = "committing"
    offset: int = -1  # of the appended VotersRecord
    ack_when_committed: bool = True


@dataclass(frozen=True, slots=True)
class ReplicaDescription:
    replica_id: int
    directory_id: bytes | None
    log_end_offset: int
    last_fetch_ms: int
    last_caught_up_ms: int


@dataclass(frozen=True, slots=True)
class QuorumDescription:
    """What DescribeQuorum answers (leader only)."""

    leader_id: int
    leader_epoch: int
    high_watermark: int
    voters: tuple[ReplicaDescription, ...]
    observers: tuple[ReplicaDescription, ...]
    voter_set: VoterSet


class VoterChangeHandlers(CoreView):
    # ---- requests --------------------------------------------------------------------------------
    def handle_add_voter_request(self, now_ms: int, client, req: m.AddVoterRequest) -> None:
        error = self._voter_change_refusal()
        if error is not None:
            return self._answer_client(client, *error)
        if req.voter.id in self.quorum.voters:
            return self._answer_client(client, m.DUPLICATE_VOTER, f"voter {req.voter.id} is already a voter")
        if not req.voter.endpoints:
            return self._answer_client(client, m.INVALID_REQUEST, "a voter needs at least one endpoint")
        self._pending_change = PendingVoterChange("add", client, req.voter, now_ms + req.timeout_ms,
                                                  "catching_up", ack_when_committed=req.ack_when_committed)
        self._maybe_continue_voter_change(now_ms)

    def handle_remove_voter_request(self, now_ms: int, client, req: m.RemoveVoterRequest) -> None:
        error = self._voter_change_refusal()
        if error is not None:
            return self._answer_client(client, *error)
        voter = self.voter_set.get(req.voter_id)
        if voter is None or not voter.matches(req.voter_id, req.voter_directory_id):
            return self._answer_client(client, m.VOTER_NOT_FOUND, f"voter {req.voter_id} is not a voter")
        if len(self.voter_set.voters) == 1:
            return self._answer_client(client, m.INVALID_REQUEST, "cannot remove the only voter")
        self._pending_change = PendingVoterChange("remove", client, voter,
                                                  now_ms + DEFAULT_VOTER_CHANGE_TIMEOUT_MS)
        self._append_voter_set(self.voter_set.removing(voter.id))

    def handle_update_voter_request(self, now_ms: int, client, req: m.UpdateVoterRequest) -> None:
        s = self.quorum.state
        if isinstance(s, Leader) and req.current_leader_epoch != s.epoch:
            error = m.FENCED_LEADER_EPOCH if req.current_leader_epoch < s.epoch else m.UNKNOWN_LEADER_EPOCH
            return self._answer_client(client, error, None)
        if isinstance(s, Leader) and self.kraft_version == 0:
            # A static voter tells the leader its directory id and kraft.version range: kept for
            # an upgrade to kraft.version 1 (kraft_upgrade.py), nothing written.
            static = self.voter_set.get(req.voter.id)
            if static is None:
                return self._answer_client(client, m.VOTER_NOT_FOUND, f"voter {req.voter.id} is not a voter")
            if not req.voter.supports(0):
                return self._answer_client(client, m.INVALID_UPDATE_VERSION,
                                           "kraft.version 0 is outside the voter's range")
            self._learn_static_voter(s, req.voter)
            return self._answer_client(client, m.NONE, None)
        refusal = self._voter_change_refusal()
        if refusal is not None:
            return self._answer_client(client, *refusal)
        voter = self.voter_set.get(req.voter.id)
        if voter is None or not voter.matches(req.voter.id, req.voter.directory_id):
            return self._answer_client(client, m.VOTER_NOT_FOUND, f"voter {req.voter.id} is not a voter")
        if not req.voter.supports(self.kraft_version):
            return self._answer_client(client, m.INVALID_UPDATE_VERSION,
                                       f"kraft.version {self.kraft_version} is outside the voter's range")
        updated = self.voter_set.updating(req.voter)
        if updated == self.voter_set:
            return self._answer_client(client, m.NONE, None)
        self._pending_change = PendingVoterChange("update", client, req.voter,
                                                  now_ms + DEFAULT_VOTER_CHANGE_TIMEOUT_MS)
        self._append_voter_set(updated)

    def handle_api_versions_probe_response(self, now_ms: int, source: int,
                                           resp: m.ApiVersionsProbeResponse) -> None:
        p = self._pending_change
        if p is None or p.stage != "probing" or source != p.voter.id:
            return
        if resp.error_code != m.NONE:
            return self._finish_voter_change(m.REQUEST_TIMED_OUT, f"ApiVersions to voter {source} failed")
        voter = replace(p.voter, min_kraft_version=resp.min_kraft_version,
                        max_kraft_version=resp.max_kraft_version)
        if not voter.supports(self.kraft_version):
            return self._finish_voter_change(
                m.INVALID_REQUEST, f"voter {source} supports kraft.version {resp.min_kraft_version}"
                f"-{resp.max_kraft_version}, not {self.kraft_version}")
        p.voter = voter
        self._append_voter_set(self.voter_set.adding(voter))

    # ---- progress --------------------------------------------------------------------------------
    def _voter_change_refusal(self) -> tuple[int, str | None] | None:
        s = self.quorum.state
        if not isinstance(s, Leader):
            return m.NOT_LEADER_OR_FOLLOWER, None
        if self.kraft_version < 1:
            return m.UNSUPPORTED_VERSION, "kraft.version 0: the voter set is static"
        if self._pending_change is not None or self.voter_history.latest_offset() >= self.log.high_watermark:
            return m.REQUEST_TIMED_OUT, "another voter change is in progress"
        if self.log.high_watermark <= s.epoch_start_offset:
            return m.REQUEST_TIMED_OUT, "the leader has not committed its epoch yet"
        return None

    def _append_voter_set(self, voters: VoterSet) -> None:
        p, s = self._pending_change, self.quorum.state
        assert p is not None and isinstance(s, Leader)
        p.stage = "committing"
        p.offset = self._append_as_leader(self._now, s, [voters])
        if not p.ack_when_committed:
            self._answer_client(p.client, m.NONE, None)
            p.client = None
        self._maybe_continue_voter_change(self._now)

    def _maybe_continue_voter_change(self, now_ms: int | None) -> None:
        p = self._pending_change
        s = self.quorum.state
        if p is None or not isinstance(s, Leader):
            return
        if p.stage == "catching_up":
            replica = self.observers.get((p.voter.id, p.voter.directory_id))
            if replica is not None and replica.end_offset >= self.log.high_watermark:
                p.stage = "probing"
                self._send(p.voter.id, m.ApiVersionsProbe(p.voter.id, p.voter.endpoints))
        elif p.stage == "committing" and self.log.high_watermark > p.offset:
            removed_self = self.local_id not in s.voters
            self._finish_voter_change(m.NONE, None)
            if removed_self:
                self._resign(self._now, s)

    def _poll_voter_change(self, now_ms: int) -> None:
        p = self._pending_change
        if p is not None and now_ms >= p.deadline_ms:
            self._finish_voter_change(m.REQUEST_TIMED_OUT, f"the {p.kind} of voter {p.voter.id} timed out")

    def _voter_change_deadline(self) -> int | None:
        return self._pending_change.deadline_ms if self._pending_change is not None else None

    def _finish_voter_change(self, error: int, message: str | None) -> None:
        p, self._pending_change = self._pending_change, None
        if p is not None and p.client is not None:
            self._answer_client(p.client, error, message)

    def _abort_voter_change(self) -> None:
        if self._pending_change is not None:
            self._finish_voter_change(m.NOT_LEADER_OR_FOLLOWER, "leadership changed")

    def _answer_client(self, client, error: int, message: str | None) -> None:
        q = self.quorum
        self._send(client, m.VoterChangeResponse(error, message, q.leader_id(), q.epoch))

    # ---- DescribeQuorum --------------------------------------------------------------------------
    def describe(self) -> QuorumDescription | None:
        """The leader's view of every voter and observer; None when not the leader."""
        s = self.quorum.state
        if not isinstance(s, Leader):
            return None
        leo = self.log.end_offset().offset

        def view(replica_id: int, r: ReplicaState, local: bool) -> ReplicaDescription:
            if local:
                return ReplicaDescription(replica_id, self.directory_id, leo, self._now, self._now)
            return ReplicaDescription(replica_id, r.directory_id, r.end_offset, r.last_fetch_ms,
                                      r.last_caught_up_ms)

        voters = tuple(view(v.id, s.replicas.get(v.id) or ReplicaState(directory_id=v.directory_id),
                            v.id == self.local_id)
                       for v in self.voter_set.voters)
        if self.local_id not in s.voters:
            observers = [view(self.local_id, ReplicaState(), True)]
        else:
            observers = []
        for (replica_id, _), r in sorted(self.observers.items(), key=lambda kv: kv[0][0]):
            observers.append(view(replica_id, r, False))
        return QuorumDescription(self.local_id, s.epoch, self.log.high_watermark, voters, tuple(observers),
                                 self.voter_set)
