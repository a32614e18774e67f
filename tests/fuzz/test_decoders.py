"""Structure-aware fuzzing of every request decoder (hypothesis), from the schemas.

For every request API and every version its schema has (a superset of what the broker and the
controller serve, protocol/dispatch.py refuses wider ranges), a request is drawn from the
schema (tests/fuzz/frames.py) and:

  * round trip: codec.encode, then the generic decoder and ``decode_request`` (the Cython
    decoders for Produce and Fetch) both give the request back; the schema-driven loose
    encoder writes the same bytes;
  * nulls where the schema allows none (written by the loose encoder): both decoders refuse
    them with ProtocolError ("non-nullable field X was serialized as null"), as Kafka's
    generated readers do;
  * mutations (bit flips, truncation, bad lengths, spliced bytes) decoded at the same and at
    other versions: a request or ProtocolError, nothing else (no IndexError, TypeError,
    MemoryError; a bad length never allocates beyond the bytes received).

The default run is small and derandomized; ``-m slow`` runs the heavier settings.
"""
from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protocol import messages
from protocol.headers import FAST_DECODERS, decode_request
from protocol.types import ProtocolError, Reader
from tests.fuzz.frames import (
    MUTATIONS,
    HypothesisSource,
    encode_loose,
    has_forbidden_null,
    mutate,
    request_value,
)

API_VERSIONS = [(key, v) for key, codec in sorted(messages.REQUESTS.items())
                for v in range(codec.message.versions.lo, codec.message.versions.hi + 1)]
API_KEYS = sorted(messages.REQUESTS)


def _id(kv) -> str:
    return f"{messages.API_NAMES[kv[0]]}-v{kv[1]}"


def quick(n: int):
    return settings(max_examples=n, derandomize=True, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def heavy(n: int):
    return settings(max_examples=n, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def decoders(api_key: int):
    """Every decoder a broker may run on this API: the generic one, and the Cython one."""
    yield "generic", lambda v, data: messages.REQUESTS[api_key].decode(v, Reader(data))
    if api_key in FAST_DECODERS:
        yield "fast", lambda v, data: decode_request(api_key, v, Reader(data))


def decode_or_protocol_error(api_key: int, version: int, data: bytes) -> None:
    """The contract every decoder keeps on any bytes: a request or ProtocolError."""
    codec = messages.REQUESTS[api_key]
    outcomes = []
    for name, decode in decoders(api_key):
        try:
            got = decode(version, data)
        except ProtocolError:
            outcomes.append("ProtocolError")
            continue
        except Exception as e:  # the defect this file hunts
            raise AssertionError(f"{name} decoder of {codec.message.struct_name} v{version} "
                                 f"raised {type(e).__name__}: {e} on {data.hex()}") from e
        assert isinstance(got, codec.cls)
        outcomes.append(got.to_dict())
    assert all(o == outcomes[0] for o in outcomes), f"the decoders disagree on {data.hex()}"


# ---- round trip ------------------------------------------------------------------------------

def check_round_trip(api_key: int, version: int, data) -> None:
    request = request_value(HypothesisSource(data), api_key, version)
    codec = messages.REQUESTS[api_key]
    encoded = codec.encode(version, request)
    assert encode_loose(api_key, version, request) == encoded
    for name, decode in decoders(api_key):
        assert decode(version, encoded) == request, name


@pytest.mark.parametrize("api_version", API_VERSIONS, ids=_id)
@quick(6)
@given(data=st.data())
def test_every_request_version_round_trips_through_every_decoder(api_version, data):
    check_round_trip(*api_version, data)


# ---- nulls the schema does not allow ---------------------------------------------------------

def check_forbidden_nulls(api_key: int, version: int, data) -> None:
    request = request_value(HypothesisSource(data), api_key, version, hostile=True)
    encoded = encode_loose(api_key, version, request)
    forbidden = has_forbidden_null(api_key, version, request)
    for name, decode in decoders(api_key):
        if forbidden:
            with pytest.raises(ProtocolError, match="non-nullable field .* was serialized as null"):
                decode(version, encoded)
        else:
            assert decode(version, encoded) == request, name


@pytest.mark.parametrize("api_version", API_VERSIONS, ids=_id)
@quick(6)
@given(data=st.data())
def test_a_null_in_a_non_nullable_field_is_refused_at_parse_time(api_version, data):
    check_forbidden_nulls(*api_version, data)


def test_a_null_topic_array_in_produce_is_refused_by_both_decoders():
    """Regression (issue 13): a null topic_data reached the Produce handler, which iterated it."""
    for version in (8, 9):
        body = encode_loose(0, version, messages.ProduceRequest(acks=1, timeout_ms=1, topic_data=None))
        for _, decode in decoders(0):
            with pytest.raises(ProtocolError, match="non-nullable field topic_data"):
                decode(version, body)


# ---- mutations -------------------------------------------------------------------------------

def check_mutations(api_key: int, data, rounds: int) -> None:
    versions = messages.REQUESTS[api_key].message.versions
    version = data.draw(st.integers(versions.lo, versions.hi))
    request = request_value(HypothesisSource(data), api_key, version, hostile=True)
    body = encode_loose(api_key, version, request)
    rng = random.Random(data.draw(st.integers(0, 1 << 32)))
    for i in range(rounds):
        mutated = mutate(body, rng, MUTATIONS[i % len(MUTATIONS)])
        decode_or_protocol_error(api_key, version, mutated)
        other = rng.randint(versions.lo, versions.hi)  # another version of the same API
        decode_or_protocol_error(api_key, other, mutated if rng.random() < 0.5 else body)


@pytest.mark.parametrize("api_key", API_KEYS, ids=lambda k: messages.API_NAMES[k])
@quick(12)
@given(data=st.data())
def test_mutated_requests_decode_or_raise_protocol_error(api_key, data):
    check_mutations(api_key, data, rounds=14)


@pytest.mark.parametrize("api_key", API_KEYS, ids=lambda k: messages.API_NAMES[k])
def test_random_bytes_decode_or_raise_protocol_error(api_key):
    rng = random.Random(api_key)
    versions = messages.REQUESTS[api_key].message.versions
    for _ in range(50):
        data = rng.randbytes(rng.randint(0, 64))
        decode_or_protocol_error(api_key, rng.randint(versions.lo, versions.hi), data)


def test_a_huge_array_length_allocates_nothing():
    """An array claiming 2**31-1 elements in a 10-byte body is refused before any list is made."""
    # transactional_id null, acks 1, timeout_ms 5, then topic_data's length
    bodies = {8: b"\xff\xff\x00\x01\x00\x00\x00\x05\x7f\xff\xff\xff",
              9: b"\x00\x00\x01\x00\x00\x00\x05\xff\xff\xff\xff\x07"}
    for version, body in bodies.items():
        for _, decode in decoders(0):
            with pytest.raises(ProtocolError, match="array of"):
                decode(version, body)


# ---- heavier settings ------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("api_version", API_VERSIONS, ids=_id)
@heavy(200)
@given(data=st.data())
def test_every_request_version_round_trips_heavy(api_version, data):
    check_round_trip(*api_version, data)
    check_forbidden_nulls(*api_version, data)


@pytest.mark.slow
@pytest.mark.parametrize("api_key", API_KEYS, ids=lambda k: messages.API_NAMES[k])
@heavy(300)
@given(data=st.data())
def test_mutated_requests_heavy(api_key, data):
    check_mutations(api_key, data, rounds=50)
