"""One connection per broker on the inter-broker listener, shared by the coordinator's callers
(the marker channel's senders, a partition leader's verifications). A connection being made is
one pending task per broker that every caller awaits, so two callers never open two (one of
which nobody would close); a dropped connection is closed in a task of its own, which
``close`` waits for and nothing cancels."""
from __future__ import annotations

import asyncio
from typing import Any

from protocol.client import ClientSecurity, KafkaConnection

CONNECT_TIMEOUT_S = 5.0


class Connections:
    def __init__(self, brokers: Any, client_id: str, security: ClientSecurity | None = None):
        self.brokers = brokers  # endpoint_of(node) -> (host, port, ...) or None
        self.client_id = client_id
        self.security = security  # the inter-broker listener's (TLS, SASL)
        self.held: dict[int, tuple[tuple[str, int], KafkaConnection]] = {}
        self._connecting: dict[int, tuple[tuple[str, int], asyncio.Task]] = {}
        self._closing: set[asyncio.Task] = set()

    async def get(self, node: int) -> KafkaConnection:
        """The connection to ``node`` at its current endpoint, made once for all callers;
        raises ConnectionError (or TimeoutError, OSError) when it cannot be made."""
        endpoint = self.brokers.endpoint_of(node)
        if endpoint is None:
            raise ConnectionError(f"broker {node} has no known endpoint")
        endpoint = (endpoint[0], endpoint[1])
        held = self.held.get(node)
        if held is not None and held[0] == endpoint and held[1].connected:
            return held[1]
        pending = self._connecting.get(node)
        if pending is None or pending[0] != endpoint:
            self.drop(node)
            task = asyncio.get_running_loop().create_task(self._connect(node, endpoint))
            pending = self._connecting[node] = (endpoint, task)
        # a caller given up on (cancelled) leaves the connection being made for the others
        return await asyncio.shield(pending[1])

    async def _connect(self, node: int, endpoint: tuple[str, int]) -> KafkaConnection:
        conn = KafkaConnection(endpoint[0], endpoint[1], self.client_id, security=self.security)
        try:
            await conn.connect(CONNECT_TIMEOUT_S)
        except BaseException:
            await conn.close()
            raise
        finally:
            if self._connecting.get(node, (None, None))[1] is asyncio.current_task():
                del self._connecting[node]
        self.held[node] = (endpoint, conn)
        return conn

    def drop(self, node: int) -> None:
        """Forget the connection to ``node`` (it failed) and close it."""
        held = self.held.pop(node, None)
        if held is not None:
            task = asyncio.get_running_loop().create_task(held[1].close())
            self._closing.add(task)
            task.add_done_callback(self._closing.discard)

    async def close(self) -> None:
        """Close every connection, those being made included."""
        connecting = [task for _, task in self._connecting.values()]
        for task in connecting:
            task.cancel()
        await asyncio.gather(*connecting, return_exceptions=True)
        self._connecting.clear()
        for node in list(self.held):
            self.drop(node)
        await asyncio.gather(*self._closing, return_exceptions=True)
