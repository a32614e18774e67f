"""raft.wire: every core message through its Kafka struct and the protocol codec's bytes, both ways.

For each RPC and each version raft.wire speaks, a core message is built into a struct, framed
with protocol.headers (the Cython fast path for Fetch responses, as the server sends them),
read back from the bytes and parsed into a core message, which must equal the original less
what that version cannot carry (``at_version``).
"""
from __future__ import annotations

import dataclasses

import pytest

from protocol import messages as M
from protocol.headers import (
    decode_request,
    encode_request,
    encode_response,
    read_request_header,
    read_response_header,
)
from protocol.types import Reader
from raft import messages as m
from raft import wire
from raft.log import Entry, LeaderChange, OffsetAndEpoch
from raft.reconfig import QuorumDescription, ReplicaDescription
from raft.voters import Endpoint, KRaftVersion, Voter, VoterSet
from raft.wire_fetch import NO_HIGH_WATERMARK

CLUSTER = "wire-test-cluster"
DIR_A, DIR_B = b"\x0a" * 16, b"\x0b" * 16
ENDPOINTS = (Endpoint("CONTROLLER", "10.0.0.1", 9093),)


def via_bytes_request(api_key: int, version: int, body):
    frame = encode_request(api_key, version, 7, "raft-1", body)
    r = Reader(memoryview(frame)[4:])
    header = read_request_header(r)
    assert (header.api_key, header.api_version, header.correlation_id) == (api_key, version, 7)
    decoded = decode_request(api_key, version, r)
    assert r.pos == r.end, "the request was not read to its end"
    return decoded


def via_bytes_response(api_key: int, version: int, body):
    frame = b"".join(bytes(part) for part in encode_response(api_key, version, 7, body))
    r = Reader(memoryview(frame)[4:])
    assert read_response_header(r, api_key, version) == 7
    decoded = M.RESPONSES[api_key].decode(version, r)
    assert r.pos == r.end, "the response was not read to its end"
    return decoded


def versions(api_key: int, lowest: int | None = None):
    lo, hi = wire.VERSIONS[api_key]
    return range(lowest if lowest is not None else lo, hi + 1)


# ---- requests ---------------------------------------------------------------------------------

VOTE = m.VoteRequest(3, 7, 6, 120, True, 1, DIR_A, DIR_B)
BEGIN = m.BeginQuorumEpochRequest(2, 9, 1, DIR_B, ENDPOINTS)
END = m.EndQuorumEpochRequest(2, 9, (3, 1))
FETCH = m.FetchRequest(3, 9, 120, 8, 100, 500, DIR_A)
FETCH_SNAPSHOT = m.FetchSnapshotRequest(3, 9, OffsetAndEpoch(100, 8), 4096, 1 << 20, DIR_A)
ADD = m.AddVoterRequest(Voter(4, DIR_A, ENDPOINTS, 0, 1), 30_000, False)
REMOVE = m.RemoveVoterRequest(4, DIR_A)
UPDATE = m.UpdateVoterRequest(9, Voter(4, DIR_A, ENDPOINTS, 0, 1))
LOCAL_ID = 1  # the receiver: a v0 Vote or BeginQuorumEpoch is meant for it


def at_version(message, version: int):
    """What ``version`` carries of a core request."""
    r = dataclasses.replace
    if isinstance(message, m.VoteRequest) and version == 0:
        return r(message, voter_id=LOCAL_ID, replica_directory_id=None, voter_directory_id=None)
    if isinstance(message, m.BeginQuorumEpochRequest) and version == 0:
        return r(message, voter_id=LOCAL_ID, voter_directory_id=None, leader_endpoints=())
    if isinstance(message, m.FetchRequest):
        if version < 18:
            message = r(message, high_watermark=NO_HIGH_WATERMARK)
        if version < 17:
            message = r(message, replica_directory_id=None)
    if isinstance(message, m.FetchSnapshotRequest) and version == 0:
        return r(message, replica_directory_id=None)
    if isinstance(message, m.AddVoterRequest):
        return r(message, voter=r(message.voter, min_kraft_version=0, max_kraft_version=1),
                 ack_when_committed=message.ack_when_committed if version >= 1 else True)
    return message


REQUESTS = [(VOTE, 3), (BEGIN, 2), (END, 2), (FETCH, 3), (FETCH_SNAPSHOT, 3), (ADD, None), (REMOVE, None),
            (UPDATE, None)]
