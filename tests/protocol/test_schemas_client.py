"""Differential tests: the client-facing schemas against kafka-python's codec.

kafka-python (``kafka.protocol``) builds its message classes at runtime from its own copy
of Kafka's JSON message definitions and encodes them with its own code, independent of
ours. For every message in the client-facing schema files and every valid version:

    ours -> kafka-python   a generated sample is encoded by our codec, decoded by
                           kafka-python, and compared field by field, walking our schema;
    kafka-python -> ours   the same sample is built as kafka-python objects, encoded by
                           kafka-python, decoded by ours, and compared; the two encodings
                           must also be byte-identical.

Samples are generated from the schema (``Sampler``): every field present in the version
gets a value different from its default (nested arrays of two elements, tagged fields
included); a second sample sets every field that is nullable in that version to null.

kafka-python quirks, worked around here and not in the schemas:

    bitfield        it rewrites MetadataResponse's and DescribeClusterResponse's
                    cluster/topic_authorized_operations and DescribeGroupsResponse's
                    authorized_operations (int32 on the wire) into a "bitfield" type named
                    authorized_operations whose value is a set of bit numbers (None for
                    INT32_MIN, the "not requested" value);
    ApiVersions     ApiVersionsResponse.decode decodes as v0 whenever error_code != 0, so
                    its struct decoder is called directly (as it is for every message, to
                    check that the whole buffer was consumed);
    uuid            a uuid.UUID there, 16 bytes here;
    defaults        it patches ListOffsetsRequest.replica_id's default to -1 and
                    CreatePartitionsRequest assignments' to null, and has no default for
                    uuid fields (None) and b"" for records; Kafka's JSON says 0, [] and the
                    zero uuid, and Kafka's generated Java leaves records null.
"""
from __future__ import annotations

import copy
import os
import uuid

import pytest

from protocol import headers, messages
from protocol.codec import KafkaStruct, MessageCodec
from protocol.schema import ALL, Field, Message, Struct, parse
from protocol.types import ProtocolError, Reader

kafka_protocol = pytest.importorskip("kafka.protocol")
from kafka.protocol import admin as kp_admin  # noqa: E402
from kafka.protocol import consumer as kp_consumer  # noqa: E402
from kafka.protocol import metadata as kp_metadata  # noqa: E402
from kafka.protocol import producer as kp_producer  # noqa: E402
from kafka.protocol.api_data import ApiData  # noqa: E402

SCHEMA_FILES = ["produce_fetch", "metadata", "groups", "admin", "transactions", "reassignments", "acls",
                "scram", "quotas"]

EXPECTED = {
    "produce_fetch": ["Produce", "Fetch", "ListOffsets", "OffsetForLeaderEpoch", "DeleteRecords",
                      "InitProducerId"],
    "metadata": ["ApiVersions", "Metadata", "DescribeCluster", "DescribeTopicPartitions"],
    "groups": ["FindCoordinator", "JoinGroup", "SyncGroup", "Heartbeat", "LeaveGroup",
               "OffsetCommit", "OffsetFetch", "DescribeGroups", "ListGroups", "DeleteGroups", "OffsetDelete",
               "ConsumerProtocolSubscription", "ConsumerProtocolAssignment"],
    "admin": ["CreateTopics", "DeleteTopics", "CreatePartitions", "DescribeConfigs",
              "AlterConfigs", "IncrementalAlterConfigs", "AlterReplicaLogDirs",
              "DescribeLogDirs"],
    "transactions": ["AddPartitionsToTxn", "AddOffsetsToTxn", "EndTxn", "TxnOffsetCommit",
                     "WriteTxnMarkers", "DescribeProducers", "DescribeTransactions",
                     "ListTransactions"],
    "reassignments": ["AlterPartitionReassignments", "ListPartitionReassignments"],
    "acls": ["DescribeAcls", "CreateAcls", "DeleteAcls"],
    "scram": ["DescribeUserScramCredentials", "AlterUserScramCredentials"],
    "quotas": ["DescribeClientQuotas", "AlterClientQuotas"],
}

INT32_MIN = -(2**31)


