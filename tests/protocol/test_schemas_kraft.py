"""The KRaft schemas: differential tests against kio, golden bytes for the metadata records.

kraft.schema (the quorum and broker-lifecycle RPCs) is checked against ``kio``, an
independent implementation of Kafka's RPC schemas (Python classes generated from Kafka's
JSON, decoding in Rust). For every RPC, request and response, and every version:

    ours -> kio   a generated sample is encoded by our codec, decoded by kio (which must
                  consume every byte), converted back and compared with the sample;
    kio -> ours   the same sample is built as kio objects, encoded by kio, decoded by ours
                  and compared; the two encodings must be byte-identical.

Samples are generated from our schema objects (``Sampler``): every field present in the
version gets a value different from its default (nested arrays of two elements, tagged
fields included); a second sample sets every field nullable in that version to null, a
third leaves everything at its default (tagged fields must then be omitted by both).

kio differs from Kafka's JSON only in representation, bridged by ``to_kio``/``from_kio``:
throttle_time_ms and timeout_ms are timedeltas named throttle_time and timeout, error codes
are an enum, uuids are uuid.UUID (None for the zero uuid), arrays are tuples, and
KRaftVersionFeature's field is named k_raft_version_feature.

metadata_records.schema has no independent oracle here (kio has no metadata records), so
every record is round-tripped with the same samples, a few encodings are pinned to bytes
derived by hand from the layout, and the record type ids and names are checked against
Kafka's (MetadataRecordType, ControlRecordType).
"""
from __future__ import annotations

import dataclasses
import datetime
import importlib
import os
import random
import re
import types
import typing
import uuid

import pytest

from protocol import messages
from protocol.codec import KafkaStruct, MessageCodec
from protocol.schema import Field, Message, Struct, parse
from protocol.types import Writer

SCHEMA_DIR = messages.SCHEMA_DIR

KRAFT_APIS = {
    52: "Vote", 53: "BeginQuorumEpoch", 54: "EndQuorumEpoch", 55: "DescribeQuorum",
    56: "AlterPartition", 59: "FetchSnapshot", 62: "BrokerRegistration",
    63: "BrokerHeartbeat", 64: "UnregisterBroker", 67: "AllocateProducerIds",
    70: "ControllerRegistration", 80: "AddRaftVoter", 81: "RemoveRaftVoter",
    82: "UpdateRaftVoter",
}

# Kafka's MetadataRecordType ids (the apiKey of metadata/src/main/resources/common/metadata).
METADATA_RECORD_TYPES = {
    0: "RegisterBrokerRecord", 1: "UnregisterBrokerRecord", 2: "TopicRecord",
    3: "PartitionRecord", 4: "ConfigRecord", 5: "PartitionChangeRecord",
    7: "FenceBrokerRecord", 8: "UnfenceBrokerRecord", 9: "RemoveTopicRecord",
    10: "DelegationTokenRecord", 11: "UserScramCredentialRecord", 12: "FeatureLevelRecord",
    14: "ClientQuotaRecord", 15: "ProducerIdsRecord", 17: "BrokerRegistrationChangeRecord",
    18: "AccessControlEntryRecord", 19: "RemoveAccessControlEntryRecord", 20: "NoOpRecord",
    21: "ZkMigrationStateRecord", 22: "RemoveUserScramCredentialRecord",
    23: "BeginTransactionRecord", 24: "EndTransactionRecord", 25: "AbortTransactionRecord",
    26: "RemoveDelegationTokenRecord", 27: "RegisterControllerRecord",
}
# ControlRecordType ids of KRaft's control records (the key's int16 type).
CONTROL_RECORDS = {
    2: "LeaderChangeMessage", 3: "SnapshotHeaderRecord", 4: "SnapshotFooterRecord",
    5: "KRaftVersionRecord", 6: "VotersRecord",
}


def _load(name: str) -> list[Message]:
    path = os.path.join(SCHEMA_DIR, name)
    with open(path, encoding="utf-8") as f:
        return parse(f.read(), path)


KRAFT = _load("kraft.schema")
RECORDS = _load("metadata_records.schema")


# ---- samples ------------------------------------------------------------------------------

ERROR_CODES = [1, 3, 6, 7, 15, 41, 42, 58, 74, 91, 102, 103, 104, 105]
TEXT = "abcxyz-_.019éßλ日本"


