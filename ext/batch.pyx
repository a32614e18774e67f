# cython: language_level=3
"""Record batch v2 (magic 2), Apache Kafka's DefaultRecordBatch.

The layout of a batch and of a record, and the cursor every reader here walks them with,
are in ext/cursor.pxd (one table, one set of offsets, one varint reader).

Every reader here is bounded by the buffer it was given: a length, count or varint
that points past its enclosing batch or record raises CorruptRecordError (or
TruncatedBatchError when the buffer ends inside a batch), never reads further.
scan touches only the 61-byte headers and the CRC. assign_offsets (the leader's append)
also walks every record's framing, as Kafka's LogValidator does, decompressing a
compressed batch first: record lengths, varints, key/value/header lengths within their
record, offset deltas 0..n-1 in order, exactly recordsCount records and nothing after them.
The walk is C over the bytes and allocates nothing per record; only the decompressed copy
of a compressed batch is allocated (one per batch). recompress (a topic's compression.type)
moves a batch to another codec without parsing its records: the records section of magic v2
is the same bytes under every codec.
"""
cimport cython
from cpython.buffer cimport (PyBUF_READ, PyBUF_SIMPLE, PyBUF_WRITABLE, PyBuffer_Release,
                             PyObject_GetBuffer)
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.memoryview cimport PyMemoryView_FromMemory
from cpython.unicode cimport PyUnicode_AsUTF8String, PyUnicode_DecodeUTF8
from libc.stdint cimport (INT32_MAX, INT64_MAX, int8_t, int16_t, int32_t, int64_t,
                          uint16_t, uint32_t, uint64_t)
from libc.stdlib cimport free, realloc
from libc.string cimport memcmp, memcpy

from ext.compress cimport compress, decompress
from ext.crc cimport crc32c_ptr
from ext.cursor cimport (ATTR_COMPRESSION_MASK, ATTR_CONTROL, ATTR_DELETE_HORIZON,
                         ATTR_TIMESTAMP_TYPE,
                         ATTR_TRANSACTIONAL, HEADER_SIZE, LENGTH_FIELDS_SIZE,
                         OFF_ATTRIBUTES, OFF_BASE_OFFSET, OFF_BASE_SEQUENCE, OFF_BASE_TIMESTAMP,
                         OFF_BATCH_LENGTH, OFF_CRC, OFF_LAST_OFFSET_DELTA, OFF_MAGIC,
                         OFF_MAX_TIMESTAMP, OFF_PARTITION_LEADER_EPOCH, OFF_PRODUCER_EPOCH,
                         OFF_PRODUCER_ID, OFF_RECORDS_COUNT, batch_header_t, be16, be32, be64,
                         cursor_t, load_header, put_be16, put_be32, put_be64, read_length,
                         read_varint, read_varlong)
from ext.cursor cimport MIN_BATCH_LENGTH as _MIN_BATCH_LENGTH

from ext.errors import CorruptRecordError

LOG_OVERHEAD = LENGTH_FIELDS_SIZE
BATCH_OVERHEAD = HEADER_SIZE
MIN_BATCH_LENGTH = _MIN_BATCH_LENGTH
MAGIC = 2
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1
NO_TIMESTAMP = -1

COMPRESSION_NONE = 0
COMPRESSION_GZIP = 1
COMPRESSION_SNAPPY = 2
COMPRESSION_LZ4 = 3
COMPRESSION_ZSTD = 4
TIMESTAMP_CREATE_TIME = 0
TIMESTAMP_LOG_APPEND_TIME = 1


class TruncatedBatchError(CorruptRecordError):
    """The buffer ends inside a batch (a torn write, or a read that stopped short)."""


ctypedef const unsigned char* cptr


# ---- header ----

cdef int _parse(cptr buf, Py_ssize_t n, Py_ssize_t pos, batch_header_t* h, bint check_crc,
                bint whole) except -1:
    # whole: the batch must end inside the buffer (else its HEADER_SIZE bytes suffice).
    cdef Py_ssize_t avail = n - pos
    cdef cptr p = buf + pos
    cdef int64_t size
    cdef long long crc
    cdef int32_t batch_length
    if avail < LENGTH_FIELDS_SIZE:
        raise TruncatedBatchError(
            f"batch at {pos}: {avail} bytes left, fewer than the 12-byte log overhead", pos)
    # Magic first: v0/v1 messages keep their magic at the same offset, and
    # "unsupported magic" says more than the length complaint they would also earn.
    if avail > OFF_MAGIC and p[OFF_MAGIC] != 2:
        raise CorruptRecordError(f"batch at {pos}: magic {<int8_t>p[OFF_MAGIC]}, expected 2", pos)
    batch_length = be32(p + OFF_BATCH_LENGTH)
    if batch_length < _MIN_BATCH_LENGTH:
        raise CorruptRecordError(
            f"batch at {pos}: batchLength {batch_length} below the minimum 49", pos)
    size = <int64_t>batch_length + LENGTH_FIELDS_SIZE
    if whole and avail < size:
        raise TruncatedBatchError(
            f"batch at {pos}: {size} bytes long but only {avail} bytes left", pos)
    if avail < HEADER_SIZE:
        raise TruncatedBatchError(
            f"batch at {pos}: {avail} bytes left, fewer than the 61-byte header", pos)
    load_header(p, h)
    h.position = pos
    if h.records_count < 0:
        raise CorruptRecordError(f"batch at {pos}: negative recordsCount {h.records_count}", pos)
    if h.last_offset_delta < 0:
        raise CorruptRecordError(
            f"batch at {pos}: negative lastOffsetDelta {h.last_offset_delta}", pos)
    if h.base_offset > INT64_MAX - h.last_offset_delta:
        raise CorruptRecordError(f"batch at {pos}: last offset overflows int64", pos)
    if check_crc:
        crc = crc32c_ptr(p + OFF_ATTRIBUTES, <Py_ssize_t>size - OFF_ATTRIBUTES, 0)
        if <uint32_t>crc != h.crc:
            raise CorruptRecordError(
                f"batch at {pos}: CRC32C is {crc:#010x}, header says {h.crc:#010x}", pos)
    return 0


cdef int parse_header(cptr buf, Py_ssize_t n, Py_ssize_t pos,
                      batch_header_t* h, bint check_crc) except -1:
    return _parse(buf, n, pos, h, check_crc, True)


cdef inline int64_t _last_offset(const batch_header_t* h) noexcept nogil:
    return h.base_offset + h.last_offset_delta


