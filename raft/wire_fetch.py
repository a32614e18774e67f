"""Fetch and FetchSnapshot: core messages <-> Kafka wire structs (the replication half of raft/wire.py).

Fetch is Kafka's ordinary Fetch (API 1) naming ``__cluster_metadata-0``: by topic name up to v12,
by topic id from v13. KRaft replicas send v13-v18; brokers' metadata followers send v16 without a
current leader epoch (-1: "no fencing check", as for any Fetch in Kafka) and read record batches
from ``records``. Errors a replica must act on are partition-level (NOT_LEADER_OR_FOLLOWER with
``current_leader``); INCONSISTENT_CLUSTER_ID and INVALID_REQUEST are top-level.

| core FetchRequest       | wire (FetchRequest)                                               |
|-------------------------|-------------------------------------------------------------------|
| replica_id              | replica_id (v4-14), replica_state.replica_id (v15+)              |
| max_wait_ms             | max_wait_ms (min_bytes 0, max_bytes 8 MiB as Kafka's KRaft client) |
| current_leader_epoch    | partitions[0].current_leader_epoch                                |
| fetch_offset            | partitions[0].fetch_offset                                        |
| last_fetched_epoch      | partitions[0].last_fetched_epoch                                  |
| replica_directory_id    | partitions[0].replica_directory_id (v17+, tagged; None = zero)    |
| high_watermark          | partitions[0].high_watermark (v18+, tagged; absent = int64 max)   |

| core FetchResponse      | wire (FetchResponse.responses[0].partitions[0] unless said)       |
|-------------------------|-------------------------------------------------------------------|
| error_code              | error_code (top-level error_code: cluster id, invalid request)    |
| leader_id, leader_epoch | current_leader (v12+, tagged)                                      |
| high_watermark          | high_watermark (and last_stable_offset)                           |
| diverging_epoch         | diverging_epoch (v12+, tagged; absent = epoch and end_offset -1) |
| snapshot_id             | snapshot_id (v12+, tagged; end_offset, epoch)                     |
| records                 | records: v2 record batches (raft/records.py), partition epoch =   |
|                         | entry epoch                                                        |
| leader_endpoints        | node_endpoints (v16+, tagged; the leader's, no listener name:     |
|                         | the receiver's listener name is used)                             |
| fetch_offset,           | not on the wire: copied from the request answered                 |
| last_fetched_epoch      |                                                                   |

| core FetchSnapshot*     | wire (FetchSnapshot v0-1; topics[0].partitions[0] unless said)    |
|-------------------------|-------------------------------------------------------------------|
| replica_id, max_bytes   | replica_id, max_bytes                                             |
| current_leader_epoch    | current_leader_epoch                                               |
| snapshot_id             | snapshot_id (end_offset = OffsetAndEpoch.offset, epoch)           |
| position                | position                                                           |
| replica_directory_id    | replica_directory_id (v1+, tagged)                                 |
| response error_code     | error_code (top-level: cluster id)                                 |
| leader_id, leader_epoch | current_leader (tagged)                                            |
| size, data              | size, unaligned_records (a byte range of the snapshot file)       |
| leader_endpoints        | node_endpoints (v1+, tagged)                                       |
"""
from __future__ import annotations

from protocol import messages as M
from protocol.types import ZERO_UUID

from . import messages as m
from .log import OffsetAndEpoch
from .records import build_batches, decode_entries
from .voters import Endpoint

FETCH = 1
FETCH_SNAPSHOT = 59

METADATA_TOPIC = "__cluster_metadata"
METADATA_TOPIC_ID = (1).to_bytes(16, "big")  # the same id controller/metadata_log.py uses
METADATA_PARTITION = 0
FETCH_MAX_BYTES = 8 << 20  # Kafka's KafkaRaftClient.MAX_FETCH_SIZE_BYTES
NO_HIGH_WATERMARK = (1 << 63) - 1  # Fetch v18's high_watermark default: "unknown"

INVALID_REQUEST = 42
INCONSISTENT_CLUSTER_ID = 104


class WireError(Exception):
    """An inbound request the core must not see: answer it with ``error_code`` at top level."""

    def __init__(self, error_code: int, message: str = ""):
        super().__init__(message or str(error_code))
        self.error_code = error_code


def directory_id(raw: bytes | None) -> bytes | None:
    return None if raw is None or raw == ZERO_UUID else bytes(raw)


def uuid(directory: bytes | None) -> bytes:
    return ZERO_UUID if directory is None else directory


def check_cluster_id(expected: str, received: str | None) -> None:
    """Kafka accepts a null cluster id (older senders); any other mismatch is fenced."""
    if received is not None and received != expected:
        raise WireError(INCONSISTENT_CLUSTER_ID, f"cluster id {received!r}, ours {expected!r}")


