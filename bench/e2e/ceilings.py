"""This machine's ceilings, measured in the same run as the end-to-end benchmark.

    python -m bench.e2e.ceilings        # prints the figures as JSON

What a broker on this box could at best reach, each measured for about ``seconds``:

* memcpy_gb_s: ``np.copyto`` of a 64 MiB array into a preallocated one; bytes copied per
  second, best of the repeats (the bound on any copy a broker makes).
* loopback_tcp_gb_s: one TCP stream over 127.0.0.1; a child process ``sendall``s a 1 MiB
  buffer, this process ``recv_into``s a preallocated 4 MiB buffer; GB/s at the receiver.
* sendfile_gb_s: the same stream and receiver, but the child ``os.sendfile``s 1 MiB at a time
  from a 256 MiB file held in the page cache, looping over it (what a zero-copy Fetch path
  can serve).
* fsync_per_s, fsync_p99_ms: 4 KiB appends, each followed by ``os.fdatasync`` (the bound on
  a flush-every-write log, and its tail).
* page_cache_new_gb_s, page_cache_overwrite_gb_s (``page_cache_writes``): 1 MiB ``os.write``s
  that extend a new file, then the same writes over the file's first bytes, whose pages are
  in the page cache already. Every byte a broker appends to a segment, as leader or follower,
  goes into pages of the first kind. On a VM whose host takes back freed memory (free page
  reporting), a page the guest has not touched since costs the host a fault on first write,
  so the first figure can be a tenth of the second.
* rtt_100b_p50_us, rtt_100b_p99_us: 100-byte ping-pong with TCP_NODELAY between this process
  and an echo child process (the floor under any request/response latency).

Senders run in a forked child process, so the GIL does not bound the stream. Everything stays
on 127.0.0.1; every socket call has a timeout, every child has its own deadline and is killed
on the way out if it outlives it. GB/s are 1e9 bytes per second.
"""
from __future__ import annotations

import contextlib
import json
import multiprocessing
import os
import socket
import struct
import tempfile
import time
from collections.abc import Callable, Iterator

import numpy as np

MiB = 1 << 20
MEMCPY_BYTES = 64 * MiB
SEND_BYTES = 1 * MiB
RECV_BYTES = 4 * MiB
SENDFILE_FILE_BYTES = 256 * MiB
WRITE_CHUNK = 8 * MiB
FSYNC_BYTES = 4096
RTT_BYTES = 100
RTT_MAX_TRIPS = 20_000
PAGE_CACHE_LIMIT = 2 << 30  # written at most by page_cache_writes, whatever the speed

SOCKET_TIMEOUT_S = 5.0  # bound on any single socket call
CHILD_SLACK_S = 5.0  # a child outlives its measurement by at most this much
JOIN_TIMEOUT_S = 2.0

_FORK = multiprocessing.get_context("fork")


# --- helpers --------------------------------------------------------------------------------

def _percentile(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values, dtype=np.float64), q))


def _bound(sock: socket.socket) -> socket.socket:
    """Make ``sock`` blocking with kernel-side timeouts (SO_RCVTIMEO/SO_SNDTIMEO).

    Every call is bounded, and unlike ``settimeout`` Python adds no poll() before each call,
    which would be counted in the figures. A timed-out call raises an OSError (EAGAIN).
    """
    sock.settimeout(None)
    seconds = int(SOCKET_TIMEOUT_S)
    timeval = struct.pack("ll", seconds, int((SOCKET_TIMEOUT_S - seconds) * 1e6))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, timeval)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, timeval)
    return sock


def _connect(port: int, nodelay: bool = False) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=SOCKET_TIMEOUT_S)
    if nodelay:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return _bound(sock)


@contextlib.contextmanager
def _listener() -> Iterator[socket.socket]:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(1)
        sock.settimeout(SOCKET_TIMEOUT_S)  # bounds accept()
        yield sock


@contextlib.contextmanager
def _child(target: Callable[..., None], *args: object) -> Iterator[None]:
    """Run ``target(*args)`` in a forked process; join it on the way out, kill it if it lingers."""
    proc = _FORK.Process(target=target, args=args, daemon=True)
    proc.start()
    try:
        yield
    finally:
        proc.join(JOIN_TIMEOUT_S)
        if proc.is_alive():
            proc.kill()
            proc.join(JOIN_TIMEOUT_S)
        proc.close()


