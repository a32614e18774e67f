# cython: language_level=3
"""Record batches v2 decoded into Arrow-shaped columns, for the Spark reader.

decode_columns walks a buffer of consecutive batches (a slice of a segment file: it
starts at a batch boundary and may end inside a torn batch) and appends every record
with start_offset <= offset < end_offset of every non-control batch to these columns,
for n records and, with include_headers, m headers. No Python object per record.

    column                 type           entries  notes
    offsets                int64          n        absolute offsets
    timestamps_us          int64          n        ms * 1000; LogAppendTime batch: its maxTimestamp
    timestamp_types        int32          n        0 CreateTime, 1 LogAppendTime (attribute bit 3)
    key_offsets            int32          n + 1    Arrow binary: key i is key_data[o[i]:o[i + 1]]
    key_data               bytes
    key_validity           bytes | None   n bits   Arrow bitmap, LSB first, 1 = set; None: no null
    value_offsets, value_data, value_validity       as for the key
    header_list_offsets    int32          n + 1    record i's headers are [o[i], o[i + 1])
    header_list_validity   bytes | None   n bits   0 for a record without headers (Spark: null)
    header_key_offsets     int32          m + 1    over header_key_data, utf-8 (checked)
    header_value_offsets   int32          m + 1    over header_value_data
    header_value_validity  bytes | None   m bits   a header value may be null

Invariant: every data column stays within 2**31 - 1 bytes, what an int32 offset (Arrow
binary, which Spark requires, not large_binary) can address.

Theory of operation. Batches are walked with batch.parse_header, holding the GIL (a bad
header raises). A control batch, or one whose offsets all lie outside the range, is
passed over from its header: no CRC, no decompression. Any other batch is CRC-checked
(check_crc), decompressed (ext.compress) and given to decode_section, which needs no GIL
(it is released for sections of 16 KiB and more), checks every record as
batch.decode_records does (in range or not), writes the in-range ones straight into the
columns, and returns when

    DONE        the batch is done;
    NEED_ROOM   a column is full: the caller grows it and calls again. Counters move only
                once a whole record is written, so the record is parsed afresh;
    TOO_LARGE   a data column would pass the int32 limit: the batch's output is dropped
                and the call ends at that batch's start (next_position), for the caller
                to continue from with a new call;
    CORRUPT     a record is malformed: CorruptRecordError.

A buffer that ends inside a batch (a torn tail: TruncatedBatchError from the header) ends
the walk quietly at that batch's start. Any other bad batch raises CorruptRecordError
whose position is base_position plus the batch's position in data.
"""
cimport cython
from cpython.buffer cimport PyBUF_READ, PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytearray cimport (PyByteArray_AS_STRING, PyByteArray_FromStringAndSize,
                                PyByteArray_Resize)
from cpython.bytes cimport (PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE,
                            _PyBytes_Resize)
from cpython.memoryview cimport PyMemoryView_FromMemory
from cpython.ref cimport Py_INCREF, Py_XDECREF, PyObject
from libc.stdint cimport INT32_MAX, int32_t, int64_t, uint32_t, uint64_t
from libc.string cimport memcmp, memcpy, memset

from ext.batch cimport parse_header
from ext.compress cimport decompress
from ext.crc cimport crc32c_ptr
from ext.cursor cimport (ATTR_COMPRESSION_MASK, ATTR_CONTROL, ATTR_TIMESTAMP_TYPE, HEADER_SIZE,
                         LENGTH_FIELDS_SIZE, OFF_ATTRIBUTES, batch_header_t, cursor_t,
                         read_length, read_varint, read_varlong)

import numpy as np

from ext.batch import TruncatedBatchError
from ext.errors import CorruptRecordError

ctypedef const unsigned char* cptr

cdef enum _Status:
    DONE = 0
    NEED_ROOM = 1
    TOO_LARGE = 2
    CORRUPT = 3

