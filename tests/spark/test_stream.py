"""Streaming reads (``spark.readStream.format("strom")``): per-partition offsets,
newly committed data each micro-batch, maxOffsetsPerTrigger, resuming from a checkpoint."""
from __future__ import annotations

import pytest

from spark.errors import StromSparkError
from spark.source import StromDataSource
from spark.stream import StromStreamReader, from_json, rate_limit, to_json
from tests.spark.conftest import Written, rows_of, varied_records, without_headers

try:
    from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows
except ImportError:  # PySpark 4.0/4.1
    ReadAllAvailable = ReadMaxRows = None


def test_rate_limit_shares_by_backlog():
    start = {("t", 0): 0, ("t", 1): 100, ("t", 2): 50, ("u", 0): 7}
    latest = {("t", 0): 300, ("t", 1): 200, ("t", 2): 51, ("u", 0): 7}
    # Backlogs 300, 100, 1, 0 of 401: shares 74.8, 24.9, 0.25 (-> 1, never starved).
    assert rate_limit(start, latest, 100) == {("t", 0): 74, ("t", 1): 124, ("t", 2): 51, ("u", 0): 7}
    assert rate_limit(start, latest, 10_000) == latest
    assert rate_limit(latest, latest, 5) == latest


def test_offsets_json():
    offsets = {("b", 1): 5, ("a", 10): 1, ("a", 2): 0}
    assert to_json(offsets) == {"a": {"2": 0, "10": 1}, "b": {"1": 5}}
    assert from_json(to_json(offsets)) == offsets
    with pytest.raises(StromSparkError, match="not Strom offsets"):
        from_json({"a": 5})


def stream_reader(path, **options) -> StromStreamReader:
    source = StromDataSource({"path": path, **options})
    return source.streamReader(source.schema())


def read_offsets(reader, start, end) -> list[tuple[int, int]]:
    return sorted((p, o) for part in reader.partitions(start, end) for b in reader.read(part)
                  for p, o in zip(b.column("partition").to_pylist(), b.column("offset").to_pylist()))


def test_micro_batches_in_process(broker):
    """What Spark calls, in order, with both latestOffset signatures."""
    broker.create("t", 2)
    for p in range(2):
        broker.append("t", p, varied_records(10, tag=f"p{p}"))
    broker.commit()
    broker.append("t", 0, varied_records(5, tag="tail"))
    reader = stream_reader(broker.log_dir, subscribe="t", startingOffsets="earliest",
                           maxOffsetsPerTrigger="8")
    start = reader.initialOffset()
    assert start == {"t": {"0": 0, "1": 0}}
    # PySpark 4.0/4.1: no arguments; the reader remembers where the last batch ended.
    first = reader.latestOffset()
    assert first == {"t": {"0": 4, "1": 4}}
    assert read_offsets(reader, start, first) == [(p, o) for p in range(2) for o in range(4)]
    assert reader.latestOffset() == {"t": {"0": 8, "1": 8}}
    # 4.2+: the start comes in, with the engine's read limit.
    if ReadMaxRows is not None:
        assert reader.getDefaultReadLimit() == ReadMaxRows(8)
        assert reader.latestOffset(first, ReadMaxRows(2)) == {"t": {"0": 5, "1": 5}}
        assert reader.latestOffset(first, ReadAllAvailable()) == {"t": {"0": 10, "1": 10}}
    broker.commit()
    end = reader.latestOffset({"t": {"0": 10, "1": 10}}, ReadAllAvailable()) if ReadMaxRows else None
    if end is not None:
        assert end == {"t": {"0": 15, "1": 10}}
        assert read_offsets(reader, {"t": {"0": 10, "1": 10}}, end) == [(0, o) for o in range(10, 15)]


def test_new_partitions_start_at_their_log_start(broker):
    broker.create("a")
    broker.append("a", 0, varied_records(3))
    broker.commit()
    reader = stream_reader(broker.log_dir, subscribePattern="[ab]")
    start = reader.initialOffset()
    assert start == {"a": {"0": 3}}  # startingOffsets defaults to latest for a stream
    broker.create("b", 2)
    broker.append("b", 1, varied_records(4))
    broker.commit()
    end = reader.latestOffset(start, ReadAllAvailable()) if ReadMaxRows else reader.latestOffset()
    assert end == {"a": {"0": 3}, "b": {"0": 0, "1": 4}}
    assert reader.partitions(start, end)[0].start_offset == 0


