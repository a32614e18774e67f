"""Produce: append each partition's record batches through the ReplicaManager.

Each partition's records are checked first as Kafka's ProduceRequest.validateRecords does
(``check_records``), and a partial batch after the first is trimmed. The records of a
partition stay a writable memoryview into the request frame; ext validates them and patches
offsets and the leader epoch in place; the log writes them in one write. acks=0 gets no
response; acks=1 is answered after the leader's append; acks=-1 once the high watermark
passed the batch (replication/purgatory.py), or with NOT_ENOUGH_REPLICAS (nothing written),
NOT_ENOUGH_REPLICAS_AFTER_APPEND or REQUEST_TIMED_OUT (timeout_ms); that wait does not hold
the connection (the answer is Deferred: the client's next requests are appended behind this
one meanwhile, and answers keep their order). NOT_LEADER_OR_FOLLOWER carries the current
leader and, in node_endpoints, its endpoint on the listener the request came on (KIP-951,
v10+), so the producer moves at once.

InitProducerId hands out idempotent producer ids (the controller allocates blocks of them):
each call without a transactional id gets a new one at epoch 0, as Kafka 4.x. With a
transactional id it is the transaction coordinator's (broker/transactions/: epoch bump, zombie
fencing, KIP-360 recovery; PRODUCER_FENCED is INVALID_PRODUCER_EPOCH below v4).
DescribeProducers shows the state a partition's leader keeps for each producer, with the start
offset of its open transaction.
"""
from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from broker.authorizer import ALLOW_ALL, BrokerAuthorizer
from broker.transactions.runtime import ADD_PARTITION_PRODUCE_VERSION, verification_error
from engine.producer_state import SENTINEL_GUARD
from ext.batch import (
    COMPRESSION_ZSTD,
    LOG_OVERHEAD,
    MAGIC,
    CorruptRecordError,
    TruncatedBatchError,
    read_header,
    read_prefix,
)
from metadata.security import CLUSTER, CLUSTER_NAME, IDEMPOTENT_WRITE, READ, TOPIC, TRANSACTIONAL_ID, WRITE
from protocol import messages as M
from protocol.context import RequestContext
from protocol.dispatch import Api, Deferred
from protocol.errors import Error

if TYPE_CHECKING:
    from broker.transactions.runtime import TransactionCoordinatorRuntime
    from replication.manager import ReplicaManager

INIT_PRODUCER_FENCED_VERSION = 4  # the first InitProducerId version that knows PRODUCER_FENCED
RECORD_OVERHEAD_V0 = 14  # Kafka's LegacyRecord.RECORD_OVERHEAD_V0: the smallest size a header may give
TRANSACTIONAL_FLAG = 0x10  # a magic 2 batch's attributes: the batch is part of a transaction


class _Corrupt(Exception):
    pass


def _next_batch(records, at: int, size: int) -> tuple[int, int, int | None] | None:
    """Kafka's ByteBufferLogInputStream.nextBatchSize and nextBatch for the bytes from ``at``:
    (the size of the whole batch there, its magic, its attributes: None unless the bytes
    reach them), None where the bytes end before the batch does. Raises _Corrupt for a
    header nothing can be read past."""
    prefix = read_prefix(records, at) if size - at >= LOG_OVERHEAD else None
    if prefix is None:
        return None
    _, length, magic, attributes = prefix
    if length < RECORD_OVERHEAD_V0:
        raise _Corrupt(f"Record size {length} is less than the minimum record overhead "
                       f"({RECORD_OVERHEAD_V0})")
    if magic is None:
        return None
    if not 0 <= magic <= MAGIC:
        raise _Corrupt(f"Invalid magic found in record: {magic}")
    whole = LOG_OVERHEAD + length
    return (whole, magic, attributes) if size - at >= whole else None


def check_records(version: int, records) -> tuple[int, str | None, int]:
    """Kafka's ProduceRequest.validateRecords (v3+) for one partition's records: exactly one
    record batch, of magic 2, and ZStandard only from v7. Kafka's batch iterator ends at a
    batch the bytes stop short of, so a partial batch after the first is no second batch:
    Kafka's log appends the valid bytes only (trimInvalidBytes), and so does ours. A
    malformed first batch is left to the log's validation (CORRUPT_MESSAGE).
    (error, message, how many leading bytes to append)."""
    size = len(records) if records is not None else 0
    try:
        first = _next_batch(records, 0, size)
        if first is None:
            return Error.INVALID_RECORD, (f"Produce requests with version {version} must have at "
                                          "least one record batch per partition"), 0
        whole, magic, attributes = first
        if magic != MAGIC:
            return Error.INVALID_RECORD, (f"Produce requests with version {version} are only allowed to "
                                          "contain record batches with magic version 2"), 0
        if version < 7 and attributes is not None and attributes & 0x07 == COMPRESSION_ZSTD:
            return Error.UNSUPPORTED_COMPRESSION_TYPE, (f"Produce requests with version {version} are not "
                                                        "allowed to use ZStandard compression"), 0
        if _next_batch(records, whole, size) is not None:
            return Error.INVALID_RECORD, (f"Produce requests with version {version} are only allowed to "
                                          "contain exactly one record batch per partition"), 0
    except _Corrupt as e:
        return Error.CORRUPT_MESSAGE, str(e), 0
    return Error.NONE, None, whole


