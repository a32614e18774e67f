"""The Kafka wire at the edge of a process (broker or controller): frames in, parts out.

Three layers (STYLE.md point 2): protocol/ holds the codecs; ``FrameReader`` is the
per-connection state machine that tests feed bytes; ``Server`` is the asyncio shell that
owns sockets. Each connection handles its requests one at a time, in order (a client may
pipeline; responses keep its order, as Kafka's muted channels do), except that a handler
answering ``Deferred`` (a produce waiting for replication after its appends) lets the next
produce requests in while it waits: answers still leave in request order, through a queue
that a writer task drains (at most ``QUEUED_FRAMES_MAX`` waiting). Any other request waits
until the answers before it are sent, as on Kafka's muted channel, so what it answers is the
state after them: a Metadata request behind produces that wait for a dead follower to
leave the ISR names the leaders the controller chose since, not those of the moment it
arrived. A malformed frame closes that connection only.

Bytes are copied as little as the kernel allows. A connection is an asyncio
BufferedProtocol: the event loop receives straight into the FrameReader's buffer, and a
frame larger than that buffer (a produce request of a megabyte) gets a buffer of its own
that the loop fills directly, so its record bytes are received once and never moved
again (Produce validates and patches them in place). Response parts are bytes, or file
slices (engine.segment.FileSlice): slices of at least ``SENDFILE_MIN_BYTES`` go out with
sendfile (page cache to socket, no copy through Python), straight away while the socket
takes them and through the event loop for the rest; smaller ones are read with one pread
and written with the bytes around them in one send. A replica fetcher's slices (what the
leader appended since its last fetch, tens to hundreds of KiB) all take the first path: no
buffer is allocated, filled and joined per fetch.

Limits (protocol/limits.py, Kafka's socket server quotas): a Server's connections share one
memory pool for the bytes of requests received and not yet handled (queued.max.request.bytes:
a connection that needs more stops reading until a handler releases some), and the Server
enforces max.connections, max.connections.per.ip, max.connection.creation.rate and
connections.max.idle.ms on all of its listeners, and each listener's own max.connections and
creation rate (the inter-broker listener exempt from the broker-wide ones: protocol/limits.py);
while more connections are open than max.connections, it closes the least recently used on the
listeners that are not protected (``_close_excess``).
Frames are split by protocol.frames.FrameReader.

Socket buffers, as Kafka's SocketServer sets them (-1: the OS default, which autotunes): the
receive buffer (socket.receive.buffer.bytes) goes on each listening socket before it binds, so
that accepted connections inherit it and the window scale they announce in the handshake fits
it (set on an accepted socket it would come too late for that); the send buffer
(socket.send.buffer.bytes) goes on each accepted connection.

A handler learns the connection its request came on from ``current_connection`` (each
connection's requests run in that connection's task, so the context variable is its own),
and may ask to hear of its close (``add_close_callback``): the active controller fences a
broker whose heartbeat connection closes. Each connection has a ``Session``
(protocol/context.py: the listener name its socket was bound with, its security protocol, the
client's address, the principal); its task sets protocol.context.current_session, which the
Dispatcher hands to each request's handler in its RequestContext.

TLS (SSL and SASL_SSL listeners): a listener bound with an ``ssl.SSLContext`` wraps each accepted
connection in asyncio's SSL transport, which feeds the same BufferedProtocol (decrypted bytes
land in the FrameReader's buffer as before). The handshake runs in a task of its own, so a slow
or silent client never holds up the accept loop; one that fails (an untrusted or expired
certificate, no certificate where ssl.client.auth=required, not TLS at all) closes that
connection with one info line. Once it succeeds the session's principal is the one the
listener's ``principal`` names from the peer certificate (security/tls.py). Nothing written to a
TLS connection may bypass the transport, so file slices are never sent with sendfile there:
they are read (``TLS_READ_BYTES`` at a time) and written through it. Kernel TLS, which would let
sendfile encrypt in the kernel, needs the kernel's ``tls`` module and an SSL socket, not the
memory BIO asyncio drives.
"""
from __future__ import annotations

import asyncio
import asyncio.sslproto
import collections
import contextlib
import contextvars
import functools
import gc
import logging
import os
import socket
import ssl
from collections.abc import Awaitable, Callable

