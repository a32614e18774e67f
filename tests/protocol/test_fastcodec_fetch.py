"""protocol.fastcodec's replica fetch path against the generic codec, which is the reference.

    Fetch request decode    for every version: randomized requests (nulls, tagged fields at
                            and off their defaults, empty and several topics / partitions /
                            forgotten topics) decode to equal objects of the same classes;
                            random corruption gives the same result or ProtocolError from both.
    Fetch request encode    for every version: the whole frame (size, header v1/v2 with
                            null, empty, non-ASCII client ids; body) is byte-identical to
                            headers.encode_request_generic, tagged fields at and off defaults.
    shared classes          behaviour both implementations must have, run against each: every
                            truncation is a ProtocolError, unknown tagged fields (written by a
                            copy of the schema with extra tags in every struct) are skipped,
                            a known tag read past its size is refused, absent fields default,
                            non-nullable nulls and out-of-range values are refused.

Seeds are fixed per (version, case); a failure names both. The helpers (RandomSampler,
versions) are test_fastcodec's.
"""
from __future__ import annotations

import copy
import random

import pytest

from protocol import fastcodec, headers, messages
from protocol.codec import MessageCodec
from protocol.schema import Field, Versions
from protocol.types import ProtocolError, Reader, Writer
from tests.protocol.test_fastcodec import SEEDS, RandomSampler, versions

FETCH_REQUEST = messages.REQUESTS[1]
R = messages.FetchRequest


def with_unknown_tags(codec: MessageCodec, extra: dict[str, list[tuple[str, int, str]]]) -> MessageCodec:
    """A codec for a copy of codec's message whose structs (by name) carry extra tagged
    ``records`` fields: (name, tag, versions). What it writes, the real schema does not know."""
    message = copy.deepcopy(codec.message)
    structs, todo = {}, [message.root]
    while todo:
        struct = todo.pop()
        structs[struct.name] = struct
        todo.extend(f.struct for f in struct.fields if f.struct is not None)
    for name, fields in extra.items():
        for field_name, tag, vers in fields:
            structs[name].fields.append(Field(field_name, "records", versions=Versions.parse(vers),
                                              nullable=Versions.parse("0+"), tag=tag))
    return MessageCodec(message)


# Tags the real schema does not know in these versions: tag 1 at the root before
# replica_state (15+), tags 0 and 1 of a partition before replica_directory_id (17+) and
# high_watermark (18+), and a high tag in every struct.
NOISY_FETCH_REQUEST = with_unknown_tags(FETCH_REQUEST, {
    "FetchRequest": [("x_state", 1, "12-14"), ("x_root", 9, "12+")],
    "ReplicaState": [("x_replica", 4, "15+")],
    "FetchTopic": [("x_topic", 3, "12+")],
    "FetchPartition": [("x_dir", 0, "12-16"), ("x_hw", 1, "12-17"), ("x_partition", 130, "12+")],
    "ForgottenTopic": [("x_forgotten", 2, "12+")],
})


def fetch_request_body(version: int, rng: random.Random):
    return RandomSampler(FETCH_REQUEST, version, rng).build()


def generic_request(version, buf, pos=0):
    return FETCH_REQUEST.decode(version, Reader(buf, pos))


def outcome(fn, version, buf, pos=0):
    try:
        return fn(version, buf, pos).to_dict()
    except ProtocolError:
        return ProtocolError


def replica_fetch(version: int = 17):
    """What a follower sends: one topic, one partition."""
    return R(replica_id=2, replica_state=R.ReplicaState(replica_id=2, replica_epoch=5), max_wait_ms=500,
             min_bytes=1, max_bytes=10 << 20, topics=[R.FetchTopic(
                 topic="orders", topic_id=b"\x01" * 16, partitions=[R.FetchPartition(
                     partition=0, current_leader_epoch=3, fetch_offset=123456, last_fetched_epoch=3,
                     log_start_offset=0, partition_max_bytes=1 << 20,
                     replica_directory_id=b"\x02" * 16, high_watermark=99)])])


