from libc.stdint cimport int32_t, int64_t


cdef Py_ssize_t floor_slot(const unsigned char *data, Py_ssize_t entries,
                           Py_ssize_t entry_size, bint wide_key,
                           int64_t target) noexcept nogil
cdef Py_ssize_t first_slot_with_offset_at_least(const unsigned char *data,
                                                Py_ssize_t entries, Py_ssize_t entry_size,
                                                Py_ssize_t offset_at,
                                                int64_t relative) noexcept nogil
cdef Py_ssize_t valid_prefix(const unsigned char *data, Py_ssize_t slots,
                             Py_ssize_t entry_size, bint wide_key) noexcept nogil


cdef class _Index:
    # The file mapped whole (MAP_SHARED, PROT_READ); entry n lives at _data + n * _entry_size
    # and is written with pwrite (_write_entry), never stored through the mapping.
    # Invariants: 0 <= _entries <= _slots; _mapped == _slots * _entry_size;
    # _data is NULL iff _mapped == 0 or the index is closed (_fd == -1).
    cdef readonly str path
    cdef readonly int64_t base_offset
    cdef readonly bint writable
    cdef int _fd
    cdef unsigned char *_data
    cdef Py_ssize_t _mapped
    cdef Py_ssize_t _file_length   # bytes in the file (sanity_check); may exceed _mapped
    cdef Py_ssize_t _slots
    cdef Py_ssize_t _entries
    # Entry shape: the search key sits at byte 0 (int32, or int64 when _wide_key);
    # the relative offset at byte _offset_at.
    cdef Py_ssize_t _entry_size
    cdef bint _wide_key
    cdef Py_ssize_t _offset_at

    cdef int _open(self, object path, int64_t base_offset, Py_ssize_t max_index_size,
                   bint writable) except -1
    cdef int _map(self, Py_ssize_t length) except -1
    cdef void _unmap(self) noexcept
    cdef int _write_entry(self, const unsigned char *entry, Py_ssize_t slot) except -1
    cdef Py_ssize_t _written_slots(self) except -1
    cdef int _check_open(self) except -1
    cdef int _check_writable(self) except -1
    cdef int _resize(self, Py_ssize_t new_size) except -1
    cdef int _truncate_to_entries(self, Py_ssize_t entries) except -1
    cdef int32_t _relative_offset(self, int64_t offset) except? -1
    cdef int64_t _offset_of(self, Py_ssize_t n) noexcept nogil


cdef class OffsetIndex(_Index):
    cdef Py_ssize_t c_lookup(self, int64_t target_offset) noexcept nogil
    cdef int64_t c_position(self, Py_ssize_t slot) noexcept nogil


cdef class TimeIndex(_Index):
    cdef int64_t _last_timestamp   # -1 when empty
    cdef int64_t _last_offset      # base_offset when empty

    cdef Py_ssize_t c_lookup(self, int64_t target_timestamp) noexcept nogil
    cdef int64_t c_timestamp(self, Py_ssize_t slot) noexcept nogil
    cdef void _load_last_entry(self) noexcept
    cdef int _truncate_to_entries(self, Py_ssize_t entries) except -1