REQUEST_CASES = [(msg, source, v) for msg, source in REQUESTS
                 for v in versions(wire.REQUEST_KEYS[type(msg)], 13 if msg is FETCH else None)]


@pytest.mark.parametrize("message,source,version", REQUEST_CASES,
                         ids=[f"{type(c[0]).__name__}-v{c[2]}" for c in REQUEST_CASES])
def test_request_round_trip(message, source, version):
    if isinstance(message, m.VoteRequest) and version < 2:
        with pytest.raises(wire.WireError) as e:
            wire.build_request(message, CLUSTER, version)
        assert e.value.error_code == wire.UNSUPPORTED_VERSION
        message = dataclasses.replace(message, pre_vote=False)
    key, body = wire.build_request(message, CLUSTER, version, directory_of={3: DIR_A, 1: DIR_B}.get)
    assert key == wire.REQUEST_KEYS[type(message)]
    decoded = via_bytes_request(key, version, body)
    parsed = wire.parse_request(key, version, decoded, CLUSTER, LOCAL_ID)
    assert parsed == (source, at_version(message, version))


def test_end_quorum_epoch_v1_names_candidates_with_directory_ids():
    _, body = wire.build_request(END, CLUSTER, 1, directory_of={3: DIR_A}.get)
    candidates = via_bytes_request(54, 1, body).topics[0].partitions[0].preferred_candidates
    assert [(c.candidate_id, c.candidate_directory_id) for c in candidates] == [(3, DIR_A), (1, bytes(16))]


@pytest.mark.parametrize("message", [VOTE, BEGIN, END, FETCH, FETCH_SNAPSHOT, ADD, REMOVE, UPDATE],
                         ids=lambda msg: type(msg).__name__)
def test_cluster_id_mismatch_is_inconsistent_cluster_id_and_null_is_accepted(message):
    key = wire.REQUEST_KEYS[type(message)]
    version = wire.VERSIONS[key][1]
    _, body = wire.build_request(message, "another-cluster", version)
    decoded = via_bytes_request(key, version, body)
    with pytest.raises(wire.WireError) as e:
        wire.parse_request(key, version, decoded, CLUSTER, LOCAL_ID)
    assert e.value.error_code == wire.INCONSISTENT_CLUSTER_ID
    error = via_bytes_response(key, version, wire.build_error_response(key, version, e.value.error_code))
    assert error.error_code == wire.INCONSISTENT_CLUSTER_ID
    decoded.cluster_id = None
    assert wire.parse_request(key, version, decoded, CLUSTER, LOCAL_ID)[1] == at_version(message, version)


def test_a_request_for_another_partition_is_invalid():
    _, body = wire.build_request(VOTE, CLUSTER, 2)
    body.topics[0].partitions[0].partition_index = 1
    with pytest.raises(wire.WireError) as e:
        wire.parse_request(52, 2, via_bytes_request(52, 2, body), CLUSTER)
    assert e.value.error_code == wire.INVALID_REQUEST
    _, body = wire.build_request(FETCH, CLUSTER, 17)
    body.topics[0].topic_id = b"\x09" * 16
    with pytest.raises(wire.WireError):
        wire.parse_request(1, 17, via_bytes_request(1, 17, body), CLUSTER)


def test_a_broker_metadata_fetch_v16_parses_as_an_observer_fetch():
    """broker/metadata_follower.py's request: replica_state, no leader epoch, no cluster id."""
    R = M.FetchRequest
    body = R(replica_id=-1, max_wait_ms=500, min_bytes=1, max_bytes=8 << 20, session_epoch=-1,
             topics=[R.FetchTopic(topic=wire.METADATA_TOPIC, topic_id=wire.METADATA_TOPIC_ID, partitions=[
                 R.FetchTopic.FetchPartition(partition=0, fetch_offset=5, last_fetched_epoch=2,
                                             partition_max_bytes=8 << 20)])])
    body.replica_state = R.ReplicaState(replica_id=101, replica_epoch=40)
    source, req = wire.parse_request(1, 16, via_bytes_request(1, 16, body), CLUSTER)
    assert source == 101
    assert req == m.FetchRequest(101, -1, 5, 2, NO_HIGH_WATERMARK, 500, None)


# ---- responses --------------------------------------------------------------------------------

