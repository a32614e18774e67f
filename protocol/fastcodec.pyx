# cython: language_level=3
"""Hand-tuned codecs for the hot messages; byte-identical to the generic codec.

    decode_produce_request(version, buf, pos)        Produce request body, v3-13
    encode_fetch_response(version, corr_id, body)    whole Fetch response frame, v4-18
    encode_metadata_response(version, corr_id, body) whole Metadata response frame, v0-13
    decode_fetch_request(version, buf, pos)          Fetch request body, v4-18
    encode_fetch_request(version, corr_id, client_id, body)
                                                     whole Fetch request frame, v4-18
    decode_fetch_response(version, buf, pos)         Fetch response body, v4-18

The decoders take (buf, pos) or a protocol.types.Reader, which they read up to its end
and leave where the body ends, as MessageCodec.decode does.

The generic codec (protocol/codec.py) stays the reference: every rule below is its rule,
and tests/protocol/test_fastcodec.py checks every version byte for byte against it. The
layouts are the schemas' (protocol/schemas/produce_fetch.schema, metadata.schema); in
flexible versions (Produce 9+, Fetch 12+, Metadata 9+) strings, bytes and arrays are
compact (unsigned varint length + 1, 0 = null) and every struct ends in a tagged-field
section.

Why it is faster: the generic codec pays a Python call and a struct.pack per field and a
closure per struct. Here one C buffer grows by doubling, fixed-width fields are stored
big-endian after a single reserve() per run of them, and attribute reads go through
interned names. Record bytes are never copied on decode (memoryview slices of the request
buffer, writable when it is, so the broker can assign offsets in place); on encode a
records value that is not a buffer (a file slice: anything with ``.size``) becomes its own
part, as Writer.external does, so it can go out with sendfile.

Rules kept from the generic codec that are easy to miss:
  * tagged fields are written only when the value is not None and differs from the
    field's default (a struct default is a fresh instance, compared with KafkaStruct.__eq__),
    in tag order, each as tag, size, value;
  * a file slice of size 0 is not spliced (only its length, 0, is written);
  * a null array or string where the schema does not allow one is a ValueError on encode,
    but decodes as None;
  * the frame size is an unsigned 32-bit prefix covering every part.
"""
from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytearray cimport PyByteArray_Check, PyByteArray_FromStringAndSize
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_Check, PyBytes_FromStringAndSize
from cpython.memoryview cimport PyMemoryView_Check
from cpython.mem cimport PyMem_Free, PyMem_Malloc, PyMem_Realloc
from cpython.object cimport PyObject, PyTypeObject
from cpython.unicode cimport PyUnicode_AsUTF8AndSize, PyUnicode_DecodeUTF8
from libc.stdint cimport int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.string cimport memcpy, memmove, memset

from protocol import messages
from protocol.types import ProtocolError, Reader as _Reader

# ---- struct classes and their defaults (what the generic codec builds and compares) -------

cdef type _ProduceRequest = messages.ProduceRequest
cdef type _TopicProduceData = messages.ProduceRequest.TopicProduceData
cdef type _PartitionProduceData = messages.ProduceRequest.PartitionProduceData
cdef object _ZERO_UUID = _TopicProduceData._defaults["topic_id"]
cdef object _EMPTY_NAME = _TopicProduceData._defaults["name"]

cdef type _EpochEndOffset = messages.FetchResponse.PartitionData.EpochEndOffset
cdef type _LeaderIdAndEpoch = messages.FetchResponse.PartitionData.LeaderIdAndEpoch
cdef type _SnapshotId = messages.FetchResponse.PartitionData.SnapshotId

cdef tuple _NO_ARGS = ()


def _range(codec):
    versions = codec.message.versions
    return versions.lo, versions.hi


# The versions each function handles: exactly the schema's (the tests assert they match).
PRODUCE_VERSIONS = _range(messages.REQUESTS[0])
FETCH_VERSIONS = _range(messages.RESPONSES[1])
METADATA_VERSIONS = _range(messages.RESPONSES[3])
cdef int PRODUCE_MIN = PRODUCE_VERSIONS[0], PRODUCE_MAX = PRODUCE_VERSIONS[1]
cdef int FETCH_MIN = FETCH_VERSIONS[0], FETCH_MAX = FETCH_VERSIONS[1]
cdef int METADATA_MIN = METADATA_VERSIONS[0], METADATA_MAX = METADATA_VERSIONS[1]


cdef int _check_version(str name, int version, int lo, int hi) except -1:
    if version < lo or version > hi:
        raise ProtocolError(f"{name} version {version} is not in {lo}-{hi}")
    return 0


cdef extern from "Python.h":
    ctypedef struct PyMemberDef:
        Py_ssize_t offset
    ctypedef struct PyMemberDescrObject:
        PyMemberDef* d_member


cdef Py_ssize_t _slot_offset(type cls, str name) except -1:
    descr = cls.__dict__[name]
    if type(descr).__name__ != "member_descriptor":
        raise TypeError(f"{cls.__qualname__}.{name} is not a __slots__ member")
    return (<PyMemberDescrObject*>descr).d_member.offset


cdef inline object _field(object obj, bint exact, Py_ssize_t offset, str name):
    """obj.name. When type(obj) is exactly the generated class (exact), the slot is read at
    its offset: the class is ours, has no __dict__ and cannot shadow the member, so this is
    what getattr would return, minus the type lookup and descriptor call (the dominant cost
    of a 100-partition Fetch). An empty slot, or any other type, takes the getattr path."""
    cdef PyObject* v
    if exact:
        v = (<PyObject**>((<char*><PyObject*>obj) + offset))[0]
        if v != NULL:
            return <object>v
    return getattr(obj, name)


cdef inline object _tagged(object obj, bint exact, Py_ssize_t offset, str name):
    """getattr(obj, name, None), as the generic writer reads tagged fields."""
    cdef PyObject* v
    if exact:
        v = (<PyObject**>((<char*><PyObject*>obj) + offset))[0]
        if v != NULL:
            return <object>v
    return getattr(obj, name, None)


cdef inline object _new(type cls):
    # cls.__new__(cls) without the attribute lookup and call: object_new -> tp_alloc.
    return (<PyTypeObject*>cls).tp_new(cls, <PyObject*>_NO_ARGS, NULL)


# ---- reading --------------------------------------------------------------------------------

cdef inline int _need(Cursor* c, int64_t n) except -1:
    if n < 0 or n > c.end - c.pos:
        raise ProtocolError(f"need {n} bytes at position {c.pos}, have {c.end - c.pos}")
    return 0


cdef int read_i16(Cursor* c, int16_t* out) except -1:
    _need(c, 2)
    cdef const uint8_t* p = c.data + c.pos
    out[0] = <int16_t>((<uint32_t>p[0] << 8) | p[1])
    c.pos += 2
    return 0


cdef int read_i32(Cursor* c, int32_t* out) except -1:
    _need(c, 4)
    cdef const uint8_t* p = c.data + c.pos
    out[0] = <int32_t>((<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16) | (<uint32_t>p[2] << 8) | p[3])
    c.pos += 4
    return 0


