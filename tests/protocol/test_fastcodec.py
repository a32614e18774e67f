"""protocol.fastcodec (hand-tuned Cython) against the generic codec, which is the reference.

    loaded          the compiled module is what the broker uses (no silent fallback);
    differential    for every version of the schema: randomized values drawn from the schema
                    (nulls, empty and non-ASCII strings, bytes / bytearray / memoryview /
                    file-slice records, size-0 slices, tagged fields at and off their
                    defaults) encode to the same parts: equal bytes, and the same file-slice
                    objects in the same places; Produce requests decode to equal objects;
    shared classes  behaviour both implementations must have, run against each: records
                    alias the request buffer, every truncation and random corruption is a
                    ProtocolError (or the same result), unknown tagged fields are skipped,
                    non-nullable nulls are refused.

Seeds are fixed per (version, case); a failure names both. The replica fetch path (Fetch
requests both ways, Fetch response decode) is in test_fastcodec_fetch.py, Produce responses
in test_fastcodec_produce.py.
"""
from __future__ import annotations

import os
import random

import pytest

from protocol import dispatch, fastcodec, headers, messages
from protocol.codec import KafkaStruct, MessageCodec
from protocol.schema import Field, Struct
from protocol.types import ProtocolError, Reader, Writer

PRODUCE = messages.REQUESTS[0]
FETCH = messages.RESPONSES[1]
METADATA = messages.RESPONSES[3]
SEEDS = 50


class Slice:
    """A stand-in for engine.segment.FileSlice: not a buffer, has a size."""

    def __init__(self, size: int):
        self.size = size

    def __repr__(self) -> str:
        return f"Slice({self.size})"


def versions(codec: MessageCodec) -> list[int]:
    return list(range(codec.message.versions.lo, codec.message.versions.hi + 1))


# ---- the compiled module is live ----------------------------------------------------------

def test_compiled_module_loaded():
    assert fastcodec.__file__.endswith(".so"), fastcodec.__file__
    assert headers.FAST_CODEC is True
    assert headers.FAST_DECODERS == {0: fastcodec.decode_produce_request,
                                     1: fastcodec.decode_fetch_request}
    assert headers.FAST_ENCODERS == {0: fastcodec.encode_produce_response,
                                     1: fastcodec.encode_fetch_response,
                                     3: fastcodec.encode_metadata_response}
    assert dispatch.decode_request is headers.decode_request


def test_versions_are_the_schemas():
    for codec, served in ((PRODUCE, fastcodec.PRODUCE_VERSIONS), (FETCH, fastcodec.FETCH_VERSIONS),
                          (METADATA, fastcodec.METADATA_VERSIONS)):
        assert served == (codec.message.versions.lo, codec.message.versions.hi)
    # and cover what the broker serves: Produce 3-12, Fetch 4-16, Metadata 0-12
    for served, (lo, hi) in (((3, 12), fastcodec.PRODUCE_VERSIONS), ((4, 16), fastcodec.FETCH_VERSIONS),
                             ((0, 12), fastcodec.METADATA_VERSIONS)):
        assert lo <= served[0] and served[1] <= hi


@pytest.mark.parametrize("bad", [-1, 2, 14])
def test_produce_version_outside_the_schema(bad):
    with pytest.raises(ProtocolError):
        fastcodec.decode_produce_request(bad, b"")
    with pytest.raises(ProtocolError):
        PRODUCE.decode(bad, b"")


@pytest.mark.parametrize("fn,bad", [(fastcodec.encode_fetch_response, 3),
                                    (fastcodec.encode_fetch_response, 19),
                                    (fastcodec.encode_metadata_response, 14)])
def test_response_version_outside_the_schema(fn, bad):
    with pytest.raises(ProtocolError):
        fn(bad, 1, object())


# ---- random values drawn from the schema --------------------------------------------------

INT_RANGES = {"int8": 7, "int16": 15, "int32": 31, "int64": 63}


