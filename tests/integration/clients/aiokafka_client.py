"""aiokafka driver: each operation is one ``asyncio.run`` bounded by ``timeout``.
Every codec (aiokafka compresses through cramjam). Admin: create, describe, describe
config, alter config (the legacy AlterConfigs API), delete."""
from __future__ import annotations

import asyncio

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRebalanceListener, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.structs import OffsetAndMetadata

from . import MEMBER_POLL_S, Deadline, Record, ThreadMember, acks_value, messages_of, placement, short
from .security import aiokafka_config

NAME = "aiokafka"
CODECS = frozenset({"none", "gzip", "snappy", "lz4", "zstd"})
ADMIN = frozenset({"create_topic", "describe_topic", "describe_topic_config",
                   "alter_topic_config", "delete_topic"})
ASSIGN_IS_REAL = True
AVAILABLE = True


def _run(coro, timeout):
    async def bounded():
        return await asyncio.wait_for(coro, timeout)
    try:
        return asyncio.run(bounded())
    except TimeoutError:
        raise TimeoutError(f"aiokafka operation took over {timeout} s") from None


def _secured(security) -> dict:
    """The keyword arguments of a secured listener's ``security`` (clients/security.py), or none."""
    return {} if security is None else aiokafka_config(security)


def produce(bootstrap, topic, messages, acks="all", compression="none", idempotent=False,
            timeout=30.0, security=None):
    acks = acks_value(acks)

    async def go():
        producer = AIOKafkaProducer(
            **_secured(security), bootstrap_servers=bootstrap, acks="all" if acks == -1 else acks,
            compression_type=None if compression == "none" else compression,
            enable_idempotence=idempotent, linger_ms=5, request_timeout_ms=10_000)
        await producer.start()
        try:
            futures = [await producer.send(topic, key=m.key, value=m.value,
                                           headers=list(m.headers), partition=m.partition)
                       for m in messages_of(messages)]
            await asyncio.gather(*futures)
        finally:
            await producer.stop()
    _run(go(), timeout)


def _record(r) -> Record:
    return Record(r.partition, r.offset, r.key, r.value, [(k, bytes(v)) for k, v in (r.headers or ())])


async def _poll(consumer, count, deadline):
    records = []
    while len(records) < count and not deadline.expired():
        batches = await consumer.getmany(timeout_ms=int(min(0.5, deadline.left()) * 1000),
                                         max_records=count - len(records))
        for batch in batches.values():
            records.extend(_record(r) for r in batch)
    return records[:count]


def consume_assign(bootstrap, topic, partitions, count, timeout=30.0, isolation=None,
                   partition_fetch_bytes=None, security=None):
    async def go():
        consumer = AIOKafkaConsumer(**_secured(security), bootstrap_servers=bootstrap, group_id=None,
                                    enable_auto_commit=False, auto_offset_reset="earliest",
                                    **({} if isolation is None else {"isolation_level": isolation}),
                                    **({} if partition_fetch_bytes is None
                                       else {"max_partition_fetch_bytes": partition_fetch_bytes}))
        await consumer.start()
        try:
            tps = [TopicPartition(topic, p) for p in partitions]
            consumer.assign(tps)
            await consumer.seek_to_beginning(*tps)
            return await _poll(consumer, count, Deadline(timeout - 1))
        finally:
            await consumer.stop()
    records = _run(go(), timeout + 5)
    if len(records) < count:
        raise short(records, count)
    return records


def consume_group(bootstrap, topic, group, count, timeout=30.0, commit=True):
    async def go():
        consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                                    auto_offset_reset="earliest", enable_auto_commit=False,
                                    session_timeout_ms=6000, heartbeat_interval_ms=500)
        await consumer.start()
        try:
            records = await _poll(consumer, count, Deadline(timeout - 1))
            if commit and records:
                last = {}
                for r in records:
                    last[r.partition] = max(last.get(r.partition, -1), r.offset)
                await consumer.commit({TopicPartition(topic, p): OffsetAndMetadata(o + 1, "")
                                       for p, o in last.items()})
            return records
        finally:
            await consumer.stop()
    records = _run(go(), timeout + 5)
    if len(records) < count:
        raise short(records, count)
    return records


