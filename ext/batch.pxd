from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint32_t

from ext.cursor cimport batch_header_t

# Fills *h from the batch at buf[pos:] of a buffer of n bytes, with read_header's
# checks (and the CRC when check_crc). Raises (Truncated)CorruptRecordError whose
# position is pos. Reads nothing at or past buf + n.
cdef int parse_header(const unsigned char* buf, Py_ssize_t n, Py_ssize_t pos,
                      batch_header_t* h, bint check_crc) except -1


cdef class BatchHeader:
    cdef readonly Py_ssize_t position
    cdef readonly int64_t base_offset
    cdef readonly int32_t batch_length
    cdef readonly int32_t partition_leader_epoch
    cdef readonly int8_t magic
    cdef readonly uint32_t crc
    cdef readonly int16_t attributes
    cdef readonly int32_t last_offset_delta
    cdef readonly int64_t base_timestamp
    cdef readonly int64_t max_timestamp
    cdef readonly int64_t producer_id
    cdef readonly int16_t producer_epoch
    cdef readonly int32_t base_sequence
    cdef readonly int32_t records_count


cdef class BatchSummary:
    cdef readonly Py_ssize_t count
    cdef readonly Py_ssize_t valid_bytes
    cdef readonly int64_t records_count
    cdef readonly int64_t first_offset
    cdef readonly int64_t last_offset
    cdef readonly int64_t max_timestamp
    cdef readonly int64_t offset_of_max_timestamp
    cdef readonly list positions
    cdef readonly list sizes
    cdef readonly list base_offsets
    cdef readonly list last_offsets
    cdef readonly list base_timestamps
    cdef readonly list min_timestamps
    cdef readonly list max_timestamps
    cdef readonly list partition_leader_epochs
    cdef readonly list attributes
    cdef readonly list records_counts
    cdef readonly list producer_ids
    cdef readonly list producer_epochs
    cdef readonly list base_sequences
    cdef readonly object error
    cdef readonly Py_ssize_t error_position

    cdef int add(self, const batch_header_t* h, Py_ssize_t start) except -1


cdef class Record:
    cdef readonly int64_t offset
    cdef readonly int64_t timestamp
    cdef readonly object key
    cdef readonly object value
    cdef readonly list headers
    cdef readonly int attributes
