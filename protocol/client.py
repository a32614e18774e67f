"""A minimal asyncio Kafka protocol client: one connection, pipelined requests matched
to responses by correlation id. Used between Strom's processes (the replica fetcher, KRaft
peers, broker -> controller, the CLI) and by tests.

Theory of operation. ``request`` encodes a request frame, registers a future under a fresh
correlation id and writes the frame; responses may come back in any order. The connection
is an asyncio BufferedProtocol fed through protocol.net's FrameReader, as the server's
connections are: the event loop receives straight into the reader's buffer, and a response
larger than that buffer (a replica fetch of up to replica.fetch.response.max.bytes) gets a
bytearray of its own that the loop fills in place, so its record bytes are received once
and never moved (a StreamReader extends its buffer, copies each frame out and shifts the
rest down, and pauses and resumes the socket every 128 KiB: a quarter or more of a
follower's CPU). The loop's read callback only splits frames and matches them to futures;
the requesting task decodes its own response, so a request that timed out costs nothing.

Frames (Kafka's, see protocol.headers):

| field          | type   | meaning                                                   |
|----------------|--------|-----------------------------------------------------------|
| size           | int32  | bytes that follow; a negative size is a malformed stream  |
| correlation_id | int32  | the request's, echoed: the one thing matched here         |
| header tags    | tagged | flexible response versions only (read_response_header)    |
| body           | ...    | decoded with the request's api key and version            |

Each response frame is its own bytearray (FrameReader copies a small one out of the shared
buffer, receives a large one into its own), so decoded ``records`` fields, which are views
of the frame, stay valid for as long as anyone holds them. They are read-only views, as
they were when frames were bytes.

A receive buffer size other than -1 (the replica fetcher's replica.socket.receive.buffer.bytes)
is set on the socket before it connects, as Kafka's Selector does, so that the window scale it
announces in the handshake fits the buffer.

How a connection ends decides what its pending requests raise, and raft.peers tells the two
apart (a crashed leader must be noticed at once, a partition only by timers):

| cause                                      | pending requests and later ones raise        |
|--------------------------------------------|----------------------------------------------|
| end of stream, reset or broken pipe        | ConnectionClosedByPeer                        |
| any other socket error, a malformed frame  | ConnectionError ("... lost: ...")             |
| close()                                    | ConnectionError ("connection closed")         |
| no answer within ``timeout``               | TimeoutError (that request only)              |
| an answer that does not decode             | its decoding error (that request only)        |

Security (``ClientSecurity``): a connection to an SSL or SASL_SSL listener is wrapped in TLS by
the event loop (``ssl_context``, checking the peer's name against ``server_hostname``, else the
host connected to, when the context checks host names); then ``authenticate(conn)`` runs (a SASL
exchange, security/sasl) before ``connect()`` returns, so no caller ever sends on a connection
that has not authenticated. A refused handshake or authentication raises ConnectionError.
"""
from __future__ import annotations

import asyncio
import itertools
import socket
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from protocol.headers import decode_response, encode_request, read_response_header
from protocol.net import USE_DEFAULT_BUFFER_SIZE, FrameReader, FrameTooLarge
from protocol.types import Reader

# Any size an int32 prefix can declare: as in Kafka's clients, a response is not capped here
# (the request's max_bytes bounds it); only a negative size is malformed.
MAX_RESPONSE_BYTES = (1 << 31) - 1
# What the peer did when the socket reports these: it reset the connection or stopped reading.
PEER_ENDED = (ConnectionResetError, BrokenPipeError)


class ConnectionClosedByPeer(ConnectionError):
    """The peer ended the connection (end of stream or reset): not a timeout or a local close."""


async def listener_refuses(host: str, port: int, timeout: float) -> bool:
    """Does ``host:port`` refuse a connection? True means nothing listens there: after a peer
    closed its connection to us, its process is gone (a live one, or one behind a partition or
    too busy to accept in ``timeout``, answers False). The connection, if made, is closed."""
    try:
        async with asyncio.timeout(timeout):
            _, writer = await asyncio.open_connection(host, port)
    except ConnectionRefusedError:
        return True
    except (OSError, TimeoutError):
        return False
    writer.close()
    return False


async def _connected_socket(loop: asyncio.AbstractEventLoop, host: str, port: int,
                            receive_buffer_bytes: int) -> socket.socket:
    """A socket connected to the first address of ``host`` that accepts, with SO_RCVBUF set
    before it connects. Every address failing raises the first one's error (a refusal stays a
    ConnectionRefusedError: the replica fetcher tells a dead leader by it)."""
    errors: list[OSError] = []
    for family, kind, proto, _, address in await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM):
        sock = socket.socket(family, kind, proto)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer_bytes)
            sock.setblocking(False)
            await loop.sock_connect(sock, address)
            return sock
        except OSError as e:
            sock.close()
            errors.append(e)
        except BaseException:
            sock.close()
            raise
    raise errors[0] if errors else OSError(f"no address for {host}")


def _time_out(fut: asyncio.Future, timeout: float) -> None:
    if not fut.done():
        fut.set_exception(TimeoutError(f"no answer in {timeout:g} s"))


@dataclass(frozen=True)
class ClientSecurity:
    """How a connection secures itself (see the module doc): TLS with ``ssl_context`` (None:
    plaintext), then ``authenticate`` (None: nothing to authenticate)."""
    ssl_context: ssl.SSLContext | None = None
    server_hostname: str | None = None
    authenticate: Callable[[KafkaConnection], Awaitable[None]] | None = None


PLAINTEXT_SECURITY = ClientSecurity()


