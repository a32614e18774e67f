"""Fetch for consumers: file slices of each partition, sent with sendfile.

A fetch waits (up to max_wait_ms) until min_bytes are available; it is woken by every
append, not by a timer. Responses respect max_bytes and each partition's
partition_max_bytes, but always carry at least one whole batch of the first partition
with data (KIP-74). Fetch sessions (KIP-227) are declined: session id 0 tells the client
to keep sending full fetch requests.
"""
from __future__ import annotations

import asyncio

from engine.errors import OffsetOutOfRangeError
from engine.log import FETCH_HIGH_WATERMARK, FETCH_LOG_END, FETCH_TXN_COMMITTED
from protocol import messages as M
from protocol.dispatch import Api
from protocol.errors import Error


def apis(broker) -> list[Api]:
    def read_all(req, version):
        R = M.FetchResponse
        image = broker.image
        isolation = FETCH_TXN_COMMITTED if req.isolation_level == 1 else FETCH_HIGH_WATERMARK
        if req.replica_id >= 0:
            isolation = FETCH_LOG_END
        budget = req.max_bytes if req.max_bytes > 0 else 2**31 - 1
        total = 0
        responses = []
        for topic in req.topics:
            name = topic.topic
            if version >= 13:
                known = image.topics_by_id.get(topic.topic_id)
                name = known.name if known else None
            out = R.FetchableTopicResponse(topic=topic.topic, topic_id=topic.topic_id)
            responses.append(out)
            for p in topic.partitions:
                # Empty records are sent as zero bytes, never null (clients index into them).
                pd = R.PartitionData(partition_index=p.partition, high_watermark=-1,
                                     last_stable_offset=-1, log_start_offset=-1, records=b"")
                out.partitions.append(pd)
                log_ = broker.logs.get_log(name, p.partition) if name else None
                if log_ is None:
                    pd.error_code = Error.UNKNOWN_TOPIC_OR_PARTITION if name else Error.UNKNOWN_TOPIC_ID
                    continue
                pd.high_watermark = log_.high_watermark
                pd.last_stable_offset = log_.high_watermark
                pd.log_start_offset = log_.log_start_offset
                limit = min(p.partition_max_bytes, budget - total)
                try:
                    info = log_.read(p.fetch_offset, max(limit, 0), isolation,
                                     min_one_message=total == 0)
                except OffsetOutOfRangeError:
                    pd.error_code = Error.OFFSET_OUT_OF_RANGE
                    continue
                pd.error_code = Error.NONE
                if info.records is not None and info.size:
                    pd.records = info.records
                    total += info.size
        return R(session_id=0, responses=responses), total

    async def handle_fetch(header, req):
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(req.max_wait_ms, 0) / 1000
        while True:
            waiter = broker.appended
            response, total = read_all(req, header.api_version)
            remaining = deadline - loop.time()
            if total >= max(req.min_bytes, 1) or remaining <= 0 or _has_error(response):
                return response
            try:
                await asyncio.wait_for(waiter.wait(), remaining)
            except TimeoutError:
                pass

    return [Api(1, 4, 16, handle_fetch)]


def _has_error(response) -> bool:
    return any(p.error_code for t in response.responses for p in t.partitions)