def test_fetch_request_versions_are_the_schemas():
    versions_ = FETCH_REQUEST.message.versions
    assert fastcodec.FETCH_REQUEST_VERSIONS == (versions_.lo, versions_.hi)


@pytest.mark.parametrize("bad", [3, 19])
def test_fetch_request_version_outside_the_schema(bad):
    with pytest.raises(ProtocolError):
        fastcodec.decode_fetch_request(bad, b"")


@pytest.mark.parametrize("version", versions(FETCH_REQUEST))
def test_fetch_request_decode_differential(version):
    for seed in range(SEEDS):
        rng = random.Random(f"fetch-request-{version}-{seed}")
        body = fetch_request_body(version, rng)
        prefix = rng.randbytes(rng.choice((0, 0, 3, 17)))
        buf = prefix + FETCH_REQUEST.encode(version, body)
        fast = fastcodec.decode_fetch_request(version, buf, len(prefix))
        generic = generic_request(version, buf, len(prefix))
        assert type(fast) is R
        assert fast.to_dict() == generic.to_dict()
        assert fast == generic
        r = Reader(buf + b"tail", len(prefix))  # from a Reader: left where the body ends
        assert fastcodec.decode_fetch_request(version, r) == generic and r.pos == len(buf)
        assert type(fast.replica_state) is R.ReplicaState
        for topic in fast.topics:
            assert type(topic) is R.FetchTopic
            assert all(type(p) is R.FetchPartition for p in topic.partitions)
        for topic in fast.forgotten_topics_data:
            assert type(topic) is R.ForgottenTopic
        for _ in range(20):  # corruption: the same result, or ProtocolError from both
            bad = bytearray(buf)
            for _ in range(rng.randint(1, 3)):
                at = rng.randrange(len(prefix), len(bad))
                bad[at] = rng.choice((0, 0x7F, 0x80, 0xFF, rng.randrange(256)))
            assert outcome(fastcodec.decode_fetch_request, version, bad, len(prefix)) == \
                outcome(generic_request, version, bad, len(prefix))


def test_replica_fetch_request_decodes_every_field():
    for version in versions(FETCH_REQUEST):
        body = replica_fetch()
        request = fastcodec.decode_fetch_request(version, FETCH_REQUEST.encode(version, body))
        assert request == generic_request(version, FETCH_REQUEST.encode(version, body))
        partition = request.topics[0].partitions[0]
        assert (partition.fetch_offset, partition.partition_max_bytes) == (123456, 1 << 20)
        assert request.replica_state == (body.replica_state if version >= 15 else R.ReplicaState())
        assert request.replica_id == (2 if version <= 14 else -1)
        assert partition.replica_directory_id == (b"\x02" * 16 if version >= 17 else bytes(16))
        assert partition.high_watermark == (99 if version >= 18 else (1 << 63) - 1)
        assert request.topics[0].topic == ("orders" if version <= 12 else "")
        assert request.topics[0].topic_id == (bytes(16) if version <= 12 else b"\x01" * 16)


@pytest.fixture(params=["generic", "fast"])
def decode(request):
    return fastcodec.decode_fetch_request if request.param == "fast" else generic_request


