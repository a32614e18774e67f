"""A controller's managers driven without processes: the scenario DSL of tests/controller.

``Scenario`` holds a MetadataImage and the three managers of the active controller. Every
ControllerResult is committed at once: its records are encoded and decoded with the metadata
record codec (so only records the log can carry pass) and replayed at consecutive offsets,
as the shell's raft commit would. Time is ``now`` (ms), moved by ``advance``.
"""
from __future__ import annotations

import itertools
import random
from typing import Any

from broker.metadata_follower import SUPPORTED_FEATURES
from controller.cluster_control import ClusterControl
from controller.placement import StripedReplicaPlacer
from controller.replication_control import ELR_FEATURE, ReplicationControl
from controller.result import ControllerResult
from controller.topic_control import TopicControl
from engine.config import LogConfig
from metadata.configs import BROKER_RESOURCE, TOPIC_RESOURCE
from metadata.image import MetadataImage, PartitionState
from protocol import messages as M
from protocol.errors import Error
from protocol.metadata_records import decode_record, encode_record

CLUSTER_ID = "scenario-cluster"
SESSION_MS = 9000
DISCONNECT_FENCE_MS = 500


def broker_configs(name: str, *ops: tuple[str, int, str | None]) -> Any:
    """An IncrementalAlterConfigs resource of broker ``name`` ("" the cluster default): each op
    (config, operation, value)."""
    R = M.IncrementalAlterConfigsRequest
    return R.AlterConfigsResource(resource_type=BROKER_RESOURCE, resource_name=name, configs=[
        R.AlterConfigsResource.AlterableConfig(name=n, config_operation=op, value=v) for n, op, v in ops])


