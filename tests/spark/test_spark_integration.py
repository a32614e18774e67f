"""Spark reads a real node's log dir: `spark.read.format("strom")` against what real
clients produced, field by field.

A real `strom` node on loopback takes records from confluent-kafka (every codec) and
kafka-python (every codec); every record's (topic, partition, offset) comes from the
client's own delivery report, so the expected rows are known exactly. The node writes
its replication-offset-checkpoint every 100 ms here, and each test waits until the file
covers what it produced before Spark reads: the reader only returns committed records.

The oracle for timestamps and timestamp types is twofold: what the producer set
(CreateTime, explicit timestamps) and what a confluent-kafka consumer reads back over
the wire (LogAppendTime, where the broker chooses the time).

Skipped as a whole until ``python3 -m strom start --help`` works.
"""
from __future__ import annotations

import json
import os
import time
import uuid
from typing import NamedTuple

import pytest
from confluent_kafka import OFFSET_BEGINNING, TIMESTAMP_LOG_APPEND_TIME, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaProducer
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from engine.checkpoint import read_offset_checkpoint
from engine.reader import PartitionReader
from tests.integration.clients import CODECS
from tests.integration.clients import kafka_python as _kafka_python  # noqa: F401  (its snappy shim)
from tests.integration.cluster import StromNode

pytestmark = [
    pytest.mark.timeout(300),
]

FORMAT = "strom"
CHECKPOINT_WAIT_S = 30.0
BASE = {"log_level": 3, "socket.timeout.ms": 10_000, "broker.address.family": "v4"}
FAST_CHECKPOINTS = {
    "replica.high.watermark.checkpoint.interval.ms": 100,
    "log.flush.offset.checkpoint.interval.ms": 100,  # recovery-point-offset-checkpoint
    "log.flush.start.offset.checkpoint.interval.ms": 100,  # log-start-offset-checkpoint
    "log.retention.check.interval.ms": 200,
}

KAFKA_SCHEMA = StructType([
    StructField("key", BinaryType()),
    StructField("value", BinaryType()),
    StructField("topic", StringType()),
    StructField("partition", IntegerType()),
    StructField("offset", LongType()),
    StructField("timestamp", TimestampType()),
    StructField("timestampType", IntegerType()),
])
HEADERS_FIELD = StructField("headers", ArrayType(StructType([
    StructField("key", StringType()), StructField("value", BinaryType())])))


class Msg(NamedTuple):
    """What a test produces: timestamp None lets the client stamp the current time."""
    partition: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()
    timestamp: int | None = None


class Row(NamedTuple):
    """One record as Spark should show it (timestamp in epoch ms, headers None if none)."""
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int
    timestamp_type: int
    headers: tuple[tuple[str, bytes | None], ...] | None


# ---------------------------------------------------------------------------- the node

@pytest.fixture(scope="module")
def node(tmp_path_factory):
    node = StromNode(base_dir=str(tmp_path_factory.mktemp("spark-node")), extra=FAST_CHECKPOINTS)
    try:
        node.start()
        yield node
    finally:
        node.cleanup()


def new_topic(node, partitions=3, config=None, prefix="t") -> str:
    topic = f"{prefix}-{uuid.uuid4().hex[:10]}"
    admin = AdminClient({**BASE, "bootstrap.servers": node.bootstrap})
    futures = admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1,
                                            config={k: str(v) for k, v in (config or {}).items()})])
    for f in futures.values():
        f.result(30)
    return topic


def now_ms() -> int:
    return int(time.time() * 1000)


# ---------------------------------------------------------------------------- producing

def varied_messages(count: int, partitions: int, tag: str, base_ts: int) -> list[Msg]:
    """Keys, null keys, null values, empty values, no / one / several headers (a repeated
    header key, a null and an empty header value, non-ASCII), explicit timestamps on most
    records and the client's clock on every fifth, over every partition."""
    out = []
    for i in range(count):
        key = None if i % 4 == 1 else f"{tag}-k{i % 5}".encode()
        if i % 6 == 2:
            value = None
        elif i % 11 == 3:
            value = b""
        else:
            value = f"{tag}-v{i:04d}|".encode() + bytes(range(256))[: 20 + i % 50] + b"x" * (i % 17)
        headers: tuple = ()
        if i % 3 == 1:
            headers = (("h", f"{i}".encode()),)
        elif i % 3 == 2:
            headers = (("a", b"1"), ("a", b""), ("n\u00e9", "\u00fc".encode()), ("nul", None))
        ts = None if i % 5 == 4 else base_ts + 7 * i
        out.append(Msg(i % partitions, key, value, headers, ts))
    return out


