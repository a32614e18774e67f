"""ListOffsets, OffsetForLeaderEpoch and DeleteRecords, answered by the partition leader
through the ReplicaManager.

ListOffsets "latest" is the high watermark for clients (replica id -1) and the log end offset
for replicas (a follower resetting after OFFSET_OUT_OF_RANGE); OFFSET_NOT_AVAILABLE while the
high watermark is below the leader epoch's start offset (after an unclean election). The
current_leader_epoch of a request is checked: FENCED_LEADER_EPOCH when older than the leader's,
UNKNOWN_LEADER_EPOCH when newer. OffsetForLeaderEpoch gives the end offset of an epoch in the
leader's log (consumers detecting truncation, KIP-320; followers without epoch information).
"""
from __future__ import annotations

from protocol import messages as M
from protocol.dispatch import Api


def apis(broker) -> list[Api]:
    replicas = broker.replicas

    async def handle_list_offsets(header, req):
        R = M.ListOffsetsResponse
        PR = R.ListOffsetsTopicResponse.ListOffsetsPartitionResponse
        topics = []
        for t in req.topics:
            out = R.ListOffsetsTopicResponse(name=t.name)
            topics.append(out)
            for p in t.partitions:
                found = replicas.list_offset(
                    t.name, p.partition_index, p.timestamp, replica_id=req.replica_id,
                    isolation_level=req.isolation_level, current_leader_epoch=p.current_leader_epoch)
                out.partitions.append(PR(partition_index=p.partition_index, error_code=found.error,
                                         timestamp=found.timestamp, offset=found.offset,
                                         leader_epoch=found.leader_epoch))
        return R(topics=topics)

    async def handle_offset_for_leader_epoch(header, req):
        R = M.OffsetForLeaderEpochResponse
        topics = []
        for t in req.topics:
            out = R.OffsetForLeaderTopicResult(topic=t.topic)
            topics.append(out)
            for p in t.partitions:
                error, epoch, end_offset = replicas.offset_for_leader_epoch(
                    t.topic, p.partition, p.current_leader_epoch, p.leader_epoch, req.replica_id)
                out.partitions.append(R.OffsetForLeaderTopicResult.EpochEndOffset(
                    error_code=error, partition=p.partition, leader_epoch=epoch, end_offset=end_offset))
        return R(topics=topics)

    async def handle_delete_records(header, req):
        R = M.DeleteRecordsResponse
        topics = []
        for t in req.topics:
            out = R.DeleteRecordsTopicResult(name=t.name)
            topics.append(out)
            for p in t.partitions:
                error, low_watermark = replicas.delete_records(t.name, p.partition_index, p.offset)
                out.partitions.append(R.DeleteRecordsTopicResult.DeleteRecordsPartitionResult(
                    partition_index=p.partition_index, low_watermark=low_watermark, error_code=error))
        return R(topics=topics)

    return [Api(2, 1, 8, handle_list_offsets), Api(23, 2, 4, handle_offset_for_leader_epoch),
            Api(21, 0, 2, handle_delete_records)]