class Sampler:
    """Values for every field of a struct at one version, walking our schema objects.

    mode "full": every field present gets a non-default value; "nulls": the same, but
    every field nullable in this version is null; "defaults": the struct's defaults."""

    def __init__(self, seed: int, mode: str):
        self.rng = random.Random(seed)
        self.mode = mode

    def struct(self, cls: type[KafkaStruct], struct: Struct, version: int) -> KafkaStruct:
        obj = cls()
        if self.mode == "defaults":
            return obj
        for f in struct.fields:
            if version in f.versions:
                setattr(obj, f.name, self.field(cls, f, version))
        return obj

    def field(self, cls: type[KafkaStruct], f: Field, version: int):
        if self.mode == "nulls" and f.nullable is not None and version in f.nullable:
            return None
        nested = getattr(cls, f.struct.name) if f.struct is not None else None
        if f.is_array:
            return [self.one(nested, f, version) for _ in range(2)]
        default = f.default_value()
        for _ in range(100):
            value = self.one(nested, f, version)
            if value != default:
                return value
        raise AssertionError(f"no non-default value for {f.name}")

    def one(self, nested, f: Field, version: int):
        rng, t = self.rng, f.element
        if nested is not None:
            return self.struct(nested, f.struct, version)
        if t == "int16" and f.name == "error_code":
            return rng.choice(ERROR_CODES)
        bits = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}.get(t)
        if bits:
            return rng.choice([rng.randint(1, 127), -rng.randint(2, 2 ** (bits - 1)),
                               rng.randint(2 ** (bits - 2), 2 ** (bits - 1) - 1)])
        if t == "uint16":
            return rng.choice([rng.randint(1, 255), rng.randint(32768, 65535)])
        if t == "float64":
            return rng.uniform(-1e9, 1e9)
        if t == "bool":
            return not f.default_value()
        if t == "string":
            return "".join(rng.choice(TEXT) for _ in range(rng.randint(1, 12)))
        if t in ("bytes", "records"):
            return rng.randbytes(rng.randint(1, 40))
        if t == "uuid":
            return rng.randbytes(16)
        raise AssertionError(f"unknown type {t}")


def sample(codec: MessageCodec, version: int, mode: str, seed: int = 0) -> KafkaStruct:
    return Sampler(seed, mode).struct(codec.cls, codec.message.root, version)


MODES = ["full", "nulls", "defaults"]


# ---- kio bridge ---------------------------------------------------------------------------

def snake(name: str) -> str:
    name = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    return re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name).lower()


def kio_name(ours: str) -> list[str]:
    """kio's names for one of our fields, most likely first."""
    names = [ours]
    if ours.endswith("_ms"):
        names.append(ours[:-3])
    if ours == "kraft_version_feature":
        names.append("k_raft_version_feature")
    return names


def kio_class(name: str, kind: str, version: int) -> type:
    module = importlib.import_module(f"kio.schema.{snake(name)}.v{version}.{kind}")
    return getattr(module, name + kind.capitalize())


def kio_versions(name: str) -> set[int]:
    import kio.schema
    path = os.path.join(os.path.dirname(kio.schema.__file__), snake(name))
    if not os.path.isdir(path):
        return set()
    return {int(d[1:]) for d in os.listdir(path) if re.fullmatch(r"v\d+", d)}


def _inner(annotation):
    """(is_array, element annotation) of a kio field, with ``X | None`` unwrapped."""
    def unwrap(a):
        if isinstance(a, types.UnionType):
            args = [x for x in typing.get_args(a) if x is not type(None)]
            return args[0]
        return a
    a = unwrap(annotation)
    if typing.get_origin(a) is tuple:
        return True, unwrap(typing.get_args(a)[0])
    return False, a


def _kio_fields(kcls: type, struct: Struct, version: int) -> list[tuple[Field, dataclasses.Field]]:
    """Pairs (our field, kio field) for every field in this version; both sides must match
    one to one, in order."""
    kfields = {kf.name: kf for kf in dataclasses.fields(kcls)}
    pairs = []
    for f in struct.fields:
        if version not in f.versions:
            continue
        match = next((kfields[n] for n in kio_name(f.name) if n in kfields), None)
        assert match is not None, f"{kcls.__name__}.{f.name} v{version}: kio has no such field"
        pairs.append((f, match))
    ours = [k.name for _, k in pairs]
    assert ours == list(kfields), f"{kcls.__name__} v{version}: fields {ours} vs kio {list(kfields)}"
    return pairs


