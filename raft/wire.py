"""The KRaft RPCs on the wire: core messages (raft/messages.py) <-> protocol structs, both ways.

Inbound requests: ``parse_request`` checks the cluster id (a mismatch raises WireError
INCONSISTENT_CLUSTER_ID, answered by ``build_error_response`` without the core seeing it) and
that the request names ``__cluster_metadata-0``, and returns (source replica id, core message);
admin requests (AddRaftVoter, RemoveRaftVoter, UpdateRaftVoter) have no source id (None).
``build_response`` turns the core's answer into the response struct at the request's version.
Outbound: ``build_request`` -> (api key, struct); ``parse_response`` copies the fields that are
not on the wire from the core request it answers. Fetch and FetchSnapshot are in wire_fetch.py.

| core                     | wire (topics[0].partitions[0] unless said)    | versions                     |
|--------------------------|-----------------------------------------------|------------------------------|
| VoteRequest              | Vote (52)                                     | 0-2                          |
|   replica_id, epoch      |   replica_id, replica_epoch                   |                              |
|   last_offset(_epoch)    |   last_offset, last_offset_epoch              |                              |
|   voter_id               |   voter_id (top-level)                        | 1+ (v0: the receiver)        |
|   replica/voter dir. id  |   replica/voter_directory_id (None = zero)    | 1+                           |
|   pre_vote               |   pre_vote                                    | 2+ (below: UNSUPPORTED_VER.) |
| VoteResponse             |   error_code, leader_id, leader_epoch,        | node_endpoints 1+: leader's  |
|                          |   vote_granted; pre_vote: from the request    |                              |
| BeginQuorumEpochRequest  | BeginQuorumEpoch (53): leader_id,             | 0-1                          |
|                          |   leader_epoch, voter_id (1+),                |                              |
|                          |   voter_directory_id (1+), leader_endpoints   |                              |
| EndQuorumEpochRequest    | EndQuorumEpoch (54): leader_id, leader_epoch, | 0-1                          |
|   preferred_successors   |   preferred_successors (0) /                  |                              |
|                          |   preferred_candidates (1+, with dir. ids)    |                              |
| *EpochResponse           |   error_code, leader_id, leader_epoch         | node_endpoints 1+: leader's  |
| AddVoterRequest          | AddRaftVoter (80): voter_id,                  | 0-1 (ack_when_committed 1+)  |
|                          |   voter_directory_id, listeners, timeout_ms   |                              |
| RemoveVoterRequest       | RemoveRaftVoter (81)                          | 0                            |
| UpdateVoterRequest       | UpdateRaftVoter (82): + current_leader_epoch, | 0                            |
|                          |   kraft_version_feature (min, max)            |                              |
| VoterChangeResponse      |   error_code, error_message (80, 81);         |                              |
|                          |   current_leader (82, with host and port)     |                              |
| QuorumDescription        | DescribeQuorum (55) response: leader, epoch,  | 0-2: timestamps 1+ (wall     |
| (RaftCore.describe())    |   HW, current_voters, observers; nodes =      | clock ms), dir. ids, nodes 2+|
|                          |   voter_set's endpoints                       |                              |
| ApiVersionsProbeResponse | ApiVersions supported_features "kraft.version"| absent = 0..0                |

Top-level errors (cluster id, wrong partition) leave the partition fields at -1: the core
ignores an answer whose leader epoch is below its own.
"""
from __future__ import annotations

from protocol import messages as M

from . import messages as m
from .reconfig import QuorumDescription, ReplicaDescription
from .voters import Endpoint, Voter, VoterSet
from .wire_fetch import (
    FETCH,
    FETCH_SNAPSHOT,
    INCONSISTENT_CLUSTER_ID,
    INVALID_REQUEST,
    METADATA_PARTITION,
    METADATA_TOPIC,
    METADATA_TOPIC_ID,
    WireError,
    build_fetch_error,
    build_fetch_request,
    build_fetch_response,
    build_fetch_snapshot_request,
    build_fetch_snapshot_response,
    check_cluster_id,
    directory_id,
    parse_fetch_request,
    parse_fetch_response,
    parse_fetch_snapshot_request,
    parse_fetch_snapshot_response,
    pick_endpoint,
    single_partition,
    uuid,
)

