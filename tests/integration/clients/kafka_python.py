"""kafka-python driver. Every codec: snappy goes through cramjam's raw snappy (kafka-python
looks only for python-snappy, which is not a dependency here; its own xerial framing still
runs). Admin: create, describe, describe config, alter config, delete."""
from __future__ import annotations

import types

import cramjam
import kafka.codec
from kafka import ConsumerRebalanceListener, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewTopic
from kafka.structs import OffsetAndMetadata

from . import MEMBER_POLL_S, Deadline, Record, ThreadMember, acks_value, messages_of, placement, short
from .security import kafka_python_config

NAME = "kafka_python"
CODECS = frozenset({"none", "gzip", "snappy", "lz4", "zstd"})
ADMIN = frozenset({"create_topic", "describe_topic", "describe_topic_config",
                   "alter_topic_config", "delete_topic"})
ASSIGN_IS_REAL = True
AVAILABLE = True

if not kafka.codec.has_snappy():
    kafka.codec.snappy = types.SimpleNamespace(
        compress=lambda data: bytes(cramjam.snappy.compress_raw(bytes(data))),
        decompress=lambda data: bytes(cramjam.snappy.decompress_raw(bytes(data))),
    )


def _secured(security) -> dict:
    """The keyword arguments of a secured listener's ``security`` (clients/security.py), or none."""
    return {} if security is None else kafka_python_config(security)


def produce(bootstrap, topic, messages, acks="all", compression="none", idempotent=False,
            timeout=30.0, security=None):
    acks = acks_value(acks)
    producer = KafkaProducer(
        **_secured(security), bootstrap_servers=bootstrap, acks="all" if acks == -1 else acks,
        compression_type=None if compression == "none" else compression,
        enable_idempotence=idempotent, linger_ms=5, request_timeout_ms=10_000,
        retries=1_000_000 if idempotent else 3, delivery_timeout_ms=int(timeout * 1000),
        max_block_ms=int(timeout * 1000))
    try:
        futures = []
        for m in messages_of(messages):
            futures.append(producer.send(topic, key=m.key, value=m.value,
                                         headers=list(m.headers), partition=m.partition))
        producer.flush(timeout)
        deadline = Deadline(timeout)
        for future in futures:
            future.get(timeout=max(0.1, deadline.left()))
    finally:
        producer.close(timeout=5)


def _record(r) -> Record:
    return Record(r.partition, r.offset, r.key, r.value, [(k, v) for k, v in (r.headers or [])])


def _poll(consumer, count, timeout):
    deadline, records = Deadline(timeout), []
    while len(records) < count and not deadline.expired():
        # The whole time left: a poll whose timeout cuts a join short can strand it (subscribe).
        batches = consumer.poll(timeout_ms=int(deadline.left() * 1000), max_records=count - len(records))
        for batch in batches.values():
            records.extend(_record(r) for r in batch)
    return records[:count]


def consume_assign(bootstrap, topic, partitions, count, timeout=30.0, isolation=None,
                   partition_fetch_bytes=None, security=None):
    consumer = KafkaConsumer(**_secured(security), bootstrap_servers=bootstrap, group_id=None,
                             enable_auto_commit=False, request_timeout_ms=15_000,
                             **({} if isolation is None else {"isolation_level": isolation}),
                             **({} if partition_fetch_bytes is None
                                else {"max_partition_fetch_bytes": partition_fetch_bytes}))
    try:
        tps = [TopicPartition(topic, p) for p in partitions]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        records = _poll(consumer, count, timeout)
    finally:
        consumer.close(autocommit=False)
    if len(records) < count:
        raise short(records, count)
    return records


def subscribe(consumer, topic: str, listener=None) -> None:
    """``consumer.subscribe([topic])`` with the topic's partitions known before the first join.

    Without them a leader assigns nothing, rejoins once its metadata arrives, and kafka-python
    3.0.12 can strand that rejoin: when the poll's wait times out between the leader's JoinGroup
    and SyncGroup answers, its join task completes unread, need_rejoin() is already False (the
    leader's assignment snapshot now matches its metadata), so the assignment is never applied
    and heartbeats stay off until the coordinator expires the member (BaseCoordinator.need_rejoin
    ignores ``rejoining``). A broker that answers a new group's JoinGroup at once
    (group.initial.rebalance.delay.ms=0) lets the join overtake the client's first metadata
    request. The broker is right throughout; the coordinator's log shows it. One blocking
    metadata fetch of the topics the user may describe: a topic it may not stays refused as
    before, at the first poll. A poll given the whole time left also waits any join out."""
    consumer.subscribe([topic], **({} if listener is None else {"listener": listener}))
    consumer.partitions_for_topic(topic)