def to_kio(kcls: type, struct: Struct, version: int, obj: KafkaStruct):
    from kio.schema.errors import ErrorCode
    from kio.static.primitive import i32Timedelta

    def conv(f: Field, kf: dataclasses.Field, elem, v):
        if v is None:
            return None
        if f.struct is not None:
            return to_kio(elem, f.struct, version, v)
        ktype = kf.metadata.get("kafka_type")
        if ktype == "timedelta_i32":
            return i32Timedelta.parse(datetime.timedelta(milliseconds=v))
        if ktype == "error_code":
            return ErrorCode(v)
        if f.element == "uuid":
            return None if v == bytes(16) else uuid.UUID(bytes=bytes(v))
        return v

    values = {}
    for f, kf in _kio_fields(kcls, struct, version):
        is_array, elem = _inner(kf.type)
        v = getattr(obj, f.name)
        if f.is_array and v is not None:
            values[kf.name] = tuple(conv(f, kf, elem, x) for x in v)
        else:
            values[kf.name] = conv(f, kf, elem, v)
    return kcls(**values)


def from_kio(cls: type[KafkaStruct], struct: Struct, version: int, kobj) -> KafkaStruct:
    obj = cls()

    def conv(f: Field, v):
        if f.struct is not None:
            return None if v is None else from_kio(getattr(cls, f.struct.name), f.struct,
                                                   version, v)
        if isinstance(v, datetime.timedelta):
            return v // datetime.timedelta(milliseconds=1)
        if isinstance(v, uuid.UUID):
            return v.bytes
        if f.element == "uuid" and v is None:
            return bytes(16)
        if isinstance(v, int) and not isinstance(v, bool):
            return int(v)  # ErrorCode and kio's phantom int types
        if isinstance(v, bytes):
            return bytes(v)
        return v

    for f, kf in _kio_fields(type(kobj), struct, version):
        v = getattr(kobj, kf.name)
        if f.is_array:
            v = None if v is None else [conv(f, x) for x in v]
        else:
            v = conv(f, v)
        setattr(obj, f.name, v)
    return obj


def _plain(obj: KafkaStruct) -> dict:
    return obj.to_dict()


# ---- KRaft RPCs against kio ---------------------------------------------------------------

def _rpc_cases():
    for message in KRAFT:
        for version in range(message.versions.lo, message.versions.hi + 1):
            for mode in MODES:
                yield pytest.param(message.kind, message.name, version, mode,
                                   id=f"{message.struct_name}-v{version}-{mode}")


def _codec(kind: str, name: str) -> MessageCodec:
    key = messages.API_KEYS[name]
    return (messages.REQUESTS if kind == "request" else messages.RESPONSES)[key]


@pytest.fixture(scope="module")
def kio_serial():
    pytest.importorskip("kio")
    from kio.serial import entity_reader, entity_writer
    return entity_reader, entity_writer


def test_kraft_schema_defines_every_kraft_api():
    requests = {m.name for m in KRAFT if m.kind == "request"}
    responses = {m.name for m in KRAFT if m.kind == "response"}
    assert requests == responses == set(KRAFT_APIS.values())
    for key, name in KRAFT_APIS.items():
        assert messages.API_KEYS[name] == key
        assert messages.REQUESTS[key].message.versions == messages.RESPONSES[key].message.versions


def test_version_ranges_match_kio(kio_serial):
    """kio knows exactly the versions we define: none missing on either side."""
    for name in KRAFT_APIS.values():
        message = _codec("request", name).message
        ours = set(range(message.versions.lo, message.versions.hi + 1))
        assert kio_versions(name) == ours, name
        for version in ours:
            for kind in ("request", "response"):
                kcls = kio_class(name, kind, version)
                assert kcls.__flexible__ == _codec(kind, name).message.is_flexible(version)
                assert kcls.__api_key__ == messages.API_KEYS[name]