ENTRIES = (
    Entry(120, 8, LeaderChange(2, (1, 2, 3))),
    Entry(121, 9, KRaftVersion(1)),
    Entry(122, 9, VoterSet.of([Voter(1, DIR_A, ENDPOINTS, 0, 1), Voter(2, DIR_B, ENDPOINTS, 0, 1)])),
    Entry(123, 9, b"record one"),
    Entry(124, 9, b"record two"),
)
FETCH_RESPONSES = {
    "records": m.FetchResponse(m.NONE, 2, 9, 123, None, ENTRIES, 120, 8, leader_endpoints=ENDPOINTS),
    "diverging": m.FetchResponse(m.NONE, 2, 9, 100, m.EpochEndOffset(7, 110), (), 120, 8,
                                 leader_endpoints=ENDPOINTS),
    "snapshot": m.FetchResponse(m.NONE, 2, 9, 100, None, (), 20, 3, OffsetAndEpoch(100, 8), ENDPOINTS),
    "not leader": m.FetchResponse(m.NOT_LEADER_OR_FOLLOWER, 2, 9, -1, None, (), 120, 8,
                                  leader_endpoints=ENDPOINTS),
    "empty": m.FetchResponse(m.NONE, 2, 9, 124, None, (), 125, 9),
}
FETCH_CASES = [(name, v) for name in FETCH_RESPONSES for v in versions(wire.FETCH, 13)]


@pytest.mark.parametrize("name,version", FETCH_CASES, ids=[f"{n}-v{v}" for n, v in FETCH_CASES])
def test_fetch_response_round_trip(name, version):
    resp = FETCH_RESPONSES[name]
    request = m.FetchRequest(3, 9, resp.fetch_offset, resp.last_fetched_epoch, 0, 500)
    body = wire.build_response(wire.FETCH, version, resp, now_ms=1_700_000_000_000, listener="CONTROLLER",
                               log_start_offset=50)
    decoded = via_bytes_response(wire.FETCH, version, body)
    expected = resp if version >= 16 else dataclasses.replace(resp, leader_endpoints=())
    assert wire.parse_response(wire.FETCH, decoded, request, "CONTROLLER") == expected
    if resp.records:
        assert decoded.responses[0].partitions[0].log_start_offset == 50


def test_fetch_top_level_error_is_an_answer_the_core_ignores():
    request = m.FetchRequest(3, 9, 120, 8, 0, 500)
    decoded = via_bytes_response(wire.FETCH, 17, wire.build_error_response(wire.FETCH, 17,
                                                                           wire.INCONSISTENT_CLUSTER_ID))
    resp = wire.parse_response(wire.FETCH, decoded, request, "CONTROLLER")
    assert resp.error_code == wire.INCONSISTENT_CLUSTER_ID and resp.leader_epoch == -1 and not resp.records


SIMPLE_RESPONSES = [
    (VOTE, m.VoteResponse(m.NONE, 2, 9, True, True)),
    (VOTE, m.VoteResponse(m.FENCED_LEADER_EPOCH, -1, 10, False, True)),
    (BEGIN, m.BeginQuorumEpochResponse(m.NONE, 2, 9)),
    (END, m.EndQuorumEpochResponse(m.NONE, 2, 9)),
    (FETCH_SNAPSHOT, m.FetchSnapshotResponse(m.NONE, 2, 9, OffsetAndEpoch(100, 8), 9000, 4096, b"x" * 100,
                                             ENDPOINTS)),
    (FETCH_SNAPSHOT, m.FetchSnapshotResponse(m.SNAPSHOT_NOT_FOUND, 2, 9, OffsetAndEpoch(100, 8), -1, 4096,
                                             b"")),
    (ADD, m.VoterChangeResponse(m.DUPLICATE_VOTER, "voter 4 is already a voter")),
    (REMOVE, m.VoterChangeResponse(m.NONE)),
    (UPDATE, m.VoterChangeResponse(m.NONE, None, 2, 9)),
]
RESPONSE_CASES = [(req, resp, v) for req, resp in SIMPLE_RESPONSES
                  for v in versions(wire.REQUEST_KEYS[type(req)])]


@pytest.mark.parametrize("request_,response,version", RESPONSE_CASES,
                         ids=[f"{type(c[1]).__name__}-{c[1].error_code}-v{c[2]}" for c in RESPONSE_CASES])
