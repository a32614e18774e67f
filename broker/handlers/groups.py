"""The classic group protocol and offset storage: FindCoordinator, JoinGroup, SyncGroup,
Heartbeat, LeaveGroup, OffsetCommit, TxnOffsetCommit, OffsetFetch, OffsetDelete,
DescribeGroups, ListGroups, DeleteGroups;
and the consumer group protocol (KIP-848): ConsumerGroupHeartbeat, ConsumerGroupDescribe,
served as Kafka's KafkaApis serves them (isConsumerGroupProtocolEnabled): while
``group.coordinator.rebalance.protocols`` lists ``consumer`` and the cluster's finalized
group.version is at least 1 (a new cluster bootstraps 1; read from the image at each request).
Otherwise ConsumerGroupHeartbeat answers UNSUPPORTED_VERSION and ConsumerGroupDescribe the same
for every group asked, both still advertised in ApiVersions; the classic protocol is served
whatever the level.

Requests become calls on the coordinator core (broker/groups/coordinator.py); the shell
(broker/groups/runtime.py) appends what the core asks for and completes parked requests.
Every group request first makes sure ``__consumer_offsets`` exists (it is created through
the controller on first use) and answers COORDINATOR_NOT_AVAILABLE until it does.
FindCoordinator names the coordinator at its endpoint on the listener the request came on, as
Kafka's does; a coordinator without that listener is COORDINATOR_NOT_AVAILABLE. Its key type
TRANSACTION names the transaction coordinator of a transactional id (the leader of the id's
``__transaction_state`` partition, the topic created on first use), when this broker runs one.

TxnOffsetCommit (KIP-98, KIP-447) is answered as Kafka 4.x's KafkaApis and group coordinator
answer it: partitions the metadata image lacks UNKNOWN_TOPIC_OR_PARTITION, the rest by the
core's validation, once the transactional batch of its records is committed; the offsets are
then pending in the transaction, visible to OffsetFetch only once its COMMIT marker is, and
OffsetFetch with require_stable answers UNSTABLE_OFFSET_COMMIT for a partition with one. Before
anything is written the transaction coordinator is asked whether the transaction holds the
group's partition of ``__consumer_offsets`` (KIP-890, transaction.partition.verification.enable,
as Kafka's GroupCoordinatorService does): a TxnOffsetCommit without AddOffsetsToTxn answers
INVALID_TXN_STATE (TRANSACTION_ABORTABLE from v4), a fenced epoch INVALID_PRODUCER_EPOCH, an
unreachable transaction coordinator COORDINATOR_LOAD_IN_PROGRESS.

Every request that steps the core (JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit,
DeleteGroups, ConsumerGroupHeartbeat, and OffsetFetch with require_stable) is answered only
once the high watermark of its group's partition passed everything written there so far; if
that write fails, the request answers the error the shell maps it to (COORDINATOR_NOT_AVAILABLE,
NOT_COORDINATOR, ...). OffsetFetch without require_stable reads the committed offsets at once.

The reads of group state (DescribeGroups, ListGroups, ConsumerGroupDescribe) are answered the
same way: read at once, released once everything written to the partitions they read was
committed, so an answer never shows a member or a state that a failover could take back
(Kafka 4.x reads group state as of the last committed offset). A group whose partition's
write fails answers that write's error; ListGroups answers COORDINATOR_NOT_AVAILABLE and no
groups if any of its partitions' writes fails.
"""
from __future__ import annotations

from collections.abc import Callable, Collection
from typing import TYPE_CHECKING

