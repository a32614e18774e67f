"""confluent-kafka (librdkafka) driver. Every codec; admin: create, describe, describe
config, incremental alter config, delete."""
from __future__ import annotations

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from . import MEMBER_POLL_S, Deadline, Record, ThreadMember, acks_value, messages_of, placement, short
from .security import confluent_config

NAME = "confluent"
CODECS = frozenset({"none", "gzip", "snappy", "lz4", "zstd"})
ADMIN = frozenset({"create_topic", "describe_topic", "describe_topic_config",
                   "alter_topic_config", "delete_topic"})
ASSIGN_IS_REAL = True
AVAILABLE = True
BASE = {"log_level": 3, "socket.timeout.ms": 10_000, "broker.address.family": "v4"}


def _secured(security) -> dict:
    """The properties of a secured listener's ``security`` (clients/security.py), or none."""
    return {} if security is None else confluent_config(security)


def produce(bootstrap, topic, messages, acks="all", compression="none", idempotent=False,
            timeout=30.0, security=None):
    conf = {**BASE, **_secured(security), "bootstrap.servers": bootstrap, "acks": acks_value(acks),
            "compression.type": compression, "enable.idempotence": idempotent,
            "linger.ms": 5, "message.timeout.ms": int(timeout * 1000)}
    if idempotent:
        conf.update({"retries": 1_000_000, "retry.backoff.ms": 100})
    producer = Producer(conf)
    errors = []

    def on_delivery(err, _msg):
        if err is not None:
            errors.append(err)

    for m in messages_of(messages):
        kwargs = {"key": m.key, "value": m.value, "headers": m.headers or None,
                  "on_delivery": on_delivery}
        if m.partition is not None:
            kwargs["partition"] = m.partition
        while True:
            try:
                producer.produce(topic, **kwargs)
                break
            except BufferError:
                producer.poll(0.1)
    left = producer.flush(timeout)
    if left:
        raise TimeoutError(f"{left} messages undelivered after {timeout} s")
    if errors:
        raise KafkaException(errors[0])


def _record(msg) -> Record:
    return Record(msg.partition(), msg.offset(), msg.key(), msg.value(),
                  [(k, v) for k, v in (msg.headers() or [])])


def _poll(consumer, count, timeout):
    deadline, records = Deadline(timeout), []
    while len(records) < count and not deadline.expired():
        msg = consumer.poll(min(0.5, deadline.left()))
        if msg is None:
            continue
        if msg.error():
            if msg.error().code() == -191:  # _PARTITION_EOF
                continue
            raise KafkaException(msg.error())
        records.append(_record(msg))
    return records


def consume_assign(bootstrap, topic, partitions, count, timeout=30.0, isolation=None,
                   partition_fetch_bytes=None, security=None):
    consumer = Consumer({**BASE, **_secured(security), "bootstrap.servers": bootstrap,
                         "group.id": "unused-assign",
                         "enable.auto.commit": False, "enable.auto.offset.store": False,
                         **({} if isolation is None else {"isolation.level": isolation}),
                         **({} if partition_fetch_bytes is None
                            else {"max.partition.fetch.bytes": partition_fetch_bytes})})
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        records = _poll(consumer, count, timeout)
    finally:
        consumer.close()
    if len(records) < count:
        raise short(records, count)
    return records


def consume_group(bootstrap, topic, group, count, timeout=30.0, commit=True, extra=None):
    consumer = Consumer({**BASE, "bootstrap.servers": bootstrap, "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "session.timeout.ms": 6000, "heartbeat.interval.ms": 500,
                         **(extra or {})})
    try:
        consumer.subscribe([topic])
        records = _poll(consumer, count, timeout)
        if commit and records:
            consumer.commit(offsets=_next_offsets(topic, records), asynchronous=False)
    finally:
        consumer.close()
    if len(records) < count:
        raise short(records, count)
    return records


def _next_offsets(topic, records):
    last = {}
    for r in records:
        last[r.partition] = max(last.get(r.partition, -1), r.offset)
    return [TopicPartition(topic, p, o + 1) for p, o in sorted(last.items())]


