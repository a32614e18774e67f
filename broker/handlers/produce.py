"""Produce: validate and append each partition's record batches in place.

The records of a partition stay a writable memoryview into the request frame; ext
validates them and patches offsets and the leader epoch in place; the log writes them in
one write. acks=0 gets no response; acks=1 and acks=-1 are answered after the append
(with one replica the high watermark moves with the log end offset).
"""
from __future__ import annotations

from engine.errors import (
    CorruptRecordError,
    DuplicateSequenceError,
    InvalidRecordError,
    InvalidTimestampError,
    RecordTooLargeError,
)
from engine.producer_state import OutOfOrderSequenceError, ProducerFencedError, UnknownProducerIdError
from protocol import messages as M
from protocol.dispatch import Api
from protocol.errors import Error

_ERRORS = [
    (CorruptRecordError, Error.CORRUPT_MESSAGE),
    (RecordTooLargeError, Error.MESSAGE_TOO_LARGE),
    (InvalidTimestampError, Error.INVALID_TIMESTAMP),
    (InvalidRecordError, Error.INVALID_RECORD),
    (OutOfOrderSequenceError, Error.OUT_OF_ORDER_SEQUENCE_NUMBER),
    (ProducerFencedError, Error.INVALID_PRODUCER_EPOCH),
    (UnknownProducerIdError, Error.UNKNOWN_PRODUCER_ID),
]


def apis(broker) -> list[Api]:
    async def handle_produce(header, req):
        R = M.ProduceResponse
        image = broker.image
        responses = []
        for topic in req.topic_data:
            name = topic.name
            if header.api_version >= 13:
                known = image.topics_by_id.get(topic.topic_id)
                name = known.name if known else None
            out = R.TopicProduceResponse(name=topic.name, topic_id=topic.topic_id)
            responses.append(out)
            for p in topic.partition_data:
                pr = R.TopicProduceResponse.PartitionProduceResponse(
                    index=p.index, base_offset=-1, log_append_time_ms=-1, log_start_offset=-1)
                out.partition_responses.append(pr)
                if req.acks not in (-1, 0, 1):
                    pr.error_code = Error.INVALID_REQUIRED_ACKS
                    continue
                log_ = broker.logs.get_log(name, p.index) if name else None
                partition = image.topics[name].partitions.get(p.index) if name in image.topics else None
                if log_ is None or partition is None:
                    pr.error_code = Error.UNKNOWN_TOPIC_OR_PARTITION if name else Error.UNKNOWN_TOPIC_ID
                    continue
                if partition.leader != broker.node_id:
                    pr.error_code = Error.NOT_LEADER_OR_FOLLOWER
                    continue
                if p.records is None or len(p.records) == 0:
                    pr.error_code = Error.INVALID_RECORD
                    continue
                try:
                    info = log_.append_as_leader(p.records, partition.leader_epoch)
                except DuplicateSequenceError as dup:  # a retry: answer with the original offsets
                    pr.error_code = Error.NONE
                    pr.base_offset = dup.first_offset
                    pr.log_start_offset = log_.log_start_offset
                    continue
                except Exception as e:  # mapped to the protocol's codes; others are bugs
                    for cls, code in _ERRORS:
                        if isinstance(e, cls):
                            pr.error_code = code
                            pr.error_message = str(e)
                            break
                    else:
                        raise
                    continue
                log_.update_high_watermark(log_.log_end_offset)
                broker.notify_appended(name, p.index)
                pr.error_code = Error.NONE
                pr.base_offset = info.first_offset
                pr.log_append_time_ms = info.log_append_time
                pr.log_start_offset = info.log_start_offset
        if req.acks == 0:
            return None
        return R(responses=responses)

    async def handle_init_producer_id(header, req):
        R = M.InitProducerIdResponse
        if req.transactional_id is not None:
            # Transactions need a transaction coordinator, which this broker does not run.
            return R(error_code=Error.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                     producer_id=-1, producer_epoch=-1)
        if req.producer_id >= 0:
            # KIP-360: an idempotent producer bumps its epoch to reset its sequences.
            if req.producer_epoch >= 32766:
                return R(error_code=Error.NONE, producer_id=await broker.allocate_producer_id(),
                         producer_epoch=0)
            return R(error_code=Error.NONE, producer_id=req.producer_id,
                     producer_epoch=req.producer_epoch + 1)
        try:
            producer_id = await broker.allocate_producer_id()
        except (ConnectionError, TimeoutError, RuntimeError):
            return R(error_code=Error.COORDINATOR_NOT_AVAILABLE, producer_id=-1, producer_epoch=-1)
        return R(error_code=Error.NONE, producer_id=producer_id, producer_epoch=0)

    return [Api(0, 3, 12, handle_produce), Api(22, 0, 5, handle_init_producer_id)]