class KafkaConnection(asyncio.BufferedProtocol):
    """One connection to ``host:port``. It connects once: a caller that wants to reconnect
    makes a new one (losing a connection fails its requests, which must be resent anyway)."""

    def __init__(self, host: str, port: int, client_id: str = "strom",
                 receive_buffer_bytes: int = USE_DEFAULT_BUFFER_SIZE,
                 security: ClientSecurity | None = None):
        self.host, self.port, self.client_id = host, port, client_id
        self.receive_buffer_bytes = receive_buffer_bytes  # SO_RCVBUF; -1: the OS default
        self.security = security or PLAINTEXT_SECURITY
        self._transport: asyncio.Transport | None = None
        self._frames = FrameReader(MAX_RESPONSE_BYTES)
        self._pending: dict[int, asyncio.Future] = {}  # correlation id -> the response frame
        self._ids = itertools.count(1)
        self._writable = asyncio.Event()  # clear while the transport's write buffer is full
        self._writable.set()
        # Why the connection ended (see the table above); None while it lives. Set once: the
        # first cause wins (an end of stream, then the transport's close, is still the peer's).
        self._ended: ConnectionError | None = None

    async def connect(self, timeout: float = 5.0) -> None:
        if self._transport is not None:
            raise RuntimeError(f"already connected to {self.host}:{self.port}; make a new KafkaConnection")
        loop = asyncio.get_running_loop()
        security = self.security
        tls: dict[str, Any] = {}
        if security.ssl_context is not None:
            tls = {"ssl": security.ssl_context,
                   "server_hostname": security.server_hostname or self.host,
                   "ssl_handshake_timeout": timeout}
        try:
            async with asyncio.timeout(timeout):
                if self.receive_buffer_bytes == USE_DEFAULT_BUFFER_SIZE:
                    await loop.create_connection(lambda: self, self.host, self.port, **tls)
                else:
                    sock = await _connected_socket(loop, self.host, self.port, self.receive_buffer_bytes)
                    await loop.create_connection(lambda: self, sock=sock, **tls)
                if security.authenticate is not None:
                    await security.authenticate(self)
        except ssl.SSLError as e:  # an OSError, but not one a caller should take for a refusal
            await self.close()
            raise ConnectionError(f"TLS handshake with {self.host}:{self.port} failed: {e}") from e
        except BaseException:
            await self.close()
            raise

    @property
    def connected(self) -> bool:
        return self._transport is not None and self._ended is None and not self._transport.is_closing()

    async def request(self, api_key: int, version: int, body: Any, timeout: float = 30.0) -> Any:
        if not self.connected:
            raise ConnectionError(f"not connected to {self.host}:{self.port}")
        correlation_id = next(self._ids) & 0x7FFFFFFF
        frame = encode_request(api_key, version, correlation_id, self.client_id, body)
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        self._pending[correlation_id] = fut
        # The timeout fails the answer's future: a timer, not asyncio.timeout's per-call
        # cancel scope (a replica fetcher sends thousands of requests a second).
        timer = loop.call_later(timeout, _time_out, fut, timeout)
        try:
            self._transport.write(frame)
            if not self._writable.is_set():  # the peer reads slower than we write
                writable = loop.create_task(self._writable.wait())
                try:
                    await asyncio.wait({writable, fut}, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    writable.cancel()
            frame = await fut
        finally:
            timer.cancel()
            self._pending.pop(correlation_id, None)  # timed out or cancelled: drop its answer
        r = Reader(memoryview(frame).toreadonly())
        read_response_header(r, api_key, version)
        return decode_response(api_key, version, r)

    async def close(self) -> None:
        if self._transport is not None:
            self._end(ConnectionError("connection closed"))
            self._transport.close()

    def _end(self, error: ConnectionError) -> None:
        """The connection is over: fail every pending request with ``error``."""
        if self._ended is None:
            self._ended = error
        pending, self._pending = self._pending, {}
        for fut in pending.values():
            if not fut.done():
                fut.set_exception(self._ended)
        self._writable.set()  # a request waiting to write finds its future failed

    # ---- the event loop's side (asyncio.BufferedProtocol) ------------------------------------

    def connection_made(self, transport) -> None:
        self._transport = transport
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._frames.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        try:
            frames = self._frames.updated(nbytes)
        except FrameTooLarge:
            self._end(ConnectionError(f"connection to {self.host}:{self.port} lost: a response frame "
                                      "declares a negative size"))
            self._transport.abort()
            return
        for frame in frames:
            # A frame answering a request that timed out or was never sent (or too short to say
            # which) matches nothing and is dropped.
            if len(frame) < 4:
                continue
            fut = self._pending.pop(int.from_bytes(frame[:4], "big", signed=True), None)
            if fut is not None and not fut.done():
                fut.set_result(frame)

    def eof_received(self) -> bool:
        self._end(ConnectionClosedByPeer(f"connection to {self.host}:{self.port} closed by the peer: "
                                         "end of stream"))
        return False  # the transport closes itself, then connection_lost

    def connection_lost(self, exc: Exception | None) -> None:
        where = f"{self.host}:{self.port}"
        if isinstance(exc, PEER_ENDED):
            self._end(ConnectionClosedByPeer(f"connection to {where} closed by the peer: {exc}"))
        elif exc is not None:
            self._end(ConnectionError(f"connection to {where} lost: {exc}"))
        else:  # after eof_received, close() or abort(), which said why; else the loop closed it
            self._end(ConnectionError("connection closed"))

    def pause_writing(self) -> None:
        self._writable.clear()

    def resume_writing(self) -> None:
        self._writable.set()
