"""The active controller: turns admin and broker-lifecycle requests into metadata records.

Each request is validated against the replayed MetadataImage, answered with per-topic
errors where Kafka answers them, and its records appended (and committed) as one batch
before the response is sent.
"""
from __future__ import annotations

import asyncio
from typing import Any

from controller.metadata_log import METADATA_TOPIC, METADATA_TOPIC_ID, SingleVoterLog
from engine.checkpoint import new_uuid, uuid_from_str
from engine.config import TOPIC_CONFIGS, LogConfig
from engine.errors import ConfigError
from metadata.image import TOPIC_RESOURCE, MetadataImage
from protocol import messages as M
from protocol.dispatch import Api
from protocol.errors import Error
from protocol.headers import RequestHeader
from protocol.topics import topic_name_error

PRODUCER_ID_BLOCK = 1000


class QuorumController:
    def __init__(self, log: SingleVoterLog, node_id: int, cluster_id: str, defaults: dict[str, Any]):
        self.log = log
        self.node_id = node_id
        self.cluster_id = cluster_id
        self.defaults = defaults  # num.partitions, default.replication.factor
        self.state = MetadataImage()
        for offset, record in log.records():
            self.state.replay(offset, record)
        self._lock = asyncio.Lock()

    def apis(self) -> list[Api]:
        return [
            Api(1, 4, 17, self.handle_fetch),
            Api(19, 2, 7, self.handle_create_topics),
            Api(20, 1, 6, self.handle_delete_topics),
            Api(37, 0, 3, self.handle_create_partitions),
            Api(44, 0, 1, self.handle_incremental_alter_configs),
            Api(62, 0, 4, self.handle_broker_registration),
            Api(63, 0, 1, self.handle_broker_heartbeat),
            Api(67, 0, 0, self.handle_allocate_producer_ids),
        ]

    def _commit(self, records: list[Any]) -> int:
        last = self.log.append(records)
        first = last - len(records) + 1
        for i, record in enumerate(records):
            self.state.replay(first + i, record)
        return last

    # ---- metadata log Fetch (observers) ------------------------------------------------

    async def handle_fetch(self, header: RequestHeader, req) -> Any:
        R = M.FetchResponse
        resp = R(session_id=0)
        deadline = asyncio.get_running_loop().time() + req.max_wait_ms / 1000
        while True:
            resp.responses = []
            data_bytes = 0
            for topic in req.topics:
                if topic.topic != METADATA_TOPIC and topic.topic_id != METADATA_TOPIC_ID:
                    parts = [R.PartitionData(partition_index=p.partition,
                                             error_code=Error.UNKNOWN_TOPIC_OR_PARTITION)
                             for p in topic.partitions]
                else:
                    parts = []
                    for p in topic.partitions:
                        pd = R.PartitionData(partition_index=p.partition, records=b"",
                                             high_watermark=self.log.high_watermark,
                                             last_stable_offset=self.log.high_watermark,
                                             log_start_offset=self.log.log.log_start_offset)
                        pd.current_leader = R.PartitionData.LeaderIdAndEpoch(
                            leader_id=self.node_id, leader_epoch=self.log.epoch)
                        if p.partition != 0:
                            pd.error_code = Error.UNKNOWN_TOPIC_OR_PARTITION
                        elif not self.log.log.log_start_offset <= p.fetch_offset <= self.log.log_end_offset:
                            pd.error_code = Error.OFFSET_OUT_OF_RANGE
                        else:
                            info = self.log.log.read(p.fetch_offset, min(p.partition_max_bytes, 8 << 20),
                                                     "high_watermark")
                            pd.records = info.records
                            data_bytes += info.size
                        parts.append(pd)
                resp.responses.append(R.FetchableTopicResponse(
                    topic=topic.topic, topic_id=topic.topic_id, partitions=parts))
            remaining = deadline - asyncio.get_running_loop().time()
            if data_bytes >= max(req.min_bytes, 1) or remaining <= 0:
                return resp
            await self.log.wait_for_append(remaining)

    # ---- brokers -----------------------------------------------------------------------

    async def handle_broker_registration(self, header: RequestHeader, req) -> Any:
        R = M.BrokerRegistrationResponse
        if req.cluster_id != self.cluster_id:
            return R(error_code=Error.INCONSISTENT_CLUSTER_ID)
        async with self._lock:
            epoch = self.log.log_end_offset  # the broker epoch is its registration's offset
            record = M.RegisterBrokerRecord(
                broker_id=req.broker_id, incarnation_id=req.incarnation_id, broker_epoch=epoch,
                end_points=[M.RegisterBrokerRecord.BrokerEndpoint(
                    name=lsn.name, host=lsn.host, port=lsn.port, security_protocol=lsn.security_protocol)
                    for lsn in req.listeners],
                rack=req.rack, fenced=True,
            )
            self._commit([record])
        return R(error_code=Error.NONE, broker_epoch=epoch)

    async def handle_broker_heartbeat(self, header: RequestHeader, req) -> Any:
        R = M.BrokerHeartbeatResponse
        broker = self.state.brokers.get(req.broker_id)
        if broker is None or broker.broker_epoch != req.broker_epoch:
            return R(error_code=Error.STALE_BROKER_EPOCH, is_fenced=True)
        caught_up = req.current_metadata_offset >= broker.broker_epoch
        async with self._lock:
            if broker.fenced and caught_up and not req.want_fence:
                self._commit([M.UnfenceBrokerRecord(id=req.broker_id, epoch=req.broker_epoch)])
            elif not broker.fenced and req.want_fence:
                self._commit([M.FenceBrokerRecord(id=req.broker_id, epoch=req.broker_epoch)])
        return R(error_code=Error.NONE, is_caught_up=caught_up, is_fenced=broker.fenced,
                 should_shut_down=req.want_shut_down)

    async def handle_allocate_producer_ids(self, header: RequestHeader, req) -> Any:
        """A block of producer ids for a broker's InitProducerId (ProducerIdsRecord)."""
        R = M.AllocateProducerIdsResponse
        broker = self.state.brokers.get(req.broker_id)
        if broker is None or broker.broker_epoch != req.broker_epoch:
            return R(error_code=Error.STALE_BROKER_EPOCH)
        async with self._lock:
            start = self.state.next_producer_id
            self._commit([M.ProducerIdsRecord(broker_id=req.broker_id, broker_epoch=req.broker_epoch,
                                              next_producer_id=start + PRODUCER_ID_BLOCK)])
        return R(error_code=Error.NONE, producer_id_start=start, producer_id_len=PRODUCER_ID_BLOCK)

    # ---- topics --------------------------------------------------------------------------

    async def handle_create_topics(self, header: RequestHeader, req) -> Any:
        R = M.CreateTopicsResponse
        results = []
        async with self._lock:
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
                self._commit(records)
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
        async with self._lock:
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
                self._commit(records)
        return R(responses=results)

    async def handle_create_partitions(self, header: RequestHeader, req) -> Any:
        R = M.CreatePartitionsResponse
        results = []
        async with self._lock:
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
                self._commit(records)
        return R(results=results)

    async def handle_incremental_alter_configs(self, header: RequestHeader, req) -> Any:
        R = M.IncrementalAlterConfigsResponse
        results = []
        async with self._lock:
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
                self._commit(records)
        return R(responses=results)