class TestFetchRequestDecode:
    """Run against the generic decoder and fastcodec alike."""

    def test_every_truncation_is_a_protocol_error(self, decode):
        for version in versions(FETCH_REQUEST):
            for body in (replica_fetch(), fetch_request_body(version, random.Random(version))):
                buf = FETCH_REQUEST.encode(version, body)
                decode(version, buf)
                for cut in range(len(buf)):
                    with pytest.raises(ProtocolError):
                        decode(version, memoryview(buf)[:cut])

    def test_unknown_tagged_fields_are_skipped(self, decode):
        for version in [v for v in versions(FETCH_REQUEST) if v >= 12]:
            for seed in range(SEEDS):
                body = RandomSampler(NOISY_FETCH_REQUEST, version,
                                     random.Random(f"noisy-{version}-{seed}"), records=("bytes",)).build()
                noisy = NOISY_FETCH_REQUEST.encode(version, body)
                plain = FETCH_REQUEST.encode(version, body)
                assert decode(version, noisy) == decode(version, plain) == generic_request(version, plain)

    def test_a_known_tag_read_past_its_size_is_refused(self, decode):
        w = Writer()  # v15, every field zero, then the root tags
        w.raw(bytes(21) + b"\x01\x01\x01")  # max_wait..session_epoch, no topics/forgotten, rack ""
        ok = bytes(w.buf)
        state = (7).to_bytes(4, "big") + (9).to_bytes(8, "big") + b"\x00"
        assert decode(15, ok + b"\x01\x01\x0d" + state).replica_state == R.ReplicaState(replica_id=7,
                                                                                         replica_epoch=9)
        assert decode(15, ok + b"\x01\x01\x0e" + state + b"\x55").replica_state.replica_epoch == 9
        with pytest.raises(ProtocolError):  # the value claims 12 bytes, the struct needs 13
            decode(15, ok + b"\x01\x01\x0c" + state)
        with pytest.raises(ProtocolError):  # the value claims more bytes than there are
            decode(15, ok + b"\x01\x01\x0e" + state)
        assert decode(14, bytes(4) + ok + b"\x01\x01\x02\xff\xff").replica_state == R.ReplicaState()
        with pytest.raises(ProtocolError):  # an invalid UTF-8 cluster id
            decode(15, ok + b"\x01\x00\x03\x03\xff\xfe")
        assert decode(15, ok + b"\x02\x00\x01\x00\x00\x03\x03ab").cluster_id == "ab"  # the last wins

    def test_absent_fields_take_their_defaults(self, decode):
        request = decode(4, bytes(17) + b"\x00\x00\x00\x00")
        assert request == R(replica_id=0, max_bytes=0, topics=[])
        assert request.forgotten_topics_data == [] and request.rack_id == ""
        assert request.session_epoch == -1 and request.replica_state == R.ReplicaState()
        assert request.cluster_id is None

    def test_nulls_decode_as_none(self, decode):
        body = R(cluster_id=None, topics=[R.FetchTopic(topic="t", partitions=[])])
        for version in versions(FETCH_REQUEST):
            assert decode(version, FETCH_REQUEST.encode(version, body)).cluster_id is None
        # null arrays where the schema allows none are refused at parse time (as Kafka does)
        with pytest.raises(ProtocolError, match="non-nullable field topics"):
            decode(12, bytes(25) + b"\x00\x00\x01\x00")
        with pytest.raises(ProtocolError, match="non-nullable field topics"):
            decode(11, bytes(25) + b"\xff\xff\xff\xff\x00\x00\x00\x00\x00\x00")
        with pytest.raises(ProtocolError, match="non-nullable field forgotten_topics_data"):
            decode(12, bytes(25) + b"\x01\x00\x01\x00")


# ---- Fetch requests: encode (the whole frame, header included) ---------------------------

CLIENT_IDS = (None, "", "broker-2-fetcher", "fëtcher-日本", "c" * 300)


def generic_frame(version, correlation_id, client_id, body):
    return headers.encode_request_generic(1, version, correlation_id, client_id, body)