from protocol.context import PLAINTEXT, KafkaPrincipal, Session, current_session
from protocol.dispatch import Deferred
from protocol.frames import BUFFER_BYTES, FrameReader
from protocol.limits import (
    ConnectionQuotas,
    FrameTooLarge,
    IdleTracker,
    ListenerLimits,
    MemoryPool,
    least_recently_used,
)

log = logging.getLogger(__name__)

Handler = Callable[[memoryview], Awaitable["list | None"]]

SENDFILE_MIN_BYTES = 16 * 1024
QUEUED_FRAMES_MAX = 64  # per connection: reading pauses beyond this many unhandled requests
PIPELINED = frozenset({0})  # Produce: handled while the answers before it wait (see above)
WRITE_BUFFER_HIGH = 4 << 20  # a slow reader's responses are waited for beyond this
USE_DEFAULT_BUFFER_SIZE = -1  # a socket buffer size that leaves the OS's (Kafka's Selectable)
TLS_READ_BYTES = 1 << 20  # a file slice goes through a TLS transport this much at a time
SSL_HANDSHAKE_TIMEOUT_S = 10.0

# How a TLS listener names a connection's principal from its SSL object (security/tls.py).
PrincipalOf = Callable[[ssl.SSLObject | None], KafkaPrincipal]


class _FdFile:
    """The file object asyncio's sendfile wants, over a segment fd we do not own."""

    def __init__(self, fd: int):
        self._fd = fd

    def fileno(self) -> int:
        return self._fd

    def seek(self, *args) -> None:  # asyncio repositions the file after sending; ours is read by offset
        pass


class _AlertingSSLProtocol(asyncio.sslproto.SSLProtocol):
    """asyncio's SSL protocol, except that a failed handshake sends the alert OpenSSL wrote (an
    unknown CA, an expired certificate, no certificate where one is required) before the
    connection closes. asyncio's drops it, and the client then sees only a closed connection
    (librdkafka: "SSL connection closed by peer"), not that its certificate was refused."""

    def _on_handshake_complete(self, handshake_exc):
        if handshake_exc is not None:
            with contextlib.suppress(Exception):
                alert = self._outgoing.read()
                if alert:
                    self._transport.write(alert)
        super()._on_handshake_complete(handshake_exc)


current_connection: contextvars.ContextVar[_Connection | None] = contextvars.ContextVar(
    "current_connection", default=None)


