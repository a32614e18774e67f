"""Topics, partitions and their configs: CreateTopics, DeleteTopics, CreatePartitions, and
IncrementalAlterConfigs, which controller/config_control.py decides (topics, groups, brokers).

Theory of operation. Each request is checked against the image, topic by topic; a topic
that fails gets its error and writes nothing, the others go on. New partitions are placed by
the StripedReplicaPlacer over the usable brokers (unfenced, not in controlled shutdown), or
by the request's manual assignment, which must name registered brokers, each once, with one
replication factor for the whole topic. A new partition's ISR is its live replicas (all of
them when placed), its leader the first of those, its leader and partition epochs 0.

Records of a new topic, in Kafka's order: TopicRecord, its ConfigRecords, its
PartitionRecords. Configs are validated as topic configs over the broker defaults
(min.insync.replicas >= 1, unclean.leader.election.enable a boolean, ...): INVALID_CONFIG.

With delete.topic.enable=false every DeleteTopics is refused whole, before any topic is looked
up (Kafka's ControllerApis.deleteTopics): each topic asked for gets TOPIC_DELETION_DISABLED
(INVALID_REQUEST before v3, which has no such code) with no message of its own, named as the
request named it, and nothing is written.

One request may create at most MAX_PARTITIONS_PER_REQUEST partitions, counted from the request
before anything is placed (Kafka's validateTotalNumberOfPartitions): more is POLICY_VIOLATION for
every topic in it. Placement and records cost the controller's loop time and memory in
proportion to a number the client chose; without the bound one CreateTopics of 2**31-1
partitions, validate_only or not, would stall the controller for good.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from controller.config_control import ConfigControl
from controller.placement import (
    InvalidReplicaAssignment,
    InvalidReplicationFactor,
    StripedReplicaPlacer,
    UsableBroker,
    check_manual_assignment,
)
from controller.result import ControllerResult
from engine.config import LogConfig
from engine.errors import ConfigError
from metadata.configs import TOPIC_RESOURCE, GroupBounds
from metadata.image import MetadataImage
from protocol import messages as M
from protocol.errors import Error, KafkaError
from protocol.topics import topic_name_error

MAX_PARTITIONS_PER_REQUEST = 10_000  # Kafka's MAX_PARTITIONS_PER_BATCH
TOO_MANY_PARTITIONS = "Excessively large number of partitions per request."


class TopicError(KafkaError):
    """A topic's one error: its code and Kafka's message."""


class TopicControl:
    def __init__(self, placer: StripedReplicaPlacer, new_topic_id: Callable[[], bytes],
                 num_partitions: int = 1, default_replication_factor: int = 1,
                 log_defaults: LogConfig | None = None, delete_topic_enable: bool = True,
                 group_bounds: GroupBounds | None = None):
        self.placer = placer
        self.new_topic_id = new_topic_id  # 16 random bytes, never a reserved Kafka uuid
        self.num_partitions = num_partitions
        self.default_replication_factor = default_replication_factor
        self.log_defaults = log_defaults or LogConfig()
        self.delete_topic_enable = delete_topic_enable
        self.configs = ConfigControl(self.log_defaults, group_bounds)

    @staticmethod
    def usable_brokers(image: MetadataImage) -> list[UsableBroker]:
        return [UsableBroker(b.broker_id, b.rack) for b in image.brokers.values()
                if not b.fenced and not b.in_controlled_shutdown]

    def _validate_configs(self, configs: dict[str, Any]) -> None:
        try:
            self.log_defaults.with_overrides(configs)
        except ConfigError as e:
            raise TopicError(Error.INVALID_CONFIG, str(e)) from None

    # ---- CreateTopics (key 19) -------------------------------------------------------------
    def create_topics(self, image: MetadataImage, req) -> ControllerResult:
        R = M.CreateTopicsResponse
        results, records, seen = [], [], set[str]()
        too_many = self._partitions_requested(req.topics) > MAX_PARTITIONS_PER_REQUEST
        for t in req.topics:
            result = R.CreatableTopicResult(name=t.name)
            results.append(result)
            if too_many:
                result.error_code, result.error_message = Error.POLICY_VIOLATION, TOO_MANY_PARTITIONS
                continue
            try:
                topic_records, replication_factor, count = self._create_topic(image, t, seen)
            except TopicError as e:
                result.error_code, result.error_message = e.code, e.message
                continue
            finally:
                seen.add(t.name)
            result.topic_id = topic_records[0].topic_id
            result.num_partitions, result.replication_factor = count, replication_factor
            if not req.validate_only:
                records += topic_records
        return ControllerResult(records, R(topics=results))

    def _partitions_requested(self, topics) -> int:
        """An upper bound of the partitions a CreateTopics asks for, before any is checked."""
        total = 0
        for t in topics:
            if t.assignments:
                total += len(t.assignments)
            elif t.num_partitions == -1:
                total += self.num_partitions
            elif t.num_partitions > 0:
                total += t.num_partitions
        return total

    def _create_topic(self, image: MetadataImage, t, seen: set[str]) -> tuple[list[Any], int, int]:
        why = topic_name_error(t.name)
        if why is not None:
            raise TopicError(Error.INVALID_TOPIC_EXCEPTION, why)
        if t.name in seen:
            raise TopicError(Error.INVALID_REQUEST, f"topic {t.name} appears twice in the request")
        if t.name in image.topics:
            raise TopicError(Error.TOPIC_ALREADY_EXISTS, f"Topic '{t.name}' already exists.")
        configs = {c.name: c.value for c in t.configs}
        self._validate_configs(configs)  # before placement, as Kafka does
        if t.assignments:
            if t.replication_factor != -1:
                raise TopicError(Error.INVALID_REQUEST, "A manual partition assignment was specified, "
                                 "but replication factor was not set to -1.")
            if t.num_partitions != -1:
                raise TopicError(Error.INVALID_REQUEST, "A manual partition assignment was specified, "
                                 "but numPartitions was not set to -1.")
            by_index: dict[int, list[int]] = {}
            for a in t.assignments:
                if a.partition_index in by_index:
                    raise TopicError(Error.INVALID_REPLICA_ASSIGNMENT, "Found multiple manual partition "
                                     f"assignments for partition {a.partition_index}")
                by_index[a.partition_index] = list(a.broker_ids)
            if sorted(by_index) != list(range(len(by_index))):
                raise TopicError(Error.INVALID_REPLICA_ASSIGNMENT,
                                 "partitions should be a consecutive 0-based integer sequence")
            assignments = [by_index[i] for i in range(len(by_index))]
            rf = len(assignments[0])
            for replicas in assignments:
                self._validate_manual_assignment(image, replicas, rf)
        else:
            rf = t.replication_factor if t.replication_factor != -1 else self.default_replication_factor
            count = t.num_partitions if t.num_partitions != -1 else self.num_partitions
            if rf <= 0:
                raise TopicError(Error.INVALID_REPLICATION_FACTOR,
                                 "Replication factor must be larger than 0, or -1 to use the default value.")
            if count <= 0:
                raise TopicError(Error.INVALID_PARTITIONS,
                                 "Number of partitions was set to an invalid non-positive value.")
            assignments = self._place(image, count, rf)
        topic_id = self.new_topic_id()
        records: list[Any] = [M.TopicRecord(name=t.name, topic_id=topic_id)]
        records += [M.ConfigRecord(resource_type=TOPIC_RESOURCE, resource_name=t.name, name=name,
                                   value=value) for name, value in configs.items()]
        for index, replicas in enumerate(assignments):
            records.append(self._partition_record(image, topic_id, index, replicas))
        return records, rf, len(assignments)

    def _place(self, image: MetadataImage, count: int, rf: int) -> list[list[int]]:
        try:
            return self.placer.place(self.usable_brokers(image), count, rf)
        except InvalidReplicationFactor as e:
            raise TopicError(Error.INVALID_REPLICATION_FACTOR,
                             f"Unable to replicate the partition {rf} time(s): {e}") from None

    @staticmethod
    def _validate_manual_assignment(image: MetadataImage, replicas: list[int], rf: int) -> None:
        try:
            check_manual_assignment(image.brokers, replicas, rf)
        except InvalidReplicaAssignment as e:
            raise TopicError(Error.INVALID_REPLICA_ASSIGNMENT, str(e)) from None

    @staticmethod
    def _partition_record(image: MetadataImage, topic_id: bytes, index: int,
                          replicas: list[int]) -> Any:
        isr = [b for b in replicas if image.is_active_broker(b)]
        if not isr:
            raise TopicError(Error.INVALID_REPLICA_ASSIGNMENT, "All brokers specified in the manual "
                             f"partition assignment for partition {index} are fenced or in controlled "
                             "shutdown.")
        return M.PartitionRecord(partition_id=index, topic_id=topic_id, replicas=list(replicas),
                                 isr=isr, leader=isr[0], leader_epoch=0, partition_epoch=0)

    # ---- DeleteTopics (key 20) -------------------------------------------------------------
    def delete_topics(self, image: MetadataImage, req, version: int) -> ControllerResult:
        R = M.DeleteTopicsResponse
        names = [t.name for t in req.topics] if req.topics else list(req.topic_names)
        ids = [t.topic_id for t in req.topics] if req.topics else [None] * len(names)
        if not self.delete_topic_enable:
            code = Error.TOPIC_DELETION_DISABLED if version >= 3 else Error.INVALID_REQUEST
            return ControllerResult([], R(responses=[
                R.DeletableTopicResult(name=name, topic_id=topic_id or bytes(16), error_code=code)
                for name, topic_id in zip(names, ids)]))
        results, records, deleting = [], [], set()
        for name, topic_id in zip(names, ids):
            topic = (image.topics.get(name) if name
                     else image.topics_by_id.get(topic_id) if topic_id is not None else None)
            result = R.DeletableTopicResult(name=name, topic_id=topic_id or bytes(16))
            if topic is None:
                result.error_code = Error.UNKNOWN_TOPIC_OR_PARTITION if name else Error.UNKNOWN_TOPIC_ID
            else:
                result.name, result.topic_id = topic.name, topic.topic_id
                if topic.topic_id not in deleting:  # named twice: removed once
                    deleting.add(topic.topic_id)
                    records.append(M.RemoveTopicRecord(topic_id=topic.topic_id))
            results.append(result)
        return ControllerResult(records, R(responses=results))

    # ---- CreatePartitions (key 37) ---------------------------------------------------------
    def create_partitions(self, image: MetadataImage, req) -> ControllerResult:
        R = M.CreatePartitionsResponse
        results, records = [], []
        added = 0
        for t in req.topics:
            result = R.CreatePartitionsTopicResult(name=t.name)
            results.append(result)
            try:
                new = self._create_partitions(image, t, MAX_PARTITIONS_PER_REQUEST - added)
                added += len(new)
            except TopicError as e:
                result.error_code, result.error_message = e.code, e.message
                continue
            if not req.validate_only:
                records += new
        return ControllerResult(records, R(results=results))

    def _create_partitions(self, image: MetadataImage, t, allowed: int) -> list[Any]:
        topic = image.topics.get(t.name)
        if topic is None:
            raise TopicError(Error.UNKNOWN_TOPIC_OR_PARTITION)
        current = len(topic.partitions)
        if t.count == current:
            raise TopicError(Error.INVALID_PARTITIONS, f"Topic already has {current} partition(s).")
        if t.count < current:
            raise TopicError(Error.INVALID_PARTITIONS, f"The topic {t.name} currently has {current} "
                             f"partition(s); {t.count} would not be an increase.")
        additional = t.count - current
        if additional > allowed:
            raise TopicError(Error.POLICY_VIOLATION, TOO_MANY_PARTITIONS)
        rf = len(topic.partitions[0].replicas) if 0 in topic.partitions else 1
        if t.assignments is not None and t.assignments:
            if len(t.assignments) != additional:
                raise TopicError(Error.INVALID_REPLICA_ASSIGNMENT, f"Attempted to add {additional} "
                                 f"additional partition(s), but only {len(t.assignments)} assignment(s) "
                                 "were specified.")
            assignments = [list(a.broker_ids) for a in t.assignments]
            for replicas in assignments:
                self._validate_manual_assignment(image, replicas, rf)
        else:
            assignments = self._place(image, additional, rf)
        return [self._partition_record(image, topic.topic_id, current + i, replicas)
                for i, replicas in enumerate(assignments)]

    # ---- IncrementalAlterConfigs (key 44) --------------------------------------------------
    def incremental_alter_configs(self, image: MetadataImage, req) -> ControllerResult:
        return self.configs.incremental_alter_configs(image, req)
