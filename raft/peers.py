"""Outbound connections of a KRaft replica: one KafkaConnection per peer and channel.

A peer is a (host, port) endpoint. Its connection is opened lazily by the first request, then
ApiVersions (v3) is asked once: it gives the version range of every API the peer serves (a
request goes at the highest version both sides speak, raft.wire.VERSIONS) and the peer's
``kraft.version`` SupportedFeature range. Requests on one connection are pipelined. A failed
connect, or a request that fails or times out, closes the connection and backs off before the
next connect (retry backoff doubling up to MAX_RECONNECT_BACKOFF_MS, counted from the last
connect attempt, so a connection that lived long is opened again at once); during the backoff a
request fails at once, so a dead peer never blocks the driver — the core's timers resend.

A failure says whether the peer ended it (``closed_by_peer``): CLOSED, the peer closed a
connection it had served (end of stream, reset), or REFUSED, it refused a new one (nothing
accepts connections at its address, or the connection was reset before ApiVersions was
answered). A crashed process does both, and the driver tells the core at once (RaftCore.
handle_leader_disconnect). A timeout, a backoff or a bad answer is neither: a partition is only
ever noticed by the core's timers.

Two channels per peer: "raft" for the quorum RPCs and "admin" for voter changes and
ApiVersions probes. A server handles one connection's requests in order (protocol/net.py), so an
AddRaftVoter that waits for this replica to catch up must not queue its Fetches behind it.
"""
from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any

from protocol import messages as M
from protocol.client import ClientSecurity, ConnectionClosedByPeer, KafkaConnection
from protocol.types import ProtocolError

from .wire import API_VERSIONS, VERSIONS, kraft_version_range

log = logging.getLogger("strom.raft")

API_VERSIONS_VERSION = 3  # the first with supported_features
MAX_RECONNECT_BACKOFF_MS = 1000
RAFT, ADMIN = "raft", "admin"

# What a broken connection, a timeout or a bad answer raise from a request.
REQUEST_FAILURES = (ConnectionError, OSError, TimeoutError, asyncio.TimeoutError, ProtocolError, ValueError)


CLOSED, REFUSED = "closed", "refused"


class PeerUnavailable(ConnectionError):
    """Not connected and backing off, the connect or ApiVersions failed, or no common version."""

    def __init__(self, message: str, closed_by_peer: str | None = None) -> None:
        super().__init__(message)
        self.closed_by_peer = closed_by_peer


def closed_by_peer(error: BaseException) -> str | None:
    """REFUSED or CLOSED if the peer ended the connection, None for a timeout, a backoff or a
    failure of our own."""
    if isinstance(error, PeerUnavailable):
        return error.closed_by_peer
    if isinstance(error, ConnectionRefusedError):
        return REFUSED
    if isinstance(error, ConnectionClosedByPeer | ConnectionResetError | BrokenPipeError):
        return CLOSED
    return None


@dataclass
class PeerInfo:
    api_versions: dict[int, tuple[int, int]]
    kraft_versions: tuple[int, int]


def pick_version(api_key: int, peer: dict[int, tuple[int, int]]) -> int | None:
    lo, hi = VERSIONS[api_key]
    theirs = peer.get(api_key)
    if theirs is None or theirs[1] < lo or theirs[0] > hi:
        return None
    return min(hi, theirs[1])


class Peer:
    def __init__(self, host: str, port: int, client_id: str, connect_timeout_ms: int, retry_backoff_ms: int,
                 security: ClientSecurity | None = None):
        self.host, self.port, self.client_id = host, port, client_id
        self.security = security
        self.connect_timeout_ms = connect_timeout_ms
        self.retry_backoff_ms = max(1, retry_backoff_ms)
        self._conn: KafkaConnection | None = None
        self._info: PeerInfo | None = None
        self._connecting: asyncio.Future | None = None
        self._backoff_ms = 0
        self._attempted = 0.0  # loop time of the last connect attempt
        self._next_attempt = 0.0  # loop time

    async def connection(self) -> tuple[KafkaConnection, PeerInfo]:
        if self._conn is not None and self._conn.connected:
            return self._conn, self._info
        if self._connecting is None:
            loop = asyncio.get_running_loop()
            if loop.time() < self._next_attempt:
                raise PeerUnavailable(f"{self.host}:{self.port}: backing off")
            self._attempted = loop.time()
            self._connecting = loop.create_task(self._connect())
        return await asyncio.shield(self._connecting)

    async def _connect(self) -> tuple[KafkaConnection, PeerInfo]:
        conn = KafkaConnection(self.host, self.port, self.client_id, security=self.security)
        try:
            timeout = self.connect_timeout_ms / 1000
            await conn.connect(timeout)
            body = M.ApiVersionsRequest(client_software_name="strom", client_software_version="0")
            answer = await conn.request(API_VERSIONS, API_VERSIONS_VERSION, body, timeout)
            if answer.error_code != 0:
                raise PeerUnavailable(f"{self.host}:{self.port}: ApiVersions error {answer.error_code}")
            info = PeerInfo({a.api_key: (a.min_version, a.max_version) for a in answer.api_keys},
                            kraft_version_range(answer))
        except BaseException as e:
            await conn.close()
            self._failed()
            if isinstance(e, REQUEST_FAILURES):
                # Ended by the peer before it answered ApiVersions, the connection was never
                # served: a dying process's port may still complete a handshake, then reset.
                ended = REFUSED if closed_by_peer(e) is not None else None
                raise PeerUnavailable(f"{self.host}:{self.port}: {e}", ended) from None
            raise
        finally:
            self._connecting = None
        self._conn, self._info, self._backoff_ms = conn, info, 0
        return conn, info

    def _failed(self) -> None:
        self._backoff_ms = min(MAX_RECONNECT_BACKOFF_MS, max(self.retry_backoff_ms, self._backoff_ms * 2))
        self._next_attempt = self._attempted + self._backoff_ms / 1000

    async def request(self, api_key: int, version: int, body: Any, timeout_ms: int) -> Any:
        conn, _ = await self.connection()
        try:
            return await conn.request(api_key, version, body, timeout_ms / 1000)
        except REQUEST_FAILURES:
            if self._conn is conn:
                self._conn = None
                self._failed()
            await conn.close()
            raise

    async def close(self) -> None:
        if self._connecting is not None:
            self._connecting.cancel()
            await asyncio.gather(self._connecting, return_exceptions=True)
        if self._conn is not None:
            await self._conn.close()
            self._conn = None


class Peers:
    """The connection pool: a Peer per (host, port, channel)."""

    def __init__(self, client_id: str, connect_timeout_ms: int, retry_backoff_ms: int,
                 security: ClientSecurity | None = None):
        self.client_id = client_id
        self.security = security
        self.connect_timeout_ms = connect_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self._peers: dict[tuple[str, int, str], Peer] = {}

    def get(self, host: str, port: int, channel: str = RAFT) -> Peer:
        key = (host, port, channel)
        peer = self._peers.get(key)
        if peer is None:
            peer = self._peers[key] = Peer(host, port, self.client_id, self.connect_timeout_ms,
                                           self.retry_backoff_ms, self.security)
        return peer

    async def close(self) -> None:
        peers, self._peers = list(self._peers.values()), {}
        await asyncio.gather(*(p.close() for p in peers), return_exceptions=True)