def test_data_loss_is_reported(broker):
    broker.create("t", 1, segment_bytes=800)
    for i in range(8):
        broker.append("t", 0, varied_records(5, tag=f"x{i}"))
    broker.commit()
    reader = stream_reader(broker.log_dir, subscribe="t", startingOffsets="earliest")
    start = reader.initialOffset()
    end = reader.latestOffset(start, ReadAllAvailable()) if ReadMaxRows else reader.latestOffset()
    broker.delete_records("t", 0, 20)
    with pytest.raises(StromSparkError, match=r"offsets \[0, 20\) of t-0 were deleted .*failOnDataLoss"):
        reader.partitions(start, end)
    lenient = stream_reader(broker.log_dir, subscribe="t", startingOffsets="earliest", failOnDataLoss="false")
    assert read_offsets(lenient, start, end) == [(0, o) for o in range(20, 40)]


def test_a_recreated_topic_is_data_loss(broker):
    broker.create("t")
    broker.append("t", 0, varied_records(10))
    broker.commit()
    reader = stream_reader(broker.log_dir, subscribe="t")
    reached = reader.initialOffset()
    assert reached == {"t": {"0": 10}}
    broker.manager.delete_log("t", 0)
    broker.create("t")
    broker.append("t", 0, varied_records(4))
    broker.commit()
    with pytest.raises(StromSparkError, match="t-0 ends at offset 4, before offset 10 this query reached"):
        reader.latestOffset(reached, ReadAllAvailable()) if ReadMaxRows else reader.latestOffset()
    lenient = stream_reader(broker.log_dir, subscribe="t", failOnDataLoss="false")
    end = lenient.latestOffset(reached, ReadAllAvailable()) if ReadMaxRows else None
    if end is not None:
        assert end == {"t": {"0": 4}}
        assert lenient.partitions(reached, end) == []


KEY = lambda w: (w.topic, w.partition, w.offset)  # noqa: E731


def stream(spark, path, **options):
    reader = spark.readStream.format("strom").option("path", path)
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load()


def test_memory_sink_picks_up_newly_committed_data(spark, broker, tmp_path):
    broker.create("events", 3)
    for i in range(9):
        broker.append("events", i % 3, varied_records(10, tag=f"e{i}"))
        if i == 4:
            broker.append_control("events", i % 3)
    broker.commit()
    broker.append("events", 0, varied_records(6, tag="uncommitted"))
    df = stream(spark, broker.log_dir, subscribe="events", startingOffsets="earliest",
                maxOffsetsPerTrigger="25", includeHeaders="true")
    assert df.isStreaming
    query = (df.writeStream.format("memory").queryName("strom_events").outputMode("append")
             .option("checkpointLocation", str(tmp_path / "checkpoint")).start())
    try:
        query.processAllAvailable()
        assert rows_of(spark.table("strom_events"), headers=True) == broker.rows()
        sizes = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
        assert max(sizes) <= 25 and sum(sizes) == 90 and len(sizes) >= 4, sizes

        broker.commit()  # the tail becomes committed
        broker.append("events", 2, varied_records(7, tag="later"), compression=4)
        broker.commit()
        query.processAllAvailable()
        assert rows_of(spark.table("strom_events"), headers=True) == broker.rows()
        assert len(broker.rows()) == 103
    finally:
        query.stop()


def test_foreach_batch_resumes_from_its_checkpoint(spark, broker, tmp_path):
    broker.create("t", 2)
    for p in range(2):
        broker.append("t", p, varied_records(12, tag=f"first{p}"), compression=p + 1)
    broker.commit()
    seen: list[list[Written]] = []

    def run():
        df = stream(spark, broker.log_dir, subscribe="t", startingOffsets="earliest",
                    maxOffsetsPerTrigger="10")
        query = (df.writeStream.foreachBatch(lambda batch, _: seen.append(rows_of(batch)))
                 .option("checkpointLocation", str(tmp_path / "checkpoint"))
                 .trigger(availableNow=True).start())
        query.awaitTermination(120)
        assert query.exception() is None

    run()
    assert sorted((w for batch in seen for w in batch), key=KEY) == without_headers(broker.rows())
    assert all(len(batch) <= 10 for batch in seen) and len([b for b in seen if b]) >= 3
    seen.clear()
    broker.append("t", 1, varied_records(5, tag="second"), compression=3)
    broker.commit()
    run()
    assert sorted((w for batch in seen for w in batch), key=KEY) == without_headers(broker.rows())[24:]
