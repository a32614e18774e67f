# cython: language_level=3
"""The out-of-line half of protocol/wire.pxd: what runs once per message or only on error.

    the error raisers     every ProtocolError / ValueError / OverflowError the inline
                          primitives raise, with the generic codec's messages
    _grow                 doubles an Out until n more bytes fit (reserve's slow path)
    _slot_offset          the offset of a __slots__ member in its instances (for _field)
    _decode_body          runs a BodyReader over buf[pos:] or a Reader's buf[pos:end]
    Frame                 a response or request frame being written: C buffer + spliced
                          file slices; parts() patches the size prefix
    _put_node_endpoints_tags
                          a root tag section holding node_endpoints (tag 0) or nothing
    TagDefault            "is this tagged struct value at its default?", as the generic
                          writer decides it

Frame rules kept from the generic codec: a file slice of size 0 is not spliced (only its
length, 0, is written); the frame size is an unsigned 32-bit prefix covering every part.
"""
from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytearray cimport PyByteArray_Check
from cpython.bytes cimport PyBytes_Check, PyBytes_FromStringAndSize
from cpython.memoryview cimport PyMemoryView_Check
from cpython.mem cimport PyMem_Free, PyMem_Malloc, PyMem_Realloc
from libc.stdint cimport int32_t, int64_t, uint8_t

from protocol.types import ProtocolError, Reader as _Reader


# ---- errors --------------------------------------------------------------------------------

cdef int _short(Cursor* c, int64_t n) except -1:
    raise ProtocolError(f"need {n} bytes at position {c.p - c.base}, have {c.end - c.p}")


cdef int _bad_uvarint(Cursor* c) except -1:
    # read_uvarint failed: the bytes ended inside the varint, or its 5 bytes all continue.
    cdef Py_ssize_t k = 0
    while k < 5 and c.p + k < c.end and c.p[k] & 0x80:
        k += 1
    if k == 5:
        c.p += 5
        raise ProtocolError(f"unsigned varint longer than 5 bytes at {c.p - c.base}")
    c.p = c.end
    return _short(c, 1)


cdef int _tag_overrun(int64_t tag) except -1:
    raise ProtocolError(f"tagged field {tag} overruns the message")


cdef int _negative_length(int64_t n, str what) except -1:
    raise ProtocolError(f"negative {what} length {n}")


cdef int _long_array(Cursor* c, int64_t n) except -1:
    raise ProtocolError(f"array of {n} elements with {c.end - c.p} bytes left")


cdef object _bad_utf8(Py_ssize_t at):
    raise ProtocolError(f"string at {at} is not valid UTF-8") from None


cdef int _bad_version(str name, int version, int lo, int hi) except -1:
    raise ProtocolError(f"{name} version {version} is not in {lo}-{hi}")


cdef int _too_long(Py_ssize_t n, str what) except -1:
    raise OverflowError(f"length {n} does not fit in an {what}")


cdef int _null_field(str where) except -1:
    raise ProtocolError(f"non-nullable field {where} was serialized as null")


cdef int _not_nullable(str where, int version) except -1:
    raise ValueError(f"{where} v{version} is not nullable")


cdef int _bad_uuid(object v) except -1:
    raise ValueError(f"uuid must be 16 bytes, got {len(v)}")


cdef int _not_int8(long n) except -1:
    raise OverflowError(f"{n} does not fit in an int8")


# ---- buffers and slots ---------------------------------------------------------------------

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


# ---- decoding a body -----------------------------------------------------------------------

cdef object _decode_body(BodyReader read, int version, object buf, Py_ssize_t pos):
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
        c.base = <const uint8_t*>pybuf.buf
        c.p = c.base + pos
        c.end = c.base + end
        result = read(version, view, &c)
        if reader is not None:
            reader.pos = c.p - c.base
        return result
    finally:
        PyBuffer_Release(&pybuf)


# ---- writing ------------------------------------------------------------------------------

cdef int _put_node_endpoints_tags(Out* o, object endpoints, int version, tuple where) except -1:
    """The root tag section of a response whose one tagged field is node_endpoints (tag 0):
    Fetch v16+, Produce v10+. where = the (array, host, rack) names errors give. The value's
    size is known only once written, so it is written first and moved up past its size."""
    reserve(o, 1)
    if _list_absent(endpoints):
        put_uvarint(o, 0)
        return 0
    reserve(o, 2)
    put_uvarint(o, 1)
    put_uvarint(o, 0)
    cdef Py_ssize_t start = o.len
    _put_array_length(o, endpoints, True, where[0], version, False)
    for node in endpoints:
        reserve(o, 4)
        put_i32(o, <int32_t>node.node_id)
        _put_string(o, node.host, True, where[1], version, False)
        reserve(o, 4)
        put_i32(o, <int32_t>node.port)
        _put_string(o, node.rack, True, where[2], version, True)
        reserve(o, 1)
        put_uvarint(o, 0)
    _prefix_size(o, start)
    return 0


# ---- writing a frame -----------------------------------------------------------------------

cdef class Frame:

    def __cinit__(self, Py_ssize_t cap):
        self.out.data = <char*>PyMem_Malloc(cap)
        if self.out.data == NULL:
            raise MemoryError()
        self.out.len = 0
        self.out.cap = cap
        self.splits = []
        self.spliced_size = 0

    def __dealloc__(self):
        PyMem_Free(self.out.data)
        self.out.data = NULL

    cdef int header(self, int32_t correlation_id, bint flexible) except -1:
        """Response header: size (patched by parts()), correlation_id, v1 tags if flexible."""
        reserve(&self.out, 9)
        put_i32(&self.out, 0)
        put_i32(&self.out, correlation_id)
        if flexible:
            put_uvarint(&self.out, 0)
        return 0

    cdef int put_records(self, object v, bint flexible, str where, int version) except -1:
        cdef Out* o = &self.out
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


cdef class TagDefault:
    """The generic writer omits a tagged struct field when its value is None or == a fresh
    cls() (KafkaStruct.__eq__: same type, every field ==); absent() decides the same, reading
    the slots of an exact cls instance directly."""

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
