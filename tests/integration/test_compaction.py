"""Log compaction in a running `strom` node: the broker's cleaner thread (broker/off_loop.py,
engine/cleaner.py) compacts a `cleanup.policy=compact` topic and `__consumer_offsets` while
clients write, and what a consumer reads back is the last record of each key.

One node for the module, its cleaner looking for work every 200 ms and retention (which
deletes the segments a clean replaced) every 200 ms."""
from __future__ import annotations

import asyncio
import glob
import os
import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer

from protocol import messages as M
from protocol.client import KafkaConnection
from protocol.errors import Error

from .clients import confluent as reference
from .clients.confluent import BASE
from .cluster import StromNode

pytestmark = pytest.mark.timeout(120)
WAIT_S = 30.0
SEGMENT_BYTES = 16384
RETRIABLE = (Error.COORDINATOR_NOT_AVAILABLE, Error.NOT_COORDINATOR, Error.COORDINATOR_LOAD_IN_PROGRESS)
COMPACTED = {"cleanup.policy": "compact", "segment.bytes": str(SEGMENT_BYTES), "segment.ms": "100",
             "min.cleanable.dirty.ratio": "0.01", "file.delete.delay.ms": "0"}


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    with StromNode(base_dir=str(tmp_path_factory.mktemp("compaction")),
                   extra={"log.cleaner.backoff.ms": 200, "log.retention.check.interval.ms": 200,
                          "offsets.topic.num.partitions": 1, "offsets.topic.replication.factor": 1,
                          "offsets.topic.segment.bytes": SEGMENT_BYTES,
                          "log.segment.delete.delay.ms": 0}) as n:
        yield n


