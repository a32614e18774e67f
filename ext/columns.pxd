from cpython.ref cimport PyObject
from libc.stdint cimport int32_t, int64_t

from ext.cursor cimport batch_header_t, cursor_t

# The output columns, in the order of the cols array of a decoder_t. "Per record"
# columns hold one entry per decoded record (offsets columns n + 1), "per header" ones
# one per header of a decoded record (m + 1); data columns grow by the bytes copied.
cdef enum:
    COL_OFFSETS = 0                  # int64, per record
    COL_TIMESTAMPS = 1               # int64 microseconds, per record
    COL_TIMESTAMP_TYPES = 2          # int32, per record
    COL_KEY_OFFSETS = 3              # int32, per record + 1
    COL_KEY_VALIDITY = 4             # bitmap, per record
    COL_VALUE_OFFSETS = 5
    COL_VALUE_VALIDITY = 6
    COL_HEADER_LIST_OFFSETS = 7      # int32, per record + 1 (include_headers only)
    COL_HEADER_LIST_VALIDITY = 8     # bitmap, per record: 0 = no headers
    COL_HEADER_KEY_OFFSETS = 9       # int32, per header + 1
    COL_HEADER_VALUE_OFFSETS = 10
    COL_HEADER_VALUE_VALIDITY = 11   # bitmap, per header
    COL_KEY_DATA = 12                # bytes
    COL_VALUE_DATA = 13
    COL_HEADER_KEY_DATA = 14         # utf-8
    COL_HEADER_VALUE_DATA = 15
    N_COLS = 16

# One growable output column: a bytearray for the numeric columns (numpy views it,
# writable), a bytes for the rest. Owned here alone (refcount 1, never exported) so that
# it may be resized in place; a resize may move it, so data is re-read after each one.
# The Columns takes it at its final size. len (data columns) and cap are in bytes.
ctypedef struct colbuf_t:
    PyObject* obj
    unsigned char* data
    Py_ssize_t len
    Py_ssize_t cap
    bint numeric

# Everything decode_columns accumulates across the batches of one call. The counters
# move only when a whole record has been written: a record that runs out of room is
# parsed again from its first byte once the columns have grown.
ctypedef struct decoder_t:
    colbuf_t cols[N_COLS]
    Py_ssize_t n                     # records written
    Py_ssize_t m                     # headers written
    Py_ssize_t record_room           # records every per-record column has room for
    Py_ssize_t header_room           # headers every per-header column has room for
    Py_ssize_t key_nulls
    Py_ssize_t value_nulls
    Py_ssize_t header_list_nulls
    Py_ssize_t header_value_nulls
    int64_t start_offset
    int64_t end_offset
    bint include_headers

# Where the record loop of one batch stands; it returns to the caller (who holds the
# GIL) when a column needs room, the batch overflows int32 offsets, or a record is bad.
ctypedef struct section_t:
    cursor_t r                       # over the batch's (decompressed) records
    int32_t index                    # next record of the batch
    int status                       # see _Status in columns.pyx
    int error                        # _Error code, with CORRUPT
    int32_t error_header             # header index for the header errors
    Py_ssize_t error_bytes           # bytes left over, for the length errors
    int need_col                     # with NEED_ROOM: the column, or -1 records, -2 headers
    Py_ssize_t need_len              # with NEED_ROOM: bytes (data) or entries needed
    const unsigned char* seen_key_p[8]   # the previous record's j-th header key
    int32_t seen_key_len[8]


cdef class Columns:
    cdef readonly Py_ssize_t count
    cdef readonly object offsets
    cdef readonly object timestamps_us
    cdef readonly object timestamp_types
    cdef readonly object key_offsets
    cdef readonly bytes key_data
    cdef readonly object key_validity
    cdef readonly Py_ssize_t key_null_count
    cdef readonly object value_offsets
    cdef readonly bytes value_data
    cdef readonly object value_validity
    cdef readonly Py_ssize_t value_null_count
    cdef readonly bint include_headers
    cdef readonly Py_ssize_t header_count
    cdef readonly object header_list_offsets
    cdef readonly object header_list_validity
    cdef readonly Py_ssize_t header_list_null_count
    cdef readonly object header_key_offsets
    cdef readonly object header_key_data
    cdef readonly object header_value_offsets
    cdef readonly object header_value_data
    cdef readonly object header_value_validity
    cdef readonly Py_ssize_t header_value_null_count
    cdef readonly Py_ssize_t next_position
    cdef readonly int64_t last_offset


# The record loop over one batch's (decompressed) records; no Python objects, no GIL.
cdef void decode_section(decoder_t* d, const batch_header_t* h, section_t* c) noexcept nogil