def produce_confluent(node, topic, messages, codec="none", batch_flush=0) -> list[Row]:
    """Produce with librdkafka; the expected rows, with each record's partition, offset and
    (CreateTime or LogAppendTime) timestamp from its delivery report. ``batch_flush`` > 0
    flushes after that many messages, so each group lands as its own batch."""
    producer = Producer({**BASE, "bootstrap.servers": node.bootstrap, "acks": -1,
                         "compression.type": codec, "linger.ms": 5, "enable.idempotence": False})
    rows: list[Row | None] = [None] * len(messages)
    errors = []

    def delivered(i, err, msg):
        if err is not None:
            errors.append(err)
            return
        ts_type, ts = msg.timestamp()
        m = messages[i]
        rows[i] = Row(topic, msg.partition(), msg.offset(), m.key, m.value, ts,
                      1 if ts_type == TIMESTAMP_LOG_APPEND_TIME else 0, tuple(m.headers) or None)

    for i, m in enumerate(messages):
        kwargs = {"key": m.key, "value": m.value, "partition": m.partition,
                  "on_delivery": lambda err, msg, i=i: delivered(i, err, msg)}
        if m.headers:
            kwargs["headers"] = list(m.headers)
        if m.timestamp is not None:
            kwargs["timestamp"] = m.timestamp
        producer.produce(topic, **kwargs)
        if batch_flush and (i + 1) % batch_flush == 0:
            producer.flush(30)
    assert producer.flush(30) == 0, "undelivered messages"
    assert not errors, errors
    return rows


def produce_kafka_python(node, topic, messages, codec) -> list[Row]:
    """The same with kafka-python (its own codecs and record building); it refuses null
    header values, so those headers are left out."""
    messages = [m._replace(headers=tuple(h for h in m.headers if h[1] is not None)) for m in messages]
    producer = KafkaProducer(bootstrap_servers=node.bootstrap, acks="all", linger_ms=5,
                             compression_type=None if codec == "none" else codec,
                             request_timeout_ms=10_000, retries=3)
    try:
        futures = [producer.send(topic, key=m.key, value=m.value, partition=m.partition,
                                 headers=list(m.headers), timestamp_ms=m.timestamp)
                   for m in messages]
        producer.flush(30)
        rows = []
        for m, f in zip(messages, futures):
            md = f.get(timeout=30)
            rows.append(Row(topic, md.partition, md.offset, m.key, m.value, md.timestamp, 0,
                            tuple(m.headers) or None))
        return rows
    finally:
        producer.close(timeout=5)


def consume_confluent(node, topic, partitions) -> list[Row]:
    """Everything in the partitions, read back over the wire (the LogAppendTime oracle)."""
    consumer = Consumer({**BASE, "bootstrap.servers": node.bootstrap, "group.id": "spark-oracle",
                         "enable.auto.commit": False, "enable.partition.eof": True})
    rows, eof = [], set()
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        deadline = time.monotonic() + 30
        while len(eof) < len(partitions) and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == -191:  # _PARTITION_EOF
                    eof.add(msg.partition())
                    continue
                raise RuntimeError(msg.error())
            ts_type, ts = msg.timestamp()
            headers = tuple(msg.headers()) if msg.headers() else None
            rows.append(Row(topic, msg.partition(), msg.offset(), msg.key(), msg.value(), ts,
                            1 if ts_type == TIMESTAMP_LOG_APPEND_TIME else 0, headers))
    finally:
        consumer.close()
    assert len(eof) == len(partitions), f"no end of partition for {set(partitions) - eof}"
    return sorted(rows)


# ---------------------------------------------------------------------------- checkpoints

def end_offsets(rows) -> dict[tuple[str, int], int]:
    ends: dict[tuple[str, int], int] = {}
    for r in rows:
        ends[(r.topic, r.partition)] = max(ends.get((r.topic, r.partition), 0), r.offset + 1)
    return ends