@cython.final
cdef class BatchHeader:
    """The fixed header of one batch, read in place. Attributes are read-only."""

    @property
    def compression(self):
        return self.attributes & ATTR_COMPRESSION_MASK

    @property
    def timestamp_type(self):
        return 1 if self.attributes & ATTR_TIMESTAMP_TYPE else 0

    @property
    def is_transactional(self):
        return bool(self.attributes & ATTR_TRANSACTIONAL)

    @property
    def is_control(self):
        return bool(self.attributes & ATTR_CONTROL)

    @property
    def last_offset(self):
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self):
        return self.base_offset + self.last_offset_delta + 1

    @property
    def size(self):
        return self.batch_length + LENGTH_FIELDS_SIZE

    @property
    def last_sequence(self):
        # Kafka's DefaultRecordBatch.incrementSequence: sequences wrap to 0 after 2**31 - 1.
        cdef int64_t seq = self.base_sequence, inc = self.last_offset_delta
        if seq == -1:
            return -1
        if seq > INT32_MAX - inc:
            return inc - (INT32_MAX - seq) - 1
        return seq + inc

    def __repr__(self):
        return (f"BatchHeader(position={self.position}, base_offset={self.base_offset}, "
                f"last_offset_delta={self.last_offset_delta}, records_count={self.records_count}, "
                f"size={self.size}, attributes={self.attributes:#x}, "
                f"partition_leader_epoch={self.partition_leader_epoch})")


cdef BatchHeader _make_header(const batch_header_t* h):
    cdef BatchHeader hdr = BatchHeader.__new__(BatchHeader)
    hdr.position = h.position
    hdr.base_offset = h.base_offset
    hdr.batch_length = h.batch_length
    hdr.partition_leader_epoch = h.partition_leader_epoch
    hdr.magic = h.magic
    hdr.crc = h.crc
    hdr.attributes = h.attributes
    hdr.last_offset_delta = h.last_offset_delta
    hdr.base_timestamp = h.base_timestamp
    hdr.max_timestamp = h.max_timestamp
    hdr.producer_id = h.producer_id
    hdr.producer_epoch = h.producer_epoch
    hdr.base_sequence = h.base_sequence
    hdr.records_count = h.records_count
    return hdr


cdef int _check_pos(Py_ssize_t pos, Py_ssize_t n) except -1:
    if pos < 0 or pos > n:
        raise ValueError(f"position {pos} outside a buffer of {n} bytes")
    return 0


cdef BatchHeader _header_at(object buf, Py_ssize_t pos, bint check_crc, bint end_ok=False):
    # end_ok: pos at the end of buf returns None rather than raising.
    cdef Py_buffer view
    cdef batch_header_t h
    PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
    try:
        _check_pos(pos, view.len)
        if end_ok and pos == view.len:
            return None
        parse_header(<cptr>view.buf, view.len, pos, &h, check_crc)
    finally:
        PyBuffer_Release(&view)
    return _make_header(&h)


def read_header(buf, Py_ssize_t pos=0):
    return _header_at(buf, pos, False)


def validate(buf, Py_ssize_t pos=0):
    return _header_at(buf, pos, True)


def peek_header(buf, Py_ssize_t pos=0):
    # read_header's checks but the CRC's, without needing the batch to end inside buf.
    cdef Py_buffer view
    cdef batch_header_t h
    PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
    try:
        _check_pos(pos, view.len)
        _parse(<cptr>view.buf, view.len, pos, &h, False, False)
    finally:
        PyBuffer_Release(&view)
    return _make_header(&h)


def read_prefix(buf, Py_ssize_t pos=0):
    # Kafka's ByteBufferLogInputStream.nextBatchSize reads these before anything is checked.
    cdef Py_buffer view
    cdef cptr p
    cdef Py_ssize_t avail
    PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
    try:
        _check_pos(pos, view.len)
        p = <cptr>view.buf + pos
        avail = view.len - pos
        if avail < LENGTH_FIELDS_SIZE:
            return None
        return (be64(p + OFF_BASE_OFFSET), be32(p + OFF_BATCH_LENGTH),
                <int8_t>p[OFF_MAGIC] if avail > OFF_MAGIC else None,
                be16(p + OFF_ATTRIBUTES) if avail >= OFF_ATTRIBUTES + 2 else None)
    finally:
        PyBuffer_Release(&view)


def peek_extent(buf, Py_ssize_t pos=0):
    # Kafka's read path (FileChannelRecordBatch) takes a batch's offsets and size from its
    # header without checking the rest: a batch corrupted after recovery is still served, and
    # the client's CRC check refuses it, rather than its offsets vanishing from the log.
    cdef Py_buffer view
    cdef cptr p
    cdef int32_t batch_length
    cdef int64_t base_offset
    PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
    try:
        _check_pos(pos, view.len)
        p = <cptr>view.buf + pos
        if view.len - pos < OFF_LAST_OFFSET_DELTA + 4:
            return None
        batch_length = be32(p + OFF_BATCH_LENGTH)
        if batch_length < _MIN_BATCH_LENGTH:
            return None
        base_offset = be64(p + OFF_BASE_OFFSET)
        return (base_offset, base_offset + <int64_t>be32(p + OFF_LAST_OFFSET_DELTA),
                <int64_t>batch_length + LENGTH_FIELDS_SIZE)
    finally:
        PyBuffer_Release(&view)


def iter_batches(buf, Py_ssize_t pos=0, bint check_crc=False):
    # The buffer is taken afresh for each batch: a paused generator must not hold an
    # export that would stop the owner from resizing its bytearray.
    cdef BatchHeader hdr
    while True:
        hdr = _header_at(buf, pos, check_crc, True)
        if hdr is None:
            return
        yield hdr
        pos += hdr.batch_length + LENGTH_FIELDS_SIZE


# ---- scan and assign_offsets ----

@cython.final
cdef class BatchSummary:
    """What a scan of a buffer of concatenated batches found. Per-batch arrays are
    Python lists of equal length ``count``; everything else is a scalar."""

    def __cinit__(self):
        self.first_offset = -1
        self.last_offset = -1
        self.max_timestamp = -1
        self.offset_of_max_timestamp = -1
        self.positions = []
        self.sizes = []
        self.base_offsets = []
        self.last_offsets = []
        self.base_timestamps = []
        self.min_timestamps = []
        self.max_timestamps = []
        self.partition_leader_epochs = []
        self.attributes = []
        self.records_counts = []
        self.producer_ids = []
        self.producer_epochs = []
        self.base_sequences = []
        self.error = None
        self.error_position = -1

    cdef int add(self, const batch_header_t* h, Py_ssize_t start) except -1:
        cdef Py_ssize_t size = h.batch_length + LENGTH_FIELDS_SIZE
        cdef int64_t last = _last_offset(h)
        self.positions.append(h.position - start)
        self.sizes.append(size)
        self.base_offsets.append(h.base_offset)
        self.last_offsets.append(last)
        self.base_timestamps.append(h.base_timestamp)
        self.max_timestamps.append(h.max_timestamp)
        self.partition_leader_epochs.append(h.partition_leader_epoch)
        self.attributes.append(h.attributes)
        self.records_counts.append(h.records_count)
        self.producer_ids.append(h.producer_id)
        self.producer_epochs.append(h.producer_epoch)
        self.base_sequences.append(h.base_sequence)
        if self.count == 0:
            self.first_offset = h.base_offset
        self.count += 1
        self.last_offset = last
        self.valid_bytes = h.position - start + size
        self.records_count += h.records_count
        # Strictly greater, as Kafka's LogSegment: ties keep the earliest batch.
        if h.max_timestamp > self.max_timestamp:
            self.max_timestamp = h.max_timestamp
            self.offset_of_max_timestamp = last
        return 0

    def __repr__(self):
        return (f"BatchSummary(count={self.count}, valid_bytes={self.valid_bytes}, "
                f"records_count={self.records_count}, first_offset={self.first_offset}, "
                f"last_offset={self.last_offset}, error={self.error!r})")