def single_partition(topics: list, name_of, partitions_of, index_of):
    """The one partition of a KRaft request; anything but __cluster_metadata-0 is invalid."""
    if len(topics) != 1 or not name_of(topics[0]):
        raise WireError(INVALID_REQUEST, "a KRaft request names exactly __cluster_metadata")
    partitions = partitions_of(topics[0])
    if len(partitions) != 1 or index_of(partitions[0]) != METADATA_PARTITION:
        raise WireError(INVALID_REQUEST, "a KRaft request names exactly partition 0")
    return partitions[0]


def pick_endpoint(endpoints: tuple[Endpoint, ...], listener: str | None) -> Endpoint | None:
    for e in endpoints:
        if listener is None or e.name == listener:
            return e
    return endpoints[0] if endpoints else None


# ---- Fetch ------------------------------------------------------------------------------------

def build_fetch_request(req: m.FetchRequest, cluster_id: str, version: int) -> M.FetchRequest:
    R = M.FetchRequest
    partition = R.FetchTopic.FetchPartition(
        partition=METADATA_PARTITION, current_leader_epoch=req.current_leader_epoch,
        fetch_offset=req.fetch_offset, last_fetched_epoch=req.last_fetched_epoch,
        partition_max_bytes=FETCH_MAX_BYTES, replica_directory_id=uuid(req.replica_directory_id),
        high_watermark=req.high_watermark)
    body = R(cluster_id=cluster_id, replica_id=req.replica_id, max_wait_ms=req.max_wait_ms,
             min_bytes=0, max_bytes=FETCH_MAX_BYTES,
             topics=[R.FetchTopic(topic=METADATA_TOPIC, topic_id=METADATA_TOPIC_ID,
                                  partitions=[partition])])
    body.replica_state = R.ReplicaState(replica_id=req.replica_id, replica_epoch=-1)
    return body


def parse_fetch_request(body, version: int, cluster_id: str) -> tuple[int, m.FetchRequest]:
    check_cluster_id(cluster_id, body.cluster_id)
    if version <= 12:
        def is_metadata(t):
            return t.topic == METADATA_TOPIC
    else:
        def is_metadata(t):
            return t.topic_id == METADATA_TOPIC_ID
    p = single_partition(body.topics, is_metadata, lambda t: t.partitions, lambda p: p.partition)
    replica_id = body.replica_id if version <= 14 else body.replica_state.replica_id
    high_watermark = p.high_watermark if version >= 18 else NO_HIGH_WATERMARK
    return replica_id, m.FetchRequest(replica_id, p.current_leader_epoch, p.fetch_offset,
                                      p.last_fetched_epoch, high_watermark, body.max_wait_ms,
                                      directory_id(p.replica_directory_id))


def build_fetch_response(resp: m.FetchResponse, version: int, now_ms: int, listener: str | None = None,
                         log_start_offset: int = -1) -> M.FetchResponse:
    R = M.FetchResponse
    records = b"".join(build_batches(list(resp.records), now_ms)) if resp.records else b""
    p = R.PartitionData(partition_index=METADATA_PARTITION, error_code=resp.error_code,
                        high_watermark=resp.high_watermark, last_stable_offset=resp.high_watermark,
                        log_start_offset=log_start_offset, records=records)
    p.current_leader = R.LeaderIdAndEpoch(leader_id=resp.leader_id, leader_epoch=resp.leader_epoch)
    if resp.diverging_epoch is not None:
        p.diverging_epoch = R.EpochEndOffset(epoch=resp.diverging_epoch.epoch,
                                             end_offset=resp.diverging_epoch.end_offset)
    if resp.snapshot_id is not None:
        p.snapshot_id = R.SnapshotId(end_offset=resp.snapshot_id.offset, epoch=resp.snapshot_id.epoch)
    body = R(session_id=0, responses=[R.FetchableTopicResponse(
        topic=METADATA_TOPIC, topic_id=METADATA_TOPIC_ID, partitions=[p])])
    endpoint = pick_endpoint(resp.leader_endpoints, listener)
    if endpoint is not None and resp.leader_id >= 0:
        body.node_endpoints = [R.NodeEndpoint(node_id=resp.leader_id, host=endpoint.host,
                                              port=endpoint.port, rack=None)]
    return body


def build_fetch_error(error_code: int) -> M.FetchResponse:
    R = M.FetchResponse
    p = R.PartitionData(partition_index=METADATA_PARTITION, error_code=error_code, high_watermark=-1,
                        records=b"")
    return R(error_code=error_code, session_id=0, responses=[R.FetchableTopicResponse(
        topic=METADATA_TOPIC, topic_id=METADATA_TOPIC_ID, partitions=[p])])