__all__ = [
    "FETCH", "FETCH_SNAPSHOT", "VOTE", "BEGIN_QUORUM_EPOCH", "END_QUORUM_EPOCH", "DESCRIBE_QUORUM",
    "ADD_RAFT_VOTER", "REMOVE_RAFT_VOTER", "UPDATE_RAFT_VOTER", "API_VERSIONS", "VERSIONS",
    "INCONSISTENT_CLUSTER_ID", "INVALID_REQUEST", "METADATA_TOPIC", "METADATA_TOPIC_ID", "WireError",
    "QuorumDescription", "ReplicaDescription", "build_request", "parse_request",
    "build_response", "parse_response", "build_error_response", "parse_describe_quorum_request",
    "build_describe_quorum_response", "parse_describe_quorum_response", "kraft_version_range",
    "kraft_supported_features",
]

VOTE, BEGIN_QUORUM_EPOCH, END_QUORUM_EPOCH, DESCRIBE_QUORUM = 52, 53, 54, 55
ADD_RAFT_VOTER, REMOVE_RAFT_VOTER, UPDATE_RAFT_VOTER = 80, 81, 82
API_VERSIONS = 18
UNSUPPORTED_VERSION = 35
NOT_LEADER_OR_FOLLOWER = 6
KRAFT_VERSION_FEATURE = "kraft.version"

# The versions this module speaks, per API: (min, max). Fetch reaches down to v4 for brokers'
# metadata followers; KRaft replicas send v18 (high_watermark, KIP-1166) to peers that have it.
VERSIONS = {
    FETCH: (4, 18), VOTE: (0, 2), BEGIN_QUORUM_EPOCH: (0, 1), END_QUORUM_EPOCH: (0, 1),
    DESCRIBE_QUORUM: (0, 2), FETCH_SNAPSHOT: (0, 1), ADD_RAFT_VOTER: (0, 1), REMOVE_RAFT_VOTER: (0, 0),
    UPDATE_RAFT_VOTER: (0, 0),
}
REQUEST_KEYS = {
    m.VoteRequest: VOTE, m.BeginQuorumEpochRequest: BEGIN_QUORUM_EPOCH,
    m.EndQuorumEpochRequest: END_QUORUM_EPOCH, m.FetchRequest: FETCH, m.FetchSnapshotRequest: FETCH_SNAPSHOT,
    m.AddVoterRequest: ADD_RAFT_VOTER, m.RemoveVoterRequest: REMOVE_RAFT_VOTER,
    m.UpdateVoterRequest: UPDATE_RAFT_VOTER,
}
RESPONSE_TYPES = {
    VOTE: m.VoteResponse, BEGIN_QUORUM_EPOCH: m.BeginQuorumEpochResponse,
    END_QUORUM_EPOCH: m.EndQuorumEpochResponse, FETCH: m.FetchResponse,
    FETCH_SNAPSHOT: m.FetchSnapshotResponse,
    ADD_RAFT_VOTER: m.VoterChangeResponse, REMOVE_RAFT_VOTER: m.VoterChangeResponse,
    UPDATE_RAFT_VOTER: m.VoterChangeResponse,
}


def _metadata_partition(body):
    return single_partition(body.topics, lambda t: t.topic_name == METADATA_TOPIC, lambda t: t.partitions,
                            lambda p: p.partition_index)


def _listeners(cls, endpoints) -> list:
    return [cls(name=e.name, host=e.host, port=e.port) for e in endpoints]


def _endpoints(listeners) -> tuple[Endpoint, ...]:
    return tuple(Endpoint(lsn.name, lsn.host, lsn.port) for lsn in listeners)


# ---- outbound requests ------------------------------------------------------------------------

