"""broker/transactions/connections.py: one connection per broker, whoever asks at the same
time, and every connection closed by ``close``, those dropped just before it included."""
from __future__ import annotations

import asyncio
from types import SimpleNamespace

from broker.transactions.connections import Connections
from protocol.dispatch import Dispatcher
from protocol.net import Server


def test_callers_at_the_same_time_share_one_connection_and_close_ends_every_one():
    async def scenario():
        server = Server(Dispatcher([]).handle, 1 << 20)
        port = server.bind("127.0.0.1", 0)
        server.start()
        connections = Connections(SimpleNamespace(endpoint_of=lambda node: ("127.0.0.1", port)), "test")
        try:
            first, second = await asyncio.gather(connections.get(2), connections.get(2))
            assert first is second and first.connected
            connections.drop(2)  # failed: closed in a task of its own
            third = await connections.get(2)
            assert third is not first and third.connected
            await connections.close()
            await asyncio.sleep(0)
            assert not first.connected and not third.connected
            assert connections.held == {}
        finally:
            await server.close()
    asyncio.run(scenario())