def consume_group(bootstrap, topic, group, count, timeout=30.0, commit=True):
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group,
                             auto_offset_reset="earliest", enable_auto_commit=False,
                             session_timeout_ms=6000, heartbeat_interval_ms=500,
                             request_timeout_ms=15_000)
    try:
        subscribe(consumer, topic)
        records = _poll(consumer, count, timeout)
        if commit and records:
            last = {}
            for r in records:
                last[r.partition] = max(last.get(r.partition, -1), r.offset)
            consumer.commit({TopicPartition(topic, p): OffsetAndMetadata(o + 1, "", -1)
                             for p, o in last.items()})
    finally:
        consumer.close(autocommit=False)
    if len(records) < count:
        raise short(records, count)
    return records


def _admin(bootstrap):
    return KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30_000)


def _with_admin(bootstrap, fn):
    admin = _admin(bootstrap)
    try:
        return fn(admin)
    finally:
        admin.close()


def create_topic(bootstrap, topic, partitions=1, replication_factor=1, config=None, timeout=30.0):
    new = NewTopic(topic, partitions, replication_factor,
                   topic_configs={k: str(v) for k, v in (config or {}).items()})
    _with_admin(bootstrap, lambda a: a.create_topics([new], timeout_ms=int(timeout * 1000)))


def describe_topic(bootstrap, topic, timeout=30.0):
    (md,) = _with_admin(bootstrap, lambda a: a.describe_topics([topic]))
    if md["error_code"]:
        raise RuntimeError(f"describe {topic}: error {md['error_code']}")
    return {"partitions": {p["partition_index"]: p["leader_id"] for p in md["partitions"]}}


def describe_replicas(bootstrap, topic, timeout=30.0):
    (md,) = _with_admin(bootstrap, lambda a: a.describe_topics([topic]))
    if md["error_code"]:
        raise RuntimeError(f"describe {topic}: error {md['error_code']}")
    return {p["partition_index"]: placement(p["leader_id"], p["replica_nodes"], p["isr_nodes"])
            for p in md["partitions"]}


def describe_topic_config(bootstrap, topic, timeout=30.0):
    result = _with_admin(bootstrap, lambda a: a.describe_configs(
        [ConfigResource(ConfigResourceType.TOPIC, topic)], config_filter="all"))
    entries = _by_type(result)[topic]
    return {name: (entry["value"] if isinstance(entry, dict) else entry) for name, entry in entries.items()}


def alter_topic_config(bootstrap, topic, config, timeout=30.0):
    resource = ConfigResource(ConfigResourceType.TOPIC, topic, configs={k: str(v) for k, v in config.items()})
    result = _with_admin(bootstrap, lambda a: a.alter_configs([resource], raise_on_unknown=False))
    outcome = _by_type(result)[topic]
    if outcome != "OK":
        raise RuntimeError(f"alter {topic}: {outcome!r}")


def _by_type(result):
    """kafka-python keys results by resource type name ("topic")."""
    (entries,) = [v for k, v in result.items() if str(k).lower() == "topic"]
    return entries


def delete_topic(bootstrap, topic, timeout=30.0):
    _with_admin(bootstrap, lambda a: a.delete_topics([topic], timeout_ms=int(timeout * 1000)))


class GroupMember(ThreadMember):
    """A subscribed KafkaConsumer polled in a thread; a ConsumerRebalanceListener keeps the
    assignment (eager range/roundrobin assignors)."""

    def _run(self, bootstrap, topic, group, stop):
        member = self

        class Listener(ConsumerRebalanceListener):
            def on_partitions_revoked(self, revoked):
                member._revoked()

            def on_partitions_assigned(self, assigned):
                member._assigned(tp.partition for tp in assigned if tp.topic == topic)

        consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group,
                                 auto_offset_reset="earliest", enable_auto_commit=False,
                                 session_timeout_ms=6000, heartbeat_interval_ms=500,
                                 request_timeout_ms=15_000)
        self._consumer = consumer
        try:
            subscribe(consumer, topic, Listener())
            while not stop.is_set():
                consumer.poll(timeout_ms=int(MEMBER_POLL_S * 1000))
        finally:
            consumer.close(autocommit=False)  # LeaveGroup

    def history(self) -> str:
        """Also the client's own view of its membership: a member stuck rebalancing with
        heartbeats off and its join task done shows the client-side strand above."""
        text = super().history()
        c = getattr(getattr(self, "_consumer", None), "_coordinator", None)
        if c is not None:
            task = getattr(c, "_join_task", None)
            task = "none" if task is None else ("done" if getattr(task, "is_done", False) else "not done")
            text += (f"\n    client state: {getattr(c, 'state', '?')}, rejoining "
                     f"{getattr(c, 'rejoining', '?')}, rejoin_needed {getattr(c, 'rejoin_needed', '?')}, "
                     f"heartbeat enabled {getattr(c, '_heartbeat_enabled', '?')}, generation "
                     f"{getattr(c, '_generation', '?')}, join task "
                     f"{task}")
        return text
