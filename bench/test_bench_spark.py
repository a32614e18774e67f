"""Spark benchmarks (issue 5): N records of 100-byte values read from a real node's log dir
into Spark, against the same records consumed through the Kafka protocol.

* ``test_spark_direct_count``: ``spark.read.format("strom")`` over the log dir, ``count()``.
* ``test_spark_direct_to_pandas``: the same DataFrame, ``toPandas()`` (Arrow enabled).
* ``test_kafka_protocol_to_dataframe``: a confluent-kafka Consumer assigned every partition
  from offset 0, batched ``consume(num_messages=...)``, each message's columns into Python
  lists, then (1) a pyarrow Table with the Kafka source's schema -> ``spark.createDataFrame``
  -> ``count()`` (the same DataFrame as the first benchmark) and (2) a pandas DataFrame (what
  the second one gives). The consumer is tuned to be fair to this path: ``fetch.queue.backoff.ms=0`` and
  ``queued.min.messages`` 1 M, without which librdkafka 2.x pauses fetching for a second
  each time its queue is full and reads ~150 k msg/s here instead of ~620 k; and the loop
  that copies each message's fields out runs with bound appends and the GC off, which
  keeps up with librdkafka (it halves the rate at 10 M records otherwise). pytest-benchmark's
  own time for it covers all of that; extra_info and the summary line split the phases.

The ratio (Kafka path time / direct path time, same data, same run) goes into the last
benchmark's extra_info and the summary line; the target is >= 3x for the DataFrame.

Data: one node, one topic per codec (none and lz4), 4 partitions, null keys and 100-byte
values that differ per record (lz4 gets something to do but not everything), produced once
per module by librdkafka with large batches, then the test waits until the node's
replication-offset-checkpoint covers it (the direct reader reads committed data only).

N is STROM_BENCH_SPARK_RECORDS (10 M) with --benchmark-enable; 20 k in the default test run,
where each body runs once, as a test. MB/s counts value bytes (N x 100 B), not file bytes.
The figures include Spark's job overheads (a few hundred ms per query on this box).
"""
from __future__ import annotations

import gc
import os
import statistics
import sys
import time

import pandas as pd
import pyarrow as pa
import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from engine.checkpoint import read_offset_checkpoint
from tests.integration.cluster import REPO_ROOT, StromNode

pytestmark = [
    pytest.mark.timeout(3600),
]

RECORDS = int(os.environ.get("STROM_BENCH_SPARK_RECORDS", "10000000"))
RECORDS_DISABLED = 20_000
VALUE_BYTES = 100
PARTITIONS = 4
CODECS = ("none", "lz4")
CONSUME_BATCH = 100_000
WARMUP_ROUNDS = 1
CHECKPOINT_WAIT_S = 120.0
BASE = {"log_level": 3, "socket.timeout.ms": 30_000, "broker.address.family": "v4"}
ARROW_SCHEMA = pa.schema([
    ("key", pa.binary()), ("value", pa.binary()), ("topic", pa.string()), ("partition", pa.int32()),
    ("offset", pa.int64()), ("timestamp", pa.timestamp("us", tz="UTC")), ("timestampType", pa.int32()),
])

_TIMES: dict[tuple[str, str], float] = {}  # (codec, path) -> median seconds, for the ratios


# ---------------------------------------------------------------------------- Spark