cdef int read_i64(Cursor* c, int64_t* out) except -1:
    _need(c, 8)
    cdef const uint8_t* p = c.data + c.pos
    cdef uint64_t u = 0
    cdef int i
    for i in range(8):
        u = (u << 8) | p[i]
    out[0] = <int64_t>u
    c.pos += 8
    return 0


cdef object _read_uuid(Cursor* c):
    _need(c, 16)
    cdef Py_ssize_t at = c.pos
    c.pos += 16
    return PyBytes_FromStringAndSize(<const char*>c.data + at, 16)


cdef int read_uvarint(Cursor* c, int64_t* out) except -1:
    # At most 5 bytes, as Reader.uvarint (the fifth may carry bits above 32).
    cdef uint64_t value = 0
    cdef int shift = 0
    cdef uint8_t b
    while True:
        if shift > 28:
            raise ProtocolError(f"unsigned varint longer than 5 bytes at {c.pos}")
        _need(c, 1)
        b = c.data[c.pos]
        c.pos += 1
        value |= <uint64_t>(b & 0x7F) << shift
        if not b & 0x80:
            out[0] = <int64_t>value
            return 0
        shift += 7


cdef int skip_tagged_fields(Cursor* c) except -1:
    # KIP-482: receivers skip tags they do not know (Produce requests define none).
    cdef int64_t count, i, tag, size
    read_uvarint(c, &count)
    for i in range(count):
        read_uvarint(c, &tag)
        read_uvarint(c, &size)
        if size > c.end - c.pos:
            raise ProtocolError(f"tagged field {tag} overruns the message")
        c.pos += size
    return 0


cdef int64_t _read_length(Cursor* c, bint flexible, bint wide, str what) except -2:
    """A string (int16), bytes or array (int32) length; compact when flexible. -1 = null."""
    cdef int64_t n
    cdef int16_t n16
    cdef int32_t n32
    if flexible:
        read_uvarint(c, &n)
        n -= 1
        return -1 if n < 0 else n
    if wide:
        read_i32(c, &n32)
        n = n32
    else:
        read_i16(c, &n16)
        n = n16
    if n < -1:
        raise ProtocolError(f"negative {what} length {n}")
    return n


cdef object _read_string(Cursor* c, bint flexible):
    cdef int64_t n = _read_length(c, flexible, False, "string")
    if n < 0:
        return None
    _need(c, n)
    cdef Py_ssize_t at = c.pos
    c.pos += n
    try:
        return PyUnicode_DecodeUTF8(<const char*>c.data + at, n, NULL)
    except UnicodeDecodeError:
        raise ProtocolError(f"string at {at} is not valid UTF-8") from None


cdef int64_t _read_array_length(Cursor* c, bint flexible) except -2:
    cdef int64_t n = _read_length(c, flexible, True, "array")
    if n > c.end - c.pos:
        raise ProtocolError(f"array of {n} elements with {c.end - c.pos} bytes left")
    return n


def frame_buffer(Py_ssize_t size):
    """A bytearray of ``size`` bytes left as malloc gave them: for a frame the socket is
    about to fill, which bytearray(size) would first zero (a memset per received megabyte)."""
    if size < 0:
        raise ValueError(f"negative frame size {size}")
    return PyByteArray_FromStringAndSize(NULL, size)


ctypedef object (*_BodyReader)(int version, object view, Cursor* c)


cdef object _decode_body(_BodyReader read, int version, object buf, Py_ssize_t pos):
    """read(version, view, cursor) over buf[pos:], or over a Reader's buf[pos:end], which is
    then left where the body ends, as MessageCodec.decode leaves it."""
    cdef object reader = None
    cdef Py_ssize_t end = -1
    if type(buf) is _Reader:
        reader = buf
        pos = reader.pos
        end = reader.end
        buf = reader.buf
    cdef object view = buf if type(buf) is memoryview else memoryview(buf)
    cdef Py_buffer pybuf
    cdef Cursor c
    PyObject_GetBuffer(view, &pybuf, PyBUF_SIMPLE)
    try:
        if pybuf.itemsize != 1:
            raise TypeError("a message decodes from a buffer of bytes")
        if end < 0 or end > pybuf.len:
            end = pybuf.len
        if pos < 0 or pos > end:
            raise ProtocolError(f"position {pos} outside a buffer of {end} bytes")
        c.data = <const uint8_t*>pybuf.buf
        c.pos = pos
        c.end = end
        result = read(version, view, &c)
        if reader is not None:
            reader.pos = c.pos
        return result
    finally:
        PyBuffer_Release(&pybuf)


def decode_produce_request(int version, object buf, Py_ssize_t pos=0):
    """The Produce request body at buf[pos:] (or at a Reader's pos, which it advances);
    records are memoryview slices of buf."""
    _check_version("ProduceRequest", version, PRODUCE_MIN, PRODUCE_MAX)
    return _decode_body(_decode_produce, version, buf, pos)


cdef object _decode_produce(int version, object view, Cursor* cursor):
    cdef bint flexible = version >= 9
    cdef Cursor c = cursor[0]  # a local copy, stored back at the end
    cdef int16_t acks
    cdef int32_t timeout_ms, index
    cdef int64_t ntopics, nparts, nrec, i, j
    cdef list topics, partitions

    request = _new(_ProduceRequest)
    request.transactional_id = _read_string(&c, flexible)
    read_i16(&c, &acks)
    request.acks = acks
    read_i32(&c, &timeout_ms)
    request.timeout_ms = timeout_ms
    ntopics = _read_array_length(&c, flexible)
    if ntopics < 0:
        request.topic_data = None
    else:
        topics = []
        for i in range(ntopics):
            topic = _new(_TopicProduceData)
            if version <= 12:
                topic.name = _read_string(&c, flexible)
                topic.topic_id = _ZERO_UUID
            else:
                _need(&c, 16)
                topic.name = _EMPTY_NAME
                topic.topic_id = PyBytes_FromStringAndSize(<const char*>c.data + c.pos, 16)
                c.pos += 16
            nparts = _read_array_length(&c, flexible)
            if nparts < 0:
                topic.partition_data = None
            else:
                partitions = []
                for j in range(nparts):
                    partition = _new(_PartitionProduceData)
                    read_i32(&c, &index)
                    partition.index = index
                    nrec = _read_length(&c, flexible, True, "bytes")
                    if nrec < 0:
                        partition.records = None
                    else:
                        _need(&c, nrec)
                        partition.records = view[c.pos:c.pos + nrec]
                        c.pos += nrec
                    if flexible:
                        skip_tagged_fields(&c)
                    partitions.append(partition)
                topic.partition_data = partitions
            if flexible:
                skip_tagged_fields(&c)
            topics.append(topic)
        request.topic_data = topics
    if flexible:
        skip_tagged_fields(&c)
    cursor[0] = c
    return request


# ---- writing --------------------------------------------------------------------------------

