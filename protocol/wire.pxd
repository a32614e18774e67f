# The Kafka wire primitives every hand-tuned codec (fastcodec, fastfetch_request,
# fastfetch_response) is built from: a bounds-checked read cursor, a growable output buffer,
# and the field encodings of protocol/types.py, as the generic codec writes them.
#
# The hot functions are `cdef inline` here, bodies included, so a module that cimports them
# compiles its own copy: no call across extensions on the per-field path. What is not per
# field lives in wire.pyx: the error raisers (ProtocolError is a Python class, which a .pxd
# cannot import), _grow, _check_version's message, _decode_body, and the Frame and
# TagDefault classes.
#
#     Cursor   read:  ext/cursor.pxd's cursor_t (base, p, end), the one cursor over bytes;
#              its loads and varint loop are ext's. Every read here checks p + n <= end and
#              raises ProtocolError (naming the position p - base) where ext's readers
#              return 0
#     Out      write: data, len, cap; callers reserve() before a run of put_*() stores, which
#              are unchecked (one reserve covers a run of fixed-width fields; a uvarint
#              needs up to 10 bytes)
#
# Lengths: a string is int16, bytes and arrays int32, -1 = null; in flexible versions all
# three are compact (unsigned varint length + 1, 0 = null).
from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from cpython.object cimport PyObject, PyTypeObject
from cpython.unicode cimport PyUnicode_AsUTF8AndSize, PyUnicode_DecodeUTF8
from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.string cimport memcpy, memmove, memset

from ext.cursor cimport VARINT_MAX_BYTES, cursor_t, need
from ext.cursor cimport read_i8 as _read_i8
from ext.cursor cimport read_i16 as _read_i16
from ext.cursor cimport read_i32 as _read_i32
from ext.cursor cimport read_i64 as _read_i64
from ext.cursor cimport read_uvarint as _cursor_uvarint


ctypedef cursor_t Cursor


cdef struct Out:
    char* data
    Py_ssize_t len
    Py_ssize_t cap


ctypedef object (*BodyReader)(int version, object view, Cursor* c)

# ---- defined in wire.pyx: error paths and once-per-message work ----------------------------

cdef int _short(Cursor* c, int64_t n) except -1
cdef int _bad_uvarint(Cursor* c) except -1
cdef int _tag_overrun(int64_t tag) except -1
cdef int _negative_length(int64_t n, str what) except -1
cdef int _long_array(Cursor* c, int64_t n) except -1
cdef object _bad_utf8(Py_ssize_t at)
cdef int _bad_version(str name, int version, int lo, int hi) except -1
cdef int _too_long(Py_ssize_t n, str what) except -1
cdef int _null_field(str where) except -1
cdef int _not_nullable(str where, int version) except -1
cdef int _bad_uuid(object v) except -1
cdef int _not_int8(long n) except -1
cdef int _grow(Out* o, Py_ssize_t n) except -1
cdef Py_ssize_t _slot_offset(type cls, str name) except -1
cdef object _decode_body(BodyReader read, int version, object buf, Py_ssize_t pos)
cdef int _put_node_endpoints_tags(Out* o, object endpoints, int version, tuple where) except -1


cdef class Frame:
    """The output of one frame: the C buffer, plus the parts spliced in (file slices) with
    the buffer position each follows."""
    cdef Out out
    cdef list splits  # position, object, position, object, ...
    cdef int64_t spliced_size
    cdef int header(self, int32_t correlation_id, bint flexible) except -1
    cdef int put_records(self, object v, bint flexible, str where, int version) except -1
    cdef list parts(self)


cdef class TagDefault:
    """A tagged struct field's default (see absent())."""
    cdef type cls
    cdef tuple names, defaults
    cdef Py_ssize_t offsets[4]
    cdef int n
    cdef bint absent(self, object value) except -1


# ---- versions and struct slots -------------------------------------------------------------

cdef inline int _check_version(str name, int version, int lo, int hi) except -1:
    if version < lo or version > hi:
        return _bad_version(name, version, lo, hi)
    return 0


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
    return (<PyTypeObject*>cls).tp_new(cls, <PyObject*>(), NULL)


cdef inline bint _list_absent(object value) except -1:
    """A tagged array is omitted when None or == [] (its default)."""
    if value is None:
        return True
    if type(value) is list:
        return len(<list>value) == 0
    return bool(value == [])