@pytest.mark.parametrize("version", versions(FETCH_REQUEST))
def test_fetch_request_encode_differential(version):
    for correlation_id, client_id in zip((7, 0, -1, (1 << 31) - 1, -(1 << 31)), CLIENT_IDS):
        body = replica_fetch()
        assert fastcodec.encode_fetch_request(version, correlation_id, client_id, body) == \
            generic_frame(version, correlation_id, client_id, body)
    for seed in range(SEEDS):
        rng = random.Random(f"fetch-request-encode-{version}-{seed}")
        body = fetch_request_body(version, rng)
        correlation_id, client_id = rng.randint(-(1 << 31), (1 << 31) - 1), rng.choice(CLIENT_IDS)
        try:
            expected = generic_frame(version, correlation_id, client_id, body)
        except (ValueError, OverflowError):
            with pytest.raises((ValueError, OverflowError)):
                fastcodec.encode_fetch_request(version, correlation_id, client_id, body)
            continue
        fast = fastcodec.encode_fetch_request(version, correlation_id, client_id, body)
        assert type(fast) is bytes
        at = next((i for i in range(min(len(fast), len(expected))) if fast[i] != expected[i]), None)
        assert fast == expected, f"differs from byte {at}"
        assert int.from_bytes(fast[:4], "big") == len(fast) - 4


def test_fetch_request_tagged_fields_follow_the_generic_defaults():
    cases = [
        {}, {"cluster_id": ""}, {"cluster_id": "c" * 200}, {"cluster_id": None},
        {"replica_state": R.ReplicaState()}, {"replica_state": None},  # default / None: omitted
        {"replica_state": R.ReplicaState(replica_id=-1.0)},  # -1.0 == -1: omitted
        {"replica_state": R.ReplicaState(replica_epoch=0)},
    ]
    partitions = [
        {}, {"replica_directory_id": bytes(16)}, {"replica_directory_id": bytearray(16)},
        {"replica_directory_id": None}, {"replica_directory_id": b"\x09" * 16},
        {"high_watermark": (1 << 63) - 1}, {"high_watermark": 0}, {"high_watermark": None},
    ]
    for extra in cases:
        for partition in partitions:
            body = R(topics=[R.FetchTopic(topic="t", partitions=[R.FetchPartition(**partition)])], **extra)
            for version in versions(FETCH_REQUEST):
                assert fastcodec.encode_fetch_request(version, 1, "c", body) == \
                    generic_frame(version, 1, "c", body)
    body = R(topics=[R.FetchTopic(topic="t", partitions=[R.FetchPartition()])])
    del body.replica_state, body.topics[0].partitions[0].high_watermark  # unset tags read as None
    assert fastcodec.encode_fetch_request(18, 1, "c", body) == generic_frame(18, 1, "c", body)


@pytest.fixture(params=["generic", "fast"])
def encode(request):
    return fastcodec.encode_fetch_request if request.param == "fast" else generic_frame


class TestFetchRequestEncode:
    """Run against the generic encoder and fastcodec alike."""

    def test_non_nullable_nulls_are_refused(self, encode):
        with pytest.raises(ValueError, match="FetchRequest.topics v12 is not nullable"):
            encode(12, 1, "c", R(topics=None))
        with pytest.raises(ValueError, match="not nullable"):
            encode(11, 1, "c", R(topics=[R.FetchTopic(topic=None)]))
        with pytest.raises(ValueError, match="not nullable"):
            encode(12, 1, "c", R(forgotten_topics_data=[R.ForgottenTopic(topic="t", partitions=None)]))
        with pytest.raises(ValueError, match="not nullable"):
            encode(11, 1, "c", R(rack_id=None))
        encode(6, 1, "c", R(forgotten_topics_data=None, rack_id=None))  # not in v6: not written

    def test_out_of_range_values_are_refused(self, encode):
        with pytest.raises(Exception):  # noqa: B017 - struct.error (generic), OverflowError (fast)
            encode(12, 1, "c", R(isolation_level=128))
        with pytest.raises(Exception):  # noqa: B017
            encode(12, 1, "c", R(max_wait_ms=1 << 31))
        with pytest.raises(ValueError, match="uuid must be 16 bytes"):
            encode(13, 1, "c", R(topics=[R.FetchTopic(topic_id=b"short")]))
        with pytest.raises(ProtocolError):
            encode(19, 1, "c", R())

    def test_the_frame_decodes_back(self, encode):
        for version in versions(FETCH_REQUEST):
            frame = encode(version, 42, "f", replica_fetch())
            r = Reader(frame, 4)
            header = headers.read_request_header(r)
            assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == \
                (1, version, 42, "f")
            assert header.header_version == (2 if version >= 12 else 1)
            assert generic_request(version, frame, r.pos) == fastcodec.decode_fetch_request(
                version, frame, r.pos)


