"""A minimal asyncio Kafka protocol client: one connection, pipelined requests matched
to responses by correlation id. Used between Strom's processes (broker -> controller) and
by tests."""
from __future__ import annotations

import asyncio
import itertools
from typing import Any

from protocol import messages
from protocol.headers import encode_request, read_response_header
from protocol.types import Reader


class ConnectionClosedByPeer(ConnectionError):
    """The peer ended the connection (end of stream or reset): not a timeout or a local close."""


class KafkaConnection:
    def __init__(self, host: str, port: int, client_id: str = "strom"):
        self.host, self.port, self.client_id = host, port, client_id
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._pending: dict[int, tuple[asyncio.Future, int, int]] = {}
        self._ids = itertools.count(1)
        self._read_task: asyncio.Task | None = None

    async def connect(self, timeout: float = 5.0) -> None:
        async with asyncio.timeout(timeout):
            self._reader, self._writer = await asyncio.open_connection(self.host, self.port)
        self._read_task = asyncio.get_running_loop().create_task(self._read_loop())

    @property
    def connected(self) -> bool:
        return self._writer is not None and not self._writer.is_closing()

    async def _read_loop(self) -> None:
        error: BaseException = ConnectionError("connection closed")
        try:
            while True:
                size = int.from_bytes(await self._reader.readexactly(4), "big")
                frame = await self._reader.readexactly(size)
                r = Reader(frame)
                correlation_id = int.from_bytes(frame[:4], "big", signed=True)
                entry = self._pending.pop(correlation_id, None)
                if entry is None:
                    continue
                fut, api_key, version = entry
                try:
                    read_response_header(r, api_key, version)
                    body = messages.RESPONSES[api_key].decode(version, r)
                except Exception as e:  # a bad response fails only its request
                    if not fut.done():
                        fut.set_exception(e)
                    continue
                if not fut.done():
                    fut.set_result(body)
        except (asyncio.IncompleteReadError, ConnectionResetError) as e:
            error = ConnectionClosedByPeer(f"connection to {self.host}:{self.port} closed by the peer: {e}")
        except (ConnectionError, OSError) as e:
            error = ConnectionError(f"connection to {self.host}:{self.port} lost: {e}")
        finally:
            for fut, _, _ in self._pending.values():
                if not fut.done():
                    fut.set_exception(error)
            self._pending.clear()
            if self._writer is not None:
                self._writer.close()

    async def request(self, api_key: int, version: int, body: Any, timeout: float = 30.0) -> Any:
        if not self.connected:
            raise ConnectionError(f"not connected to {self.host}:{self.port}")
        correlation_id = next(self._ids) & 0x7FFFFFFF
        fut = asyncio.get_running_loop().create_future()
        self._pending[correlation_id] = (fut, api_key, version)
        self._writer.write(encode_request(api_key, version, correlation_id, self.client_id, body))
        await self._writer.drain()
        async with asyncio.timeout(timeout):
            return await fut

    async def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
        if self._read_task is not None:
            self._read_task.cancel()
            await asyncio.gather(self._read_task, return_exceptions=True)
