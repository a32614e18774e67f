"""The controller's state machine on the KRaft metadata log, and its write APIs.

Every controller replays committed metadata records (``handle_commit``, ``handle_snapshot``:
the RaftListener the driver calls) into a MetadataImage. Only the active controller, the raft
leader, writes: once it has replayed everything up to its own epoch's LeaderChange record it
validates each request against the image, appends the records it decides on (one batch) and
answers when they are committed and replayed. Requests are handled one at a time (a lock), so
the next one is validated against an image that holds the previous one's records. A controller
that is not active, or loses leadership before the records commit, answers NOT_CONTROLLER and
the broker retries at the new leader. Every ``metadata.log.max.record.bytes.between.snapshots``
bytes of records, each controller snapshots its image (MetadataImage.records()).
"""
from __future__ import annotations

import asyncio
import logging
from typing import Any

from engine.checkpoint import new_uuid, uuid_from_str
from engine.config import TOPIC_CONFIGS, LogConfig
from engine.errors import ConfigError
from metadata.image import TOPIC_RESOURCE, MetadataImage
from protocol import messages as M
from protocol.dispatch import Api
from protocol.errors import Error
from protocol.headers import RequestHeader
from protocol.metadata_records import decode_record, encode_record
from protocol.topics import topic_name_error
from raft.errors import NotLeaderError
from raft.log import Entry, Snapshot
from raft.quorum_state import Leader

log = logging.getLogger("strom.controller")

PRODUCER_ID_BLOCK = 1000
COMMIT_TIMEOUT_S = 30.0


class NotController(Exception):
    """This controller is not (or no longer) the active one."""