cdef enum _Error:
    ERR_RECORDS_END = 1
    ERR_RECORD_LENGTH
    ERR_TIMESTAMP
    ERR_OFFSET
    ERR_KEY_LENGTH
    ERR_VALUE_LENGTH
    ERR_HEADER_COUNT
    ERR_HEADER_KEY_LENGTH
    ERR_HEADER_KEY_UTF8
    ERR_HEADER_VALUE_LENGTH
    ERR_RECORD_LEFTOVER
    ERR_TRAILING

cdef enum:
    NEED_RECORDS = -1
    NEED_HEADERS = -2
    _KEY_CACHE = 8
    _FIRST_RECORDS = 1024
    _FIRST_BYTES = 64 * 1024
    # Below this many bytes of records the GIL is kept: releasing and taking it back costs
    # about what decoding a few small records does.
    _NOGIL_MIN_BYTES = 16 * 1024

# The largest a data column may grow: INT32_MAX, lowered only by tests (the limit cannot
# be reached in a unit test's memory).
cdef Py_ssize_t _column_limit = INT32_MAX


def _set_column_limit(Py_ssize_t limit):
    """For tests only: lower the per-column byte limit; returns the previous one."""
    global _column_limit
    previous = _column_limit
    _column_limit = INT32_MAX if limit <= 0 or limit > INT32_MAX else limit
    return previous


# ---- utf-8 ----

cdef bint _is_utf8(cptr s, Py_ssize_t n) noexcept nogil:
    # Strict UTF-8 as Python decodes it: no overlong forms, no surrogates, <= U+10FFFF.
    cdef Py_ssize_t i = 0, k, more
    cdef unsigned char c, lo, hi
    while i < n:
        c = s[i]
        if c < 0x80:
            i += 1
            continue
        lo = 0x80
        hi = 0xBF
        if 0xC2 <= c <= 0xDF:
            more = 1
        elif 0xE0 <= c <= 0xEF:
            more = 2
            if c == 0xE0:
                lo = 0xA0
            elif c == 0xED:
                hi = 0x9F
        elif 0xF0 <= c <= 0xF4:
            more = 3
            if c == 0xF0:
                lo = 0x90
            elif c == 0xF4:
                hi = 0x8F
        else:
            return 0
        if n - i <= more or not lo <= s[i + 1] <= hi:
            return 0
        for k in range(2, more + 1):
            if not 0x80 <= s[i + k] <= 0xBF:
                return 0
        i += more + 1
    return 1


# ---- the record loop ----

cdef inline void _put_bit(unsigned char* bits, Py_ssize_t i, bint valid) noexcept nogil:
    # Bits are written in index order, so the first bit of each byte initialises it.
    cdef unsigned char mask = <unsigned char>(1 << (i & 7))
    if (i & 7) == 0:
        bits[i >> 3] = valid
    elif valid:
        bits[i >> 3] |= mask
    else:
        bits[i >> 3] &= ~mask


cdef inline void _corrupt(section_t* c, int error) noexcept nogil:
    c.status = CORRUPT
    c.error = error


cdef inline bint _room(decoder_t* d, section_t* c, int col, Py_ssize_t used, Py_ssize_t extra,
                       cptr record) noexcept nogil:
    # used <= _column_limit and extra <= INT32_MAX: the sum cannot overflow.
    if used + extra > _column_limit:
        c.status = TOO_LARGE
        return 0
    if used + extra > d.cols[col].cap:
        c.status = NEED_ROOM
        c.need_col = col
        c.need_len = used + extra
        c.r.p = record
        return 0
    return 1


cdef inline bint _check_header_key(section_t* c, int32_t j, cptr key, int32_t length) noexcept nogil:
    # Producers repeat the same header keys record after record: a key equal to the
    # previous record's j-th key was already found to be utf-8.
    if j < _KEY_CACHE and c.seen_key_len[j] == length and memcmp(c.seen_key_p[j], key, length) == 0:
        return 1
    if not _is_utf8(key, length):
        _corrupt(c, ERR_HEADER_KEY_UTF8)
        return 0
    if j < _KEY_CACHE:
        c.seen_key_p[j] = key
        c.seen_key_len[j] = length
    return 1


