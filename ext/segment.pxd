from libc.stdint cimport int64_t


# The system-call loops behind append/pread_into/sendfile, callable without the GIL.
# Each returns the bytes transferred and sets err[0] to 0, to the errno that stopped it
# (bytes transferred before the error are still counted), or to SIGNAL_RAISED when a
# signal handler run on EINTR raised: that exception is then set, for the caller to
# propagate once it holds the GIL.
cdef enum:
    SIGNAL_RAISED = -1

cdef Py_ssize_t write_all(int fd, const char *buf, Py_ssize_t length, int *err) noexcept nogil
cdef Py_ssize_t pread_full(int fd, char *buf, Py_ssize_t length, int64_t position,
                           int *err) noexcept nogil
cdef Py_ssize_t sendfile_range(int out_fd, int in_fd, int64_t offset, Py_ssize_t count,
                               int *err) noexcept nogil