class RandomSampler:
    """A random struct for one version. ``records`` picks the kinds of records values."""

    def __init__(self, codec: MessageCodec, version: int, rng: random.Random,
                 records: tuple[str, ...] = ("bytes", "bytearray", "memoryview", "slice", "empty")):
        self.codec = codec
        self.version = version
        self.rng = rng
        self.records = records

    def build(self) -> KafkaStruct:
        return self.struct(self.codec.message.root)

    def struct(self, struct: Struct) -> KafkaStruct:
        cls = self.codec.classes[id(struct)]
        return cls(**{f.name: self.field(f) for f in struct.fields if self.version in f.versions})

    def field(self, f: Field):
        rng = self.rng
        if f.nullable is not None and self.version in f.nullable and rng.random() < 0.15:
            return None
        if f.tag is not None:  # tagged: often at its default (then not on the wire)
            roll = rng.random()
            if roll < 0.2:
                return None
            single_struct = f.struct is not None and not f.is_array
            if roll < 0.5:
                return self.codec.classes[id(f.struct)]() if single_struct else f.default_value()
            if roll < 0.65 and single_struct:  # the default but for one field
                value = self.codec.classes[id(f.struct)]()
                g = rng.choice(f.struct.fields)
                setattr(value, g.name, self.element(g))
                return value
        if f.is_array:
            return [self.element(f) for _ in range(rng.choice((0, 1, 1, 2, 3)))]
        return self.element(f)

    def element(self, f: Field):
        rng = self.rng
        if f.struct is not None:
            return self.struct(f.struct)
        base = f.element
        if base in INT_RANGES:
            lo, hi = -(1 << INT_RANGES[base]), (1 << INT_RANGES[base]) - 1
            return rng.choice((0, -1, 1, lo, hi, rng.randint(lo, hi)))
        if base == "bool":
            return rng.random() < 0.5
        if base == "string":
            return rng.choice(("", "orders", "tøpic-é", "x" * rng.randint(0, 300), "日本語"))
        if base == "uuid":
            return rng.choice((bytes(16), rng.randbytes(16)))
        if base == "records":
            kind = rng.choice(self.records)
            data = rng.randbytes(rng.randint(0, 200))
            return {"bytes": data, "bytearray": bytearray(data), "memoryview": memoryview(data),
                    "slice": Slice(rng.randint(1, 1 << 20)), "empty": rng.choice((b"", Slice(0)))}[kind]
        raise AssertionError(f"no random value for {f.type}")


def same_parts(fast: list, generic: list) -> None:
    assert len(fast) == len(generic), (fast, generic)
    for i, (a, b) in enumerate(zip(fast, generic)):
        if isinstance(b, bytes):
            assert type(a) is bytes, (i, a)
            at = next((j for j in range(min(len(a), len(b))) if a[j] != b[j]), min(len(a), len(b)))
            assert a == b, f"part {i} differs from byte {at}"
        else:
            assert a is b, (i, a, b)


def generic_fetch(version, correlation_id, body):
    return headers.encode_response_generic(1, version, correlation_id, body)


def generic_metadata(version, correlation_id, body):
    return headers.encode_response_generic(3, version, correlation_id, body)


# ---- Fetch and Metadata responses: differential -------------------------------------------

def bench_fetch(partitions: int = 100):
    R = messages.FetchResponse
    return R(session_id=0, responses=[R.FetchableTopicResponse(topic="orders", partitions=[
        R.PartitionData(partition_index=i, high_watermark=1000, last_stable_offset=1000,
                        log_start_offset=0, records=Slice(65536))
        for i in range(partitions)])])


def bench_metadata(topics: int = 100, partitions: int = 10):
    R = messages.MetadataResponse
    return R(brokers=[R.MetadataResponseBroker(node_id=i, host=f"broker-{i}", port=9092) for i in range(3)],
             cluster_id="c", controller_id=1, topics=[
        R.MetadataResponseTopic(name=f"topic-{t}", topic_id=os.urandom(16), partitions=[
            R.MetadataResponsePartition(partition_index=p, leader_id=p % 3, leader_epoch=1,
                                        replica_nodes=[0, 1, 2], isr_nodes=[0, 1, 2])
            for p in range(partitions)])
        for t in range(topics)])


@pytest.mark.parametrize("version", versions(FETCH))
def test_fetch_differential(version):
    body = bench_fetch()
    same_parts(fastcodec.encode_fetch_response(version, 7, body), generic_fetch(version, 7, body))
    body = bench_fetch(3)
    for p in body.responses[0].partitions:
        p.records = b"inline"
    same_parts(fastcodec.encode_fetch_response(version, -5, body), generic_fetch(version, -5, body))
    for seed in range(SEEDS):
        body = RandomSampler(FETCH, version, random.Random(f"fetch-{version}-{seed}")).build()
        try:
            expected = generic_fetch(version, seed, body)
        except (ValueError, OverflowError):
            with pytest.raises((ValueError, OverflowError)):
                fastcodec.encode_fetch_response(version, seed, body)
            continue
        same_parts(fastcodec.encode_fetch_response(version, seed, body), expected)