@pytest.mark.parametrize("kind,name,version,mode", list(_rpc_cases()))
def test_ours_to_kio(kio_serial, kind, name, version, mode):
    entity_reader, _ = kio_serial
    codec = _codec(kind, name)
    kcls = kio_class(name, kind, version)
    obj = sample(codec, version, mode, seed=version)
    data = codec.encode(version, obj)
    kobj, size = entity_reader(kcls)(data, 0)
    assert size == len(data)
    back = from_kio(codec.cls, codec.message.root, version, kobj)
    assert _plain(back) == _plain(obj)


@pytest.mark.parametrize("kind,name,version,mode", list(_rpc_cases()))
def test_kio_to_ours(kio_serial, kind, name, version, mode):
    import io
    _, entity_writer = kio_serial
    codec = _codec(kind, name)
    kcls = kio_class(name, kind, version)
    obj = sample(codec, version, mode, seed=100 + version)
    buf = io.BytesIO()
    entity_writer(kcls)(buf, to_kio(kcls, codec.message.root, version, obj))
    data = buf.getvalue()
    assert codec.encode(version, obj) == data
    decoded = codec.decode(version, data)
    assert _plain(decoded) == _plain(obj)


def test_vote_v2_pre_vote_bytes():
    """One Vote v2 request spelled out, so a layout change shows in a readable diff."""
    req = messages.VoteRequest(cluster_id="c", voter_id=2, topics=[
        messages.VoteRequest.TopicData(topic_name="__cluster_metadata", partitions=[
            messages.VoteRequest.TopicData.PartitionData(
                partition_index=0, replica_epoch=5, replica_id=1,
                replica_directory_id=bytes(range(16)), voter_directory_id=bytes(16),
                last_offset_epoch=4, last_offset=100, pre_vote=True)])])
    expected = (
        b"\x02c"                                   # cluster_id: compact string
        b"\x00\x00\x00\x02"                        # voter_id
        b"\x02" b"\x13__cluster_metadata"          # topics: 1; topic_name
        b"\x02"                                    # partitions: 1
        b"\x00\x00\x00\x00" b"\x00\x00\x00\x05" b"\x00\x00\x00\x01"
        + bytes(range(16)) + bytes(16)
        + b"\x00\x00\x00\x04" b"\x00\x00\x00\x00\x00\x00\x00\x64"
        b"\x01"                                    # pre_vote
        b"\x00" b"\x00" b"\x00"                    # tagged fields: partition, topic, request
    )
    assert _codec("request", "Vote").encode(2, req) == expected
    # v1 has no pre_vote; v0 has neither voter_id nor directory ids.
    v1 = _codec("request", "Vote").encode(1, req)
    assert v1 == expected[:-4] + b"\x00\x00\x00"
    v0 = _codec("request", "Vote").encode(0, req)
    assert len(v0) == len(v1) - 4 - 32


# ---- metadata records ---------------------------------------------------------------------

def _record_cases():
    for message in RECORDS:
        for version in range(message.versions.lo, message.versions.hi + 1):
            for mode in MODES:
                yield pytest.param(message.name, version, mode,
                                   id=f"{message.name}-v{version}-{mode}")


@pytest.mark.parametrize("name,version,mode", list(_record_cases()))
def test_record_round_trip(name, version, mode):
    codec = messages.DATA[name]
    obj = sample(codec, version, mode, seed=version)
    data = codec.encode(version, obj)
    decoded = codec.decode(version, data)
    assert _plain(decoded) == _plain(obj)
    assert codec.encode(version, decoded) == data


def test_record_types_are_kafkas():
    typed = [m for m in RECORDS if m.record_type is not None]
    ids = [m.record_type for m in typed]
    assert len(ids) == len(set(ids)), "duplicate record type id"
    assert {m.record_type: m.name for m in typed} == METADATA_RECORD_TYPES
    for type_id, name in METADATA_RECORD_TYPES.items():
        assert messages.RECORDS[type_id].message.name == name
        assert messages.RECORDS[type_id] is messages.DATA[name]
    # Every metadata record version is flexible.
    for m in typed:
        assert m.flexible is not None and m.versions.lo in m.flexible, m.name
    # No other schema file claims a record type.
    assert set(messages.RECORDS) == set(METADATA_RECORD_TYPES)


def test_control_records_have_no_record_type():
    control = {m.name: m for m in RECORDS if m.record_type is None}
    assert set(control) == set(CONTROL_RECORDS.values())
    for m in control.values():
        assert m.root.fields[0].name == "version" and m.root.fields[0].type == "int16"