cdef int out_init(Out* o, Py_ssize_t cap) except -1:
    o.data = <char*>PyMem_Malloc(cap)
    if o.data == NULL:
        raise MemoryError()
    o.len = 0
    o.cap = cap
    return 0


cdef void out_free(Out* o) noexcept:
    PyMem_Free(o.data)
    o.data = NULL


cdef int _grow(Out* o, Py_ssize_t n) except -1:
    cdef Py_ssize_t cap = o.cap * 2
    while cap < o.len + n:
        cap *= 2
    cdef char* data = <char*>PyMem_Realloc(o.data, cap)
    if data == NULL:
        raise MemoryError()
    o.data = data
    o.cap = cap
    return 0


cdef int reserve(Out* o, Py_ssize_t n) except -1:
    if o.len + n > o.cap:
        return _grow(o, n)
    return 0


cdef void put_i8(Out* o, int v) noexcept:
    o.data[o.len] = <char>v
    o.len += 1


cdef void put_i16(Out* o, int16_t v) noexcept:
    cdef uint8_t* p = <uint8_t*>o.data + o.len
    p[0] = <uint8_t>(<uint16_t>v >> 8)
    p[1] = <uint8_t>v
    o.len += 2


cdef void put_i32(Out* o, int32_t v) noexcept:
    cdef uint32_t u = <uint32_t>v
    cdef uint8_t* p = <uint8_t*>o.data + o.len
    p[0] = <uint8_t>(u >> 24)
    p[1] = <uint8_t>(u >> 16)
    p[2] = <uint8_t>(u >> 8)
    p[3] = <uint8_t>u
    o.len += 4


cdef void put_i64(Out* o, int64_t v) noexcept:
    cdef uint64_t u = <uint64_t>v
    cdef uint8_t* p = <uint8_t*>o.data + o.len
    cdef int i
    for i in range(8):
        p[i] = <uint8_t>(u >> (56 - 8 * i))
    o.len += 8


cdef void put_uvarint(Out* o, uint64_t v) noexcept:
    # Needs up to 10 reserved bytes.
    while v >= 0x80:
        o.data[o.len] = <char>((v & 0x7F) | 0x80)
        o.len += 1
        v >>= 7
    o.data[o.len] = <char>v
    o.len += 1


cdef inline int _uvarint_size(uint64_t v) noexcept:
    cdef int n = 1
    while v >= 0x80:
        v >>= 7
        n += 1
    return n


cdef int put_bytes(Out* o, const char* p, Py_ssize_t n) except -1:
    reserve(o, n)
    memcpy(o.data + o.len, p, n)
    o.len += n
    return 0


cdef int _put_length(Out* o, Py_ssize_t n, bint flexible, bint wide) except -1:
    """A non-null length: compact (n + 1) when flexible, else int32 (wide) or int16."""
    reserve(o, 10)
    if flexible:
        put_uvarint(o, <uint64_t>n + 1)
    elif wide:
        if n > 0x7FFFFFFF:
            _too_long(n, "int32")
        put_i32(o, <int32_t>n)
    else:
        if n > 0x7FFF:
            _too_long(n, "int16")
        put_i16(o, <int16_t>n)
    return 0


cdef int _too_long(Py_ssize_t n, str what) except -1:
    raise OverflowError(f"length {n} does not fit in an {what}")


cdef int _put_null(Out* o, bint flexible, bint wide, str where, int version, bint nullable) except -1:
    if not nullable:
        raise ValueError(f"{where} v{version} is not nullable")
    reserve(o, 4)
    if flexible:
        put_uvarint(o, 0)
    elif wide:
        put_i32(o, -1)
    else:
        put_i16(o, -1)
    return 0


cdef int _put_string(Out* o, object v, bint flexible, str where, int version,
                     bint nullable) except -1:
    cdef const char* p
    cdef Py_ssize_t n
    if v is None:
        return _put_null(o, flexible, False, where, version, nullable)
    if type(v) is str:
        p = PyUnicode_AsUTF8AndSize(v, &n)  # str caches its UTF-8: no copy for ASCII
        _put_length(o, n, flexible, False)
        return put_bytes(o, p, n)
    data = v.encode()  # whatever the generic codec would do with a str look-alike
    _put_length(o, len(data), flexible, False)
    return _put_buffer(o, data)


cdef int _put_buffer(Out* o, object data) except -1:
    cdef Py_buffer view
    PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    try:
        put_bytes(o, <const char*>view.buf, view.len)
    finally:
        PyBuffer_Release(&view)
    return 0


cdef int _put_uuid(Out* o, object v) except -1:
    if v is None:
        reserve(o, 16)
        memset(o.data + o.len, 0, 16)
        o.len += 16
        return 0
    if len(v) != 16:
        raise ValueError(f"uuid must be 16 bytes, got {len(v)}")
    if type(v) is bytes:
        return put_bytes(o, PyBytes_AS_STRING(v), 16)
    return _put_buffer(o, v)


cdef Py_ssize_t _put_array_length(Out* o, object v, bint flexible, str where, int version,
                                  bint nullable) except -2:
    """Writes an array's length (or null) and returns it, -1 for null."""
    if v is None:
        _put_null(o, flexible, True, where, version, nullable)
        return -1
    cdef Py_ssize_t n = len(v)
    _put_length(o, n, flexible, True)
    return n


cdef int _put_int32_array(Out* o, object v, bint flexible, str where, int version) except -1:
    if _put_array_length(o, v, flexible, where, version, False) < 0:
        return 0
    for x in v:
        reserve(o, 4)
        put_i32(o, <int32_t>x)
    return 0


cdef class _Frame:
    """The output of one response: the C buffer, plus the parts spliced in (file slices)
    with the buffer position each follows."""
    cdef Out out
    cdef list splits  # position, object, position, object, ...
    cdef int64_t spliced_size

    def __cinit__(self, Py_ssize_t cap):
        out_init(&self.out, cap)
        self.splits = []
        self.spliced_size = 0

    def __dealloc__(self):
        out_free(&self.out)

    cdef int header(self, int32_t correlation_id, bint flexible) except -1:
        reserve(&self.out, 9)
        put_i32(&self.out, 0)  # size, patched by parts()
        put_i32(&self.out, correlation_id)
        if flexible:
            put_uvarint(&self.out, 0)
        return 0

    cdef int put_records(self, object v, bint flexible, str where, int version) except -1:
        cdef Out* o = &self.out
        cdef Py_ssize_t n
        cdef int64_t size
        if v is None:
            return _put_null(o, flexible, True, where, version, True)
        # isinstance(v, (bytes, bytearray, memoryview)) as the generic writer asks it, by
        # type flags and MRO instead of a tuple walk through isinstance.
        if PyBytes_Check(v) or PyByteArray_Check(v) or PyMemoryView_Check(v):
            _put_length(o, len(v), flexible, True)
            return _put_buffer(o, v)
        size = v.size
        if size + 1 < 0 and flexible:
            raise ValueError(f"unsigned varint cannot be negative: {size + 1}")
        _put_length(o, <Py_ssize_t>size, flexible, True)
        if size:
            self.splits.append(o.len)
            self.splits.append(v)
            self.spliced_size += size
        return 0

    cdef list parts(self):
        cdef Out* o = &self.out
        cdef int64_t total = o.len + self.spliced_size - 4
        if total < 0 or total > 0xFFFFFFFF:
            raise OverflowError(f"frame size {total} does not fit in 4 bytes")
        cdef uint8_t* p = <uint8_t*>o.data
        p[0] = <uint8_t>(total >> 24)
        p[1] = <uint8_t>(total >> 16)
        p[2] = <uint8_t>(total >> 8)
        p[3] = <uint8_t>total
        cdef list parts = []
        cdef Py_ssize_t prev = 0, at, i
        for i in range(0, len(self.splits), 2):
            at = self.splits[i]
            parts.append(PyBytes_FromStringAndSize(o.data + prev, at - prev))
            parts.append(self.splits[i + 1])
            prev = at
        if prev < o.len or not self.splits:
            parts.append(PyBytes_FromStringAndSize(o.data + prev, o.len - prev))
        return parts