cdef inline bint _skip_headers(cursor_t* rr, int32_t count, section_t* c) noexcept nogil:
    # Checks what _write_headers checks (as decode_records does), writes nothing.
    cdef int32_t j, length
    for j in range(count):
        c.error_header = j
        if not read_length(rr, &length, False):
            _corrupt(c, ERR_HEADER_KEY_LENGTH)
            return 0
        if not _check_header_key(c, j, rr.p, length):
            return 0
        rr.p += length
        if not read_length(rr, &length, True):
            _corrupt(c, ERR_HEADER_VALUE_LENGTH)
            return 0
        if length > 0:
            rr.p += length
    return 1


cdef bint _write_headers(decoder_t* d, section_t* c, cursor_t* rr, int32_t count, cptr record,
                         Py_ssize_t* m_io, Py_ssize_t* nulls_io) noexcept nogil:
    # Appends the record's headers after the committed ones; m_io/nulls_io carry the
    # uncommitted header count and null count, to be committed with the record.
    cdef colbuf_t* cols = d.cols
    cdef int32_t j, hk_len, hv_len
    cdef Py_ssize_t m = m_io[0]
    cdef Py_ssize_t hk_used = cols[COL_HEADER_KEY_DATA].len
    cdef Py_ssize_t hv_used = cols[COL_HEADER_VALUE_DATA].len
    for j in range(count):
        c.error_header = j
        if m >= d.header_room:
            c.status = NEED_ROOM
            c.need_col = NEED_HEADERS
            c.need_len = m + 1
            c.r.p = record
            return 0
        if not read_length(rr, &hk_len, False):
            _corrupt(c, ERR_HEADER_KEY_LENGTH)
            return 0
        if not _check_header_key(c, j, rr.p, hk_len):
            return 0
        if not _room(d, c, COL_HEADER_KEY_DATA, hk_used, hk_len, record):
            return 0
        memcpy(cols[COL_HEADER_KEY_DATA].data + hk_used, rr.p, hk_len)
        hk_used += hk_len
        rr.p += hk_len
        (<int32_t*>cols[COL_HEADER_KEY_OFFSETS].data)[m + 1] = <int32_t>hk_used
        if not read_length(rr, &hv_len, True):
            _corrupt(c, ERR_HEADER_VALUE_LENGTH)
            return 0
        if hv_len >= 0:
            if not _room(d, c, COL_HEADER_VALUE_DATA, hv_used, hv_len, record):
                return 0
            memcpy(cols[COL_HEADER_VALUE_DATA].data + hv_used, rr.p, hv_len)
            hv_used += hv_len
            rr.p += hv_len
        else:
            nulls_io[0] += 1
        _put_bit(cols[COL_HEADER_VALUE_VALIDITY].data, m, hv_len >= 0)
        (<int32_t*>cols[COL_HEADER_VALUE_OFFSETS].data)[m + 1] = <int32_t>hv_used
        m += 1
    m_io[0] = m
    return 1