def frame(type_id: int, version: int, body: bytes) -> bytes:
    """A metadata record value: frame version 1, record type, record version (unsigned
    varints), then the record (see metadata_records.schema)."""
    w = Writer()
    w.uvarint(1)
    w.uvarint(type_id)
    w.uvarint(version)
    return bytes(w.buf) + body


TOPIC_ID = bytes.fromhex("5bd9d0d2c6b94f2e8a0c9b3a1f4e7d21")


def test_golden_topic_record():
    rec = messages.TopicRecord(name="foo", topic_id=TOPIC_ID)
    body = messages.RECORDS[2].encode(0, rec)
    assert body == b"\x04foo" + TOPIC_ID + b"\x00"
    assert frame(2, 0, body) == b"\x01\x02\x00\x04foo" + TOPIC_ID + b"\x00"


def test_golden_partition_change_record_tags():
    codec = messages.RECORDS[5]
    head = b"\x00\x00\x00\x07" + TOPIC_ID
    # Nothing changed: every tagged field at its default is left out.
    assert codec.encode(0, messages.PartitionChangeRecord(partition_id=7, topic_id=TOPIC_ID)) \
        == head + b"\x00"
    # leader=3 (tag 1) and isr=[1, 2] (tag 0), written in tag order whatever the field order.
    rec = messages.PartitionChangeRecord(partition_id=7, topic_id=TOPIC_ID, leader=3, isr=[1, 2])
    assert codec.encode(0, rec) == head + (
        b"\x02"
        b"\x00\x09" b"\x03\x00\x00\x00\x01\x00\x00\x00\x02"
        b"\x01\x04" b"\x00\x00\x00\x03")
    # leader=-1 (no leader) differs from the default -2 (unchanged); an empty ISR differs
    # from null (unchanged). Directories (tag 8) sort after ELR (tags 6, 7) on the wire.
    rec = messages.PartitionChangeRecord(partition_id=7, topic_id=TOPIC_ID, leader=-1, isr=[],
                                         directories=[TOPIC_ID], eligible_leader_replicas=[4])
    assert codec.encode(2, rec) == head + (
        b"\x04"
        b"\x00\x01\x01"
        b"\x01\x04\xff\xff\xff\xff"
        b"\x06\x05\x02\x00\x00\x00\x04"
        b"\x08\x11\x02" + TOPIC_ID)
    # In v0 directories and the ELR fields do not exist: they are not written.
    assert codec.encode(0, rec) == head + b"\x02\x00\x01\x01\x01\x04\xff\xff\xff\xff"


def test_golden_partition_record():
    rec = messages.PartitionRecord(partition_id=0, topic_id=TOPIC_ID, replicas=[1, 2],
                                   isr=[1], leader=1, leader_epoch=0, partition_epoch=0,
                                   directories=[bytes(16), bytes(16)])
    one, two = b"\x00\x00\x00\x01", b"\x00\x00\x00\x02"
    zero = b"\x00\x00\x00\x00"
    v0 = (zero + TOPIC_ID + b"\x03" + one + two + b"\x02" + one + b"\x01" + b"\x01"
          + one + zero + zero + b"\x00")
    assert messages.RECORDS[3].encode(0, rec) == v0
    v1 = v0[:-1] + b"\x03" + bytes(32) + b"\x00"
    assert messages.RECORDS[3].encode(1, rec) == v1
    # leader_recovery_state 1 (RECOVERING) is tag 0; empty ELR (tag 1) differs from null.
    rec.leader_recovery_state = 1
    rec.eligible_leader_replicas = []
    assert messages.RECORDS[3].encode(2, rec) == v1[:-1] + b"\x02\x00\x01\x01\x01\x01\x01"


