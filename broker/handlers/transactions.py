"""The transaction APIs: AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, WriteTxnMarkers,
DescribeTransactions and ListTransactions (InitProducerId with a transactional id and
DescribeProducers are produce.py's; FindCoordinator's TRANSACTION key type is groups.py's).

The producer's requests step the transaction coordinator's core (broker/transactions/) through
its runtime and are answered once the record of their transition is committed to
``__transaction_state``. A client's transaction version is 2 for EndTxn v5+ and
AddPartitionsToTxn v5+ (KIP-890: the epoch is bumped at each transaction's end), 0 below, and
0 for AddOffsetsToTxn at every version, as KafkaApis hands them to the coordinator.

AddPartitionsToTxn v0-v3 is a client's, for one transaction: a partition that does not exist
answers UNKNOWN_TOPIC_OR_PARTITION and the request's other partitions OPERATION_NOT_ATTEMPTED,
as Kafka answers. v4+ is a broker's, batched (``transactions``, one result each); with
``verify_only`` nothing is added: each partition answers whether the transaction holds it
(KIP-890's verification: TRANSACTION_ABORTABLE when it does not).

WriteTxnMarkers is the partition leader's side of the markers: each marker's partitions get
one control batch (engine/control.py), appended with acks=-1 as the coordinator's write
(ORIGIN_COORDINATOR) at the marker's transaction version (v2+; 0 below), answered per
partition; a ``__consumer_offsets`` partition's marker is
written by the group coordinator (``complete_transaction``), which applies or drops the
producer's transactional offsets with it.
"""
from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from broker.authorizer import ALLOW_ALL, BrokerAuthorizer
from broker.transactions.coordinator import OFFSETS_TOPIC, TxnReply
from engine.control import CONTROL_ABORT, CONTROL_COMMIT, build_end_txn_marker_batch
from engine.log import ORIGIN_COORDINATOR
from metadata.security import (
    ALTER,
    CLUSTER,
    CLUSTER_ACTION,
    CLUSTER_NAME,
    DESCRIBE,
    GROUP,
    READ,
    TOPIC,
    TRANSACTIONAL_ID,
    WRITE,
)
from protocol import messages as M
from protocol.context import RequestContext
from protocol.dispatch import Api
from protocol.errors import Error

if TYPE_CHECKING:
    from broker.groups.runtime import GroupCoordinatorRuntime
    from broker.transactions.runtime import TransactionCoordinatorRuntime
    from metadata.image import MetadataImage
    from replication.manager import ReplicaManager

MARKER_APPEND_TIMEOUT_MS = 30000  # Kafka's request.timeout.ms for the markers' acks=-1
# Never added to a transaction by a client: AddPartitionsToTxn refuses them whatever the ACLs.
INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC, "__transaction_state"})


def _now_ms() -> int:
    return int(time.time() * 1000)


def fenced_for(code: int, version: int, first_version: int) -> int:
    """PRODUCER_FENCED as INVALID_PRODUCER_EPOCH for a request version before
    ``first_version``, the first that knows it (KIP-588), as KafkaApis answers them."""
    return Error.INVALID_PRODUCER_EPOCH if code == Error.PRODUCER_FENCED and version < first_version else code


# The first versions of AddPartitionsToTxn, AddOffsetsToTxn and EndTxn that know PRODUCER_FENCED.
PRODUCER_FENCED_VERSION = 2
# AddOffsetsToTxn's transaction version, whatever the request's version: KafkaApis hands it to
# the coordinator at TV_0, as only a client below transaction version 2 sends it (at 2,
# TxnOffsetCommit v5 adds the group's partition itself).
ADD_OFFSETS_TRANSACTION_VERSION = 0


def _partitions(topics) -> list[tuple[str, int]]:
    return [(t.name, p) for t in topics for p in t.partitions]