class _Connection(asyncio.BufferedProtocol):
    """One client connection: frames are queued as they arrive and handled in order by
    one task; reading pauses while too many wait, writing waits while the peer is slow."""

    def __init__(self, server: Server, ip: str, listener_name: str | None = None,
                 security_protocol: str = PLAINTEXT, principal: PrincipalOf | None = None):
        self.server = server
        self.ip = ip  # counted in the server's ConnectionQuotas until connection_lost
        self.listener_name = listener_name  # of the listening socket that accepted it
        self.session = Session(listener_name, security_protocol, client_address=ip)
        self.principal_of = principal  # a TLS listener's: the principal from the peer certificate
        self.tls = False  # file slices go through the transport, never sendfile
        self.reader = FrameReader(server.max_bytes, pool=server.pool)
        self.reader.on_resume = self._resume_split
        self.frames: collections.deque[bytearray] = collections.deque()
        self.handling = 0  # bytes of the frame taken off ``frames`` and not yet released
        self.transport: asyncio.Transport | None = None
        self.peer = None
        self.closed = False
        self.paused_reading = False  # too many queued frames (the reader's ``blocked``: no memory)
        # When the last request was taken up (or the last answers that waited were sent):
        # connections.max.idle.ms counts from it and excess connections are closed oldest first
        # (protocol.limits).
        self.last_active_ms = server.now_ms()
        self._wakeup: asyncio.Future | None = None
        self._drained: asyncio.Future | None = None
        self.task: asyncio.Task | None = None
        # Answers not yet sent, in request order, while a deferred one waits: futures of parts.
        self._later: collections.deque[asyncio.Future] = collections.deque()
        self._writer: asyncio.Task | None = None
        self._close_callbacks: list[Callable[[], None]] | None = []  # None once lost

    def add_close_callback(self, callback: Callable[[], None]) -> None:
        """Call ``callback()`` once the connection is lost (soon, if it already is)."""
        if self._close_callbacks is None:
            asyncio.get_running_loop().call_soon(callback)
        else:
            self._close_callbacks.append(callback)

    # ---- the event loop's side -------------------------------------------------------

    def connection_made(self, transport) -> None:
        self.transport = transport
        self.peer = transport.get_extra_info("peername")
        ssl_object = transport.get_extra_info("ssl_object")
        if ssl_object is not None:  # the TLS handshake is done
            self.tls = True
            if self.principal_of is not None:
                try:
                    self.session.principal = self.principal_of(ssl_object)
                except ValueError as e:  # no ssl.principal.mapping.rules rule applies
                    log.info("closing TLS connection from %s: %s", self.peer, e)
                    self.closed = True
                    transport.close()
                    return
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            # As Kafka's Acceptor: TCP itself finds a peer whose host is gone, not only
            # connections.max.idle.ms.
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        self.task = asyncio.get_running_loop().create_task(self._serve())
        self.server.connections.add(self)

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.reader.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        try:
            frames = self.reader.updated(nbytes)
        except FrameTooLarge as e:
            log.info("closing connection from %s: %s", self.peer, e)
            self._close()
            return
        if frames:
            self.frames.extend(frames)
            if len(self.frames) >= QUEUED_FRAMES_MAX and not self.paused_reading:
                self.paused_reading = True
                self.transport.pause_reading()
            self._wake()
        if self.reader.blocked:  # queued.max.request.bytes is used up: read on once it is not
            self.transport.pause_reading()

    def _resume_split(self) -> None:
        """The memory pool has room for the frame this connection waits with: split on."""
        if self.closed:
            return
        self.buffer_updated(0)
        if not self.reader.blocked and not self.paused_reading and not self.closed:
            self.transport.resume_reading()

    @property
    def waiting(self) -> bool:
        """Waiting for a request (IdleTracker): nothing queued, handled, answered later or
        held back by the memory pool; a half-received frame counts as waiting."""
        return (not self.frames and not self._later and not self.reader.blocked
                and self._wakeup is not None and not self._wakeup.done())

    def close_idle(self, idle_ms: int) -> None:
        half = self.reader.end - self.reader.start or self.reader.big is not None
        if half:
            log.info("closing connection from %s: a request begun but not completed in "
                     "connections.max.idle.ms (%d ms)", self.peer, idle_ms)
        else:
            log.debug("closing connection from %s: idle for connections.max.idle.ms (%d ms)",
                      self.peer, idle_ms)
        self._close()

    def close_excess(self) -> None:
        """Closed over max.connections (Server._close_excess): at once, answers not yet sent
        dropped, as Kafka's processor closes its lowest priority channel."""
        log.debug("closing connection from %s: over max.connections", self.peer)
        self.closed = True
        self.transport.abort()
        self._wake()

    def eof_received(self) -> bool:
        return False  # close the transport; queued requests are dropped with the connection

    def connection_lost(self, exc) -> None:
        if exc is not None:
            log.debug("connection from %s ended: %s", self.peer, exc)
        self.closed = True
        self.frames.clear()  # dropped unhandled; the frame being handled is released once it is
        self.reader.leave(keep=self.handling)
        self.server.connection_ended(self)
        self._wake()
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)
        callbacks, self._close_callbacks = self._close_callbacks or [], None
        for callback in callbacks:
            try:
                callback()
            except Exception:
                log.exception("connection close callback failed")

    def pause_writing(self) -> None:
        self._drained = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)
        self._drained = None

    # ---- the connection's task -------------------------------------------------------

    def _wake(self) -> None:
        if self._wakeup is not None and not self._wakeup.done():
            self._wakeup.set_result(None)

    def _close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()
        self._wake()

    async def _serve(self) -> None:
        current_connection.set(self)
        current_session.set(self.session)
        loop = asyncio.get_running_loop()
        handle = self.server.handle
        now_ms = self.server.now_ms
        try:
            while True:
                while not self.frames:
                    if self.closed:
                        return
                    self._wakeup = loop.create_future()
                    await self._wakeup
                if self.closed:
                    return
                frame = self.frames.popleft()
                self.last_active_ms = now_ms()  # one clock read a request: its answer follows it
                self.handling = len(frame)
                if self.paused_reading and len(self.frames) < QUEUED_FRAMES_MAX // 2:
                    self.paused_reading = False
                    if not self.reader.blocked:
                        self.transport.resume_reading()
                if self._writer is not None and _api_key(frame) not in self.server.pipelined:
                    await asyncio.wait({self._writer})  # its turn: the answers before it are out
                    if self.closed:
                        return
                parts = await handle(memoryview(frame))
                # Handled: its bytes leave queued.max.request.bytes (a Deferred answer waits
                # for replication without them; see protocol.limits).
                reader = self.reader
                if reader.pool is not None:  # reader.release(), inline: once per request
                    size = self.handling
                    reader.held -= size
                    reader.pool.free += size
                    if reader.pool.waiting:
                        reader.pool.release(0)
                self.handling = 0
                frame = None
                if isinstance(parts, Deferred) or self._later:
                    self._answer_later(loop, parts)
                    if parts is None:
                        return  # a close, queued behind the answers before it: read nothing more
                    if len(self._later) >= QUEUED_FRAMES_MAX:
                        await asyncio.wait({self._later[0]})
                    continue
                if parts is None:  # the handler asked to close (malformed request)
                    self._close()
                    return
                if parts and not self.closed:
                    await self._send(loop, parts)
        except (ConnectionError, OSError, RuntimeError) as e:
            log.debug("connection from %s ended: %s", self.peer, e)
            self._close()
        finally:
            if self.handling:  # taken off the queue, never handled to the end
                self.reader.release(self.handling)
                self.handling = 0
            if self.closed:
                self._drop_later()

    def _answer_later(self, loop: asyncio.AbstractEventLoop, parts) -> None:
        if isinstance(parts, Deferred):
            self._later.append(parts.response)
        else:
            done = loop.create_future()
            done.set_result(parts)
            self._later.append(done)
        if self._writer is None:
            self._writer = loop.create_task(self._write_later(loop))

    async def _write_later(self, loop: asyncio.AbstractEventLoop) -> None:
        """Send the queued answers in order; the head leaves the queue once sent, so the
        connection's task never sends around it."""
        try:
            while self._later and not self.closed:
                await self._later[0]
                # Every answer ready at the head goes out in one send: a high watermark that
                # moves completes many waiting produces at once.
                ready = 0
                parts: list = []
                close = False
                for fut in self._later:
                    if not fut.done():
                        break
                    ready += 1
                    if fut.result() is None:
                        close = True
                        break
                    parts += fut.result()
                if parts:
                    await self._send(loop, parts)
                    self.last_active_ms = self.server.now_ms()
                if close:
                    self._close()
                    break
                for _ in range(ready):
                    self._later.popleft()
        except (ConnectionError, OSError, RuntimeError) as e:
            log.debug("connection from %s ended: %s", self.peer, e)
            self._close()
        finally:
            self._writer = None
            if self.closed:
                self._drop_later()

    def _drop_later(self) -> None:
        for fut in self._later:
            fut.cancel()
        self._later.clear()

    async def _send(self, loop: asyncio.AbstractEventLoop, parts: list) -> None:
        pending: list = []
        for part in parts:
            if isinstance(part, (bytes, bytearray, memoryview)):
                pending.append(part)
            elif self.tls:
                if pending:
                    self.transport.write(pending[0] if len(pending) == 1 else b"".join(pending))
                    pending = []
                await self._write_slice(part)
            elif part.size < SENDFILE_MIN_BYTES:
                data = os.pread(part.fd, part.size, part.position)
                if len(data) != part.size:
                    raise ConnectionError(f"read {len(data)} of a {part.size}-byte file slice")
                pending.append(data)
            else:
                if pending:
                    self.transport.write(pending[0] if len(pending) == 1 else b"".join(pending))
                    pending = []
                await self._sendfile(loop, part)
        if pending:
            self.transport.write(pending[0] if len(pending) == 1 else b"".join(pending))
        if self._drained is not None:
            await self._drained

    async def _write_slice(self, part) -> None:
        """A file slice through a TLS transport: read and written a chunk at a time, waiting
        while the peer is slow, so a large fetch never sits whole in memory."""
        sent = 0
        while sent < part.size:
            n = min(TLS_READ_BYTES, part.size - sent)
            data = os.pread(part.fd, n, part.position + sent)
            if len(data) != n:
                raise ConnectionError(f"read {sent + len(data)} of a {part.size}-byte file slice")
            self.transport.write(data)
            sent += n
            if self._drained is not None and sent < part.size:
                await self._drained

    async def _sendfile(self, loop: asyncio.AbstractEventLoop, part) -> None:
        """Send a file slice after everything written before it: with sendfile(2) on the
        socket at once while nothing waits in the transport's buffer and the socket takes
        it, then through the event loop (which waits for room) for what is left."""
        sent = 0
        if self.transport.get_write_buffer_size() == 0:
            sock = self.transport.get_extra_info("socket")
            try:
                while sent < part.size:
                    n = os.sendfile(sock.fileno(), part.fd, part.position + sent, part.size - sent)
                    if n == 0:
                        raise ConnectionError(f"sendfile found {sent} of a {part.size}-byte file slice")
                    sent += n
            except BlockingIOError:
                pass
        if sent < part.size:
            left = part.size - sent
            rest = await loop.sendfile(self.transport, _FdFile(part.fd), part.position + sent, left)
            if rest != left:
                raise ConnectionError(f"sendfile sent {sent + rest} of {part.size} bytes")


