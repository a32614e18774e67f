"""The cluster as the metadata log describes it, rebuilt by replaying committed records.

Only ``replay`` changes it. The controller decides by reading it, writes records, and
applies them once committed; a broker applies what it fetches from the metadata log. A
process that replays the log from the start holds exactly the state it had.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from protocol import messages as M

TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4


@dataclass
class PartitionState:
    replicas: list[int]
    isr: list[int]
    leader: int
    leader_epoch: int
    partition_epoch: int


@dataclass
class TopicState:
    name: str
    topic_id: bytes
    partitions: dict[int, PartitionState] = field(default_factory=dict)


@dataclass
class BrokerState:
    broker_id: int
    incarnation_id: bytes
    broker_epoch: int
    endpoints: list[Any]  # RegisterBrokerRecord.BrokerEndpoint: name, host, port, security_protocol
    rack: str | None
    fenced: bool = True

    def endpoint(self, listener: str) -> tuple[str, int] | None:
        for e in self.endpoints:
            if e.name == listener:
                return e.host, e.port
        return None


class MetadataImage:
    def __init__(self) -> None:
        self.topics: dict[str, TopicState] = {}
        self.topics_by_id: dict[bytes, TopicState] = {}
        self.configs: dict[tuple[int, str], dict[str, str]] = {}
        self.brokers: dict[int, BrokerState] = {}
        self.features: dict[str, int] = {}
        self.next_producer_id = 0
        self.last_offset = -1

    def replay(self, offset: int, record: Any) -> None:
        getattr(self, "_replay_" + type(record).__name__, self._ignore)(record)
        self.last_offset = offset

    def _ignore(self, record: Any) -> None:
        pass

    def _replay_TopicRecord(self, r) -> None:
        topic = TopicState(r.name, r.topic_id)
        self.topics[r.name] = topic
        self.topics_by_id[r.topic_id] = topic

    def _replay_PartitionRecord(self, r) -> None:
        topic = self.topics_by_id[r.topic_id]
        topic.partitions[r.partition_id] = PartitionState(
            list(r.replicas), list(r.isr), r.leader, r.leader_epoch, r.partition_epoch)

    def _replay_PartitionChangeRecord(self, r) -> None:
        p = self.topics_by_id[r.topic_id].partitions[r.partition_id]
        if r.isr is not None:
            p.isr = list(r.isr)
        if r.replicas is not None:
            p.replicas = list(r.replicas)
        if r.leader != -2:
            p.leader = r.leader
            p.leader_epoch += 1
        p.partition_epoch += 1

    def _replay_RemoveTopicRecord(self, r) -> None:
        topic = self.topics_by_id.pop(r.topic_id, None)
        if topic is not None:
            self.topics.pop(topic.name, None)
            self.configs.pop((TOPIC_RESOURCE, topic.name), None)

    def _replay_ConfigRecord(self, r) -> None:
        configs = self.configs.setdefault((r.resource_type, r.resource_name), {})
        if r.value is None:
            configs.pop(r.name, None)
        else:
            configs[r.name] = r.value

    def _replay_RegisterBrokerRecord(self, r) -> None:
        self.brokers[r.broker_id] = BrokerState(
            r.broker_id, r.incarnation_id, r.broker_epoch, list(r.end_points), r.rack, r.fenced)

    def _replay_UnfenceBrokerRecord(self, r) -> None:
        broker = self.brokers.get(r.id)
        if broker is not None and broker.broker_epoch == r.epoch:
            broker.fenced = False

    def _replay_FenceBrokerRecord(self, r) -> None:
        broker = self.brokers.get(r.id)
        if broker is not None and broker.broker_epoch == r.epoch:
            broker.fenced = True

    def _replay_UnregisterBrokerRecord(self, r) -> None:
        self.brokers.pop(r.broker_id, None)

    def _replay_ProducerIdsRecord(self, r) -> None:
        self.next_producer_id = r.next_producer_id

    def _replay_FeatureLevelRecord(self, r) -> None:
        self.features[r.name] = r.feature_level

    def records(self) -> list[Any]:
        """The image as metadata records (a snapshot's content): replaying them rebuilds it."""
        out: list[Any] = []
        for name, level in sorted(self.features.items()):
            out.append(M.FeatureLevelRecord(name=name, feature_level=level))
        for b in sorted(self.brokers.values(), key=lambda b: b.broker_id):
            out.append(M.RegisterBrokerRecord(
                broker_id=b.broker_id, incarnation_id=b.incarnation_id, broker_epoch=b.broker_epoch,
                end_points=list(b.endpoints), rack=b.rack, fenced=b.fenced))
        for t in sorted(self.topics.values(), key=lambda t: t.name):
            out.append(M.TopicRecord(name=t.name, topic_id=t.topic_id))
            for pid, p in sorted(t.partitions.items()):
                out.append(M.PartitionRecord(
                    partition_id=pid, topic_id=t.topic_id, replicas=list(p.replicas), isr=list(p.isr),
                    leader=p.leader, leader_epoch=p.leader_epoch, partition_epoch=p.partition_epoch))
        for (resource_type, resource_name), configs in sorted(self.configs.items()):
            for name, value in sorted(configs.items()):
                out.append(M.ConfigRecord(resource_type=resource_type, resource_name=resource_name,
                                          name=name, value=value))
        if self.next_producer_id:
            out.append(M.ProducerIdsRecord(broker_id=-1, broker_epoch=-1,
                                           next_producer_id=self.next_producer_id))
        return out

    def topic_config(self, topic: str) -> dict[str, str]:
        return self.configs.get((TOPIC_RESOURCE, topic), {})

    def unfenced_brokers(self) -> list[int]:
        return sorted(b.broker_id for b in self.brokers.values() if not b.fenced)
