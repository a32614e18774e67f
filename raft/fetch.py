"""Fetch, KRaft's replication RPC: the leader's and the followers' (and observers') sides.

Followers and observers pull with Fetch(fetch_offset, last_fetched_epoch), one in flight at a
time. The leader checks the pair against its leader-epoch cache: if its log for
last_fetched_epoch ends before fetch_offset, or that epoch is not in its log, it answers a
diverging epoch (the largest epoch <= last_fetched_epoch it has, and where that epoch ends); the
follower truncates to min(that end offset, its own end offset for that epoch), and refuses to go
below its high watermark. Otherwise the leader records the voter's fetch offset (its end offset),
recomputes the high watermark, and answers with entries, or parks the Fetch for up to max_wait_ms
when there is nothing new (long poll). The high watermark is the offset a majority of voters
have reached (sorted descending, index n // 2, the leader counting its own log end offset), taken
only when past the epoch start offset and above the current one. Followers set their high
watermark to min(log end offset, leader's high watermark) when that is higher.
"""
from __future__ import annotations

from dataclasses import dataclass

from . import messages as m
from .core_view import CoreView
from .errors import RaftInvariantError
from .log import Entry
from .quorum_state import Follower, Leader, ReplicaState
from .voters import KRaftVersion


@dataclass
class ParkedFetch:
    request: m.FetchRequest
    deadline_ms: int


