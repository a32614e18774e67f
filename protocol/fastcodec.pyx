# cython: language_level=3
"""Hand-tuned codecs for the hot messages; byte-identical to the generic codec.

    decode_produce_request(version, buf, pos)        Produce request body, v3-13
    encode_produce_response(version, corr_id, body)  whole Produce response frame, v3-13
    encode_metadata_response(version, corr_id, body) whole Metadata response frame, v0-13
    encode_fetch_response(version, corr_id, body)    whole Fetch response frame, v4-18
    decode_fetch_response(version, buf, pos)         Fetch response body, v4-18
    decode_fetch_request(version, buf, pos)          Fetch request body, v4-18
    encode_fetch_request(version, corr_id, client_id, body)
                                                     whole Fetch request frame, v4-18
    read_request_header(reader, listener_name, make) a request header (every request)
    frame_buffer(size)                               an unzeroed bytearray for a frame

This module is the one callers import. Produce and Metadata are here; the Fetch functions
live in protocol/fastfetch_response.pyx and protocol/fastfetch_request.pyx and are
re-exported. All of them are built from protocol/wire.pxd: a bounds-checked read Cursor
(ext/cursor.pxd's, the one cursor over bytes), a growable Out buffer and the field encodings, as `cdef inline` functions compiled into
each module (no call across extensions per field); wire.pyx holds the error raisers and
the Frame (a response as parts) and TagDefault classes.

The decoders take (buf, pos) or a protocol.types.Reader, which they read up to its end
and leave where the body ends, as MessageCodec.decode does.

The generic codec (protocol/codec.py) stays the reference: every rule below is its rule,
and tests/protocol/test_fastcodec*.py check every version byte for byte against it. The
layouts are the schemas' (protocol/schemas/produce_fetch.schema, metadata.schema); in
flexible versions (Produce 9+, Fetch 12+, Metadata 9+) strings, bytes and arrays are
compact (unsigned varint length + 1, 0 = null) and every struct ends in a tagged-field
section.

Why it is faster: the generic codec pays a Python call and a struct.pack per field and a
closure per struct. Here one C buffer grows by doubling, fixed-width fields are stored
big-endian after a single reserve() per run of them, and attribute reads go through
interned names (or, for the generated classes, straight to the slot). Record bytes are
never copied on decode (memoryview slices of the request buffer, writable when it is, so
the broker can assign offsets in place); on encode a records value that is not a buffer
(a file slice: anything with ``.size``) becomes its own part, as Writer.external does, so
it can go out with sendfile.

Rules kept from the generic codec that are easy to miss:
  * tagged fields are written only when the value is not None and differs from the
    field's default (a struct default is a fresh instance, compared with KafkaStruct.__eq__;
    an array's default is []), in tag order, each as tag, size, value;
  * a file slice of size 0 is not spliced (only its length, 0, is written);
  * a null array or string where the schema does not allow one is a ValueError on encode,
    and a ProtocolError on decode ("non-nullable field X was serialized as null", as
    Kafka's generated readers say);
  * the frame size is an unsigned 32-bit prefix covering every part.
"""
from cpython.bytearray cimport PyByteArray_FromStringAndSize
from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport int16_t, int32_t, int64_t, uint8_t, uint64_t

from protocol.wire cimport (Cursor, Frame, Out, TagDefault, _bad_utf8, _check_version, _decode_body,
                           _field, _need, _new, _put_array_length, _put_int32_array,
                           _put_node_endpoints_tags, _put_string, _put_uuid, _read_array_length,
                           _read_array_length_nn, _read_string_nn,
                           _read_length, _read_string, _slot_offset, _tagged, put_i8, put_i16,
                           put_i32, put_i64, put_uvarint, read_i16, read_i32, reserve,
                           skip_tagged_fields)

from protocol import messages
from protocol.types import ProtocolError
from protocol.fastfetch_request import (FETCH_REQUEST_VERSIONS, decode_fetch_request,
                                        encode_fetch_request)
from protocol.fastfetch_response import (FETCH_VERSIONS, decode_fetch_response,
                                         encode_fetch_response)

__all__ = ["PRODUCE_VERSIONS", "PRODUCE_RESPONSE_VERSIONS", "METADATA_VERSIONS",
           "FETCH_VERSIONS", "FETCH_REQUEST_VERSIONS", "decode_produce_request",
           "encode_produce_response", "encode_metadata_response", "encode_fetch_response",
           "decode_fetch_response", "decode_fetch_request", "encode_fetch_request",
           "read_request_header", "frame_buffer"]

# ---- struct classes and their defaults (what the generic codec builds and compares) -------

cdef type _ProduceRequest = messages.ProduceRequest
cdef type _TopicProduceData = messages.ProduceRequest.TopicProduceData
cdef type _PartitionProduceData = messages.ProduceRequest.PartitionProduceData
cdef object _ZERO_UUID = _TopicProduceData._defaults["topic_id"]
cdef object _EMPTY_NAME = _TopicProduceData._defaults["name"]


