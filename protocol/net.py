"""The Kafka wire at the edge of a process (broker or controller): frames in, parts out.

Three layers (STYLE.md point 2): protocol/ holds the codecs; ``FrameReader`` is the
per-connection state machine that tests feed bytes; ``serve`` is the asyncio shell that
owns sockets. Each connection handles its requests one at a time, in order (a client may
pipeline; responses keep its order, as Kafka's muted channels do). A malformed frame
closes that connection only.

Response parts are bytes, or file slices (engine.segment.FileSlice) sent with sendfile.
"""
from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Awaitable, Callable

log = logging.getLogger(__name__)

Handler = Callable[[memoryview], Awaitable["list | None"]]


class FrameTooLarge(Exception):
    pass


class FrameReader:
    """Splits a byte stream into size-prefixed frames. ``feed`` returns complete frames;
    a declared size above ``max_bytes`` (socket.request.max.bytes) or below zero raises."""

    def __init__(self, max_bytes: int):
        self.max_bytes = max_bytes
        self.buf = bytearray()

    def feed(self, data: bytes | memoryview) -> list[bytearray]:
        self.buf += data
        frames = []
        buf = self.buf
        pos = 0
        while len(buf) - pos >= 4:
            size = int.from_bytes(buf[pos:pos + 4], "big", signed=True)
            if size < 0 or size > self.max_bytes:
                raise FrameTooLarge(f"request of {size} bytes exceeds socket.request.max.bytes "
                                    f"({self.max_bytes})")
            if len(buf) - pos - 4 < size:
                break
            frames.append(buf[pos + 4:pos + 4 + size])  # a writable copy: Produce patches offsets in place
            pos += 4 + size
        if pos:
            del buf[:pos]
        return frames


class _FdFile:
    """The file object asyncio's sock_sendfile wants, over a segment fd we do not own."""

    def __init__(self, fd: int):
        self._fd = fd

    def fileno(self) -> int:
        return self._fd

    def seek(self, *args) -> None:  # asyncio repositions the file after sending; ours is read by offset
        pass


async def send_parts(loop: asyncio.AbstractEventLoop, sock: socket.socket, parts: list) -> None:
    for part in parts:
        if isinstance(part, (bytes, bytearray, memoryview)):
            if part:
                await loop.sock_sendall(sock, part)
        else:
            sent = await loop.sock_sendfile(sock, _FdFile(part.fd), part.position, part.size, fallback=True)
            if sent != part.size:
                raise ConnectionError(f"sendfile sent {sent} of {part.size} bytes")


async def serve_connection(sock: socket.socket, handle: Handler, max_bytes: int,
                           connections: set | None = None) -> None:
    loop = asyncio.get_running_loop()
    reader = FrameReader(max_bytes)
    buf = bytearray(65536)
    peer = sock.getpeername() if sock.family != socket.AF_UNIX else "unix"
    try:
        while True:
            n = await loop.sock_recv_into(sock, buf)
            if n == 0:
                return
            try:
                frames = reader.feed(memoryview(buf)[:n])
            except FrameTooLarge as e:
                log.info("closing connection from %s: %s", peer, e)
                return
            for frame in frames:
                parts = await handle(memoryview(frame))
                if parts is None:
                    return  # the handler asked to close (malformed request)
                if parts:
                    await send_parts(loop, sock, parts)
    except (ConnectionError, OSError) as e:
        log.debug("connection from %s ended: %s", peer, e)
    finally:
        sock.close()


class Server:
    """Accepts connections on listeners and serves each with ``handle``."""

    def __init__(self, handle: Handler, max_bytes: int):
        self.handle = handle
        self.max_bytes = max_bytes
        self.sockets: list[socket.socket] = []
        self.tasks: set[asyncio.Task] = set()
        self._accepting: list[asyncio.Task] = []

    def bind(self, host: str, port: int) -> int:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host or "0.0.0.0", port))
        sock.listen(512)
        sock.setblocking(False)
        self.sockets.append(sock)
        return sock.getsockname()[1]

    def start(self) -> None:
        for sock in self.sockets:
            self._accepting.append(asyncio.get_running_loop().create_task(self._accept(sock)))

    async def _accept(self, listener: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                sock, _ = await loop.sock_accept(listener)
            except OSError as e:  # e.g. out of file descriptors: keep the listener alive
                log.warning("accept failed: %s", e)
                await asyncio.sleep(0.1)
                continue
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            task = loop.create_task(serve_connection(sock, self.handle, self.max_bytes))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)

    async def close(self) -> None:
        for task in self._accepting:
            task.cancel()
        for sock in self.sockets:
            sock.close()
        for task in list(self.tasks):
            task.cancel()
        await asyncio.gather(*self._accepting, *self.tasks, return_exceptions=True)


__all__ = ["FrameReader", "FrameTooLarge", "Server", "send_parts", "serve_connection"]