def _load(stem: str) -> list[Message]:
    path = os.path.join(messages.SCHEMA_DIR, stem + ".schema")
    with open(path, encoding="utf-8") as f:
        return parse(f.read(), path)


def codec_of(message: Message) -> MessageCodec:
    """The registered codec (what the broker uses), not a fresh one."""
    if message.kind == "request":
        return messages.REQUESTS[message.api_key]
    if message.kind == "response":
        return messages.RESPONSES[message.api_key]
    return messages.DATA[message.name]


# the registered messages (their struct ids key the codec's classes)
MESSAGES: list[Message] = [codec_of(m).message for stem in SCHEMA_FILES for m in _load(stem)]


KP_CLASSES = {
    name: getattr(module, name)
    for module in (kp_admin, kp_consumer, kp_metadata, kp_producer)
    for name in module.__all__
}


def kp_class(message: Message):
    return KP_CLASSES[message.struct_name]


CASES = [(m, v) for m in MESSAGES for v in range(m.versions.lo, m.versions.hi + 1)]
CASE_IDS = [f"{m.struct_name}-v{v}" for m, v in CASES]


# ---- sample values ------------------------------------------------------------------------

class Sampler:
    """Builds a populated struct for one version from the schema. Every value differs from
    the field's default; with ``nulls``, every field nullable in the version is null."""

    def __init__(self, codec: MessageCodec, version: int, nulls: bool = False):
        self.codec = codec
        self.version = version
        self.nulls = nulls
        self.n = 0

    def build(self) -> KafkaStruct:
        return self.struct(self.codec.message.root)

    def struct(self, struct: Struct) -> KafkaStruct:
        cls = self.codec.classes[id(struct)]
        values = {f.name: self.field(f) for f in struct.fields if self.version in f.versions}
        return cls(**values)

    def field(self, f: Field):
        if self.nulls and f.nullable is not None and self.version in f.nullable:
            return None
        if f.is_array:
            return [self.element(f) for _ in range(2)]
        return self.element(f)

    def element(self, f: Field):
        if f.struct is not None:
            return self.struct(f.struct)
        self.n += 1
        n = self.n
        sign = -1 if n % 3 == 0 else 1
        base = f.element
        if base == "bool":
            return not f.default_value() if not f.is_array else n % 2 == 0
        if base == "int8":
            value = sign * (n % 100 + 1)
        elif base == "int16":
            value = sign * (1000 + n)
        elif base == "uint16":
            value = 60000 + n % 5000
        elif base == "int32":
            value = sign * (100_000 + n)
        elif base == "int64":
            value = sign * ((1 << 40) + n)
        elif base == "float64":
            return n + 0.5
        elif base == "string":
            return f"{f.name}-{n}-é"  # a two-byte character: length is in bytes
        elif base in ("bytes", "records"):
            return bytes([n % 256]) * (n % 7 + 1) + b"\x00\xff"
        elif base == "uuid":
            return bytes((n + i) % 256 for i in range(16))
        else:
            raise AssertionError(f"no sample for {f.type}")
        if not f.is_array and value == f.default_value():
            value += 1
        return value


def sample(message: Message, version: int, nulls: bool = False) -> KafkaStruct:
    return Sampler(codec_of(message), version, nulls).build()


# ---- kafka-python adapters ----------------------------------------------------------------

def kp_field(kp_struct, name: str):
    """kafka-python's field for our field name (see "bitfield" in the module docstring)."""
    fields = kp_struct.fields
    if name in fields:
        return fields[name]
    if name.endswith("authorized_operations") and "authorized_operations" in fields:
        return fields["authorized_operations"]
    raise AssertionError(f"kafka-python has no field {name} in {kp_struct.name}: {list(fields)}")


def is_bitfield(kf) -> bool:
    return getattr(kf, "_type_str", None) == "bitfield"


def bits_to_int(bits) -> int:
    if bits is None:
        return INT32_MIN
    value = sum(1 << b for b in bits)
    return value - (1 << 32) if value & (1 << 31) else value


def int_to_bits(value: int):
    if value == INT32_MIN:
        return None
    value &= 0xFFFFFFFF
    return {b for b in range(32) if value >> b & 1}