cdef class _TagDefault:
    """A tagged struct field's default: the generic writer omits the field when its value is
    None or == a fresh cls() (KafkaStruct.__eq__: same type, every field ==)."""
    cdef type cls
    cdef tuple names, defaults
    cdef Py_ssize_t offsets[4]
    cdef int n

    def __cinit__(self, type cls):
        self.cls = cls
        self.names = tuple(cls._fields)
        self.defaults = tuple(cls._defaults[name] for name in self.names)
        self.n = len(self.names)
        assert self.n <= 4 and not any(callable(d) for d in self.defaults)
        for i, name in enumerate(self.names):
            self.offsets[i] = _slot_offset(cls, name)

    cdef bint absent(self, object value) except -1:
        if value is None:
            return True
        if type(value) is not self.cls:
            return bool(value == self.cls())
        cdef int i
        for i in range(self.n):
            v = _field(value, True, self.offsets[i], self.names[i])
            default = self.defaults[i]
            if v is default and type(v) is int:  # small ints are shared: == without a call
                continue
            if not (v == default):
                return False
        return True


cdef _TagDefault _EPOCH_END_OFFSET = _TagDefault(_EpochEndOffset)
cdef _TagDefault _LEADER_ID_AND_EPOCH = _TagDefault(_LeaderIdAndEpoch)
cdef _TagDefault _SNAPSHOT_ID = _TagDefault(_SnapshotId)


cdef inline bint _list_absent(object value) except -1:
    if value is None:
        return True
    if type(value) is list:
        return len(<list>value) == 0
    return bool(value == [])


# ---- Fetch ----------------------------------------------------------------------------------

def encode_fetch_response(int version, int32_t correlation_id, object response):
    """A whole Fetch response frame as parts: encode_response(1, version, ...)."""
    _check_version("FetchResponse", version, FETCH_MIN, FETCH_MAX)
    cdef bint flexible = version >= 12
    cdef _Frame f = _Frame(1024)
    cdef Out* o = &f.out
    f.header(correlation_id, flexible)
    reserve(o, 10)
    put_i32(o, <int32_t>response.throttle_time_ms)
    if version >= 7:
        put_i16(o, <int16_t>response.error_code)
        put_i32(o, <int32_t>response.session_id)
    topics = response.responses
    if _put_array_length(o, topics, flexible, "FetchResponse.responses", version, False) > 0:
        for topic in topics:
            if version <= 12:
                _put_string(o, topic.topic, flexible, "FetchResponse.topic", version, False)
            else:
                _put_uuid(o, topic.topic_id)
            partitions = topic.partitions
            if _put_array_length(o, partitions, flexible, "FetchResponse.partitions", version,
                                 False) > 0:
                for partition in partitions:
                    _write_fetch_partition(f, partition, version, flexible)
            if flexible:
                reserve(o, 1)
                put_uvarint(o, 0)
    if flexible:
        _write_fetch_root_tags(o, response, version)
    return f.parts()


# Slot offsets of the per-partition structs (see _field).
cdef type _PartitionData = messages.FetchResponse.PartitionData
cdef Py_ssize_t _PD_PARTITION_INDEX = _slot_offset(_PartitionData, "partition_index")
cdef Py_ssize_t _PD_ERROR_CODE = _slot_offset(_PartitionData, "error_code")
cdef Py_ssize_t _PD_HIGH_WATERMARK = _slot_offset(_PartitionData, "high_watermark")
cdef Py_ssize_t _PD_LAST_STABLE_OFFSET = _slot_offset(_PartitionData, "last_stable_offset")
cdef Py_ssize_t _PD_LOG_START_OFFSET = _slot_offset(_PartitionData, "log_start_offset")
cdef Py_ssize_t _PD_DIVERGING_EPOCH = _slot_offset(_PartitionData, "diverging_epoch")
cdef Py_ssize_t _PD_CURRENT_LEADER = _slot_offset(_PartitionData, "current_leader")
cdef Py_ssize_t _PD_SNAPSHOT_ID = _slot_offset(_PartitionData, "snapshot_id")
cdef Py_ssize_t _PD_ABORTED_TRANSACTIONS = _slot_offset(_PartitionData, "aborted_transactions")
cdef Py_ssize_t _PD_PREFERRED_READ_REPLICA = _slot_offset(_PartitionData, "preferred_read_replica")
cdef Py_ssize_t _PD_RECORDS = _slot_offset(_PartitionData, "records")


