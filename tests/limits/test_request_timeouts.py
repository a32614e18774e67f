"""Requests toward other brokers and controllers have a bounded timeout: each is tried against a
peer that accepts the connection, reads everything and never answers (and one that answers
ApiVersions, then nothing), on 127.0.0.1.

| who                                  | timeout                                               |
|--------------------------------------|-------------------------------------------------------|
| protocol.client.KafkaConnection      | the caller's ``timeout`` (30 s by default)            |
| replica fetcher: connect, ApiVersions, | replica.socket.timeout.ms (30 s)                    |
| Fetch, ListOffsets                   |                                                       |
| raft outbound (raft.peers)           | controller.quorum.request.timeout.ms (+ a Fetch's max wait) |
| broker -> controller: registration,  | controller.socket.timeout.ms a request (a heartbeat:  |
| heartbeat, AlterPartition, forwarding | at most half broker.session.timeout.ms), or until the |
|                                      | raft leader changes; forwarding 30 s in all           |
"""
from __future__ import annotations

import asyncio
import os

import pytest

from broker.metadata_follower import MetadataFollower
from engine.config import LogConfig
from engine.log import Log
from protocol import messages as M
from protocol.client import KafkaConnection
from protocol.dispatch import Api, Dispatcher
from protocol.net import Server
from raft import messages as rm
from raft.driver import RaftDriverConfig
from raft.outbound import request_timeout_ms
from raft.peers import Peer, PeerUnavailable
from raft.quorum_state import QuorumConfig
from raft.voters import static_voter_set
from replication.fetcher import FetcherConfig, FollowerPartition, ReplicaFetcherManager

TEST_TIMEOUT_S = 20
LOCAL, LEADER = 2, 1


def run(scenario):
    asyncio.run(asyncio.wait_for(scenario(), TEST_TIMEOUT_S))


class SilentPeer:
    """Accepts, reads and discards everything, never writes."""

    def __init__(self):
        self.connections = 0
        self.bytes = 0

    async def start(self) -> int:
        async def serve(reader, writer):
            self.connections += 1
            while data := await reader.read(65536):
                self.bytes += len(data)
            writer.close()
        self.server = await asyncio.start_server(serve, "127.0.0.1", 0)
        return self.server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        self.server.close()


class AnswersOnlyApiVersions:
    """A Kafka listener that answers ApiVersions and holds every other request forever."""

    def __init__(self, keys: dict[int, tuple[int, int]]):
        self.held = 0

        async def hold(header, request):
            self.held += 1
            await asyncio.Event().wait()
        self.server = Server(Dispatcher([Api(k, lo, hi, hold) for k, (lo, hi) in keys.items()]).handle,
                             1 << 20)

    async def start(self) -> int:
        port = self.server.bind("127.0.0.1", 0)
        self.server.start()
        return port

    @property
    def connections(self) -> int:
        return len(self.server.connections)

    async def stop(self) -> None:
        await self.server.close()


