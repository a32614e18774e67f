"""Batch reads (``spark.read.format("strom")``) of log dirs written with engine/: every
field of every row compared with what was written."""
from __future__ import annotations

import pytest
from pyspark.sql.types import ArrayType, BinaryType, StringType, StructField, StructType

from ext.batch import (
    COMPRESSION_GZIP,
    COMPRESSION_LZ4,
    COMPRESSION_NONE,
    COMPRESSION_SNAPPY,
    COMPRESSION_ZSTD,
)
from tests.spark.conftest import BASE_TS, Broker, read, rows_of, varied_records, without_headers

CODECS = [COMPRESSION_NONE, COMPRESSION_GZIP, COMPRESSION_SNAPPY, COMPRESSION_LZ4, COMPRESSION_ZSTD]


@pytest.fixture
def mixed(broker):
    """orders: 3 partitions of small segments, batches under every codec, a transaction
    marker (control batch) every few batches; clicks: LogAppendTime; an uncommitted tail
    on orders-0 and a checkpoint that never saw empty-2."""
    broker.create("orders", 3, segment_bytes=900, index_interval_bytes=200)
    broker.create("clicks", 2, message_timestamp_type="LogAppendTime")
    broker.create("empty", 3)
    for i in range(20):
        broker.append("orders", i % 3, varied_records(7, tag=f"o{i}", ts=BASE_TS + 100 * i),
                      compression=CODECS[i % 5])
        if i % 4 == 0:
            broker.append_control("orders", i % 3, BASE_TS + 100 * i + 70)  # just after the data
    for i in range(6):
        broker.now_ms += 1
        broker.append("clicks", i % 2, varied_records(5, tag=f"c{i}"), compression=CODECS[(i + 2) % 5])
    broker.commit()
    broker.append("orders", 0, varied_records(4, tag="tail"))
    return broker


def test_every_field_of_every_record(spark, mixed):
    assert len(mixed.log("orders", 0).segments) >= 3
    df = read(spark, mixed.log_dir, subscribe="orders,clicks,empty", includeHeaders="true")
    assert df.schema == StructType(read(spark, mixed.log_dir, subscribe="orders").schema.fields + [
        StructField("headers", ArrayType(StructType([StructField("key", StringType()),
                                                     StructField("value", BinaryType())])))])
    expected = mixed.rows()
    assert rows_of(df, headers=True) == expected
    assert {w.timestamp_type for w in expected if w.topic == "clicks"} == {1}
    assert any(w.key is None for w in expected) and any(w.value is None for w in expected)
    assert any(w.headers is None for w in expected)
    plain = read(spark, mixed.log_dir, subscribe="orders,clicks,empty")
    assert "headers" not in plain.columns
    assert rows_of(plain) == without_headers(expected)


def test_isolation_decides_how_far_a_read_goes(spark, mixed):
    committed = without_headers(mixed.rows("orders"))
    for isolation in (None, "read_committed", "read_uncommitted"):
        options = {"isolation": isolation} if isolation else {}
        assert rows_of(read(spark, mixed.log_dir, subscribe="orders", **options)) == committed
    everything = without_headers(mixed.rows("orders", committed=False))
    assert len(everything) == len(committed) + 4
    assert rows_of(read(spark, mixed.log_dir, subscribe="orders", isolation="log_end")) == everything


def test_read_committed_shows_only_committed_transactions(spark, broker):
    """A committed, an aborted and an open transaction (interleaved, compressed): read_committed
    shows the committed rows and stops at the open one, as a Kafka read_committed consumer;
    read_uncommitted shows every row below the high watermark."""
    broker.create("t", 2)
    committed = broker.append_txn("t", 0, 1, varied_records(4, tag="c"), compression=COMPRESSION_ZSTD)
    broker.append_txn("t", 0, 2, varied_records(3, tag="a"), compression=COMPRESSION_LZ4)
    committed += broker.append_txn("t", 0, 1, varied_records(2, tag="c2"))
    broker.end_txn("t", 0, 1, commit=True)
    broker.end_txn("t", 0, 2, commit=False)
    committed += broker.append("t", 1, varied_records(3, tag="p"))
    broker.append_txn("t", 0, 3, varied_records(2, tag="o"))
    broker.append("t", 0, varied_records(2, tag="after-the-open-one"))
    broker.commit()
    broker.append("t", 0, varied_records(2, tag="past-the-hw"))
    expected = without_headers(sorted(committed, key=lambda w: (w.partition, w.offset)))
    assert rows_of(read(spark, broker.log_dir, subscribe="t")) == expected
    everything = without_headers(broker.rows("t"))
    assert len(everything) == len(committed) + 3 + 2 + 2
    assert rows_of(read(spark, broker.log_dir, subscribe="t", isolation="read_uncommitted")) == everything