# ---- reading -------------------------------------------------------------------------------

cdef inline int _need(Cursor* c, int64_t n) except -1:
    if not need(c, n):
        return _short(c, n)
    return 0


cdef inline int read_i8(Cursor* c, int* out) except -1:
    cdef int8_t v
    if not _read_i8(c, &v):
        return _short(c, 1)
    out[0] = v
    return 0


cdef inline int read_i16(Cursor* c, int16_t* out) except -1:
    return 0 if _read_i16(c, out) else _short(c, 2)


cdef inline int read_i32(Cursor* c, int32_t* out) except -1:
    return 0 if _read_i32(c, out) else _short(c, 4)


cdef inline int read_i64(Cursor* c, int64_t* out) except -1:
    return 0 if _read_i64(c, out) else _short(c, 8)


cdef inline object _read_uuid(Cursor* c):
    _need(c, 16)
    c.p += 16
    return PyBytes_FromStringAndSize(<const char*>c.p - 16, 16)


cdef inline int read_uvarint(Cursor* c, int64_t* out) except -1:
    # At most 5 bytes, as Reader.uvarint (the fifth may carry bits above 32).
    cdef uint64_t value
    if not _cursor_uvarint(c, &value, VARINT_MAX_BYTES):
        return _bad_uvarint(c)
    out[0] = <int64_t>value
    return 0


cdef inline int skip_tagged_fields(Cursor* c) except -1:
    # KIP-482: receivers skip tags they do not know.
    cdef int64_t count = 0, i, tag = 0, size = 0
    read_uvarint(c, &count)
    for i in range(count):
        read_uvarint(c, &tag)
        read_uvarint(c, &size)
        if size > c.end - c.p:
            return _tag_overrun(tag)
        c.p += size
    return 0


cdef inline int _next_tag(Cursor* c, Cursor* sub, int64_t* tag) except -1:
    """One entry of a tagged-field section: its tag, and sub bounded to its value (a value
    read past its size is a ProtocolError, as the generic reader's sub-Reader makes it).
    c moves past the value whatever the caller reads of it: the rest is skipped."""
    cdef int64_t size = 0
    read_uvarint(c, tag)
    read_uvarint(c, &size)
    if size > c.end - c.p:
        return _tag_overrun(tag[0])
    sub.base = c.base
    sub.p = c.p
    sub.end = c.p + size
    c.p += size
    return 0


cdef inline int64_t _read_length(Cursor* c, bint flexible, bint wide, str what) except -2:
    """A string (int16), bytes or array (int32) length; compact when flexible. -1 = null."""
    cdef int64_t n = 0
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
        _negative_length(n, what)
    return n


cdef inline object _read_string(Cursor* c, bint flexible):
    cdef int64_t n = _read_length(c, flexible, False, "string")
    if n < 0:
        return None
    _need(c, n)
    cdef const uint8_t* at = c.p
    c.p += n
    try:
        return PyUnicode_DecodeUTF8(<const char*>at, n, NULL)
    except UnicodeDecodeError:
        return _bad_utf8(at - c.base)


cdef inline object _read_string_nn(Cursor* c, bint flexible, str where):
    """A string the schema does not allow to be null: null is a ProtocolError."""
    value = _read_string(c, flexible)
    if value is None:
        _null_field(where)
    return value


cdef inline int _read_topic_ref(Cursor* c, object topic, int version, bint flexible,
                                 object zero_uuid, object empty_name) except -1:
    """A Fetch topic's reference: its name up to v12, its topic id from v13 (the other field
    takes its default: the schema's zero uuid or empty name)."""
    if version <= 12:
        topic.topic = _read_string_nn(c, flexible, "topic")
        topic.topic_id = zero_uuid
    else:
        topic.topic = empty_name
        topic.topic_id = _read_uuid(c)
    return 0


cdef inline int64_t _read_array_length(Cursor* c, bint flexible) except -2:
    cdef int64_t n = _read_length(c, flexible, True, "array")
    if n > c.end - c.p:
        _long_array(c, n)
    return n


cdef inline int64_t _read_array_length_nn(Cursor* c, bint flexible, str where) except -2:
    """An array the schema does not allow to be null: null is a ProtocolError."""
    cdef int64_t n = _read_array_length(c, flexible)
    if n < 0:
        _null_field(where)
    return n