def build_request(message, cluster_id: str, version: int, *, leader_endpoints: tuple[Endpoint, ...] = (),
                  directory_of=lambda replica_id: None):
    """(api key, request struct) for a core request. ``leader_endpoints``: ours, for
    EndQuorumEpoch v1; ``directory_of``: voter directory ids for EndQuorumEpoch v1's candidates.
    A pre-vote below Vote v2 raises WireError(UNSUPPORTED_VERSION): the core then runs a real
    election (KIP-996), as if the peer had answered that."""
    key = REQUEST_KEYS[type(message)]
    if isinstance(message, m.VoteRequest):
        if message.pre_vote and version < 2:
            raise WireError(UNSUPPORTED_VERSION, "pre-vote needs Vote v2")
        R = M.VoteRequest
        p = R.PartitionData(partition_index=METADATA_PARTITION, replica_epoch=message.replica_epoch,
                            replica_id=message.replica_id,
                            replica_directory_id=uuid(message.replica_directory_id),
                            voter_directory_id=uuid(message.voter_directory_id),
                            last_offset_epoch=message.last_offset_epoch, last_offset=message.last_offset,
                            pre_vote=message.pre_vote)
        return key, R(cluster_id=cluster_id, voter_id=message.voter_id,
                      topics=[R.TopicData(topic_name=METADATA_TOPIC, partitions=[p])])
    if isinstance(message, m.BeginQuorumEpochRequest):
        R = M.BeginQuorumEpochRequest
        p = R.PartitionData(partition_index=METADATA_PARTITION, leader_id=message.leader_id,
                            leader_epoch=message.leader_epoch,
                            voter_directory_id=uuid(message.voter_directory_id))
        return key, R(cluster_id=cluster_id, voter_id=message.voter_id,
                      topics=[R.TopicData(topic_name=METADATA_TOPIC, partitions=[p])],
                      leader_endpoints=_listeners(R.LeaderEndpoint, message.leader_endpoints))
    if isinstance(message, m.EndQuorumEpochRequest):
        R = M.EndQuorumEpochRequest
        candidates = [R.ReplicaInfo(candidate_id=c, candidate_directory_id=uuid(directory_of(c)))
                      for c in message.preferred_successors]
        p = R.PartitionData(partition_index=METADATA_PARTITION, leader_id=message.leader_id,
                            leader_epoch=message.leader_epoch,
                            preferred_successors=list(message.preferred_successors),
                            preferred_candidates=candidates)
        return key, R(cluster_id=cluster_id, topics=[R.TopicData(topic_name=METADATA_TOPIC, partitions=[p])],
                      leader_endpoints=_listeners(R.LeaderEndpoint, leader_endpoints))
    if isinstance(message, m.FetchRequest):
        return key, build_fetch_request(message, cluster_id, version)
    if isinstance(message, m.FetchSnapshotRequest):
        return key, build_fetch_snapshot_request(message, cluster_id, version)
    if isinstance(message, m.AddVoterRequest):
        R = M.AddRaftVoterRequest
        v = message.voter
        return key, R(cluster_id=cluster_id, timeout_ms=message.timeout_ms, voter_id=v.id,
                      voter_directory_id=uuid(v.directory_id), listeners=_listeners(R.Listener, v.endpoints),
                      ack_when_committed=message.ack_when_committed)
    if isinstance(message, m.RemoveVoterRequest):
        return key, M.RemoveRaftVoterRequest(cluster_id=cluster_id, voter_id=message.voter_id,
                                             voter_directory_id=uuid(message.voter_directory_id))
    R = M.UpdateRaftVoterRequest
    v = message.voter
    return key, R(cluster_id=cluster_id, current_leader_epoch=message.current_leader_epoch, voter_id=v.id,
                  voter_directory_id=uuid(v.directory_id), listeners=_listeners(R.Listener, v.endpoints),
                  kraft_version_feature=R.KRaftVersionFeature(min_supported_version=v.min_kraft_version,
                                                              max_supported_version=v.max_kraft_version))


def parse_response(api_key: int, body, request, listener: str):
    """The core message for a response to ``request`` (the core request we sent)."""
    if api_key == FETCH:
        return parse_fetch_response(body, request, listener)
    if api_key == FETCH_SNAPSHOT:
        return parse_fetch_snapshot_response(body, request, listener)
    if api_key in (ADD_RAFT_VOTER, REMOVE_RAFT_VOTER):
        return m.VoterChangeResponse(body.error_code, body.error_message)
    if api_key == UPDATE_RAFT_VOTER:
        leader = body.current_leader
        return m.VoterChangeResponse(body.error_code, None, leader.leader_id, leader.leader_epoch)
    error, leader_id, leader_epoch, granted = body.error_code, m.NO_LEADER, -1, False
    if error == 0:
        try:
            p = _metadata_partition(body)
        except WireError as e:
            error = e.error_code
        else:
            error, leader_id, leader_epoch = p.error_code, p.leader_id, p.leader_epoch
            granted = getattr(p, "vote_granted", False)
    if api_key == VOTE:
        return m.VoteResponse(error, leader_id, leader_epoch, granted, request.pre_vote)
    return RESPONSE_TYPES[api_key](error, leader_id, leader_epoch)