def wait_checkpoint(log_dir, want: dict[tuple[str, int], int], name="replication-offset-checkpoint",
                    timeout=CHECKPOINT_WAIT_S) -> dict[tuple[str, int], int]:
    """Poll a log dir's offset checkpoint until each (topic, partition) in ``want`` is at
    least the given offset."""
    path = os.path.join(log_dir, name)
    deadline = time.monotonic() + timeout
    while True:
        have = read_offset_checkpoint(path)
        if all(have.get(tp, -1) >= offset for tp, offset in want.items()):
            return have
        if time.monotonic() > deadline:
            raise TimeoutError(f"{name} has {have}, want at least {want}")
        time.sleep(0.05)


def partition_dir(node, topic, partition) -> str:
    return os.path.join(node.log_dir, f"{topic}-{partition}")


# ---------------------------------------------------------------------------- reading

def read(spark, path, **options):
    reader = spark.read.format(FORMAT).option("path", path)
    for name, value in options.items():
        reader = reader.option(name, value if isinstance(value, str) else json.dumps(value))
    return reader.load()


def collect(df) -> list[Row]:
    """The DataFrame's rows as ``Row``s sorted by (topic, partition, offset); the timestamp
    goes through unix_millis so no session or Python time zone is involved."""
    has_headers = "headers" in df.columns
    cols = [F.col("topic"), F.col("partition"), F.col("offset"), F.col("key"), F.col("value"),
            F.unix_millis("timestamp").alias("ts"), F.col("timestampType")]
    if has_headers:
        cols.append(F.col("headers"))
    out = []
    for r in df.select(*cols).collect():
        headers = None
        if has_headers and r["headers"] is not None:
            headers = tuple((h["key"], None if h["value"] is None else bytes(h["value"]))
                            for h in r["headers"])
        out.append(Row(r["topic"], r["partition"], r["offset"],
                       None if r["key"] is None else bytes(r["key"]),
                       None if r["value"] is None else bytes(r["value"]),
                       r["ts"], r["timestampType"], headers))
    return sorted(out)


def without_headers(rows):
    return sorted(r._replace(headers=None) for r in rows)


def assert_rows(got: list[Row], want: list[Row]) -> None:
    want = sorted(want)
    if got != want:
        have, need = set(got), set(want)
        missing, unexpected = sorted(need - have)[:5], sorted(have - need)[:5]
        raise AssertionError(f"{len(got)} rows, want {len(want)}; missing (first 5) {missing}; "
                             f"unexpected (first 5) {unexpected}")


def offsets_of(df) -> dict[tuple[str, int], list[int]]:
    out: dict[tuple[str, int], list[int]] = {}
    for r in df.select("topic", "partition", "offset").collect():
        out.setdefault((r["topic"], r["partition"]), []).append(r["offset"])
    return {tp: sorted(v) for tp, v in out.items()}


# ---------------------------------------------------------------------------- tests

def test_every_field_of_every_row_under_every_codec_and_client(spark, node):
    """confluent-kafka and kafka-python, each under none/gzip/snappy/lz4/zstd, into topics of
    3 partitions, plus a LogAppendTime topic: Spark shows every record exactly as produced,
    with and without includeHeaders, under Spark's Kafka schema."""
    base_ts = now_ms() - 3_600_000
    produced: list[Row] = []
    topics = []
    for client, produce in (("cf", produce_confluent), ("kp", produce_kafka_python)):
        for codec in CODECS:
            topic = new_topic(node, prefix=f"codec-{client}-{codec}")
            topics.append(topic)
            produced += produce(node, topic, varied_messages(48, 3, f"{client}{codec}", base_ts), codec)
    log_append = new_topic(node, config={"message.timestamp.type": "LogAppendTime"}, prefix="lat")
    topics.append(log_append)
    lat_rows = produce_confluent(node, log_append, varied_messages(30, 3, "lat", base_ts), "lz4")
    wait_checkpoint(node.log_dir, end_offsets(produced + lat_rows))

    # LogAppendTime: the broker's clock, as its produce response reported it to the producer
    # and as a consumer reads it (the batch's max timestamp), not the producer's timestamps.
    wire = consume_confluent(node, log_append, range(3))
    assert wire == sorted(lat_rows)
    assert {r.timestamp_type for r in wire} == {1}
    assert all(abs(r.timestamp - now_ms()) < 600_000 for r in wire)
    produced += lat_rows

    # The wire agrees with the producers on the CreateTime topics too (a check of the oracle).
    assert consume_confluent(node, topics[0], range(3)) == sorted(r for r in produced if r.topic == topics[0])

    df = read(spark, node.log_dir, subscribe=",".join(topics), includeHeaders="true")
    assert df.schema == StructType(KAFKA_SCHEMA.fields + [HEADERS_FIELD])
    assert_rows(collect(df), produced)

    plain = read(spark, node.log_dir, subscribe=",".join(topics))
    assert plain.schema == KAFKA_SCHEMA
    assert_rows(collect(plain), without_headers(produced))
    assert plain.count() == len(produced)


