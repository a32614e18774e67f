"""protocol.fastcodec.encode_produce_response against the generic codec, the reference.

    differential    for every version of the schema (3-13): randomized responses drawn from
                    the schema (nulls where nullable, empty and non-ASCII strings, record
                    errors, current_leader and node_endpoints at and off their defaults)
                    encode to the same single bytes part as headers.encode_response_generic;
                    where the generic raises, the fast encoder raises too;
    tagged fields   current_leader (per partition) and node_endpoints (root), v10+: omitted
                    when None, unset or equal to the default, written otherwise;
    shared classes  behaviour both encoders must have, run against each: non-nullable nulls
                    are a ValueError, nullable ones are written, the frame is one part whose
                    size prefix covers it.

Seeds are fixed per (version, case); a failure names both. RandomSampler and versions are
test_fastcodec's.
"""
from __future__ import annotations

import random

import pytest

from protocol import fastcodec, headers, messages
from protocol.types import ProtocolError
from tests.protocol.test_fastcodec import SEEDS, RandomSampler, same_parts, versions

PRODUCE_RESPONSE = messages.RESPONSES[0]
R = messages.ProduceResponse
T = R.TopicProduceResponse
P = T.PartitionProduceResponse


def generic(version, correlation_id, body):
    return headers.encode_response_generic(0, version, correlation_id, body)


def one_partition(**fields) -> messages.ProduceResponse:
    partition = P(index=0, error_code=0, base_offset=1234, log_append_time_ms=-1,
                  log_start_offset=0, **fields)
    return R(responses=[T(name="orders", topic_id=b"\x07" * 16, partition_responses=[partition])])


def test_versions_are_the_schemas():
    assert fastcodec.PRODUCE_RESPONSE_VERSIONS == (PRODUCE_RESPONSE.message.versions.lo,
                                                   PRODUCE_RESPONSE.message.versions.hi)
    assert fastcodec.PRODUCE_RESPONSE_VERSIONS == fastcodec.PRODUCE_VERSIONS


@pytest.mark.parametrize("bad", [2, 14, -1])
def test_version_outside_the_schema_is_a_protocol_error(bad):
    with pytest.raises(ProtocolError):
        fastcodec.encode_produce_response(bad, 1, one_partition())


def test_encode_response_routes_produce_to_fastcodec():
    assert headers.FAST_ENCODERS[0] is fastcodec.encode_produce_response
    body = one_partition()
    assert headers.encode_response(0, 11, 5, body) == generic(11, 5, body)


@pytest.mark.parametrize("version", versions(PRODUCE_RESPONSE))
def test_produce_response_differential(version):
    body = one_partition()
    same_parts(fastcodec.encode_produce_response(version, 7, body), generic(version, 7, body))
    body = R(responses=[T(name=f"t{t}", topic_id=bytes([t]) * 16, partition_responses=[
        P(index=p, error_code=p % 3, base_offset=p * 100, log_start_offset=p,
          record_errors=[P.BatchIndexAndErrorMessage(batch_index=1, batch_index_error_message="bad")],
          error_message="tøo big" if p else None)
        for p in range(4)]) for t in range(3)], throttle_time_ms=12)
    same_parts(fastcodec.encode_produce_response(version, -3, body), generic(version, -3, body))
    for seed in range(SEEDS):
        body = RandomSampler(PRODUCE_RESPONSE, version,
                             random.Random(f"produce-response-{version}-{seed}")).build()
        try:
            expected = generic(version, seed, body)
        except (ValueError, OverflowError):
            with pytest.raises((ValueError, OverflowError)):
                fastcodec.encode_produce_response(version, seed, body)
            continue
        same_parts(fastcodec.encode_produce_response(version, seed, body), expected)


LEADERS = [
    None,
    P.LeaderIdAndEpoch(),                                   # == default: omitted
    P.LeaderIdAndEpoch(leader_id=-1.0, leader_epoch=-1),    # -1.0 == -1: omitted
    P.LeaderIdAndEpoch(leader_id=2),
    P.LeaderIdAndEpoch(leader_id=2, leader_epoch=9),
    messages.FetchResponse.PartitionData.LeaderIdAndEpoch(leader_id=3, leader_epoch=4),  # a look-alike
]
ENDPOINTS = [
    None, [],
    [R.NodeEndpoint(node_id=1, host="broker-1", port=9092, rack=None)],
    [R.NodeEndpoint(node_id=i, host="h" * 200, port=9092 + i, rack=f"rack-{i}") for i in range(3)],
]


