"""ListOffsets, OffsetForLeaderEpoch and DeleteRecords."""
from __future__ import annotations

from engine.errors import OffsetOutOfRangeError
from protocol import messages as M
from protocol.dispatch import Api
from protocol.errors import Error

LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED = -1, -2, -3, -4, -5


def apis(broker) -> list[Api]:
    def leader_log(name: str, index: int):
        topic = broker.image.topics.get(name)
        partition = topic.partitions.get(index) if topic else None
        if partition is None:
            return None, Error.UNKNOWN_TOPIC_OR_PARTITION, None
        if partition.leader != broker.node_id:
            return None, Error.NOT_LEADER_OR_FOLLOWER, partition
        log_ = broker.logs.get_log(name, index)
        if log_ is None:
            return None, Error.UNKNOWN_TOPIC_OR_PARTITION, partition
        return log_, Error.NONE, partition

    async def handle_list_offsets(header, req):
        R = M.ListOffsetsResponse
        topics = []
        for t in req.topics:
            out = R.ListOffsetsTopicResponse(name=t.name)
            topics.append(out)
            for p in t.partitions:
                pr = R.ListOffsetsTopicResponse.ListOffsetsPartitionResponse(
                    partition_index=p.partition_index, timestamp=-1, offset=-1)
                out.partitions.append(pr)
                log_, pr.error_code, partition = leader_log(t.name, p.partition_index)
                if log_ is None:
                    continue
                pr.leader_epoch = partition.leader_epoch
                if 0 <= p.current_leader_epoch < partition.leader_epoch:
                    pr.error_code = Error.FENCED_LEADER_EPOCH
                    continue
                ts = p.timestamp
                if ts == LATEST:
                    pr.offset = log_.log_end_offset if req.replica_id >= 0 else log_.high_watermark
                elif ts in (EARLIEST, EARLIEST_LOCAL):
                    pr.offset = log_.log_start_offset
                elif ts == LATEST_TIERED:
                    pr.offset = -1
                elif ts == MAX_TIMESTAMP:
                    found = log_.offset_of_max_timestamp()
                    if found is not None:
                        pr.offset, pr.timestamp = found
                elif ts >= 0:
                    found = log_.fetch_offset_by_timestamp(ts)
                    if found is not None and found[0] < log_.high_watermark:
                        pr.offset, pr.timestamp = found
                else:
                    pr.error_code = Error.INVALID_REQUEST
        return R(topics=topics)

    async def handle_offset_for_leader_epoch(header, req):
        R = M.OffsetForLeaderEpochResponse
        topics = []
        for t in req.topics:
            out = R.OffsetForLeaderTopicResult(topic=t.topic)
            topics.append(out)
            for p in t.partitions:
                pr = R.OffsetForLeaderTopicResult.EpochEndOffset(
                    partition=p.partition, leader_epoch=-1, end_offset=-1)
                out.partitions.append(pr)
                log_, pr.error_code, partition = leader_log(t.topic, p.partition)
                if log_ is None:
                    continue
                if 0 <= p.current_leader_epoch < partition.leader_epoch:
                    pr.error_code = Error.FENCED_LEADER_EPOCH
                    continue
                if p.current_leader_epoch > partition.leader_epoch:
                    pr.error_code = Error.UNKNOWN_LEADER_EPOCH
                    continue
                pr.leader_epoch, pr.end_offset = log_.leader_epoch_cache.end_offset_for(
                    p.leader_epoch, log_.log_end_offset)
        return R(topics=topics)

    async def handle_delete_records(header, req):
        R = M.DeleteRecordsResponse
        topics = []
        for t in req.topics:
            out = R.DeleteRecordsTopicResult(name=t.name)
            topics.append(out)
            for p in t.partitions:
                pr = R.DeleteRecordsTopicResult.DeleteRecordsPartitionResult(
                    partition_index=p.partition_index, low_watermark=-1)
                out.partitions.append(pr)
                log_, pr.error_code, _ = leader_log(t.name, p.partition_index)
                if log_ is None:
                    continue
                offset = log_.high_watermark if p.offset == -1 else p.offset
                try:
                    log_.maybe_increment_log_start_offset(offset)
                except OffsetOutOfRangeError:
                    pr.error_code = Error.OFFSET_OUT_OF_RANGE
                    continue
                pr.low_watermark = log_.log_start_offset  # segments below go on the next retention pass
        return R(topics=topics)

    return [Api(2, 1, 8, handle_list_offsets), Api(23, 2, 4, handle_offset_for_leader_epoch),
            Api(21, 0, 2, handle_delete_records)]