from broker.authorizer import ALLOW_ALL, BrokerAuthorizer
from broker.groups.runtime import _now_ms
from metadata.security import (
    CLUSTER,
    CLUSTER_NAME,
    DELETE,
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

GROUP_KEY, TRANSACTION_KEY = 0, 1
NO_OFFSET = -1
GROUP_VERSION = "group.version"


def client_host(ctx: RequestContext) -> str:
    """A member's host as Kafka records it, its connection's InetAddress.toString: ``/127.0.0.1``
    (empty for a request made inside the broker)."""
    return "/" + ctx.client_address if ctx.client_address else ""


class GroupApis:
    """The group APIs over the services they use: the group coordinator's runtime, the
    transaction coordinator's (FindCoordinator of a transactional id; None where the broker
    runs none), the metadata image, and the listener that names endpoints for a request that
    came on none (a call from inside the broker)."""

    def __init__(self, groups: GroupCoordinatorRuntime, transactions: TransactionCoordinatorRuntime | None,
                 image: Callable[[], MetadataImage], listener_name: str,
                 authorizer: BrokerAuthorizer = ALLOW_ALL):
        self.groups = groups
        self.transactions = transactions
        self.image = image
        self.listener_name = listener_name
        self.authorizer = authorizer

    def apis(self) -> list[Api]:
        return [
            Api(68, 0, 1, self.handle_consumer_group_heartbeat),
            Api(69, 0, 0, self.handle_consumer_group_describe),
            Api(10, 0, 6, self.handle_find_coordinator),
            Api(11, 0, 9, self.handle_join_group),
            Api(14, 0, 5, self.handle_sync_group),
            Api(12, 0, 4, self.handle_heartbeat),
            Api(13, 0, 5, self.handle_leave_group),
            Api(8, 2, 9, self.handle_offset_commit),
            Api(28, 0, 5, self.handle_txn_offset_commit),
            Api(9, 1, 9, self.handle_offset_fetch),
            Api(15, 0, 6, self.handle_describe_groups),
            Api(16, 0, 5, self.handle_list_groups),
            Api(42, 0, 2, self.handle_delete_groups),
            Api(47, 0, 0, self.handle_offset_delete),
        ]

    def _consumer_protocol_enabled(self) -> bool:
        """``consumer`` in group.coordinator.rebalance.protocols, and group.version 1
        (GroupVersion.isConsumerRebalanceProtocolSupported; absent is 0)."""
        return self.groups.consumer_protocol and self.image().features.get(GROUP_VERSION, 0) >= 1

    def _coordinator_error(self, group_id: str) -> int:
        if not self.groups.ensure_offsets_topic():
            return Error.COORDINATOR_NOT_AVAILABLE
        return Error.NONE

    async def _settled(self, partitions) -> dict[int, int]:
        """Wait until everything written to each partition so far is committed (state read
        before the wait is then committed state): NONE or the error to answer, per partition."""
        return {p: await self.groups.committed(p) for p in set(partitions)}

    async def _released(self, group_ids, described, failed_answer) -> list:
        """``described`` (one answer per group id, read now), once the state read is committed;
        a group whose partition's write failed answers ``failed_answer(group id, code)``."""
        failed = await self._settled(self.groups.partition_of(g) for g in group_ids)
        out = []
        for group_id, answer in zip(group_ids, described):
            code = failed[self.groups.partition_of(group_id)]
            out.append(answer if answer.error_code != Error.NONE or code == Error.NONE
                       else failed_answer(group_id, code))
        return out

    def _with_operations(self, ctx: RequestContext, described: list, asked: bool) -> None:
        """include_authorized_operations: each group described without error gets the bit set
        of what the principal may do to it (Kafka's KafkaApis); the others keep the default."""
        if asked:
            for group in described:
                if group.error_code == Error.NONE:
                    group.authorized_operations = self.authorizer.authorized_operations(ctx, GROUP,
                                                                                        group.group_id)

    def _may(self, ctx: RequestContext, operation: int, resource_type: int, name: str) -> bool:
        return self.authorizer.authorize(ctx, operation, resource_type, name)

    def _unauthorized_topics(self, ctx: RequestContext, operation: int, topics) -> set[str]:
        """The request's topics the principal may not perform ``operation`` on."""
        names = {t.name for t in topics}
        return names - self.authorizer.filter(ctx, operation, TOPIC, names)

    # ---- FindCoordinator ---------------------------------------------------------------

    def _find(self, ctx: RequestContext, key: str, key_type: int,
              listener: str) -> tuple[int, str | None, int, str, int]:
        """(error, message, node id, host, port), the host and port on ``listener``: the
        coordinator is where the client reaches it on the listener it asked on. The principal
        must be allowed to DESCRIBE the group or transactional id (Kafka's KafkaApis.getCoordinator)."""
        if key_type == GROUP_KEY and not self._may(ctx, DESCRIBE, GROUP, key):
            return Error.GROUP_AUTHORIZATION_FAILED, "Group authorization failed.", -1, "", -1
        if key_type == TRANSACTION_KEY and not self._may(ctx, DESCRIBE, TRANSACTIONAL_ID, key):
            return (Error.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, "Transactional Id authorization failed.",
                    -1, "", -1)
        transactions = self.transactions
        coordinator: GroupCoordinatorRuntime | TransactionCoordinatorRuntime
        if key_type == GROUP_KEY:
            coordinator, ensure, what = self.groups, self.groups.ensure_offsets_topic, "group"
        elif key_type == TRANSACTION_KEY and transactions is not None:
            coordinator, ensure, what = transactions, transactions.ensure_state_topic, "transaction"
        else:
            why = ("this broker runs no transaction coordinator" if key_type == TRANSACTION_KEY
                   else f"unknown coordinator key type {key_type}")
            return Error.INVALID_REQUEST, why, -1, "", -1
        unavailable = f"the {what} coordinator is not available"
        if not ensure():
            return Error.COORDINATOR_NOT_AVAILABLE, unavailable, -1, "", -1
        code, node = coordinator.coordinator_of(key)
        b = self.image().brokers.get(node)
        endpoint = b.endpoint(listener) if b is not None and not b.fenced else None
        if code != Error.NONE or endpoint is None:
            return Error.COORDINATOR_NOT_AVAILABLE, unavailable, -1, "", -1
        return Error.NONE, None, node, endpoint[0], endpoint[1]

    async def handle_find_coordinator(self, ctx: RequestContext, req):
        R = M.FindCoordinatorResponse
        listener = ctx.listener_name or self.listener_name  # none: a call from inside
        if ctx.api_version < 4:
            code, message, node, host, port = self._find(ctx, req.key, req.key_type, listener)
            return R(error_code=code, error_message=message, node_id=node, host=host, port=port)
        return R(coordinators=[
            R.Coordinator(key=key, error_code=code, error_message=message, node_id=node, host=host, port=port)
            for key in req.coordinator_keys
            for code, message, node, host, port in [self._find(ctx, key, req.key_type, listener)]])

    # ---- membership ---------------------------------------------------------------------

    async def handle_join_group(self, ctx: RequestContext, req):
        version = ctx.api_version
        if not self._may(ctx, READ, GROUP, req.group_id):
            return self.groups.core.join_error(version, Error.GROUP_AUTHORIZATION_FAILED, "")
        code = self._coordinator_error(req.group_id)
        if code != Error.NONE:
            return self.groups.core.join_error(version, code, req.member_id)
        groups = self.groups
        waiter = groups.waiter(req.group_id, lambda e: groups.core.join_error(version, e, req.member_id))
        groups.run(groups.core.join_group(req, version, ctx.client_id or "", client_host(ctx), waiter,
                                          _now_ms()))
        return await waiter.future

    async def handle_sync_group(self, ctx: RequestContext, req):
        if not self._may(ctx, READ, GROUP, req.group_id):
            return self.groups.core.sync_error(ctx.api_version, Error.GROUP_AUTHORIZATION_FAILED)
        code = self._coordinator_error(req.group_id)
        if code != Error.NONE:
            return M.SyncGroupResponse(error_code=code, assignment=b"")
        waiter = self.groups.waiter(req.group_id, lambda e: self.groups.core.sync_error(ctx.api_version, e))
        self.groups.run(self.groups.core.sync_group(req, ctx.api_version, waiter, _now_ms()))
        return await waiter.future

    async def handle_heartbeat(self, ctx: RequestContext, req):
        if not self._may(ctx, READ, GROUP, req.group_id):
            return M.HeartbeatResponse(error_code=Error.GROUP_AUTHORIZATION_FAILED)
        code = self._coordinator_error(req.group_id)
        if code == Error.NONE:
            code = self.groups.core.heartbeat(req, ctx.api_version, _now_ms())
            self.groups.run_timers_soon()
            # The answer may rest on a write not yet committed (the SyncGroup's assignment).
            code = await self.groups.committed(self.groups.partition_of(req.group_id)) or code
        return M.HeartbeatResponse(error_code=code)

    async def handle_leave_group(self, ctx: RequestContext, req):
        R = M.LeaveGroupResponse
        if not self._may(ctx, READ, GROUP, req.group_id):
            return R(error_code=Error.GROUP_AUTHORIZATION_FAILED, members=[])  # Kafka's getErrorResponse
        if ctx.api_version >= 3:
            members = [(m.member_id, m.group_instance_id) for m in req.members]
        else:
            members = [(req.member_id, None)]
        code = self._coordinator_error(req.group_id)
        if code != Error.NONE:
            errors = [code] * len(members)
        else:
            code, errors, fx = self.groups.core.leave_group(req.group_id, members, _now_ms())
            p = self.groups.partition_of(req.group_id)
            failed = (await self.groups.write(fx, [p]))[p]
            if failed != Error.NONE:
                code, errors = failed, [failed] * len(members)
        if ctx.api_version < 3:
            return R(error_code=code if code != Error.NONE else errors[0])
        return R(error_code=code, members=[
            R.MemberResponse(member_id=member_id, group_instance_id=instance_id, error_code=e)
            for (member_id, instance_id), e in zip(members, errors)])

    # ---- offsets ------------------------------------------------------------------------

    def _unknown_partitions(self, topics, denied: Collection[str] = ()) -> set[tuple[str, int]]:
        """The (topic, partition)s of a request that the metadata image does not have, and
        every partition of the ``denied`` topics: Kafka's KafkaApis answers them (the first
        UNKNOWN_TOPIC_OR_PARTITION, the denied TOPIC_AUTHORIZATION_FAILED) before the
        coordinator sees the rest."""
        image = self.image().topics
        return {(t.name, p.partition_index) for t in topics for p in t.partitions
                if t.name in denied or t.name not in image
                or p.partition_index not in image[t.name].partitions}

    async def handle_offset_commit(self, ctx: RequestContext, req):
        """OffsetCommit as KafkaApis authorizes it: without READ on the group every partition
        answers GROUP_AUTHORIZATION_FAILED; a topic without READ answers
        TOPIC_AUTHORIZATION_FAILED on each of its partitions (before the image is asked)."""
        R = M.OffsetCommitResponse
        P = R.OffsetCommitResponseTopic.OffsetCommitResponsePartition
        version = ctx.api_version
        if not self._may(ctx, READ, GROUP, req.group_id):
            return R(topics=[R.OffsetCommitResponseTopic(name=t.name, partitions=[
                P(partition_index=p.partition_index, error_code=Error.GROUP_AUTHORIZATION_FAILED)
                for p in t.partitions]) for t in req.topics])
        denied = self._unauthorized_topics(ctx, READ, req.topics)
        unknown = self._unknown_partitions(req.topics, denied)
        offsets = [(t.name, p.partition_index, p.committed_offset,
                    p.committed_leader_epoch if version >= 6 else -1, p.committed_metadata)
                   for t in req.topics for p in t.partitions if (t.name, p.partition_index) not in unknown]
        code = self._coordinator_error(req.group_id) if offsets else Error.NONE
        if code != Error.NONE:
            errors = [code] * len(offsets)
        elif not offsets:
            errors = []  # nothing known to commit: the coordinator is not asked (Kafka's order)
        else:
            errors, fx = self.groups.core.commit_offsets(
                req.group_id, req.generation_id_or_member_epoch, req.member_id,
                req.group_instance_id if version >= 7 else None, offsets, version, _now_ms(),
                req.retention_time_ms if version <= 4 else -1)
            p = self.groups.partition_of(req.group_id)
            failed = (await self.groups.write(fx, [p]))[p]
            if failed != Error.NONE:
                errors = [failed if e == Error.NONE else e for e in errors]
        answers = iter(errors)
        return R(topics=[R.OffsetCommitResponseTopic(name=t.name, partitions=[
            P(partition_index=p.partition_index,
              error_code=Error.TOPIC_AUTHORIZATION_FAILED if t.name in denied
              else Error.UNKNOWN_TOPIC_OR_PARTITION if (t.name, p.partition_index) in unknown
              else next(answers)) for p in t.partitions]) for t in req.topics])

    async def handle_txn_offset_commit(self, ctx: RequestContext, req):
        """TxnOffsetCommit: partitions the image lacks answer UNKNOWN_TOPIC_OR_PARTITION and
        the coordinator is not asked about them (nor at all if none is left); the rest answer
        the verification's refusal (KIP-890, see broker/groups/runtime.py), the core's errors, or
        the write's (mapped as for OffsetCommit) once appended as one transactional batch of the
        producer. Before v2 a loading coordinator is answered
        COORDINATOR_NOT_AVAILABLE (clients before KAFKA-7296 do not retry the other).

        Authorized as KafkaApis does: WRITE on the transactional id, else every partition
        answers TRANSACTIONAL_ID_AUTHORIZATION_FAILED; READ on the group, else
        GROUP_AUTHORIZATION_FAILED; a topic without READ TOPIC_AUTHORIZATION_FAILED."""
        R = M.TxnOffsetCommitResponse
        T = R.TxnOffsetCommitResponseTopic
        version = ctx.api_version
        refused = (Error.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
                   if not self._may(ctx, WRITE, TRANSACTIONAL_ID, req.transactional_id)
                   else Error.GROUP_AUTHORIZATION_FAILED if not self._may(ctx, READ, GROUP, req.group_id)
                   else Error.NONE)
        if refused != Error.NONE:
            return R(topics=[T(name=t.name, partitions=[T.TxnOffsetCommitResponsePartition(
                partition_index=p.partition_index, error_code=refused) for p in t.partitions])
                for t in req.topics])
        denied = self._unauthorized_topics(ctx, READ, req.topics)
        unknown = self._unknown_partitions(req.topics, denied)
        offsets = [(t.name, p.partition_index, p.committed_offset,
                    p.committed_leader_epoch if version >= 2 else -1, p.committed_metadata)
                   for t in req.topics for p in t.partitions if (t.name, p.partition_index) not in unknown]
        code = self._coordinator_error(req.group_id) if offsets else Error.NONE
        if code == Error.NONE and offsets:
            # KIP-890: the transaction must hold the group's partition; nothing is awaited
            # between this answer and the append below, so what is appended was verified.
            code = await self.groups.verify_transaction(self.groups.partition_of(req.group_id),
                                                        req.transactional_id, req.producer_id,
                                                        req.producer_epoch, version)
        if code != Error.NONE:
            errors = [code] * len(offsets)
        elif not offsets:
            errors = []
        else:
            errors, fx = self.groups.core.commit_transactional_offsets(
                req.group_id, req.producer_id, req.producer_epoch,
                req.generation_id if version >= 3 else -1, req.member_id if version >= 3 else "",
                req.group_instance_id if version >= 3 else None, offsets, version, _now_ms())
            if fx.appends:
                p = self.groups.partition_of(req.group_id)
                failed = (await self.groups.write(fx, [p]))[p]
                if failed != Error.NONE:
                    errors = [failed if e == Error.NONE else e for e in errors]
        if version < 2:
            errors = [Error.COORDINATOR_NOT_AVAILABLE if e == Error.COORDINATOR_LOAD_IN_PROGRESS else e
                      for e in errors]
        answers = iter(errors)
        return R(topics=[T(name=t.name, partitions=[T.TxnOffsetCommitResponsePartition(
            partition_index=p.partition_index,
            error_code=Error.TOPIC_AUTHORIZATION_FAILED if t.name in denied
            else Error.UNKNOWN_TOPIC_OR_PARTITION if (t.name, p.partition_index) in unknown
            else next(answers)) for p in t.partitions]) for t in req.topics])

    async def handle_offset_delete(self, ctx: RequestContext, req):
        """OffsetDelete (KIP-496): partitions unknown to the metadata image answer
        UNKNOWN_TOPIC_OR_PARTITION; the coordinator answers the rest, after its tombstones
        commit. A group-level error is the whole answer, with no partitions (Kafka's
        OffsetDeleteResponse.Builder.merge keeps the coordinator's answer when it has one).
        Authorized as KafkaApis does: DELETE on the group, else GROUP_AUTHORIZATION_FAILED and
        nothing else; a topic without READ answers TOPIC_AUTHORIZATION_FAILED per partition."""
        R = M.OffsetDeleteResponse
        T, P = R.OffsetDeleteResponseTopic, R.OffsetDeleteResponseTopic.OffsetDeleteResponsePartition
        if not self._may(ctx, DELETE, GROUP, req.group_id):
            return R(error_code=Error.GROUP_AUTHORIZATION_FAILED, topics=[])
        denied = self._unauthorized_topics(ctx, READ, req.topics)
        unknown = self._unknown_partitions(req.topics, denied)
        known = [(t.name, [p.partition_index for p in t.partitions
                           if (t.name, p.partition_index) not in unknown]) for t in req.topics]
        known = [(name, parts) for name, parts in known if parts]
        out = [T(name=t.name, partitions=[P(partition_index=p.partition_index,
                                            error_code=Error.TOPIC_AUTHORIZATION_FAILED if t.name in denied
                                            else Error.UNKNOWN_TOPIC_OR_PARTITION)
                                          for p in t.partitions if (t.name, p.partition_index) in unknown])
               for t in req.topics]
        out = [t for t in out if t.partitions]
        code = self._coordinator_error(req.group_id) if req.group_id else Error.INVALID_GROUP_ID
        if code == Error.NONE:
            code, answered, fx = self.groups.core.delete_offsets(req.group_id, known,
                                                                 self.groups.pending_offsets())
            if code == Error.NONE:
                p = self.groups.partition_of(req.group_id)
                code = (await self.groups.write(fx, [p]))[p]
            if code == Error.NONE:
                out += [T(name=name, partitions=[P(partition_index=i, error_code=e) for i, e in parts])
                        for name, parts in answered]
        return R(error_code=code, topics=out if code == Error.NONE else [])

    async def _fetch_group(self, ctx: RequestContext, group_id: str, topics, member_id: str | None = None,
                           member_epoch: int = -1, require_stable: bool = False):
        """(group error, [(topic, [(partition, offset, leader epoch, metadata, error)])]).
        The core's offsets are the committed ones; require_stable also waits for the offsets
        written but not yet committed (Kafka answers it as a write).

        Authorized as KafkaApis does: without DESCRIBE on the group, GROUP_AUTHORIZATION_FAILED
        and no topics; the topics the principal may not DESCRIBE are left out of an answer for
        all topics, and answered TOPIC_AUTHORIZATION_FAILED per partition when named."""
        if not self._may(ctx, DESCRIBE, GROUP, group_id):
            return Error.GROUP_AUTHORIZATION_FAILED, []
        denied: list = []
        if topics is not None:
            hidden = self._unauthorized_topics(ctx, DESCRIBE, topics)
            denied = [(t.name, [(p, NO_OFFSET, -1, "", Error.TOPIC_AUTHORIZATION_FAILED)
                                for p in t.partition_indexes]) for t in topics if t.name in hidden]
            topics = [t for t in topics if t.name not in hidden]
        code, found = await self._fetch_offsets(group_id, topics, member_id, member_epoch, require_stable)
        if code != Error.NONE:
            return code, found
        if topics is None:
            described = self.authorizer.filter(ctx, DESCRIBE, TOPIC, [name for name, _ in found])
            return code, [(name, parts) for name, parts in found if name in described]
        return code, found + denied

    async def _fetch_offsets(self, group_id: str, topics, member_id: str | None, member_epoch: int,
                             require_stable: bool):
        """``_fetch_group`` of the topics the principal may see."""
        code = self._coordinator_error(group_id)
        wanted = None if topics is None else [(t.name, list(t.partition_indexes)) for t in topics]
        if code == Error.NONE and require_stable:
            code = await self.groups.committed(self.groups.partition_of(group_id))
        if code == Error.NONE:
            code, found = self.groups.core.fetch_offsets(group_id, wanted, member_id, member_epoch)
        if code != Error.NONE:
            # Kafka answers a group-level error on every requested partition too.
            return code, [(name, [(p, NO_OFFSET, -1, "", code) for p in parts])
                          for name, parts in wanted or []]
        # A partition with an offset pending in a transaction is unstable to a stable read.
        unstable = self.groups.core.pending_partitions(group_id) if require_stable else set()
        return Error.NONE, [(name, [(p, NO_OFFSET, -1, "", Error.UNSTABLE_OFFSET_COMMIT)
                                    if (name, p) in unstable
                                    else (p, om.offset, om.leader_epoch, om.metadata, Error.NONE) if om
                                    else (p, NO_OFFSET, -1, "", Error.NONE) for p, om in parts])
                            for name, parts in found]

    async def handle_offset_fetch(self, ctx: RequestContext, req):
        R = M.OffsetFetchResponse
        version = ctx.api_version
        stable = version >= 7 and bool(req.require_stable)
        if version >= 8:
            G = R.OffsetFetchResponseGroup
            GT = G.OffsetFetchResponseTopics
            out = []
            for g in req.groups:
                code, topics = await self._fetch_group(ctx, g.group_id, g.topics, g.member_id,
                                                       g.member_epoch, stable)
                out.append(G(group_id=g.group_id, error_code=code, topics=[
                    GT(name=name, partitions=[GT.OffsetFetchResponsePartitions(
                        partition_index=p, committed_offset=o, committed_leader_epoch=e, metadata=m,
                        error_code=err) for p, o, e, m, err in parts]) for name, parts in topics]))
            return R(groups=out)
        T = R.OffsetFetchResponseTopic
        code, topics = await self._fetch_group(ctx, req.group_id,
                                               req.topics if version >= 2 else req.topics or [],
                                               require_stable=stable)
        if version < 2 and code != Error.NONE:
            topics = [(name, [(p, o, e, m, code) for p, o, e, m, _ in parts]) for name, parts in topics]
        return R(error_code=code, topics=[
            T(name=name, partitions=[T.OffsetFetchResponsePartition(
                partition_index=p, committed_offset=o, committed_leader_epoch=e, metadata=m, error_code=err)
                for p, o, e, m, err in parts]) for name, parts in topics])

    # ---- admin --------------------------------------------------------------------------

    async def handle_describe_groups(self, ctx: RequestContext, req):
        """A group the principal may not DESCRIBE answers GROUP_AUTHORIZATION_FAILED (Kafka's
        DescribeGroupsResponse.groupError), in the request's order."""
        R = M.DescribeGroupsResponse
        D = R.DescribedGroup
        out = []
        for group_id in req.groups:
            code = (self._coordinator_error(group_id) if self._may(ctx, DESCRIBE, GROUP, group_id)
                    else Error.GROUP_AUTHORIZATION_FAILED)
            described = self.groups.core.describe_group(group_id) if code == Error.NONE else \
                D(error_code=code, group_id=group_id, group_state="", protocol_type="", protocol_data="")
            if described is None and group_id in self.groups.core.consumer.groups:
                # Kafka's answer: a consumer group is described by ConsumerGroupDescribe.
                described = D(error_code=Error.GROUP_ID_NOT_FOUND,
                              error_message=f"Group {group_id} is not a classic group.", group_id=group_id,
                              group_state="Dead", protocol_type="", protocol_data="")
            elif described is None:
                if ctx.api_version >= 6:
                    described = D(error_code=Error.GROUP_ID_NOT_FOUND,
                                  error_message=f"Group {group_id} not found.", group_id=group_id,
                                  group_state="Dead", protocol_type="", protocol_data="")
                else:
                    described = D(error_code=Error.NONE, group_id=group_id, group_state="Dead",
                                  protocol_type="", protocol_data="")
            out.append(described)
        out = await self._released(req.groups, out, lambda group_id, code: D(
            error_code=code, group_id=group_id, group_state="", protocol_type="", protocol_data=""))
        self._with_operations(ctx, out, ctx.api_version >= 3 and req.include_authorized_operations)
        return R(groups=out)

    async def handle_list_groups(self, ctx: RequestContext, req):
        """Every group to a principal that may DESCRIBE the cluster, else only the groups it
        may DESCRIBE (Kafka's KafkaApis; the checks are not logged as denials)."""
        R = M.ListGroupsResponse
        self.groups.ensure_offsets_topic()
        version = ctx.api_version
        types = {t.lower() for t in req.types_filter} if version >= 5 else set()
        states = req.states_filter if version >= 4 else []
        listed = []
        if not types or "classic" in types:
            listed += [(*g, "classic") for g in self.groups.core.list_groups(states)]
        if not types or "consumer" in types:
            listed += [(*g, "consumer") for g in self.groups.core.list_consumer_groups(states)]
        failed = await self._settled(self.groups.core.owned)
        if any(code != Error.NONE for code in failed.values()):
            return R(error_code=Error.COORDINATOR_NOT_AVAILABLE, groups=[])
        if not self.authorizer.authorize(ctx, DESCRIBE, CLUSTER, CLUSTER_NAME, log_if_denied=False):
            visible = self.authorizer.filter(ctx, DESCRIBE, GROUP, [g for g, *_ in listed],
                                             log_if_denied=False)
            listed = [entry for entry in listed if entry[0] in visible]
        return R(error_code=Error.NONE, groups=[
            R.ListedGroup(group_id=g, protocol_type=pt, group_state=state, group_type=kind)
            for g, pt, state, kind in sorted(listed)])

    async def handle_delete_groups(self, ctx: RequestContext, req):
        """A group the principal may not DELETE answers GROUP_AUTHORIZATION_FAILED and is not
        deleted; the coordinator deletes the others."""
        R = M.DeleteGroupsResponse
        allowed = self.authorizer.filter(ctx, DELETE, GROUP, req.groups_names)
        names = [g for g in req.groups_names if g in allowed]
        errors: list[int]
        if not names:
            errors = []
        elif not self.groups.ensure_offsets_topic():
            errors = [Error.COORDINATOR_NOT_AVAILABLE] * len(names)
        else:
            errors, fx = self.groups.core.delete_groups(names, _now_ms())
            partitions = [self.groups.partition_of(g) for g in names]
            failed = await self.groups.write(fx, partitions)
            errors = [failed[p] if e == Error.NONE and failed[p] != Error.NONE else e
                      for e, p in zip(errors, partitions)]
        answers = iter(errors)
        return R(results=[R.DeletableGroupResult(group_id=g, error_code=next(answers) if g in allowed
                                                 else Error.GROUP_AUTHORIZATION_FAILED)
                          for g in req.groups_names])

    # ---- the consumer group protocol ----------------------------------------------------

    async def handle_consumer_group_heartbeat(self, ctx: RequestContext, req):
        if not self._consumer_protocol_enabled():
            return M.ConsumerGroupHeartbeatResponse(error_code=Error.UNSUPPORTED_VERSION)
        if not self._may(ctx, READ, GROUP, req.group_id):
            return M.ConsumerGroupHeartbeatResponse(error_code=Error.GROUP_AUTHORIZATION_FAILED)
        code = self._coordinator_error(req.group_id)
        if code != Error.NONE:
            return M.ConsumerGroupHeartbeatResponse(error_code=code, member_epoch=-1)
        response, fx = self.groups.core.consumer_group_heartbeat(
            req, ctx.api_version, ctx.client_id or "", client_host(ctx), self.groups.topics(), _now_ms())
        p = self.groups.partition_of(req.group_id)
        failed = (await self.groups.write(fx, [p]))[p]
        if failed != Error.NONE:
            # The records are not committed: the member must not act on this answer.
            return M.ConsumerGroupHeartbeatResponse(error_code=failed, member_epoch=-1)
        return response

    async def handle_consumer_group_describe(self, ctx: RequestContext, req):
        if not self._consumer_protocol_enabled():
            return M.ConsumerGroupDescribeResponse(groups=[M.ConsumerGroupDescribeResponse.DescribedGroup(
                error_code=Error.UNSUPPORTED_VERSION, group_id=group_id, group_state="", assignor_name="")
                for group_id in req.group_ids])
        names = {t.topic_id: name for name, t in self.image().topics.items()}
        out = []
        for group_id in req.group_ids:
            code = (self._coordinator_error(group_id) if self._may(ctx, DESCRIBE, GROUP, group_id)
                    else Error.GROUP_AUTHORIZATION_FAILED)
            if code != Error.NONE:
                out.append(M.ConsumerGroupDescribeResponse.DescribedGroup(
                    error_code=code, group_id=group_id, group_state="", assignor_name=""))
            else:
                out.append(self.groups.core.consumer.describe(group_id, names))
        D = M.ConsumerGroupDescribeResponse.DescribedGroup
        described = await self._released(req.group_ids, out, lambda group_id, code: D(
            error_code=code, group_id=group_id, group_state="", assignor_name=""))
        self._with_operations(ctx, described, req.include_authorized_operations)
        return M.ConsumerGroupDescribeResponse(groups=described)