def test_offset_ranges_across_segments(spark, node):
    """startingOffsets / endingOffsets as JSON (-2 earliest, -1 latest, exclusive end) and as
    earliest / latest, over partitions of several segments each."""
    topic = new_topic(node, config={"segment.bytes": 2048})
    produced = produce_confluent(node, topic, varied_messages(300, 3, "ranges", now_ms()),
                                 "none", batch_flush=12)
    wait_checkpoint(node.log_dir, end_offsets(produced))
    for p in range(3):
        assert len(PartitionReader(partition_dir(node, topic, p)).base_offsets) >= 3, "want several segments"
    ends = {p: end_offsets(produced)[(topic, p)] for p in range(3)}
    assert ends == {0: 100, 1: 100, 2: 100}

    def window(start, end):
        return [r for r in produced if start.get(r.partition, 0) <= r.offset < end.get(r.partition, 100)]

    start = {0: 7, 1: 0, 2: 55}
    end = {0: 93, 1: 41, 2: 100}
    df = read(spark, node.log_dir, subscribe=topic,
              startingOffsets={topic: {"0": 7, "1": -2, "2": 55}},
              endingOffsets={topic: {"0": 93, "1": 41, "2": -1}})
    assert_rows(collect(df), without_headers(window(start, end)))

    df = read(spark, node.log_dir, subscribe=topic, startingOffsets="earliest", endingOffsets="latest")
    assert_rows(collect(df), without_headers(produced))

    # Empty and single-record ranges, one crossing no batch boundary.
    df = read(spark, node.log_dir, assign={topic: [0, 1]},
              startingOffsets={topic: {"0": 50, "1": 99}}, endingOffsets={topic: {"0": 50, "1": 100}})
    assert offsets_of(df) == {(topic, 1): [99]}


def test_starting_timestamp(spark, node):
    """startingTimestamp: in each partition, from the first record whose timestamp is at or
    after it (ListOffsets' rule), including records stamped by the client's clock."""
    topic = new_topic(node, config={"segment.bytes": 4096})
    base = now_ms() - 600_000
    messages = [Msg(i % 3, f"k{i}".encode(), f"v{i}".encode() * 20, (), base + 1000 * i)
                for i in range(240)]
    produced = produce_confluent(node, topic, messages, "lz4", batch_flush=9)
    wait_checkpoint(node.log_dir, end_offsets(produced))
    for cut in (base + 1000 * 100, base + 1000 * 100 + 1, base + 1000 * 237):
        want = [r for r in produced if r.timestamp >= cut]
        assert {r.partition for r in want} == {0, 1, 2}
        df = read(spark, node.log_dir, subscribe=topic, startingTimestamp=str(cut))
        assert_rows(collect(df), without_headers(want))


def test_several_topics_by_subscribe_pattern_and_assign(spark, node):
    """subscribe (a list), subscribePattern (a Java regex over every topic in the dir) and
    assign (JSON) pick exactly their topics and partitions."""
    tag = uuid.uuid4().hex[:6]
    a = new_topic(node, partitions=2, prefix=f"multi{tag}-a")
    b = new_topic(node, partitions=3, prefix=f"multi{tag}-b")
    c = new_topic(node, partitions=1, prefix=f"other{tag}-c")
    produced = []
    for topic, n in ((a, 2), (b, 3), (c, 1)):
        produced += produce_confluent(node, topic, varied_messages(30, n, topic, now_ms()), "zstd")
    wait_checkpoint(node.log_dir, end_offsets(produced))

    def only(pred):
        return without_headers([r for r in produced if pred(r)])

    assert_rows(collect(read(spark, node.log_dir, subscribe=f"{a},{c}")), only(lambda r: r.topic in (a, c)))
    assert_rows(collect(read(spark, node.log_dir, subscribePattern=f"multi{tag}-.*")),
                only(lambda r: r.topic in (a, b)))
    assert_rows(collect(read(spark, node.log_dir, assign={a: [1], b: [0, 2]})),
                only(lambda r: (r.topic, r.partition) in {(a, 1), (b, 0), (b, 2)}))


