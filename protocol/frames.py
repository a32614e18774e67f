"""Size-prefixed Kafka frames out of a byte stream: the per-connection state machine that both
ends of a connection use (protocol.net's server connections, protocol.client's KafkaConnection),
and that tests feed bytes.

| field | type   | meaning                                                                 |
|-------|--------|-------------------------------------------------------------------------|
| size  | int32  | bytes that follow; above ``max_bytes`` (socket.request.max.bytes on a   |
|       |        | server) or negative: FrameTooLarge, checked before any byte of the body |
| frame | size   | handed out whole, as a writable bytearray                               |

A frame that fits the shared buffer (``BUFFER_BYTES``) is copied out of it once; a larger one
gets a buffer of its own as soon as its size is read, which the socket fills in place, so its
bytes are received once and never moved (Produce validates and patches them there) but for its
head: what the read that brought its size brought of it. A stream of large frames (a replica
fetcher's answers, a producer's megabyte batches) is therefore read with a short first read
(``HEAD_BYTES``) whenever the buffer is empty, so at most that much of each is copied; a first
read that comes back full of small frames turns that off again until the next large frame.
"""
from __future__ import annotations

from collections.abc import Callable

from protocol.headers import fastcodec
from protocol.limits import FrameTooLarge, MemoryPool

BUFFER_BYTES = 256 * 1024  # per connection; larger frames get their own buffer
HEAD_BYTES = 16 * 1024  # the first read into an empty buffer after a large frame
# A frame's own buffer is filled whole by the socket: not zeroed first where fastcodec is built.
_frame_buffer = fastcodec.frame_buffer if fastcodec is not None else bytearray


class FrameReader:
    """Splits a byte stream into size-prefixed frames; a declared size above ``max_bytes``
    (socket.request.max.bytes) or below zero raises.

    Bytes arrive through ``get_buffer()`` / ``updated(n)`` (the receiving side writes into
    the buffer it is given), or through ``feed(data)``. Frames are returned as writable
    bytearrays (Produce patches offsets in place): a frame that fits the shared buffer is
    copied out of it once; a larger one is received into its own bytearray.

    With a ``pool`` (queued.max.request.bytes, protocol.limits.MemoryPool) each frame's bytes
    are reserved before it is copied out or gets its own buffer, and ``held`` counts them
    until ``release``; a frame that cannot be reserved stops the split (``blocked``: the
    caller stops reading) until the pool calls ``resume``. The receive path pays one
    comparison and two subtractions per frame for it."""

    def __init__(self, max_bytes: int, buffer_bytes: int = BUFFER_BYTES, pool: MemoryPool | None = None):
        self.request_max_bytes = max_bytes
        # A frame larger than the whole pool could never be admitted: refused at its size prefix.
        self.max_bytes = min(max_bytes, pool.limit) if pool is not None else max_bytes
        self.buf = bytearray(buffer_bytes)
        self.start = 0  # unparsed bytes are buf[start:end]
        self.end = 0
        self.big: bytearray | None = None  # a large frame being received in place
        self.big_filled = 0
        self.expect_big = False  # a large frame came last: an empty buffer reads HEAD_BYTES first
        self.head_read = False  # the buffer handed out last was that short one
        self.pool = pool  # None once the connection is gone, unless a frame of it is being handled
        self.held = 0  # bytes reserved in the pool for frames handed out and not yet released
        self.blocked = False  # waiting in the pool for blocked_size bytes
        self.blocked_size = 0
        self.on_resume: Callable[[], None] | None = None

    def resume(self) -> None:
        """The pool has room for the blocked frame: the owner splits again (``updated(0)``)."""
        if self.on_resume is not None:
            self.on_resume()

    def release(self, n: int) -> None:
        pool = self.pool
        if pool is not None:
            self.held -= n
            pool.release(n)

    def leave(self, keep: int = 0) -> None:
        """The connection is gone: its buffers are dropped now, not when the cyclic garbage
        collector finds the connection, and everything it held goes back to the pool but
        ``keep`` bytes (a frame still being handled), given back by ``release`` later."""
        self.buf = bytearray()
        self.big, self.big_filled = None, 0
        self.start = self.end = 0
        self.on_resume = None
        pool = self.pool
        if pool is not None:
            pool.leave(self, keep)
            if not keep:
                self.pool = None

    def get_buffer(self) -> memoryview:
        if self.big is not None:
            return memoryview(self.big)[self.big_filled:]
        if self.end == len(self.buf):  # full: move the unparsed tail to the front
            tail = self.end - self.start
            self.buf[:tail] = self.buf[self.start:self.end]
            self.start, self.end = 0, tail
        if self.expect_big and self.end == 0:
            self.head_read = True
            return memoryview(self.buf)[:HEAD_BYTES]
        return memoryview(self.buf)[self.end:]

    def updated(self, n: int) -> list[bytearray]:
        if self.big is not None:
            self.big_filled += n
            if self.big_filled < len(self.big):
                return []
            frames = [self.big]
            self.big = None
            return frames
        self.end += n
        frames = self._split()
        if self.head_read:
            self.head_read = False
            if n == HEAD_BYTES and self.big is None:  # small frames fill the reads again
                self.expect_big = False
        return frames

    def feed(self, data: bytes | memoryview) -> list[bytearray]:
        frames = []
        data = memoryview(data)
        while data:
            buf = self.get_buffer()
            if not len(buf):
                raise BufferError("the reader is blocked on the memory pool and its buffer is full")
            n = min(len(buf), len(data))
            buf[:n] = data[:n]
            data = data[n:]
            frames += self.updated(n)
        return frames

    def _too_large(self, size: int) -> FrameTooLarge:
        if 0 <= size <= self.request_max_bytes:
            return FrameTooLarge(f"request of {size} bytes exceeds queued.max.request.bytes "
                                 f"({self.max_bytes}): it could never be admitted")
        return FrameTooLarge(f"request of {size} bytes exceeds socket.request.max.bytes "
                             f"({self.request_max_bytes})")

    def _split(self) -> list[bytearray]:
        frames = []
        buf = self.buf
        pool = self.pool
        while self.end - self.start >= 4:
            size = int.from_bytes(buf[self.start:self.start + 4], "big", signed=True)
            if size < 0 or size > self.max_bytes:
                raise self._too_large(size)
            begin = self.start + 4
            have = self.end - begin
            if have >= size:
                if pool is not None:
                    if size > pool.free and not pool.admit(self, size):
                        break
                    pool.free -= size
                    self.held += size
                frames.append(buf[begin:begin + size])
                self.start = begin + size
            elif 4 + size > len(buf):  # cannot fit: receive the rest straight into its own buffer
                if pool is not None:
                    if size > pool.free and not pool.admit(self, size):
                        break
                    pool.free -= size
                    self.held += size
                big = _frame_buffer(size)  # not zeroed: the socket fills all of it
                big[:have] = memoryview(buf)[begin:self.end]  # one copy, no temporary
                self.start = self.end = 0
                self.big, self.big_filled = big, have
                self.expect_big = True
                break
            else:
                break
        if self.start == self.end:
            self.start = self.end = 0
        return frames


__all__ = ["BUFFER_BYTES", "HEAD_BYTES", "FrameReader", "FrameTooLarge"]