def from_kp(f: Field, kf, value):
    """A kafka-python primitive value (or array of them) in our representation."""
    def one(v):
        if f.element == "uuid":
            return bytes(16) if v is None else v.bytes
        if isinstance(v, (memoryview, bytearray)):
            return bytes(v)
        return v
    if is_bitfield(kf):
        return bits_to_int(value)
    if f.is_array:
        return None if value is None else [one(v) for v in value]
    return None if value is None and f.element != "uuid" else one(value)


def to_kp_value(f: Field, kf, value):
    def one(v):
        if f.element == "uuid":
            return uuid.UUID(bytes=bytes(v))
        if isinstance(v, memoryview):
            return bytes(v)
        return v
    if is_bitfield(kf):
        return int_to_bits(value)
    if value is None:
        return None
    if f.is_array:
        return [one(v) for v in value]
    return one(value)


def to_kp(kp_struct, data_class, struct: Struct, version: int, obj: KafkaStruct):
    """Our struct as a kafka-python object of ``data_class``."""
    values = {}
    for f in struct.fields:
        if version not in f.versions:
            continue
        kf = kp_field(kp_struct, f.name)
        value = getattr(obj, f.name)
        if f.struct is None:
            values[kf.name] = to_kp_value(f, kf, value)
        elif value is None:
            values[kf.name] = None
        elif f.is_array:
            values[kf.name] = [to_kp(kf, kf.data_class, f.struct, version, v) for v in value]
        else:
            values[kf.name] = to_kp(kf, kf.data_class, f.struct, version, value)
    return data_class(version=version, **values)


def kp_encode(message: Message, version: int, obj: KafkaStruct) -> bytes:
    cls = kp_class(message)
    kp_obj = to_kp(cls._struct, cls, message.root, version, obj)
    if issubclass(cls, ApiData):
        return bytes(kp_obj.encode(version=version, header=False))
    return bytes(kp_obj.encode(version=version))


def kp_decode(message: Message, version: int, data: bytes):
    """kafka-python's struct decoder, called directly: no ApiVersionsResponse special case,
    and we can check that every byte was consumed."""
    cls = kp_class(message)
    flexible = message.is_flexible(version)
    decode = cls._struct.compiled_decode_from(version, compact=flexible, tagged=flexible,
                                              data_class=cls)
    obj, pos = decode(memoryview(data), 0)
    assert pos == len(data), f"kafka-python consumed {pos} of {len(data)} bytes"
    return obj


def assert_same(kp_struct, struct: Struct, version: int, ours: KafkaStruct, theirs, path: str):
    """Every field of ``struct`` present in ``version``: ours == theirs (kafka-python's)."""
    for f in struct.fields:
        if version not in f.versions:
            continue
        where = f"{path}.{f.name}"
        kf = kp_field(kp_struct, f.name)
        a = getattr(ours, f.name)
        b = getattr(theirs, kf.name)
        if f.struct is None:
            if isinstance(a, memoryview):
                a = bytes(a)
            assert a == from_kp(f, kf, b), where
        elif a is None or b is None:
            assert a is None and b is None, f"{where}: {a!r} vs {b!r}"
        elif f.is_array:
            assert len(a) == len(b), where
            for i, (x, y) in enumerate(zip(a, b)):
                assert_same(kf, f.struct, version, x, y, f"{where}[{i}]")
        else:
            assert_same(kf, f.struct, version, a, b, where)


def decode_all(codec: MessageCodec, version: int, data: bytes) -> KafkaStruct:
    r = Reader(data)
    obj = codec.decode(version, r)
    assert r.pos == len(data), f"decoded {r.pos} of {len(data)} bytes"
    return obj


# ---- the schema files -----------------------------------------------------------------------

@pytest.mark.parametrize("stem", SCHEMA_FILES)
def test_schema_file_holds_its_apis(stem):
    names = []
    for m in _load(stem):
        if m.name not in names:
            names.append(m.name)
    assert names == EXPECTED[stem]


@pytest.mark.parametrize("message", MESSAGES, ids=[m.struct_name for m in MESSAGES])
def test_versions_match_kafka(message):
    """validVersions and flexibleVersions, as Kafka's JSON says (kafka-python's copy)."""
    js = kp_class(message).json
    assert str(message.versions) == js["validVersions"]
    assert (str(message.flexible) if message.flexible else "none") == js["flexibleVersions"]
    if message.api_key is not None:
        assert message.api_key == js["apiKey"]


