"""ListOffsets, OffsetForLeaderEpoch and DeleteRecords, answered by the partition leader
through the ReplicaManager.

ListOffsets "latest" is the high watermark for clients (replica id -1) and the log end offset
for replicas (a follower resetting after OFFSET_OUT_OF_RANGE); OFFSET_NOT_AVAILABLE while the
high watermark is below the leader epoch's start offset (after an unclean election). The
current_leader_epoch of a request is checked: FENCED_LEADER_EPOCH when older than the leader's,
UNKNOWN_LEADER_EPOCH when newer. OffsetForLeaderEpoch gives the end offset of an epoch in the
leader's log (consumers detecting truncation, KIP-320; followers without epoch information).
DeleteRecords raises the leader's log start offset and answers once every live replica has
raised its own that far (the partition's low watermark, which it reports), or with
REQUEST_TIMED_OUT and the low watermark so far at the request's timeout, as Kafka's
DelayedDeleteRecords does. Refused first, in Kafka's order: an internal topic
(INVALID_TOPIC_EXCEPTION), a partition not led here, a topic whose cleanup.policy lacks delete
(POLICY_VIOLATION), a negative offset other than -1 (the high watermark) or one past the high
watermark (OFFSET_OUT_OF_RANGE); each with low watermark -1 and nothing deleted.

ListOffsets MAX_TIMESTAMP (-3) answers the first record holding the greatest timestamp (Kafka
3.8+, KAFKA-16310), not the last offset of its batch: see Log.offset_of_max_timestamp.
"""
from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from broker.authorizer import ALLOW_ALL, BrokerAuthorizer
from broker.handlers.metadata import INTERNAL_TOPICS
from metadata.security import CLUSTER, CLUSTER_ACTION, CLUSTER_NAME, DELETE, DESCRIBE, TOPIC
from protocol import messages as M
from protocol.context import RequestContext
from protocol.dispatch import Api
from protocol.errors import Error

if TYPE_CHECKING:
    from broker.fetch_waiters import FetchWaiters
    from replication.manager import ReplicaManager