def test_encode_request_routes_fetch_to_fastcodec():
    assert headers.FAST_REQUEST_ENCODERS == {1: fastcodec.encode_fetch_request}
    frame = headers.encode_request(1, 17, 3, "c", replica_fetch())
    assert frame == generic_frame(17, 3, "c", replica_fetch())
    body = messages.ProduceRequest(acks=1, timeout_ms=5, topic_data=[])  # others stay generic
    assert headers.encode_request(0, 9, 3, "c", body) == headers.encode_request_generic(0, 9, 3, "c", body)


def test_decode_request_routes_fetch_to_fastcodec():
    frame = headers.encode_request(1, 17, 42, "broker-2", replica_fetch())
    r = Reader(memoryview(bytearray(frame))[4:])
    header = headers.read_request_header(r)
    body_at = r.pos
    request = headers.decode_request(header.api_key, header.api_version, r)
    assert type(request) is R and request == generic_request(17, r.buf, body_at)
    assert r.pos == r.end  # the reader is left where the body ends, as the generic leaves it
    r = Reader(bytearray(frame + b"\x00" * 7), 4, len(frame))  # a reader that stops short of its buffer
    header = headers.read_request_header(r)
    assert headers.decode_request(1, 17, r) == request and r.pos == len(frame)
    r = Reader(frame, 4, len(frame) - 1)  # and its end is the body's end
    header = headers.read_request_header(r)
    with pytest.raises(ProtocolError):
        headers.decode_request(1, 17, r)


# ---- Fetch responses: decode (the client's side) ------------------------------------------

FETCH_RESPONSE = messages.RESPONSES[1]
F = messages.FetchResponse
P = F.PartitionData

NOISY_FETCH_RESPONSE = with_unknown_tags(FETCH_RESPONSE, {
    "FetchResponse": [("x_endpoints", 0, "12-15"), ("x_root", 5, "12+")],
    "FetchableTopicResponse": [("x_topic", 1, "12+")],
    "PartitionData": [("x_partition", 3, "12+"), ("x_far", 200, "12+")],
    "EpochEndOffset": [("x_epoch", 0, "12+")],
    "LeaderIdAndEpoch": [("x_leader", 7, "12+")],
    "SnapshotId": [("x_snapshot", 1, "12+")],
    "AbortedTransaction": [("x_txn", 0, "12+")],
    "NodeEndpoint": [("x_node", 2, "16+")],
})


def fetch_response_body(version: int, rng: random.Random, codec: MessageCodec = FETCH_RESPONSE):
    return RandomSampler(codec, version, rng, records=("bytes", "bytearray", "memoryview")).build()


def generic_response(version, buf, pos=0):
    return FETCH_RESPONSE.decode(version, Reader(buf, pos))


def records_alias(response, buf) -> None:
    """Every records value is a memoryview of buf's own memory, not a copy."""
    base = memoryview(buf)
    for topic in response.responses:
        for partition in topic.partitions:
            records = partition.records
            if records is None:
                continue
            assert type(records) is memoryview and records.readonly == base.readonly
            assert records.obj is base.obj


def small_fetch_response():
    """What a follower gets back under acks=all: one topic, one partition, one small batch."""
    return F(throttle_time_ms=0, session_id=0, responses=[F.FetchableTopicResponse(
        topic="orders", topic_id=b"\x01" * 16, partitions=[P(
            partition_index=0, high_watermark=123457, last_stable_offset=123457, log_start_offset=0,
            current_leader=P.LeaderIdAndEpoch(leader_id=1, leader_epoch=3), records=b"r" * 161)])])