cdef int _write_fetch_partition(_Frame f, object p, int version, bint flexible) except -1:
    cdef Out* o = &f.out
    cdef bint exact = type(p) is _PartitionData
    reserve(o, 30)
    put_i32(o, <int32_t>_field(p, exact, _PD_PARTITION_INDEX, "partition_index"))
    put_i16(o, <int16_t>_field(p, exact, _PD_ERROR_CODE, "error_code"))
    put_i64(o, <int64_t>_field(p, exact, _PD_HIGH_WATERMARK, "high_watermark"))
    put_i64(o, <int64_t>_field(p, exact, _PD_LAST_STABLE_OFFSET, "last_stable_offset"))
    if version >= 5:
        put_i64(o, <int64_t>_field(p, exact, _PD_LOG_START_OFFSET, "log_start_offset"))
    aborted = _field(p, exact, _PD_ABORTED_TRANSACTIONS, "aborted_transactions")
    if _put_array_length(o, aborted, flexible, "FetchResponse.aborted_transactions", version,
                         True) > 0:
        for txn in aborted:
            reserve(o, 17)
            put_i64(o, <int64_t>txn.producer_id)
            put_i64(o, <int64_t>txn.first_offset)
            if flexible:
                put_uvarint(o, 0)
    if version >= 11:
        reserve(o, 4)
        put_i32(o, <int32_t>_field(p, exact, _PD_PREFERRED_READ_REPLICA, "preferred_read_replica"))
    f.put_records(_field(p, exact, _PD_RECORDS, "records"), flexible, "FetchResponse.records", version)
    if not flexible:
        return 0
    # Tagged fields, in tag order: 0 diverging_epoch, 1 current_leader, 2 snapshot_id.
    diverging = _tagged(p, exact, _PD_DIVERGING_EPOCH, "diverging_epoch")
    leader = _tagged(p, exact, _PD_CURRENT_LEADER, "current_leader")
    snapshot = _tagged(p, exact, _PD_SNAPSHOT_ID, "snapshot_id")
    cdef bint has_diverging = not _EPOCH_END_OFFSET.absent(diverging)
    cdef bint has_leader = not _LEADER_ID_AND_EPOCH.absent(leader)
    cdef bint has_snapshot = not _SNAPSHOT_ID.absent(snapshot)
    reserve(o, 1 + 15 + 11 + 15)
    put_uvarint(o, <uint64_t>(has_diverging + has_leader + has_snapshot))
    if has_diverging:  # epoch int32, end_offset int64, no tags: 13 bytes
        put_uvarint(o, 0)
        put_uvarint(o, 13)
        put_i32(o, <int32_t>diverging.epoch)
        put_i64(o, <int64_t>diverging.end_offset)
        put_uvarint(o, 0)
    if has_leader:  # leader_id int32, leader_epoch int32, no tags: 9 bytes
        put_uvarint(o, 1)
        put_uvarint(o, 9)
        put_i32(o, <int32_t>leader.leader_id)
        put_i32(o, <int32_t>leader.leader_epoch)
        put_uvarint(o, 0)
    if has_snapshot:  # end_offset int64, epoch int32, no tags: 13 bytes
        put_uvarint(o, 2)
        put_uvarint(o, 13)
        put_i64(o, <int64_t>snapshot.end_offset)
        put_i32(o, <int32_t>snapshot.epoch)
        put_uvarint(o, 0)
    return 0


cdef int _write_fetch_root_tags(Out* o, object response, int version) except -1:
    # One tagged field, node_endpoints (tag 0, v16+); its size is known only once written,
    # so the value is written first and moved up past its size.
    endpoints = getattr(response, "node_endpoints", None) if version >= 16 else None
    reserve(o, 1)
    if _list_absent(endpoints):
        put_uvarint(o, 0)
        return 0
    reserve(o, 2)
    put_uvarint(o, 1)
    put_uvarint(o, 0)
    cdef Py_ssize_t start = o.len
    _put_array_length(o, endpoints, True, "FetchResponse.node_endpoints", version, False)
    for node in endpoints:
        reserve(o, 4)
        put_i32(o, <int32_t>node.node_id)
        _put_string(o, node.host, True, "FetchResponse.host", version, False)
        reserve(o, 4)
        put_i32(o, <int32_t>node.port)
        _put_string(o, node.rack, True, "FetchResponse.rack", version, True)
        reserve(o, 1)
        put_uvarint(o, 0)
    _prefix_size(o, start)
    return 0


cdef int _prefix_size(Out* o, Py_ssize_t start) except -1:
    """Inserts the uvarint size of the bytes written since start, before them."""
    cdef Py_ssize_t size = o.len - start
    cdef int k = _uvarint_size(<uint64_t>size)
    reserve(o, k)
    memmove(o.data + start + k, o.data + start, size)
    o.len = start
    put_uvarint(o, <uint64_t>size)
    o.len = start + k + size
    return 0


# ---- Metadata -------------------------------------------------------------------------------

def encode_metadata_response(int version, int32_t correlation_id, object response):
    """A whole Metadata response frame as parts: encode_response(3, version, ...)."""
    _check_version("MetadataResponse", version, METADATA_MIN, METADATA_MAX)
    cdef bint flexible = version >= 9
    cdef _Frame f = _Frame(4096)
    cdef Out* o = &f.out
    f.header(correlation_id, flexible)
    if version >= 3:
        reserve(o, 4)
        put_i32(o, <int32_t>response.throttle_time_ms)
    brokers = response.brokers
    if _put_array_length(o, brokers, flexible, "MetadataResponse.brokers", version, False) > 0:
        for broker in brokers:
            reserve(o, 4)
            put_i32(o, <int32_t>broker.node_id)
            _put_string(o, broker.host, flexible, "MetadataResponse.host", version, False)
            reserve(o, 4)
            put_i32(o, <int32_t>broker.port)
            if version >= 1:
                _put_string(o, broker.rack, flexible, "MetadataResponse.rack", version, True)
            if flexible:
                reserve(o, 1)
                put_uvarint(o, 0)
    if version >= 2:
        _put_string(o, response.cluster_id, flexible, "MetadataResponse.cluster_id", version, True)
    if version >= 1:
        reserve(o, 4)
        put_i32(o, <int32_t>response.controller_id)
    topics = response.topics
    if _put_array_length(o, topics, flexible, "MetadataResponse.topics", version, False) > 0:
        for topic in topics:
            _write_metadata_topic(o, topic, version, flexible)
    if 8 <= version <= 10:
        reserve(o, 4)
        put_i32(o, <int32_t>response.cluster_authorized_operations)
    if version >= 13:
        reserve(o, 2)
        put_i16(o, <int16_t>response.error_code)
    if flexible:
        reserve(o, 1)
        put_uvarint(o, 0)
    return f.parts()


cdef type _MetadataPartition = messages.MetadataResponse.MetadataResponsePartition
cdef Py_ssize_t _MP_ERROR_CODE = _slot_offset(_MetadataPartition, "error_code")
cdef Py_ssize_t _MP_PARTITION_INDEX = _slot_offset(_MetadataPartition, "partition_index")
cdef Py_ssize_t _MP_LEADER_ID = _slot_offset(_MetadataPartition, "leader_id")
cdef Py_ssize_t _MP_LEADER_EPOCH = _slot_offset(_MetadataPartition, "leader_epoch")
cdef Py_ssize_t _MP_REPLICA_NODES = _slot_offset(_MetadataPartition, "replica_nodes")
cdef Py_ssize_t _MP_ISR_NODES = _slot_offset(_MetadataPartition, "isr_nodes")
cdef Py_ssize_t _MP_OFFLINE_REPLICAS = _slot_offset(_MetadataPartition, "offline_replicas")


