# cython: language_level=3
"""The log cleaner's offset map: each record key of a log's dirty section to the offset of its
last occurrence, Apache Kafka's SkimpyOffsetMap.

A fixed table of ``slots`` entries, each a 16-byte digest of a key and an int64 offset (the 24
bytes of Kafka's entry for MD5), so ``memory // 24`` slots from a byte budget as Kafka sizes it.
The digest is MurmurHash3 x64 128 (seed 0) of the key bytes, computed here in C; its first
64 bits pick the home slot (multiply-shift, any slot count) and collisions probe linearly.
Two keys are the same key when their digests are equal, as in Kafka. The map never deletes.

add_batches walks the record batches of a buffer (segment bytes) with ext/cursor.pxd's readers,
decompressing a compressed batch with ext.compress, and puts every keyed record of every
non-control batch at or past a floor, stopping where Kafka's Cleaner.buildOffsetMapForSegment
stops: at the first keyed record met once the map holds ``int(slots * load_factor)`` keys.
retain_mask tells, for each record of a buffer, whether the cleaner keeps it, by Kafka's
Cleaner.shouldRetainRecord. Nothing here is called per record from Python, and both walks run
without the GIL (the buffer held by its Py_buffer, the map this thread's), taking it back only
to decompress a compressed batch (zlib, zstandard and lz4 release it again for their own work) or
to raise, so that the broker's other threads run beside the cleaner's.
"""
from cpython.buffer cimport PyBUF_READ, PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytearray cimport PyByteArray_FromStringAndSize
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from cpython.memoryview cimport PyMemoryView_FromMemory
from libc.stdint cimport INT32_MAX, INT64_MAX, int32_t, int64_t, uint64_t
from libc.stdlib cimport free, malloc, realloc
from libc.string cimport memcpy, memset

from ext.batch cimport parse_header
from ext.compress cimport decompress
from ext.cursor cimport (ATTR_COMPRESSION_MASK, ATTR_CONTROL, ATTR_DELETE_HORIZON,
                         ATTR_TRANSACTIONAL, HEADER_SIZE, LENGTH_FIELDS_SIZE, MIN_BATCH_LENGTH,
                         OFF_BATCH_LENGTH, OFF_MAGIC, batch_header_t, be32, cursor_t,
                         load_header, read_length, read_varint, read_varlong)

from ext.errors import CorruptRecordError

BYTES_PER_ENTRY = sizeof(slot_t)  # 24: a 16-byte digest and an 8-byte offset
DEFAULT_LOAD_FACTOR = 0.9  # log.cleaner.io.buffer.load.factor

ctypedef const unsigned char* cptr

cdef extern from *:
    ctypedef unsigned long long u128 "unsigned __int128"