def _admin_call(bootstrap, fn, timeout):
    async def go():
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=int(timeout * 1000))
        await admin.start()
        try:
            return await fn(admin)
        finally:
            await admin.close()
    return _run(go(), timeout + 5)


def _check(response, what):
    for entry in getattr(response, "topic_errors", None) or getattr(response, "topic_error_codes", []):
        if entry[1]:
            raise RuntimeError(f"{what}: {entry}")


def create_topic(bootstrap, topic, partitions=1, replication_factor=1, config=None, timeout=30.0):
    new = NewTopic(topic, partitions, replication_factor,
                   topic_configs={k: str(v) for k, v in (config or {}).items()})
    _check(_admin_call(bootstrap, lambda a: a.create_topics([new], timeout_ms=int(timeout * 1000)),
                       timeout), f"create {topic}")


def describe_topic(bootstrap, topic, timeout=30.0):
    (md,) = _admin_call(bootstrap, lambda a: a.describe_topics([topic]), timeout)
    if md["error_code"]:
        raise RuntimeError(f"describe {topic}: error {md['error_code']}")
    return {"partitions": {p["partition"]: p["leader"] for p in md["partitions"]}}


def describe_replicas(bootstrap, topic, timeout=30.0):
    (md,) = _admin_call(bootstrap, lambda a: a.describe_topics([topic]), timeout)
    if md["error_code"]:
        raise RuntimeError(f"describe {topic}: error {md['error_code']}")
    return {p["partition"]: placement(p["leader"], p["replicas"], p["isr"]) for p in md["partitions"]}


def describe_topic_config(bootstrap, topic, timeout=30.0):
    (response,) = _admin_call(bootstrap, lambda a: a.describe_configs(
        [ConfigResource(ConfigResourceType.TOPIC, topic)]), timeout)
    ((error_code, error_message, _type, _name, entries),) = response.resources
    if error_code:
        raise RuntimeError(f"describe config {topic}: {error_code} {error_message}")
    return {entry[0]: entry[1] for entry in entries}


def alter_topic_config(bootstrap, topic, config, timeout=30.0):
    resource = ConfigResource(ConfigResourceType.TOPIC, topic, configs={k: str(v) for k, v in config.items()})
    (response,) = _admin_call(bootstrap, lambda a: a.alter_configs([resource]), timeout)
    for error_code, error_message, *_ in response.resources:
        if error_code:
            raise RuntimeError(f"alter config {topic}: {error_code} {error_message}")


def delete_topic(bootstrap, topic, timeout=30.0):
    _check(_admin_call(bootstrap, lambda a: a.delete_topics([topic], timeout_ms=int(timeout * 1000)),
                       timeout), f"delete {topic}")


class GroupMember(ThreadMember):
    """An AIOKafkaConsumer in its own event loop (``asyncio.run`` in the member's thread);
    a ConsumerRebalanceListener keeps the assignment (eager assignors)."""

    def _run(self, bootstrap, topic, group, stop):
        asyncio.run(self._main(bootstrap, topic, group, stop))

    async def _main(self, bootstrap, topic, group, stop):
        member = self

        class Listener(ConsumerRebalanceListener):
            def on_partitions_revoked(self, revoked):
                member._revoked()

            def on_partitions_assigned(self, assigned):
                member._assigned(tp.partition for tp in assigned if tp.topic == topic)

        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group,
                                    auto_offset_reset="earliest", enable_auto_commit=False,
                                    session_timeout_ms=6000, heartbeat_interval_ms=500)
        await consumer.start()
        try:
            consumer.subscribe([topic], listener=Listener())
            while not stop.is_set():
                await consumer.getmany(timeout_ms=int(MEMBER_POLL_S * 1000))
        finally:
            await consumer.stop()  # LeaveGroup
