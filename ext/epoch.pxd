from libc.stdint cimport int32_t, int64_t


cdef class LeaderEpochCache:
    cdef readonly object path           # str, or None for a cache kept in memory only
    # [(epoch, start_offset), ...]; epochs and start offsets both strictly increase.
    cdef list _entries

    cdef int _load(self) except -1
    cdef bint _assign(self, int32_t epoch, int64_t start_offset) except -1
    cdef tuple _latest(self)
    cdef Py_ssize_t _floor_index(self, int64_t epoch)
    cdef bytes _checkpoint_bytes(self)

    cpdef assign(self, int32_t epoch, int64_t start_offset, bint flush=*)
    cpdef tuple end_offset_for(self, int32_t requested_epoch, int64_t log_end_offset)
    cpdef int32_t epoch_for_offset(self, int64_t offset)
    cpdef truncate_from_end(self, int64_t end_offset, bint flush=*)
    cpdef truncate_from_start(self, int64_t start_offset, bint flush=*)
