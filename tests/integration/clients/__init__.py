"""One thin driver per real Kafka client, all with the same operations, so one test
body runs against every client.

Every driver module exposes:

    NAME, CODECS (subset of {"none", "gzip", "snappy", "lz4", "zstd"}), ADMIN (the admin
    operations below it supports), ASSIGN_IS_REAL (False where "assign" is emulated)

    produce(bootstrap, topic, messages, acks="all", compression="none",
            idempotent=False, timeout=30.0) -> None
    consume_assign(bootstrap, topic, partitions, count, timeout=30.0) -> [Record]
        from the beginning of each partition, no group, nothing committed
    consume_group(bootstrap, topic, group, count, timeout=30.0, commit=True) -> [Record]
        subscribe from the committed offsets (else earliest); commit exactly the
        records returned (offset + 1) when ``commit``
    create_topic(bootstrap, topic, partitions=1, replication_factor=1, config=None)
    describe_topic(bootstrap, topic) -> {"partitions": {id: leader}}
    describe_topic_config(bootstrap, topic) -> {name: value}
    alter_topic_config(bootstrap, topic, {name: value})
    delete_topic(bootstrap, topic)

A message is ``(key, value, headers)`` or ``(key, value, headers, partition)``; keys
and values are bytes or None, headers a list of (str, bytes). A record is the tuple
``(partition, offset, key, value, headers)``. kcat and kafkajs carry text through
their command lines and JSON, so tests keep keys, values and headers UTF-8.
A driver that cannot finish in ``timeout`` raises ``TimeoutError``.
"""
from __future__ import annotations

import importlib
import time
from typing import NamedTuple

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
DRIVERS = ("confluent", "kafka_python", "aiokafka_client", "kcat", "kafkajs")


class Record(NamedTuple):
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes]]


class Message(NamedTuple):
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes]]
    partition: int | None = None


def messages_of(messages) -> list[Message]:
    return [Message(*m) for m in messages]


def driver(name: str):
    return importlib.import_module(f"{__name__}.{name}")


def acks_value(acks) -> int:
    """0, 1 or -1 from 0 / 1 / "all" / -1 / "0" / "1"."""
    if acks in ("all", -1, "-1"):
        return -1
    value = int(acks)
    if value not in (0, 1):
        raise ValueError(f"acks must be 0, 1 or all, not {acks!r}")
    return value


class Deadline:
    def __init__(self, timeout: float):
        self.end = time.monotonic() + timeout

    def left(self) -> float:
        return max(0.0, self.end - time.monotonic())

    def expired(self) -> bool:
        return time.monotonic() >= self.end


def short(records, count) -> TimeoutError:
    return TimeoutError(f"got {len(records)} of {count} records in time")