cdef void decode_section(decoder_t* d, const batch_header_t* h, section_t* c) noexcept nogil:
    # Every record is checked as batch.decode_records checks it (header keys utf-8
    # included), in range or not: a batch one rejects, the other rejects.
    cdef colbuf_t* cols = d.cols
    cdef cursor_t rr
    cdef cptr record, key_p, value_p
    cdef int32_t length, offset_delta, key_len, value_len, header_count
    cdef int64_t ts_delta, offset, timestamp
    cdef bint log_append_time = (h.attributes & ATTR_TIMESTAMP_TYPE) != 0
    cdef Py_ssize_t n, m, key_used, value_used, header_nulls
    c.status = DONE
    while c.index < h.records_count:
        if c.r.p == c.r.end:
            _corrupt(c, ERR_RECORDS_END)
            return
        record = c.r.p
        if not read_length(&c.r, &length, False) or length == 0:
            _corrupt(c, ERR_RECORD_LENGTH)
            return
        rr.base = c.r.base
        rr.p = c.r.p + 1  # past the attributes byte (unused)
        rr.end = c.r.p + length
        if not read_varlong(&rr, &ts_delta):
            _corrupt(c, ERR_TIMESTAMP)
            return
        if not read_varint(&rr, &offset_delta):
            _corrupt(c, ERR_OFFSET)
            return
        if not read_length(&rr, &key_len, True):
            _corrupt(c, ERR_KEY_LENGTH)
            return
        key_p = rr.p
        if key_len > 0:
            rr.p += key_len
        if not read_length(&rr, &value_len, True):
            _corrupt(c, ERR_VALUE_LENGTH)
            return
        value_p = rr.p
        if value_len > 0:
            rr.p += value_len
        if not read_varint(&rr, &header_count) or header_count < 0:
            _corrupt(c, ERR_HEADER_COUNT)
            return
        # Wraps rather than overflows (C signed overflow is undefined): only forged
        # deltas reach the wrap, as in batch.decode_records.
        offset = <int64_t>(<uint64_t>h.base_offset + <uint64_t><int64_t>offset_delta)
        if offset < d.start_offset or offset >= d.end_offset:
            if not _skip_headers(&rr, header_count, c):
                return
            if rr.p != rr.end:
                c.error_bytes = rr.end - rr.p
                _corrupt(c, ERR_RECORD_LEFTOVER)
                return
        else:
            n = d.n
            if n >= d.record_room:
                c.status = NEED_ROOM
                c.need_col = NEED_RECORDS
                c.need_len = n + 1
                c.r.p = record
                return
            key_used = cols[COL_KEY_DATA].len
            if key_len > 0:
                if not _room(d, c, COL_KEY_DATA, key_used, key_len, record):
                    return
                memcpy(cols[COL_KEY_DATA].data + key_used, key_p, key_len)
                key_used += key_len
            value_used = cols[COL_VALUE_DATA].len
            if value_len > 0:
                if not _room(d, c, COL_VALUE_DATA, value_used, value_len, record):
                    return
                memcpy(cols[COL_VALUE_DATA].data + value_used, value_p, value_len)
                value_used += value_len
            m = d.m
            header_nulls = 0
            if d.include_headers:
                if not _write_headers(d, c, &rr, header_count, record, &m, &header_nulls):
                    return
            elif not _skip_headers(&rr, header_count, c):
                return
            if rr.p != rr.end:
                c.error_bytes = rr.end - rr.p
                _corrupt(c, ERR_RECORD_LEFTOVER)
                return
            # The whole record is in: write its fixed-size entries and commit.
            if log_append_time:
                timestamp = h.max_timestamp
            else:
                timestamp = <int64_t>(<uint64_t>h.base_timestamp + <uint64_t>ts_delta)
            (<int64_t*>cols[COL_OFFSETS].data)[n] = offset
            (<int64_t*>cols[COL_TIMESTAMPS].data)[n] = <int64_t>(<uint64_t>timestamp * 1000)
            (<int32_t*>cols[COL_TIMESTAMP_TYPES].data)[n] = log_append_time
            (<int32_t*>cols[COL_KEY_OFFSETS].data)[n + 1] = <int32_t>key_used
            (<int32_t*>cols[COL_VALUE_OFFSETS].data)[n + 1] = <int32_t>value_used
            _put_bit(cols[COL_KEY_VALIDITY].data, n, key_len >= 0)
            _put_bit(cols[COL_VALUE_VALIDITY].data, n, value_len >= 0)
            d.key_nulls += key_len < 0
            d.value_nulls += value_len < 0
            if d.include_headers:
                (<int32_t*>cols[COL_HEADER_LIST_OFFSETS].data)[n + 1] = <int32_t>m
                _put_bit(cols[COL_HEADER_LIST_VALIDITY].data, n, header_count > 0)
                d.header_list_nulls += header_count == 0
                d.header_value_nulls += header_nulls
                d.m = m
                cols[COL_HEADER_KEY_DATA].len = \
                    (<int32_t*>cols[COL_HEADER_KEY_OFFSETS].data)[m]
                cols[COL_HEADER_VALUE_DATA].len = \
                    (<int32_t*>cols[COL_HEADER_VALUE_OFFSETS].data)[m]
            cols[COL_KEY_DATA].len = key_used
            cols[COL_VALUE_DATA].len = value_used
            d.n = n + 1
        c.r.p = rr.end
        c.index += 1
    if c.r.p != c.r.end:
        c.error_bytes = c.r.end - c.r.p
        _corrupt(c, ERR_TRAILING)


