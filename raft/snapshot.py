"""FetchSnapshot (KIP-630): a replica behind the leader's log start copies its latest snapshot.

A Fetch whose offset is below the leader's log start offset (or whose last fetched epoch ends
there) is answered with the leader's latest snapshot id. The follower then sends
FetchSnapshot(snapshot id, position) for consecutive chunks of the snapshot file, writing each
at its position into ``.checkpoint.part``; when position reaches the size the download is
complete: the log is emptied and starts at the snapshot's end offset, the voter set and
kraft.version are read from the snapshot, the listener is told to reload (``Ready.
snapshot_loaded``) and Fetch resumes from the snapshot's end offset. Every successful
FetchSnapshot answer resets the fetch timer, like a Fetch answer. A snapshot the leader no longer
has (SNAPSHOT_NOT_FOUND) sends the follower back to Fetch, which names the newer one.
"""
from __future__ import annotations

from . import messages as m
from .core_view import CoreView
from .errors import RaftInvariantError
from .quorum_state import Follower, Leader

FETCH_SNAPSHOT_MAX_BYTES = 1 << 20


class SnapshotHandlers(CoreView):
    def _build_fetch_snapshot(self, s: Follower) -> m.FetchSnapshotRequest:
        assert s.snapshot_id is not None  # sent only while a snapshot is being fetched
        return m.FetchSnapshotRequest(self.local_id, s.epoch, s.snapshot_id, s.snapshot_position,
                                      FETCH_SNAPSHOT_MAX_BYTES, self.directory_id)

    def handle_fetch_snapshot_request(self, now_ms: int, source: int, req: m.FetchSnapshotRequest) -> None:
        q = self.quorum
        s = q.state

        def answer(error: int, size: int = -1, data: bytes = b"") -> None:
            leader = q.leader_id()
            endpoints = self.local_endpoints() if leader == self.local_id else q.endpoints_of(leader)
            self._send(source, m.FetchSnapshotResponse(error, leader, q.epoch, req.snapshot_id, size,
                                                       req.position, data, endpoints))

        if not isinstance(s, Leader):
            return answer(m.UNKNOWN_LEADER_EPOCH if req.current_leader_epoch > q.epoch
                          else m.NOT_LEADER_OR_FOLLOWER)
        if req.current_leader_epoch != s.epoch:
            return answer(m.FENCED_LEADER_EPOCH if req.current_leader_epoch < s.epoch
                          else m.UNKNOWN_LEADER_EPOCH)
        if self.voter_set.is_voter(source, req.replica_directory_id):
            self._update_check_quorum(now_ms, s, source)
            s.replicas[source].last_fetch_ms = now_ms
            s.replicas[source].acknowledged = True
        size = self.log.snapshot_size(req.snapshot_id)
        if size is None:
            return answer(m.SNAPSHOT_NOT_FOUND)
        if not 0 <= req.position < size:
            return answer(m.POSITION_OUT_OF_RANGE)
        max_bytes = min(req.max_bytes, FETCH_SNAPSHOT_MAX_BYTES)
        answer(m.NONE, size, self.log.read_snapshot_chunk(req.snapshot_id, req.position, max_bytes))

    def handle_fetch_snapshot_response(self, now_ms: int, source: int, resp: m.FetchSnapshotResponse) -> None:
        s = self._fetch_answer_for_us(now_ms, source, resp)
        if s is None or resp.snapshot_id != s.snapshot_id or resp.position != s.snapshot_position:
            return  # stale or duplicated
        if resp.error_code in (m.SNAPSHOT_NOT_FOUND, m.POSITION_OUT_OF_RANGE):
            s.snapshot_id, s.snapshot_position = None, 0
            self._send_fetch(now_ms, s.leader_id, s)
            return
        if resp.error_code != m.NONE:
            s.fetch_in_flight_until_ms = now_ms + self.config.retry_backoff_ms
            return
        if resp.position + len(resp.data) > resp.size or not resp.data:
            raise RaftInvariantError(f"snapshot chunk {resp.position}+{len(resp.data)} of {resp.size}")
        s.has_fetched = True
        s.fetch_deadline_ms = now_ms + self.config.fetch_timeout_ms
        self.log.write_snapshot_chunk(resp.snapshot_id, resp.position, resp.data)
        s.snapshot_position += len(resp.data)
        if s.snapshot_position == resp.size:
            self._load_downloaded_snapshot(resp.snapshot_id)
            s.snapshot_id, s.snapshot_position = None, 0
        self._send_fetch(now_ms, s.leader_id, s)

    def _load_downloaded_snapshot(self, snapshot_id) -> None:
        if snapshot_id.offset < self.log.high_watermark:
            raise RaftInvariantError(
                f"snapshot {snapshot_id} below the high watermark {self.log.high_watermark}")
        self.log.complete_snapshot(snapshot_id)
        snapshot = self.log.read_snapshot(snapshot_id)
        self.kraft_history.reset(snapshot_id.offset - 1, snapshot.kraft_version)
        if snapshot.voters is not None:
            self.voter_history.reset(snapshot_id.offset - 1, snapshot.voters)
        else:
            self.voter_history.truncate(0)
        self._set_voter_set(self.voter_history.latest())
        self._snapshot_loaded = snapshot_id