@pytest.mark.parametrize("version", versions(METADATA))
def test_metadata_differential(version):
    body = bench_metadata(5, 3)
    same_parts(fastcodec.encode_metadata_response(version, 7, body), generic_metadata(version, 7, body))
    for seed in range(SEEDS):
        body = RandomSampler(METADATA, version, random.Random(f"metadata-{version}-{seed}")).build()
        try:
            expected = generic_metadata(version, seed, body)
        except (ValueError, OverflowError):
            with pytest.raises((ValueError, OverflowError)):
                fastcodec.encode_metadata_response(version, seed, body)
            continue
        same_parts(fastcodec.encode_metadata_response(version, seed, body), expected)


def test_fetch_tagged_fields_follow_the_generic_defaults():
    R = messages.FetchResponse
    P = R.PartitionData
    cases = [
        {}, {"diverging_epoch": P.EpochEndOffset(epoch=3)},
        {"current_leader": P.LeaderIdAndEpoch(leader_id=2)},
        {"snapshot_id": P.SnapshotId(end_offset=9, epoch=1)}, {"diverging_epoch": None},
        {"current_leader": P.LeaderIdAndEpoch(leader_id=-1, leader_epoch=-1)},  # == default: omitted
        {"current_leader": P.LeaderIdAndEpoch(leader_id=-1.0, leader_epoch=-1)},  # -1.0 == -1: omitted
    ]
    for extra in cases:
        body = R(responses=[R.FetchableTopicResponse(topic="t", partitions=[P(records=None, **extra)])],
                 node_endpoints=[R.NodeEndpoint(node_id=1, host="h" * 200, port=9092, rack=None)])
        for version in versions(FETCH):
            same_parts(fastcodec.encode_fetch_response(version, 1, body), generic_fetch(version, 1, body))
    partition = P(records=None)
    del partition.current_leader  # an unset tagged field reads as None: omitted
    body = R(responses=[R.FetchableTopicResponse(topic="t", partitions=[partition])])
    same_parts(fastcodec.encode_fetch_response(12, 1, body), generic_fetch(12, 1, body))


def test_fetch_parts_frame_size_covers_slices():
    parts = fastcodec.encode_fetch_response(11, 9, bench_fetch(4))
    size = sum(len(p) if isinstance(p, bytes) else p.size for p in parts) - 4
    assert int.from_bytes(parts[0][:4], "big") == size
    assert [type(p) for p in parts] == [bytes, Slice] * 4  # v11 ends on the last records
    parts = fastcodec.encode_fetch_response(12, 9, bench_fetch(4))
    assert [type(p) for p in parts] == [bytes, Slice] * 4 + [bytes]  # tag sections follow


def test_duck_typed_bodies_take_the_getattr_path():
    class Partition:  # not the generated class: no slot shortcut
        def __init__(self, **kw):
            src = messages.FetchResponse.PartitionData(**kw)
            for name in src._fields:
                setattr(self, name, getattr(src, name))

    R = messages.FetchResponse
    body = R(responses=[R.FetchableTopicResponse(topic="t", partitions=[
        Partition(partition_index=3, records=Slice(10)), Partition(records=b"abc")])])
    for version in versions(FETCH):
        same_parts(fastcodec.encode_fetch_response(version, 1, body), generic_fetch(version, 1, body))


# ---- behaviour shared by both encoders ----------------------------------------------------

@pytest.fixture(params=["generic", "fast"])
def encoders(request):
    if request.param == "fast":
        return fastcodec.encode_fetch_response, fastcodec.encode_metadata_response
    return generic_fetch, generic_metadata


