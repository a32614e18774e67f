# cython: language_level=3
"""Segment file IO: one write per append, sendfile per read; the GIL is released around
the system calls.

Buffers are taken through the buffer protocol (PyBUF_SIMPLE: C-contiguous, any object
that exports one: bytes, bytearray, memoryview slices, mmap, numpy), so a produce
request's batch bytes reach write(2) without a copy. While the GIL is released the
exporter's buffer stays pinned (a bytearray cannot be resized), so the pointer is stable.

On an error an OSError carries errno; when some bytes had already been transferred its
``characters_written`` says how many (a segment append cut short by ENOSPC leaves that
many bytes at the end of the file, which the caller truncates away).

Signals follow PEP 475. A signal that interrupts a blocked call shows up as EINTR, or
as a short count once some bytes moved; either way the loop takes the GIL, runs the
handlers, and carries on unless one raised (Ctrl-C ends a long blocking sendfile instead
of waiting for the peer), in which case that exception propagates. Full transfers never
touch the GIL.
"""
import os

from cpython.buffer cimport PyBUF_SIMPLE, PyBUF_WRITABLE, PyBuffer_Release, PyObject_GetBuffer
from libc.errno cimport EAGAIN, EINTR, errno
from libc.stdint cimport int64_t
from posix.types cimport off_t
from posix.unistd cimport pread, write


cdef extern from "Python.h":
    # Declared here without cpython.exc's "except -1": the exception a handler raised must
    # stay set for the caller, not be handled inside the noexcept loop.
    int check_signals "PyErr_CheckSignals" () noexcept


cdef extern from "<sys/sendfile.h>" nogil:
    ssize_t c_sendfile "sendfile" (int out_fd, int in_fd, off_t *offset, size_t count)


cdef inline bint _signal_handler_raised(int *err) noexcept nogil:
    with gil:
        if check_signals() != 0:
            err[0] = SIGNAL_RAISED
            return True
    return False


cdef Py_ssize_t write_all(int fd, const char *buf, Py_ssize_t length, int *err) noexcept nogil:
    cdef Py_ssize_t done = 0
    cdef ssize_t n
    err[0] = 0
    while done < length:
        n = write(fd, buf + done, <size_t>(length - done))
        if n >= 0:
            # write(2) returns 0 only for a zero count; a regular file that takes nothing
            # reports ENOSPC/EFBIG instead, so this cannot spin.
            done += n
            if done < length and _signal_handler_raised(err):
                break
        elif errno != EINTR:
            err[0] = errno
            break
        elif _signal_handler_raised(err):
            break
    return done


cdef Py_ssize_t pread_full(int fd, char *buf, Py_ssize_t length, int64_t position,
                           int *err) noexcept nogil:
    cdef Py_ssize_t done = 0
    cdef ssize_t n
    err[0] = 0
    while done < length:
        n = pread(fd, buf + done, <size_t>(length - done), <off_t>(position + done))
        if n > 0:
            done += n
            if done < length and _signal_handler_raised(err):
                break
        elif n == 0:
            break                       # end of file
        elif errno != EINTR:
            err[0] = errno
            break
        elif _signal_handler_raised(err):
            break
    return done


cdef Py_ssize_t sendfile_range(int out_fd, int in_fd, int64_t offset, Py_ssize_t count,
                               int *err) noexcept nogil:
    cdef off_t position = <off_t>offset
    cdef Py_ssize_t done = 0
    cdef ssize_t n
    err[0] = 0
    while done < count:
        n = c_sendfile(out_fd, in_fd, &position, <size_t>(count - done))
        if n > 0:
            done += n
            if done < count and _signal_handler_raised(err):
                break
        elif n == 0:
            break                       # offset reached the end of in_fd
        elif errno == EAGAIN:
            break                       # socket buffer full (EWOULDBLOCK is EAGAIN on Linux)
        elif errno != EINTR:
            err[0] = errno
            break
        elif _signal_handler_raised(err):
            break
    return done


cdef int _raise(int err, Py_ssize_t done) except -1:
    if err == SIGNAL_RAISED:
        return -1                       # the handler's exception is already set
    exc = OSError(err, os.strerror(err))
    if done > 0:
        exc.characters_written = done
    raise exc


def append(int fd, buf):
    """Write all of ``buf`` at the fd's current position (write(2) in a loop over short
    writes, EINTR retried). Returns the number of bytes written. Raises OSError."""
    cdef Py_buffer view
    cdef Py_ssize_t done
    cdef int err
    PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
    try:
        with nogil:
            done = write_all(fd, <const char *>view.buf, view.len, &err)
    finally:
        PyBuffer_Release(&view)
    if err != 0:
        _raise(err, done)
    return done


def pread_into(int fd, buf, int64_t position):
    """Fill ``buf`` from ``position``; returns bytes read (less at end of file)."""
    cdef Py_buffer view
    cdef Py_ssize_t done
    cdef int err
    PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE | PyBUF_WRITABLE)
    try:
        with nogil:
            done = pread_full(fd, <char *>view.buf, view.len, position, &err)
    finally:
        PyBuffer_Release(&view)
    if err != 0:
        _raise(err, done)
    return done


def sendfile(int out_fd, int in_fd, int64_t offset, Py_ssize_t count):
    """Copy up to ``count`` bytes from ``in_fd`` at ``offset`` to ``out_fd`` with
    sendfile(2), looping until done or the socket would block. Returns bytes sent
    (0 if it would block at once). Raises OSError for other errors."""
    cdef Py_ssize_t done
    cdef int err
    if count < 0:
        raise ValueError(f"count {count} is negative")
    if offset < 0:
        raise ValueError(f"offset {offset} is negative")
    with nogil:
        done = sendfile_range(out_fd, in_fd, offset, count, &err)
    if err != 0:
        _raise(err, done)
    return done