def test_golden_register_broker_record_v3():
    rec = messages.RegisterBrokerRecord(
        broker_id=1, is_migrating_zk_broker=False, incarnation_id=TOPIC_ID, broker_epoch=10,
        end_points=[messages.RegisterBrokerRecord.BrokerEndpoint(
            name="PLAINTEXT", host="h", port=9092, security_protocol=0)],
        features=[messages.RegisterBrokerRecord.BrokerFeature(
            name="metadata.version", min_supported_version=7, max_supported_version=21)],
        rack=None, fenced=True, in_controlled_shutdown=False, log_dirs=[TOPIC_ID])
    expected = (
        b"\x00\x00\x00\x01" b"\x00" + TOPIC_ID + b"\x00\x00\x00\x00\x00\x00\x00\x0a"
        b"\x02" b"\x0aPLAINTEXT" b"\x02h" b"\x23\x84" b"\x00\x00" b"\x00"
        b"\x02" b"\x11metadata.version" b"\x00\x07" b"\x00\x15" b"\x00"
        b"\x00"                      # rack: null
        b"\x01" b"\x00"              # fenced, in_controlled_shutdown
        b"\x01" b"\x00\x11\x02" + TOPIC_ID)  # log_dirs: tag 0, 17 bytes
    assert messages.RECORDS[0].encode(3, rec) == expected


def test_golden_broker_registration_change_record():
    rec = messages.BrokerRegistrationChangeRecord(broker_id=3, broker_epoch=9, fenced=-1)
    assert messages.RECORDS[17].encode(0, rec) == (
        b"\x00\x00\x00\x03" b"\x00\x00\x00\x00\x00\x00\x00\x09" b"\x01\x00\x01\xff")


def test_golden_small_records():
    assert messages.RECORDS[20].encode(0, messages.NoOpRecord()) == b"\x00"
    assert frame(20, 0, b"\x00") == b"\x01\x14\x00\x00"
    feature = messages.FeatureLevelRecord(name="metadata.version", feature_level=21)
    assert messages.RECORDS[12].encode(0, feature) == b"\x11metadata.version\x00\x15\x00"
    config = messages.ConfigRecord(resource_type=2, resource_name="t", name="retention.ms",
                                   value=None)
    assert messages.RECORDS[4].encode(0, config) == b"\x02\x02t\x0dretention.ms\x00\x00"
    begin = messages.BeginTransactionRecord(name="tx")
    assert messages.RECORDS[23].encode(0, begin) == b"\x01\x00\x03\x03tx"
    assert messages.RECORDS[23].encode(0, messages.BeginTransactionRecord()) == b"\x00"


def test_golden_control_records():
    voters = messages.DATA["VotersRecord"]
    rec = messages.VotersRecord(version=0, voters=[messages.VotersRecord.Voter(
        voter_id=1, voter_directory_id=TOPIC_ID,
        endpoints=[messages.VotersRecord.Voter.Endpoint(name="CONTROLLER", host="h", port=9093)],
        kraft_version_feature=messages.VotersRecord.Voter.KRaftVersionFeature(
            min_supported_version=0, max_supported_version=1))])
    assert voters.encode(0, rec) == (
        b"\x00\x00" b"\x02" b"\x00\x00\x00\x01" + TOPIC_ID
        + b"\x02" b"\x0bCONTROLLER" b"\x02h" b"\x23\x85" b"\x00"
        b"\x00\x00\x00\x01" b"\x00"   # kraft_version_feature and its tagged fields
        b"\x00" b"\x00")              # voter, record tagged fields
    leader = messages.DATA["LeaderChangeMessage"]
    msg = messages.LeaderChangeMessage(
        version=0, leader_id=2,
        voters=[messages.LeaderChangeMessage.Voter(voter_id=i, voter_directory_id=TOPIC_ID)
                for i in (1, 2)],
        granting_voters=[messages.LeaderChangeMessage.Voter(voter_id=2)])
    v0 = (b"\x00\x00" b"\x00\x00\x00\x02"
          b"\x03" b"\x00\x00\x00\x01\x00" b"\x00\x00\x00\x02\x00"
          b"\x02" b"\x00\x00\x00\x02\x00" b"\x00")
    assert leader.encode(0, msg) == v0
    # v1 adds voter_directory_id to every Voter, both lists (one common struct).
    assert len(leader.encode(1, msg)) == len(v0) + 3 * 16
    header = messages.SnapshotHeaderRecord(version=0, last_contained_log_timestamp=1)
    assert messages.DATA["SnapshotHeaderRecord"].encode(0, header) == (
        b"\x00\x00" b"\x00\x00\x00\x00\x00\x00\x00\x01" b"\x00")
    assert messages.DATA["KRaftVersionRecord"].encode(
        0, messages.KRaftVersionRecord(version=0, kraft_version=1)) == b"\x00\x00\x00\x01\x00"