def committed(bootstrap, topic, group, partitions, timeout=10.0) -> dict[int, int]:
    """{partition: committed offset} of a group (-1001 where none)."""
    consumer = Consumer({**BASE, "bootstrap.servers": bootstrap, "group.id": group})
    try:
        tps = consumer.committed([TopicPartition(topic, p) for p in partitions], timeout=timeout)
    finally:
        consumer.close()
    return {tp.partition: tp.offset for tp in tps}


def end_offsets(bootstrap, topic, partitions, timeout=10.0) -> dict[int, int]:
    """{partition: log end offset (high watermark)}."""
    consumer = Consumer({**BASE, "bootstrap.servers": bootstrap, "group.id": "unused-offsets"})
    try:
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout)[1]
                for p in partitions}
    finally:
        consumer.close()


def _admin(bootstrap):
    return AdminClient({**BASE, "bootstrap.servers": bootstrap})


def _wait(futures, timeout):
    for future in futures.values():
        future.result(timeout)


def create_topic(bootstrap, topic, partitions=1, replication_factor=1, config=None, timeout=30.0):
    new = NewTopic(topic, num_partitions=partitions, replication_factor=replication_factor,
                   config={k: str(v) for k, v in (config or {}).items()})
    admin = _admin(bootstrap)  # must outlive its futures
    _wait(admin.create_topics([new], operation_timeout=timeout), timeout)


def describe_topic(bootstrap, topic, timeout=30.0):
    admin = _admin(bootstrap)
    md = admin.list_topics(topic, timeout=timeout).topics[topic]
    if md.error is not None:
        raise KafkaException(md.error)
    return {"partitions": {p.id: p.leader for p in md.partitions.values()}}


def describe_replicas(bootstrap, topic, timeout=30.0):
    admin = _admin(bootstrap)
    md = admin.list_topics(topic, timeout=timeout).topics[topic]
    if md.error is not None:
        raise KafkaException(md.error)
    return {p.id: placement(p.leader, p.replicas, p.isrs) for p in md.partitions.values()}


def describe_topic_config(bootstrap, topic, timeout=30.0):
    admin = _admin(bootstrap)
    futures = admin.describe_configs([ConfigResource(ResourceType.TOPIC, topic)])
    (entries,) = [f.result(timeout) for f in futures.values()]
    return {name: entry.value for name, entry in entries.items()}


def alter_topic_config(bootstrap, topic, config, timeout=30.0):
    resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry(k, str(v), incremental_operation=AlterConfigOpType.SET) for k, v in config.items()])
    admin = _admin(bootstrap)
    _wait(admin.incremental_alter_configs([resource]), timeout)


def delete_topic(bootstrap, topic, timeout=30.0):
    admin = _admin(bootstrap)
    _wait(admin.delete_topics([topic], operation_timeout=timeout), timeout)


class GroupMember(ThreadMember):
    """A subscribed Consumer polled in a thread; on_assign / on_revoke / on_lost keep the
    assignment (the eager range,roundrobin assignors: each assignment replaces the last)."""

    def _run(self, bootstrap, topic, group, stop):
        consumer = Consumer({**BASE, "log_level": 0, "bootstrap.servers": bootstrap, "group.id": group,
                             "auto.offset.reset": "earliest", "enable.auto.commit": False,
                             "session.timeout.ms": 6000, "heartbeat.interval.ms": 500})
        try:
            consumer.subscribe(
                [topic],
                on_assign=lambda _c, tps: self._assigned(tp.partition for tp in tps if tp.topic == topic),
                on_revoke=lambda _c, _tps: self._revoked(),
                on_lost=lambda _c, _tps: self._revoked())
            while not stop.is_set():
                msg = consumer.poll(MEMBER_POLL_S)
                if msg is not None and msg.error() and msg.error().fatal():
                    raise KafkaException(msg.error())
        finally:
            consumer.close()  # LeaveGroup