class TestEncoders:
    def test_non_nullable_nulls_are_refused(self, encoders):
        fetch, metadata = encoders
        R = messages.FetchResponse
        with pytest.raises(ValueError, match="not nullable"):
            fetch(12, 1, R(responses=None))
        with pytest.raises(ValueError, match="not nullable"):
            fetch(11, 1, R(responses=[R.FetchableTopicResponse(topic=None)]))
        M = messages.MetadataResponse
        with pytest.raises(ValueError, match="not nullable"):
            metadata(11, 1, M(topics=[M.MetadataResponseTopic(name=None)]))
        metadata(12, 1, M(topics=[M.MetadataResponseTopic(name=None)]))  # nullable from v12

    def test_out_of_range_values_are_refused(self, encoders):
        fetch, metadata = encoders
        R = messages.FetchResponse
        with pytest.raises(Exception):  # noqa: B017 - struct.error (generic), OverflowError (fast)
            fetch(12, 1, R(throttle_time_ms=1 << 31))
        M = messages.MetadataResponse
        with pytest.raises(ValueError, match="uuid must be 16 bytes"):
            metadata(12, 1, M(topics=[M.MetadataResponseTopic(name="t", topic_id=b"short")]))

    def test_metadata_is_one_part(self, encoders):
        _, metadata = encoders
        parts = metadata(12, 7, bench_metadata(2, 2))
        assert len(parts) == 1 and int.from_bytes(parts[0][:4], "big") == len(parts[0]) - 4


# ---- Produce requests ---------------------------------------------------------------------

def produce_body(version: int, rng: random.Random):
    return RandomSampler(PRODUCE, version, rng, records=("bytes",)).build()


def generic_decode(version, buf, pos=0):
    return PRODUCE.decode(version, Reader(buf, pos))


@pytest.fixture(params=["generic", "fast"])
def decode(request):
    return fastcodec.decode_produce_request if request.param == "fast" else generic_decode


def outcome(fn, version, buf, pos=0):
    try:
        return fn(version, buf, pos).to_dict()
    except ProtocolError:
        return ProtocolError


@pytest.mark.parametrize("version", versions(PRODUCE))
def test_produce_differential(version):
    for seed in range(SEEDS):
        rng = random.Random(f"produce-{version}-{seed}")
        body = produce_body(version, rng)
        prefix = rng.randbytes(rng.choice((0, 0, 3, 17)))
        buf = prefix + PRODUCE.encode(version, body)
        fast = fastcodec.decode_produce_request(version, buf, len(prefix))
        assert type(fast) is messages.ProduceRequest
        assert fast.to_dict() == generic_decode(version, buf, len(prefix)).to_dict()
        assert fast == generic_decode(version, buf, len(prefix))
        r = Reader(buf + b"tail", len(prefix))  # from a Reader: left where the body ends
        assert fastcodec.decode_produce_request(version, r) == fast and r.pos == len(buf)
        for topic in fast.topic_data:
            assert type(topic) is messages.ProduceRequest.TopicProduceData
            for partition in topic.partition_data:
                assert type(partition) is messages.ProduceRequest.PartitionProduceData
                assert partition.records is None or type(partition.records) is memoryview
        # corruption: the same result, or ProtocolError from both
        for _ in range(20):
            bad = bytearray(buf)
            for _ in range(rng.randint(1, 3)):
                at = rng.randrange(len(prefix), len(bad))
                bad[at] = rng.choice((0, 0x7F, 0x80, 0xFF, rng.randrange(256)))
            assert outcome(fastcodec.decode_produce_request, version, bad, len(prefix)) == \
                outcome(generic_decode, version, bad, len(prefix))


def write_tags(w: Writer, rng: random.Random) -> None:
    tags = sorted(rng.sample(range(1, 300), rng.randint(0, 3)))
    w.uvarint(len(tags))
    for tag in tags:
        data = rng.randbytes(rng.randint(0, 140))
        w.uvarint(tag)
        w.uvarint(len(data))
        w.raw(data)


def flexible_produce_with_unknown_tags(version: int, rng: random.Random) -> tuple[bytes, list]:
    """A flexible Produce body written by hand, with unknown tagged fields everywhere but
    the root's tag section, which the caller appends."""
    w = Writer()
    w.uvarint(len(b"txn") + 1)
    w.raw(b"txn")
    w.int16(-1)
    w.int32(1500)
    expected = []
    w.uvarint(3)
    for t in range(2):
        if version >= 13:
            w.raw(bytes([t]) * 16)
        else:
            w.uvarint(len(f"topic-{t}") + 1)
            w.raw(f"topic-{t}".encode())
        w.uvarint(3)
        for p in range(2):
            records = rng.randbytes(rng.randint(0, 50))
            expected.append(records)
            w.int32(p)
            w.uvarint(len(records) + 1)
            w.raw(records)
            write_tags(w, rng)
        write_tags(w, rng)
    return bytes(w.buf), expected