# ---- the columns: growth, hand-over, release ----

cdef int _init_col(colbuf_t* b, Py_ssize_t cap, bint numeric) except -1:
    b.numeric = numeric
    b.len = 0
    b.cap = cap
    obj = PyByteArray_FromStringAndSize(NULL, cap) if numeric else PyBytes_FromStringAndSize(NULL, cap)
    Py_INCREF(obj)
    b.obj = <PyObject*>obj
    b.data = <unsigned char*>(PyByteArray_AS_STRING(obj) if numeric else PyBytes_AS_STRING(obj))
    return 0


cdef int _resize(colbuf_t* b, Py_ssize_t size) except -1:
    # b.obj has no other owner and no buffer export, so both resizes may move it.
    if b.numeric:
        PyByteArray_Resize(<object>b.obj, size)
        b.data = <unsigned char*>PyByteArray_AS_STRING(<object>b.obj)
    else:
        _PyBytes_Resize(&b.obj, size)
        b.data = <unsigned char*>PyBytes_AS_STRING(<object>b.obj)
    b.cap = size
    return 0


cdef int _reserve(colbuf_t* b, Py_ssize_t need) except -1:
    # Doubling: a column of k bytes is copied O(k) times in all (large blocks are often
    # grown in place by mremap).
    if need > b.cap:
        _resize(b, max(need, 2 * b.cap))
    return 0