@contextlib.contextmanager
def _accepted_from(target: Callable[..., None], *args: object,
                   nodelay: bool = False) -> Iterator[socket.socket]:
    """A connection from a child running ``target(port, *args)`` to a listener on 127.0.0.1."""
    with _listener() as listener, _child(target, listener.getsockname()[1], *args):
        conn, _ = listener.accept()
        with _bound(conn):
            if nodelay:
                conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            yield conn


def _recv_exact(sock: socket.socket, view: memoryview) -> None:
    got = 0
    while got < len(view):
        n = sock.recv_into(view[got:])
        if n == 0:
            raise ConnectionError("peer closed mid-message")
        got += n


# --- children (run in a forked process; each returns at its deadline or when the peer goes) ---

def _send_buffer(port: int, lifetime: float) -> None:
    buf = bytes(SEND_BYTES)
    deadline = time.monotonic() + lifetime
    with contextlib.suppress(OSError), _connect(port) as sock:
        while time.monotonic() < deadline:
            sock.sendall(buf)


def _send_file(port: int, lifetime: float, path: str) -> None:
    deadline = time.monotonic() + lifetime
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        with contextlib.suppress(OSError), _connect(port) as sock:
            offset = 0
            while time.monotonic() < deadline:
                offset += os.sendfile(sock.fileno(), fd, offset, min(SEND_BYTES, size - offset))
                if offset >= size:
                    offset = 0
    finally:
        os.close(fd)


def _echo(port: int, lifetime: float) -> None:
    view = memoryview(bytearray(RTT_BYTES))
    deadline = time.monotonic() + lifetime
    with contextlib.suppress(OSError), _connect(port, nodelay=True) as sock:
        while time.monotonic() < deadline:
            _recv_exact(sock, view)
            sock.sendall(view)


# --- the measurements -------------------------------------------------------------------------

def memcpy_gb_s(seconds: float = 1.0, nbytes: int = MEMCPY_BYTES) -> float:
    """Best ``np.copyto`` of ``nbytes`` into a preallocated array, in GB/s."""
    src = np.ones(nbytes, dtype=np.uint8)
    dst = np.zeros_like(src)
    np.copyto(dst, src)  # warm: both arrays faulted in
    best = float("inf")
    deadline = time.perf_counter() + seconds
    while True:
        start = time.perf_counter()
        np.copyto(dst, src)
        end = time.perf_counter()
        best = min(best, end - start)
        if end >= deadline:
            return nbytes / best / 1e9


def _receive_gb_s(conn: socket.socket, seconds: float) -> float:
    """Read ``conn`` into a preallocated buffer for ``seconds``; GB/s at the receiver.

    The clock starts once the first bytes arrive, so connection setup is not counted.
    """
    view = memoryview(bytearray(RECV_BYTES))
    if conn.recv_into(view) == 0:
        raise ConnectionError("sender closed before sending")
    received = 0
    start = time.perf_counter()
    deadline = start + seconds
    while time.perf_counter() < deadline:
        n = conn.recv_into(view)
        if n == 0:
            raise ConnectionError("sender closed early")
        received += n
    return received / (time.perf_counter() - start) / 1e9


def _stream_gb_s(sender: Callable[..., None], seconds: float, *args: object) -> float:
    """One TCP stream from a child running ``sender(port, lifetime, *args)``, GB/s at the receiver."""
    with _accepted_from(sender, seconds + CHILD_SLACK_S, *args) as conn:
        return _receive_gb_s(conn, seconds)


def loopback_tcp_gb_s(seconds: float = 1.0) -> float:
    """One stream of 1 MiB ``sendall``s over 127.0.0.1, in GB/s."""
    return _stream_gb_s(_send_buffer, seconds)


def _write_file(path: str, nbytes: int) -> None:
    """Write ``nbytes`` of random bytes to ``path``, then read it once: it is in the page cache."""
    chunk = np.random.default_rng(0).integers(0, 256, size=min(nbytes, WRITE_CHUNK), dtype=np.uint8)
    with open(path, "wb") as f:
        left = nbytes
        while left > 0:
            left -= f.write(chunk[:left].data)
    with open(path, "rb", buffering=0) as f:
        buf = bytearray(WRITE_CHUNK)
        while f.readinto(buf):
            pass