def _api_key(frame: bytearray) -> int:
    return int.from_bytes(frame[:2], "big", signed=True) if len(frame) >= 2 else -1


class Server:
    """Accepts connections on listeners and serves each with ``handle``. Requests whose API
    key is in ``pipelined`` are handled while earlier answers wait (see above). ``limits``
    (protocol.limits) bound memory, connections and idleness across all its listeners.
    ``send_buffer_bytes`` and ``receive_buffer_bytes``: SO_SNDBUF and SO_RCVBUF (see above)."""

    def __init__(self, handle: Handler, max_bytes: int, pipelined: frozenset[int] = PIPELINED,
                 limits: ListenerLimits | None = None, send_buffer_bytes: int = USE_DEFAULT_BUFFER_SIZE,
                 receive_buffer_bytes: int = USE_DEFAULT_BUFFER_SIZE):
        self.handle = handle
        self.max_bytes = max_bytes
        self.pipelined = pipelined
        self.send_buffer_bytes = send_buffer_bytes
        self.receive_buffer_bytes = receive_buffer_bytes
        self.limits = limits = limits or ListenerLimits()
        budget = limits.queued_max_request_bytes
        self.pool: MemoryPool | None = MemoryPool(budget) if budget > 0 else None
        self.quotas = ConnectionQuotas(limits)
        idle_ms = limits.connections_max_idle_ms
        self.idle = IdleTracker(idle_ms) if idle_ms >= 0 else None
        self.sockets: list[socket.socket] = []
        self.listener_names: dict[socket.socket, str | None] = {}
        # A listening socket's security: (protocol, TLS context or None, principal of a TLS peer).
        self.security: dict[socket.socket, tuple[str, ssl.SSLContext | None, PrincipalOf | None]] = {}
        self._handshakes: set[asyncio.Task] = set()
        self.connections: set[_Connection] = set()
        self._accepting: list[asyncio.Task] = []
        self._acceptors: dict[socket.socket, asyncio.Task] = {}  # each listening socket's accept loop
        self._started = False
        self._slot_freed: asyncio.Event | None = None
        self._throttled: dict[socket.socket, asyncio.TimerHandle] = {}  # ip-throttled, closed later

    def now_ms(self) -> int:
        return int(asyncio.get_running_loop().time() * 1000)

    def bind(self, host: str, port: int, listener_name: str | None = None, security_protocol: str = PLAINTEXT,
             ssl_context: ssl.SSLContext | None = None, principal: PrincipalOf | None = None) -> int:
        """Listen on host:port (port 0: any free one, which is returned); the connections it
        accepts carry ``listener_name`` to their requests' headers and ``security_protocol`` in
        their sessions; with ``ssl_context`` they speak TLS, and ``principal`` names a TLS
        connection's principal (see the module doc)."""
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if self.receive_buffer_bytes != USE_DEFAULT_BUFFER_SIZE:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self.receive_buffer_bytes)
        sock.bind((host or "0.0.0.0", port))
        sock.listen(512)
        sock.setblocking(False)
        self.sockets.append(sock)
        self.listener_names[sock] = listener_name
        self.security[sock] = (security_protocol, ssl_context, principal)
        if listener_name is not None:
            self.quotas.serve(listener_name)
        return sock.getsockname()[1]

    def set_ssl_context(self, listener_name: str, ssl_context: ssl.SSLContext) -> None:
        """A TLS listener's new context (its certificate rotated, security/tls.py TlsReloader):
        every connection accepted from now on handshakes with it; those open keep theirs."""
        for sock, name in self.listener_names.items():
            if name is not None and name.upper() == listener_name.upper():
                protocol, _, principal = self.security[sock]
                self.security[sock] = (protocol, ssl_context, principal)

    def start(self) -> None:
        self._slot_freed = asyncio.Event()
        self._started = True
        for sock in self.sockets:
            self._start_acceptor(sock)
        if self.idle is not None:
            self._accepting.append(asyncio.get_running_loop().create_task(self._expire_idle()))

    def _start_acceptor(self, sock: socket.socket) -> None:
        task = asyncio.get_running_loop().create_task(self._accept(sock, self.listener_names.get(sock)))
        self._accepting.append(task)
        self._acceptors[sock] = task

    def add_listener(self, host: str, port: int, listener_name: str, **security) -> int:
        """A listener added while the Server runs (a dynamic ``listeners`` change, as Kafka's
        SocketServer.addListeners): bound as ``bind`` binds, and accepting at once once started."""
        port = self.bind(host, port, listener_name, **security)
        if self._started:
            self._start_acceptor(self.sockets[-1])
        return port

    def remove_listener(self, listener_name: str) -> None:
        """Stop listening on ``listener_name`` and close the connections it accepted (Kafka's
        SocketServer.removeListeners closes its acceptor and processors)."""
        name = listener_name.upper()
        for sock in [s for s, n in self.listener_names.items() if n is not None and n.upper() == name]:
            task = self._acceptors.pop(sock, None)
            if task is not None:
                task.cancel()
                self._accepting.remove(task)
            self.sockets.remove(sock)
            del self.listener_names[sock]
            self.security.pop(sock, None)
            sock.close()
        self.quotas.unserve(name)
        for conn in list(self.connections):
            if conn.listener_name is not None and conn.listener_name.upper() == name:
                conn._close()

    async def _accept(self, listener: socket.socket, listener_name: str | None) -> None:
        loop = asyncio.get_running_loop()
        quotas = self.quotas
        security_protocol, ssl_context, principal = self.security.get(listener, (PLAINTEXT, None, None))
        factory = functools.partial(_Connection, self, listener_name=listener_name,
                                    security_protocol=security_protocol, principal=principal)
        while True:
            # max.connections: wait for a slot before accepting, as Kafka's acceptor does; the
            # kernel's backlog holds what arrives meanwhile.
            while not quotas.slot_available(listener_name):
                self._slot_freed.clear()
                await self._slot_freed.wait()
            # max.connection.creation.rate: accepting is delayed, never refused.
            delay_ms = quotas.creation_delay_ms(self.now_ms(), listener_name)
            if delay_ms > 0:
                await asyncio.sleep(delay_ms / 1000)
                continue
            try:
                sock, address = await loop.sock_accept(listener)
            except OSError as e:  # e.g. out of file descriptors: keep the listener alive
                log.warning("accept failed: %s", e)
                await asyncio.sleep(0.1)
                continue
            now_ms = self.now_ms()
            quotas.record_creation(now_ms, listener_name)
            ip = address[0] if isinstance(address, tuple) else str(address)
            throttle_ms = quotas.ip_throttle_ms(ip, now_ms)
            if throttle_ms > 0:  # over its ip's connection rate: held unread, then closed (KIP-612)
                log.debug("delaying the close of a connection from %s for %d ms (connection_creation_rate)",
                          ip, throttle_ms)
                self._throttled[sock] = loop.call_later(throttle_ms / 1000, self._close_throttled, sock)
                continue
            if not quotas.try_add(ip, listener_name):
                log.info("rejected connection from %s: it already has the maximum of %d connections "
                         "(max.connections.per.ip)", ip, quotas.limit_for(ip))
                sock.close()
                continue
            if quotas.total > quotas.max_connections:  # the protected listener accepted past it
                self._close_excess()
            ssl_context = self.security.get(listener, (PLAINTEXT, None, None))[1]  # the latest, if rotated
            if ssl_context is not None:
                task = loop.create_task(self._connect(loop, sock, ip, factory, ssl_context, listener_name))
                self._handshakes.add(task)
                task.add_done_callback(self._handshakes.discard)
            else:
                await self._connect(loop, sock, ip, factory, None, listener_name)

    async def _connect(self, loop: asyncio.AbstractEventLoop, sock: socket.socket, ip: str,
                       factory: Callable[..., _Connection], ssl_context: ssl.SSLContext | None,
                       listener_name: str | None = None) -> None:
        try:
            if self.send_buffer_bytes != USE_DEFAULT_BUFFER_SIZE:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self.send_buffer_bytes)
            if ssl_context is None:
                await loop.connect_accepted_socket(functools.partial(factory, ip=ip), sock)
            else:
                handshake = loop.create_future()
                tls = _AlertingSSLProtocol(loop, factory(ip=ip), ssl_context, handshake, server_side=True,
                                           ssl_handshake_timeout=SSL_HANDSHAKE_TIMEOUT_S)
                transport, _ = await loop.connect_accepted_socket(lambda: tls, sock)
                try:
                    await handshake
                except BaseException:
                    transport.close()
                    raise
        except OSError as e:  # ssl.SSLError included: a failed TLS handshake
            what = "TLS handshake" if ssl_context is not None else "connection setup"
            log.info("%s with %s failed: %s", what, ip, e)
            sock.close()
            self._connection_gone(ip, listener_name)

    def _close_throttled(self, sock: socket.socket) -> None:
        self._throttled.pop(sock, None)
        sock.close()

    def update_limits(self, limits: ListenerLimits) -> None:
        """New connection limits for the running listeners (protocol.limits.ConnectionQuotas.update);
        an acceptor waiting for a slot looks again."""
        self.limits = limits
        self.quotas.update(limits)
        self._close_excess()
        if self._slot_freed is not None:
            self._slot_freed.set()

    def _close_excess(self) -> None:
        """Kafka's closeExcessConnections (protocol.limits): while the connections number more
        than max.connections, close the least recently used on the listeners that are not
        protected; one already closing goes first, at once."""
        quotas = self.quotas
        excess = quotas.excess()
        if not excess:
            return
        candidates = []
        for conn in list(self.connections):
            sheds = quotas.max_connections_exceeded(conn.listener_name)
            if not conn.closed:
                if sheds:
                    candidates.append(conn)
            elif excess > 0:  # closing (its answers still being written): its count goes soon
                excess -= 1
                if sheds:  # Kafka's lowestPriorityChannel takes a closing channel first, at once
                    conn.transport.abort()
        shed = least_recently_used(candidates, excess)
        if shed:
            log.info("closing %d connection(s), the least recently used, over max.connections (%d)",
                     len(shed), quotas.max_connections)
        for conn in shed:
            conn.close_excess()

    def connection_ended(self, conn: _Connection) -> None:
        if conn in self.connections:
            self.connections.discard(conn)
        self._connection_gone(conn.ip, conn.listener_name)

    def _connection_gone(self, ip: str, listener_name: str | None = None) -> None:
        self.quotas.remove(ip, listener_name)
        if self._slot_freed is not None:
            self._slot_freed.set()

    async def _expire_idle(self) -> None:
        """connections.max.idle.ms: close connections that have waited that long for a request."""
        while True:
            await asyncio.sleep(self.idle.interval_ms / 1000)
            self.idle.check(self.connections, self.now_ms())
            if self.quotas.total > self.quotas.max_connections:
                self._close_excess()

    async def close(self) -> None:
        for task in self._accepting:
            task.cancel()
        for task in list(self._handshakes):
            task.cancel()
        for sock, handle in list(self._throttled.items()):
            handle.cancel()
            sock.close()
        self._throttled.clear()
        for sock in self.sockets:
            sock.close()
        tasks = []
        for conn in list(self.connections):
            conn._close()
            if conn.task is not None:
                conn.task.cancel()
                tasks.append(conn.task)
        await asyncio.gather(*self._accepting, *tasks, return_exceptions=True)


def freeze_startup_heap() -> None:
    """Move what is alive once a broker or controller has started (its modules, codecs, logs
    and metadata: tens of thousands of objects) out of the cyclic garbage collector's reach.
    Each full collection would otherwise walk all of it: 15-20 ms on this 2-core box, a stall
    every request waiting meanwhile pays. What is allocated from here on is collected as before."""
    gc.collect()
    gc.freeze()


__all__ = ["BUFFER_BYTES", "USE_DEFAULT_BUFFER_SIZE", "FrameReader", "FrameTooLarge", "ListenerLimits",
           "Server", "current_connection", "freeze_startup_heap"]
