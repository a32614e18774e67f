"""``spark.read.format("strom")``: the DataSource and its batch readers.

Where each step runs (PySpark 4.x): ``__init__`` and ``schema()`` in a planner process
at ``load()``; ``reader()``, ``pushFilters()`` and ``partitions()`` in another planner
process per query; ``read()`` on executors. Each object is pickled between them, and the
reader is pickled before ``partitions()`` runs, so nothing set in ``partitions()`` reaches
``read()``: every LogRange carries what its read needs.

``load()`` checks the options and that the paths, topics and assigned partitions exist,
so mistakes surface there with a ``strom:`` message. Offsets and segments are looked up
again for every query, so a DataFrame re-read later sees newly committed data.
"""
from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, Filter, InputPartition
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

from spark.errors import StromSparkError
from spark.filters import Pruning
from spark.layout import Layout
from spark.options import READ_COMMITTED, ReadOptions, parse_options
from spark.planning import LogRange, ReadSettings, plan_ranges, resolve_end, resolve_start
from spark.reader import read_range
from spark.sink import (
    StromStreamWriter,
    StromWriter,
    check_schema,
    parse_sink_options,
)
from spark.stream import StromStreamReader

HEADER_TYPE = StructType([StructField("key", StringType()), StructField("value", BinaryType())])


def kafka_schema(include_headers: bool) -> StructType:
    """Spark's Kafka source schema, every field nullable."""
    fields = [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    if include_headers:
        fields.append(StructField("headers", ArrayType(HEADER_TYPE)))
    return StructType(fields)


class StromDataSource(DataSource):
    """Kafka topic partitions read from Strom's (or Kafka's) log directories."""

    def __init__(self, options):
        super().__init__(options)
        self._read_options: ReadOptions | None = None
        if any(k.lower() in ("path", "paths") for k in options):  # a read: check it at load()
            self.read_options  # noqa: B018

    @property
    def read_options(self) -> ReadOptions:
        """The read options, checked when a read is planned (a write takes other options)."""
        if self._read_options is None:
            parsed = parse_options(self.options)
            Layout(parsed.paths).select(parsed.subscription)
            self._read_options = parsed
        return self._read_options

    @classmethod
    def name(cls) -> str:
        return "strom"

    def schema(self) -> StructType:
        return kafka_schema(self.read_options.include_headers)

    def writer(self, schema: StructType, overwrite: bool) -> StromWriter:
        options = parse_sink_options(self.options)
        check_schema(schema, options.topic)
        return StromWriter(options)

    def streamWriter(self, schema: StructType, overwrite: bool) -> StromStreamWriter:
        options = parse_sink_options(self.options)
        check_schema(schema, options.topic)
        return StromStreamWriter(options)

    def reader(self, schema: StructType) -> DataSourceReader:
        _check_schema(schema, self.read_options)
        if self.read_options.push_filters:
            return StromFilteringReader(self.read_options)
        return StromReader(self.read_options)

    def streamReader(self, schema: StructType) -> StromStreamReader:
        _check_schema(schema, self.read_options)
        return StromStreamReader(self.read_options)


def _check_schema(schema: StructType, options: ReadOptions) -> None:
    if schema != kafka_schema(options.include_headers):
        raise StromSparkError(
            "a user-specified schema is not supported: the schema is Spark's Kafka source schema "
            "(add includeHeaders=true for the headers column); drop .schema(...)"
        )


class StromReader(DataSourceReader):
    """A batch read: every selected partition from its start to its end offset."""

    def __init__(self, options: ReadOptions):
        self.options = options
        self.pruning = Pruning()

    def partitions(self) -> list[InputPartition]:
        options, pruning = self.options, self.pruning
        layout = Layout(options.paths)
        starting, ending = options.starting_for_batch(), options.ending_for_batch()
        ranges = []
        for tp in layout.select(options.subscription):
            if not pruning.allows(*tp):
                continue
            state = layout.state(tp, options.isolation)
            start = resolve_start(state, starting, options.starting_timestamps,
                                  options.timestamp_strategy, options.fail_on_data_loss)
            end = resolve_end(state, ending, options.ending_timestamps, start)
            lo_ms = pruning.timestamp_lo_ms
            if lo_ms is not None and start < end:
                found = state.reader.offset_for_timestamp(lo_ms, start)
                start = end if found is None else max(start, found[0])
            ranges.append((state, *pruning.offsets(start, end)))
        return list(plan_ranges(ranges, ReadSettings(
            options.max_partition_bytes, options.min_partitions, options.include_headers,
            options.check_crcs, pruning.timestamp_lo_us, pruning.timestamp_hi_us,
            read_committed=options.isolation == READ_COMMITTED,
        )))

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, LogRange):
            return iter(())  # Spark's stand-in when partitions() planned none
        return read_range(partition)


class StromFilteringReader(StromReader):
    """StromReader with filter pushdown (``pushFilters=true``; see spark/filters.py). A
    separate class because PySpark refuses to plan a reader that defines pushFilters
    while spark.sql.python.filterPushdown.enabled is off."""

    def pushFilters(self, filters: list[Filter]) -> Iterator[Filter]:
        for f in filters:
            if not self.pruning.accept(f):
                yield f