class TransactionApis:
    """The transaction APIs over the services they use: the transaction coordinator's runtime,
    the metadata image (which partitions exist), the ReplicaManager (the markers' appends) and
    the group coordinator's runtime (the markers of ``__consumer_offsets``)."""

    def __init__(self, runtime: TransactionCoordinatorRuntime, image: Callable[[], MetadataImage],
                 replicas: ReplicaManager, groups: GroupCoordinatorRuntime | None,
                 authorizer: BrokerAuthorizer = ALLOW_ALL):
        self.runtime = runtime
        self.image = image
        self.replicas = replicas
        self.groups = groups
        self.authorizer = authorizer

    def apis(self) -> list[Api]:
        return [Api(24, 0, 5, self.handle_add_partitions_to_txn),
                Api(25, 0, 4, self.handle_add_offsets_to_txn),
                Api(26, 0, 5, self.handle_end_txn),
                Api(27, 1, 2, self.handle_write_txn_markers),
                Api(65, 0, 0, self.handle_describe_transactions),
                Api(66, 0, 2, self.handle_list_transactions)]

    async def _call(self, step, error_reply) -> Any:
        """Run a core step whose reply goes to a fresh waiter; its reply (REQUEST_TIMED_OUT
        should the runtime's guard give up on it)."""
        reply = await self.runtime.call(step)
        return error_reply(Error.REQUEST_TIMED_OUT) if reply is None else reply

    def _cluster_action(self, ctx: RequestContext) -> bool:
        """CLUSTER_ACTION on the cluster: what one broker's request to another needs."""
        return self.authorizer.authorize(ctx, CLUSTER_ACTION, CLUSTER, CLUSTER_NAME)

    def _exists(self, topic: str, partition: int) -> bool:
        t = self.image().topics.get(topic)
        return t is not None and partition in t.partitions

    # ---- AddPartitionsToTxn ----------------------------------------------------------------

    async def _add_one(self, tid: str, producer_id: int, producer_epoch: int, parts: list[tuple[str, int]],
                       verify_only: bool, tv: int,
                       denied: frozenset[str] = frozenset()) -> dict[tuple[str, int], int]:
        """``denied``: the topics the principal may not WRITE (a client's request only)."""
        missing = [tp for tp in parts if tp[0] not in denied and not self._exists(*tp)]
        if missing or denied:  # checked first, for every version (verify_only too), as KafkaApis does
            return {tp: Error.TOPIC_AUTHORIZATION_FAILED if tp[0] in denied
                    else Error.UNKNOWN_TOPIC_OR_PARTITION if tp in missing else Error.OPERATION_NOT_ATTEMPTED
                    for tp in parts}
        core = self.runtime.core
        if verify_only:
            return core.verify_partitions(tid, producer_id, producer_epoch, parts)
        reply = await self._call(lambda w: core.add_partitions(tid, producer_id, producer_epoch, parts,
                                                               _now_ms(), w, tv),
                                 TxnReply)
        return dict.fromkeys(parts, reply.error_code)

    async def handle_add_partitions_to_txn(self, ctx: RequestContext, req):
        """Authorized as KafkaApis does: a client's (v0-v3) needs WRITE on the transactional id
        (else every partition TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and on each topic (else its
        partitions TOPIC_AUTHORIZATION_FAILED, an internal topic always, the others then
        OPERATION_NOT_ATTEMPTED); a broker's (v4+) CLUSTER_ACTION on the cluster (else the
        request's error CLUSTER_AUTHORIZATION_FAILED)."""
        R = M.AddPartitionsToTxnResponse
        version = ctx.api_version
        tv = 2 if version >= 5 else 0
        if version < 4:
            tid = req.v3_and_below_transactional_id
            parts = _partitions(req.v3_and_below_topics)
            if not self.authorizer.authorize(ctx, WRITE, TRANSACTIONAL_ID, tid):
                return R(results_by_topic_v3_and_below=_topic_results(
                    dict.fromkeys(parts, Error.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)))
            names = {topic for topic, _ in parts}
            denied = frozenset(names - self.authorizer.filter(ctx, WRITE, TOPIC, names - INTERNAL_TOPICS))
            errors = await self._add_one(tid, req.v3_and_below_producer_id,
                                         req.v3_and_below_producer_epoch, parts, False, tv, denied)
            errors = {tp: fenced_for(code, version, PRODUCER_FENCED_VERSION) for tp, code in errors.items()}
            return R(results_by_topic_v3_and_below=_topic_results(errors))
        if not self._cluster_action(ctx):
            return R(error_code=Error.CLUSTER_AUTHORIZATION_FAILED, results_by_transaction=[])
        results = await asyncio.gather(*[
            self._add_one(t.transactional_id, t.producer_id, t.producer_epoch, _partitions(t.topics),
                          t.verify_only, tv) for t in req.transactions])
        return R(error_code=Error.NONE, results_by_transaction=[
            R.AddPartitionsToTxnResult(transactional_id=t.transactional_id, topic_results=_topic_results(e))
            for t, e in zip(req.transactions, results)])

    # ---- AddOffsetsToTxn, EndTxn ---------------------------------------------------------------

    async def handle_add_offsets_to_txn(self, ctx: RequestContext, req):
        """WRITE on the transactional id (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED), READ on
        the group (else GROUP_AUTHORIZATION_FAILED), as KafkaApis."""
        R = M.AddOffsetsToTxnResponse
        if not self.authorizer.authorize(ctx, WRITE, TRANSACTIONAL_ID, req.transactional_id):
            return R(error_code=Error.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        if not self.authorizer.authorize(ctx, READ, GROUP, req.group_id):
            return R(error_code=Error.GROUP_AUTHORIZATION_FAILED)
        core = self.runtime.core
        reply = await self._call(lambda w: core.add_offsets(
            req.transactional_id, req.producer_id, req.producer_epoch, req.group_id, _now_ms(), w,
            ADD_OFFSETS_TRANSACTION_VERSION),
            lambda code: R(error_code=code))
        return R(error_code=fenced_for(reply.error_code, ctx.api_version, PRODUCER_FENCED_VERSION))

    async def handle_end_txn(self, ctx: RequestContext, req):
        """WRITE on the transactional id, else TRANSACTIONAL_ID_AUTHORIZATION_FAILED."""
        R = M.EndTxnResponse
        if not self.authorizer.authorize(ctx, WRITE, TRANSACTIONAL_ID, req.transactional_id):
            return R(error_code=Error.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, producer_id=-1,
                     producer_epoch=-1)
        tv = 2 if ctx.api_version >= 5 else 0
        core = self.runtime.core
        reply = await self._call(lambda w: core.end_txn(
            req.transactional_id, req.producer_id, req.producer_epoch, req.committed, _now_ms(), w, tv),
            lambda code: R(error_code=code))
        return R(error_code=fenced_for(reply.error_code, ctx.api_version, PRODUCER_FENCED_VERSION),
                 producer_id=getattr(reply, "producer_id", -1),
                 producer_epoch=getattr(reply, "producer_epoch", -1))

    # ---- WriteTxnMarkers ------------------------------------------------------------------------

    async def handle_write_txn_markers(self, ctx: RequestContext, req):
        """A transaction coordinator's: ALTER on the cluster or else CLUSTER_ACTION, as
        KafkaApis checks it; without either every partition answers CLUSTER_AUTHORIZATION_FAILED."""
        R = M.WriteTxnMarkersResponse
        TR = R.WritableTxnMarkerResult.WritableTxnMarkerTopicResult
        PR = TR.WritableTxnMarkerPartitionResult
        if not (self.authorizer.authorize(ctx, ALTER, CLUSTER, CLUSTER_NAME, log_if_denied=False)
                or self._cluster_action(ctx)):
            refused = Error.CLUSTER_AUTHORIZATION_FAILED
            return R(markers=[R.WritableTxnMarkerResult(producer_id=marker.producer_id, topics=[
                TR(name=t.name, partitions=[PR(partition_index=p, error_code=refused)
                                            for p in t.partition_indexes]) for t in marker.topics])
                for marker in req.markers])
        now = _now_ms()
        errors: dict[tuple[int, str, int], int] = {}  # (marker index, topic, partition) -> error
        # the markers' appends, by transaction version (the partition checks a marker's epoch by it)
        appends: dict[int, tuple[list, list]] = {}
        offsets_writes = []
        for i, marker in enumerate(req.markers):
            tv = getattr(marker, "transaction_version", 0)
            entries, keys = appends.setdefault(tv, ([], []))
            control = CONTROL_COMMIT if marker.transaction_result else CONTROL_ABORT
            for t in marker.topics:
                for p in t.partition_indexes:
                    if t.name == OFFSETS_TOPIC:
                        offsets_writes.append(((i, t.name, p), marker))
                        continue
                    batch = bytearray(build_end_txn_marker_batch(control, marker.producer_id,
                                                                 marker.producer_epoch,
                                                                 marker.coordinator_epoch, now))
                    entries.append((t.name, p, batch))
                    keys.append((i, t.name, p))
        answers = await asyncio.gather(*[
            self.replicas.append_records(entries, -1, MARKER_APPEND_TIMEOUT_MS, origin=ORIGIN_COORDINATOR,
                                         transaction_version=tv)
            for tv, (entries, _) in appends.items()])
        for (_, keys), results in zip(appends.values(), answers):
            for key, result in zip(keys, results):
                errors[key] = result.error
        for key, marker in offsets_writes:
            complete = getattr(self.groups, "complete_transaction", None)
            if complete is None:
                errors[key] = Error.UNKNOWN_SERVER_ERROR
                continue
            errors[key] = await complete(key[2], marker.producer_id, marker.producer_epoch,
                                         marker.coordinator_epoch, marker.transaction_result,
                                         getattr(marker, "transaction_version", 0))
        out = []
        for i, marker in enumerate(req.markers):
            out.append(R.WritableTxnMarkerResult(producer_id=marker.producer_id, topics=[
                TR(name=t.name, partitions=[PR(partition_index=p, error_code=errors[(i, t.name, p)])
                                            for p in t.partition_indexes])
                for t in marker.topics]))
        return R(markers=out)

    # ---- DescribeTransactions, ListTransactions ------------------------------------------------

    async def handle_describe_transactions(self, ctx: RequestContext, req):
        """An id the principal may not DESCRIBE answers TRANSACTIONAL_ID_AUTHORIZATION_FAILED;
        the topics it may not DESCRIBE are left out of the others (KafkaApis)."""
        R = M.DescribeTransactionsResponse
        TS = R.TransactionState
        states = []
        for tid in req.transactional_ids:
            if not self.authorizer.authorize(ctx, DESCRIBE, TRANSACTIONAL_ID, tid):
                states.append(TS(transactional_id=tid,
                                 error_code=Error.TRANSACTIONAL_ID_AUTHORIZATION_FAILED))
                continue
            d = self.runtime.core.describe(tid)
            held = d.pop("topics", [])
            visible = self.authorizer.filter(ctx, DESCRIBE, TOPIC, [t for t, _ in held])
            topics = [TS.TopicData(topic=t, partitions=ps) for t, ps in held if t in visible]
            states.append(TS(**d, topics=topics))
        return R(transaction_states=states)

    async def handle_list_transactions(self, ctx: RequestContext, req):
        R = M.ListTransactionsResponse
        version = ctx.api_version
        pattern = req.transactional_id_pattern if version >= 2 else None
        try:
            listed = self.runtime.core.list_transactions(
                req.state_filters, req.producer_id_filters, _now_ms(),
                req.duration_filter if version >= 1 else -1, pattern or None)
        except re.error:
            return R(error_code=Error.INVALID_REQUEST, unknown_state_filters=[], transaction_states=[])
        # only the ids the principal may DESCRIBE (KafkaApis)
        visible = self.authorizer.filter(ctx, DESCRIBE, TRANSACTIONAL_ID,
                                         [tid for tid, _, _ in listed["transaction_states"]])
        return R(error_code=listed["error_code"], unknown_state_filters=listed["unknown_state_filters"],
                 transaction_states=[R.TransactionState(transactional_id=tid, producer_id=pid,
                                                        transaction_state=state)
                                     for tid, pid, state in listed["transaction_states"] if tid in visible])


def _topic_results(errors: dict[tuple[str, int], int]) -> list:
    R = M.AddPartitionsToTxnResponse
    by_topic: dict[str, list] = {}
    for (topic, p), code in errors.items():
        by_topic.setdefault(topic, []).append(
            R.AddPartitionsToTxnPartitionResult(partition_index=p, partition_error_code=code))
    return [R.AddPartitionsToTxnTopicResult(name=t, results_by_partition=ps) for t, ps in by_topic.items()]