class OffsetsHandlers:
    """ListOffsets, OffsetForLeaderEpoch and DeleteRecords over the ReplicaManager, the
    waiters a log start offset's move wakes and the authorizer."""

    def __init__(self, replicas: ReplicaManager, waiters: FetchWaiters,
                 authorizer: BrokerAuthorizer = ALLOW_ALL):
        self.replicas = replicas
        self.waiters = waiters
        self.authorizer = authorizer

    def apis(self) -> list[Api]:
        return [Api(2, 1, 8, self.list_offsets), Api(23, 2, 4, self.offset_for_leader_epoch),
                Api(21, 0, 2, self.delete_records)]

    async def list_offsets(self, ctx: RequestContext, req):
        """Each topic needs DESCRIBE (Kafka's handleListOffsetRequest: TOPIC_AUTHORIZATION_FAILED
        for its partitions, replicas and consumers alike)."""
        replicas = self.replicas
        R = M.ListOffsetsResponse
        PR = R.ListOffsetsTopicResponse.ListOffsetsPartitionResponse
        allowed = self.authorizer.filter(ctx, DESCRIBE, TOPIC, (t.name for t in req.topics))
        topics = []
        for t in req.topics:
            out = R.ListOffsetsTopicResponse(name=t.name)
            topics.append(out)
            for p in t.partitions:
                if t.name not in allowed:
                    out.partitions.append(PR(partition_index=p.partition_index, timestamp=-1, offset=-1,
                                             error_code=Error.TOPIC_AUTHORIZATION_FAILED))
                    continue
                found = replicas.list_offset(
                    t.name, p.partition_index, p.timestamp, replica_id=req.replica_id,
                    isolation_level=req.isolation_level, current_leader_epoch=p.current_leader_epoch)
                out.partitions.append(PR(partition_index=p.partition_index, error_code=found.error,
                                         timestamp=found.timestamp, offset=found.offset,
                                         leader_epoch=found.leader_epoch))
        return R(topics=topics)

    async def offset_for_leader_epoch(self, ctx: RequestContext, req):
        """CLUSTER_ACTION on the cluster (a follower), else DESCRIBE on each topic (a consumer
        checking for truncation, KIP-320): Kafka's handleOffsetForLeaderEpochRequest, with
        TOPIC_AUTHORIZATION_FAILED for the partitions of a topic refused."""
        replicas = self.replicas
        authorizer = self.authorizer
        R = M.OffsetForLeaderEpochResponse
        if authorizer.authorize(ctx, CLUSTER_ACTION, CLUSTER, CLUSTER_NAME, log_if_denied=False):
            allowed = None
        else:
            allowed = authorizer.filter(ctx, DESCRIBE, TOPIC, (t.topic for t in req.topics))
        topics = []
        for t in req.topics:
            out = R.OffsetForLeaderTopicResult(topic=t.topic)
            topics.append(out)
            for p in t.partitions:
                if allowed is not None and t.topic not in allowed:
                    out.partitions.append(R.OffsetForLeaderTopicResult.EpochEndOffset(
                        error_code=Error.TOPIC_AUTHORIZATION_FAILED, partition=p.partition))
                    continue
                error, epoch, end_offset = replicas.offset_for_leader_epoch(
                    t.topic, p.partition, p.current_leader_epoch, p.leader_epoch, req.replica_id)
                out.partitions.append(R.OffsetForLeaderTopicResult.EpochEndOffset(
                    error_code=error, partition=p.partition, leader_epoch=epoch, end_offset=end_offset))
        return R(topics=topics)

    async def delete_records(self, ctx: RequestContext, req):
        """Each topic needs DELETE (Kafka's handleDeleteRecordsRequest: TOPIC_AUTHORIZATION_FAILED
        and low watermark -1 for its partitions, before anything else is looked at)."""
        replicas = self.replicas
        R = M.DeleteRecordsResponse
        PR = R.DeleteRecordsTopicResult.DeleteRecordsPartitionResult
        allowed = self.authorizer.filter(ctx, DELETE, TOPIC, (t.name for t in req.topics))
        topics = []
        pending: dict[tuple[str, int], tuple[int, object]] = {}  # (topic, partition): (required, result)
        for t in req.topics:
            out = R.DeleteRecordsTopicResult(name=t.name)
            topics.append(out)
            for p in t.partitions:
                error: int
                if t.name not in allowed:
                    error, required = Error.TOPIC_AUTHORIZATION_FAILED, -1
                elif t.name in INTERNAL_TOPICS:
                    error, required = Error.INVALID_TOPIC_EXCEPTION, -1
                else:
                    error, required = replicas.delete_records(t.name, p.partition_index, p.offset)
                result = PR(partition_index=p.partition_index, low_watermark=required, error_code=error)
                out.partitions.append(result)
                if error == Error.NONE:
                    pending[(t.name, p.partition_index)] = (required, result)
        await self.wait_for_low_watermarks(pending, req.timeout_ms / 1000)
        return R(topics=topics)

    async def wait_for_low_watermarks(self, pending: dict, timeout_s: float) -> None:
        """Until every pending partition's low watermark reaches its required offset (each
        result then carries it), or the timeout: REQUEST_TIMED_OUT for those still short."""
        replicas, waiters = self.replicas, self.waiters
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(timeout_s, 0.0)
        while True:
            for tp, (required, result) in list(pending.items()):
                error, low = replicas.low_watermark(*tp)
                if error != Error.NONE or low >= required:
                    result.error_code, result.low_watermark = error, low if error == Error.NONE else -1
                    del pending[tp]
            left = deadline - loop.time()
            if not pending or left <= 0:
                break
            changed = waiters.wait(list(pending))
            try:
                await asyncio.wait({changed}, timeout=left)
            finally:
                waiters.forget(list(pending), changed)
        for tp, (_, result) in pending.items():
            result.error_code = Error.REQUEST_TIMED_OUT
            result.low_watermark = replicas.low_watermark(*tp)[1]