async def eventually(predicate, what: str, timeout: float = 8.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


def test_a_request_to_a_peer_that_never_answers_times_out():
    async def scenario():
        peer = SilentPeer()
        port = await peer.start()
        conn = KafkaConnection("127.0.0.1", port)
        await conn.connect(2)
        with pytest.raises(TimeoutError):
            await conn.request(18, 3, M.ApiVersionsRequest(client_software_name="t",
                                                           client_software_version="0"), timeout=0.3)
        assert peer.bytes > 0, "the request was sent and read"
        await conn.close()
        await peer.stop()
    run(scenario)


def test_a_raft_peer_that_never_answers_api_versions_is_unavailable_after_the_request_timeout():
    async def scenario():
        silent = SilentPeer()
        port = await silent.start()
        peer = Peer("127.0.0.1", port, "raft-1", connect_timeout_ms=300, retry_backoff_ms=20)
        with pytest.raises(PeerUnavailable):
            await peer.request(55, 0, M.DescribeQuorumRequest(topics=[]), timeout_ms=300)
        await peer.close()
        await silent.stop()
    run(scenario)


def test_a_raft_request_that_is_never_answered_times_out():
    async def scenario():
        quiet = AnswersOnlyApiVersions({55: (0, 2)})
        port = await quiet.start()
        peer = Peer("127.0.0.1", port, "raft-1", connect_timeout_ms=300, retry_backoff_ms=20)
        with pytest.raises(TimeoutError):
            await peer.request(55, 0, M.DescribeQuorumRequest(topics=[]), timeout_ms=300)
        assert quiet.held == 1
        await peer.close()
        await quiet.stop()
    run(scenario)


class Quorum:
    request_timeout_ms = 2000  # controller.quorum.request.timeout.ms


@pytest.mark.parametrize("message,bound_ms", [
    (rm.VoteRequest(replica_id=1, replica_epoch=3, last_offset_epoch=2, last_offset=10, pre_vote=True,
                    voter_id=2), 2000),
    (rm.FetchRequest(replica_id=2, current_leader_epoch=3, fetch_offset=10, last_fetched_epoch=3,
                     high_watermark=9, max_wait_ms=500), 2500),
])
def test_every_raft_request_has_a_bounded_timeout(message, bound_ms):
    assert request_timeout_ms(Quorum, message) == bound_ms


def follower(tmp_path, port: int, request_timeout_ms: int) -> ReplicaFetcherManager:
    config = FetcherConfig(fetch_wait_max_ms=100, backoff_ms=50, request_timeout_ms=request_timeout_ms)
    manager = ReplicaFetcherManager(LOCAL, lambda: 7, lambda b: ("127.0.0.1", port) if b == LEADER else None,
                                    config, lambda t, p: None)
    log = Log(os.path.join(tmp_path, "t-0"), LogConfig(segment_bytes=4096))
    manager.add_partitions({("t", 0): FollowerPartition(b"\x0a" * 16, LEADER, 1, log)})
    return manager


def test_the_replica_fetcher_gives_up_on_a_silent_leader_after_replica_socket_timeout_ms(tmp_path):
    async def scenario():
        silent = SilentPeer()
        port = await silent.start()
        manager = follower(tmp_path, port, request_timeout_ms=300)
        await eventually(lambda: silent.connections >= 3,
                         "the fetcher to time out its ApiVersions and connect again, twice")
        await manager.close()
        await silent.stop()
    run(scenario)


def test_the_replica_fetcher_times_out_a_fetch_that_is_never_answered(tmp_path):
    async def scenario():
        quiet = AnswersOnlyApiVersions({1: (4, 18), 2: (1, 8)})
        port = await quiet.start()
        manager = follower(tmp_path, port, request_timeout_ms=300)
        await eventually(lambda: quiet.held >= 3, "the fetcher to send its request again after timeouts")
        await manager.close()
        await quiet.stop()
    run(scenario)


class FollowerOfSilentController(MetadataFollower):
    """A broker's MetadataFollower whose active controller is a listener that never answers
    (the raft leader is not looked up: this test is about what happens after connecting)."""

    def __init__(self, port: int, request_timeout_ms: int):
        voters = static_voter_set({1: ("127.0.0.1", port)})
        config = RaftDriverConfig(11, "timeouts", voters, (), None, (), QuorumConfig(), observer=True)
        super().__init__(11, "timeouts", config, [], None, lambda image: None,
                         request_timeout_ms=request_timeout_ms)
        self.port = port

    async def _connection(self) -> KafkaConnection:
        if self._conn is None or not self._conn.connected:
            self._conn = KafkaConnection("127.0.0.1", self.port)
            await self._conn.connect(2)
        return self._conn


HEARTBEAT = M.BrokerHeartbeatRequest(broker_id=11, broker_epoch=1, current_metadata_offset=0)


def test_a_request_to_the_controller_is_sent_again_after_controller_socket_timeout_ms():
    async def scenario():
        silent = SilentPeer()
        port = await silent.start()
        follower = FollowerOfSilentController(port, request_timeout_ms=200)
        with pytest.raises(TimeoutError):
            await follower._send(63, 1, HEARTBEAT, timeout=1.5)
        assert silent.connections >= 3, "each try timed out after 200 ms and went on a new connection"
        await follower._drop_connection()
        await silent.stop()
    run(scenario)


def test_a_request_to_the_controller_is_sent_again_at_once_when_the_raft_leader_changes():
    """An old controller cut off by a partition never answers: the request is not waited for
    to its timeout once the broker learns of a new leader."""
    async def scenario():
        silent = SilentPeer()
        port = await silent.start()
        follower = FollowerOfSilentController(port, request_timeout_ms=60_000)
        sending = asyncio.ensure_future(follower._send(63, 1, HEARTBEAT, timeout=8))
        await eventually(lambda: silent.connections == 1 and silent.bytes > 0, "the first try")
        follower.handle_leader_change(2, 5)
        await eventually(lambda: silent.connections == 2, "the request sent again on a new connection")
        sending.cancel()
        await follower._drop_connection()
        await silent.stop()
    run(scenario)
