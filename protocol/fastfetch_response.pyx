# cython: language_level=3
"""Fetch responses, both ends of them: the leader encodes (encode_fetch_response, the whole
frame as parts), a follower or consumer decodes the body (decode_fetch_response).

    encode_fetch_response(version, corr_id, body)    whole Fetch response frame, v4-18
    decode_fetch_response(version, buf, pos)         Fetch response body, v4-18

Layout: protocol/schemas/produce_fetch.schema (flexible from v12; topic names up to v12,
topic ids from v13). Per partition, in tag order: 0 diverging_epoch, 1 current_leader,
2 snapshot_id (v12+); at the root: 0 node_endpoints (v16+).

Rules easy to miss (the generic codec's): records that are not a buffer (a file slice,
anything with ``.size``) become their own part, so they can go out with sendfile, and one
of size 0 is not spliced; tagged fields are written only when not None and different from
the default (a struct default is a fresh instance, compared by KafkaStruct.__eq__); decoded
partitions get every tagged struct set (a fresh default when absent), records as
memoryview slices of buf (no copy). Public through protocol.fastcodec.
"""
from libc.stdint cimport int16_t, int32_t, int64_t, uint64_t

from protocol.wire cimport (Cursor, Frame, Out, TagDefault, _check_version, _decode_body,
                           _field, _need, _new, _next_tag, _put_array_length,
                           _put_node_endpoints_tags, _put_string, _put_uuid, _read_array_length,
                           _read_array_length_nn, _read_length, _read_string, _read_string_nn,
                           _read_topic_ref, _read_uuid, _slot_offset, _tagged,
                           put_i16, put_i32, put_i64, put_uvarint, read_i16, read_i32, read_i64,
                           read_uvarint, reserve, skip_tagged_fields)

from protocol import messages

cdef type _EpochEndOffset = messages.FetchResponse.PartitionData.EpochEndOffset
cdef type _LeaderIdAndEpoch = messages.FetchResponse.PartitionData.LeaderIdAndEpoch
cdef type _SnapshotId = messages.FetchResponse.PartitionData.SnapshotId
cdef type _FetchResponse = messages.FetchResponse
cdef type _FetchableTopicResponse = messages.FetchResponse.FetchableTopicResponse
cdef type _AbortedTransaction = messages.FetchResponse.PartitionData.AbortedTransaction
cdef type _NodeEndpoint = messages.FetchResponse.NodeEndpoint
cdef object _FR_EMPTY_NAME = _FetchableTopicResponse._defaults["topic"]
cdef object _FR_ZERO_UUID = _FetchableTopicResponse._defaults["topic_id"]

FETCH_VERSIONS = (messages.RESPONSES[1].message.versions.lo,
                  messages.RESPONSES[1].message.versions.hi)
cdef int FETCH_MIN = FETCH_VERSIONS[0], FETCH_MAX = FETCH_VERSIONS[1]

cdef TagDefault _EPOCH_END_OFFSET = TagDefault(_EpochEndOffset)
cdef TagDefault _LEADER_ID_AND_EPOCH = TagDefault(_LeaderIdAndEpoch)
cdef TagDefault _SNAPSHOT_ID = TagDefault(_SnapshotId)


# ---- encode -------------------------------------------------------------------------------

def encode_fetch_response(int version, int32_t correlation_id, object response):
    """A whole Fetch response frame as parts: encode_response(1, version, ...)."""
    _check_version("FetchResponse", version, FETCH_MIN, FETCH_MAX)
    cdef bint flexible = version >= 12
    cdef Frame f = Frame(1024)
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


cdef int _write_fetch_partition(Frame f, object p, int version, bint flexible) except -1:
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


cdef tuple _ENDPOINTS_WHERE = ("FetchResponse.node_endpoints", "FetchResponse.host",
                               "FetchResponse.rack")


cdef int _write_fetch_root_tags(Out* o, object response, int version) except -1:
    # One tagged field, node_endpoints (tag 0, v16+).
    endpoints = getattr(response, "node_endpoints", None) if version >= 16 else None
    return _put_node_endpoints_tags(o, endpoints, version, _ENDPOINTS_WHERE)


# ---- decode -------------------------------------------------------------------------------

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
    n = _read_array_length_nn(&c, flexible, "responses")
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
    cdef int64_t n = _read_array_length_nn(c, True, "node_endpoints"), i
    cdef list endpoints = []
    for i in range(n):
        node = _new(_NodeEndpoint)
        read_i32(c, &i32)
        node.node_id = i32
        node.host = _read_string_nn(c, True, "host")
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
    _read_topic_ref(c, topic, version, flexible, _FR_ZERO_UUID, _FR_EMPTY_NAME)
    n = _read_array_length_nn(c, flexible, "partitions")
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
        p.records = view[c.p - c.base:c.p - c.base + n]
        c.p += n
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
