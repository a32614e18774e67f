# cython: language_level=3
"""Fetch requests, both ends of them: a follower or consumer encodes the whole frame
(encode_fetch_request), the leader decodes the body (decode_fetch_request).

    decode_fetch_request(version, buf, pos)          Fetch request body, v4-18
    encode_fetch_request(version, corr_id, client_id, body)
                                                     whole Fetch request frame, v4-18

Every produce under acks=all makes each follower encode a Fetch request and the leader
decode it. Layout: protocol/schemas/produce_fetch.schema (flexible from v12, so request
header v2; the header's client_id keeps its int16 length even then). Tagged fields: root
0 cluster_id (v12+, written when not null), 1 replica_state (v15+, replacing replica_id);
per partition 0 replica_directory_id (v17+), 1 high_watermark (v18+).

Decoded structs get every slot set (absent fields to the class default, as the generic
reader's `absent` list does, single-struct defaults as fresh instances) so that
KafkaStruct.__eq__ holds against the generic decoder. Public through protocol.fastcodec.
"""
from libc.stdint cimport int16_t, int32_t, int64_t, uint64_t

from protocol.wire cimport (Cursor, Frame, Out, TagDefault, _check_version, _decode_body,
                           _int8, _next_tag, _prefix_size, _put_array_length, _put_int32_array,
                           _put_string, _put_uuid, _read_array_length_nn, _read_string,
                           _read_string_nn, _read_topic_ref,
                           _read_uuid, _new, put_i8, put_i16, put_i32, put_i64, put_uvarint,
                           read_i8, read_i32, read_i64, read_uvarint, reserve,
                           skip_tagged_fields)

from protocol import messages

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

FETCH_REQUEST_VERSIONS = (messages.REQUESTS[1].message.versions.lo,
                          messages.REQUESTS[1].message.versions.hi)
cdef int FETCH_REQUEST_MIN = FETCH_REQUEST_VERSIONS[0], FETCH_REQUEST_MAX = FETCH_REQUEST_VERSIONS[1]


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
    n = _read_array_length_nn(&c, flexible, "topics")
    topics = []
    for i in range(n):
        topics.append(_read_fetch_topic(&c, version, flexible))
    request.topics = topics
    if version >= 7:
        n = _read_array_length_nn(&c, flexible, "forgotten_topics_data")
        topics = []
        for i in range(n):
            topics.append(_read_forgotten_topic(&c, version, flexible))
        request.forgotten_topics_data = topics
    else:
        request.forgotten_topics_data = []
    request.rack_id = (_read_string_nn(&c, flexible, "rack_id") if version >= 11
                       else _FRQ_DEFAULTS["rack_id"])
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
    _read_topic_ref(c, topic, version, flexible, _FT_ZERO_UUID, _FT_EMPTY_NAME)
    n = _read_array_length_nn(c, flexible, "partitions")
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
    _read_topic_ref(c, topic, version, flexible, _FG_ZERO_UUID, _FG_EMPTY_NAME)
    n = _read_array_length_nn(c, flexible, "partitions")
    partitions = []
    for i in range(n):
        read_i32(c, &i32)
        partitions.append(i32)
    topic.partitions = partitions
    if flexible:
        skip_tagged_fields(c)
    return topic


cdef TagDefault _REPLICA_STATE = TagDefault(_ReplicaState)


def encode_fetch_request(int version, int32_t correlation_id, object client_id, object request):
    """A whole Fetch request frame (size prefix, header v1/v2, body) as one bytes object:
    encode_request(1, version, correlation_id, client_id, request)."""
    _check_version("FetchRequest", version, FETCH_REQUEST_MIN, FETCH_REQUEST_MAX)
    cdef bint flexible = version >= 12
    cdef Frame f = Frame(256)
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

