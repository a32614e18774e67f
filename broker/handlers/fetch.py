"""Fetch for consumers: file slices of each partition (protocol/net.py sends large ones
with sendfile).

A fetch waits (up to max_wait_ms) until min_bytes are available; it is woken by an
append to one of its partitions (broker/fetch_waiters.py), not by a timer. Responses
respect max_bytes and each partition's partition_max_bytes, but always carry at least
one whole batch of the first partition with data (KIP-74). Incremental fetch sessions
(KIP-227) are served from broker/fetch_session.py.
"""
from __future__ import annotations

import asyncio

from broker.fetch_session import FetchSessionCache, FetchSessionError
from engine.errors import OffsetOutOfRangeError
from engine.log import FETCH_HIGH_WATERMARK, FETCH_LOG_END, FETCH_TXN_COMMITTED
from protocol import messages as M
from protocol.dispatch import Api
from protocol.errors import Error


def _complete(fut) -> None:
    if not fut.done():
        fut.set_result(None)


def apis(broker) -> list[Api]:
    cache = FetchSessionCache(broker.config["max.incremental.fetch.session.cache.slots"])
    R = M.FetchResponse

    def read_partitions(wanted, req, version):
        """[(key, partition, PartitionData)] for (key, partition, offset, max_bytes) entries,
        the bytes they carry and the (topic name, partition) pairs read."""
        image = broker.image
        isolation = FETCH_TXN_COMMITTED if req.isolation_level == 1 else FETCH_HIGH_WATERMARK
        if req.replica_id >= 0:
            isolation = FETCH_LOG_END
        budget = req.max_bytes if req.max_bytes > 0 else 2**31 - 1
        total = 0
        out = []
        names = []
        for key, index, fetch_offset, max_bytes in wanted:
            if version >= 13:
                known = image.topics_by_id.get(key)
                name = known.name if known else None
            else:
                name = key
            # Empty records are sent as zero bytes, never null (clients index into them).
            pd = R.PartitionData(partition_index=index, high_watermark=-1, last_stable_offset=-1,
                                 log_start_offset=-1, records=b"")
            out.append((key, index, pd))
            names.append((name, index))
            log_ = broker.logs.get_log(name, index) if name else None
            if log_ is None:
                pd.error_code = Error.UNKNOWN_TOPIC_OR_PARTITION if name or version < 13 \
                    else Error.UNKNOWN_TOPIC_ID
                continue
            pd.high_watermark = log_.high_watermark
            pd.last_stable_offset = log_.high_watermark
            pd.log_start_offset = log_.log_start_offset
            try:
                info = log_.read(fetch_offset, max(min(max_bytes, budget - total), 0), isolation,
                                 min_one_message=total == 0)
            except OffsetOutOfRangeError:
                pd.error_code = Error.OFFSET_OUT_OF_RANGE
                continue
            if info.records is not None and info.size:
                pd.records = info.records
                total += info.size
        return out, total, names

    def respond(results, session, incremental, version):
        topics: dict = {}
        for key, index, pd in results:
            if incremental:
                entry = session.partitions.get((key, index))
                if entry is not None and not cache.changed(
                        entry, bool(pd.records), pd.error_code, pd.high_watermark,
                        pd.last_stable_offset, pd.log_start_offset):
                    continue
            elif session is not None:
                entry = session.partitions.get((key, index))
                if entry is not None:
                    cache.changed(entry, True, 0, pd.high_watermark, pd.last_stable_offset,
                                  pd.log_start_offset)
            topic = topics.get(key)
            if topic is None:
                topic = topics[key] = R.FetchableTopicResponse(
                    topic=key if version < 13 else "", topic_id=key if version >= 13 else bytes(16))
            topic.partitions.append(pd)
        return R(error_code=Error.NONE, session_id=session.session_id if session else 0,
                 responses=list(topics.values()))

    async def handle_fetch(header, req):
        version = header.api_version
        keyed = (lambda t: t.topic_id) if version >= 13 else (lambda t: t.topic)
        requested = [(keyed(t), p.partition, p.fetch_offset, p.partition_max_bytes)
                     for t in req.topics for p in t.partitions]
        forgotten = [(keyed(f), p) for f in (req.forgotten_topics_data or []) for p in f.partitions]
        try:
            session, incremental = cache.begin(req.session_id, req.session_epoch, requested, forgotten)
        except FetchSessionError as e:
            return R(error_code=e.code, session_id=0, responses=[])
        if session is not None:
            wanted = [(k, p, e.fetch_offset, e.max_bytes) for (k, p), e in session.partitions.items()]
        else:
            wanted = requested
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(req.max_wait_ms, 0) / 1000
        waiters = broker.fetch_waiters
        while True:
            results, total, names = read_partitions(wanted, req, version)
            remaining = deadline - loop.time()
            failed = any(pd.error_code for _, _, pd in results)
            if total >= max(req.min_bytes, 1) or remaining <= 0 or failed:
                return respond(results, session, incremental, version)
            waiter = waiters.wait(names)
            timer = loop.call_later(remaining, _complete, waiter)
            try:
                await waiter
            finally:
                timer.cancel()
                waiters.forget(names, waiter)

    return [Api(1, 4, 16, handle_fetch)]