cdef inline bint _ends_inside_batch(cptr p, Py_ssize_t n, Py_ssize_t pos) noexcept:
    """Would parse_header stop at ``pos`` with TruncatedBatchError (and with nothing it checks
    before that)? A magic byte that is not 2 or a batchLength below the minimum are other
    errors, raised as they are."""
    cdef Py_ssize_t avail = n - pos
    if avail < LENGTH_FIELDS_SIZE:
        return True
    if avail > OFF_MAGIC and p[pos + OFF_MAGIC] != 2:
        return False
    cdef int32_t length = be32(p + pos + OFF_BATCH_LENGTH)
    return length >= _MIN_BATCH_LENGTH and avail < <int64_t>length + LENGTH_FIELDS_SIZE


cdef str _truncated_message(cptr p, Py_ssize_t n, Py_ssize_t pos):
    cdef Py_ssize_t avail = n - pos
    if avail < LENGTH_FIELDS_SIZE:
        return f"batch at {pos}: {avail} bytes left, fewer than the 12-byte log overhead"
    cdef int64_t size = <int64_t>be32(p + pos + OFF_BATCH_LENGTH) + LENGTH_FIELDS_SIZE
    return f"batch at {pos}: {size} bytes long but only {avail} bytes left"


def scan(buf, Py_ssize_t pos=0, bint check_crc=True, bint stop_on_error=False):
    cdef Py_buffer view
    cdef batch_header_t h
    cdef BatchSummary summary = BatchSummary.__new__(BatchSummary)
    cdef Py_ssize_t start = pos, n
    cdef cptr p
    PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
    try:
        p = <cptr>view.buf
        n = view.len
        _check_pos(pos, n)
        while pos < n:
            if stop_on_error and _ends_inside_batch(p, n, pos):
                # A read that stopped short (the read path's chunks) ends here every time:
                # the same words parse_header would raise, without an exception's cost.
                summary.error = _truncated_message(p, n, pos)
                summary.error_position = pos - start
                break
            try:
                parse_header(p, n, pos, &h, check_crc)
                if summary.count and h.base_offset <= summary.last_offset:
                    raise CorruptRecordError(
                        f"batch at {pos}: baseOffset {h.base_offset} does not follow "
                        f"the previous batch's last offset {summary.last_offset}", pos)
            except CorruptRecordError as e:
                if not stop_on_error:
                    raise
                summary.error = str(e)
                summary.error_position = pos - start
                break
            summary.add(&h, start)
            pos += h.batch_length + LENGTH_FIELDS_SIZE
    finally:
        PyBuffer_Release(&view)
    return summary


def assign_offsets(buf, int64_t next_offset, int32_t partition_leader_epoch,
                   int64_t log_append_time=-1):
    cdef Py_buffer view
    cdef batch_header_t h
    cdef BatchSummary summary = BatchSummary.__new__(BatchSummary)
    cdef Py_ssize_t pos, n
    cdef int64_t offset = next_offset
    cdef unsigned char* p
    cdef long long crc
    cdef int64_t ts_min = -1, ts_max = -1
    cdef int16_t attributes
    cdef list extremes = []  # (least, greatest) record timestamp of each batch, in order
    cdef Py_ssize_t b = 0
    if next_offset < 0:
        raise ValueError(f"next_offset {next_offset} is negative")
    PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE | PyBUF_WRITABLE)
    try:
        p = <unsigned char*>view.buf
        n = view.len
        # Pass 1 validates everything, so that a bad batch anywhere leaves the buffer as
        # it came. The count check is LogValidator's: a producer's batch covers exactly
        # recordsCount offsets, which is what lets us assign them without reading records.
        pos = 0
        while pos < n:
            parse_header(p, n, pos, &h, True)
            if h.records_count == 0 or h.last_offset_delta != h.records_count - 1:
                raise CorruptRecordError(
                    f"batch at {pos}: lastOffsetDelta {h.last_offset_delta} does not match "
                    f"recordsCount {h.records_count}", pos)
            _check_batch_records(&h, p + pos, &ts_min, &ts_max, None)
            extremes.append((ts_min, ts_max))
            if offset > INT64_MAX - h.records_count:
                raise CorruptRecordError(f"batch at {pos}: assigned offsets overflow int64", pos)
            offset += h.records_count
            pos += h.batch_length + LENGTH_FIELDS_SIZE
        pos = 0
        offset = next_offset
        while pos < n:
            parse_header(p, n, pos, &h, False)
            h.base_offset = offset
            h.partition_leader_epoch = partition_leader_epoch
            put_be64(p + pos + OFF_BASE_OFFSET, <uint64_t>offset)
            put_be32(p + pos + OFF_PARTITION_LEADER_EPOCH, <uint32_t>partition_leader_epoch)
            ts_min, ts_max = extremes[b]
            b += 1
            # LogValidator's setMaxTimestamp: LogAppendTime stamps now; CreateTime stores the
            # greatest record timestamp, whatever the producer put in the header.
            if log_append_time >= 0:
                attributes = h.attributes | ATTR_TIMESTAMP_TYPE
                ts_max = log_append_time
            else:
                attributes = h.attributes & ~ATTR_TIMESTAMP_TYPE
            if attributes != h.attributes or ts_max != h.max_timestamp:
                h.attributes = attributes
                h.max_timestamp = ts_max
                put_be16(p + pos + OFF_ATTRIBUTES, <uint16_t>h.attributes)
                put_be64(p + pos + OFF_MAX_TIMESTAMP, <uint64_t>ts_max)
                crc = crc32c_ptr(p + pos + OFF_ATTRIBUTES,
                                 h.batch_length + LENGTH_FIELDS_SIZE - OFF_ATTRIBUTES, 0)
                h.crc = <uint32_t>crc
                put_be32(p + pos + OFF_CRC, h.crc)
            summary.add(&h, 0)
            summary.min_timestamps.append(ts_min)
            offset += h.records_count
            pos += h.batch_length + LENGTH_FIELDS_SIZE
    finally:
        PyBuffer_Release(&view)
    return summary


# ---- recompress (a topic's compression.type) ----