cdef int _grow_records(decoder_t* d, Py_ssize_t need) except -1:
    cdef Py_ssize_t room = max(need, 2 * d.record_room)
    _reserve(&d.cols[COL_OFFSETS], room * 8)
    _reserve(&d.cols[COL_TIMESTAMPS], room * 8)
    _reserve(&d.cols[COL_TIMESTAMP_TYPES], room * 4)
    _reserve(&d.cols[COL_KEY_OFFSETS], (room + 1) * 4)
    _reserve(&d.cols[COL_KEY_VALIDITY], (room + 7) // 8)
    _reserve(&d.cols[COL_VALUE_OFFSETS], (room + 1) * 4)
    _reserve(&d.cols[COL_VALUE_VALIDITY], (room + 7) // 8)
    if d.include_headers:
        _reserve(&d.cols[COL_HEADER_LIST_OFFSETS], (room + 1) * 4)
        _reserve(&d.cols[COL_HEADER_LIST_VALIDITY], (room + 7) // 8)
    d.record_room = room
    return 0


cdef int _grow_headers(decoder_t* d, Py_ssize_t need) except -1:
    cdef Py_ssize_t room = max(need, 2 * d.header_room)
    _reserve(&d.cols[COL_HEADER_KEY_OFFSETS], (room + 1) * 4)
    _reserve(&d.cols[COL_HEADER_VALUE_OFFSETS], (room + 1) * 4)
    _reserve(&d.cols[COL_HEADER_VALUE_VALIDITY], (room + 7) // 8)
    d.header_room = room
    return 0


cdef int _init_decoder(decoder_t* d, bint include_headers) except -1:
    cdef int col
    cdef bint data, bitmap, headers
    for col in range(N_COLS):
        data = col >= COL_KEY_DATA
        bitmap = col in (COL_KEY_VALIDITY, COL_VALUE_VALIDITY, COL_HEADER_LIST_VALIDITY,
                         COL_HEADER_VALUE_VALIDITY)
        headers = (COL_HEADER_LIST_OFFSETS <= col <= COL_HEADER_VALUE_VALIDITY
                   or col >= COL_HEADER_KEY_DATA)
        if include_headers or not headers:
            _init_col(&d.cols[col], _FIRST_BYTES if data else 8, not (data or bitmap))
    _grow_records(d, _FIRST_RECORDS)
    if include_headers:
        _grow_headers(d, _FIRST_RECORDS)
        (<int32_t*>d.cols[COL_HEADER_LIST_OFFSETS].data)[0] = 0
        (<int32_t*>d.cols[COL_HEADER_KEY_OFFSETS].data)[0] = 0
        (<int32_t*>d.cols[COL_HEADER_VALUE_OFFSETS].data)[0] = 0
    (<int32_t*>d.cols[COL_KEY_OFFSETS].data)[0] = 0
    (<int32_t*>d.cols[COL_VALUE_OFFSETS].data)[0] = 0
    return 0


cdef void _release(decoder_t* d) noexcept:
    cdef int col
    for col in range(N_COLS):
        Py_XDECREF(d.cols[col].obj)
        d.cols[col].obj = NULL


cdef object _take(colbuf_t* b, Py_ssize_t size):
    # Hands the column over at its final size; the decoder forgets it.
    _resize(b, size)
    out = <object>b.obj
    Py_XDECREF(b.obj)
    b.obj = NULL
    return out


cdef object _take_array(colbuf_t* b, Py_ssize_t count, object dtype):
    return np.frombuffer(_take(b, count * np.dtype(dtype).itemsize), dtype)


cdef object _take_bitmap(colbuf_t* b, Py_ssize_t count, Py_ssize_t nulls):
    if nulls == 0:
        return None
    if count & 7:
        # Bits past count may be left from a batch dropped as TOO_LARGE; Arrow wants 0.
        b.data[count >> 3] &= <unsigned char>((1 << (count & 7)) - 1)
    return _take(b, (count + 7) >> 3)


@cython.final
cdef class Columns:
    """The decoded columns of one decode_columns call (see the module docstring)."""

    def __repr__(self):
        return (f"Columns(count={self.count}, header_count={self.header_count}, "
                f"next_position={self.next_position}, last_offset={self.last_offset})")


cdef Columns _finish(decoder_t* d, Py_ssize_t next_position, int64_t last_offset):
    cdef Columns out = Columns.__new__(Columns)
    cdef Py_ssize_t n = d.n, m = d.m
    out.count = n
    out.next_position = next_position
    out.last_offset = last_offset
    out.offsets = _take_array(&d.cols[COL_OFFSETS], n, np.int64)
    out.timestamps_us = _take_array(&d.cols[COL_TIMESTAMPS], n, np.int64)
    out.timestamp_types = _take_array(&d.cols[COL_TIMESTAMP_TYPES], n, np.int32)
    out.key_offsets = _take_array(&d.cols[COL_KEY_OFFSETS], n + 1, np.int32)
    out.key_data = _take(&d.cols[COL_KEY_DATA], d.cols[COL_KEY_DATA].len)
    out.key_validity = _take_bitmap(&d.cols[COL_KEY_VALIDITY], n, d.key_nulls)
    out.key_null_count = d.key_nulls
    out.value_offsets = _take_array(&d.cols[COL_VALUE_OFFSETS], n + 1, np.int32)
    out.value_data = _take(&d.cols[COL_VALUE_DATA], d.cols[COL_VALUE_DATA].len)
    out.value_validity = _take_bitmap(&d.cols[COL_VALUE_VALIDITY], n, d.value_nulls)
    out.value_null_count = d.value_nulls
    out.include_headers = d.include_headers
    if d.include_headers:
        out.header_count = m
        out.header_list_offsets = _take_array(&d.cols[COL_HEADER_LIST_OFFSETS], n + 1, np.int32)
        out.header_list_validity = _take_bitmap(&d.cols[COL_HEADER_LIST_VALIDITY], n,
                                                d.header_list_nulls)
        out.header_list_null_count = d.header_list_nulls
        out.header_key_offsets = _take_array(&d.cols[COL_HEADER_KEY_OFFSETS], m + 1, np.int32)
        out.header_key_data = _take(&d.cols[COL_HEADER_KEY_DATA], d.cols[COL_HEADER_KEY_DATA].len)
        out.header_value_offsets = _take_array(&d.cols[COL_HEADER_VALUE_OFFSETS], m + 1, np.int32)
        out.header_value_data = _take(&d.cols[COL_HEADER_VALUE_DATA],
                                      d.cols[COL_HEADER_VALUE_DATA].len)
        out.header_value_validity = _take_bitmap(&d.cols[COL_HEADER_VALUE_VALIDITY], m,
                                                 d.header_value_nulls)
        out.header_value_null_count = d.header_value_nulls
    return out


# ---- batches ----

cdef str _error_text(const section_t* c, const batch_header_t* h):
    cdef int e = c.error
    if e == ERR_RECORDS_END:
        return f"the records end after {c.index} of the {h.records_count} counted"
    if e == ERR_TRAILING:
        return f"{c.error_bytes} bytes follow the {h.records_count} counted records"
    if e == ERR_RECORD_LEFTOVER:
        what = f"{c.error_bytes} bytes left over inside the record"
    elif e == ERR_HEADER_KEY_LENGTH:
        what = f"header {c.error_header}: bad key length"
    elif e == ERR_HEADER_KEY_UTF8:
        what = f"header {c.error_header}: key is not utf-8"
    elif e == ERR_HEADER_VALUE_LENGTH:
        what = f"header {c.error_header}: bad value length"
    else:
        what = {ERR_RECORD_LENGTH: "bad record length",
                ERR_TIMESTAMP: "bad timestampDelta varlong",
                ERR_OFFSET: "bad offsetDelta varint",
                ERR_KEY_LENGTH: "bad key length",
                ERR_VALUE_LENGTH: "bad value length",
                ERR_HEADER_COUNT: "bad header count"}[e]
    return f"record {c.index}: {what}"


cdef object _batch_error(const batch_header_t* h, Py_ssize_t base_position, str what):
    cdef Py_ssize_t at = base_position + h.position
    return CorruptRecordError(
        f"batch at {at} (offsets {h.base_offset}..{h.base_offset + h.last_offset_delta}): {what}",
        at)


cdef object _header_error(object e, Py_ssize_t pos, Py_ssize_t base_position):
    # parse_header names the position in data; the caller's position is base_position on.
    message = str(e)
    prefix = f"batch at {pos}: "
    if message.startswith(prefix):
        message = message[len(prefix):]
    return CorruptRecordError(f"batch at {base_position + pos}: {message}", base_position + pos)


cdef bint _decode_batch(decoder_t* d, const batch_header_t* h, cptr buf, bint check_crc,
                        Py_ssize_t base_position) except -1:
    # Appends the batch's in-range records; returns 0, having appended nothing, when a
    # column would pass the int32 limit (TOO_LARGE), 1 otherwise.
    cdef section_t c
    cdef Py_ssize_t size = h.batch_length + LENGTH_FIELDS_SIZE
    cdef cptr section = buf + h.position + HEADER_SIZE
    cdef Py_ssize_t section_len = size - HEADER_SIZE
    cdef int codec = h.attributes & ATTR_COMPRESSION_MASK
    cdef uint32_t crc
    cdef bytes plain
    cdef int i
    cdef Py_ssize_t n0 = d.n, m0 = d.m, key_nulls0 = d.key_nulls, value_nulls0 = d.value_nulls
    cdef Py_ssize_t list_nulls0 = d.header_list_nulls, hv_nulls0 = d.header_value_nulls
    cdef Py_ssize_t key0 = d.cols[COL_KEY_DATA].len, value0 = d.cols[COL_VALUE_DATA].len
    cdef Py_ssize_t hk0 = d.cols[COL_HEADER_KEY_DATA].len, hv0 = d.cols[COL_HEADER_VALUE_DATA].len
    if check_crc:
        crc = <uint32_t>crc32c_ptr(buf + h.position + OFF_ATTRIBUTES, size - OFF_ATTRIBUTES, 0)
        if crc != h.crc:
            raise _batch_error(h, base_position, f"CRC32C is {crc:#010x}, header says {h.crc:#010x}")
    if codec:
        if codec > 4:
            raise _batch_error(h, base_position, f"unknown codec {codec}")
        try:
            plain = decompress(codec, PyMemoryView_FromMemory(<char*>section, section_len, PyBUF_READ))
        except CorruptRecordError as e:
            raise _batch_error(h, base_position, str(e)) from e
        section = <cptr>PyBytes_AS_STRING(plain)
        section_len = PyBytes_GET_SIZE(plain)
    memset(&c, 0, sizeof(c))
    c.r.base = section
    c.r.p = section
    c.r.end = section + section_len
    for i in range(_KEY_CACHE):
        c.seen_key_len[i] = -1
    while True:
        if section_len >= _NOGIL_MIN_BYTES:
            with nogil:
                decode_section(d, h, &c)
        else:
            decode_section(d, h, &c)
        if c.status != NEED_ROOM:
            break
        if c.need_col == NEED_RECORDS:
            _grow_records(d, c.need_len)
        elif c.need_col == NEED_HEADERS:
            _grow_headers(d, c.need_len)
        else:
            _reserve(&d.cols[c.need_col], c.need_len)
    if c.status == CORRUPT:
        raise _batch_error(h, base_position, _error_text(&c, h))
    if c.status == TOO_LARGE:
        if n0 == 0:
            raise _batch_error(h, base_position,
                               f"its records alone pass {_column_limit} bytes in one column")
        d.n, d.m, d.key_nulls, d.value_nulls = n0, m0, key_nulls0, value_nulls0
        d.header_list_nulls, d.header_value_nulls = list_nulls0, hv_nulls0
        d.cols[COL_KEY_DATA].len, d.cols[COL_VALUE_DATA].len = key0, value0
        d.cols[COL_HEADER_KEY_DATA].len, d.cols[COL_HEADER_VALUE_DATA].len = hk0, hv0
        return 0
    return 1


def decode_columns(data, Py_ssize_t start_offset, Py_ssize_t end_offset,
                   bint include_headers=False, bint check_crc=False, Py_ssize_t base_position=0):
    cdef Py_buffer view
    cdef decoder_t d
    cdef batch_header_t h
    cdef Py_ssize_t pos = 0, n
    cdef int64_t last_offset = -1, last
    cdef cptr buf
    memset(&d, 0, sizeof(d))
    d.start_offset = start_offset
    d.end_offset = end_offset
    d.include_headers = include_headers
    PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    try:
        _init_decoder(&d, include_headers)
        buf = <cptr>view.buf
        n = view.len
        while pos < n:
            try:
                parse_header(buf, n, pos, &h, False)
            except TruncatedBatchError:
                break
            except CorruptRecordError as e:
                raise _header_error(e, pos, base_position) from None
            last = h.base_offset + h.last_offset_delta
            if (not (h.attributes & ATTR_CONTROL) and h.records_count > 0
                    and last >= start_offset and h.base_offset < end_offset):
                if not _decode_batch(&d, &h, buf, check_crc, base_position):
                    break
            pos += h.batch_length + LENGTH_FIELDS_SIZE
            last_offset = last
        return _finish(&d, pos, last_offset)
    finally:
        PyBuffer_Release(&view)
        _release(&d)