def _layout(struct: Struct, version: int, flexible: bool):
    rows = []
    for f in struct.fields:
        if version in f.versions:
            tagged = f.tag is not None and flexible
            nullable = f.nullable is not None and version in f.nullable
            rows.append((f.name, f.type, f.tag if tagged else None, nullable))
    return rows


def _kp_layout(kp_struct, version: int, flexible: bool):
    rows = []
    for kf in kp_struct._fields:
        if not kf.for_version_q(version):
            continue
        tagged = flexible and kf.tagged_field_q(version)
        rows.append((kf.name, kf._type_str, kf.tag if tagged else None,
                     kf.nullable_for_version_q(version)))
    return rows


@pytest.mark.parametrize("message,version", CASES, ids=CASE_IDS)
def test_layout_matches_kafka(message, version):
    """Field by field, in order: name, type, tag and nullability in this version."""
    flexible = message.is_flexible(version)

    def walk(kp_struct, struct: Struct, path: str):
        ours = _layout(struct, version, flexible)
        theirs = _kp_layout(kp_struct, version, flexible)
        # kafka-python's bitfield patch (module docstring): compare as int32
        theirs = [(ours[i][0], "int32", *row[2:]) if row[1] == "bitfield" else row
                  for i, row in enumerate(theirs)]
        assert ours == theirs, path
        for f in struct.fields:
            if f.struct is not None and version in f.versions:
                walk(kp_field(kp_struct, f.name), f.struct, f"{path}.{f.name}")
    walk(kp_class(message)._struct, message.root, message.struct_name)


# ---- differential round trips ---------------------------------------------------------------

NULLS = pytest.mark.parametrize("nulls", [False, True], ids=["values", "nulls"])


@NULLS
@pytest.mark.parametrize("message,version", CASES, ids=CASE_IDS)
def test_ours_to_kafka_python(message, version, nulls):
    obj = sample(message, version, nulls)
    data = codec_of(message).encode(version, obj)
    theirs = kp_decode(message, version, data)
    cls = kp_class(message)
    assert_same(cls._struct, message.root, version, obj, theirs, message.struct_name)


@NULLS
@pytest.mark.parametrize("message,version", CASES, ids=CASE_IDS)
def test_kafka_python_to_ours(message, version, nulls):
    codec = codec_of(message)
    obj = sample(message, version, nulls)
    data = kp_encode(message, version, obj)
    assert decode_all(codec, version, data) == obj
    assert codec.encode(version, obj) == data


API_CASES = [(m, v) for m, v in CASES if m.api_key is not None]
API_IDS = [f"{m.struct_name}-v{v}" for m, v in API_CASES]


def _framed_sample(message: Message, version: int) -> KafkaStruct:
    obj = sample(message, version)
    if message.struct_name == "ApiVersionsResponse":
        obj.error_code = 0  # kafka-python decodes a response with an error as v0 (docstring)
    return obj


@pytest.mark.parametrize("message,version", API_CASES, ids=API_IDS)
def test_framed_ours_to_kafka_python(message, version):
    """Whole frames, size and header included (request header v1/v2, response v0/v1)."""
    obj = _framed_sample(message, version)
    if message.kind == "request":
        frame = headers.encode_request(message.api_key, version, 7, "strom-test", obj)
    else:
        frame = b"".join(headers.encode_response(message.api_key, version, 7, obj))
    assert int.from_bytes(frame[:4], "big") == len(frame) - 4
    theirs = kp_class(message).decode(frame, version=version, header=True, framed=True)
    assert theirs.header.correlation_id == 7
    if message.kind == "request":
        assert theirs.header.request_api_key == message.api_key
        assert theirs.header.request_api_version == version
        assert theirs.header.client_id == "strom-test"
    assert_same(kp_class(message)._struct, message.root, version, obj, theirs, message.struct_name)


