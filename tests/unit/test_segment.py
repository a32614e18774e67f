"""ext.segment: one-write append, pread_into, sendfile over real fds and sockets."""
import errno
import os
import signal
import socket
import struct
import threading
import time

import pytest

import ext.segment
from ext.segment import append, pread_into, sendfile

pytestmark = pytest.mark.timeout(60)


def test_native_module_loaded():
    assert ext.segment.__file__.endswith(".so")


@pytest.fixture
def segment(tmp_path):
    fd = os.open(tmp_path / "00000000000000000000.log",
                 os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
    yield fd
    os.close(fd)


def contents(fd):
    return os.pread(fd, os.fstat(fd).st_size + 1, 0)


def pattern(n, seed=0):
    return bytes((i * 31 + seed) & 0xFF for i in range(n))


def drain(sock, into):
    """Read ``sock`` until EOF, appending to the bytearray ``into``."""
    while True:
        chunk = sock.recv(1 << 20)
        if not chunk:
            return
        into += chunk


# ---------------------------------------------------------------- append


def test_append_bytes_bytearray_and_memoryview_slices(segment):
    assert append(segment, b"abc") == 3
    assert append(segment, bytearray(b"defg")) == 4
    assert append(segment, memoryview(b"0123456789")[3:6]) == 3
    assert append(segment, memoryview(bytearray(b"xyz"))[1:]) == 2
    assert append(segment, b"") == 0
    assert contents(segment) == b"abcdefg345yz"


def test_append_large_buffer(segment):
    data = pattern(16 << 20)
    assert append(segment, data) == len(data)
    assert contents(segment) == data


def test_append_writes_at_current_position(tmp_path):
    fd = os.open(tmp_path / "f", os.O_RDWR | os.O_CREAT)
    try:
        append(fd, b"aaaaaa")
        os.lseek(fd, 2, os.SEEK_SET)
        append(fd, b"BB")
        assert os.lseek(fd, 0, os.SEEK_CUR) == 4
        assert contents(fd) == b"aaBBaa"
    finally:
        os.close(fd)


def test_append_rejects_non_contiguous_buffer(segment):
    with pytest.raises(BufferError):
        append(segment, memoryview(b"abcdef")[::2])
    with pytest.raises(TypeError):
        append(segment, "text")


def test_append_to_bad_fd_raises_oserror():
    with pytest.raises(OSError) as info:
        append(-1, b"x")
    assert info.value.errno == errno.EBADF


def test_append_to_read_only_fd_raises_oserror(tmp_path):
    (tmp_path / "f").write_bytes(b"")
    fd = os.open(tmp_path / "f", os.O_RDONLY)
    try:
        with pytest.raises(OSError) as info:
            append(fd, b"x")
        assert info.value.errno == errno.EBADF
    finally:
        os.close(fd)


def test_append_loops_over_short_writes_without_holding_the_gil():
    # A pipe takes 64 KiB per write at most: the rest needs the reader thread to run
    # while append blocks in write(2), which it can only do if the GIL is released.
    read_fd, write_fd = os.pipe()
    received = bytearray()

    def reader():
        while chunk := os.read(read_fd, 1 << 16):
            received.extend(chunk)

    thread = threading.Thread(target=reader)
    thread.start()
    data = pattern(4 << 20, seed=3)
    try:
        assert append(write_fd, memoryview(data)) == len(data)
    finally:
        os.close(write_fd)
        thread.join()
        os.close(read_fd)
    assert received == data


def test_append_error_after_partial_write_reports_bytes_written():
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)
    try:
        with pytest.raises(BlockingIOError) as info:
            append(write_fd, bytes(1 << 20))      # more than the pipe holds
        assert 0 < info.value.characters_written < 1 << 20
    finally:
        os.close(write_fd)
        os.close(read_fd)


class Interrupted(Exception):
    pass