def _range(codec):
    versions = codec.message.versions
    return versions.lo, versions.hi


# The versions each function handles: exactly the schema's (the tests assert they match).
PRODUCE_VERSIONS = _range(messages.REQUESTS[0])
PRODUCE_RESPONSE_VERSIONS = _range(messages.RESPONSES[0])
METADATA_VERSIONS = _range(messages.RESPONSES[3])
cdef int PRODUCE_MIN = PRODUCE_VERSIONS[0], PRODUCE_MAX = PRODUCE_VERSIONS[1]
cdef int PRODUCE_RESPONSE_MIN = PRODUCE_RESPONSE_VERSIONS[0]
cdef int PRODUCE_RESPONSE_MAX = PRODUCE_RESPONSE_VERSIONS[1]
cdef int METADATA_MIN = METADATA_VERSIONS[0], METADATA_MAX = METADATA_VERSIONS[1]


def frame_buffer(Py_ssize_t size):
    """A bytearray of ``size`` bytes left as malloc gave them: for a frame the socket is
    about to fill, which bytearray(size) would first zero (a memset per received megabyte)."""
    if size < 0:
        raise ValueError(f"negative frame size {size}")
    return PyByteArray_FromStringAndSize(NULL, size)




# ---- request headers -----------------------------------------------------------------------
#
# api_key int16, api_version int16, correlation_id int32, client_id (int16 length, -1 = null,
# even in header v2), then in header v2 (a flexible request version) a tag section. An API key
# the schemas do not know still parses, as header v1.

cdef dict _FLEXIBLE = {key: (codec.message.flexible.lo, codec.message.flexible.hi)
                       for key, codec in messages.REQUESTS.items()
                       if codec.message.flexible is not None}


def read_request_header(object reader, object listener_name, object make):
    """protocol.headers.read_request_header: the header at a Reader's pos, which it leaves
    where the body begins; returns make(api_key, api_version, correlation_id, client_id,
    header_version, listener_name)."""
    api_key, api_version, correlation_id, client_id, header_version = _decode_body(
        _decode_header, 0, reader, 0)
    return make(api_key, api_version, correlation_id, client_id, header_version, listener_name)


cdef object _decode_header(int unused, object view, Cursor* cursor):
    cdef Cursor c = cursor[0]
    cdef int16_t api_key, api_version, n
    cdef int32_t correlation_id
    read_i16(&c, &api_key)
    read_i16(&c, &api_version)
    read_i32(&c, &correlation_id)
    read_i16(&c, &n)
    if n < -1:
        raise ProtocolError(f"negative client id length {n}")
    cdef object client_id = None
    cdef const uint8_t* at
    if n >= 0:
        _need(&c, n)
        at = c.p
        c.p += n
        try:
            client_id = PyUnicode_DecodeUTF8(<const char*>at, n, NULL)
        except UnicodeDecodeError:
            _bad_utf8(at - c.base)
    flexible = _FLEXIBLE.get(api_key)
    cdef int header_version = 1
    if flexible is not None and flexible[0] <= api_version <= flexible[1]:
        skip_tagged_fields(&c)
        header_version = 2
    cursor[0] = c
    return (api_key, api_version, correlation_id, client_id, header_version)


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
    ntopics = _read_array_length_nn(&c, flexible, "topic_data")
    topics = []
    for i in range(ntopics):
        topic = _new(_TopicProduceData)
        if version <= 12:
            topic.name = _read_string_nn(&c, flexible, "name")
            topic.topic_id = _ZERO_UUID
        else:
            _need(&c, 16)
            topic.name = _EMPTY_NAME
            topic.topic_id = PyBytes_FromStringAndSize(<const char*>c.p, 16)
            c.p += 16
        nparts = _read_array_length_nn(&c, flexible, "partition_data")
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
                partition.records = view[c.p - c.base:c.p - c.base + nrec]
                c.p += nrec
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



# ---- Produce responses ----------------------------------------------------------------------
#
# Per partition: index, error_code, base_offset, log_append_time_ms (v2+), log_start_offset
# (v5+), record_errors and error_message (v8+, both written even at their defaults), then in
# flexible versions the tag section: 0 current_leader (v10+). At the root, after
# throttle_time_ms: 0 node_endpoints (v10+).

cdef type _PartitionProduceResponse = \
    messages.ProduceResponse.TopicProduceResponse.PartitionProduceResponse
cdef TagDefault _PRODUCE_LEADER = TagDefault(_PartitionProduceResponse.LeaderIdAndEpoch)
cdef Py_ssize_t _PP_INDEX = _slot_offset(_PartitionProduceResponse, "index")
cdef Py_ssize_t _PP_ERROR_CODE = _slot_offset(_PartitionProduceResponse, "error_code")
cdef Py_ssize_t _PP_BASE_OFFSET = _slot_offset(_PartitionProduceResponse, "base_offset")
cdef Py_ssize_t _PP_LOG_APPEND_TIME_MS = _slot_offset(_PartitionProduceResponse,
                                                      "log_append_time_ms")