@pytest.mark.parametrize("message,version", API_CASES, ids=API_IDS)
def test_framed_kafka_python_to_ours(message, version):
    obj = _framed_sample(message, version)
    cls = kp_class(message)
    kp_obj = to_kp(cls._struct, cls, message.root, version, obj)
    kp_obj.with_header(correlation_id=7, client_id="kp-test")
    # no version= here: kafka-python's API_VERSION setter writes request_api_version into
    # the header, which a ResponseHeader does not have (its header bug); kp_obj has it already
    frame = bytes(kp_obj.encode(header=True, framed=True))
    r = Reader(frame)
    assert r.int32() == len(frame) - 4
    if message.kind == "request":
        header = headers.read_request_header(r)
        assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (
            message.api_key, version, 7, "kp-test")
    else:
        assert headers.read_response_header(r, message.api_key, version) == 7
    assert codec_of(message).decode(version, r) == obj
    assert r.pos == len(frame)


# ---- tagged fields, truncation, defaults ---------------------------------------------------------

def _with_future_tags(message: Message, inside_tagged: bool = True) -> Message:
    """A copy of ``message`` as a later Kafka might send it: every struct gains a tagged field
    this schema does not know (tag 90+). ``inside_tagged=False`` leaves alone the structs
    inside tagged fields (kafka-python decodes those with no tagged-field section of their
    own: it asserts theirs is empty)."""
    future = copy.deepcopy(message)
    seen: set[int] = set()

    def add(struct: Struct) -> None:
        if id(struct) in seen:
            return
        seen.add(id(struct))
        for f in struct.fields:
            if f.struct is not None and (inside_tagged or f.tag is None):
                add(f.struct)
        struct.fields.append(Field(f"future_{len(seen)}", "string", ALL, tag=89 + len(seen)))
    add(future.root)
    return future


def _assert_same_ours(struct: Struct, version: int, a: KafkaStruct, b: KafkaStruct, path: str):
    for f in struct.fields:
        if version not in f.versions:
            continue
        x, y = getattr(a, f.name), getattr(b, f.name)
        where = f"{path}.{f.name}"
        if f.struct is None or x is None or y is None:
            assert x == y, where
        elif f.is_array:
            assert len(x) == len(y), where
            for i, (p, q) in enumerate(zip(x, y)):
                _assert_same_ours(f.struct, version, p, q, f"{where}[{i}]")
        else:
            _assert_same_ours(f.struct, version, x, y, where)


FLEXIBLE = [(m, v) for m, v in CASES
            if m.is_flexible(v) and (v == m.flexible.lo or v == m.versions.hi)]


@pytest.mark.parametrize("message,version", FLEXIBLE, ids=[f"{m.struct_name}-v{v}" for m, v in FLEXIBLE])
def test_unknown_tagged_fields_are_skipped(message, version):
    future = _with_future_tags(message)
    future_codec = MessageCodec(future)
    obj = Sampler(future_codec, version).build()
    data = future_codec.encode(version, obj)
    assert len(data) > len(codec_of(message).encode(version, sample(message, version)))
    decoded = decode_all(codec_of(message), version, data)
    _assert_same_ours(message.root, version, obj, decoded, message.struct_name)
    # kafka-python skips them too
    future = _with_future_tags(message, inside_tagged=False)
    future_codec = MessageCodec(future)
    obj = Sampler(future_codec, version).build()
    theirs = kp_decode(message, version, future_codec.encode(version, obj))
    assert_same(kp_class(message)._struct, message.root, version, obj, theirs, message.struct_name)


def _cuts(n: int) -> list[int]:
    if n <= 96:
        return list(range(n))
    step = n // 64
    return sorted(set(range(0, n, step)) | set(range(n - 16, n)))


@pytest.mark.parametrize("message,version", CASES, ids=CASE_IDS)
def test_truncated_input_raises_protocol_error(message, version):
    codec = codec_of(message)
    data = codec.encode(version, sample(message, version))
    for cut in _cuts(len(data)):
        with pytest.raises(ProtocolError):
            codec.decode(version, data[:cut])