cdef int _write_metadata_topic(Out* o, object topic, int version, bint flexible) except -1:
    cdef bint exact
    reserve(o, 2)
    put_i16(o, <int16_t>topic.error_code)
    _put_string(o, topic.name, flexible, "MetadataResponse.name", version, version >= 12)
    if version >= 10:
        _put_uuid(o, topic.topic_id)
    if version >= 1:
        reserve(o, 1)
        put_i8(o, 1 if topic.is_internal else 0)
    partitions = topic.partitions
    if _put_array_length(o, partitions, flexible, "MetadataResponse.partitions", version,
                         False) > 0:
        for p in partitions:
            exact = type(p) is _MetadataPartition
            reserve(o, 14)
            put_i16(o, <int16_t>_field(p, exact, _MP_ERROR_CODE, "error_code"))
            put_i32(o, <int32_t>_field(p, exact, _MP_PARTITION_INDEX, "partition_index"))
            put_i32(o, <int32_t>_field(p, exact, _MP_LEADER_ID, "leader_id"))
            if version >= 7:
                put_i32(o, <int32_t>_field(p, exact, _MP_LEADER_EPOCH, "leader_epoch"))
            _put_int32_array(o, _field(p, exact, _MP_REPLICA_NODES, "replica_nodes"), flexible,
                             "MetadataResponse.replica_nodes", version)
            _put_int32_array(o, _field(p, exact, _MP_ISR_NODES, "isr_nodes"), flexible,
                             "MetadataResponse.isr_nodes", version)
            if version >= 5:
                _put_int32_array(o, _field(p, exact, _MP_OFFLINE_REPLICAS, "offline_replicas"),
                                 flexible, "MetadataResponse.offline_replicas", version)
            if flexible:
                reserve(o, 1)
                put_uvarint(o, 0)
    reserve(o, 5)
    if version >= 8:
        put_i32(o, <int32_t>topic.topic_authorized_operations)
    if flexible:
        put_uvarint(o, 0)
    return 0


# ---- Fetch requests and responses, the replica fetch path ----------------------------------
#
# Every produce under acks=all makes each follower encode a Fetch request and decode the
# leader's answer, and the leader decode the request: the three functions below. Decoded
# structs get every slot set (absent fields to the class default, as the generic reader's
# `absent` list does, single-struct defaults as fresh instances) so KafkaStruct.__eq__ holds.

cdef type _FetchRequest = messages.FetchRequest
cdef type _ReplicaState = messages.FetchRequest.ReplicaState
cdef type _FetchTopic = messages.FetchRequest.FetchTopic
cdef type _FetchPartition = messages.FetchRequest.FetchPartition
cdef type _ForgottenTopic = messages.FetchRequest.ForgottenTopic
cdef dict _FRQ_DEFAULTS = _FetchRequest._defaults
cdef object _FT_EMPTY_NAME = _FetchTopic._defaults["topic"]
cdef object _FT_ZERO_UUID = _FetchTopic._defaults["topic_id"]
cdef object _FP_ZERO_UUID = _FetchPartition._defaults["replica_directory_id"]
cdef object _FP_HIGH_WATERMARK = _FetchPartition._defaults["high_watermark"]
cdef object _FG_EMPTY_NAME = _ForgottenTopic._defaults["topic"]
cdef object _FG_ZERO_UUID = _ForgottenTopic._defaults["topic_id"]

cdef type _FetchResponse = messages.FetchResponse
cdef type _FetchableTopicResponse = messages.FetchResponse.FetchableTopicResponse
cdef type _AbortedTransaction = messages.FetchResponse.PartitionData.AbortedTransaction
cdef type _NodeEndpoint = messages.FetchResponse.NodeEndpoint
cdef object _FR_EMPTY_NAME = _FetchableTopicResponse._defaults["topic"]
cdef object _FR_ZERO_UUID = _FetchableTopicResponse._defaults["topic_id"]

FETCH_REQUEST_VERSIONS = _range(messages.REQUESTS[1])
cdef int FETCH_REQUEST_MIN = FETCH_REQUEST_VERSIONS[0], FETCH_REQUEST_MAX = FETCH_REQUEST_VERSIONS[1]


cdef int _next_tag(Cursor* c, Cursor* sub, int64_t* tag) except -1:
    """One entry of a tagged-field section: its tag, and sub bounded to its value (a value
    read past its size is a ProtocolError, as the generic reader's sub-Reader makes it).
    c moves past the value whatever the caller reads of it: the rest is skipped."""
    cdef int64_t size
    read_uvarint(c, tag)
    read_uvarint(c, &size)
    if size > c.end - c.pos:
        raise ProtocolError(f"tagged field {tag[0]} overruns the message")
    sub.data = c.data
    sub.pos = c.pos
    sub.end = c.pos + size
    c.pos += size
    return 0


cdef int read_i8(Cursor* c, int* out) except -1:
    _need(c, 1)
    out[0] = <signed char>c.data[c.pos]
    c.pos += 1
    return 0


cdef object _replica_state(int32_t replica_id, int64_t replica_epoch):
    state = _new(_ReplicaState)
    state.replica_id = replica_id
    state.replica_epoch = replica_epoch
    return state


def decode_fetch_request(int version, object buf, Py_ssize_t pos=0):
    """The Fetch request body at buf[pos:] (or at a Reader's pos, which it advances): what
    messages.REQUESTS[1].decode returns."""
    _check_version("FetchRequest", version, FETCH_REQUEST_MIN, FETCH_REQUEST_MAX)
    return _decode_body(_decode_fetch_request, version, buf, pos)


cdef object _decode_fetch_request(int version, object view, Cursor* cursor):
    cdef bint flexible = version >= 12
    cdef Cursor c = cursor[0]
    cdef Cursor sub
    cdef int32_t i32
    cdef int64_t i64, n, i, tag
    cdef int i8
    cdef list topics

    request = _new(_FetchRequest)
    request.cluster_id = None
    request.replica_id = -1
    request.replica_state = _replica_state(-1, -1)
    if version <= 14:
        read_i32(&c, &i32)
        request.replica_id = i32
    read_i32(&c, &i32)
    request.max_wait_ms = i32
    read_i32(&c, &i32)
    request.min_bytes = i32
    read_i32(&c, &i32)
    request.max_bytes = i32
    read_i8(&c, &i8)
    request.isolation_level = i8
    if version >= 7:
        read_i32(&c, &i32)
        request.session_id = i32
        read_i32(&c, &i32)
        request.session_epoch = i32
    else:
        request.session_id = _FRQ_DEFAULTS["session_id"]
        request.session_epoch = _FRQ_DEFAULTS["session_epoch"]
    n = _read_array_length(&c, flexible)
    if n < 0:
        request.topics = None
    else:
        topics = []
        for i in range(n):
            topics.append(_read_fetch_topic(&c, version, flexible))
        request.topics = topics
    if version >= 7:
        n = _read_array_length(&c, flexible)
        if n < 0:
            request.forgotten_topics_data = None
        else:
            topics = []
            for i in range(n):
                topics.append(_read_forgotten_topic(&c, version, flexible))
            request.forgotten_topics_data = topics
    else:
        request.forgotten_topics_data = []
    request.rack_id = _read_string(&c, flexible) if version >= 11 else _FRQ_DEFAULTS["rack_id"]
    if flexible:  # tag 0 cluster_id (12+), tag 1 replica_state (15+); others skipped
        read_uvarint(&c, &n)
        for i in range(n):
            _next_tag(&c, &sub, &tag)
            if tag == 0:
                request.cluster_id = _read_string(&sub, True)
            elif tag == 1 and version >= 15:
                read_i32(&sub, &i32)
                read_i64(&sub, &i64)
                skip_tagged_fields(&sub)
                request.replica_state = _replica_state(i32, i64)
    cursor[0] = c
    return request


