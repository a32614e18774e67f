"""The cluster as the metadata log describes it, rebuilt by replaying committed records.

Only ``replay`` changes it. The controller decides by reading it, writes records, and
applies them once committed; a broker applies what it fetches from the metadata log. A
process that replays the log from the start holds exactly the state it had.

A partition (PartitionRecord, then PartitionChangeRecords merged into it):

| field                 | meaning                                                              |
|-----------------------|----------------------------------------------------------------------|
| replicas              | the assignment; replicas[0] is the preferred leader                  |
| isr                   | in-sync replicas: always a subset of replicas holding the leader     |
|                       | (empty only with ELR, when the partition has no leader)              |
| leader                | broker id, or NO_LEADER (-1): the partition is offline               |
| leader_epoch          | +1 on every PartitionChangeRecord whose leader field is set (!= -2)  |
| partition_epoch       | +1 on every PartitionChangeRecord: the AlterPartition version token  |
| elr                   | KIP-966 eligible leader replicas: out of the ISR yet complete up to  |
|                       | the high watermark; never overlaps the ISR                           |
| last_known_elr        | the last leader before the ISR emptied (balanced recovery)           |
| leader_recovery_state | RECOVERED (0), or RECOVERING (1) after an unclean election           |
| adding/removing_replicas | reassignment in progress (KIP-455)                                |

A broker's registration (RegisterBrokerRecord, then BrokerRegistrationChangeRecord or the
older Fence/UnfenceBrokerRecord): ``broker_epoch`` is the offset of its RegisterBrokerRecord;
changes naming another epoch are stale and ignored. ``fenced`` brokers lead nothing and join
no ISR; ``in_controlled_shutdown`` brokers are leaving (no new leaderships, no ISR).

Configs (ConfigRecord: resource type, resource name, name, value; a null value removes the
name): a group's (resource type 32) go to ``group_configs[group_id]``, every other resource's
to ``configs[(resource_type, name)]``. A resource left with no config is dropped, as Kafka's
ConfigurationsImage drops it. A group's configs live apart from the group itself: they may
name a group that does not exist yet, and outlive it.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from metadata.configs import GROUP_RESOURCE, TOPIC_RESOURCE
from metadata.security import AclEntry, ScramCredential
from protocol import messages as M

# A client-quota entity: its sorted (entity_type, name) pairs; name None: the type's default.
QuotaEntity = tuple[tuple[str, str | None], ...]

NO_LEADER = -1
NO_LEADER_CHANGE = -2  # PartitionChangeRecord.leader: unchanged
RECOVERED = 0
RECOVERING = 1


@dataclass
class PartitionState:
    replicas: list[int]
    isr: list[int]
    leader: int
    leader_epoch: int
    partition_epoch: int
    elr: list[int] = field(default_factory=list)
    last_known_elr: list[int] = field(default_factory=list)
    leader_recovery_state: int = RECOVERED
    adding_replicas: list[int] = field(default_factory=list)
    removing_replicas: list[int] = field(default_factory=list)

    def copy(self) -> PartitionState:
        return PartitionState(list(self.replicas), list(self.isr), self.leader, self.leader_epoch,
                              self.partition_epoch, list(self.elr), list(self.last_known_elr),
                              self.leader_recovery_state, list(self.adding_replicas),
                              list(self.removing_replicas))

    def merge(self, r) -> None:
        """Apply a PartitionChangeRecord: a null (or -1/-2) field is unchanged."""
        if r.isr is not None:
            self.isr = list(r.isr)
        if r.replicas is not None:
            self.replicas = list(r.replicas)
        if r.adding_replicas is not None:
            self.adding_replicas = list(r.adding_replicas)
        if r.removing_replicas is not None:
            self.removing_replicas = list(r.removing_replicas)
        if r.eligible_leader_replicas is not None:
            self.elr = list(r.eligible_leader_replicas)
        if r.last_known_elr is not None:
            self.last_known_elr = list(r.last_known_elr)
        if r.leader_recovery_state != -1:
            self.leader_recovery_state = r.leader_recovery_state
        if r.leader != NO_LEADER_CHANGE:
            self.leader = r.leader
            self.leader_epoch += 1
        self.partition_epoch += 1


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
    in_controlled_shutdown: bool = False
    # RegisterBrokerRecord.BrokerFeature: name, min_supported_version, max_supported_version
    features: list[Any] = field(default_factory=list)

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
        self.group_configs: dict[str, dict[str, str]] = {}  # group id -> its dynamic configs
        self.brokers: dict[int, BrokerState] = {}
        self.features: dict[str, int] = {}
        self.next_producer_id = 0
        self.acls: dict[uuid.UUID, AclEntry] = {}
        self.scram_credentials: dict[str, dict[int, ScramCredential]] = {}
        self.client_quotas: dict[QuotaEntity, dict[str, float]] = {}
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
            list(r.replicas), list(r.isr), r.leader, r.leader_epoch, r.partition_epoch,
            list(r.eligible_leader_replicas or []), list(r.last_known_elr or []),
            r.leader_recovery_state, list(r.adding_replicas), list(r.removing_replicas))

    def _replay_PartitionChangeRecord(self, r) -> None:
        self.topics_by_id[r.topic_id].partitions[r.partition_id].merge(r)

    def _replay_RemoveTopicRecord(self, r) -> None:
        topic = self.topics_by_id.pop(r.topic_id, None)
        if topic is not None:
            self.topics.pop(topic.name, None)
            self.configs.pop((TOPIC_RESOURCE, topic.name), None)

    def _replay_ConfigRecord(self, r) -> None:
        table: dict[Any, dict[str, str]]
        if r.resource_type == GROUP_RESOURCE:
            table, key = self.group_configs, r.resource_name
        else:
            table, key = self.configs, (r.resource_type, r.resource_name)
        if r.value is None:
            configs = table.get(key)
            if configs is not None:
                configs.pop(r.name, None)
                if not configs:
                    del table[key]
        else:
            table.setdefault(key, {})[r.name] = r.value

    def _replay_RegisterBrokerRecord(self, r) -> None:
        self.brokers[r.broker_id] = BrokerState(
            r.broker_id, r.incarnation_id, r.broker_epoch, list(r.end_points), r.rack, r.fenced,
            r.in_controlled_shutdown, list(r.features or []))

    def _replay_UnfenceBrokerRecord(self, r) -> None:
        broker = self.brokers.get(r.id)
        if broker is not None and broker.broker_epoch == r.epoch:
            broker.fenced = False

    def _replay_FenceBrokerRecord(self, r) -> None:
        broker = self.brokers.get(r.id)
        if broker is not None and broker.broker_epoch == r.epoch:
            broker.fenced = True

    def _replay_BrokerRegistrationChangeRecord(self, r) -> None:
        broker = self.brokers.get(r.broker_id)
        if broker is None or broker.broker_epoch != r.broker_epoch:
            return
        if r.fenced == 1:
            broker.fenced = True
        elif r.fenced == -1:
            broker.fenced = False
        if r.in_controlled_shutdown == 1:
            broker.in_controlled_shutdown = True

    def _replay_UnregisterBrokerRecord(self, r) -> None:
        self.brokers.pop(r.broker_id, None)

    def _replay_ProducerIdsRecord(self, r) -> None:
        self.next_producer_id = r.next_producer_id

    def _replay_FeatureLevelRecord(self, r) -> None:
        if r.feature_level == 0:
            self.features.pop(r.name, None)
        else:
            self.features[r.name] = r.feature_level

    def _replay_AccessControlEntryRecord(self, r) -> None:
        acl_id = uuid.UUID(bytes=bytes(r.id))
        self.acls[acl_id] = AclEntry(acl_id, r.resource_type, r.resource_name, r.pattern_type, r.principal,
                                     r.host, r.operation, r.permission_type)

    def _replay_RemoveAccessControlEntryRecord(self, r) -> None:
        self.acls.pop(uuid.UUID(bytes=bytes(r.id)), None)

    def _replay_UserScramCredentialRecord(self, r) -> None:
        self.scram_credentials.setdefault(r.name, {})[r.mechanism] = ScramCredential(
            r.mechanism, bytes(r.salt), bytes(r.stored_key), bytes(r.server_key), r.iterations)

    def _replay_RemoveUserScramCredentialRecord(self, r) -> None:
        credentials = self.scram_credentials.get(r.name)
        if credentials is not None:
            credentials.pop(r.mechanism, None)
            if not credentials:
                del self.scram_credentials[r.name]

    def _replay_ClientQuotaRecord(self, r) -> None:
        entity = quota_entity((e.entity_type, e.entity_name) for e in r.entity)
        if r.remove:
            quotas = self.client_quotas.get(entity)
            if quotas is not None:
                quotas.pop(r.key, None)
                if not quotas:
                    del self.client_quotas[entity]
        else:
            self.client_quotas.setdefault(entity, {})[r.key] = r.value

    def records(self) -> list[Any]:
        """The image as metadata records (a snapshot's content): replaying them rebuilds it."""
        out: list[Any] = []
        for name, level in sorted(self.features.items()):
            out.append(M.FeatureLevelRecord(name=name, feature_level=level))
        for b in sorted(self.brokers.values(), key=lambda b: b.broker_id):
            out.append(M.RegisterBrokerRecord(
                broker_id=b.broker_id, incarnation_id=b.incarnation_id, broker_epoch=b.broker_epoch,
                end_points=list(b.endpoints), features=list(b.features), rack=b.rack, fenced=b.fenced,
                in_controlled_shutdown=b.in_controlled_shutdown))
        for t in sorted(self.topics.values(), key=lambda t: t.name):
            out.append(M.TopicRecord(name=t.name, topic_id=t.topic_id))
            for pid, p in sorted(t.partitions.items()):
                out.append(M.PartitionRecord(
                    partition_id=pid, topic_id=t.topic_id, replicas=list(p.replicas), isr=list(p.isr),
                    removing_replicas=list(p.removing_replicas), adding_replicas=list(p.adding_replicas),
                    leader=p.leader, leader_recovery_state=p.leader_recovery_state,
                    leader_epoch=p.leader_epoch, partition_epoch=p.partition_epoch,
                    # KIP-966: written only when non-empty, as Kafka does.
                    eligible_leader_replicas=list(p.elr) or None,
                    last_known_elr=list(p.last_known_elr) or None))
        resources = sorted(self.configs.items())
        resources += [((GROUP_RESOURCE, group), configs)
                      for group, configs in sorted(self.group_configs.items())]
        for (resource_type, resource_name), configs in resources:
            for name, value in sorted(configs.items()):
                out.append(M.ConfigRecord(resource_type=resource_type, resource_name=resource_name,
                                          name=name, value=value))
        for acl in sorted(self.acls.values(), key=lambda a: a.id):
            out.append(M.AccessControlEntryRecord(
                id=acl.id.bytes, resource_type=acl.resource_type, resource_name=acl.resource_name,
                pattern_type=acl.pattern_type, principal=acl.principal, host=acl.host,
                operation=acl.operation, permission_type=acl.permission_type))
        for user, credentials in sorted(self.scram_credentials.items()):
            for mechanism, c in sorted(credentials.items()):
                out.append(M.UserScramCredentialRecord(name=user, mechanism=mechanism, salt=c.salt,
                                                       stored_key=c.stored_key, server_key=c.server_key,
                                                       iterations=c.iterations))
        for entity, quotas in sorted(self.client_quotas.items(), key=lambda e: _entity_order(e[0])):
            for key, quota in sorted(quotas.items()):
                out.append(M.ClientQuotaRecord(
                    entity=[M.ClientQuotaRecord.EntityData(entity_type=kind, entity_name=name)
                            for kind, name in entity], key=key, value=quota, remove=False))
        if self.next_producer_id:
            out.append(M.ProducerIdsRecord(broker_id=-1, broker_epoch=-1,
                                           next_producer_id=self.next_producer_id))
        return out

    def topic_config(self, topic: str) -> dict[str, str]:
        return self.configs.get((TOPIC_RESOURCE, topic), {})

    def group_config(self, group_id: str) -> dict[str, str]:
        """The group's dynamic configs (consumer.session.timeout.ms, ...): empty when none is
        set, whether or not the group exists."""
        return self.group_configs.get(group_id, {})

    def unfenced_brokers(self) -> list[int]:
        return sorted(b.broker_id for b in self.brokers.values() if not b.fenced)

    def is_active_broker(self, broker_id: int) -> bool:
        """Registered, unfenced and not in controlled shutdown: may lead and join ISRs."""
        b = self.brokers.get(broker_id)
        return b is not None and not b.fenced and not b.in_controlled_shutdown

    def active_brokers(self) -> list[int]:
        return sorted(b.broker_id for b in self.brokers.values()
                      if not b.fenced and not b.in_controlled_shutdown)


def quota_entity(pairs) -> QuotaEntity:
    """A client-quota entity as the image keys it: its (entity_type, name) pairs, sorted."""
    return tuple(sorted(pairs, key=lambda p: (p[0], p[1] is not None, p[1] or "")))


def _entity_order(entity: QuotaEntity) -> list[tuple[str, bool, str]]:
    return [(kind, name is not None, name or "") for kind, name in entity]
