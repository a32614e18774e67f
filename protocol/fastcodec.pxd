from libc.stdint cimport int16_t, int32_t, int64_t, uint8_t, uint64_t

# A bounds-checked read cursor over a borrowed buffer (hold the Py_buffer while it lives).
# Every read checks pos + n <= end and raises ProtocolError otherwise.
cdef struct Cursor:
    const uint8_t* data
    Py_ssize_t pos
    Py_ssize_t end

cdef int read_i16(Cursor* c, int16_t* out) except -1
cdef int read_i32(Cursor* c, int32_t* out) except -1
cdef int read_uvarint(Cursor* c, int64_t* out) except -1
cdef int skip_tagged_fields(Cursor* c) except -1

# A growable output buffer. Invariant: callers reserve() before the put_*() stores, which
# are unchecked; one reserve covers a run of fixed-width fields.
cdef struct Out:
    char* data
    Py_ssize_t len
    Py_ssize_t cap

cdef int out_init(Out* o, Py_ssize_t cap) except -1
cdef void out_free(Out* o) noexcept
cdef int reserve(Out* o, Py_ssize_t n) except -1
cdef void put_i8(Out* o, int v) noexcept
cdef void put_i16(Out* o, int16_t v) noexcept
cdef void put_i32(Out* o, int32_t v) noexcept
cdef void put_i64(Out* o, int64_t v) noexcept
cdef void put_uvarint(Out* o, uint64_t v) noexcept
cdef int put_bytes(Out* o, const char* p, Py_ssize_t n) except -1
