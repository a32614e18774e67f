from libc.stdint cimport int64_t, uint64_t

# One slot of the table: a key's 128-bit digest and the offset of its last occurrence, the
# 24 bytes of Kafka's SkimpyOffsetMap entry for MD5. An empty slot holds offset -1.
ctypedef struct slot_t:
    uint64_t h0
    uint64_t h1
    int64_t offset


cdef class OffsetMap:
    cdef slot_t* table
    cdef readonly Py_ssize_t slots
    cdef readonly Py_ssize_t size
    cdef readonly double load_factor
    cdef readonly int64_t latest_offset

    # The offset the map holds for the key of n bytes at p, -1 if none.
    cdef int64_t lookup(self, const unsigned char* p, Py_ssize_t n) noexcept nogil
    # Puts the key of n bytes at p with offset (>= 0), keeping the greater offset of a key
    # already there. Returns 0, or -1 when the key is new and every slot is taken.
    cdef int insert(self, const unsigned char* p, Py_ssize_t n, int64_t offset) noexcept nogil