def recompress(buf, int codec, level=None):
    # In magic v2 the records section is the same bytes whatever the codec (offset and
    # timestamp deltas are relative to the header, which keeps its fields), so rebuilding
    # a batch in another codec is: decompress, compress (at ``level``), new length, codec
    # bits and CRC. No record is parsed; assign_offsets already checked every record's framing.
    cdef Py_buffer view
    cdef batch_header_t h
    cdef cptr p
    cdef unsigned char* o
    cdef Py_ssize_t pos, n, size, w = 0, total = 0, i = 0
    cdef int source
    cdef list sections = []  # per batch: the new records section, or None to keep the batch
    cdef bytes out, section
    if not 0 <= codec <= 4:
        raise ValueError(f"unknown compression codec {codec}")
    PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
    try:
        p = <cptr>view.buf
        n = view.len
        pos = 0
        while pos < n:
            parse_header(p, n, pos, &h, False)
            size = h.batch_length + LENGTH_FIELDS_SIZE
            source = h.attributes & ATTR_COMPRESSION_MASK
            if source == codec or h.attributes & ATTR_CONTROL:
                sections.append(None)
                total += size
            else:
                if source > 4:
                    raise CorruptRecordError(f"batch at {pos}: unknown codec {source}", pos)
                plain = PyMemoryView_FromMemory(<char*>p + pos + HEADER_SIZE, size - HEADER_SIZE,
                                                PyBUF_READ)
                if source:
                    try:
                        plain = decompress(source, plain)
                    except CorruptRecordError as e:
                        raise CorruptRecordError(f"batch at {pos}: {e}", pos) from e
                section = compress(codec, plain, level) if codec else plain
                # Unreachable through a produce (max.message.bytes, the request size): only an
                # incompressible section of nearly 2 GiB could outgrow the int32 batchLength.
                if PyBytes_GET_SIZE(section) > INT32_MAX - _MIN_BATCH_LENGTH:
                    raise ValueError(f"batch at {pos}: {PyBytes_GET_SIZE(section)} bytes of "
                                     f"records do not fit a batch")
                sections.append(section)
                total += HEADER_SIZE + PyBytes_GET_SIZE(section)
            pos += size
        out = PyBytes_FromStringAndSize(NULL, total)
        o = <unsigned char*>PyBytes_AS_STRING(out)
        pos = 0
        while pos < n:
            parse_header(p, n, pos, &h, False)
            size = h.batch_length + LENGTH_FIELDS_SIZE
            section = sections[i]
            i += 1
            if section is None:
                memcpy(o + w, p + pos, size)
                w += size
            else:
                memcpy(o + w, p + pos, HEADER_SIZE)
                memcpy(o + w + HEADER_SIZE, PyBytes_AS_STRING(section), PyBytes_GET_SIZE(section))
                size = HEADER_SIZE + PyBytes_GET_SIZE(section)
                put_be32(o + w + OFF_BATCH_LENGTH, <uint32_t>(size - LENGTH_FIELDS_SIZE))
                put_be16(o + w + OFF_ATTRIBUTES,
                       <uint16_t>((h.attributes & ~ATTR_COMPRESSION_MASK) | codec))
                put_be32(o + w + OFF_CRC,
                       <uint32_t>crc32c_ptr(o + w + OFF_ATTRIBUTES, size - OFF_ATTRIBUTES, 0))
                w += size
            pos += h.batch_length + LENGTH_FIELDS_SIZE
    finally:
        PyBuffer_Release(&view)
    return out


# ---- build ----

ctypedef struct wbuf_t:
    unsigned char* data
    Py_ssize_t len
    Py_ssize_t cap


cdef int _wb_reserve(wbuf_t* w, Py_ssize_t extra) except -1:
    cdef Py_ssize_t cap
    cdef unsigned char* data
    if w.len + extra <= w.cap:
        return 0
    cap = max(w.cap * 2, w.len + extra)
    data = <unsigned char*>realloc(w.data, cap)
    if data == NULL:
        raise MemoryError()
    w.data = data
    w.cap = cap
    return 0


cdef inline int _varint_size(int64_t v) noexcept nogil:
    cdef uint64_t z = (<uint64_t>v << 1) ^ <uint64_t>(v >> 63)
    cdef int size = 1
    while z >= 0x80:
        z >>= 7
        size += 1
    return size


cdef inline Py_ssize_t _put_varint(unsigned char* p, int64_t v) noexcept nogil:
    # Zigzag, then 7 bits a byte, low first; serves varint and varlong alike because a
    # value in int32 range encodes the same either way.
    cdef uint64_t z = (<uint64_t>v << 1) ^ <uint64_t>(v >> 63)
    cdef Py_ssize_t i = 0
    while z >= 0x80:
        p[i] = <unsigned char>(z | 0x80)
        z >>= 7
        i += 1
    p[i] = <unsigned char>z
    return i + 1


cdef bytes _as_bytes(object o):
    if type(o) is bytes:
        return <bytes>o
    if isinstance(o, str):
        raise TypeError("record keys and values are bytes, not str")
    return bytes(memoryview(o))


cdef int _write_blob(wbuf_t* w, object b) except -1:
    cdef Py_ssize_t n
    if b is None:
        w.len += _put_varint(w.data + w.len, -1)
        return 0
    n = PyBytes_GET_SIZE(b)
    w.len += _put_varint(w.data + w.len, n)
    memcpy(w.data + w.len, PyBytes_AS_STRING(b), n)
    w.len += n
    return 0


cdef inline Py_ssize_t _blob_size(object b) except -1:
    if b is None:
        return 1
    return _varint_size(PyBytes_GET_SIZE(b)) + PyBytes_GET_SIZE(b)


cdef int _write_record(wbuf_t* w, object item, int32_t offset_delta, int64_t* base_ts_io,
                       int64_t* timestamp, bint first_sets_base=True) except -1:
    # The first record (offset_delta 0) fixes baseTimestamp for the rest, unless the caller
    # gave it (first_sets_base False: a rebuilt batch's own or its delete horizon).
    cdef object key, value, headers
    cdef list encoded = None
    cdef Py_ssize_t size, hcount = 0, i
    cdef int64_t ts_delta
    key, value, headers, ts = item
    timestamp[0] = ts
    if offset_delta == 0 and first_sets_base:
        base_ts_io[0] = timestamp[0]
    # Wraps rather than overflows for absurd timestamps; decode wraps back the same way.
    ts_delta = <int64_t>(<uint64_t>timestamp[0] - <uint64_t>base_ts_io[0])
    if key is not None:
        key = _as_bytes(key)
    if value is not None:
        value = _as_bytes(value)
    size = (1 + _varint_size(ts_delta) + _varint_size(offset_delta)
            + _blob_size(key) + _blob_size(value))
    if headers:
        encoded = []
        for hkey, hvalue in headers:
            hkey = PyUnicode_AsUTF8String(hkey) if isinstance(hkey, str) else _as_bytes(hkey)
            hvalue = None if hvalue is None else _as_bytes(hvalue)
            size += _blob_size(hkey) + _blob_size(hvalue)
            encoded.append(hkey)
            encoded.append(hvalue)
        hcount = len(encoded) // 2
    size += _varint_size(hcount)
    if size > INT32_MAX - HEADER_SIZE:
        raise ValueError(f"record {offset_delta} is {size} bytes, too large for a batch")
    _wb_reserve(w, 5 + size)
    w.len += _put_varint(w.data + w.len, size)
    w.data[w.len] = 0
    w.len += 1
    w.len += _put_varint(w.data + w.len, ts_delta)
    w.len += _put_varint(w.data + w.len, offset_delta)
    _write_blob(w, key)
    _write_blob(w, value)
    w.len += _put_varint(w.data + w.len, hcount)
    for i in range(hcount * 2):
        _write_blob(w, encoded[i])
    return 0