@pytest.fixture
def sigusr1():
    """install(handler) for SIGUSR1; kick() delivers it to this (the main) thread."""
    main = threading.get_ident()
    previous = signal.getsignal(signal.SIGUSR1)

    class Signal:
        def install(self, handler):
            signal.signal(signal.SIGUSR1, handler)

        def kick(self):
            signal.pthread_kill(main, signal.SIGUSR1)

    yield Signal()
    signal.signal(signal.SIGUSR1, previous)


def test_append_stops_when_a_signal_handler_raises(sigusr1):
    # PEP 475: EINTR runs the handlers; an exception from one ends the blocked write.
    def handler(signum, frame):
        raise Interrupted

    sigusr1.install(handler)
    read_fd, write_fd = os.pipe()
    finished = threading.Event()
    drained = threading.Event()

    def unblock():
        # Drains the pipe only if the test has not ended within a minute, so an append that
        # ignored the handler's exception finishes (after the drain has begun) instead of hanging.
        if not finished.wait(60.0):
            drained.set()
        while os.read(read_fd, 1 << 16):
            pass

    kicker = threading.Timer(0.2, sigusr1.kick)
    unblocker = threading.Thread(target=unblock)
    kicker.start()
    unblocker.start()
    try:
        with pytest.raises(Interrupted):
            append(write_fd, bytes(1 << 20))
        assert not drained.is_set(), "raised only once the pipe was drained and the write ended"
    finally:
        kicker.cancel()
        finished.set()
        os.close(write_fd)
        unblocker.join()
        os.close(read_fd)


def test_append_retries_after_a_signal_handler_returns(sigusr1):
    calls = []
    sigusr1.install(lambda signum, frame: calls.append(signum))
    read_fd, write_fd = os.pipe()
    received = bytearray()
    done = threading.Event()

    def reader():
        for _ in range(5):
            time.sleep(0.05)
            sigusr1.kick()
        while chunk := os.read(read_fd, 1 << 16):
            received.extend(chunk)
            if not done.is_set():
                sigusr1.kick()

    thread = threading.Thread(target=reader)
    thread.start()
    data = pattern(2 << 20, seed=11)
    try:
        assert append(write_fd, data) == len(data)
        done.set()
    finally:
        os.close(write_fd)
        thread.join()
        os.close(read_fd)
    assert calls
    assert received == data


# ---------------------------------------------------------------- pread_into


def test_pread_into_fills_buffer_from_position(segment):
    append(segment, b"0123456789")
    buf = bytearray(4)
    assert pread_into(segment, buf, 3) == 4
    assert buf == b"3456"


def test_pread_into_memoryview_slice_writes_only_the_slice(segment):
    append(segment, b"0123456789")
    buf = bytearray(b"........")
    assert pread_into(segment, memoryview(buf)[2:5], 7) == 3
    assert buf == b"..789..."


def test_pread_into_short_at_end_of_file(segment):
    append(segment, b"0123456789")
    buf = bytearray(8)
    assert pread_into(segment, buf, 6) == 4
    assert buf[:4] == b"6789"
    assert pread_into(segment, buf, 10) == 0
    assert pread_into(segment, buf, 1000) == 0


def test_pread_into_large(segment):
    data = pattern(8 << 20, seed=5)
    append(segment, data)
    buf = bytearray(len(data) - 100)
    assert pread_into(segment, buf, 100) == len(buf)
    assert buf == data[100:]


def test_pread_into_does_not_move_the_file_position(segment):
    append(segment, b"0123456789")
    os.lseek(segment, 0, os.SEEK_SET)
    pread_into(segment, bytearray(5), 2)
    assert os.lseek(segment, 0, os.SEEK_CUR) == 0


def test_pread_into_rejects_read_only_buffer(segment):
    with pytest.raises(BufferError):
        pread_into(segment, b"immutable", 0)


def test_pread_into_bad_fd_raises_oserror():
    with pytest.raises(OSError) as info:
        pread_into(-1, bytearray(4), 0)
    assert info.value.errno == errno.EBADF


