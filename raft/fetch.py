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
from .errors import RaftInvariantError
from .log import Entry
from .quorum_state import Follower, Leader, ReplicaState
from .ready import Append, Truncate


@dataclass
class ParkedFetch:
    request: m.FetchRequest
    deadline_ms: int


class FetchHandlers:
    def _append_as_leader(self, now_ms: int, s: Leader, values: list) -> None:
        base = self.log.end_offset().offset
        entries = [Entry(base + i, s.epoch, v) for i, v in enumerate(values)]
        self.log.append(entries)
        self._ready.log_ops.append(Append(base, base + len(entries) - 1, s.epoch))
        self._maybe_update_high_watermark(s)
        self._complete_parked_fetches(s)

    def handle_fetch_request(self, now_ms: int, source: int, req: m.FetchRequest) -> None:
        q = self.quorum
        s = q.state
        if not isinstance(s, Leader):
            error = m.UNKNOWN_LEADER_EPOCH if req.current_leader_epoch > q.epoch else m.NOT_LEADER_OR_FOLLOWER
            return self._send(source, self._fetch_error(error, req))
        if req.current_leader_epoch != s.epoch:
            error = m.FENCED_LEADER_EPOCH if req.current_leader_epoch < s.epoch else m.UNKNOWN_LEADER_EPOCH
            return self._send(source, self._fetch_error(error, req))
        if source in s.voters:
            self._update_check_quorum(now_ms, s, source)
        end = self.log.end_offset_for_epoch(req.last_fetched_epoch)
        if req.fetch_offset > 0 and (end.epoch != req.last_fetched_epoch or end.offset < req.fetch_offset):
            diverging = m.EpochEndOffset(end.epoch, end.offset)
            return self._send(source, m.FetchResponse(m.NONE, self.local_id, s.epoch, self.log.high_watermark,
                                                      diverging, (), req.fetch_offset,
                                                      req.last_fetched_epoch))
        replica = s.replicas.get(source) or self.observers.setdefault(source, ReplicaState())
        replica.end_offset = req.fetch_offset
        replica.last_fetch_ms = now_ms
        replica.acknowledged = True
        if source in s.voters:
            self._maybe_update_high_watermark(s)
        entries = self.log.read(req.fetch_offset, self.config.fetch_max_entries)
        self._parked.pop(source, None)
        if not entries and req.max_wait_ms > 0 and req.high_watermark >= self.log.high_watermark:
            self._parked[source] = ParkedFetch(req, now_ms + req.max_wait_ms)
            return
        self._answer_fetch(source, req, s, entries)

    def _fetch_error(self, error: int, req: m.FetchRequest) -> m.FetchResponse:
        q = self.quorum
        return m.FetchResponse(error, q.leader_id(), q.epoch, -1, None, (), req.fetch_offset,
                               req.last_fetched_epoch)

    def _answer_fetch(self, replica_id: int, req: m.FetchRequest, s: Leader, entries: list[Entry]) -> None:
        self._send(replica_id, m.FetchResponse(m.NONE, self.local_id, s.epoch, self.log.high_watermark, None,
                                               tuple(entries), req.fetch_offset,
                                               req.last_fetched_epoch))

    def _complete_parked_fetches(self, s: Leader) -> None:
        for replica_id, parked in list(self._parked.items()):
            entries = self.log.read(parked.request.fetch_offset, self.config.fetch_max_entries)
            if entries or parked.request.high_watermark < self.log.high_watermark:
                del self._parked[replica_id]
                self._answer_fetch(replica_id, parked.request, s, entries)

    def _update_check_quorum(self, now_ms: int, s: Leader, voter: int) -> None:
        s.fetched_since_check.add(voter)
        if len(s.fetched_since_check | {self.local_id}) >= len(s.voters) // 2 + 1:
            s.check_quorum_start_ms = now_ms
            s.fetched_since_check.clear()

    def _maybe_update_high_watermark(self, s: Leader) -> None:
        """Majority end offset over voters; only past the epoch start offset; monotonic."""
        s.replicas[self.local_id].end_offset = self.log.end_offset().offset
        offsets = sorted((s.replicas[v].end_offset for v in s.voters), reverse=True)
        majority_offset = offsets[len(offsets) // 2]
        if majority_offset > s.epoch_start_offset and majority_offset > self.log.high_watermark:
            s.high_watermark = majority_offset
            self.log.update_high_watermark(majority_offset)
            self._complete_parked_fetches(s)


    def _build_fetch(self, epoch: int) -> m.FetchRequest:
        end = self.log.end_offset()
        return m.FetchRequest(self.local_id, epoch, end.offset, end.epoch, self.log.high_watermark,
                              self.config.fetch_max_wait_ms)

    def _send_fetch(self, now_ms: int, leader_id: int, s: Follower) -> None:
        self._send(leader_id, self._build_fetch(s.epoch))
        s.fetch_in_flight_until_ms = now_ms + self.config.request_timeout_ms

    def handle_fetch_response(self, now_ms: int, source: int, resp: m.FetchResponse) -> None:
        if self._maybe_transition(now_ms, resp.leader_epoch, resp.leader_id, resp.leader_id == source):
            s = self.quorum.state
            if isinstance(s, Follower):
                self._send_fetch(now_ms, s.leader_id, s)
            return
        s = self.quorum.state
        if not isinstance(s, Follower) or source != s.leader_id or resp.leader_epoch != s.epoch:
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
        if resp.diverging_epoch is not None:
            # No high watermark from this answer: our log may still diverge below the truncation
            # point (the next Fetch finds out), and min(LEO, leader HW) would commit our entries.
            self._truncate_to_diverging_epoch(resp.diverging_epoch)
        else:
            if resp.records:
                if resp.records[0].offset != end.offset:
                    raise RaftInvariantError(f"records from {resp.records[0].offset}, LEO {end.offset}")
                self.log.append(list(resp.records))
                self._ready.log_ops.append(Append(resp.records[0].offset, resp.records[-1].offset,
                                                  resp.records[-1].epoch))
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
        self.log.truncate_to(offset)
        self._ready.log_ops.append(Truncate(offset))