def cleaner_map_memory(dedupe_buffer_size, threads, load_factor=DEFAULT_LOAD_FACTOR):
    """The bytes of one cleaner thread's map: log.cleaner.dedupe.buffer.size shared among
    log.cleaner.threads, at most 2**31 - 1 (Kafka's LogCleaner). ValueError, with Kafka's
    message, when that map could not take even one key (Kafka's Cleaner requires
    slots * log.cleaner.io.buffer.load.factor > 1)."""
    if threads < 1:
        raise ValueError(f"log.cleaner.threads must be at least 1, got {threads}")
    memory = min(dedupe_buffer_size // threads, INT32_MAX)
    if (memory // sizeof(slot_t)) * load_factor <= 1:
        raise ValueError("offset map is too small to fit in even a single message, so log cleaning "
                         "will never make progress. You can increase log.cleaner.dedupe.buffer.size "
                         "or decrease log.cleaner.threads")
    return memory


# ---- MurmurHash3 x64 128 ----

cdef inline uint64_t _rotl(uint64_t x, int r) noexcept nogil:
    return (x << r) | (x >> (64 - r))


cdef inline uint64_t _fmix(uint64_t k) noexcept nogil:
    k ^= k >> 33
    k *= 0xff51afd7ed558ccdULL
    k ^= k >> 33
    k *= 0xc4ceb9fe1a85ec53ULL
    k ^= k >> 33
    return k


cdef inline uint64_t _le64(cptr p) noexcept nogil:
    cdef uint64_t v
    memcpy(&v, p, 8)  # the hash is defined over little-endian words (x86, arm64)
    return v


cdef inline uint64_t _tail(cptr p, Py_ssize_t n) noexcept nogil:
    # Up to 8 bytes at p as a little-endian word.
    cdef uint64_t v = 0
    cdef Py_ssize_t i
    for i in range(n):
        v |= (<uint64_t>p[i]) << (8 * i)
    return v


cdef uint64_t C1 = 0x87c37b91114253d5ULL
cdef uint64_t C2 = 0x4cf5ad432745937fULL


cdef inline void _digest(cptr p, Py_ssize_t n, uint64_t* out0, uint64_t* out1) noexcept nogil:
    cdef uint64_t h1 = 0, h2 = 0, k1, k2
    cdef Py_ssize_t i, blocks = n >> 4, rest
    cdef cptr tail = p + (blocks << 4)
    for i in range(blocks):
        k1 = _le64(p + 16 * i)
        k2 = _le64(p + 16 * i + 8)
        k1 *= C1
        k1 = _rotl(k1, 31)
        k1 *= C2
        h1 ^= k1
        h1 = _rotl(h1, 27)
        h1 += h2
        h1 = h1 * 5 + 0x52dce729
        k2 *= C2
        k2 = _rotl(k2, 33)
        k2 *= C1
        h2 ^= k2
        h2 = _rotl(h2, 31)
        h2 += h1
        h2 = h2 * 5 + 0x38495ab5
    rest = n & 15
    if rest > 8:
        k2 = _tail(tail + 8, rest - 8)
        k2 *= C2
        k2 = _rotl(k2, 33)
        k2 *= C1
        h2 ^= k2
    if rest > 0:
        k1 = _tail(tail, rest if rest < 8 else 8)
        k1 *= C1
        k1 = _rotl(k1, 31)
        k1 *= C2
        h1 ^= k1
    h1 ^= <uint64_t>n
    h2 ^= <uint64_t>n
    h1 += h2
    h2 += h1
    h1 = _fmix(h1)
    h2 = _fmix(h2)
    h1 += h2
    h2 += h1
    out0[0] = h1
    out1[0] = h2


def digest(key):
    """The 16-byte digest the map keeps for ``key``: MurmurHash3 x64 128 with seed 0, its two
    64-bit halves little-endian (the bytes ``mmh3.hash_bytes(key)`` gives)."""
    cdef Py_buffer view
    cdef uint64_t h[2]
    PyObject_GetBuffer(key, &view, PyBUF_SIMPLE)
    try:
        _digest(<cptr>view.buf, view.len, &h[0], &h[1])
    finally:
        PyBuffer_Release(&view)
    return PyBytes_FromStringAndSize(<char*>h, 16)


# ---- one record's fields, through the cursor ----

ctypedef struct rec_t:
    int32_t offset_delta
    cptr key
    int32_t key_len                  # -1: null
    int32_t value_len                # -1: null (a tombstone)


cdef int _next(cursor_t* r, rec_t* rec) noexcept nogil:
    # The fields of the record at r.p that the cleaner needs; r steps past the whole record
    # (its headers unread: the record's length bounds them). 0 when the framing does not fit.
    cdef cursor_t rr
    cdef int32_t length
    cdef int64_t ts_delta
    if not read_length(r, &length, False) or length == 0:
        return 0
    rr.base = r.base
    rr.p = r.p + 1                   # attributes: unused by magic 2
    rr.end = r.p + length
    if (not read_varlong(&rr, &ts_delta) or not read_varint(&rr, &rec.offset_delta)
            or rec.offset_delta < 0 or not read_length(&rr, &rec.key_len, True)):
        return 0
    rec.key = rr.p
    if rec.key_len > 0:
        rr.p += rec.key_len
    if not read_length(&rr, &rec.value_len, True):
        return 0
    r.p = rr.end
    return 1


cdef class MapFill:
    """What add_batches took from a buffer."""
    cdef readonly bint full
    cdef readonly Py_ssize_t position
    cdef readonly Py_ssize_t batches
    cdef readonly int64_t records
    cdef readonly int64_t stop_offset

    def __repr__(self):
        return (f"MapFill(full={self.full}, position={self.position}, batches={self.batches}, "
                f"records={self.records}, stop_offset={self.stop_offset})")


cdef object _corrupt(const batch_header_t* h, int64_t index, str what):
    return CorruptRecordError(f"batch at {h.position}: record {index}: {what}", h.position)


cdef object _records_of(const batch_header_t* h, cptr batch, cursor_t* r):
    # The records section of a batch, decompressed (a bytes object) when its codec says so,
    # a memoryview over the batch's own bytes otherwise, with ``r`` set over it. The caller
    # keeps the returned object alive while it reads through ``r``.
    cdef cptr section = batch + HEADER_SIZE
    cdef Py_ssize_t section_len = h.batch_length + LENGTH_FIELDS_SIZE - HEADER_SIZE
    cdef int codec = h.attributes & ATTR_COMPRESSION_MASK
    cdef cptr p = section
    view = PyMemoryView_FromMemory(<char*>section, section_len, PyBUF_READ)
    if codec == 0:
        out = view
    elif codec > 4:
        raise CorruptRecordError(f"batch at {h.position}: unknown codec {codec}", h.position)
    else:
        try:
            out = decompress(codec, view)
        except CorruptRecordError as e:
            raise CorruptRecordError(f"batch at {h.position}: {e}", h.position) from e
        p = <cptr>PyBytes_AS_STRING(out)
        section_len = len(out)
    r.base = p
    r.p = p
    r.end = p + section_len
    return out


cdef inline bint _whole_batch_at(cptr buf, Py_ssize_t n, Py_ssize_t pos) noexcept nogil:
    # Does a whole batch (by its batchLength) lie in buf[pos:n]? parse_header checks the rest.
    if n - pos < LENGTH_FIELDS_SIZE:
        return 0
    return n - pos >= <int64_t>be32(buf + pos + OFF_BATCH_LENGTH) + LENGTH_FIELDS_SIZE


cdef inline bint _plain_header(cptr buf, Py_ssize_t n, Py_ssize_t pos,
                               batch_header_t* h) noexcept nogil:
    # The header of the whole batch at pos into *h when parse_header would accept it and its
    # records are not compressed: the batches the GIL-free walks read on their own. Anything
    # else (a codec, a header parse_header refuses) is left to the caller, with the GIL.
    if n - pos < HEADER_SIZE or buf[pos + OFF_MAGIC] != 2:
        return 0
    if be32(buf + pos + OFF_BATCH_LENGTH) < MIN_BATCH_LENGTH:
        return 0
    load_header(buf + pos, h)
    h.position = pos
    if h.records_count < 0 or h.last_offset_delta < 0 or h.base_offset > INT64_MAX - h.last_offset_delta:
        return 0
    return (h.attributes & ATTR_COMPRESSION_MASK) == 0


cdef inline void _plain_records(const batch_header_t* h, cptr batch, cursor_t* r) noexcept nogil:
    # r over the records section of an uncompressed batch.
    r.base = batch + HEADER_SIZE
    r.p = r.base
    r.end = batch + h.batch_length + LENGTH_FIELDS_SIZE


# What a GIL-free walk over batches or records ended at.
cdef enum:
    WALK_END = 0          # the whole batches of the buffer are done
    WALK_NEEDS_GIL = 1    # the batch at the position needs the GIL (a codec, or a bad header)
    WALK_FULL = 2         # add_batches: the map holds max_entries keys
    WALK_BAD_RECORD = 3   # a record's framing does not parse (its index in bad)
    WALK_TRAILING = 4     # bytes follow the counted records
    WALK_NO_MEMORY = 5


cdef inline slot_t* _find(slot_t* table, Py_ssize_t slots, uint64_t h0,
                          uint64_t h1) noexcept nogil:
    # The slot holding the digest, else the empty slot where it would go (linear probing from
    # the home slot); NULL when every slot is taken and the digest is not there.
    cdef Py_ssize_t i = <Py_ssize_t>((<u128>h0 * <u128>slots) >> 64), probes
    cdef slot_t* s
    for probes in range(slots):
        s = table + i
        if s.offset < 0 or (s.h0 == h0 and s.h1 == h1):
            return s
        i += 1
        if i == slots:
            i = 0
    return NULL


cdef inline bint _skipped(const batch_header_t* h, int64_t start_offset, const int64_t* ab,
                          Py_ssize_t na) noexcept nogil:
    # add_batches reads no record of a control batch, of a batch wholly before the floor,
    # or of a transactional batch that an aborted transaction of its producer covers.
    cdef Py_ssize_t j
    if (h.attributes & ATTR_CONTROL) != 0 or h.base_offset + h.last_offset_delta < start_offset:
        return 1
    if na and (h.attributes & ATTR_TRANSACTIONAL):
        for j in range(na):
            if ab[3 * j] == h.producer_id and ab[3 * j + 1] <= h.base_offset <= ab[3 * j + 2]:
                return 1
    return 0


cdef int _map_batch(OffsetMap m, const batch_header_t* h, cursor_t* r, int64_t start_offset,
                    Py_ssize_t limit, int64_t* records, int64_t* stop, int64_t* bad) noexcept nogil:
    # add_batches over the records of one batch (r over its records section).
    cdef rec_t rec
    cdef int64_t i, offset
    for i in range(h.records_count):
        if not _next(r, &rec):
            bad[0] = i
            return WALK_BAD_RECORD
        if rec.key_len < 0:
            continue
        offset = h.base_offset + rec.offset_delta
        if offset < start_offset:
            continue
        if m.size >= limit:
            stop[0] = offset
            return WALK_FULL
        if m.insert(rec.key, rec.key_len, offset) < 0:
            return WALK_NO_MEMORY  # limit <= slots: unreached
        records[0] += 1
    if r.p != r.end:
        bad[0] = r.end - r.p
        return WALK_TRAILING
    return WALK_END


cdef int _map_run(OffsetMap m, cptr buf, Py_ssize_t n, Py_ssize_t* pos, batch_header_t* h,
                  int64_t start_offset, Py_ssize_t limit, const int64_t* ab, Py_ssize_t na,
                  int64_t* records, Py_ssize_t* batches, int64_t* stop, int64_t* bad) noexcept nogil:
    # add_batches over the whole batches from *pos, without the GIL, up to the first batch
    # that needs it (WALK_NEEDS_GIL, *pos and *h at that batch), the end, or a stop.
    cdef cursor_t r
    cdef int st
    while _whole_batch_at(buf, n, pos[0]):
        if not _plain_header(buf, n, pos[0], h):
            return WALK_NEEDS_GIL
        if not _skipped(h, start_offset, ab, na):
            _plain_records(h, buf + pos[0], &r)
            st = _map_batch(m, h, &r, start_offset, limit, records, stop, bad)
            if st != WALK_END:
                return st
        _map_batch_read(m, h, start_offset)
        batches[0] += 1
        pos[0] += h.batch_length + LENGTH_FIELDS_SIZE
    return WALK_END


cdef inline void _map_batch_read(OffsetMap m, const batch_header_t* h,
                                 int64_t start_offset) noexcept nogil:
    if h.base_offset + h.last_offset_delta >= start_offset:
        m.latest_offset = h.base_offset + h.last_offset_delta


ctypedef struct mask_t:
    unsigned char* data
    Py_ssize_t used
    Py_ssize_t cap


cdef int _mask_batch(OffsetMap m, const batch_header_t* h, cursor_t* r, int64_t now_ms,
                     mask_t* out, int64_t* bad) noexcept nogil:
    # retain_mask over the records of one batch (r over its records section).
    cdef rec_t rec
    cdef int64_t i, offset
    cdef unsigned char* grown
    cdef unsigned char keep
    cdef bint control = (h.attributes & ATTR_CONTROL) != 0
    cdef bint drop_tombstones = ((h.attributes & ATTR_DELETE_HORIZON) != 0
                                 and now_ms >= h.base_timestamp)
    for i in range(h.records_count):
        if not _next(r, &rec):
            bad[0] = i
            return WALK_BAD_RECORD
        if out.used == out.cap:
            grown = <unsigned char*>realloc(out.data, out.cap * 2)
            if grown == NULL:
                return WALK_NO_MEMORY
            out.data = grown
            out.cap *= 2
        offset = h.base_offset + rec.offset_delta
        if control or offset > m.latest_offset:
            keep = 1
        elif rec.key_len < 0:
            keep = 0
        else:
            keep = offset >= m.lookup(rec.key, rec.key_len) and not (rec.value_len < 0
                                                                      and drop_tombstones)
        out.data[out.used] = keep
        out.used += 1
    if r.p != r.end:
        bad[0] = r.end - r.p
        return WALK_TRAILING
    return WALK_END


cdef int _mask_run(OffsetMap m, cptr buf, Py_ssize_t n, Py_ssize_t* pos, batch_header_t* h,
                   int64_t now_ms, mask_t* out, int64_t* bad) noexcept nogil:
    # retain_mask over the whole batches from *pos, without the GIL, as _map_run.
    cdef cursor_t r
    cdef int st
    while _whole_batch_at(buf, n, pos[0]):
        if not _plain_header(buf, n, pos[0], h):
            return WALK_NEEDS_GIL
        _plain_records(h, buf + pos[0], &r)
        st = _mask_batch(m, h, &r, now_ms, out, bad)
        if st != WALK_END:
            return st
        pos[0] += h.batch_length + LENGTH_FIELDS_SIZE
    return WALK_END


cdef int _walk_failed(int st, const batch_header_t* h, int64_t bad) except -1:
    # Raise for a walk that ended on a bad record, trailing bytes or no memory.
    if st == WALK_BAD_RECORD:
        raise _corrupt(h, bad, "bad record framing")
    if st == WALK_TRAILING:
        raise _corrupt(h, h.records_count, f"{bad} bytes follow the counted records")
    if st == WALK_NO_MEMORY:
        raise MemoryError()
    return 0


cdef class OffsetMap:
    """OffsetMap(memory=None, *, slots=None, load_factor=0.9): ``memory // 24`` slots from a
    byte budget, or ``slots`` given; the map stops taking keys past int(slots * load_factor)."""

    def __cinit__(self, memory=None, *, slots=None, double load_factor=DEFAULT_LOAD_FACTOR):
        cdef Py_ssize_t n
        if (memory is None) == (slots is None):
            raise ValueError("give one of memory and slots")
        n = slots if slots is not None else memory // sizeof(slot_t)
        if n < 1:
            raise ValueError(f"an offset map needs at least one slot ({sizeof(slot_t)} bytes)")
        if not 0.0 < load_factor <= 1.0:
            raise ValueError(f"load factor {load_factor} outside (0, 1]")
        self.table = <slot_t*>malloc(n * sizeof(slot_t))
        if self.table == NULL:
            raise MemoryError(f"offset map of {n} slots")
        self.slots = n
        self.load_factor = load_factor
        self.clear()

    def __dealloc__(self):
        free(self.table)

    @property
    def max_entries(self):
        """The keys the map takes before add_batches stops: (int)(slots * load_factor)."""
        return <Py_ssize_t>(self.slots * self.load_factor)

    @property
    def utilization(self):
        return self.size / <double>self.slots

    def clear(self):
        """Forget every key; latest_offset back to -1. The table is overwritten without the
        GIL: at the default dedupe buffer (128 MiB) that takes ~13 ms, which held the broker's
        loop up once per clean."""
        with nogil:
            memset(self.table, 0xFF, self.slots * sizeof(slot_t))  # offset -1 in every slot
        self.size = 0
        self.latest_offset = -1

    def update_latest_offset(self, int64_t offset):
        """Set latest_offset (the cleaner's fast-forward over a gap at a segment's end)."""
        self.latest_offset = offset

    cdef int64_t lookup(self, const unsigned char* p, Py_ssize_t n) noexcept nogil:
        cdef uint64_t h0, h1
        cdef slot_t* s
        _digest(p, n, &h0, &h1)
        s = _find(self.table, self.slots, h0, h1)
        return -1 if s == NULL else s.offset

    cdef int insert(self, const unsigned char* p, Py_ssize_t n, int64_t offset) noexcept nogil:
        cdef uint64_t h0, h1
        cdef slot_t* s
        _digest(p, n, &h0, &h1)
        s = _find(self.table, self.slots, h0, h1)
        if s == NULL:
            return -1
        if s.offset < 0:
            s.h0 = h0
            s.h1 = h1
            s.offset = offset
            self.size += 1
        elif offset > s.offset:
            s.offset = offset
        if offset > self.latest_offset:
            self.latest_offset = offset
        return 0

    def get(self, key):
        """The offset of ``key``'s last occurrence put, -1 if none."""
        cdef Py_buffer view
        PyObject_GetBuffer(key, &view, PyBUF_SIMPLE)
        try:
            return self.lookup(<cptr>view.buf, view.len)
        finally:
            PyBuffer_Release(&view)

    def put(self, key, int64_t offset):
        """Map ``key`` to ``offset``, keeping the greater offset of a key already there. A
        None key is skipped, as Kafka skips a record without one. Raises ValueError for a
        negative offset, OverflowError for a new key when every slot is taken."""
        cdef Py_buffer view
        cdef int rc
        if key is None:
            return
        if offset < 0:
            raise ValueError(f"negative offset {offset}")
        PyObject_GetBuffer(key, &view, PyBUF_SIMPLE)
        try:
            rc = self.insert(<cptr>view.buf, view.len, offset)
        finally:
            PyBuffer_Release(&view)
        if rc < 0:
            raise OverflowError(f"offset map full: {self.size} keys in {self.slots} slots")

    def add_batches(self, buf, int64_t start_offset=0, Py_ssize_t pos=0, aborted=()):
        """Put every keyed record at or past ``start_offset`` of the non-control batches of
        buf[pos:], in order, as Kafka's buildOffsetMapForSegment: a transactional batch of a
        producer whose aborted transaction covers it (``aborted``: (producer_id, first_offset,
        last_offset) triples, the .txnindex's entries) is skipped; latest_offset becomes each
        batch's last offset once the batch is read. Stops, ``full`` set, at the first keyed
        record at or past the floor met once the map holds max_entries keys: ``stop_offset``
        is that record's offset and ``position`` its batch's. Otherwise ``position`` is where
        the whole batches read end (a batch cut by the buffer's end is left for the next read)
        and ``stop_offset`` -1. Raises CorruptRecordError for a batch or record that does not
        parse."""
        cdef Py_buffer view
        cdef batch_header_t h
        cdef cursor_t r
        cdef MapFill fill = MapFill.__new__(MapFill)
        cdef Py_ssize_t n, limit = <Py_ssize_t>(self.slots * self.load_factor), na = 0, j
        cdef Py_ssize_t batches = 0
        cdef int64_t records = 0, stop = -1, bad = 0
        cdef int64_t* ab = NULL
        cdef cptr p
        cdef int st
        # Python's own checks first (the ranges' shape and int64 range, buf a buffer), so
        # nothing is allocated before an exception can leave.
        ranges = [(<int64_t>pid, <int64_t>first, <int64_t>last_ab) for pid, first, last_ab in aborted]
        fill.stop_offset = -1
        PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
        try:
            if ranges:
                ab = <int64_t*>PyMem_Malloc(3 * len(ranges) * sizeof(int64_t))
                if ab == NULL:
                    raise MemoryError()
                for j in range(len(ranges)):
                    ab[3 * j], ab[3 * j + 1], ab[3 * j + 2] = ranges[j]
                na = len(ranges)
            n = view.len
            p = <cptr>view.buf
            if not 0 <= pos <= n:
                raise ValueError(f"position {pos} outside a buffer of {n} bytes")
            # The walk runs without the GIL (the buffer is held by ``view``, the map is this
            # thread's), taking it back only for a compressed batch's decompression or to
            # raise: the broker's other threads run meanwhile.
            while True:
                with nogil:
                    st = _map_run(self, p, n, &pos, &h, start_offset, limit, ab, na, &records,
                                  &batches, &stop, &bad)
                if st == WALK_NEEDS_GIL:
                    parse_header(p, n, pos, &h, False)  # raises for a header it refuses
                    st = WALK_END
                    if not _skipped(&h, start_offset, ab, na):
                        section = _records_of(&h, p + pos, &r)
                        with nogil:
                            st = _map_batch(self, &h, &r, start_offset, limit, &records, &stop, &bad)
                        section = None
                    if st == WALK_END:
                        _map_batch_read(self, &h, start_offset)
                        batches += 1
                        pos += h.batch_length + LENGTH_FIELDS_SIZE
                        continue
                fill.records = records
                fill.batches = batches
                if st == WALK_FULL:
                    fill.full = 1
                    fill.stop_offset = stop
                    fill.position = pos
                    return fill
                _walk_failed(st, &h, bad)
                fill.position = pos
                return fill
        finally:
            PyBuffer_Release(&view)
            PyMem_Free(ab)

    def retain_mask(self, buf, Py_ssize_t pos=0, int64_t now_ms=-1):
        """One byte per record of the whole batches of buf[pos:], in order: 1 where the
        cleaner keeps the record, by Kafka's shouldRetainRecord over this map. A control
        batch's records are kept; a record past latest_offset is kept; otherwise a record
        without a key is dropped, and a keyed one is kept when its offset is at least the
        map's offset for its key (or the key is absent), unless it is a tombstone (null
        value) of a batch whose delete horizon (baseTimestamp, when the batch has one) is at
        or before ``now_ms``. Raises CorruptRecordError for a batch or record that does not
        parse."""
        cdef Py_buffer view
        cdef batch_header_t h
        cdef cursor_t r
        cdef Py_ssize_t n
        cdef int64_t bad = 0
        cdef mask_t out
        cdef cptr p
        cdef int st
        out.used = 0
        out.cap = 1024
        out.data = NULL
        PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
        try:
            out.data = <unsigned char*>malloc(out.cap)
            if out.data == NULL:
                raise MemoryError()
            n = view.len
            p = <cptr>view.buf
            if not 0 <= pos <= n:
                raise ValueError(f"position {pos} outside a buffer of {n} bytes")
            while True:  # without the GIL, as add_batches
                with nogil:
                    st = _mask_run(self, p, n, &pos, &h, now_ms, &out, &bad)
                if st == WALK_NEEDS_GIL:
                    parse_header(p, n, pos, &h, False)  # raises for a header it refuses
                    section = _records_of(&h, p + pos, &r)
                    with nogil:
                        st = _mask_batch(self, &h, &r, now_ms, &out, &bad)
                    section = None
                    if st == WALK_END:
                        pos += h.batch_length + LENGTH_FIELDS_SIZE
                        continue
                _walk_failed(st, &h, bad)
                return PyByteArray_FromStringAndSize(<char*>out.data, out.used)
        finally:
            PyBuffer_Release(&view)
            free(out.data)