# ---- inbound requests -------------------------------------------------------------------------

def parse_request(api_key: int, version: int, body, cluster_id: str,
                  local_id: int = -1) -> tuple[int | None, object]:
    """(source replica id or None for admin requests, core message); raises WireError.
    ``local_id``: the receiver, the voter a Vote or BeginQuorumEpoch v0 is meant for."""
    if api_key == FETCH:
        return parse_fetch_request(body, version, cluster_id)
    if api_key == FETCH_SNAPSHOT:
        return parse_fetch_snapshot_request(body, version, cluster_id)
    check_cluster_id(cluster_id, body.cluster_id)
    if api_key == VOTE:
        p = _metadata_partition(body)
        return p.replica_id, m.VoteRequest(
            p.replica_id, p.replica_epoch, p.last_offset_epoch, p.last_offset, version >= 2 and p.pre_vote,
            body.voter_id if version >= 1 else local_id, directory_id(p.replica_directory_id),
            directory_id(p.voter_directory_id))
    if api_key == BEGIN_QUORUM_EPOCH:
        p = _metadata_partition(body)
        voter_id = body.voter_id if version >= 1 else local_id
        return p.leader_id, m.BeginQuorumEpochRequest(p.leader_id, p.leader_epoch, voter_id,
                                                      directory_id(p.voter_directory_id),
                                                      _endpoints(body.leader_endpoints))
    if api_key == END_QUORUM_EPOCH:
        p = _metadata_partition(body)
        successors = (p.preferred_successors if version == 0
                      else [c.candidate_id for c in p.preferred_candidates])
        return p.leader_id, m.EndQuorumEpochRequest(p.leader_id, p.leader_epoch, tuple(successors))
    if api_key == ADD_RAFT_VOTER:
        voter = Voter(body.voter_id, directory_id(body.voter_directory_id), _endpoints(body.listeners))
        ack = body.ack_when_committed if version >= 1 else True
        return None, m.AddVoterRequest(voter, body.timeout_ms, ack)
    if api_key == REMOVE_RAFT_VOTER:
        return None, m.RemoveVoterRequest(body.voter_id, directory_id(body.voter_directory_id))
    if api_key == UPDATE_RAFT_VOTER:
        f = body.kraft_version_feature
        voter = Voter(body.voter_id, directory_id(body.voter_directory_id), _endpoints(body.listeners),
                      f.min_supported_version, f.max_supported_version)
        return None, m.UpdateVoterRequest(body.current_leader_epoch, voter)
    raise ValueError(f"API {api_key} is not a KRaft request")


def build_response(api_key: int, version: int, message, *, now_ms: int = 0, listener: str | None = None,
                   leader_endpoints: tuple[Endpoint, ...] = (), log_start_offset: int = -1):
    """The response struct for the core's answer. ``leader_endpoints``: the leader's, for
    node_endpoints (Vote, BeginQuorumEpoch, EndQuorumEpoch v1) and UpdateRaftVoter's current_leader."""
    if api_key == FETCH:
        return build_fetch_response(message, version, now_ms, listener, log_start_offset)
    if api_key == FETCH_SNAPSHOT:
        return build_fetch_snapshot_response(message, version, listener)
    if api_key in (ADD_RAFT_VOTER, REMOVE_RAFT_VOTER):
        cls = M.RESPONSES[api_key].cls
        return cls(error_code=message.error_code, error_message=message.error_message)
    endpoint = pick_endpoint(leader_endpoints, listener)
    if api_key == UPDATE_RAFT_VOTER:
        R = M.UpdateRaftVoterResponse
        leader = R.CurrentLeader(leader_id=message.leader_id, leader_epoch=message.leader_epoch)
        if endpoint is not None:
            leader.host, leader.port = endpoint.host, endpoint.port
        return R(error_code=message.error_code, current_leader=leader)
    cls = M.RESPONSES[api_key].cls
    p = cls.PartitionData(partition_index=METADATA_PARTITION, error_code=message.error_code,
                          leader_id=message.leader_id, leader_epoch=message.leader_epoch)
    if api_key == VOTE:
        p.vote_granted = message.vote_granted
    body = cls(error_code=0, topics=[cls.TopicData(topic_name=METADATA_TOPIC, partitions=[p])])
    if endpoint is not None and message.leader_id >= 0:
        body.node_endpoints = [cls.NodeEndpoint(node_id=message.leader_id, host=endpoint.host,
                                                port=endpoint.port)]
    return body