cdef Py_ssize_t _PP_LOG_START_OFFSET = _slot_offset(_PartitionProduceResponse, "log_start_offset")
cdef Py_ssize_t _PP_RECORD_ERRORS = _slot_offset(_PartitionProduceResponse, "record_errors")
cdef Py_ssize_t _PP_ERROR_MESSAGE = _slot_offset(_PartitionProduceResponse, "error_message")
cdef Py_ssize_t _PP_CURRENT_LEADER = _slot_offset(_PartitionProduceResponse, "current_leader")
cdef tuple _PRODUCE_ENDPOINTS_WHERE = ("ProduceResponse.node_endpoints", "ProduceResponse.host",
                                       "ProduceResponse.rack")


def encode_produce_response(int version, int32_t correlation_id, object response):
    """A whole Produce response frame as parts (one bytes object): encode_response(0, ...)."""
    _check_version("ProduceResponse", version, PRODUCE_RESPONSE_MIN, PRODUCE_RESPONSE_MAX)
    cdef bint flexible = version >= 9
    cdef Frame f = Frame(256)
    cdef Out* o = &f.out
    f.header(correlation_id, flexible)
    topics = response.responses
    if _put_array_length(o, topics, flexible, "ProduceResponse.responses", version, False) > 0:
        for topic in topics:
            if version <= 12:
                _put_string(o, topic.name, flexible, "ProduceResponse.name", version, False)
            else:
                _put_uuid(o, topic.topic_id)
            partitions = topic.partition_responses
            if _put_array_length(o, partitions, flexible, "ProduceResponse.partition_responses",
                                 version, False) > 0:
                for partition in partitions:
                    _write_produce_partition(o, partition, version, flexible)
            if flexible:
                reserve(o, 1)
                put_uvarint(o, 0)
    reserve(o, 4)
    put_i32(o, <int32_t>response.throttle_time_ms)
    if flexible:
        endpoints = getattr(response, "node_endpoints", None) if version >= 10 else None
        _put_node_endpoints_tags(o, endpoints, version, _PRODUCE_ENDPOINTS_WHERE)
    return f.parts()


cdef int _write_produce_partition(Out* o, object p, int version, bint flexible) except -1:
    cdef bint exact = type(p) is _PartitionProduceResponse
    reserve(o, 30)
    put_i32(o, <int32_t>_field(p, exact, _PP_INDEX, "index"))
    put_i16(o, <int16_t>_field(p, exact, _PP_ERROR_CODE, "error_code"))
    put_i64(o, <int64_t>_field(p, exact, _PP_BASE_OFFSET, "base_offset"))
    put_i64(o, <int64_t>_field(p, exact, _PP_LOG_APPEND_TIME_MS, "log_append_time_ms"))
    if version >= 5:
        put_i64(o, <int64_t>_field(p, exact, _PP_LOG_START_OFFSET, "log_start_offset"))
    if version >= 8:
        errors = _field(p, exact, _PP_RECORD_ERRORS, "record_errors")
        if _put_array_length(o, errors, flexible, "ProduceResponse.record_errors", version,
                             False) > 0:
            for error in errors:
                reserve(o, 4)
                put_i32(o, <int32_t>error.batch_index)
                _put_string(o, error.batch_index_error_message, flexible,
                            "ProduceResponse.batch_index_error_message", version, True)
                if flexible:
                    reserve(o, 1)
                    put_uvarint(o, 0)
        _put_string(o, _field(p, exact, _PP_ERROR_MESSAGE, "error_message"), flexible,
                    "ProduceResponse.error_message", version, True)
    if not flexible:
        return 0
    leader = _tagged(p, exact, _PP_CURRENT_LEADER, "current_leader") if version >= 10 else None
    cdef bint has_leader = not _PRODUCE_LEADER.absent(leader)
    reserve(o, 1 + 11)
    put_uvarint(o, <uint64_t>has_leader)
    if has_leader:  # leader_id int32, leader_epoch int32, no tags: 9 bytes
        put_uvarint(o, 0)
        put_uvarint(o, 9)
        put_i32(o, <int32_t>leader.leader_id)
        put_i32(o, <int32_t>leader.leader_epoch)
        put_uvarint(o, 0)
    return 0


# ---- Metadata -------------------------------------------------------------------------------

def encode_metadata_response(int version, int32_t correlation_id, object response):
    """A whole Metadata response frame as parts: encode_response(3, version, ...)."""
    _check_version("MetadataResponse", version, METADATA_MIN, METADATA_MAX)
    cdef bint flexible = version >= 9
    cdef Frame f = Frame(4096)
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