class FetchHandlers(CoreView):
    def _append_as_leader(self, now_ms: int, s: Leader, values: list) -> int:
        """Append values in this epoch; returns the offset of the first."""
        base = self.log.end_offset().offset
        self._log_append([Entry(base + i, s.epoch, v) for i, v in enumerate(values)])
        self._maybe_update_high_watermark(s)
        self._complete_parked_fetches(s)
        return base

    def handle_fetch_request(self, now_ms: int, source: int, req: m.FetchRequest) -> None:
        q = self.quorum
        s = q.state
        if not isinstance(s, Leader):
            error = m.UNKNOWN_LEADER_EPOCH if req.current_leader_epoch > q.epoch else m.NOT_LEADER_OR_FOLLOWER
            return self._send(source, self._fetch_error(error, req))
        if req.current_leader_epoch != s.epoch:
            error = m.FENCED_LEADER_EPOCH if req.current_leader_epoch < s.epoch else m.UNKNOWN_LEADER_EPOCH
            return self._send(source, self._fetch_error(error, req))
        # Never our own id: that is a broker sharing this node id (a combined node), an observer.
        is_voter = source != self.local_id and self.voter_set.is_voter(source, req.replica_directory_id)
        if is_voter:
            self._update_check_quorum(now_ms, s, source)
        start = self.log.log_start_offset
        end = self.log.end_offset_for_epoch(req.last_fetched_epoch)
        if req.fetch_offset < start or (req.fetch_offset > 0 and end.offset < start):
            # The entries it needs are only in our snapshot (KIP-630): it fetches that first.
            return self._send(source, m.FetchResponse(
                m.NONE, self.local_id, s.epoch, self.log.high_watermark, None, (), req.fetch_offset,
                req.last_fetched_epoch, self.log.latest_snapshot_id(), self.local_endpoints()))
        if req.fetch_offset > 0 and (end.epoch != req.last_fetched_epoch or end.offset < req.fetch_offset):
            diverging = m.EpochEndOffset(end.epoch, end.offset)
            return self._send(source, m.FetchResponse(m.NONE, self.local_id, s.epoch, self.log.high_watermark,
                                                      diverging, (), req.fetch_offset,
                                                      req.last_fetched_epoch,
                                                      leader_endpoints=self.local_endpoints()))
        if is_voter:
            replica = s.replicas[source]
            if req.replica_directory_id is not None and self.kraft_version == 0:
                # A static voter's directory id, learned for an upgrade to kraft.version 1.
                replica.directory_id = req.replica_directory_id
        else:
            replica = self.observers.setdefault((source, req.replica_directory_id),
                                                ReplicaState(directory_id=req.replica_directory_id))
        replica.end_offset = req.fetch_offset
        replica.last_fetch_ms = now_ms
        replica.acknowledged = True
        if req.fetch_offset >= self.log.end_offset().offset:
            replica.last_caught_up_ms = now_ms
        if is_voter:
            self._maybe_update_high_watermark(s)
        else:
            self._maybe_continue_voter_change(now_ms)
        entries = self._read_for_fetch(req.fetch_offset)
        self._parked.pop(source, None)
        if not entries and req.max_wait_ms > 0 and req.high_watermark >= self.log.high_watermark:
            self._parked[source] = ParkedFetch(req, now_ms + req.max_wait_ms)
            return
        self._answer_fetch(source, req, s, entries)

    def _read_for_fetch(self, offset: int) -> list[Entry]:
        """Up to fetch_max_entries from ``offset``, never ending between a KRaftVersionRecord and
        the VotersRecord appended with it (one control batch, kraft_upgrade.py): a replica must
        not hold kraft.version 1 without its voters, nor commit or snapshot one without the other."""
        entries = self.log.read(offset, self.config.fetch_max_entries)
        if entries and isinstance(entries[-1].value, KRaftVersion):
            entries += self.log.read(entries[-1].offset + 1, 1)
        return entries

    def _fetch_error(self, error: int, req: m.FetchRequest) -> m.FetchResponse:
        q = self.quorum
        leader = q.leader_id()
        return m.FetchResponse(error, leader, q.epoch, -1, None, (), req.fetch_offset,
                               req.last_fetched_epoch, leader_endpoints=q.endpoints_of(leader))

    def _answer_fetch(self, replica_id: int, req: m.FetchRequest, s: Leader, entries: list[Entry]) -> None:
        self._send(replica_id, m.FetchResponse(m.NONE, self.local_id, s.epoch, self.log.high_watermark, None,
                                               tuple(entries), req.fetch_offset,
                                               req.last_fetched_epoch,
                                               leader_endpoints=self.local_endpoints()))

    def _complete_parked_fetches(self, s: Leader) -> None:
        for replica_id, parked in list(self._parked.items()):
            entries = self._read_for_fetch(parked.request.fetch_offset)
            if entries or parked.request.high_watermark < self.log.high_watermark:
                del self._parked[replica_id]
                self._answer_fetch(replica_id, parked.request, s, entries)

    def _update_check_quorum(self, now_ms: int, s: Leader, voter: int) -> None:
        s.fetched_since_check.add(voter)
        if len((s.fetched_since_check & s.voters) | {self.local_id}) >= len(s.voters) // 2 + 1:
            s.check_quorum_start_ms = now_ms
            s.fetched_since_check.clear()

    def _maybe_update_high_watermark(self, s: Leader) -> None:
        """Majority end offset over voters; only past the epoch start offset; monotonic.

        A leader that a pending VotersRecord removes does not count itself (KIP-853).
        """
        if self.local_id in s.replicas:
            s.replicas[self.local_id].end_offset = self.log.end_offset().offset
        offsets = sorted((s.replicas[v].end_offset for v in s.voters), reverse=True)
        if not offsets:
            return
        majority_offset = offsets[len(offsets) // 2]
        if majority_offset > s.epoch_start_offset and majority_offset > self.log.high_watermark:
            s.high_watermark = majority_offset
            self.log.update_high_watermark(majority_offset)
            self._complete_parked_fetches(s)
            self._maybe_continue_voter_change(None)

    def _build_fetch(self, epoch: int) -> m.FetchRequest:
        end = self.log.end_offset()
        return m.FetchRequest(self.local_id, epoch, end.offset, end.epoch, self.log.high_watermark,
                              self.config.fetch_max_wait_ms, self.directory_id)

    def _send_fetch(self, now_ms: int, leader_id: int, s: Follower) -> None:
        if s.snapshot_id is not None:
            self._send(leader_id, self._build_fetch_snapshot(s))
        else:
            self._send(leader_id, self._build_fetch(s.epoch))
        s.fetch_in_flight_until_ms = now_ms + self.config.request_timeout_ms

    def _fetch_answer_for_us(self, now_ms: int, source: int, resp) -> Follower | None:
        """The Follower state a Fetch or FetchSnapshot answer is for, after following what it
        says about (leader, epoch); None if it moved us (then we fetch anew) or is not ours."""
        self._learn_endpoints(resp.leader_id, resp.leader_endpoints)
        if self._maybe_transition(now_ms, resp.leader_epoch, resp.leader_id, resp.leader_id == source):
            s = self.quorum.state
            if isinstance(s, Follower):
                self._send_fetch(now_ms, s.leader_id, s)
            return None
        s = self.quorum.state
        if not isinstance(s, Follower) or source != s.leader_id or resp.leader_epoch != s.epoch:
            return None
        return s

    def handle_fetch_response(self, now_ms: int, source: int, resp: m.FetchResponse) -> None:
        s = self._fetch_answer_for_us(now_ms, source, resp)
        if s is None or s.snapshot_id is not None:
            return
        if resp.error_code != m.NONE:
            s.fetch_in_flight_until_ms = now_ms + self.config.retry_backoff_ms
            return
        end = self.log.end_offset()
        if (resp.fetch_offset, resp.last_fetched_epoch) != (end.offset, end.epoch):
            # A duplicate, or an answer to a Fetch from a log we have since changed: within one
            # leader epoch the answer depends only on this pair, so anything else is stale.
            return
        s.has_fetched = True
        s.fetch_deadline_ms = now_ms + self.config.fetch_timeout_ms
        if resp.snapshot_id is not None:
            s.snapshot_id, s.snapshot_position = resp.snapshot_id, 0
        elif resp.diverging_epoch is not None:
            # No high watermark from this answer: our log may still diverge below the truncation
            # point (the next Fetch finds out), and min(LEO, leader HW) would commit our entries.
            self._truncate_to_diverging_epoch(resp.diverging_epoch)
        else:
            if resp.records:
                if resp.records[0].offset != end.offset:
                    raise RaftInvariantError(f"records from {resp.records[0].offset}, LEO {end.offset}")
                self._log_append(list(resp.records))
            new_hw = min(self.log.end_offset().offset, resp.high_watermark)
            if new_hw > self.log.high_watermark:
                self.log.update_high_watermark(new_hw)
        self._send_fetch(now_ms, s.leader_id, s)

    def _truncate_to_diverging_epoch(self, diverging: m.EpochEndOffset) -> None:
        local = self.log.end_offset_for_epoch(diverging.epoch)
        offset = min(diverging.end_offset, local.offset)
        if offset < self.log.high_watermark:
            raise RaftInvariantError(
                f"leader asked {self.local_id} to truncate to {offset}, below its high watermark "
                f"{self.log.high_watermark}")
        self._log_truncate(offset)