def build_batch(records, int64_t base_offset=0, int compression=0,
                int32_t partition_leader_epoch=-1, int64_t producer_id=-1,
                int16_t producer_epoch=-1, int32_t base_sequence=-1,
                bint is_transactional=False, bint is_control=False, int timestamp_type=0):
    cdef wbuf_t w
    cdef int64_t count = 0, base_ts = -1, max_ts = -1, ts
    cdef int16_t attributes
    if not 0 <= compression <= 4:
        raise ValueError(f"unknown compression codec {compression}")
    if timestamp_type not in (0, 1):
        raise ValueError(f"timestamp_type {timestamp_type} is neither 0 nor 1")
    attributes = <int16_t>(compression | (timestamp_type << 3) | (is_transactional << 4)
                           | (is_control << 5))
    w.data = NULL
    w.len = 0
    w.cap = 0
    try:
        _wb_reserve(&w, HEADER_SIZE + 4096)
        w.len = HEADER_SIZE
        for item in records:
            if count == INT32_MAX:
                raise ValueError("more records than a batch can count")
            _write_record(&w, item, <int32_t>count, &base_ts, &ts)
            if count == 0 or ts > max_ts:
                max_ts = ts
            count += 1
        if count == 0:
            raise ValueError("a batch needs at least one record")
        return _seal(&w, compression, base_offset, partition_leader_epoch, attributes,
                     <int32_t>(count - 1), base_ts, max_ts, producer_id, producer_epoch,
                     base_sequence, <int32_t>count)
    finally:
        free(w.data)


cdef bytes _seal(wbuf_t* w, int compression, int64_t base_offset, int32_t partition_leader_epoch,
                 int16_t attributes, int32_t last_offset_delta, int64_t base_ts, int64_t max_ts,
                 int64_t producer_id, int16_t producer_epoch, int32_t base_sequence,
                 int32_t count):
    # The batch of the records section written in w past HEADER_SIZE: compressed in
    # ``compression`` (when it has records), its header fields put, its CRC computed.
    cdef bytes out, section
    cdef unsigned char* o
    cdef Py_ssize_t total
    if compression and count:
        section = compress(compression, PyMemoryView_FromMemory(
            <char*>w.data + HEADER_SIZE, w.len - HEADER_SIZE, PyBUF_READ))
        total = HEADER_SIZE + PyBytes_GET_SIZE(section)
    else:
        total = w.len
    if total > INT32_MAX:
        raise ValueError(f"batch of {total} bytes exceeds the int32 batchLength")
    out = PyBytes_FromStringAndSize(NULL, total)
    o = <unsigned char*>PyBytes_AS_STRING(out)
    if compression and count:
        memcpy(o + HEADER_SIZE, PyBytes_AS_STRING(section), total - HEADER_SIZE)
    else:
        memcpy(o + HEADER_SIZE, w.data + HEADER_SIZE, total - HEADER_SIZE)
    put_be64(o + OFF_BASE_OFFSET, <uint64_t>base_offset)
    put_be32(o + OFF_BATCH_LENGTH, <uint32_t>(total - LENGTH_FIELDS_SIZE))
    put_be32(o + OFF_PARTITION_LEADER_EPOCH, <uint32_t>partition_leader_epoch)
    o[OFF_MAGIC] = 2
    put_be16(o + OFF_ATTRIBUTES, <uint16_t>attributes)
    put_be32(o + OFF_LAST_OFFSET_DELTA, <uint32_t>last_offset_delta)
    put_be64(o + OFF_BASE_TIMESTAMP, <uint64_t>base_ts)
    put_be64(o + OFF_MAX_TIMESTAMP, <uint64_t>max_ts)
    put_be64(o + OFF_PRODUCER_ID, <uint64_t>producer_id)
    put_be16(o + OFF_PRODUCER_EPOCH, <uint16_t>producer_epoch)
    put_be32(o + OFF_BASE_SEQUENCE, <uint32_t>base_sequence)
    put_be32(o + OFF_RECORDS_COUNT, <uint32_t>count)
    put_be32(o + OFF_CRC, <uint32_t>crc32c_ptr(o + OFF_ATTRIBUTES, total - OFF_ATTRIBUTES, 0))
    return out


def build_batch_at(records, int64_t base_offset, int32_t last_offset_delta, int64_t base_timestamp,
                   int64_t max_timestamp, int attributes, int32_t partition_leader_epoch=-1,
                   int64_t producer_id=-1, int16_t producer_epoch=-1, int32_t base_sequence=-1):
    cdef wbuf_t w
    cdef int64_t count = 0, base_ts = base_timestamp, ts
    cdef int64_t delta
    cdef int codec = attributes & 0x07
    if not 0 <= codec <= 4:
        raise ValueError(f"unknown compression codec {codec}")
    if not -0x8000 <= attributes <= 0x7FFF:
        raise ValueError(f"attributes {attributes} do not fit an int16")
    w.data = NULL
    w.len = 0
    w.cap = 0
    try:
        _wb_reserve(&w, HEADER_SIZE + 4096)
        w.len = HEADER_SIZE
        for delta, key, value, headers, ts in records:
            if count == INT32_MAX:
                raise ValueError("more records than a batch can count")
            if not 0 <= delta <= last_offset_delta:
                raise ValueError(f"offset delta {delta} outside [0, {last_offset_delta}]")
            _write_record(&w, (key, value, headers, ts), <int32_t>delta, &base_ts, &ts, False)
            count += 1
        return _seal(&w, codec, base_offset, partition_leader_epoch, <int16_t>attributes,
                     last_offset_delta, base_timestamp, max_timestamp, producer_id, producer_epoch,
                     base_sequence, <int32_t>count)
    finally:
        free(w.data)


# ---- decode ----

# no_gc: a fetch decodes Records by the thousand, and tracking each one roughly halves
# decode_records' speed through collections of the young generation. A Record holds
# bytes, None and its headers list (which stays tracked), so it can only join a cycle
# if someone appends it into its own headers; that would leak, never crash.
@cython.final
@cython.no_gc
@cython.freelist(256)
cdef class Record:
    """One decoded record; offset and timestamp are absolute."""

    def __repr__(self):
        return (f"Record(offset={self.offset}, timestamp={self.timestamp}, key={self.key!r}, "
                f"value={self.value!r}, headers={self.headers!r})")

    def __eq__(self, other):
        if not isinstance(other, Record):
            return NotImplemented
        cdef Record r = <Record>other
        return (self.offset == r.offset and self.timestamp == r.timestamp and self.key == r.key
                and self.value == r.value and self.headers == r.headers
                and self.attributes == r.attributes)

    __hash__ = None


# The cursor's readers return 0 on malformed input and leave the complaint to the caller,
# who knows which batch and record it is in; they never read at or past its end.