def build_error_response(api_key: int, version: int, error_code: int, message: str | None = None):
    """A top-level error answer (cluster id mismatch, invalid request, not handled)."""
    if api_key == FETCH:
        return build_fetch_error(error_code)
    cls = M.RESPONSES[api_key].cls
    body = cls(error_code=error_code)
    if "error_message" in cls._fields and version >= (2 if api_key == DESCRIBE_QUORUM else 0):
        body.error_message = message
    return body


# ---- DescribeQuorum ---------------------------------------------------------------------------

def parse_describe_quorum_request(body) -> None:
    single_partition(body.topics, lambda t: t.topic_name == METADATA_TOPIC, lambda t: t.partitions,
                     lambda p: p.partition_index)


def build_describe_quorum_response(description: QuorumDescription | None, version: int,
                                   to_wall_ms=lambda ms: ms, leader: tuple[int, int] = (m.NO_LEADER, -1)):
    """``description`` None: this replica is not the leader (NOT_LEADER_OR_FOLLOWER with ``leader``)."""
    R = M.DescribeQuorumResponse
    if description is None:
        p = R.PartitionData(partition_index=METADATA_PARTITION, error_code=NOT_LEADER_OR_FOLLOWER,
                            leader_id=leader[0], leader_epoch=leader[1], high_watermark=-1)
        return R(error_code=0, topics=[R.TopicData(topic_name=METADATA_TOPIC, partitions=[p])])

    def state(r: ReplicaDescription):
        def wall(t: int) -> int:
            return to_wall_ms(t) if t >= 0 else -1

        return R.ReplicaState(replica_id=r.replica_id, replica_directory_id=uuid(r.directory_id),
                              log_end_offset=r.log_end_offset, last_fetch_timestamp=wall(r.last_fetch_ms),
                              last_caught_up_timestamp=wall(r.last_caught_up_ms))

    d = description
    p = R.PartitionData(partition_index=METADATA_PARTITION, error_code=0, leader_id=d.leader_id,
                        leader_epoch=d.leader_epoch, high_watermark=d.high_watermark,
                        current_voters=[state(v) for v in d.voters],
                        observers=[state(o) for o in d.observers])
    nodes = [R.Node(node_id=v.id, listeners=_listeners(R.Node.Listener, v.endpoints))
             for v in d.voter_set.voters]
    return R(error_code=0, topics=[R.TopicData(topic_name=METADATA_TOPIC, partitions=[p])], nodes=nodes)


def parse_describe_quorum_response(body) -> QuorumDescription:
    """For admin tools and tests; a non-leader's or top-level error raises WireError."""
    if body.error_code != 0:
        raise WireError(body.error_code, body.error_message or "")
    p = _metadata_partition(body)
    if p.error_code != 0:
        raise WireError(p.error_code, p.error_message or "")

    def replica(s) -> ReplicaDescription:
        return ReplicaDescription(s.replica_id, directory_id(s.replica_directory_id), s.log_end_offset,
                                  s.last_fetch_timestamp, s.last_caught_up_timestamp)

    voters = tuple(replica(v) for v in p.current_voters)
    endpoints = {n.node_id: _endpoints(n.listeners) for n in body.nodes}
    voter_set = VoterSet.of(Voter(v.replica_id, v.directory_id, endpoints.get(v.replica_id, ()))
                            for v in voters)
    return QuorumDescription(p.leader_id, p.leader_epoch, p.high_watermark, voters,
                             tuple(replica(o) for o in p.observers), voter_set)


# ---- ApiVersions: the kraft.version feature (KIP-853) ---------------------------------------------

def kraft_version_range(api_versions_response) -> tuple[int, int]:
    for feature in api_versions_response.supported_features or ():
        if feature.name == KRAFT_VERSION_FEATURE:
            return feature.min_version, feature.max_version
    return 0, 0


def kraft_supported_features(min_version: int = 0, max_version: int = 1) -> list:
    """ApiVersionsResponse.supported_features a controller advertises (v3+)."""
    R = M.ApiVersionsResponse
    return [R.SupportedFeatureKey(name=KRAFT_VERSION_FEATURE, min_version=min_version,
                                  max_version=max_version)]

