"""Filter pushdown (``pushFilters=true``): which filters are accepted, that they prune
before decoding (READ_STATS, in this process), that Spark's answers stay exact, and the
PySpark 4.3.0 plan re-use bug that keeps pushdown opt-in."""
from __future__ import annotations

import datetime as dt
import re

import pyspark
import pytest
from pyspark.sql.datasource import (
    DataSourceReader,
    EqualNullSafe,
    EqualTo,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNotNull,
    IsNull,
    LessThan,
    LessThanOrEqual,
    Not,
    StringStartsWith,
)

from spark.filters import Pruning
from spark.reader import READ_STATS
from spark.source import StromDataSource, StromFilteringReader, StromReader
from tests.spark.conftest import BASE_TS, read, rows_of, varied_records

UTC = dt.UTC


def at(ms: int, us: int = 0) -> dt.datetime:
    return dt.datetime.fromtimestamp(ms / 1000, UTC) + dt.timedelta(microseconds=us)


def test_accepted_filters_fold_into_the_pruning():
    p = Pruning()
    accepted = [
        IsNotNull(("offset",)), IsNotNull(("partition",)), IsNotNull(("topic",)),
        In(("topic",), ["a", "b"]), EqualTo(("topic",), "a"),
        In(("partition",), [0, 1, 2]), GreaterThan(("partition",), 0), LessThanOrEqual(("partition",), 5),
        GreaterThanOrEqual(("offset",), 10), LessThan(("offset",), 50), EqualNullSafe(("offset",), 20),
        GreaterThan(("timestamp",), at(BASE_TS)), LessThanOrEqual(("timestamp",), at(BASE_TS + 5000)),
    ]
    assert all(p.accept(f) for f in accepted)
    assert p.topics == {"a"} and p.partitions == {0, 1, 2}
    assert (p.partition_lo, p.partition_hi) == (1, 5)
    assert p.allows("a", 1) and not p.allows("a", 0) and not p.allows("b", 1)
    assert (p.offset_lo, p.offset_hi) == (20, 21)
    assert p.offsets(0, 100) == (20, 21) and p.offsets(30, 100) == (30, 30)
    assert (p.timestamp_lo_us, p.timestamp_hi_us) == (BASE_TS * 1000 + 1, (BASE_TS + 5000) * 1000)
    assert p.timestamp_lo_ms == BASE_TS + 1  # the first whole millisecond the bound lets through


def test_filters_not_enforced_exactly_go_back_to_spark():
    rejected = [
        IsNotNull(("timestamp",)), IsNotNull(("key",)), IsNull(("partition",)),
        EqualTo(("key",), b"k"), Not(EqualTo(("partition",), 1)), In(("offset",), [1, 5]),
        StringStartsWith(("topic",), "a"), EqualTo(("partition",), None), EqualTo(("partition",), True),
        GreaterThan(("timestamp",), dt.datetime(2024, 1, 1)),  # naive: not what Spark pushes
        In(("timestamp",), [at(BASE_TS)]), EqualTo(("headers", "key"), "h"),
    ]
    p = Pruning()
    assert [f for f in rejected if p.accept(f)] == []
    assert p == Pruning()


def test_the_filtering_reader_only_with_the_option(broker):
    broker.create("t")
    options = {"path": broker.log_dir, "subscribe": "t"}
    source = StromDataSource(options)
    assert type(source.reader(source.schema())) is StromReader
    assert StromReader.pushFilters is DataSourceReader.pushFilters  # PySpark's: pushes nothing
    source = StromDataSource({**options, "pushFilters": "true"})
    assert type(source.reader(source.schema())) is StromFilteringReader


@pytest.fixture
def events(broker):
    """events: 3 partitions, 3 segments each, 20 batches of 10 records per partition; batch
    i's timestamps are BASE_TS + 1000 i + 10 j (one 5 ms early): out of order within a batch."""
    broker.create("events", 3, segment_bytes=2500, index_interval_bytes=400)
    broker.create("other", 1)
    for i in range(20):
        for p in range(3):
            broker.append("events", p, varied_records(10, tag=f"{p}.{i}", ts=BASE_TS + 1000 * i))
    broker.append("other", 0, varied_records(10))
    broker.commit()
    return broker


def pushed(broker, filters, **options):
    source = StromDataSource({"path": broker.log_dir, "subscribePattern": ".*", "pushFilters": "true",
                              **options})
    reader = source.reader(source.schema())
    back = list(reader.pushFilters(filters))
    READ_STATS.reset()
    rows = sorted(
        row for p in reader.partitions() for b in reader.read(p)
        for row in zip(*(b.column(c).to_pylist() for c in ("topic", "partition", "offset")))
    )
    return back, rows


