# cython: language_level=3
"""CRC32C (Castagnoli, polynomial 0x1EDC6F41 reflected), the checksum of record batch v2.

The arithmetic is the `crc32c` package's (SSE4.2 / ARMv8 CRC instructions, with a
slicing-by-8 software path on other CPUs); this module only adapts it to raw pointers
so other kernels (batch) can checksum a slice of a buffer they already hold without
building a bytes object. HARDWARE says which path the package took.
"""
from cpython.buffer cimport PyBUF_READ
from cpython.memoryview cimport PyMemoryView_FromMemory
from libc.stdint cimport uint32_t

import crc32c as _crc32c_package

# Bound once at import: a module-global C reference skips the attribute lookups on
# every call, which matter for the many small batches a produce request can carry.
cdef object _crc32c_impl = _crc32c_package.crc32c

HARDWARE = bool(_crc32c_package.hardware_based)


def crc32c(object data, uint32_t crc=0):
    return _crc32c_impl(data, crc)


cdef long long crc32c_ptr(const unsigned char* p, Py_ssize_t n, uint32_t crc) except -1:
    # The memoryview borrows p without copying; it dies before we return, so it never
    # outlives the caller's buffer even though it does not pin it.
    view = PyMemoryView_FromMemory(<char*>p, n, PyBUF_READ)
    return <long long>_crc32c_impl(view, crc)