cdef inline object _take_bytes(cursor_t* r, int32_t n):
    if n < 0:
        return None
    b = PyBytes_FromStringAndSize(<const char*>r.p, n)
    r.p += n
    return b


cdef object _corrupt(const batch_header_t* h, int64_t index, str what):
    return CorruptRecordError(f"batch at {h.position}: record {index}: {what}", h.position)


cdef int _next_record(cursor_t* r, cursor_t* rr, const batch_header_t* h, int64_t i) except -1:
    """Frame record ``i``: ``rr`` spans its body (its length varint read and checked against
    what is left), ``r`` moves past it."""
    cdef int32_t length
    if r.p == r.end:
        raise _corrupt(h, i, f"the records end after {i} of the {h.records_count} counted")
    if not read_length(r, &length, False) or length == 0:
        raise _corrupt(h, i, "bad record length")
    rr.base = r.base
    rr.p = r.p
    rr.end = r.p + length
    r.p = rr.end
    return 0


cdef enum:
    _KEY_CACHE = 8


cdef list _decode_section(const batch_header_t* h, cptr p, Py_ssize_t n):
    cdef list out = []
    cdef cursor_t r, rr
    cdef Record rec
    cdef int32_t length, offset_delta, key_len, value_len, header_count, hk_len, hv_len, j
    cdef int64_t ts_delta, i
    cdef int8_t attributes
    cdef bint log_append_time = (h.attributes & ATTR_TIMESTAMP_TYPE) != 0
    cdef list headers
    cdef cptr seen_p[_KEY_CACHE]
    cdef int32_t seen_len[_KEY_CACHE]
    cdef list seen_keys = [None] * _KEY_CACHE
    for j in range(_KEY_CACHE):
        seen_len[j] = -1
    r.base = p
    r.p = p
    r.end = p + n
    for i in range(h.records_count):
        _next_record(&r, &rr, h, i)
        attributes = <int8_t>rr.p[0]
        rr.p += 1
        if not read_varlong(&rr, &ts_delta):
            raise _corrupt(h, i, "bad timestampDelta varlong")
        if not read_varint(&rr, &offset_delta):
            raise _corrupt(h, i, "bad offsetDelta varint")
        if not read_length(&rr, &key_len, True):
            raise _corrupt(h, i, "bad key length")
        key = _take_bytes(&rr, key_len)
        if not read_length(&rr, &value_len, True):
            raise _corrupt(h, i, "bad value length")
        value = _take_bytes(&rr, value_len)
        if not read_varint(&rr, &header_count) or header_count < 0:
            raise _corrupt(h, i, "bad header count")
        headers = []
        for j in range(header_count):
            if not read_length(&rr, &hk_len, False):
                raise _corrupt(h, i, f"header {j}: bad key length")
            # Producers repeat the same header keys record after record: reuse the str
            # decoded for the previous record's j-th key when the bytes match.
            if (j < _KEY_CACHE and seen_len[j] == hk_len
                    and memcmp(seen_p[j], rr.p, hk_len) == 0):
                hkey = seen_keys[j]
            else:
                try:
                    hkey = PyUnicode_DecodeUTF8(<const char*>rr.p, hk_len, NULL)
                except UnicodeDecodeError:
                    raise _corrupt(h, i, f"header {j}: key is not utf-8") from None
                if j < _KEY_CACHE:
                    seen_p[j] = rr.p
                    seen_len[j] = hk_len
                    seen_keys[j] = hkey
            rr.p += hk_len
            if not read_length(&rr, &hv_len, True):
                raise _corrupt(h, i, f"header {j}: bad value length")
            headers.append((hkey, _take_bytes(&rr, hv_len)))
        if rr.p != rr.end:
            raise _corrupt(h, i, f"{rr.end - rr.p} bytes left over inside the record")
        rec = Record.__new__(Record)
        # Offsets and timestamps wrap rather than overflow (C signed overflow is undefined);
        # only forged deltas can reach the wrap.
        rec.offset = <int64_t>(<uint64_t>h.base_offset + <uint64_t><int64_t>offset_delta)
        if log_append_time:
            rec.timestamp = h.max_timestamp
        else:
            rec.timestamp = <int64_t>(<uint64_t>h.base_timestamp + <uint64_t>ts_delta)
        rec.key = key
        rec.value = value
        rec.headers = headers
        rec.attributes = attributes
        out.append(rec)
    if r.p != r.end:
        raise _corrupt(h, h.records_count,
                       f"{r.end - r.p} bytes follow the {h.records_count} counted records")
    return out


def decode_records(buf, Py_ssize_t pos=0, bint check_crc=True):
    cdef Py_buffer view
    cdef batch_header_t h
    cdef cptr section
    cdef Py_ssize_t section_len
    cdef int codec
    cdef bytes plain
    PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
    try:
        _check_pos(pos, view.len)
        parse_header(<cptr>view.buf, view.len, pos, &h, check_crc)
        section = <cptr>view.buf + pos + HEADER_SIZE
        section_len = h.batch_length + LENGTH_FIELDS_SIZE - HEADER_SIZE
        codec = h.attributes & ATTR_COMPRESSION_MASK
        if codec == 0:
            return _decode_section(&h, section, section_len)
        if codec > 4:
            raise CorruptRecordError(f"batch at {pos}: unknown codec {codec}", pos)
        try:
            plain = decompress(codec, PyMemoryView_FromMemory(
                <char*>section, section_len, PyBUF_READ))
        except CorruptRecordError as e:
            raise CorruptRecordError(f"batch at {pos}: {e}", pos) from e
    finally:
        PyBuffer_Release(&view)
    return _decode_section(&h, <cptr>PyBytes_AS_STRING(plain), PyBytes_GET_SIZE(plain))


# ---- record framing (the leader's append) ----