class Scenario:
    def __init__(self, brokers: int = 3, racks: dict[int, str] | None = None, elr: bool = True,
                 min_isr: int = 1, unclean: bool = False, seed: int = 0, unfence: bool = True,
                 disconnect_fence_ms: int = DISCONNECT_FENCE_MS):
        self.image = MetadataImage()
        self.next_offset = 0
        self.now = 1_000_000
        defaults = LogConfig(min_insync_replicas=min_isr, unclean_leader_election_enable=unclean)
        self.replication = ReplicationControl(defaults)
        self.cluster = ClusterControl(CLUSTER_ID, self.replication, SESSION_MS, disconnect_fence_ms)
        ids = itertools.count(1)
        self.topics = TopicControl(StripedReplicaPlacer(random.Random(seed)),
                                   lambda: next(ids).to_bytes(16, "big"), 1, 1, defaults)
        self.batches: list[list] = []  # every committed batch, in order
        self.incarnations: dict[int, bytes] = {}
        self.connections: dict[int, object] = {}
        self.commit([M.FeatureLevelRecord(name="metadata.version", feature_level=25)]
                    + ([M.FeatureLevelRecord(name=ELR_FEATURE, feature_level=1)] if elr else []))
        self.cluster.activate(self.image, self.now)
        for b in range(1, brokers + 1):
            assert self.register(b, rack=(racks or {}).get(b)).error_code == Error.NONE
            if unfence:
                assert not self.heartbeat(b).is_fenced

    # ---- the log -----------------------------------------------------------------------
    def commit(self, records: list) -> list:
        decoded = []
        for record in records:
            decoded.append(decode_record(encode_record(record))[2])
            self.image.replay(self.next_offset, decoded[-1])
            self.next_offset += 1
        if decoded:
            self.batches.append(decoded)
        return decoded

    def apply(self, result: ControllerResult):
        self.last_records = self.commit(result.records)
        return result.response

    def advance(self, ms: int) -> None:
        self.now += ms

    def tick(self) -> list:
        return self.commit(self.cluster.tick(self.image, self.now))

    # ---- brokers -----------------------------------------------------------------------
    def register(self, broker_id: int, new_incarnation: bool = False, previous_epoch: int = -1,
                 rack: str | None = None, version: int = 3,
                 features: tuple[tuple[str, int, int], ...] = SUPPORTED_FEATURES):
        """BrokerRegistration of ``broker_id``, listing ``features`` (name, min, max): by default
        what a Strom broker supports."""
        if new_incarnation or broker_id not in self.incarnations:
            self.incarnations[broker_id] = random.Random(len(self.batches) * 1000 + broker_id).randbytes(16)
            self.connections[broker_id] = object()
        R = M.BrokerRegistrationRequest
        req = R(broker_id=broker_id, cluster_id=CLUSTER_ID, incarnation_id=self.incarnations[broker_id],
                listeners=[R.Listener(name="PLAINTEXT", host="127.0.0.1", port=9000 + broker_id)],
                features=[R.Feature(name=name, min_supported_version=lo, max_supported_version=hi)
                          for name, lo, hi in features],
                rack=rack, previous_broker_epoch=previous_epoch)
        return self.apply(self.cluster.register(self.image, req, version, self.next_offset, self.now,
                                                self.connections[broker_id]))

    def epoch(self, broker_id: int) -> int:
        return self.image.brokers[broker_id].broker_epoch

    def heartbeat(self, broker_id: int, want_shut_down: bool = False, metadata_offset: int | None = None,
                  connection: object | None = None, broker_epoch: int | None = None):
        req = M.BrokerHeartbeatRequest(
            broker_id=broker_id,
            broker_epoch=self.epoch(broker_id) if broker_epoch is None else broker_epoch,
            current_metadata_offset=self.next_offset - 1 if metadata_offset is None else metadata_offset,
            want_fence=False, want_shut_down=want_shut_down)
        if connection is not None:
            self.connections[broker_id] = connection
        return self.apply(self.cluster.heartbeat(self.image, req, self.next_offset, self.now,
                                                 self.connections.get(broker_id)))

    def heartbeat_all(self, *, skip: tuple[int, ...] = ()) -> None:
        for b in sorted(self.image.brokers):
            if b not in skip and not self.image.brokers[b].fenced:
                self.heartbeat(b)

    def fenced(self, broker_id: int) -> bool:
        return self.image.brokers[broker_id].fenced

    # ---- topics ------------------------------------------------------------------------
    def create_topic(self, name: str, partitions: int = 1, rf: int = 3, configs: dict | None = None,
                     assignments: dict[int, list[int]] | None = None):
        R = M.CreateTopicsRequest
        topic = R.CreatableTopic(
            name=name, num_partitions=-1 if assignments else partitions,
            replication_factor=-1 if assignments else rf,
            assignments=[R.CreatableTopic.CreatableReplicaAssignment(partition_index=i, broker_ids=b)
                         for i, b in (assignments or {}).items()],
            configs=[R.CreatableTopic.CreatableTopicConfig(name=k, value=v)
                     for k, v in (configs or {}).items()])
        return self.apply(self.topics.create_topics(self.image, R(topics=[topic]))).topics[0]

    def set_topic_config(self, topic: str, name: str, value: str | None) -> None:
        self.commit([M.ConfigRecord(resource_type=TOPIC_RESOURCE, resource_name=topic, name=name,
                                    value=value)])

    def alter_configs(self, *resources) -> list[tuple[int, str | None]]:
        """IncrementalAlterConfigs of ``resources``, what it wrote committed: each resource's
        (error code, message)."""
        request = M.IncrementalAlterConfigsRequest(resources=list(resources))
        response = self.apply(self.topics.incremental_alter_configs(self.image, request))
        return [(r.error_code, r.error_message) for r in response.responses]

    def partition(self, topic: str, index: int = 0) -> PartitionState:
        return self.image.topics[topic].partitions[index]

    def set_partition(self, topic: str, index: int = 0, **changes) -> PartitionState:
        """Force a partition's state with a PartitionChangeRecord (a test's shortcut)."""
        fields = {"isr": "isr", "leader": "leader", "elr": "eligible_leader_replicas",
                  "last_known_elr": "last_known_elr", "leader_recovery_state": "leader_recovery_state"}
        record = M.PartitionChangeRecord(topic_id=self.image.topics[topic].topic_id, partition_id=index)
        for name, value in changes.items():
            setattr(record, fields[name], value)
        self.commit([record])
        return self.partition(topic, index)

    # ---- AlterPartition ----------------------------------------------------------------
    def alter_partition(self, sender: int, topic: str, index: int, isr: list[int], *,
                        leader_epoch: int | None = None, partition_epoch: int | None = None,
                        leader_recovery_state: int = 0, version: int = 3,
                        epochs: dict[int, int] | None = None, sender_epoch: int | None = None):
        """The partition's answer (or the top-level error code when it is not NONE)."""
        p = self.partition(topic, index)
        R = M.AlterPartitionRequest
        D = R.TopicData.PartitionData
        pd = D(partition_index=index,
               leader_epoch=p.leader_epoch if leader_epoch is None else leader_epoch,
               partition_epoch=p.partition_epoch if partition_epoch is None else partition_epoch,
               leader_recovery_state=leader_recovery_state)
        if version >= 3:
            pd.new_isr_with_epochs = [D.BrokerState(broker_id=b, broker_epoch=(epochs or {}).get(
                b, self.epoch(b) if b in self.image.brokers else -1)) for b in isr]
        else:
            pd.new_isr = list(isr)
        req = R(broker_id=sender, broker_epoch=self.epoch(sender) if sender_epoch is None else sender_epoch,
                topics=[R.TopicData(topic_id=self.image.topics[topic].topic_id, partitions=[pd])])
        response = self.apply(self.replication.alter_partition(self.image, req, version))
        if response.error_code != Error.NONE:
            return response.error_code
        return response.topics[0].partitions[0]

    # ---- reassignments -----------------------------------------------------------------
    def reassign(self, topic: str, targets: dict[int, list[int] | None],
                 allow_rf_change: bool = True) -> dict[int, tuple[int, str | None]]:
        """AlterPartitionReassignments of ``topic``'s partitions (None cancels); partition ->
        (error code, error message)."""
        R = M.AlterPartitionReassignmentsRequest
        T = R.ReassignableTopic
        req = R(allow_replication_factor_change=allow_rf_change, topics=[T(name=topic, partitions=[
            T.ReassignablePartition(partition_index=i, replicas=r) for i, r in targets.items()])])
        response = self.apply(self.replication.alter_partition_reassignments(self.image, req))
        assert response.error_code == Error.NONE
        return {p.partition_index: (p.error_code, p.error_message) for p in response.responses[0].partitions}

    def reassignments(self, topics: dict[str, list[int]] | None = None) -> dict:
        """ListPartitionReassignments: (topic, partition) -> (replicas, adding, removing)."""
        R = M.ListPartitionReassignmentsRequest
        req = R(topics=None if topics is None else [
            R.ListPartitionReassignmentsTopics(name=t, partition_indexes=ps) for t, ps in topics.items()])
        response = self.replication.list_partition_reassignments(self.image, req)
        assert response.error_code == Error.NONE
        return {(t.name, p.partition_index): (p.replicas, p.adding_replicas, p.removing_replicas)
                for t in response.topics for p in t.partitions}


def leader_changes(records: list) -> dict[int, int]:
    """partition id -> new leader, for the PartitionChangeRecords that set one."""
    return {r.partition_id: r.leader for r in records
            if isinstance(r, M.PartitionChangeRecord) and r.leader != -2}