# ---- writing -------------------------------------------------------------------------------

cdef inline int reserve(Out* o, Py_ssize_t n) except -1:
    if o.len + n > o.cap:
        return _grow(o, n)
    return 0


cdef inline void put_i8(Out* o, int v) noexcept:
    o.data[o.len] = <char>v
    o.len += 1


cdef inline void put_i16(Out* o, int16_t v) noexcept:
    cdef uint8_t* p = <uint8_t*>o.data + o.len
    p[0] = <uint8_t>(<uint16_t>v >> 8)
    p[1] = <uint8_t>v
    o.len += 2


cdef inline void put_i32(Out* o, int32_t v) noexcept:
    cdef uint32_t u = <uint32_t>v
    cdef uint8_t* p = <uint8_t*>o.data + o.len
    p[0] = <uint8_t>(u >> 24)
    p[1] = <uint8_t>(u >> 16)
    p[2] = <uint8_t>(u >> 8)
    p[3] = <uint8_t>u
    o.len += 4


cdef inline void put_i64(Out* o, int64_t v) noexcept:
    cdef uint64_t u = <uint64_t>v
    cdef uint8_t* p = <uint8_t*>o.data + o.len
    cdef int i
    for i in range(8):
        p[i] = <uint8_t>(u >> (56 - 8 * i))
    o.len += 8


cdef inline void put_uvarint(Out* o, uint64_t v) noexcept:
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


cdef inline int put_bytes(Out* o, const char* p, Py_ssize_t n) except -1:
    reserve(o, n)
    memcpy(o.data + o.len, p, n)
    o.len += n
    return 0


cdef inline int _put_length(Out* o, Py_ssize_t n, bint flexible, bint wide) except -1:
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


cdef inline int _put_null(Out* o, bint flexible, bint wide, str where, int version,
                          bint nullable) except -1:
    if not nullable:
        return _not_nullable(where, version)
    reserve(o, 4)
    if flexible:
        put_uvarint(o, 0)
    elif wide:
        put_i32(o, -1)
    else:
        put_i16(o, -1)
    return 0


cdef inline int _put_buffer(Out* o, object data) except -1:
    cdef Py_buffer view
    PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    try:
        put_bytes(o, <const char*>view.buf, view.len)
    finally:
        PyBuffer_Release(&view)
    return 0


cdef inline int _put_string(Out* o, object v, bint flexible, str where, int version,
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


cdef inline int _put_uuid(Out* o, object v) except -1:
    if v is None:
        reserve(o, 16)
        memset(o.data + o.len, 0, 16)
        o.len += 16
        return 0
    if len(v) != 16:
        return _bad_uuid(v)
    if type(v) is bytes:
        return put_bytes(o, PyBytes_AS_STRING(v), 16)
    return _put_buffer(o, v)


cdef inline Py_ssize_t _put_array_length(Out* o, object v, bint flexible, str where, int version,
                                         bint nullable) except -2:
    """Writes an array's length (or null) and returns it, -1 for null."""
    if v is None:
        _put_null(o, flexible, True, where, version, nullable)
        return -1
    cdef Py_ssize_t n = len(v)
    _put_length(o, n, flexible, True)
    return n


cdef inline int _put_int32_array(Out* o, object v, bint flexible, str where,
                                 int version) except -1:
    if _put_array_length(o, v, flexible, where, version, False) < 0:
        return 0
    for x in v:
        reserve(o, 4)
        put_i32(o, <int32_t>x)
    return 0


cdef inline int _prefix_size(Out* o, Py_ssize_t start) except -1:
    """Inserts the uvarint size of the bytes written since start, before them."""
    cdef Py_ssize_t size = o.len - start
    cdef int k = _uvarint_size(<uint64_t>size)
    reserve(o, k)
    memmove(o.data + start + k, o.data + start, size)
    o.len = start
    put_uvarint(o, <uint64_t>size)
    o.len = start + k + size
    return 0


cdef inline int _int8(object v) except? -1:
    # struct.pack(">b") refuses what does not fit; a C cast would wrap it.
    cdef long n = v
    if n < -128 or n > 127:
        _not_int8(n)
    return <int>n