@pytest.fixture(scope="module")
def spark():
    """One local[2] session: a new one sized for 10 M rows (driver memory, unlimited result
    size for toPandas), or the one already running in this process (tests/spark's). Its
    Python workers run this interpreter with the repository on their path."""
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    paths = os.environ.get("PYTHONPATH", "").split(os.pathsep)
    if REPO_ROOT not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([REPO_ROOT, *filter(None, paths)])
    session = (SparkSession.builder.master("local[2]").appName("strom-bench-spark")
               .config("spark.driver.memory", "8g")
               .config("spark.driver.maxResultSize", "0")
               .config("spark.pyspark.python", sys.executable)
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    session.conf.set("spark.sql.execution.arrow.pyspark.enabled", "true")
    register(session)
    return session


def register(session) -> None:
    from spark.source import StromDataSource

    session.dataSource.register(StromDataSource)


# ---------------------------------------------------------------------------- the data

def value_of(i: int) -> bytes:
    return (b"%012d|" % i + b"the quick brown fox jumps over the lazy dog " * 3)[:VALUE_BYTES]


@pytest.fixture(scope="module")
def loaded(size, tmp_path_factory):
    """{codec: topic} on one node, each topic holding ``n`` records, checkpointed."""
    n = size(RECORDS, RECORDS_DISABLED)
    node = StromNode(base_dir=str(tmp_path_factory.mktemp("bench-spark")),
                     extra={"replica.high.watermark.checkpoint.interval.ms": 100})
    try:
        node.start()
        admin = AdminClient({**BASE, "bootstrap.servers": node.bootstrap})
        topics = {codec: f"bench-{codec}" for codec in CODECS}
        futures = admin.create_topics([NewTopic(t, num_partitions=PARTITIONS, replication_factor=1)
                                       for t in topics.values()])
        for f in futures.values():
            f.result(30)
        del admin, futures  # a live admin client logs reconnect failures once the node stops
        for codec, topic in topics.items():
            started = time.perf_counter()
            produce(node.bootstrap, topic, n, codec)
            wait_checkpoint(node.log_dir, topic, n)
            print(f"\nbench spark: produced {n:,} x {VALUE_BYTES} B to {topic} in "
                  f"{time.perf_counter() - started:.1f} s")
        yield node, topics, n
    finally:
        node.cleanup()


def produce(bootstrap: str, topic: str, n: int, codec: str) -> None:
    producer = Producer({**BASE, "bootstrap.servers": bootstrap, "acks": 1, "compression.type": codec,
                         "linger.ms": 100, "batch.size": 1_000_000, "batch.num.messages": 1_000_000,
                         "queue.buffering.max.messages": 2_000_000,
                         "queue.buffering.max.kbytes": 1_048_576})
    errors = []

    def on_delivery(err, _msg):
        if err is not None:
            errors.append(err)

    for i in range(n):
        while True:
            try:
                producer.produce(topic, value_of(i), partition=i % PARTITIONS, on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.05)
        if i % 100_000 == 0:
            producer.poll(0)
    assert producer.flush(600) == 0
    assert not errors, errors[:3]


def wait_checkpoint(log_dir: str, topic: str, n: int) -> None:
    path = os.path.join(log_dir, "replication-offset-checkpoint")
    deadline = time.monotonic() + CHECKPOINT_WAIT_S
    while True:
        hws = read_offset_checkpoint(path)
        if sum(hws.get((topic, p), 0) for p in range(PARTITIONS)) >= n:
            return
        assert time.monotonic() < deadline, f"checkpoint {hws}, want {n} records of {topic}"
        time.sleep(0.1)


# ---------------------------------------------------------------------------- timing

def timed(benchmark, fn, rounds: int) -> tuple[float, object]:
    """Run ``fn`` under pytest-benchmark (one warm-up round, then ``rounds`` rounds, when
    enabled; once otherwise) and return the median of our own wall-clock timings of the
    timed rounds (there even when benchmarks are disabled) and the last result. The warm-up
    matters: the first query of a session runs 2-6x slower (JIT, Python workers)."""
    warmup = WARMUP_ROUNDS if benchmark.enabled else 0
    seconds, results = [], []

    def once():
        started = time.perf_counter()
        results[:] = [fn()]
        seconds.append(time.perf_counter() - started)
        return results[-1]

    benchmark.pedantic(once, rounds=rounds if benchmark.enabled else 1, iterations=1, warmup_rounds=warmup)
    return statistics.median(seconds[warmup:]), results[-1]


def report(benchmark, codec: str, path: str, n: int, seconds: float) -> None:
    _TIMES[(codec, path)] = seconds
    benchmark.extra_info.update({
        "records": n, "bytes": n * VALUE_BYTES, "seconds": round(seconds, 3),
        "rows_per_s": round(n / seconds), "mb_per_s": round(n * VALUE_BYTES / seconds / 1e6, 1)})
    print(f"\nbench spark [{codec}] {path}: {n:,} rows in {seconds:.2f} s, {n / seconds / 1e6:.2f} M rows/s, "
          f"{n * VALUE_BYTES / seconds / 1e6:.0f} MB/s")


def read(spark, node, topic):
    return spark.read.format("strom").option("path", node.log_dir).option("subscribe", topic).load()


# ---------------------------------------------------------------------------- benchmarks

@pytest.mark.parametrize("codec", CODECS)
def test_spark_direct_count(benchmark, spark, loaded, codec):
    node, topics, n = loaded
    seconds, count = timed(benchmark, lambda: read(spark, node, topics[codec]).count(), rounds=3)
    assert count == n
    report(benchmark, codec, "direct count", n, seconds)


@pytest.mark.parametrize("codec", CODECS)
def test_spark_direct_to_pandas(benchmark, spark, loaded, codec):
    node, topics, n = loaded
    seconds, frame = timed(benchmark, lambda: read(spark, node, topics[codec]).toPandas(), rounds=2)
    assert len(frame) == n and list(frame.columns) == ARROW_SCHEMA.names
    assert frame["value"].map(len).sum() == n * VALUE_BYTES
    del frame
    report(benchmark, codec, "direct toPandas", n, seconds)


def consume_columns(bootstrap: str, topic: str, n: int) -> dict[str, list]:
    """Every record of the topic through the Kafka protocol, as column lists. Made as fast
    as Python allows: bound appends, and the cyclic GC off while the lists grow (with it on,
    each full collection walks the tens of millions of list slots, and 10 M records take
    2-3x longer)."""
    consumer = Consumer({**BASE, "bootstrap.servers": bootstrap, "group.id": "bench-spark",
                         "enable.auto.commit": False, "fetch.queue.backoff.ms": 0,
                         "queued.min.messages": 1_000_000, "fetch.max.bytes": 64 << 20,
                         "max.partition.fetch.bytes": 16 << 20})
    keys, values, partitions, offsets, stamps = [], [], [], [], []
    add_key, add_value, add_partition, add_offset, add_stamp = (
        keys.append, values.append, partitions.append, offsets.append, stamps.append)
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        deadline = time.monotonic() + 1800
        while len(offsets) < n:
            assert time.monotonic() < deadline, f"consumed {len(offsets)} of {n}"
            for msg in consumer.consume(num_messages=CONSUME_BATCH, timeout=1.0):
                if msg.error():
                    raise RuntimeError(msg.error())
                add_key(msg.key())
                add_value(msg.value())
                add_partition(msg.partition())
                add_offset(msg.offset())
                add_stamp(msg.timestamp())
    finally:
        if gc_was_enabled:
            gc.enable()
        consumer.close()
    types, timestamps = zip(*stamps) if stamps else ((), ())
    return {"key": keys, "value": values, "topic": topic, "partition": partitions, "offset": offsets,
            "timestamp": timestamps,
            "timestampType": [t - 1 for t in types]}  # librdkafka: 1 CreateTime, 2 LogAppendTime


def arrow_table(cols: dict[str, list]) -> pa.Table:
    n = len(cols["offset"])
    stamps = pa.array(cols["timestamp"], pa.int64()).cast(pa.timestamp("ms", tz="UTC"))
    return pa.table([
        pa.array(cols["key"], pa.binary()), pa.array(cols["value"], pa.binary()),
        pa.array([cols["topic"]] * n, pa.string()), pa.array(cols["partition"], pa.int32()),
        pa.array(cols["offset"], pa.int64()), stamps.cast(pa.timestamp("us", tz="UTC")),
        pa.array(cols["timestampType"], pa.int32())], schema=ARROW_SCHEMA)


def pandas_frame(cols: dict[str, list]) -> pd.DataFrame:
    n = len(cols["offset"])
    return pd.DataFrame({
        "key": cols["key"], "value": cols["value"], "topic": [cols["topic"]] * n,
        "partition": pd.array(cols["partition"], dtype="int32"),
        "offset": pd.array(cols["offset"], dtype="int64"),
        "timestamp": pd.to_datetime(cols["timestamp"], unit="ms"),
        "timestampType": pd.array(cols["timestampType"], dtype="int32")})


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_protocol_to_dataframe(benchmark, spark, loaded, codec):
    """The Kafka-protocol path, timed in phases: consume into lists; lists -> Arrow ->
    createDataFrame -> count (vs direct count); lists -> pandas (vs direct toPandas)."""
    node, topics, n = loaded
    topic = topics[codec]
    phases: dict[str, list[float]] = {"consume": [], "dataframe": [], "pandas": []}

    def run():
        started = time.perf_counter()
        cols = consume_columns(node.bootstrap, topic, n)
        consumed = time.perf_counter()
        df = spark.createDataFrame(arrow_table(cols))
        count = df.count()
        counted = time.perf_counter()
        frame = pandas_frame(cols)
        framed = time.perf_counter()
        phases["consume"].append(consumed - started)
        phases["dataframe"].append(counted - consumed)
        phases["pandas"].append(framed - counted)
        return count, len(frame), df.schema

    _, (count, rows, schema) = timed(benchmark, run, rounds=2)
    assert count == rows == n
    assert schema == read(spark, node, topic).schema, "not the same DataFrame"
    warmup = WARMUP_ROUNDS if benchmark.enabled else 0
    consume, dataframe, pandas = (statistics.median(phases[k][warmup:])
                                  for k in ("consume", "dataframe", "pandas"))
    to_dataframe, to_pandas = consume + dataframe, consume + pandas
    report(benchmark, codec, "kafka protocol -> DataFrame count", n, to_dataframe)
    _TIMES[(codec, "kafka protocol -> pandas")] = to_pandas
    benchmark.extra_info.update({
        "consume_s": round(consume, 3), "to_pandas_s": round(to_pandas, 3),
        "to_pandas_rows_per_s": round(n / to_pandas)})
    print(f"bench spark [{codec}] kafka protocol -> pandas: {to_pandas:.2f} s, "
          f"{n / to_pandas / 1e6:.2f} M rows/s (consume {consume:.2f} s)")
    direct_count = _TIMES.get((codec, "direct count"))
    direct_pandas = _TIMES.get((codec, "direct toPandas"))
    if direct_count and direct_pandas:
        ratio_count, ratio_pandas = to_dataframe / direct_count, to_pandas / direct_pandas
        benchmark.extra_info.update({"ratio_dataframe": round(ratio_count, 2),
                                     "ratio_pandas": round(ratio_pandas, 2)})
        print(f"bench spark [{codec}] {n:,} rows: direct count {n / direct_count / 1e6:.2f} M rows/s vs "
              f"Kafka protocol -> DataFrame {n / to_dataframe / 1e6:.2f} M rows/s: {ratio_count:.1f}x "
              f"(target >= 3x); direct toPandas {n / direct_pandas / 1e6:.2f} M rows/s vs Kafka protocol "
              f"-> pandas {n / to_pandas / 1e6:.2f} M rows/s: {ratio_pandas:.1f}x")
