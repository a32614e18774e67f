from libc.stdint cimport uint32_t

# CRC32C of n bytes at p, continuing from crc. The bytes must stay alive and unmoved
# for the call (hold the Py_buffer you took p from). Never fails short of MemoryError.
cdef long long crc32c_ptr(const unsigned char* p, Py_ssize_t n, uint32_t crc) except -1