cdef object _read_fetch_topic(Cursor* c, int version, bint flexible):
    cdef Cursor sub
    cdef int32_t i32
    cdef int64_t i64, n, i, j, k, tag
    cdef list partitions
    topic = _new(_FetchTopic)
    if version <= 12:
        topic.topic = _read_string(c, flexible)
        topic.topic_id = _FT_ZERO_UUID
    else:
        topic.topic = _FT_EMPTY_NAME
        topic.topic_id = _read_uuid(c)
    n = _read_array_length(c, flexible)
    if n < 0:
        topic.partitions = None
    else:
        partitions = []
        for i in range(n):
            p = _new(_FetchPartition)
            read_i32(c, &i32)
            p.partition = i32
            if version >= 9:
                read_i32(c, &i32)
                p.current_leader_epoch = i32
            else:
                p.current_leader_epoch = -1
            read_i64(c, &i64)
            p.fetch_offset = i64
            if version >= 12:
                read_i32(c, &i32)
                p.last_fetched_epoch = i32
            else:
                p.last_fetched_epoch = -1
            if version >= 5:
                read_i64(c, &i64)
                p.log_start_offset = i64
            else:
                p.log_start_offset = -1
            read_i32(c, &i32)
            p.partition_max_bytes = i32
            p.replica_directory_id = _FP_ZERO_UUID
            p.high_watermark = _FP_HIGH_WATERMARK
            if flexible:  # tag 0 replica_directory_id (17+), tag 1 high_watermark (18+)
                read_uvarint(c, &k)
                for j in range(k):
                    _next_tag(c, &sub, &tag)
                    if tag == 0 and version >= 17:
                        p.replica_directory_id = _read_uuid(&sub)
                    elif tag == 1 and version >= 18:
                        read_i64(&sub, &i64)
                        p.high_watermark = i64
            partitions.append(p)
        topic.partitions = partitions
    if flexible:
        skip_tagged_fields(c)
    return topic


cdef object _read_forgotten_topic(Cursor* c, int version, bint flexible):
    cdef int32_t i32
    cdef int64_t n, i
    cdef list partitions
    topic = _new(_ForgottenTopic)
    if version <= 12:
        topic.topic = _read_string(c, flexible)
        topic.topic_id = _FG_ZERO_UUID
    else:
        topic.topic = _FG_EMPTY_NAME
        topic.topic_id = _read_uuid(c)
    n = _read_array_length(c, flexible)
    if n < 0:
        topic.partitions = None
    else:
        partitions = []
        for i in range(n):
            read_i32(c, &i32)
            partitions.append(i32)
        topic.partitions = partitions
    if flexible:
        skip_tagged_fields(c)
    return topic


cdef _TagDefault _REPLICA_STATE = _TagDefault(_ReplicaState)


def encode_fetch_request(int version, int32_t correlation_id, object client_id, object request):
    """A whole Fetch request frame (size prefix, header v1/v2, body) as one bytes object:
    encode_request(1, version, correlation_id, client_id, request)."""
    _check_version("FetchRequest", version, FETCH_REQUEST_MIN, FETCH_REQUEST_MAX)
    cdef bint flexible = version >= 12
    cdef _Frame f = _Frame(256)
    cdef Out* o = &f.out
    reserve(o, 12)
    put_i32(o, 0)  # size, patched by parts()
    put_i16(o, 1)
    put_i16(o, <int16_t>version)
    put_i32(o, correlation_id)
    _put_string(o, client_id, False, "RequestHeader.client_id", version, True)  # int16 length
    if flexible:
        reserve(o, 1)
        put_uvarint(o, 0)
    reserve(o, 25)
    if version <= 14:
        put_i32(o, <int32_t>request.replica_id)
    put_i32(o, <int32_t>request.max_wait_ms)
    put_i32(o, <int32_t>request.min_bytes)
    put_i32(o, <int32_t>request.max_bytes)
    put_i8(o, _int8(request.isolation_level))
    if version >= 7:
        put_i32(o, <int32_t>request.session_id)
        put_i32(o, <int32_t>request.session_epoch)
    topics = request.topics
    if _put_array_length(o, topics, flexible, "FetchRequest.topics", version, False) > 0:
        for topic in topics:
            _write_fetch_topic(o, topic, version, flexible)
    if version >= 7:
        forgotten = request.forgotten_topics_data
        if _put_array_length(o, forgotten, flexible, "FetchRequest.forgotten_topics_data", version,
                             False) > 0:
            for topic in forgotten:
                if version <= 12:
                    _put_string(o, topic.topic, flexible, "FetchRequest.topic", version, False)
                else:
                    _put_uuid(o, topic.topic_id)
                _put_int32_array(o, topic.partitions, flexible, "FetchRequest.partitions", version)
                if flexible:
                    reserve(o, 1)
                    put_uvarint(o, 0)
    if version >= 11:
        _put_string(o, request.rack_id, flexible, "FetchRequest.rack_id", version, False)
    if flexible:
        _write_fetch_request_root_tags(o, request, version)
    return f.parts()[0]


cdef int _int8(object v) except? -1:
    # struct.pack(">b") refuses what does not fit; a C cast would wrap it.
    cdef long n = v
    if n < -128 or n > 127:
        raise OverflowError(f"{n} does not fit in an int8")
    return <int>n


cdef int _write_fetch_topic(Out* o, object topic, int version, bint flexible) except -1:
    if version <= 12:
        _put_string(o, topic.topic, flexible, "FetchRequest.topic", version, False)
    else:
        _put_uuid(o, topic.topic_id)
    partitions = topic.partitions
    cdef bint has_dir, has_hw
    if _put_array_length(o, partitions, flexible, "FetchRequest.partitions", version, False) > 0:
        for p in partitions:
            reserve(o, 32)
            put_i32(o, <int32_t>p.partition)
            if version >= 9:
                put_i32(o, <int32_t>p.current_leader_epoch)
            put_i64(o, <int64_t>p.fetch_offset)
            if version >= 12:
                put_i32(o, <int32_t>p.last_fetched_epoch)
            if version >= 5:
                put_i64(o, <int64_t>p.log_start_offset)
            put_i32(o, <int32_t>p.partition_max_bytes)
            if not flexible:
                continue
            # Tagged, in tag order: 0 replica_directory_id (17+), 1 high_watermark (18+).
            directory = getattr(p, "replica_directory_id", None) if version >= 17 else None
            hw = getattr(p, "high_watermark", None) if version >= 18 else None
            has_dir = directory is not None and not (directory == _FP_ZERO_UUID)
            has_hw = hw is not None and not (hw == _FP_HIGH_WATERMARK)
            reserve(o, 1 + 2 + 2 + 10)
            put_uvarint(o, <uint64_t>(has_dir + has_hw))
            if has_dir:
                put_uvarint(o, 0)
                put_uvarint(o, 16)
                _put_uuid(o, directory)
            if has_hw:
                reserve(o, 10)
                put_uvarint(o, 1)
                put_uvarint(o, 8)
                put_i64(o, <int64_t>hw)
    if flexible:
        reserve(o, 1)
        put_uvarint(o, 0)
    return 0