def test_partition_and_offset_filters_prune_before_decoding(events):
    _, everything = pushed(events, [])
    whole = READ_STATS.bytes_decoded
    back, rows = pushed(events, [EqualTo(("topic",), "events"), EqualTo(("partition",), 1),
                                 GreaterThanOrEqual(("offset",), 150), LessThan(("offset",), 160)])
    assert back == []
    assert rows == [("events", 1, o) for o in range(150, 160)]
    assert READ_STATS.regions == 1 and READ_STATS.bytes_decoded < whole / 20


def test_a_timestamp_bound_starts_each_partition_at_its_first_newer_record(events):
    _, everything = pushed(events, [])
    whole = READ_STATS.bytes_decoded
    lo, hi = at(BASE_TS + 17_000 + 25), at(BASE_TS + 18_000 + 30, us=1)
    back, rows = pushed(events, [GreaterThanOrEqual(("timestamp",), lo), LessThan(("timestamp",), hi),
                                 EqualTo(("topic",), "events")])
    assert back == []
    assert READ_STATS.bytes_decoded < whole / 4
    # Batch 17's records are offsets 170..179 at +0, +10, +20, +25 (j=3), +40, ...; batch 18's
    # first four (180..183) are at +0..+25 and 184 at +40 >= +30 ms + 1 µs.
    expected = [o for o in range(170, 190) if o not in (170, 171, 172)]
    expected = [o for o in expected if o < 184]
    assert rows == [("events", p, o) for p in range(3) for o in expected]


def test_pushdown_answers_are_exact_in_spark(spark, events):
    # The unpushed answers come from one read, kept in Spark's cache: each query below then
    # costs one scan of the source (the pushed one) instead of two.
    plain = read(spark, events.log_dir, subscribePattern=".*").cache()
    queries = [
        "partition IN (0, 2) AND offset >= 55 AND offset < 131",
        "topic = 'other' OR offset = 3",  # OR: nothing pushed
        f"timestamp >= timestamp_millis({BASE_TS + 12_015}) "
        f"AND timestamp < timestamp_millis({BASE_TS + 14_000})",
        f"timestamp = timestamp_millis({BASE_TS + 5_060}) AND partition > 0",
        "offset > 195 AND key IS NOT NULL",
        "partition = 7",
    ]
    try:
        for query in queries:
            filtered = read(spark, events.log_dir, subscribePattern=".*", pushFilters="true").where(query)
            assert rows_of(filtered) == rows_of(plain.where(query)), query
    finally:
        plain.unpersist()
    # What Spark still filters after the scan: only what the source handed back.
    pushing = read(spark, events.log_dir, subscribePattern=".*", pushFilters="true")
    assert spark_filters(pushing.where("partition = 1 AND key IS NOT NULL")) == ["isnotnull(key)"]
    unpushed = read(spark, events.log_dir, subscribePattern=".*")
    assert spark_filters(unpushed.where("partition = 1")) == ["(isnotnull(partition) AND (partition = 1))"]


def spark_filters(df) -> list[str]:
    plan = df._jdf.queryExecution().executedPlan().toString()
    return [re.sub(r"#\d+L?", "", line.split("Filter ", 1)[1]) for line in plan.splitlines()
            if " Filter " in line]


@pytest.mark.slow
def test_the_plan_reuse_bug_keeps_pushdown_opt_in(spark, events):
    """PySpark 4.3.0: a query without filters on a DataFrame that earlier ran with pushed
    filters reuses the pruned plan. Off by default, the same two queries are right. (Slow:
    about 50 s of the Spark worker's time, the default run's budget; the pushdown's answers
    are checked in the default run by test_pushdown_answers_are_exact_in_spark.)"""
    total, one = 610, 200
    df = read(spark, events.log_dir, subscribePattern=".*")
    assert df.where("partition = 1 AND topic = 'events'").count() == one
    assert df.count() == total
    assert df.where("partition = 1 AND topic = 'events'").count() == one

    pushing = read(spark, events.log_dir, subscribePattern=".*", pushFilters="true")
    assert pushing.where("partition = 1 AND topic = 'events'").count() == one
    reused = pushing.count()
    if pyspark.__version__ == "4.3.0":
        assert reused == one, "the bug the docs warn about is gone: pushdown could become the default"
    else:
        assert reused in (one, total)
    fresh = read(spark, events.log_dir, subscribePattern=".*", pushFilters="true")
    assert fresh.count() == total


def test_pushdown_without_the_session_conf_fails_with_its_name(spark, events):
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "false")
    try:
        df = read(spark, events.log_dir, subscribe="events", pushFilters="true")
        with pytest.raises(Exception, match="spark.sql.python.filterPushdown.enabled"):
            df.where("partition = 1").count()
        assert read(spark, events.log_dir, subscribe="events").where("partition = 1").count() == 200
    finally:
        spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