cdef int _check_section(const batch_header_t* h, cptr p, Py_ssize_t n,
                        int64_t* ts_min, int64_t* ts_max, list null_keys) except -1:
    # Kafka's DefaultRecord.readFrom bounds, over the records of one batch, allocating
    # nothing. Stricter than Kafka in two places, both of which only a forged batch
    # reaches: a null key or value must be -1 (Kafka reads any negative length as null),
    # and an offset delta other than its index is refused (Kafka keeps the records and
    # rewrites the batch; we store batches as they came, and a forged delta would give
    # one offset to two records). ts_min and ts_max receive the least and greatest record
    # timestamp (baseTimestamp + timestampDelta, wrapping as decode does). When null_keys
    # is a list, the index of each record whose key is null is appended to it (LogValidator's
    # validateKey for a compacted topic); None, the leader's append, costs nothing more.
    cdef cursor_t r, rr
    cdef int64_t ts
    cdef int32_t length, offset_delta, key_len, value_len, header_count, hk_len, hv_len, j
    cdef int64_t ts_delta, i
    r.base = p
    r.p = p
    r.end = p + n
    for i in range(h.records_count):
        _next_record(&r, &rr, h, i)
        rr.p += 1  # attributes: unused by magic 2, any value accepted as Kafka does
        if not read_varlong(&rr, &ts_delta):
            raise _corrupt(h, i, "bad timestampDelta varlong")
        ts = <int64_t>(<uint64_t>h.base_timestamp + <uint64_t>ts_delta)
        if i == 0 or ts < ts_min[0]:
            ts_min[0] = ts
        if i == 0 or ts > ts_max[0]:
            ts_max[0] = ts
        if not read_varint(&rr, &offset_delta):
            raise _corrupt(h, i, "bad offsetDelta varint")
        if offset_delta != i:
            raise _corrupt(h, i, f"offsetDelta {offset_delta}, expected {i}")
        if not read_length(&rr, &key_len, True):
            raise _corrupt(h, i, "bad key length")
        if key_len > 0:
            rr.p += key_len
        elif null_keys is not None and key_len < 0:
            null_keys.append(i)
        if not read_length(&rr, &value_len, True):
            raise _corrupt(h, i, "bad value length")
        if value_len > 0:
            rr.p += value_len
        if not read_varint(&rr, &header_count) or header_count < 0:
            raise _corrupt(h, i, "bad header count")
        for j in range(header_count):
            if not read_length(&rr, &hk_len, False):
                raise _corrupt(h, i, f"header {j}: bad key length")
            rr.p += hk_len
            if not read_length(&rr, &hv_len, True):
                raise _corrupt(h, i, f"header {j}: bad value length")
            if hv_len > 0:
                rr.p += hv_len
        if rr.p != rr.end:
            raise _corrupt(h, i, f"{rr.end - rr.p} bytes left over inside the record")
    if r.p != r.end:
        raise _corrupt(h, h.records_count,
                       f"{r.end - r.p} bytes follow the {h.records_count} counted records")
    return 0


cdef int _check_batch_records(const batch_header_t* h, cptr batch, int64_t* ts_min,
                              int64_t* ts_max, list null_keys) except -1:
    # batch: the first byte of the batch h describes, whose bounds parse_header checked.
    cdef cptr section = batch + HEADER_SIZE
    cdef Py_ssize_t section_len = h.batch_length + LENGTH_FIELDS_SIZE - HEADER_SIZE
    cdef int codec = h.attributes & ATTR_COMPRESSION_MASK
    cdef bytes plain
    if codec == 0:
        return _check_section(h, section, section_len, ts_min, ts_max, null_keys)
    if codec > 4:
        raise CorruptRecordError(f"batch at {h.position}: unknown codec {codec}", h.position)
    try:
        plain = decompress(codec, PyMemoryView_FromMemory(<char*>section, section_len, PyBUF_READ))
    except CorruptRecordError as e:
        raise CorruptRecordError(f"batch at {h.position}: {e}", h.position) from e
    return _check_section(h, <cptr>PyBytes_AS_STRING(plain), PyBytes_GET_SIZE(plain), ts_min, ts_max,
                          null_keys)


def validate_records(buf, Py_ssize_t pos=0):
    cdef Py_buffer view
    cdef batch_header_t h
    cdef int64_t ts_min = -1, ts_max = -1
    PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
    try:
        _check_pos(pos, view.len)
        parse_header(<cptr>view.buf, view.len, pos, &h, True)
        _check_batch_records(&h, <cptr>view.buf + pos, &ts_min, &ts_max, None)
    finally:
        PyBuffer_Release(&view)
    return _make_header(&h)


def null_key_indexes(buf, Py_ssize_t pos=0):
    cdef Py_buffer view
    cdef batch_header_t h
    cdef int64_t ts_min = -1, ts_max = -1
    cdef list out = []
    PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
    try:
        _check_pos(pos, view.len)
        parse_header(<cptr>view.buf, view.len, pos, &h, False)
        _check_batch_records(&h, <cptr>view.buf + pos, &ts_min, &ts_max, out)
    finally:
        PyBuffer_Release(&view)
    return out


# ---- the log cleaner's rebuild (MemoryRecords.filterTo's retained records) ----

ctypedef struct _rec_fields_t:
    int64_t ts_delta
    int32_t offset_delta
    cptr key
    int32_t key_len                  # -1: null
    cptr value
    int32_t value_len                # -1: null (a tombstone)
    int32_t header_count
    cptr headers                     # the headers' bytes, up to the record's end
    cptr end


cdef bint _frame_fields(cursor_t* r, _rec_fields_t* f) noexcept nogil:
    # The fields of the record at r.p, checked as _decode_section checks them (header keys'
    # utf-8 aside); r steps past it. 0 when the framing does not fit.
    cdef cursor_t rr
    cdef int32_t length, hk_len, hv_len, j
    if r.p == r.end or not read_length(r, &length, False) or length == 0:
        return 0
    rr.base = r.base
    rr.p = r.p + 1                   # attributes: unused by magic 2
    rr.end = r.p + length
    r.p = rr.end
    f.end = rr.end
    if not read_varlong(&rr, &f.ts_delta) or not read_varint(&rr, &f.offset_delta):
        return 0
    if not read_length(&rr, &f.key_len, True):
        return 0
    f.key = rr.p
    if f.key_len > 0:
        rr.p += f.key_len
    if not read_length(&rr, &f.value_len, True):
        return 0
    f.value = rr.p
    if f.value_len > 0:
        rr.p += f.value_len
    if not read_varint(&rr, &f.header_count) or f.header_count < 0:
        return 0
    f.headers = rr.p
    for j in range(f.header_count):
        if not read_length(&rr, &hk_len, False):
            return 0
        rr.p += hk_len
        if not read_length(&rr, &hv_len, True):
            return 0
        if hv_len > 0:
            rr.p += hv_len
    return rr.p == rr.end


ctypedef struct _kept_t:
    int64_t count                    # records kept
    int64_t first_ts                 # the first kept record's timestamp
    int64_t max_ts                   # the greatest kept timestamp
    bint tombstone                   # a kept record has a null value
    int64_t bad                      # the index of a record that does not parse, or -1
    int32_t bad_delta                # an offset delta outside [0, lastOffsetDelta], or -1


cdef inline int64_t _record_ts(const batch_header_t* h, int64_t ts_delta) noexcept nogil:
    if h.attributes & ATTR_TIMESTAMP_TYPE:
        return h.max_timestamp       # LogAppendTime: every record has the batch's time
    return <int64_t>(<uint64_t>h.base_timestamp + <uint64_t>ts_delta)


cdef bint _scan_kept(const batch_header_t* h, cptr p, Py_ssize_t n, const unsigned char* keep,
                     _kept_t* k) noexcept nogil:
    cdef cursor_t r
    cdef _rec_fields_t f
    cdef int64_t i, ts
    r.base = p
    r.p = p
    r.end = p + n
    k.count = 0
    k.tombstone = 0
    k.bad = -1
    k.bad_delta = -1
    for i in range(h.records_count):
        if not _frame_fields(&r, &f):
            k.bad = i
            return 0
        if not keep[i]:
            continue
        if f.offset_delta < 0 or f.offset_delta > h.last_offset_delta:
            k.bad_delta = f.offset_delta
            return 0
        ts = _record_ts(h, f.ts_delta)
        if k.count == 0:
            k.first_ts = ts
            k.max_ts = ts
        elif ts > k.max_ts:
            k.max_ts = ts
        if f.value_len < 0:
            k.tombstone = 1
        k.count += 1
    if r.p != r.end:
        k.bad = h.records_count
        return 0
    return 1