cdef int _write_fetch_request_root_tags(Out* o, object request, int version) except -1:
    # Tag 0 cluster_id (12+, written when not null), tag 1 replica_state (15+).
    cluster_id = getattr(request, "cluster_id", None)
    state = getattr(request, "replica_state", None) if version >= 15 else None
    cdef bint has_cluster = cluster_id is not None
    cdef bint has_state = not _REPLICA_STATE.absent(state)
    cdef Py_ssize_t start
    reserve(o, 3)
    put_uvarint(o, <uint64_t>(has_cluster + has_state))
    if has_cluster:
        put_uvarint(o, 0)
        start = o.len
        _put_string(o, cluster_id, True, "FetchRequest.cluster_id", version, True)
        _prefix_size(o, start)
    if has_state:  # replica_id int32, replica_epoch int64, no tags: 13 bytes
        reserve(o, 15)
        put_uvarint(o, 1)
        put_uvarint(o, 13)
        put_i32(o, <int32_t>state.replica_id)
        put_i64(o, <int64_t>state.replica_epoch)
        put_uvarint(o, 0)
    return 0


def decode_fetch_response(int version, object buf, Py_ssize_t pos=0):
    """The Fetch response body at buf[pos:] (or at a Reader's pos, which it advances), after
    the response header: what messages.RESPONSES[1].decode returns; records are memoryview
    slices of buf."""
    _check_version("FetchResponse", version, FETCH_MIN, FETCH_MAX)
    return _decode_body(_decode_fetch_response, version, buf, pos)


cdef object _decode_fetch_response(int version, object view, Cursor* cursor):
    cdef bint flexible = version >= 12
    cdef Cursor c = cursor[0]
    cdef Cursor sub
    cdef int16_t i16
    cdef int32_t i32
    cdef int64_t n, i, tag
    cdef list topics

    response = _new(_FetchResponse)
    read_i32(&c, &i32)
    response.throttle_time_ms = i32
    if version >= 7:
        read_i16(&c, &i16)
        response.error_code = i16
        read_i32(&c, &i32)
        response.session_id = i32
    else:
        response.error_code = 0
        response.session_id = 0
    n = _read_array_length(&c, flexible)
    if n < 0:
        response.responses = None
    else:
        topics = []
        for i in range(n):
            topics.append(_read_fetchable_topic(&c, view, version, flexible))
        response.responses = topics
    response.node_endpoints = []
    if flexible:  # tag 0 node_endpoints (16+); others skipped
        read_uvarint(&c, &n)
        for i in range(n):
            _next_tag(&c, &sub, &tag)
            if tag == 0 and version >= 16:
                response.node_endpoints = _read_node_endpoints(&sub)
    cursor[0] = c
    return response


cdef object _read_node_endpoints(Cursor* c):
    cdef int32_t i32
    cdef int64_t n = _read_array_length(c, True), i
    if n < 0:
        return None
    cdef list endpoints = []
    for i in range(n):
        node = _new(_NodeEndpoint)
        read_i32(c, &i32)
        node.node_id = i32
        node.host = _read_string(c, True)
        read_i32(c, &i32)
        node.port = i32
        node.rack = _read_string(c, True)
        skip_tagged_fields(c)
        endpoints.append(node)
    return endpoints


cdef object _epoch_end_offset(int32_t epoch, int64_t end_offset):
    v = _new(_EpochEndOffset)
    v.epoch = epoch
    v.end_offset = end_offset
    return v


cdef object _leader_id_and_epoch(int32_t leader_id, int32_t leader_epoch):
    v = _new(_LeaderIdAndEpoch)
    v.leader_id = leader_id
    v.leader_epoch = leader_epoch
    return v


cdef object _snapshot_id(int64_t end_offset, int32_t epoch):
    v = _new(_SnapshotId)
    v.end_offset = end_offset
    v.epoch = epoch
    return v


cdef object _read_fetchable_topic(Cursor* c, object view, int version, bint flexible):
    cdef int64_t n, i
    cdef list partitions
    topic = _new(_FetchableTopicResponse)
    if version <= 12:
        topic.topic = _read_string(c, flexible)
        topic.topic_id = _FR_ZERO_UUID
    else:
        topic.topic = _FR_EMPTY_NAME
        topic.topic_id = _read_uuid(c)
    n = _read_array_length(c, flexible)
    if n < 0:
        topic.partitions = None
    else:
        partitions = []
        for i in range(n):
            partitions.append(_read_fetch_partition_data(c, view, version, flexible))
        topic.partitions = partitions
    if flexible:
        skip_tagged_fields(c)
    return topic


cdef object _read_fetch_partition_data(Cursor* c, object view, int version, bint flexible):
    cdef Cursor sub
    cdef int16_t i16
    cdef int32_t i32, j32
    cdef int64_t i64, n, i, tag
    cdef list aborted
    p = _new(_PartitionData)
    read_i32(c, &i32)
    p.partition_index = i32
    read_i16(c, &i16)
    p.error_code = i16
    read_i64(c, &i64)
    p.high_watermark = i64
    read_i64(c, &i64)
    p.last_stable_offset = i64
    if version >= 5:
        read_i64(c, &i64)
        p.log_start_offset = i64
    else:
        p.log_start_offset = -1
    p.diverging_epoch = _epoch_end_offset(-1, -1)
    p.current_leader = _leader_id_and_epoch(-1, -1)
    p.snapshot_id = _snapshot_id(-1, -1)
    n = _read_array_length(c, flexible)
    if n < 0:
        p.aborted_transactions = None
    else:
        aborted = []
        for i in range(n):
            txn = _new(_AbortedTransaction)
            read_i64(c, &i64)
            txn.producer_id = i64
            read_i64(c, &i64)
            txn.first_offset = i64
            if flexible:
                skip_tagged_fields(c)
            aborted.append(txn)
        p.aborted_transactions = aborted
    if version >= 11:
        read_i32(c, &i32)
        p.preferred_read_replica = i32
    else:
        p.preferred_read_replica = -1
    n = _read_length(c, flexible, True, "bytes")
    if n < 0:
        p.records = None
    else:
        _need(c, n)
        p.records = view[c.pos:c.pos + n]
        c.pos += n
    if flexible:  # tags 0 diverging_epoch, 1 current_leader, 2 snapshot_id (all 12+)
        read_uvarint(c, &n)
        for i in range(n):
            _next_tag(c, &sub, &tag)
            if tag == 0:
                read_i32(&sub, &i32)
                read_i64(&sub, &i64)
                skip_tagged_fields(&sub)
                p.diverging_epoch = _epoch_end_offset(i32, i64)
            elif tag == 1:
                read_i32(&sub, &i32)
                read_i32(&sub, &j32)
                skip_tagged_fields(&sub)
                p.current_leader = _leader_id_and_epoch(i32, j32)
            elif tag == 2:
                read_i64(&sub, &i64)
                read_i32(&sub, &i32)
                skip_tagged_fields(&sub)
                p.snapshot_id = _snapshot_id(i64, i32)
    return p