@pytest.mark.parametrize("version", versions(PRODUCE_RESPONSE))
def test_tagged_fields_are_written_only_off_their_defaults(version):
    for leader in LEADERS:
        for endpoints in ENDPOINTS:
            body = one_partition(current_leader=leader)
            body.node_endpoints = endpoints
            same_parts(fastcodec.encode_produce_response(version, 1, body), generic(version, 1, body))


def test_tagged_current_leader_changes_the_bytes_from_v10_only():
    plain = fastcodec.encode_produce_response(10, 1, one_partition())[0]
    tagged = fastcodec.encode_produce_response(10, 1, one_partition(
        current_leader=P.LeaderIdAndEpoch(leader_id=2, leader_epoch=5)))[0]
    assert len(tagged) == len(plain) + 1 + 1 + 9  # tag, size, int32 + int32 + empty tags
    leader = P.LeaderIdAndEpoch(leader_id=2, leader_epoch=5)
    assert (fastcodec.encode_produce_response(9, 1, one_partition(current_leader=leader))
            == fastcodec.encode_produce_response(9, 1, one_partition()))


def test_an_unset_tagged_field_reads_as_none():
    body = one_partition()
    del body.responses[0].partition_responses[0].current_leader
    del body.node_endpoints
    for version in (9, 10, 13):
        same_parts(fastcodec.encode_produce_response(version, 1, body), generic(version, 1, body))


def test_duck_typed_partitions_take_the_getattr_path():
    class Partition:  # not the generated class: no slot shortcut
        def __init__(self, **kw):
            src = P(**kw)
            for name in src._fields:
                setattr(self, name, getattr(src, name))

    body = R(responses=[T(name="t", partition_responses=[
        Partition(index=3, base_offset=9, error_message="e"),
        Partition(current_leader=P.LeaderIdAndEpoch(leader_id=1, leader_epoch=1))])])
    for version in versions(PRODUCE_RESPONSE):
        same_parts(fastcodec.encode_produce_response(version, 1, body), generic(version, 1, body))


# ---- behaviour shared by both encoders ----------------------------------------------------

@pytest.fixture(params=["generic", "fast"])
def encode(request):
    return fastcodec.encode_produce_response if request.param == "fast" else generic


class TestEncoders:
    def test_non_nullable_nulls_are_refused(self, encode):
        with pytest.raises(ValueError, match="not nullable"):
            encode(9, 1, R(responses=None))
        with pytest.raises(ValueError, match="not nullable"):
            encode(3, 1, R(responses=[T(name=None)]))
        with pytest.raises(ValueError, match="not nullable"):
            encode(12, 1, R(responses=[T(name="t", partition_responses=None)]))
        with pytest.raises(ValueError, match="not nullable"):
            encode(8, 1, one_partition(record_errors=None))
        with pytest.raises(ValueError, match="not nullable"):
            encode(10, 1, R(responses=[], node_endpoints=[R.NodeEndpoint(host=None)]))
        encode(13, 1, R(responses=[T(name=None, topic_id=bytes(16))]))  # no name from v13
        encode(7, 1, one_partition(record_errors=None))  # no record_errors before v8

    def test_nullable_strings_are_written_as_null(self, encode):
        for version in (8, 9, 13):
            body = one_partition(error_message=None, record_errors=[
                P.BatchIndexAndErrorMessage(batch_index=0, batch_index_error_message=None)])
            parts = encode(version, 1, body)
            assert parts == generic(version, 1, body)

    def test_one_part_whose_size_prefix_covers_it(self, encode):
        for version in (3, 9, 11, 13):
            parts = encode(version, 7, one_partition())
            assert len(parts) == 1 and int.from_bytes(parts[0][:4], "big") == len(parts[0]) - 4
            assert parts[0][4:8] == (7).to_bytes(4, "big")
