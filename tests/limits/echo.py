"""An echo server's handler and its client side, for tests of protocol.net.Server's limits over
real loopback sockets: each frame is answered with itself."""
from __future__ import annotations

import asyncio
import struct


async def echo(frame: memoryview):
    return [struct.pack(">i", len(frame)), bytes(frame)]


def request(tag: bytes) -> bytes:
    """``tag`` as one size-delimited frame (and so its echo's answer)."""
    return struct.pack(">i", len(tag)) + tag


async def served(port: int, tag: bytes = b"ping", timeout: float = 2.0) -> bool:
    """Does a new connection get its request answered within ``timeout``?"""
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
    except OSError:
        return False
    try:
        writer.write(request(tag))
        return await asyncio.wait_for(reader.readexactly(4 + len(tag)), timeout) == request(tag)
    except (TimeoutError, asyncio.IncompleteReadError, ConnectionError):
        return False
    finally:
        writer.close()