def test_response_round_trip(request_, response, version):
    key = wire.REQUEST_KEYS[type(request_)]
    body = wire.build_response(key, version, response, listener="CONTROLLER", leader_endpoints=ENDPOINTS)
    decoded = via_bytes_response(key, version, body)
    expected = response
    if isinstance(response, m.FetchSnapshotResponse) and version == 0:
        expected = dataclasses.replace(response, leader_endpoints=())
    assert wire.parse_response(key, decoded, request_, "CONTROLLER") == expected
    if key in (wire.VOTE, wire.BEGIN_QUORUM_EPOCH, wire.END_QUORUM_EPOCH) and version >= 1:
        leader = [(2, "10.0.0.1", 9093)] if response.leader_id == 2 else []
        assert [(e.node_id, e.host, e.port) for e in decoded.node_endpoints] == leader
    if key == wire.UPDATE_RAFT_VOTER:
        assert (decoded.current_leader.host, decoded.current_leader.port) == ("10.0.0.1", 9093)


@pytest.mark.parametrize("key", sorted(wire.VERSIONS))
def test_error_responses_encode_at_every_version(key):
    for version in versions(key):
        body = wire.build_error_response(key, version, wire.INVALID_REQUEST)
        decoded = via_bytes_response(key, version, body)
        assert decoded.error_code == wire.INVALID_REQUEST or (key == wire.FETCH and version < 7)


# ---- DescribeQuorum ---------------------------------------------------------------------------

WALL = 1_700_000_000_000  # the wall clock when the core's clock read 0
DESCRIPTION = QuorumDescription(
    2, 9, 123,
    (ReplicaDescription(1, DIR_A, 123, 1000, 990), ReplicaDescription(2, DIR_B, 125, 1010, 1010)),
    (ReplicaDescription(7, None, 60, 1005, -1),),
    VoterSet.of([Voter(1, DIR_A, ENDPOINTS), Voter(2, DIR_B, (Endpoint("CONTROLLER", "10.0.0.2", 9093),))]),
)


@pytest.mark.parametrize("version", versions(wire.DESCRIBE_QUORUM))
def test_describe_quorum_round_trip(version):
    R = M.DescribeQuorumRequest
    request = R(topics=[R.TopicData(topic_name=wire.METADATA_TOPIC,
                                    partitions=[R.TopicData.PartitionData(partition_index=0)])])
    wire.parse_describe_quorum_request(via_bytes_request(wire.DESCRIBE_QUORUM, version, request))
    body = wire.build_describe_quorum_response(DESCRIPTION, version, to_wall_ms=lambda t: t + WALL)
    d = wire.parse_describe_quorum_response(via_bytes_response(wire.DESCRIBE_QUORUM, version, body))
    assert (d.leader_id, d.leader_epoch, d.high_watermark) == (2, 9, 123)

    def expected(r: ReplicaDescription) -> ReplicaDescription:
        def wall(t: int) -> int:
            return t + WALL if t >= 0 and version >= 1 else -1

        return ReplicaDescription(r.replica_id, r.directory_id if version >= 2 else None, r.log_end_offset,
                                  wall(r.last_fetch_ms), wall(r.last_caught_up_ms))
    assert d.voters == tuple(expected(v) for v in DESCRIPTION.voters)
    assert d.observers == tuple(expected(o) for o in DESCRIPTION.observers)
    endpoints = {v.id: v.endpoints for v in d.voter_set.voters}
    if version >= 2:
        assert endpoints == {v.id: v.endpoints for v in DESCRIPTION.voter_set.voters}
    else:
        assert endpoints == {1: (), 2: ()}


def test_describe_quorum_on_a_non_leader_names_the_leader():
    body = wire.build_describe_quorum_response(None, 2, leader=(3, 9))
    decoded = via_bytes_response(wire.DESCRIBE_QUORUM, 2, body)
    p = decoded.topics[0].partitions[0]
    assert (p.error_code, p.leader_id, p.leader_epoch) == (m.NOT_LEADER_OR_FOLLOWER, 3, 9)
    with pytest.raises(wire.WireError):
        wire.parse_describe_quorum_response(decoded)


# ---- ApiVersions: kraft.version ---------------------------------------------------------------

def test_kraft_version_range_from_api_versions():
    R = M.ApiVersionsResponse
    advertised = R(api_keys=[], supported_features=wire.kraft_supported_features())
    assert wire.kraft_version_range(via_bytes_response(18, 3, advertised)) == (0, 1)
    assert wire.kraft_version_range(via_bytes_response(18, 3, R(api_keys=[]))) == (0, 0)