def parse_fetch_response(body, req: m.FetchRequest, listener: str) -> m.FetchResponse:
    if body.error_code != 0 or not body.responses or not body.responses[0].partitions:
        return m.FetchResponse(body.error_code or INVALID_REQUEST, m.NO_LEADER, -1, -1, None, (),
                               req.fetch_offset, req.last_fetched_epoch)
    p = body.responses[0].partitions[0]
    diverging = None
    d = p.diverging_epoch
    if d is not None and (d.epoch != -1 or d.end_offset != -1):
        diverging = m.EpochEndOffset(d.epoch, d.end_offset)
    snapshot_id = None
    s = p.snapshot_id
    if s is not None and (s.end_offset != -1 or s.epoch != -1):
        snapshot_id = OffsetAndEpoch(s.end_offset, s.epoch)
    leader = p.current_leader
    records = tuple(decode_entries(bytes(p.records))) if p.records else ()
    endpoints = tuple(Endpoint(listener, e.host, e.port) for e in body.node_endpoints
                      if e.node_id == leader.leader_id)
    return m.FetchResponse(p.error_code, leader.leader_id, leader.leader_epoch, p.high_watermark, diverging,
                           records, req.fetch_offset, req.last_fetched_epoch, snapshot_id, endpoints)


# ---- FetchSnapshot ----------------------------------------------------------------------------

def build_fetch_snapshot_request(req: m.FetchSnapshotRequest, cluster_id: str,
                                 version: int) -> M.FetchSnapshotRequest:
    R = M.FetchSnapshotRequest
    partition = R.PartitionSnapshot(
        partition=METADATA_PARTITION, current_leader_epoch=req.current_leader_epoch,
        snapshot_id=R.SnapshotId(end_offset=req.snapshot_id.offset, epoch=req.snapshot_id.epoch),
        position=req.position, replica_directory_id=uuid(req.replica_directory_id))
    return R(cluster_id=cluster_id, replica_id=req.replica_id, max_bytes=req.max_bytes,
             topics=[R.TopicSnapshot(name=METADATA_TOPIC, partitions=[partition])])


def parse_fetch_snapshot_request(body, version: int, cluster_id: str) -> tuple[int, m.FetchSnapshotRequest]:
    check_cluster_id(cluster_id, body.cluster_id)
    p = single_partition(body.topics, lambda t: t.name == METADATA_TOPIC, lambda t: t.partitions,
                         lambda p: p.partition)
    snapshot_id = OffsetAndEpoch(p.snapshot_id.end_offset, p.snapshot_id.epoch)
    return body.replica_id, m.FetchSnapshotRequest(body.replica_id, p.current_leader_epoch, snapshot_id,
                                                   p.position, body.max_bytes,
                                                   directory_id(p.replica_directory_id))


def build_fetch_snapshot_response(resp: m.FetchSnapshotResponse, version: int,
                                  listener: str | None = None) -> M.FetchSnapshotResponse:
    R = M.FetchSnapshotResponse
    p = R.PartitionSnapshot(
        index=METADATA_PARTITION, error_code=resp.error_code,
        snapshot_id=R.SnapshotId(end_offset=resp.snapshot_id.offset, epoch=resp.snapshot_id.epoch),
        current_leader=R.LeaderIdAndEpoch(leader_id=resp.leader_id, leader_epoch=resp.leader_epoch),
        size=resp.size, position=resp.position, unaligned_records=bytes(resp.data))
    body = R(error_code=0, topics=[R.TopicSnapshot(name=METADATA_TOPIC, partitions=[p])])
    endpoint = pick_endpoint(resp.leader_endpoints, listener)
    if endpoint is not None and resp.leader_id >= 0:
        body.node_endpoints = [R.NodeEndpoint(node_id=resp.leader_id, host=endpoint.host, port=endpoint.port)]
    return body


def parse_fetch_snapshot_response(body, req: m.FetchSnapshotRequest,
                                  listener: str) -> m.FetchSnapshotResponse:
    if body.error_code != 0 or not body.topics or not body.topics[0].partitions:
        return m.FetchSnapshotResponse(body.error_code or INVALID_REQUEST, m.NO_LEADER, -1, req.snapshot_id,
                                       -1, req.position, b"")
    p = body.topics[0].partitions[0]
    leader = p.current_leader
    endpoints = tuple(Endpoint(listener, e.host, e.port) for e in body.node_endpoints
                      if e.node_id == leader.leader_id)
    return m.FetchSnapshotResponse(
        p.error_code, leader.leader_id, leader.leader_epoch,
        OffsetAndEpoch(p.snapshot_id.end_offset, p.snapshot_id.epoch), p.size, p.position,
        bytes(p.unaligned_records or b""), endpoints)