def read_all(bootstrap: str, topic: str) -> list[tuple[int, bytes, bytes | None]]:
    """(offset, key, value) of every record of partition 0, from the log start to its end."""
    consumer = Consumer({**BASE, "bootstrap.servers": bootstrap, "group.id": f"read-{uuid.uuid4().hex[:8]}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "enable.partition.eof": True})
    consumer.subscribe([topic])
    out = []
    try:
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == -191:  # _PARTITION_EOF
                    return out
                raise AssertionError(msg.error())
            out.append((msg.offset(), msg.key(), msg.value()))
        raise AssertionError(f"{topic}: no end of partition within {WAIT_S} s")
    finally:
        consumer.close()


def log_bytes(node: StromNode, topic: str) -> int:
    return sum(os.path.getsize(p) for p in glob.glob(os.path.join(node.log_dir, f"{topic}-0", "*.log")))


def test_a_compacted_topic_reads_back_the_last_record_of_each_key_in_offset_order(node):
    """After the cleaner has run, a full read returns exactly the model (the last value of
    each key, a tombstoned key absent once delete.retention.ms passed) in offset order, with
    the offsets the records were written at: the gaps stay."""
    topic = f"compact-{uuid.uuid4().hex[:8]}"
    reference.create_topic(node.bootstrap, topic, partitions=1,
                           config={**COMPACTED, "delete.retention.ms": "0"})
    # batches well under segment.bytes (a larger one is refused, as in Kafka)
    producer = Producer({**BASE, "bootstrap.servers": node.bootstrap, "linger.ms": 5, "batch.size": 4096})
    failed = []

    def report(err, _msg):
        if err is not None:
            failed.append(err)

    model: dict[bytes, bytes | None] = {}
    last_write: dict[bytes, int] = {}
    for i in range(3000):
        key = b"k%02d" % (i % 25)
        value = None if i >= 2975 and i % 25 == 7 else b"v%05d" % i + b"." * 60  # k07's last is a tombstone
        producer.produce(topic, key=key, value=value, partition=0, on_delivery=report)
        model[key], last_write[key] = value, i
        if i % 500 == 0:
            producer.flush(WAIT_S)
    assert producer.flush(WAIT_S) == 0 and not failed, failed[:3]
    written = log_bytes(node, topic)
    # Each round: past segment.ms, one more record rolls the log, making what is above
    # cleanable (the active segment never is); a tombstone goes at the clean after the one that
    # stamped its delete horizon, so it may take a second round.
    deadline = time.monotonic() + WAIT_S
    for n in range(1000):
        time.sleep(0.2)
        tick = b"tick%d" % n  # a key of its own: the active segment's record supersedes nothing
        producer.produce(topic, key=tick, value=b"x", partition=0, on_delivery=report)
        assert producer.flush(WAIT_S) == 0 and not failed, failed[:3]
        model[tick], last_write[tick] = b"x", 3000 + n
        expected = sorted(((k, v) for k, v in model.items() if v is not None),
                          key=lambda kv: last_write[kv[0]])
        time.sleep(1.0)
        records = read_all(node.bootstrap, topic)
        got = [(k, v) for _, k, v in records]
        if got == expected or time.monotonic() > deadline:
            break
    offsets = [o for o, _, _ in records]
    assert got == expected, f"{len(got)} records read, {len(expected)} expected"
    assert offsets == [last_write[k] for k, _ in expected], "each record at the offset it was written at"
    assert log_bytes(node, topic) < written / 10, "the replaced segments are deleted"


async def _commit_many(node: StromNode, group: str, topic: str, first: int, count: int) -> None:
    conn = KafkaConnection("127.0.0.1", node.broker_port)
    await conn.connect()
    try:
        R = M.OffsetCommitRequest
        for i in range(first, first + count):
            request = R(group_id=group, generation_id_or_member_epoch=-1, member_id="",
                        retention_time_ms=-1, topics=[R.OffsetCommitRequestTopic(
                            name=topic, partitions=[R.OffsetCommitRequestPartition(
                                partition_index=0, committed_offset=i, committed_metadata="m" * 40)])])
            r = await conn.request(8, 2, request)
            code = r.topics[0].partitions[0].error_code
            while code in RETRIABLE:  # e.g. a write not committed within offsets.commit.timeout.ms
                await asyncio.sleep(0.1)
                r = await conn.request(8, 2, request)
                code = r.topics[0].partitions[0].error_code
            assert code == Error.NONE, Error(code).name
    finally:
        await conn.close()


def test_consumer_offsets_stays_bounded_under_a_group_that_commits_continuously(node):
    """Kafka compacts __consumer_offsets: a group committing the same partition thousands of
    times leaves about a segment of it, and its committed offset is the last one."""
    topic = f"offsets-{uuid.uuid4().hex[:8]}"
    reference.create_topic(node.bootstrap, topic, partitions=1)
    group = f"g-{uuid.uuid4().hex[:8]}"
    for first in range(0, 4000, 1000):  # records of ~120 bytes: 4,000 of them, ~30 segments
        asyncio.run(_commit_many(node, group, topic, first, 1000))
        time.sleep(0.2)
    written = 4000 * 100
    deadline = time.monotonic() + WAIT_S
    while log_bytes(node, "__consumer_offsets") > 4 * SEGMENT_BYTES and time.monotonic() < deadline:
        time.sleep(0.3)
    assert log_bytes(node, "__consumer_offsets") <= 4 * SEGMENT_BYTES < written / 5
    consumer = Consumer({**BASE, "bootstrap.servers": node.bootstrap, "group.id": group})
    try:
        from confluent_kafka import TopicPartition
        [tp] = consumer.committed([TopicPartition(topic, 0)], timeout=WAIT_S)
        assert tp.offset == 3999
    finally:
        consumer.close()


def test_a_record_without_key_produced_to_a_compacted_topic_is_refused_invalid_record_as_kafka_does(node):
    """LogValidator.validateKey (KIP-467): the keyless record's batch fails with INVALID_RECORD
    and nothing of it is stored; a keyed record after it is stored at offset 0."""
    from confluent_kafka import KafkaError
    topic = f"keys-{uuid.uuid4().hex[:8]}"
    reference.create_topic(node.bootstrap, topic, partitions=1, config={"cleanup.policy": "compact"})
    producer = Producer({**BASE, "bootstrap.servers": node.bootstrap, "linger.ms": 0,
                         "message.timeout.ms": int(WAIT_S * 1000)})
    reports: list = []
    producer.produce(topic, value=b"no key", partition=0, on_delivery=lambda err, _m: reports.append(err))
    assert producer.flush(WAIT_S) == 0
    producer.produce(topic, key=b"k", value=b"keyed", partition=0,
                     on_delivery=lambda err, _m: reports.append(err))
    assert producer.flush(WAIT_S) == 0
    refused, stored = reports
    assert refused is not None and refused.code() == KafkaError.INVALID_RECORD, refused
    assert stored is None, stored
    assert read_all(node.bootstrap, topic) == [(0, b"k", b"keyed")]