def test_corrupt_lengths_raise_protocol_error():
    codec = messages.RESPONSES[messages.API_KEYS["Metadata"]]
    data = bytearray(codec.encode(1, sample(_message("MetadataResponse"), 1)))
    data[0:4] = (2**31 - 1).to_bytes(4, "big")  # brokers array length
    with pytest.raises(ProtocolError):
        codec.decode(1, bytes(data))
    data[0:4] = (-2).to_bytes(4, "big", signed=True)
    with pytest.raises(ProtocolError):
        codec.decode(1, bytes(data))
    # a compact string whose length runs past the end
    heartbeat = messages.REQUESTS[messages.API_KEYS["Heartbeat"]]
    with pytest.raises(ProtocolError):
        heartbeat.decode(4, b"\x7f" + b"g" * 10)


def test_common_struct_has_one_class():
    """A common struct used in two places is one class: decoded values equal built ones."""
    request = messages.AddPartitionsToTxnRequest
    topic = request.AddPartitionsToTxnTopic
    assert request.AddPartitionsToTxnTransaction.AddPartitionsToTxnTopic is topic
    obj = request(v3_and_below_transactional_id="t", v3_and_below_topics=[topic(name="a", partitions=[1])])
    codec = messages.REQUESTS[messages.API_KEYS["AddPartitionsToTxn"]]
    assert codec.decode(3, codec.encode(3, obj)) == obj
    response = messages.AddPartitionsToTxnResponse
    assert (response.AddPartitionsToTxnResult.AddPartitionsToTxnTopicResult
            is response.AddPartitionsToTxnTopicResult)


def _message(struct_name: str) -> Message:
    return next(m for m in MESSAGES if m.struct_name == struct_name)


def test_representative_defaults():
    fetch = messages.FetchRequest()
    assert fetch.replica_id == -1
    assert fetch.max_bytes == 0x7FFFFFFF
    assert fetch.session_epoch == -1
    assert fetch.cluster_id is None
    assert fetch.rack_id == ""
    assert fetch.replica_state == messages.FetchRequest.ReplicaState(replica_id=-1, replica_epoch=-1)
    partition = messages.FetchRequest.FetchTopic.FetchPartition()
    assert partition.high_watermark == 2**63 - 1
    assert partition.last_fetched_epoch == -1
    assert partition.replica_directory_id == bytes(16)
    assert messages.ProduceRequest().transactional_id is None
    produced = messages.ProduceResponse.TopicProduceResponse.PartitionProduceResponse()
    assert produced.log_append_time_ms == -1
    assert produced.current_leader.leader_epoch == -1
    assert produced.record_errors == [] and produced.error_message is None
    assert messages.MetadataRequest().allow_auto_topic_creation is True
    assert messages.MetadataResponse().cluster_authorized_operations == INT32_MIN
    assert messages.JoinGroupResponse().generation_id == -1
    assert messages.CreateTopicsRequest().timeout_ms == 60000
    assert messages.ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition().max_num_offsets == 1
    assert messages.ConsumerProtocolSubscription().user_data is None
    assert messages.ConsumerProtocolSubscription().generation_id == -1


# kafka-python's own defaults that are not Kafka's (module docstring, "defaults")
KP_PATCHED_DEFAULTS = {
    ("ListOffsetsRequest", "replica_id"),
    ("CreatePartitionsRequest", "assignments"),
}


@pytest.mark.parametrize("message", MESSAGES, ids=[m.struct_name for m in MESSAGES])
def test_defaults_match_kafka(message):
    """Every primitive field's class default equals the JSON default kafka-python computed."""
    codec = codec_of(message)

    def walk(kp_struct, struct: Struct):
        cls = codec.classes[id(struct)]
        for f in struct.fields:
            kf = kp_field(kp_struct, f.name)
            if (message.struct_name, f.name) in KP_PATCHED_DEFAULTS:
                continue
            if f.type == "records":  # Kafka's generated Java: null; kafka-python: b""
                assert getattr(cls(), f.name) is None
                continue
            if f.struct is not None:
                walk(kf, f.struct)
                if f.is_array:  # [] or null; a single struct's default is not comparable
                    assert getattr(cls(), f.name) == kf.default, f"{struct.name}.{f.name}"
                continue
            if is_bitfield(kf):
                continue
            ours = getattr(cls(), f.name)
            assert ours == from_kp(f, kf, kf.default), f"{struct.name}.{f.name}"
    walk(kp_class(message)._struct, message.root)