cdef inline bint _reserve_nogil(wbuf_t* w, Py_ssize_t extra) noexcept nogil:
    cdef Py_ssize_t cap
    cdef unsigned char* data
    if w.len + extra <= w.cap:
        return 1
    cap = w.cap * 2 if w.cap * 2 > w.len + extra else w.len + extra
    data = <unsigned char*>realloc(w.data, cap)
    if data == NULL:
        return 0
    w.data = data
    w.cap = cap
    return 1


cdef inline Py_ssize_t _blob_len(int32_t n) noexcept nogil:
    return 1 if n < 0 else _varint_size(n) + n


cdef inline void _put_blob(wbuf_t* w, cptr b, int32_t n) noexcept nogil:
    w.len += _put_varint(w.data + w.len, n)
    if n > 0:
        memcpy(w.data + w.len, b, n)
        w.len += n


cdef bint _write_kept(const batch_header_t* h, cptr p, Py_ssize_t n, const unsigned char* keep,
                      int64_t base_ts, wbuf_t* w) noexcept nogil:
    # The kept records of a batch that _scan_kept accepted, written after w.len as
    # build_batch_at writes them: attributes 0, timestamp deltas from base_ts, lengths as
    # shortest varints. 0 when out of memory.
    cdef cursor_t r, hr
    cdef _rec_fields_t f
    cdef int64_t i, ts_delta
    cdef int32_t j, hk_len, hv_len
    cdef Py_ssize_t size
    r.base = p
    r.p = p
    r.end = p + n
    for i in range(h.records_count):
        _frame_fields(&r, &f)
        if not keep[i]:
            continue
        ts_delta = <int64_t>(<uint64_t>_record_ts(h, f.ts_delta) - <uint64_t>base_ts)
        size = (1 + _varint_size(ts_delta) + _varint_size(f.offset_delta) + _blob_len(f.key_len)
                + _blob_len(f.value_len) + _varint_size(f.header_count))
        hr.base = p
        hr.p = f.headers
        hr.end = f.end
        for j in range(f.header_count):
            read_length(&hr, &hk_len, False)
            hr.p += hk_len
            read_length(&hr, &hv_len, True)
            if hv_len > 0:
                hr.p += hv_len
            size += _blob_len(hk_len) + _blob_len(hv_len)
        if not _reserve_nogil(w, 5 + size):
            return 0
        w.len += _put_varint(w.data + w.len, size)
        w.data[w.len] = 0
        w.len += 1
        w.len += _put_varint(w.data + w.len, ts_delta)
        w.len += _put_varint(w.data + w.len, f.offset_delta)
        _put_blob(w, f.key, f.key_len)
        _put_blob(w, f.value, f.value_len)
        w.len += _put_varint(w.data + w.len, f.header_count)
        hr.p = f.headers
        for j in range(f.header_count):
            read_length(&hr, &hk_len, False)
            _put_blob(w, hr.p, hk_len)
            hr.p += hk_len
            read_length(&hr, &hv_len, True)
            _put_blob(w, hr.p, hv_len)
            if hv_len > 0:
                hr.p += hv_len
    return 1


def retain_records(buf, Py_ssize_t pos, keep, delete_horizon_ms=None, tombstone_horizon_ms=None):
    cdef Py_buffer view, kview
    cdef batch_header_t h
    cdef cptr section
    cdef Py_ssize_t section_len
    cdef int codec
    cdef bytes plain = None
    cdef _kept_t k
    cdef wbuf_t w
    cdef bint ok, horizon_set
    cdef int64_t horizon = 0, base_ts
    cdef int16_t attributes
    if delete_horizon_ms is not None:
        horizon = delete_horizon_ms
    w.data = NULL
    w.len = 0
    w.cap = 0
    PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
    PyObject_GetBuffer(keep, &kview, PyBUF_SIMPLE)
    try:
        _check_pos(pos, view.len)
        parse_header(<cptr>view.buf, view.len, pos, &h, False)
        if kview.len != h.records_count:
            raise ValueError(f"batch at {pos}: {kview.len} retain flags for {h.records_count} records")
        section = <cptr>view.buf + pos + HEADER_SIZE
        section_len = h.batch_length + LENGTH_FIELDS_SIZE - HEADER_SIZE
        codec = h.attributes & ATTR_COMPRESSION_MASK
        if codec > 4:
            raise CorruptRecordError(f"batch at {pos}: unknown codec {codec}", pos)
        if codec:
            try:
                plain = decompress(codec, PyMemoryView_FromMemory(<char*>section, section_len, PyBUF_READ))
            except CorruptRecordError as e:
                raise CorruptRecordError(f"batch at {pos}: {e}", pos) from e
            section = <cptr>PyBytes_AS_STRING(plain)
            section_len = PyBytes_GET_SIZE(plain)
        with nogil:
            ok = _scan_kept(&h, section, section_len, <const unsigned char*>kview.buf, &k)
        if not ok:
            if k.bad_delta >= 0:
                raise ValueError(f"offset delta {k.bad_delta} outside [0, {h.last_offset_delta}]")
            if k.bad == h.records_count:
                raise _corrupt(&h, k.bad, "bytes follow the counted records")
            raise _corrupt(&h, k.bad, "bad record framing")
        horizon_set = delete_horizon_ms is not None
        if not horizon_set and k.tombstone and tombstone_horizon_ms is not None:
            horizon = tombstone_horizon_ms
            horizon_set = True
        if k.count == h.records_count and not horizon_set:
            return None  # kept whole: the caller copies its bytes
        if k.count == 0:
            raise ValueError(f"batch at {pos}: no record retained")
        if not horizon_set and h.attributes & ATTR_DELETE_HORIZON:
            horizon = h.base_timestamp
            horizon_set = True
        attributes = <int16_t>(h.attributes & ~ATTR_DELETE_HORIZON)
        if horizon_set:
            attributes |= ATTR_DELETE_HORIZON
            base_ts = horizon
        else:
            base_ts = k.first_ts
        _wb_reserve(&w, HEADER_SIZE + section_len + 64)
        w.len = HEADER_SIZE
        with nogil:
            ok = _write_kept(&h, section, section_len, <const unsigned char*>kview.buf, base_ts, &w)
        if not ok:
            raise MemoryError()
        return _seal(&w, codec, h.base_offset, h.partition_leader_epoch, attributes,
                     h.last_offset_delta, base_ts,
                     h.max_timestamp if h.attributes & ATTR_TIMESTAMP_TYPE else k.max_ts,
                     h.producer_id, h.producer_epoch, h.base_sequence, <int32_t>k.count)
    finally:
        PyBuffer_Release(&kview)
        PyBuffer_Release(&view)
        free(w.data)