# ---------------------------------------------------------------- sendfile


def test_sendfile_blocking_socket_sends_the_whole_range(segment):
    data = pattern(32 << 20, seed=7)
    append(segment, data)
    left, right = socket.socketpair()
    # Far more than the socket buffer: completes only if the drain thread runs while
    # sendfile blocks, i.e. with the GIL released. Were the GIL held, the send timeout
    # would end the stall with EAGAIN and a short count instead of hanging the suite.
    left.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, struct.pack("ll", 5, 0))
    received = bytearray()
    thread = threading.Thread(target=drain, args=(right, received))
    thread.start()
    try:
        assert sendfile(left.fileno(), segment, 1000, len(data) - 2000) == len(data) - 2000
    finally:
        left.close()
        thread.join()
        right.close()
    assert received == data[1000:-1000]


def test_sendfile_small_range(segment):
    append(segment, b"header|payload|trailer")
    left, right = socket.socketpair()
    with left, right:
        assert sendfile(left.fileno(), segment, 7, 7) == 7
        assert right.recv(100) == b"payload"


def test_sendfile_stops_at_end_of_file(segment):
    append(segment, b"0123456789")
    left, right = socket.socketpair()
    with left, right:
        assert sendfile(left.fileno(), segment, 6, 100) == 4
        assert right.recv(100) == b"6789"
        assert sendfile(left.fileno(), segment, 10, 100) == 0
        assert sendfile(left.fileno(), segment, 0, 0) == 0


def test_sendfile_non_blocking_socket_returns_partial_then_zero(segment):
    data = pattern(16 << 20, seed=9)
    append(segment, data)
    left, right = socket.socketpair()
    with left, right:
        left.setblocking(False)
        sent = sendfile(left.fileno(), segment, 0, len(data))
        assert 0 < sent < len(data)              # the socket buffer filled up
        assert sendfile(left.fileno(), segment, sent, len(data) - sent) == 0

        # Resume from where it stopped, draining in between, as the event loop would.
        received = bytearray()
        right.setblocking(False)
        while len(received) < len(data):
            try:
                received += right.recv(1 << 20)
            except BlockingIOError:
                pass
            if sent < len(data):
                sent += sendfile(left.fileno(), segment, sent, len(data) - sent)
        assert received == data


def test_sendfile_does_not_move_the_file_position(segment):
    append(segment, b"0123456789")
    os.lseek(segment, 3, os.SEEK_SET)
    left, right = socket.socketpair()
    with left, right:
        sendfile(left.fileno(), segment, 0, 10)
    assert os.lseek(segment, 0, os.SEEK_CUR) == 3


def test_sendfile_bad_fds_raise_oserror(segment):
    append(segment, b"0123456789")
    left, right = socket.socketpair()
    with left, right:
        with pytest.raises(OSError) as info:
            sendfile(-1, segment, 0, 10)
        assert info.value.errno == errno.EBADF
        with pytest.raises(OSError) as info:
            sendfile(left.fileno(), -1, 0, 10)
        assert info.value.errno == errno.EBADF
        with pytest.raises(OSError) as info:
            sendfile(left.fileno(), right.fileno(), 0, 10)    # in_fd must be seekable
        assert info.value.errno in (errno.EINVAL, errno.ESPIPE)


def test_sendfile_to_closed_peer_raises_broken_pipe(segment):
    append(segment, b"0123456789")
    left, right = socket.socketpair()
    right.close()
    with left:
        with pytest.raises(OSError) as info:
            sendfile(left.fileno(), segment, 0, 10)
        assert info.value.errno in (errno.EPIPE, errno.ECONNRESET)


def test_sendfile_rejects_negative_arguments(segment):
    with pytest.raises(ValueError):
        sendfile(1, segment, 0, -1)
    with pytest.raises(ValueError):
        sendfile(1, segment, -1, 1)