class QuorumController:
    def __init__(self, node_id: int, cluster_id: str, defaults: dict[str, Any],
                 snapshot_bytes: int = 20 << 20):
        self.node_id = node_id
        self.cluster_id = cluster_id
        self.defaults = defaults  # num.partitions, default.replication.factor
        self.snapshot_bytes = snapshot_bytes
        self.state = MetadataImage()
        self.raft = None  # the RaftDriver, set by attach()
        self.applied_offset = 0  # every committed entry below it is replayed
        self._bytes_since_snapshot = 0
        self._lock = asyncio.Lock()

    def attach(self, raft) -> None:
        self.raft = raft

    # ---- the RaftListener ------------------------------------------------------------------
    def handle_commit(self, entries: list[Entry]) -> None:
        for entry in entries:
            if isinstance(entry.value, bytes | bytearray | memoryview):
                self.state.replay(entry.offset, decode_record(entry.value)[2])
                self._bytes_since_snapshot += len(entry.value)
            self.applied_offset = entry.offset + 1
        if self._bytes_since_snapshot >= self.snapshot_bytes and self.raft is not None:
            # After the driver has recorded this delivery: a snapshot holds only what it handed us.
            self._bytes_since_snapshot = 0
            asyncio.get_running_loop().call_soon(self._snapshot, self.applied_offset,
                                                 [encode_record(r) for r in self.state.records()])

    def _snapshot(self, end_offset: int, values: list[bytes]) -> None:
        if self.raft.closed or end_offset <= self.raft.log.log_start_offset:
            return
        snapshot_id = self.raft.create_snapshot(end_offset, values)
        log.info("controller %d: snapshot %s (%d records)", self.node_id, snapshot_id, len(values))

    def handle_snapshot(self, snapshot: Snapshot) -> None:
        self.state = MetadataImage()
        for value in snapshot.values:
            self.state.replay(snapshot.snapshot_id.offset - 1, decode_record(value)[2])
        self.applied_offset = snapshot.snapshot_id.offset
        self._bytes_since_snapshot = 0

    def handle_leader_change(self, leader_id: int, epoch: int) -> None:
        if leader_id == self.node_id:
            log.info("controller %d is the active controller in epoch %d", self.node_id, epoch)

    # ---- writing -----------------------------------------------------------------------------
    def _active(self) -> bool:
        """Leader, and the image holds everything committed before this epoch."""
        if self.raft is None or not self.raft.is_leader():
            return False
        s = self.raft.core.state
        return isinstance(s, Leader) and self.applied_offset > s.epoch_start_offset

    def _next_offset(self) -> int:
        return self.raft.log.end_offset().offset

    async def _commit(self, records: list[Any]) -> int:
        """Append as one batch; returns when committed and replayed. Raises NotController."""
        try:
            last = self.raft.append([encode_record(r) for r in records])
            await self.raft.wait_committed(last, COMMIT_TIMEOUT_S)
        except (NotLeaderError, TimeoutError) as e:
            raise NotController(str(e)) from None
        return last

    def apis(self) -> list[Api]:
        return [
            Api(19, 2, 7, self._write(self.handle_create_topics, _topics_error)),
            Api(20, 1, 6, self._write(self.handle_delete_topics, _responses_error)),
            Api(37, 0, 3, self._write(self.handle_create_partitions, _results_error)),
            Api(44, 0, 1, self._write(self.handle_incremental_alter_configs, _responses_error)),
            Api(62, 0, 4, self._write(self.handle_broker_registration, _top_error)),
            Api(63, 0, 1, self._write(self.handle_broker_heartbeat, _top_error)),
            Api(67, 0, 0, self._write(self.handle_allocate_producer_ids, _top_error)),
            Api(60, 1, 1, self.handle_describe_cluster),
        ]

    async def handle_describe_cluster(self, header: RequestHeader, req) -> Any:
        """KIP-919: asked with endpoint_type 2, a controller lists the controllers (the voters)
        and names the active one; brokers are asked of brokers."""
        R = M.DescribeClusterResponse
        if req.endpoint_type != 2:
            return R(error_code=Error.UNSUPPORTED_ENDPOINT_TYPE, endpoint_type=req.endpoint_type,
                     error_message="controllers answer endpoint_type 2 (controller) only",
                     cluster_id=self.cluster_id)
        leader, _ = self.raft.leader_and_epoch()
        controllers = []
        for voter in self.raft.core.voter_set.voters:
            endpoint = voter.endpoints[0] if voter.endpoints else None
            if endpoint is not None:
                controllers.append(R.DescribeClusterBroker(broker_id=voter.id, host=endpoint.host,
                                                           port=endpoint.port))
        return R(error_code=Error.NONE, endpoint_type=2, cluster_id=self.cluster_id, controller_id=leader,
                 brokers=controllers)

    def _write(self, handler, not_controller):
        """Serve ``handler`` as the active controller, else answer NOT_CONTROLLER."""
        async def serve(header: RequestHeader, req) -> Any:
            async with self._lock:
                if not self._active():
                    return not_controller(header.api_key, req)
                try:
                    return await handler(header, req)
                except NotController:
                    return not_controller(header.api_key, req)
        return serve

    # ---- brokers -----------------------------------------------------------------------

    async def handle_broker_registration(self, header: RequestHeader, req) -> Any:
        R = M.BrokerRegistrationResponse
        if req.cluster_id != self.cluster_id:
            return R(error_code=Error.INCONSISTENT_CLUSTER_ID)
        epoch = self._next_offset()  # the broker epoch is its registration's offset
        record = M.RegisterBrokerRecord(
            broker_id=req.broker_id, incarnation_id=req.incarnation_id, broker_epoch=epoch,
            end_points=[M.RegisterBrokerRecord.BrokerEndpoint(
                name=lsn.name, host=lsn.host, port=lsn.port, security_protocol=lsn.security_protocol)
                for lsn in req.listeners],
            rack=req.rack, fenced=True,
        )
        await self._commit([record])
        return R(error_code=Error.NONE, broker_epoch=epoch)

    async def handle_broker_heartbeat(self, header: RequestHeader, req) -> Any:
        R = M.BrokerHeartbeatResponse
        broker = self.state.brokers.get(req.broker_id)
        if broker is None or broker.broker_epoch != req.broker_epoch:
            return R(error_code=Error.STALE_BROKER_EPOCH, is_fenced=True)
        caught_up = req.current_metadata_offset >= broker.broker_epoch
        if broker.fenced and caught_up and not req.want_fence:
            await self._commit([M.UnfenceBrokerRecord(id=req.broker_id, epoch=req.broker_epoch)])
        elif not broker.fenced and req.want_fence:
            await self._commit([M.FenceBrokerRecord(id=req.broker_id, epoch=req.broker_epoch)])
        return R(error_code=Error.NONE, is_caught_up=caught_up, is_fenced=broker.fenced,
                 should_shut_down=req.want_shut_down)

    async def handle_allocate_producer_ids(self, header: RequestHeader, req) -> Any:
        """A block of producer ids for a broker's InitProducerId (ProducerIdsRecord)."""
        R = M.AllocateProducerIdsResponse
        broker = self.state.brokers.get(req.broker_id)
        if broker is None or broker.broker_epoch != req.broker_epoch:
            return R(error_code=Error.STALE_BROKER_EPOCH)
        start = self.state.next_producer_id
        await self._commit([M.ProducerIdsRecord(broker_id=req.broker_id, broker_epoch=req.broker_epoch,
                                                next_producer_id=start + PRODUCER_ID_BLOCK)])
        return R(error_code=Error.NONE, producer_id_start=start, producer_id_len=PRODUCER_ID_BLOCK)

    # ---- topics --------------------------------------------------------------------------

    async def handle_create_topics(self, header: RequestHeader, req) -> Any:
        R = M.CreateTopicsResponse
        results = []
        records: list[Any] = []
        seen = set()
        for t in req.topics:
            result = R.CreatableTopicResult(name=t.name)
            results.append(result)
            error = self._check_new_topic(t, seen)
            seen.add(t.name)
            if error is not None:
                result.error_code, result.error_message = error
                continue
            partitions = t.num_partitions if t.num_partitions != -1 else self.defaults["num.partitions"]
            rf = t.replication_factor if t.replication_factor != -1 \
                else self.defaults["default.replication.factor"]
            topic_id = uuid_from_str(new_uuid())
            result.topic_id = topic_id
            result.num_partitions = partitions
            result.replication_factor = rf
            if req.validate_only:
                continue
            records.append(M.TopicRecord(name=t.name, topic_id=topic_id))
            brokers = self.state.unfenced_brokers()
            for p in range(partitions):
                replicas = [brokers[(p + i) % len(brokers)] for i in range(rf)]
                records.append(M.PartitionRecord(
                    partition_id=p, topic_id=topic_id, replicas=replicas, isr=list(replicas),
                    leader=replicas[0], leader_epoch=0, partition_epoch=0))
            for c in t.configs:
                records.append(M.ConfigRecord(resource_type=TOPIC_RESOURCE, resource_name=t.name,
                                              name=c.name, value=c.value))
        if records:
            await self._commit(records)
        return R(topics=results)

    def _check_new_topic(self, t, seen: set[str]) -> tuple[int, str] | None:
        why = topic_name_error(t.name)
        if why is not None:
            return Error.INVALID_TOPIC_EXCEPTION, why
        if t.name in seen:
            return Error.INVALID_REQUEST, f"topic {t.name} appears twice in the request"
        if t.name in self.state.topics:
            return Error.TOPIC_ALREADY_EXISTS, f"Topic '{t.name}' already exists."
        if t.assignments:
            return Error.INVALID_REQUEST, "manual replica assignments are not supported yet"
        if t.num_partitions == 0 or t.num_partitions < -1:
            return Error.INVALID_PARTITIONS, f"number of partitions must be positive: {t.num_partitions}"
        rf = t.replication_factor
        if rf == -1:
            rf = self.defaults["default.replication.factor"]
        live = len(self.state.unfenced_brokers())
        if rf <= 0:
            return Error.INVALID_REPLICATION_FACTOR, f"replication factor must be positive: {rf}"
        if rf > live:
            return (Error.INVALID_REPLICATION_FACTOR,
                    f"Unable to replicate the partition {rf} time(s): The target replication factor "
                    f"of {rf} cannot be reached because only {live} broker(s) are registered.")
        try:
            LogConfig().with_overrides({c.name: c.value for c in t.configs})
        except ConfigError as e:
            return Error.INVALID_CONFIG, str(e)
        return None

    async def handle_delete_topics(self, header: RequestHeader, req) -> Any:
        R = M.DeleteTopicsResponse
        results = []
        records = []
        names = [t.name for t in req.topics] if req.topics else list(req.topic_names)
        ids = [t.topic_id for t in req.topics] if req.topics else [None] * len(names)
        for name, topic_id in zip(names, ids):
            topic = self.state.topics.get(name) if name else self.state.topics_by_id.get(topic_id)
            result = R.DeletableTopicResult(name=name, topic_id=topic_id or bytes(16))
            if topic is None:
                result.error_code = Error.UNKNOWN_TOPIC_OR_PARTITION if name else Error.UNKNOWN_TOPIC_ID
            else:
                result.name, result.topic_id = topic.name, topic.topic_id
                records.append(M.RemoveTopicRecord(topic_id=topic.topic_id))
            results.append(result)
        if records:
            await self._commit(records)
        return R(responses=results)

    async def handle_create_partitions(self, header: RequestHeader, req) -> Any:
        R = M.CreatePartitionsResponse
        results = []
        records = []
        for t in req.topics:
            result = R.CreatePartitionsTopicResult(name=t.name)
            results.append(result)
            topic = self.state.topics.get(t.name)
            if topic is None:
                result.error_code = Error.UNKNOWN_TOPIC_OR_PARTITION
                continue
            current = len(topic.partitions)
            if t.count <= current:
                result.error_code = Error.INVALID_PARTITIONS
                result.error_message = (f"Topic currently has {current} partitions, which is "
                                        f"higher than or equal to the requested {t.count}.")
                continue
            if t.assignments:
                result.error_code = Error.INVALID_REQUEST
                result.error_message = "manual replica assignments are not supported yet"
                continue
            if req.validate_only:
                continue
            brokers = self.state.unfenced_brokers()
            rf = len(next(iter(topic.partitions.values())).replicas) if topic.partitions else 1
            for p in range(current, t.count):
                replicas = [brokers[(p + i) % len(brokers)] for i in range(min(rf, len(brokers)))]
                records.append(M.PartitionRecord(
                    partition_id=p, topic_id=topic.topic_id, replicas=replicas, isr=list(replicas),
                    leader=replicas[0], leader_epoch=0, partition_epoch=0))
        if records:
            await self._commit(records)
        return R(results=results)

    async def handle_incremental_alter_configs(self, header: RequestHeader, req) -> Any:
        R = M.IncrementalAlterConfigsResponse
        results = []
        records = []
        for res in req.resources:
            result = R.AlterConfigsResourceResponse(resource_type=res.resource_type,
                                                    resource_name=res.resource_name)
            results.append(result)
            if res.resource_type != TOPIC_RESOURCE:
                result.error_code = Error.INVALID_REQUEST
                result.error_message = "only topic configs can be altered"
                continue
            if res.resource_name not in self.state.topics:
                result.error_code = Error.UNKNOWN_TOPIC_OR_PARTITION
                continue
            current = dict(self.state.configs.get((TOPIC_RESOURCE, res.resource_name), {}))
            pending = []
            error = None
            for c in res.configs:
                if c.name not in TOPIC_CONFIGS:
                    error = (Error.INVALID_CONFIG, f"Unknown topic config name: {c.name}")
                    break
                if c.config_operation == 0:  # SET
                    current[c.name] = c.value
                    pending.append((c.name, c.value))
                elif c.config_operation == 1:  # DELETE
                    current.pop(c.name, None)
                    pending.append((c.name, None))
                else:
                    error = (Error.INVALID_REQUEST,
                             f"{c.name}: APPEND/SUBTRACT apply to list configs only")
                    break
            if error is None:
                try:
                    LogConfig().with_overrides(current)
                except ConfigError as e:
                    error = (Error.INVALID_CONFIG, str(e))
            if error is not None:
                result.error_code, result.error_message = error
                continue
            if not req.validate_only:
                records += [M.ConfigRecord(resource_type=TOPIC_RESOURCE, resource_name=res.resource_name,
                                           name=name, value=value) for name, value in pending]
        if records:
            await self._commit(records)
        return R(responses=results)