class TestProduceDecode:
    """Run against the generic decoder and fastcodec alike."""

    def test_records_alias_a_writable_buffer(self, decode):
        rng = random.Random(1)
        body = messages.ProduceRequest(acks=-1, timeout_ms=5, topic_data=[
            messages.ProduceRequest.TopicProduceData(name="t", partition_data=[
                messages.ProduceRequest.PartitionProduceData(index=0, records=rng.randbytes(64))])])
        for version in versions(PRODUCE):
            buf = bytearray(PRODUCE.encode(version, body))
            records = decode(version, buf).topic_data[0].partition_data[0].records
            assert isinstance(records, memoryview) and not records.readonly
            records[0:8] = b"\x01" * 8  # the broker assigns base offsets in place
            assert bytes(records[:8]) == b"\x01" * 8
            at = bytes(buf).index(b"\x01" * 8)
            buf[at + 8] ^= 0xFF  # and a write to the buffer shows through the view
            assert records[8] == buf[at + 8]
            shifted = memoryview(bytearray(b"xy") + buf)[1:]  # a view that does not start at 0
            records = decode(version, shifted, 1).topic_data[0].partition_data[0].records
            records[0] = 0x42
            assert shifted.obj[at + 2] == 0x42
            frozen = decode(version, bytes(buf)).topic_data[0].partition_data[0].records
            assert frozen.readonly

    def test_every_truncation_is_a_protocol_error(self, decode):
        for version in versions(PRODUCE):
            buf = PRODUCE.encode(version, produce_body(version, random.Random(version)))
            decode(version, buf)
            for cut in range(len(buf)):
                with pytest.raises(ProtocolError):
                    decode(version, memoryview(buf)[:cut])

    def test_unknown_tagged_fields_are_skipped(self, decode):
        for version in [v for v in versions(PRODUCE) if PRODUCE.message.is_flexible(v)]:
            for seed in range(5):
                rng = random.Random(seed)
                body, expected = flexible_produce_with_unknown_tags(version, rng)
                root = Writer()
                write_tags(root, rng)
                request = decode(version, body + root.buf)
                assert request.transactional_id == "txn" and request.timeout_ms == 1500
                got = [bytes(p.records) for t in request.topic_data for p in t.partition_data]
                assert got == expected
                names = [t.name for t in request.topic_data]
                assert names == (["", ""] if version >= 13 else ["topic-0", "topic-1"])
                with pytest.raises(ProtocolError):  # a root tag claiming more bytes than there are
                    decode(version, body + b"\x01\x05\x7f" + bytes(126))

    def test_nulls_decode_as_none(self, decode):
        R = messages.ProduceRequest
        body = R(transactional_id=None, acks=1, timeout_ms=0, topic_data=[
            R.TopicProduceData(name="t", partition_data=[R.PartitionProduceData(index=4, records=None)])])
        for version in versions(PRODUCE):
            request = decode(version, PRODUCE.encode(version, body))
            assert request.topic_data[0].partition_data[0].records is None
            assert request.transactional_id is None
        # a null array where the schema allows none is refused at parse time (as Kafka does)
        with pytest.raises(ProtocolError, match="non-nullable field topic_data"):
            decode(9, b"\x00\x00\x01\x00\x00\x00\x05\x00\x00")
        with pytest.raises(ProtocolError, match="non-nullable field topic_data"):
            decode(8, b"\xff\xff\x00\x01\x00\x00\x00\x05\xff\xff\xff\xff")

    def test_malformed_lengths(self, decode):
        with pytest.raises(ProtocolError):  # string length -2
            decode(8, b"\xff\xfe")
        with pytest.raises(ProtocolError):  # a 6-byte varint
            decode(9, b"\x80\x80\x80\x80\x80\x01")
        with pytest.raises(ProtocolError):  # invalid UTF-8 transactional id
            decode(9, b"\x03\xff\xfe")
        with pytest.raises(ProtocolError):  # an array longer than the bytes left
            decode(8, b"\xff\xff\x00\x01\x00\x00\x00\x05\x00\x00\x10\x00")