def sendfile_gb_s(seconds: float = 1.0, directory: str | None = None,
                  file_bytes: int = SENDFILE_FILE_BYTES) -> float:
    """One stream of ``os.sendfile`` from a page-cached file of ``file_bytes`` to 127.0.0.1, in GB/s."""
    fd, path = tempfile.mkstemp(prefix="ceiling-sendfile-", dir=directory)
    os.close(fd)
    try:
        _write_file(path, file_bytes)
        return _stream_gb_s(_send_file, seconds, path)
    finally:
        os.unlink(path)


def fsync(seconds: float = 1.0, directory: str | None = None) -> dict[str, float]:
    """4 KiB append + ``os.fdatasync`` in a loop: syncs per second and the p99 in ms."""
    fd, path = tempfile.mkstemp(prefix="ceiling-fsync-", dir=directory)
    try:
        block = b"\xa5" * FSYNC_BYTES
        latencies: list[float] = []
        start = now = time.perf_counter()
        deadline = start + seconds
        while now < deadline or not latencies:
            os.write(fd, block)
            os.fdatasync(fd)
            then, now = now, time.perf_counter()
            latencies.append(now - then)
        return {"fsync_per_s": len(latencies) / (now - start),
                "fsync_p99_ms": _percentile(latencies, 99) * 1e3}
    finally:
        os.close(fd)
        os.unlink(path)


def page_cache_writes(seconds: float = 1.0, directory: str | None = None,
                      limit_bytes: int = PAGE_CACHE_LIMIT) -> dict[str, float]:
    """1 MiB writes extending a new file for about ``seconds`` (at most ``limit_bytes``), then
    as many over its first bytes, pages already cached: GB/s of each."""
    chunk = np.random.default_rng(1).integers(0, 256, size=MiB, dtype=np.uint8).data
    fd, path = tempfile.mkstemp(prefix="ceiling-page-cache-", dir=directory)
    try:
        written, start = 0, time.perf_counter()
        while written < limit_bytes and (time.perf_counter() - start < seconds or not written):
            written += os.write(fd, chunk)
        new = written / (time.perf_counter() - start) / 1e9
        over, start = 0, time.perf_counter()
        while over < written:
            over += os.pwrite(fd, chunk, over)
        overwrite = over / (time.perf_counter() - start) / 1e9
        return {"page_cache_new_gb_s": new, "page_cache_overwrite_gb_s": overwrite}
    finally:
        os.close(fd)
        os.unlink(path)


def rtt_100b(seconds: float = 1.0, max_trips: int = RTT_MAX_TRIPS) -> dict[str, float]:
    """100-byte ping-pong with an echo child over 127.0.0.1 (TCP_NODELAY): p50 and p99 in µs."""
    out = bytes(RTT_BYTES)
    view = memoryview(bytearray(RTT_BYTES))
    trips: list[float] = []
    with _accepted_from(_echo, seconds + CHILD_SLACK_S, nodelay=True) as conn:
        deadline = time.perf_counter() + seconds
        while len(trips) < max_trips:
            start = time.perf_counter()
            conn.sendall(out)
            _recv_exact(conn, view)
            end = time.perf_counter()
            trips.append(end - start)
            if end >= deadline:
                break
    return {"rtt_100b_p50_us": _percentile(trips, 50) * 1e6,
            "rtt_100b_p99_us": _percentile(trips, 99) * 1e6}


def measure(seconds: float = 1.0, directory: str | None = None) -> dict[str, float]:
    """All ceilings; each measurement runs about `seconds`.

    The fsync loop runs before the sendfile file is written, so its dirty pages cannot be in
    the way; the sendfile file is removed afterwards.
    """
    memcpy = memcpy_gb_s(seconds, MEMCPY_BYTES)
    loopback = loopback_tcp_gb_s(seconds)
    syncs = fsync(seconds, directory)
    rtt = rtt_100b(seconds)
    sendfile = sendfile_gb_s(seconds, directory, SENDFILE_FILE_BYTES)
    page_cache = page_cache_writes(seconds, directory)
    return {"memcpy_gb_s": memcpy, "loopback_tcp_gb_s": loopback, "sendfile_gb_s": sendfile, **syncs, **rtt,
            **page_cache}


if __name__ == "__main__":
    print(json.dumps(measure(), indent=2))