# ---- NOT_CONTROLLER answers, in each response's own shape -------------------------------------

def _top_error(api_key: int, req) -> Any:
    response = {62: M.BrokerRegistrationResponse, 63: M.BrokerHeartbeatResponse,
                67: M.AllocateProducerIdsResponse}[api_key]
    return response(error_code=Error.NOT_CONTROLLER)


def _topics_error(api_key: int, req) -> Any:
    R = M.CreateTopicsResponse
    return R(topics=[R.CreatableTopicResult(name=t.name, error_code=Error.NOT_CONTROLLER)
                     for t in req.topics])


def _responses_error(api_key: int, req) -> Any:
    if api_key == 20:
        R = M.DeleteTopicsResponse
        names = [t.name for t in req.topics] if req.topics else list(req.topic_names)
        return R(responses=[R.DeletableTopicResult(name=n, error_code=Error.NOT_CONTROLLER) for n in names])
    R = M.IncrementalAlterConfigsResponse
    return R(responses=[R.AlterConfigsResourceResponse(
        resource_type=r.resource_type, resource_name=r.resource_name, error_code=Error.NOT_CONTROLLER)
        for r in req.resources])


def _results_error(api_key: int, req) -> Any:
    R = M.CreatePartitionsResponse
    return R(results=[R.CreatePartitionsTopicResult(name=t.name, error_code=Error.NOT_CONTROLLER)
                      for t in req.topics])