def test_log_with_a_deleted_prefix_starts_at_the_new_log_start(spark, node):
    """Two ways the front of a log goes: retention.bytes deletes whole old segments, and
    DeleteRecords moves the log start offset into the middle of a segment (the segments
    wholly below it go on the next retention pass). Earliest is the log start offset the
    broker reports over the wire; the rest reads on, across several segments, to the HW."""
    retained = new_topic(node, partitions=1, config={"segment.bytes": 2048, "retention.bytes": 6000})
    trimmed = new_topic(node, partitions=1, config={"segment.bytes": 2048})
    produced = {}
    for topic in (retained, trimmed):
        messages = [Msg(0, f"k{i}".encode(), f"{topic}-{i:04d}-".encode() + b"p" * 80) for i in range(200)]
        produced[topic] = produce_confluent(node, topic, messages, "none", batch_flush=5)
    wait_checkpoint(node.log_dir, end_offsets(produced[retained] + produced[trimmed]))

    admin = AdminClient({**BASE, "bootstrap.servers": node.bootstrap})
    for f in admin.delete_records([TopicPartition(trimmed, 0, 123)]).values():
        f.result(30)

    def log_start_reported(topic):
        consumer = Consumer({**BASE, "bootstrap.servers": node.bootstrap, "group.id": "spark-oracle"})
        try:
            return consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[0]
        finally:
            consumer.close()

    starts = {retained: None, trimmed: 123}
    deadline = time.monotonic() + CHECKPOINT_WAIT_S
    while True:  # retention has run and every checkpoint has caught up with it
        bases = {t: PartitionReader(partition_dir(node, t, 0)).base_offsets for t in starts}
        starts[retained] = bases[retained][0]
        log_starts = read_offset_checkpoint(os.path.join(node.log_dir, "log-start-offset-checkpoint"))
        if (starts[retained] > 0 and bases[trimmed][0] > 0
                and all(log_starts.get((t, 0)) == s for t, s in starts.items())):
            break
        assert time.monotonic() < deadline, f"segments {bases}, log-start-offset-checkpoint {log_starts}"
        time.sleep(0.1)
    assert bases[trimmed][0] < 123, "DeleteRecords to the middle of a segment (and of a batch)"
    assert len(bases[retained]) >= 2 and len(bases[trimmed]) >= 2
    assert {t: log_start_reported(t) for t in starts} == starts

    for topic, start in starts.items():
        df = read(spark, node.log_dir, subscribe=topic)
        assert_rows(collect(df), without_headers([r for r in produced[topic] if r.offset >= start]))
        df = read(spark, node.log_dir, subscribe=topic, startingOffsets={topic: {"0": -2}},
                  endingOffsets={topic: {"0": start + 3}})
        assert offsets_of(df) == {(topic, 0): [start, start + 1, start + 2]}


def test_uncommitted_tail_is_excluded_by_default(spark, tmp_path):
    """A node whose HW checkpoint interval is an hour: a clean stop writes the checkpoint
    (HW 10), the restarted node takes 7 more records with acks=all, so its in-memory HW is
    17 but the file still says 10 for the next hour. The records at 10..16 are on disk (a
    consumer reads them) and Spark leaves them out, under read_committed (the default) and
    read_uncommitted alike (Kafka's read_uncommitted stops at the HW too); after kill -9 the
    same holds. isolation=log_end reads to the end of the files and shows them."""
    node = StromNode(base_dir=str(tmp_path / "node"),
                     extra={"replica.high.watermark.checkpoint.interval.ms": 3_600_000})
    try:
        node.start()
        topic = new_topic(node, partitions=1)
        first = produce_confluent(node, topic, [Msg(0, b"k", f"a{i}".encode()) for i in range(10)])
        node.stop()
        assert read_offset_checkpoint(os.path.join(node.log_dir, "replication-offset-checkpoint"))[
            (topic, 0)] == 10
        node.start()
        tail = produce_confluent(node, topic, [Msg(0, b"k", f"b{i}".encode()) for i in range(7)])
        assert [r.offset for r in tail] == list(range(10, 17))
        assert [r.offset for r in consume_confluent(node, topic, [0])] == list(range(17))
        assert read_offset_checkpoint(os.path.join(node.log_dir, "replication-offset-checkpoint"))[
            (topic, 0)] == 10

        for isolation in (None, "read_committed", "read_uncommitted"):
            options = {"isolation": isolation} if isolation else {}
            df = read(spark, node.log_dir, subscribe=topic, **options)
            assert_rows(collect(df), without_headers(first))
        node.kill9()
        assert_rows(collect(read(spark, node.log_dir, subscribe=topic)), without_headers(first))
        to_the_end = read(spark, node.log_dir, subscribe=topic, isolation="log_end")
        assert_rows(collect(to_the_end), without_headers(first + tail))
    finally:
        node.cleanup()


