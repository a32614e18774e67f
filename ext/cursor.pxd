# The one read cursor over bytes (record batches, their records, and the wire protocol's
# frames: protocol/wire.pxd's Cursor is this cursor_t), and the one place that names where
# the fields of a record batch v2 (Apache Kafka's DefaultRecordBatch) lie.
#
# Everything here is `cdef inline`, bodies included: a module that cimports it compiles its
# own copy, so nothing on the per-field path calls across extensions. No reader raises or
# needs the GIL: a read that does not fit returns 0 and leaves the complaint to the caller,
# who knows which batch, record or message it is in. No reader ever reads at or past end.
#
#     cursor_t              base (position 0), p (next byte), end (one past the last byte
#                           it may read); the position of p is p - base
#     need(c, n)            are n more bytes there?
#     advance(c, n)         the next n bytes, in place, stepped over (NULL if not there)
#     read_i8/16/32/64      big-endian signed, bounds-checked
#     read_uvarint          unsigned LEB128 of at most max_bytes bytes: the varint loop
#     read_varint           zigzag int32, at most 5 bytes (bits past 32 dropped, as Kafka's)
#     read_varlong          zigzag int64, at most 10 bytes
#     read_length           a varint length that must fit in what is left; -1 = null if nullable
#     be16/be32/be64        unchecked big-endian loads, for bytes already bounds-checked
#     put_be16/32/64        their stores (a batch's header fields as the leader rewrites them)
#     load_header           the fixed fields of a batch header into a batch_header_t, unchecked
#
# Record batch v2, big-endian (the offsets are the OFF_* names below):
#
#     offset size field                 notes
#     0      8    baseOffset            int64   assigned by the leader; not under the CRC
#     8      4    batchLength           int32   bytes after this field; >= 49
#     12     4    partitionLeaderEpoch  int32   set by the leader; not under the CRC
#     16     1    magic                 int8    = 2
#     17     4    crc                   uint32  CRC32C of bytes [21, 12 + batchLength)
#     21     2    attributes            int16   bits 0-2 codec, 3 timestampType (1 = LogAppendTime),
#                                               4 isTransactional, 5 isControl, 6 hasDeleteHorizonMs
#     23     4    lastOffsetDelta       int32   >= 0; recordsCount - 1, or more after compaction
#     27     8    baseTimestamp         int64   first record's timestamp
#     35     8    maxTimestamp          int64   largest record timestamp, or the LogAppendTime
#     43     8    producerId            int64   -1 if none
#     51     2    producerEpoch         int16   -1 if none
#     53     4    baseSequence          int32   -1 if none
#     57     4    recordsCount          int32   >= 0
#     61     ...  records               compressed as one stream when codec != 0
#
# Record (varints are zigzag, at most 5 bytes; varlongs at most 10):
#
#     length          varint  bytes after this field, to the end of the record
#     attributes      int8    unused, 0
#     timestampDelta  varlong from baseTimestamp
#     offsetDelta     varint  from baseOffset
#     keyLength       varint  -1 = null key
#     key             bytes
#     valueLength     varint  -1 = null value
#     value           bytes
#     headerCount     varint  >= 0
#     headers         each: keyLength varint (>= 0), key utf-8, valueLength varint (-1 = null), value
#
# The wire protocol (protocol/wire.pxd) reads request and response frames with this same
# cursor: its unsigned varints (KIP-482) are read_uvarint with max_bytes 5.
from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint16_t, uint32_t, uint64_t

cdef enum:
    OFF_BASE_OFFSET = 0
    OFF_BATCH_LENGTH = 8
    OFF_PARTITION_LEADER_EPOCH = 12
    OFF_MAGIC = 16
    OFF_CRC = 17
    OFF_ATTRIBUTES = 21              # first byte covered by the CRC
    OFF_LAST_OFFSET_DELTA = 23
    OFF_BASE_TIMESTAMP = 27
    OFF_MAX_TIMESTAMP = 35
    OFF_PRODUCER_ID = 43
    OFF_PRODUCER_EPOCH = 51
    OFF_BASE_SEQUENCE = 53
    OFF_RECORDS_COUNT = 57
    HEADER_SIZE = 61                 # BATCH_OVERHEAD: where the records start
    LENGTH_FIELDS_SIZE = 12          # LOG_OVERHEAD: baseOffset + batchLength
    MIN_BATCH_LENGTH = 49            # HEADER_SIZE - LENGTH_FIELDS_SIZE

    ATTR_COMPRESSION_MASK = 0x07
    ATTR_TIMESTAMP_TYPE = 0x08       # set: LogAppendTime
    ATTR_TRANSACTIONAL = 0x10
    ATTR_CONTROL = 0x20
    ATTR_DELETE_HORIZON = 0x40

    VARINT_MAX_BYTES = 5
    VARLONG_MAX_BYTES = 10


ctypedef struct cursor_t:
    const unsigned char* base        # where positions count from (what an error names)
    const unsigned char* p           # the next byte
    const unsigned char* end         # one past the last byte it may read


ctypedef struct batch_header_t:
    Py_ssize_t position              # of the batch in the buffer parsed
    int64_t base_offset
    int32_t batch_length
    int32_t partition_leader_epoch
    int8_t magic
    uint32_t crc
    int16_t attributes
    int32_t last_offset_delta
    int64_t base_timestamp
    int64_t max_timestamp
    int64_t producer_id
    int16_t producer_epoch
    int32_t base_sequence
    int32_t records_count


# ---- unchecked loads and stores (gcc folds each into one load or store + bswap) ----