def test_decode_request_routes_produce_to_fastcodec():
    body = messages.ProduceRequest(acks=1, timeout_ms=5, topic_data=[])
    frame = headers.encode_request(0, 9, 42, "client", body)
    r = Reader(memoryview(bytearray(frame))[4:])
    header = headers.read_request_header(r)
    body_at = r.pos
    request = headers.decode_request(header.api_key, header.api_version, r)
    assert request == generic_decode(9, r.buf, body_at)
    assert r.pos == r.end  # the reader is left where the body ends, as the generic leaves it
    r = Reader(bytearray(frame + b"\x00" * 7), 4, len(frame))  # a reader that stops short of its buffer
    header = headers.read_request_header(r)
    assert headers.decode_request(0, 9, r) == request and r.pos == len(frame)


def test_encode_response_routes_to_fastcodec(monkeypatch):
    calls = []
    monkeypatch.setitem(headers.FAST_ENCODERS, 1, lambda *a: calls.append(a) or [b"x"])
    assert headers.encode_response(1, 12, 3, "body") == [b"x"] and calls == [(12, 3, "body")]


def test_frame_buffer_is_a_writable_bytearray_of_the_size_asked_and_refuses_a_negative_size():
    from protocol.fastcodec import frame_buffer
    buf = frame_buffer(1 << 20)
    assert type(buf) is bytearray and len(buf) == 1 << 20
    buf[:] = b"\x07" * (1 << 20)
    assert buf.count(7) == 1 << 20
    assert frame_buffer(0) == bytearray()
    with pytest.raises(ValueError, match="negative"):
        frame_buffer(-1)


# ---- request headers ----------------------------------------------------------------------

def _header_outcome(read, frame: bytes, start: int = 0, end: int | None = None):
    r = Reader(bytearray(frame), start, end)
    try:
        return read(r, "LISTENER"), r.pos
    except ProtocolError:
        return "ProtocolError"


def _header_frames(rng: random.Random) -> list[bytes]:
    frames = []
    for api_key in (0, 1, 3, 18, 60, 32767, -1):
        for api_version in (0, 3, 9, 12, 13):
            w = Writer()
            w.int16(api_key)
            w.int16(api_version)
            w.int32(rng.randrange(-2**31, 2**31))
            client = rng.choice([None, "", "rdkafka", "kłient-ü", "x" * 300])
            if client is None:
                w.int16(-1)
            else:
                w.int16(len(client.encode()))
                w.raw(client.encode())
            tags = rng.choice([[], [(0, b"")], [(1, b"ab"), (7, bytes(200))]])
            w.uvarint(len(tags))
            for tag, value in tags:
                w.uvarint(tag)
                w.uvarint(len(value))
                w.raw(value)
            w.raw(bytes(rng.randrange(0, 20)))  # the body
            frames.append(bytes(w.buf))
    return frames


def test_request_headers_read_as_the_generic_reader_reads_them():
    """Every API key (unknown ones too), flexible or not, null, empty and non-ASCII client
    ids, tag sections; then every truncation and random corruption: the same header and
    position, or a ProtocolError from both."""
    rng = random.Random(1)
    fast = headers.read_request_header
    generic = headers.read_request_header_generic
    for frame in _header_frames(rng):
        expected = _header_outcome(generic, frame)
        assert expected != "ProtocolError"
        assert _header_outcome(fast, frame) == expected
        shifted = b"\x00" * 3 + frame
        assert _header_outcome(fast, shifted, 3) == _header_outcome(generic, shifted, 3)
        for cut in range(len(frame)):
            expected = _header_outcome(generic, frame, 0, cut)
            assert _header_outcome(fast, frame, 0, cut) == expected, (frame, cut)
        for _ in range(30):
            bad = bytearray(frame)
            bad[rng.randrange(min(len(bad), 16))] = rng.randrange(256)
            assert _header_outcome(fast, bytes(bad)) == _header_outcome(generic, bytes(bad)), bytes(bad)
    bad_utf8 = b"\x00\x00\x00\x09\x00\x00\x00\x01\x00\x02\xff\xfe"
    assert _header_outcome(fast, bad_utf8) == _header_outcome(generic, bad_utf8)
    assert _header_outcome(fast, bad_utf8) == "ProtocolError"
    with pytest.raises(ProtocolError, match="negative client id length -2"):
        fast(Reader(b"\x00\x00\x00\x09\x00\x00\x00\x01\xff\xfe"))