def test_streaming_query_picks_up_records_produced_after_it_started(spark, node, tmp_path):
    """readStream from earliest with maxOffsetsPerTrigger 25 into a memory sink on a 500 ms
    processing-time trigger: the 60 records there at the start arrive in batches of at most
    25, and the 45 produced while it runs arrive too, exactly once each."""
    topic = new_topic(node)
    before = produce_confluent(node, topic, varied_messages(60, 3, "before", now_ms()), "snappy")
    wait_checkpoint(node.log_dir, end_offsets(before))
    name = f"strom_stream_{uuid.uuid4().hex[:8]}"
    stream = (spark.readStream.format(FORMAT).option("path", node.log_dir).option("subscribe", topic)
              .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "25")
              .option("includeHeaders", "true").load())
    assert stream.isStreaming
    query = (stream.writeStream.format("memory").queryName(name).outputMode("append")
             .option("checkpointLocation", str(tmp_path / "checkpoint"))
             .trigger(processingTime="500 milliseconds").start())
    try:
        def wait_rows(count, timeout=120):
            deadline = time.monotonic() + timeout
            while True:
                if query.exception() is not None:
                    raise AssertionError(f"the query failed: {query.exception()}")
                n = spark.sql(f"SELECT count(*) AS n FROM {name}").collect()[0]["n"]
                if n >= count:
                    return n
                assert time.monotonic() < deadline, f"{n} of {count} rows after {timeout} s"
                time.sleep(0.25)

        wait_rows(len(before))
        after = produce_confluent(node, topic, varied_messages(45, 3, "after", now_ms()), "gzip")
        wait_rows(len(before) + len(after))
        time.sleep(1.5)  # a few more triggers: nothing read twice
        assert_rows(collect(spark.table(name)), before + after)
        sizes = [p["numInputRows"] for p in query.recentProgress]
        assert max(sizes) <= 25 and sum(1 for n in sizes if n) >= 4, sizes
    finally:
        query.stop()


def test_path_is_several_log_dirs_or_the_data_dir_above_them(spark, tmp_path):
    """A node with two log dirs (log.dirs=a,b) spreads partitions over both, each with its
    own checkpoints: ``path`` as the comma-separated log dirs and as the directory holding
    them gives every partition, exactly."""
    data = tmp_path / "node" / "data"
    dirs = [str(data / "a"), str(data / "b")]
    node = StromNode(base_dir=str(tmp_path / "node"), extra={**FAST_CHECKPOINTS, "log.dirs": ",".join(dirs)})
    try:
        node.start()
        topic = new_topic(node, partitions=6)
        produced = produce_confluent(node, topic, varied_messages(60, 6, "dirs", now_ms()), "zstd")
        homes = {p: [d for d in dirs if os.path.isdir(os.path.join(d, f"{topic}-{p}"))] for p in range(6)}
        assert all(len(h) == 1 for h in homes.values()), homes
        assert {h[0] for h in homes.values()} == set(dirs), "partitions in both log dirs"
        for d in dirs:
            wait_checkpoint(d, {tp: end for tp, end in end_offsets(produced).items() if homes[tp[1]] == [d]})
        for path in (",".join(dirs), str(data), str(tmp_path / "node")):
            df = read(spark, path, subscribe=topic, includeHeaders="true")
            assert_rows(collect(df), produced)
    finally:
        node.cleanup()