def has_transactional_records(req) -> bool:
    """Kafka's RequestUtils.hasTransactionalRecords: is any partition's first batch
    transactional."""
    for topic in req.topic_data:
        for p in topic.partition_data:
            prefix = read_prefix(p.records, 0) if p.records is not None and len(p.records) else None
            if prefix is not None and prefix[2] == MAGIC and prefix[3] is not None \
                    and prefix[3] & TRANSACTIONAL_FLAG:
                return True
    return False


class ProduceHandlers:
    """Produce, InitProducerId and DescribeProducers over the services they use: the
    ReplicaManager, the transaction coordinator (a getter: None until it started), the
    producer id allocator (the controller's blocks) and the authorizer."""

    def __init__(self, replicas: ReplicaManager,
                 transactions: Callable[[], TransactionCoordinatorRuntime | None],
                 allocate_producer_id: Callable[[], Awaitable[int]],
                 authorizer: BrokerAuthorizer = ALLOW_ALL):
        self.replicas = replicas
        self.transactions = transactions
        self.allocate_producer_id = allocate_producer_id
        self.authorizer = authorizer

    def apis(self) -> list[Api]:
        return [Api(0, 3, 12, self.produce), Api(22, 0, 5, self.init_producer_id),
                Api(61, 0, 0, self.describe_producers)]

    async def produce(self, ctx: RequestContext, req):
        """Authorized as Kafka's KafkaApis.handleProduceRequest: transactional records need
        WRITE on the transactional id (else every partition answers
        TRANSACTIONAL_ID_AUTHORIZATION_FAILED), each topic WRITE (else its partitions answer
        TOPIC_AUTHORIZATION_FAILED, whether the topic exists or not)."""
        R = M.ProduceResponse
        PR = R.TopicProduceResponse.PartitionProduceResponse
        version = ctx.api_version
        replicas = self.replicas
        denied: set[str] = set()
        authorizer = self.authorizer
        if authorizer.enabled:
            if has_transactional_records(req) and (req.transactional_id is None or not authorizer.authorize(
                    ctx, WRITE, TRANSACTIONAL_ID, req.transactional_id)):
                return None if req.acks == 0 else refused(req, Error.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
            names = {t.name for t in req.topic_data}
            denied = names - authorizer.filter(ctx, WRITE, TOPIC, names)
        responses = []
        entries, slots = [], []
        for topic in req.topic_data:
            name = replicas.topic_name(topic.topic_id) if version >= 13 else topic.name
            out = R.TopicProduceResponse(name=topic.name, topic_id=topic.topic_id)
            responses.append(out)
            for p in topic.partition_data:
                pr = PR(index=p.index, base_offset=-1, log_append_time_ms=-1, log_start_offset=-1)
                out.partition_responses.append(pr)
                if name is None:
                    pr.error_code = Error.UNKNOWN_TOPIC_ID
                elif name in denied:
                    pr.error_code = Error.TOPIC_AUTHORIZATION_FAILED
                elif req.acks not in (-1, 0, 1):
                    pr.error_code = Error.INVALID_REQUIRED_ACKS
                else:
                    code, message, valid = check_records(version, p.records)
                    if code != Error.NONE:
                        pr.error_code, pr.error_message = code, message
                        continue
                    records = p.records if valid == len(p.records) else p.records[:valid]
                    entries.append((name, p.index, records))
                    slots.append(pr)
        guards = None
        if entries and version >= 3 and req.transactional_id is not None:
            entries, slots, guards = await self.verified(req.transactional_id, version, entries, slots)
        if not entries:
            results = []
        elif guards is None:
            results = replicas.append_records_locally(entries, req.acks)
        else:
            results = replicas.append_records_locally(entries, req.acks, guards=guards)
        if req.acks == 0:
            return None
        if req.acks == -1 and any(not r.error for r in results):
            # Appended in the connection's order; the wait for replication lets the
            # connection's next requests in (protocol/dispatch.py, Deferred). It keeps no view
            # of the request frame: the listener's memory pool (queued.max.request.bytes) has
            # counted that frame free since this handler returned, so it must really be free.
            # The answer is made from inside the call that moves the high watermark (or the
            # timeout's timer): no task per produce.
            entries = [(name, index, None) for name, index, _ in entries]
            body = asyncio.get_running_loop().create_future()

            def replicated() -> None:
                if body.done():
                    return
                try:
                    body.set_result(self.answer(ctx, responses, entries, slots, results))
                except Exception as e:  # the Dispatcher logs it and closes the connection
                    body.set_exception(e)

            replicas.when_replicated(entries, results, req.timeout_ms, replicated)
            return Deferred(body)
        return self.answer(ctx, responses, entries, slots, results)

    async def verified(self, transactional_id: str, version: int, entries: list, slots: list):
        """KIP-890's verification (transaction.partition.verification.enable): a transactional
        batch of a producer with no open transaction on its partition is appended only once
        the transaction's coordinator says the partition was added to the transaction (from
        produce v12, KIP-890 part 2, the coordinator is asked to add it: AddPartitionsToTxn v5,
        the client of transaction version 2 sends no AddPartitionsToTxn itself); the others
        answer the coordinator's refusal as Kafka maps it. Each transactional entry's
        guard (engine/producer_state.py's VerificationGuard) is taken before the coordinator is
        asked and goes with its append, which refuses it if a marker of the producer landed
        meanwhile. The entries, slots and guards to append (guards None: verification off)."""
        runtime = self.transactions()
        if runtime is None or not runtime.verification_enabled:
            return entries, slots, None
        replicas = self.replicas
        guards: list = [None] * len(entries)
        now = replicas.clock()
        unverified: dict[tuple[int, int], list[int]] = {}  # (producer id, epoch) -> entry indexes
        for i, (name, index, records) in enumerate(entries):
            try:
                batch = read_header(records, 0)
            except (CorruptRecordError, TruncatedBatchError, ValueError):
                continue  # the log's validation answers it
            if not batch.is_transactional or batch.is_control:
                continue
            log_ = replicas.local_log(name, index)
            if log_ is None:
                continue  # not the leader: the append answers it
            guard = guards[i] = log_.producer_state.start_verification(
                batch.producer_id, batch.producer_epoch, now)
            if guard is SENTINEL_GUARD:
                continue  # its transaction is open here: the partition was verified before
            unverified.setdefault((batch.producer_id, batch.producer_epoch), []).append(i)
        if not unverified:
            return entries, slots, guards
        refused: set[int] = set()
        for (producer_id, producer_epoch), indexes in unverified.items():
            tps = [(entries[i][0], entries[i][1]) for i in indexes]
            if version >= ADD_PARTITION_PRODUCE_VERSION:
                errors = await runtime.verify(transactional_id, producer_id, producer_epoch, tps, add=True)
            else:
                errors = await runtime.verify(transactional_id, producer_id, producer_epoch, tps)
            for i, tp in zip(indexes, tps):
                code = errors.get(tp, Error.NONE)
                if code != Error.NONE:
                    slots[i].error_code = verification_error(code, version)
                    refused.add(i)
        if not refused:
            return entries, slots, guards
        keep = [i for i in range(len(entries)) if i not in refused]
        return [entries[i] for i in keep], [slots[i] for i in keep], [guards[i] for i in keep]

    def answer(self, ctx: RequestContext, responses: list, entries: list, slots: list, results: list):
        R = M.ProduceResponse
        PR = R.TopicProduceResponse.PartitionProduceResponse
        version = ctx.api_version
        replicas = self.replicas
        leaders = {}
        for (name, index, _), pr, result in zip(entries, slots, results):
            pr.error_code = result.error
            pr.error_message = result.error_message
            if result.record_errors:  # Kafka's RecordValidationException (KIP-467, v8+)
                pr.record_errors = [
                    PR.BatchIndexAndErrorMessage(batch_index=index, batch_index_error_message=why)
                    for index, why in result.record_errors]
            if result.error in (Error.NONE, Error.NOT_ENOUGH_REPLICAS_AFTER_APPEND, Error.REQUEST_TIMED_OUT):
                pr.base_offset = result.base_offset
                pr.log_append_time_ms = result.log_append_time
                pr.log_start_offset = result.log_start_offset
            if result.error == Error.NOT_LEADER_OR_FOLLOWER and version >= 10:
                leader_id, leader_epoch = replicas.current_leader(name, index)
                pr.current_leader = PR.LeaderIdAndEpoch(leader_id=leader_id, leader_epoch=leader_epoch)
                node = replicas.leader_node(leader_id, ctx.listener_name)
                if node is not None:
                    leaders[leader_id] = node
        endpoints = [R.NodeEndpoint(node_id=node_id, host=host, port=port, rack=rack)
                     for node_id, (host, port, rack) in sorted(leaders.items())]
        return R(responses=responses, node_endpoints=endpoints)

    async def init_producer_id(self, ctx: RequestContext, req):
        """Authorized as Kafka's KafkaApis.handleInitProducerIdRequest: a transactional
        producer needs WRITE on its transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), an
        idempotent one IDEMPOTENT_WRITE on the cluster or WRITE on some topic
        (CLUSTER_AUTHORIZATION_FAILED)."""
        R = M.InitProducerIdResponse
        authorizer = self.authorizer
        if authorizer.enabled:
            if req.transactional_id is not None:
                if not authorizer.authorize(ctx, WRITE, TRANSACTIONAL_ID, req.transactional_id):
                    return R(error_code=Error.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, producer_id=-1,
                             producer_epoch=-1)
            elif not authorizer.authorize(ctx, IDEMPOTENT_WRITE, CLUSTER, CLUSTER_NAME, log_if_denied=False) \
                    and not authorizer.authorize_any(ctx, WRITE, TOPIC):
                return R(error_code=Error.CLUSTER_AUTHORIZATION_FAILED, producer_id=-1, producer_epoch=-1)
        if req.transactional_id is not None:
            runtime = self.transactions()
            if runtime is None:  # not started yet
                return R(error_code=Error.COORDINATOR_NOT_AVAILABLE, producer_id=-1, producer_epoch=-1)
            # producer_id and producer_epoch are -1 below v3 (the schema's defaults)
            reply = await runtime.call(lambda waiter: runtime.core.init_producer_id(
                req.transactional_id, req.transaction_timeout_ms, req.producer_id, req.producer_epoch,
                int(time.time() * 1000), waiter))
            if reply is None:
                return R(error_code=Error.REQUEST_TIMED_OUT, producer_id=-1, producer_epoch=-1)
            code = reply.error_code
            if code == Error.PRODUCER_FENCED and ctx.api_version < INIT_PRODUCER_FENCED_VERSION:
                code = Error.INVALID_PRODUCER_EPOCH  # as KafkaApis answers the versions before it
            return R(error_code=code, producer_id=reply.producer_id, producer_epoch=reply.producer_epoch)
        # Without a transactional id Kafka 4.x allocates a new producer id at epoch 0, whatever
        # producer id and epoch the request gives.
        try:
            producer_id = await self.allocate_producer_id()
        except (ConnectionError, TimeoutError, RuntimeError):
            return R(error_code=Error.COORDINATOR_NOT_AVAILABLE, producer_id=-1, producer_epoch=-1)
        return R(error_code=Error.NONE, producer_id=producer_id, producer_epoch=0)

    async def describe_producers(self, ctx: RequestContext, req):
        """The producers each partition's leader keeps state for (Kafka's DescribeProducers):
        NOT_LEADER_OR_FOLLOWER on any other replica. current_txn_start_offset is the first
        offset of the producer's open transaction, -1 when none; coordinator_epoch that of
        the last marker written for it, -1 when none. A topic needs READ
        (TOPIC_AUTHORIZATION_FAILED for each of its partitions)."""
        R = M.DescribeProducersResponse
        topics = []
        for t in req.topics:
            partitions = []
            allowed = self.authorizer.authorize(ctx, READ, TOPIC, t.name)
            for index in t.partition_indexes:
                if not allowed:
                    partitions.append(R.TopicResponse.PartitionResponse(
                        partition_index=index, error_code=Error.TOPIC_AUTHORIZATION_FAILED))
                    continue
                error, producers = self.replicas.active_producers(t.name, index)
                partitions.append(R.TopicResponse.PartitionResponse(
                    partition_index=index, error_code=error, active_producers=[
                        R.TopicResponse.PartitionResponse.ProducerState(
                            producer_id=p.producer_id, producer_epoch=p.epoch, last_sequence=p.last_sequence,
                            last_timestamp=p.last_timestamp,
                            coordinator_epoch=getattr(p, "coordinator_epoch", -1),
                            current_txn_start_offset=getattr(p, "current_txn_start_offset", -1))
                        for p in producers]))
            topics.append(R.TopicResponse(name=t.name, partitions=partitions))
        return R(topics=topics)


def refused(req, code: int):
    """Kafka's ProduceRequest.getErrorResponse: every partition of the request answers ``code``."""
    R = M.ProduceResponse
    PR = R.TopicProduceResponse.PartitionProduceResponse
    return R(responses=[R.TopicProduceResponse(name=t.name, topic_id=t.topic_id, partition_responses=[
        PR(index=p.index, error_code=code, base_offset=-1, log_append_time_ms=-1, log_start_offset=-1)
        for p in t.partition_data]) for t in req.topic_data])