@pytest.mark.parametrize("version", versions(FETCH_RESPONSE))
def test_fetch_response_decode_differential(version):
    for seed in range(SEEDS):
        rng = random.Random(f"fetch-response-{version}-{seed}")
        body = fetch_response_body(version, rng)
        prefix = rng.randbytes(rng.choice((0, 0, 3, 17)))
        buf = prefix + FETCH_RESPONSE.encode(version, body)
        for frame in (memoryview(buf).toreadonly(), bytearray(buf)):
            fast = fastcodec.decode_fetch_response(version, frame, len(prefix))
            generic = generic_response(version, frame, len(prefix))
            assert type(fast) is F
            assert fast.to_dict() == generic.to_dict()
            assert fast == generic
            r = Reader(frame, len(prefix))  # from a Reader: left where the body ends
            assert fastcodec.decode_fetch_response(version, r) == generic and r.pos == len(buf)
            for decoder in (fastcodec.decode_fetch_response, FETCH_RESPONSE.decode):
                with pytest.raises(ProtocolError):  # a Reader's end is the body's end
                    decoder(version, Reader(frame, len(prefix), len(buf) - 1))
            records_alias(fast, frame)
            for topic in fast.responses:
                assert type(topic) is F.FetchableTopicResponse
                for p in topic.partitions:
                    assert type(p) is P
                    assert (type(p.diverging_epoch), type(p.current_leader), type(p.snapshot_id)) == \
                        (P.EpochEndOffset, P.LeaderIdAndEpoch, P.SnapshotId)
            assert all(type(node) is F.NodeEndpoint for node in fast.node_endpoints)
        for _ in range(20):  # corruption: the same result, or ProtocolError from both
            bad = bytearray(buf)
            for _ in range(rng.randint(1, 3)):
                at = rng.randrange(len(prefix), len(bad))
                bad[at] = rng.choice((0, 0x7F, 0x80, 0xFF, rng.randrange(256)))
            assert outcome(fastcodec.decode_fetch_response, version, bad, len(prefix)) == \
                outcome(generic_response, version, bad, len(prefix))


@pytest.mark.parametrize("bad", [3, 19])
def test_fetch_response_version_outside_the_schema(bad):
    with pytest.raises(ProtocolError):
        fastcodec.decode_fetch_response(bad, b"")


@pytest.fixture(params=["generic", "fast"])
def decode_response(request):
    return fastcodec.decode_fetch_response if request.param == "fast" else generic_response