cdef inline int16_t be16(const unsigned char* p) noexcept nogil:
    return <int16_t>((<uint16_t>p[0] << 8) | p[1])


cdef inline int32_t be32(const unsigned char* p) noexcept nogil:
    return <int32_t>((<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16)
                     | (<uint32_t>p[2] << 8) | <uint32_t>p[3])


cdef inline int64_t be64(const unsigned char* p) noexcept nogil:
    return <int64_t>((<uint64_t><uint32_t>be32(p) << 32) | <uint32_t>be32(p + 4))


cdef inline void put_be16(unsigned char* p, uint16_t v) noexcept nogil:
    p[0] = <unsigned char>(v >> 8)
    p[1] = <unsigned char>v


cdef inline void put_be32(unsigned char* p, uint32_t v) noexcept nogil:
    p[0] = <unsigned char>(v >> 24)
    p[1] = <unsigned char>(v >> 16)
    p[2] = <unsigned char>(v >> 8)
    p[3] = <unsigned char>v


cdef inline void put_be64(unsigned char* p, uint64_t v) noexcept nogil:
    put_be32(p, <uint32_t>(v >> 32))
    put_be32(p + 4, <uint32_t>v)


cdef inline void load_header(const unsigned char* p, batch_header_t* h) noexcept nogil:
    # The HEADER_SIZE bytes at p, which the caller has checked are there; nothing is validated.
    h.base_offset = be64(p + OFF_BASE_OFFSET)
    h.batch_length = be32(p + OFF_BATCH_LENGTH)
    h.partition_leader_epoch = be32(p + OFF_PARTITION_LEADER_EPOCH)
    h.magic = <int8_t>p[OFF_MAGIC]
    h.crc = <uint32_t>be32(p + OFF_CRC)
    h.attributes = be16(p + OFF_ATTRIBUTES)
    h.last_offset_delta = be32(p + OFF_LAST_OFFSET_DELTA)
    h.base_timestamp = be64(p + OFF_BASE_TIMESTAMP)
    h.max_timestamp = be64(p + OFF_MAX_TIMESTAMP)
    h.producer_id = be64(p + OFF_PRODUCER_ID)
    h.producer_epoch = be16(p + OFF_PRODUCER_EPOCH)
    h.base_sequence = be32(p + OFF_BASE_SEQUENCE)
    h.records_count = be32(p + OFF_RECORDS_COUNT)


# ---- the cursor ----

cdef inline bint need(const cursor_t* c, int64_t n) noexcept nogil:
    return 0 <= n <= c.end - c.p


cdef inline const unsigned char* advance(cursor_t* c, int64_t n) noexcept nogil:
    # The n bytes at p, stepped over; NULL, the cursor unmoved, when fewer are left.
    cdef const unsigned char* at = c.p
    if not need(c, n):
        return NULL
    c.p = at + n
    return at


cdef inline bint read_i8(cursor_t* c, int8_t* out) noexcept nogil:
    cdef const unsigned char* at = advance(c, 1)
    if at != NULL:
        out[0] = <int8_t>at[0]
    return at != NULL


cdef inline bint read_i16(cursor_t* c, int16_t* out) noexcept nogil:
    cdef const unsigned char* at = advance(c, 2)
    if at != NULL:
        out[0] = be16(at)
    return at != NULL


cdef inline bint read_i32(cursor_t* c, int32_t* out) noexcept nogil:
    cdef const unsigned char* at = advance(c, 4)
    if at != NULL:
        out[0] = be32(at)
    return at != NULL


cdef inline bint read_i64(cursor_t* c, int64_t* out) noexcept nogil:
    cdef const unsigned char* at = advance(c, 8)
    if at != NULL:
        out[0] = be64(at)
    return at != NULL


cdef inline bint read_uvarint(cursor_t* c, uint64_t* out, int max_bytes) noexcept nogil:
    # 7 bits a byte, low first; the byte of index k carries bits 7k.. (bits past 64 are
    # dropped). Fails, c unmoved, when the bytes end first or max_bytes all continue.
    # One-byte values (lengths and deltas under 64) are the common case.
    cdef const unsigned char* p = c.p
    cdef uint64_t v = 0, b
    cdef int shift = 0, limit = 7 * max_bytes
    if p < c.end and p[0] < 0x80:
        out[0] = p[0]
        c.p = p + 1
        return 1
    while p < c.end:
        b = p[0]
        p += 1
        v |= (b & 0x7F) << shift
        if not (b & 0x80):
            out[0] = v
            c.p = p
            return 1
        shift += 7
        if shift >= limit:
            return 0
    return 0


cdef inline bint read_varint(cursor_t* c, int32_t* out) noexcept nogil:
    cdef uint64_t v
    cdef uint32_t u
    if not read_uvarint(c, &v, VARINT_MAX_BYTES):
        return 0
    u = <uint32_t>v
    out[0] = <int32_t>((u >> 1) ^ (0 - (u & 1)))
    return 1


cdef inline bint read_varlong(cursor_t* c, int64_t* out) noexcept nogil:
    cdef uint64_t v
    if not read_uvarint(c, &v, VARLONG_MAX_BYTES):
        return 0
    out[0] = <int64_t>((v >> 1) ^ (0 - (v & 1)))
    return 1


cdef inline bint read_length(cursor_t* c, int32_t* out, bint nullable) noexcept nogil:
    # A length varint whose bytes lie before c.end; -1 (null) only where nullable.
    if not read_varint(c, out):
        return 0
    if out[0] < 0:
        return nullable and out[0] == -1
    return out[0] <= c.end - c.p