def test_subscribe_pattern_and_assign(spark, mixed):
    rows = without_headers(mixed.rows())
    orders = [w for w in rows if w.topic == "orders"]
    assert rows_of(read(spark, mixed.log_dir, subscribePattern="or.*")) == orders
    assert rows_of(read(spark, mixed.log_dir, subscribePattern="nothing-.*")) == []
    assert rows_of(read(spark, mixed.log_dir, assign={"orders": [2], "clicks": [0]})) == [
        w for w in rows if (w.topic, w.partition) in (("orders", 2), ("clicks", 0))]


def test_starting_and_ending_offsets(spark, mixed):
    rows = without_headers(mixed.rows("orders"))
    df = read(spark, mixed.log_dir, subscribe="orders",
              startingOffsets={"orders": {"0": 10, "1": -2, "2": 30}},
              endingOffsets={"orders": {"0": 25, "2": -1}})
    wanted = {0: lambda o: 10 <= o < 25, 1: lambda o: True, 2: lambda o: o >= 30}
    assert rows_of(df) == [w for w in rows if wanted[w.partition](w.offset)]
    assert rows_of(read(spark, mixed.log_dir, subscribe="orders", startingOffsets="earliest",
                        endingOffsets="latest")) == rows


def test_starting_timestamp(spark, mixed):
    """orders batch i was written to partition i % 3 with timestamps BASE_TS + 100 i + 10 j
    (the fourth record 5 ms early): the first record at or after the cut, then everything."""
    cut = BASE_TS + 100 * 10 + 25
    first = {}
    for w in mixed.rows("orders"):
        if w.timestamp >= cut and w.partition not in first:
            first[w.partition] = w.offset
    df = read(spark, mixed.log_dir, subscribe="orders", startingTimestamp=str(cut))
    assert rows_of(df) == [w for w in without_headers(mixed.rows("orders")) if w.offset >= first[w.partition]]


def test_a_deleted_prefix_starts_at_the_log_start_offset(spark, broker):
    broker.create("t", 1, segment_bytes=1500, index_interval_bytes=200)
    for i in range(12):
        broker.append("t", 0, varied_records(5, tag=f"t{i}"), compression=CODECS[i % 5])
    broker.commit()
    broker.delete_records("t", 0, 23)
    assert broker.log("t", 0).segments[0].base_offset < 23 < broker.log("t", 0).segments[1].base_offset
    df = read(spark, broker.log_dir, subscribe="t")
    assert rows_of(df) == without_headers(broker.rows())
    assert [w.offset for w in rows_of(df)] == list(range(23, 60))
    df = read(spark, broker.log_dir, subscribe="t", startingOffsets={"t": {"0": 40}})
    assert [w.offset for w in rows_of(df)] == list(range(40, 60))


def test_replicas_in_a_cluster_data_dir(spark, tmp_path):
    """Two brokers: a-0 on both (the second broker's checkpoint is ahead), a-1 only on the
    first, b-0 only on the second; path is the directory above both log dirs."""
    brokers = [Broker(str(tmp_path / "cluster" / f"broker-{n}" / "data"), node_id=n) for n in (1, 2)]
    try:
        for b in brokers:
            b.create("a", 1)
            for i in range(4):
                b.append("a", 0, varied_records(5, tag=f"a{i}"))
        brokers[0].create("a", 2)
        brokers[0].append("a", 1, varied_records(6, tag="a1"))
        brokers[1].create("b", 1)
        brokers[1].append("b", 0, varied_records(3, tag="b"))
        brokers[0].commit(hw=10)
        brokers[1].commit()
        df = read(spark, str(tmp_path / "cluster"), subscribePattern=".*")
        expected = brokers[1].rows("a") + [w for w in brokers[0].rows("a") if w.partition == 1] + \
            brokers[1].rows("b")
        got = rows_of(df)
        assert [(w.topic, w.partition, w.offset) for w in got] == [("a", 0, o) for o in range(20)] + [
            ("a", 1, o) for o in range(6)] + [("b", 0, o) for o in range(3)]
        assert got == without_headers(expected)
        two = read(spark, f"{brokers[0].log_dir},{brokers[1].log_dir}", subscribePattern=".*")
        assert rows_of(two) == got
        listed = spark.read.format("strom").option("subscribePattern", ".*").load(
            [brokers[0].log_dir, brokers[1].log_dir])
        assert rows_of(listed) == got
    finally:
        for b in brokers:
            b.close()


def test_large_partitions_split_into_several_spark_partitions(spark, broker):
    broker.create("big", 2, segment_bytes=20_000, index_interval_bytes=1000)
    for i in range(60):
        records = varied_records(20, tag=f"g{i}", value_size=100)
        broker.append("big", i % 2, records, compression=CODECS[i % 5])
    broker.commit()
    expected = without_headers(broker.rows())
    whole = read(spark, broker.log_dir, subscribe="big")
    assert whole.rdd.getNumPartitions() == 2
    split = read(spark, broker.log_dir, subscribe="big", maxPartitionBytes="8000")
    assert split.rdd.getNumPartitions() >= 8
    assert rows_of(split) == expected
    many = read(spark, broker.log_dir, subscribe="big", minPartitions="20")
    assert many.rdd.getNumPartitions() >= 20
    assert many.count() == len(expected)
