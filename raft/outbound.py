"""The driver's outbound requests: the core's requests to peers, ApiVersions probes, admin RPCs.

Each request runs as its own task, so a slow or dead peer delays only its own answers. The
answer is parsed with the request it answers (raft.wire copies the fields not on the wire) and
stepped into the core with the destination as source. A failure (no endpoint, backoff,
connection lost, timeout, no common version) steps nothing: the core's timers resend. Two
exceptions: a pre-vote to a peer without Vote v2 is stepped back as UNSUPPORTED_VERSION, as if
the peer had answered it, so that the core falls back to a standard election (KIP-996); and a
failed Fetch or FetchSnapshot is reported at once, as ``handle_leader_disconnect`` when the peer
closed or refused the connection (raft.peers.closed_by_peer: what a crashed leader does), else as
``request_failed`` (a timeout or a local failure: retried after retry.backoff.ms).

| request                    | timeout                                         | channel |
|----------------------------|-------------------------------------------------|---------|
| Fetch                      | max_wait_ms + controller.quorum.request.timeout | raft    |
| other core requests        | controller.quorum.request.timeout.ms            | raft    |
| ApiVersions probe          | controller.quorum.request.timeout.ms            | admin   |
| AddRaftVoter               | its timeout_ms + request timeout                | admin   |
| RemoveRaftVoter, Update... | voter change timeout (30 s) + request timeout   | admin   |
"""
from __future__ import annotations

import asyncio
import logging

from protocol import messages as M

from . import messages as m
from . import wire
from .peers import (
    ADMIN,
    API_VERSIONS_VERSION,
    RAFT,
    REFUSED,
    REQUEST_FAILURES,
    Peers,
    closed_by_peer,
    pick_version,
)
from .reconfig import DEFAULT_VOTER_CHANGE_TIMEOUT_MS

log = logging.getLogger("strom.raft")


def request_timeout_ms(quorum, message) -> int:
    """How long a request may take: the table above (both sides use it)."""
    t = quorum.request_timeout_ms
    if isinstance(message, m.FetchRequest):
        return t + message.max_wait_ms
    if isinstance(message, m.AddVoterRequest):
        return t + message.timeout_ms
    if isinstance(message, (m.RemoveVoterRequest, m.UpdateVoterRequest)):
        return t + DEFAULT_VOTER_CHANGE_TIMEOUT_MS
    return t


class OutboundRequests:
    """Mixed into RaftDriver (it provides config, core, step, clock)."""

    def init_outbound(self) -> None:
        q = self.config.quorum
        self.peers = Peers(f"raft-{self.config.node_id}", q.request_timeout_ms, q.retry_backoff_ms,
                           self.config.security)
        self.sends: set[asyncio.Task] = set()

    def spawn(self, coro, name: str) -> asyncio.Task:
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self.sends.add(task)
        task.add_done_callback(self._sent)
        return task

    def _sent(self, task: asyncio.Task) -> None:
        self.sends.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("raft: node %d: %s failed", self.config.node_id, task.get_name(),
                      exc_info=task.exception())

    def endpoint_for(self, destination: int) -> tuple[str, int] | None:
        """A replica id's endpoint, or bootstrap server -2 - id for ids -2, -3, ..."""
        if destination <= -2:
            servers = self.config.bootstrap_servers
            i = -2 - destination
            return servers[i] if i < len(servers) else None
        endpoint = self.core.endpoint_of(destination)
        return (endpoint.host, endpoint.port) if endpoint is not None else None

    async def send(self, destination: int, message) -> None:
        response, ended = await self._request(destination, message, RAFT)
        if self.closed:
            return
        if response is not None:
            self.step(destination, response)
        elif isinstance(message, m.FetchRequest | m.FetchSnapshotRequest):
            if ended is not None:
                self._run_core(self.core.handle_leader_disconnect, destination, ended == REFUSED)
            else:
                self._run_core(self.core.request_failed, destination, message)

    async def request(self, destination: int, message, channel: str):
        """The core message answering ``message``, or None when there is no answer."""
        return (await self._request(destination, message, channel))[0]

    async def _request(self, destination: int, message, channel: str):
        """(the answer or None, how the peer ended the connection: raft.peers.closed_by_peer)."""
        address = self.endpoint_for(destination)
        if address is None:
            return None, None
        api_key = wire.REQUEST_KEYS[type(message)]
        timeout_ms = request_timeout_ms(self.config.quorum, message)
        peer = self.peers.get(*address, channel)
        try:
            _, info = await peer.connection()
            version = pick_version(api_key, info.api_versions)
            if version is None:
                raise wire.WireError(wire.UNSUPPORTED_VERSION, f"{address}: no common version of {api_key}")
            key, body = wire.build_request(message, self.config.cluster_id, version,
                                           leader_endpoints=self.core.local_endpoints(),
                                           directory_of=self._directory_of)
            answer = await peer.request(key, version, body, timeout_ms)
            return wire.parse_response(key, answer, message, self.config.listener_name), None
        except wire.WireError as e:
            if isinstance(message, m.VoteRequest) and e.error_code == wire.UNSUPPORTED_VERSION:
                answer = m.VoteResponse(wire.UNSUPPORTED_VERSION, m.NO_LEADER, -1, False, message.pre_vote)
                return answer, None
            log.debug("raft: node %d: %s to %s not sent: %s", self.config.node_id, type(message).__name__,
                      address, e)
        except REQUEST_FAILURES as e:
            log.debug("raft: node %d: %s to %s failed: %s", self.config.node_id, type(message).__name__,
                      address, e)
            return None, closed_by_peer(e)
        return None, None

    def _directory_of(self, replica_id: int) -> bytes | None:
        voter = self.core.voter_set.get(replica_id)
        return voter.directory_id if voter is not None else None

    async def probe(self, probe: m.ApiVersionsProbe) -> None:
        """ApiVersions to a would-be voter: its kraft.version range, stepped back to the core."""
        answer = m.ApiVersionsProbeResponse(m.REQUEST_TIMED_OUT, 0, 0)
        for endpoint in probe.endpoints[:1]:
            peer = self.peers.get(endpoint.host, endpoint.port, ADMIN)
            try:
                body = M.ApiVersionsRequest(client_software_name="strom", client_software_version="0")
                response = await peer.request(wire.API_VERSIONS, API_VERSIONS_VERSION, body,
                                              self.config.quorum.request_timeout_ms)
                if response.error_code == m.NONE:
                    answer = m.ApiVersionsProbeResponse(m.NONE, *wire.kraft_version_range(response))
            except REQUEST_FAILURES as e:
                log.info("raft: ApiVersions to %s:%d failed: %s", endpoint.host, endpoint.port, e)
        if not self.closed:
            self.step(probe.replica_id, answer)

    async def close_io(self) -> None:
        tasks = list(self.sends)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self.peers.close()