class TestFetchResponseDecode:
    """Run against the generic decoder and fastcodec alike."""

    def test_records_alias_the_frame(self, decode_response):
        for version in versions(FETCH_RESPONSE):
            frame = bytearray(FETCH_RESPONSE.encode(version, small_fetch_response()))
            response = decode_response(version, memoryview(frame).toreadonly())
            records = response.responses[0].partitions[0].records
            assert records.readonly and bytes(records) == b"r" * 161
            at = bytes(frame).index(b"r" * 161)
            frame[at] = ord("s")  # a write to the frame shows through the view: no copy
            assert records[0] == ord("s")
            writable = decode_response(version, frame).responses[0].partitions[0].records
            writable[1] = ord("t")
            assert frame[at + 1] == ord("t")

    def test_every_truncation_is_a_protocol_error(self, decode_response):
        for version in versions(FETCH_RESPONSE):
            bodies = (small_fetch_response(), fetch_response_body(version, random.Random(version)))
            for body in bodies:
                buf = FETCH_RESPONSE.encode(version, body)
                decode_response(version, buf)
                for cut in range(len(buf)):
                    with pytest.raises(ProtocolError):
                        decode_response(version, memoryview(buf)[:cut])

    def test_unknown_tagged_fields_are_skipped(self, decode_response):
        for version in [v for v in versions(FETCH_RESPONSE) if v >= 12]:
            for seed in range(SEEDS):
                body = fetch_response_body(version, random.Random(f"noisy-response-{version}-{seed}"),
                                           NOISY_FETCH_RESPONSE)
                noisy = NOISY_FETCH_RESPONSE.encode(version, body)
                plain = FETCH_RESPONSE.encode(version, body)
                assert decode_response(version, noisy) == decode_response(version, plain) == \
                    generic_response(version, plain)

    def test_a_known_tag_read_past_its_size_is_refused(self, decode_response):
        head = bytes(10) + b"\x02" + bytes(16) + b"\x02" + bytes(30) + b"\x01" + bytes(4) + b"\x01"
        leader = (4).to_bytes(4, "big") + (6).to_bytes(4, "big") + b"\x00"
        tail = b"\x00\x00"  # the topic's and the root's tag sections
        partition = decode_response(13, head + b"\x01\x01\x09" + leader + tail).responses[0].partitions[0]
        assert partition.current_leader == P.LeaderIdAndEpoch(leader_id=4, leader_epoch=6)
        assert partition.diverging_epoch == P.EpochEndOffset() and partition.records == b""
        with pytest.raises(ProtocolError):  # the value claims 8 bytes, the struct needs 9
            decode_response(13, head + b"\x01\x01\x08" + leader + tail)
        with pytest.raises(ProtocolError):  # the value claims more bytes than there are
            decode_response(13, head + b"\x01\x01\x0f" + leader + tail)

    def test_absent_fields_take_their_defaults(self, decode_response):
        partition = bytes(22) + b"\xff\xff\xff\xff" + b"\x00\x00\x00\x00"  # v4: null aborted, no records
        response = decode_response(4, bytes(4) + b"\x00\x00\x00\x01\x00\x01t\x00\x00\x00\x01" + partition)
        assert response == F(responses=[F.FetchableTopicResponse(topic="t", partitions=[
            P(last_stable_offset=0, aborted_transactions=None, records=b"")])])
        p = response.responses[0].partitions[0]
        assert (p.log_start_offset, p.preferred_read_replica) == (-1, -1)
        assert p.snapshot_id == P.SnapshotId() and response.node_endpoints == []


def test_decode_response_routes_fetch_to_fastcodec():
    assert headers.FAST_RESPONSE_DECODERS == {1: fastcodec.decode_fetch_response}
    frame = bytearray(b"".join(headers.encode_response_generic(1, 17, 9, small_fetch_response())))
    r = Reader(memoryview(frame).toreadonly(), 4)
    assert headers.read_response_header(r, 1, 17) == 9
    body_at = r.pos
    response = headers.decode_response(1, 17, r)
    assert response == generic_response(17, frame, body_at) and r.pos == r.end
    records_alias(response, memoryview(frame).toreadonly())
    r = Reader(frame + b"\x00" * 7, 4, len(frame))  # a reader that stops short of its buffer
    headers.read_response_header(r, 1, 17)
    assert headers.decode_response(1, 17, r) == response and r.pos == len(frame)
    r = Reader(frame, 4, len(frame) - 1)  # and its end is the body's end
    headers.read_response_header(r, 1, 17)
    with pytest.raises(ProtocolError):
        headers.decode_response(1, 17, r)


def test_a_client_fetch_decodes_through_fastcodec():
    from tests.protocol.test_client import answer, peer, read_request, run

    async def serve(reader, writer):
        writer.write(answer(await read_request(reader), small_fetch_response()))

    async def scenario():
        async with peer(serve) as conn:
            return await conn.request(1, 17, replica_fetch())

    response = run(scenario())
    assert response == generic_response(17, FETCH_RESPONSE.encode(17, small_fetch_response()))
    records = response.responses[0].partitions[0].records
    assert type(records) is memoryview and records.readonly and type(records.obj) is bytearray
