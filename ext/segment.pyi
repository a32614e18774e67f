"""Segment file IO: one write per append, sendfile per read; the GIL is released around
the system calls."""

def append(fd: int, buf: bytes | bytearray | memoryview) -> int:
    """Write all of ``buf`` at the fd's current position (write(2) in a loop over short
    writes, EINTR retried). Returns the number of bytes written. Raises OSError."""

def pread_into(fd: int, buf: bytearray | memoryview, position: int) -> int:
    """Fill ``buf`` from ``position``; returns bytes read (less at end of file)."""

def sendfile(out_fd: int, in_fd: int, offset: int, count: int) -> int:
    """Copy up to ``count`` bytes from ``in_fd`` at ``offset`` to ``out_fd`` with
    sendfile(2), looping until done or the socket would block. Returns bytes sent
    (0 if it would block at once). Raises OSError for other errors."""
