"""The driver tells a connection the peer closed or refused from a timeout, and acts on it at once.

Real sockets on 127.0.0.1 (the Node of test_driver.py). fetch.timeout.ms is a minute here, so
within these tests' bounds only a closed connection and a refused one can start an election: a
follower whose leader's process dies must elect a successor long before it, and a live leader
that merely drops its followers' connections must keep leading in its epoch.
"""
from __future__ import annotations

import asyncio
import logging
import socket

import pytest

from protocol import messages as M
from protocol.client import ConnectionClosedByPeer, KafkaConnection
from protocol.net import Server
from raft import messages as raft_messages
from raft.peers import API_VERSIONS_VERSION, CLOSED, REFUSED, Peer, PeerUnavailable, closed_by_peer
from raft.quorum_state import Follower
from raft.wire import API_VERSIONS
from tests.raft.test_driver import HOST, Listener, Node, elected, eventually, run, start_voters


async def crash(node: Node) -> None:
    """As kill -9 does: the listener and every connection close, nothing is said first."""
    await node.server.close()
    await node.driver.close(graceful=False)


def all_following(nodes: list[Node], leader: Node) -> bool:
    leader_and_epoch = leader.driver.leader_and_epoch()
    return all(n.driver.leader_and_epoch() == leader_and_epoch and isinstance(n.driver.core.state, Follower)
               and n.driver.core.state.has_fetched for n in nodes if n is not leader)


@pytest.mark.timeout(40)
def test_followers_elect_a_successor_at_once_when_the_leaders_process_dies():
    async def scenario():
        nodes, voters = await start_voters()
        try:
            for _ in range(3):
                old = await elected(nodes)
                epoch = old.driver.leader_and_epoch()[1]
                await eventually(lambda old=old: all_following(nodes, old), 5, "followers fetching")
                await crash(old)
                new = await elected([n for n in nodes if n is not old], timeout=10)  # not a minute
                assert new.driver.leader_and_epoch() == (new.node_id, epoch + 1)
                # The dead one comes back on its log and quorum state, and follows the new leader.
                old.server, old.listener = Server(old._handle, 100 << 20), Listener()
                old.server.bind(HOST, old.port)
                await old.start(voters, seed=old.node_id + 10 * epoch)
                await eventually(lambda new=new: all_following(nodes, new), 5, "the dead one following")
        finally:
            for n in nodes:
                await n.stop(graceful=False)

    run(scenario(), timeout=35)


@pytest.mark.timeout(40)
def test_a_leader_that_drops_its_followers_connections_keeps_leading_in_its_epoch(caplog):
    caplog.set_level(logging.DEBUG, logger="strom.raft")

    async def scenario():
        nodes, _ = await start_voters()
        try:
            leader = await elected(nodes)
            leader_and_epoch = leader.driver.leader_and_epoch()
            followers = [n for n in nodes if n is not leader]
            parked = leader.driver._awaiting  # inbound requests awaiting the core's answer
            for _ in range(5):
                await eventually(lambda: all_following(nodes, leader), 5, "followers fetching")
                # Drop the connections while each follower's Fetch is parked at the leader, so
                # the reset reaches a fetch in flight on every one (a follower between two
                # fetches would only meet it on its next send: its log line differs). Nothing
                # else runs between this check and the aborts below.
                await eventually(lambda: all((f.node_id, raft_messages.FetchResponse) in parked
                                             for f in followers), 5, "every follower's fetch parked")
                caplog.clear()
                dropped = leader.driver.now_ms()
                for conn in list(leader.server.connections):
                    conn.transport.abort()  # a reset, while the process lives on
                replicas = leader.driver.core.state.replicas
                await eventually(lambda dropped=dropped, replicas=replicas: all(
                    replicas[f.node_id].last_fetch_ms > dropped for f in followers), 5, "fetching again")
                messages = [r.getMessage() for r in caplog.records]
                assert sum("closed by the peer" in msg for msg in messages) >= len(followers), messages
                assert not any("became Prospective" in msg for msg in messages), messages
                assert all(n.driver.leader_and_epoch() == leader_and_epoch for n in nodes)
        finally:
            for n in nodes:
                await n.stop(graceful=False)

    run(scenario(), timeout=35)


def test_a_peer_that_closes_or_refuses_is_told_apart_from_a_silent_one():
    async def scenario():
        async def closes(reader, writer):
            await reader.read(4)
            writer.close()

        async def silent(reader, writer):
            await reader.read()

        closing = await asyncio.start_server(closes, HOST, 0)
        quiet = await asyncio.start_server(silent, HOST, 0)
        with socket.socket() as s:
            s.bind((HOST, 0))
            nobody = s.getsockname()[1]  # nothing listens there once it is closed
        try:
            conn = KafkaConnection(HOST, closing.sockets[0].getsockname()[1])
            await conn.connect(1.0)
            body = M.ApiVersionsRequest(client_software_name="strom", client_software_version="0")
            with pytest.raises(ConnectionClosedByPeer):
                await conn.request(API_VERSIONS, API_VERSIONS_VERSION, body, 1.0)
            await conn.close()

            outcomes = {}
            for name, port in (("closes", closing.sockets[0].getsockname()[1]),
                               ("silent", quiet.sockets[0].getsockname()[1]), ("refuses", nobody)):
                peer = Peer(HOST, port, "test", connect_timeout_ms=300, retry_backoff_ms=5_000)
                with pytest.raises(PeerUnavailable) as failed:
                    await peer.connection()
                with pytest.raises(PeerUnavailable) as backing_off:  # a backoff is no evidence
                    await peer.connection()
                outcomes[name] = (closed_by_peer(failed.value), closed_by_peer(backing_off.value))
                await peer.close()
            # Closed before it answered ApiVersions: never served, as good as refused (a dying
            # process's port may still complete a handshake, then reset it).
            assert outcomes == {"closes": (REFUSED, None), "silent": (None, None), "refuses": (REFUSED, None)}
            # A connection it served, then ended (a Fetch's end of stream or reset): closed.
            assert closed_by_peer(ConnectionClosedByPeer("end of stream")) == CLOSED
            assert closed_by_peer(ConnectionResetError()) == CLOSED
            assert closed_by_peer(TimeoutError()) is None
        finally:
            for server in (closing, quiet):
                server.close()

    run(scenario(), timeout=10)
