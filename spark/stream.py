"""``spark.readStream.format("strom")``: micro-batches of newly committed records.

Offsets are per-partition log offsets, JSON as Spark checkpoints them::

    {"orders": {"0": 42, "1": 17}}    # the next offset to read in each partition

Each trigger, ``latestOffset`` lists the partitions again (``subscribePattern`` picks up
new topics, and new partitions start at their log start offset, as Spark's Kafka source
does) and reads each one's latest offset: its checkpointed high watermark, so a
micro-batch holds only committed data, at most one HW checkpoint interval behind the
broker; with ``isolation=read_committed`` (the default) its last stable offset below
that, so a transaction still open when a micro-batch ends is read whole, once committed,
in a later one, and an aborted one never (spark/transactions.py).

``maxOffsetsPerTrigger`` caps a micro-batch, split across partitions in proportion to their
backlog (Spark's rule: a partition with any backlog gets at least one offset). It may end a
micro-batch inside a transaction; that is safe, as the whole transaction lies below the LSO:
it is committed or aborted already, and its aborted batches are dropped wherever the cut
falls.

A partition that vanished, or whose log now ends before the offset the query reached
(re-created or truncated), and offsets retention deleted before they were read, are data
loss: an error with ``failOnDataLoss`` (the default), else the query goes on from what
there is.

PySpark 4.2+ calls ``latestOffset(start, limit)`` and honours read limits and
Trigger.AvailableNow; 4.0/4.1 call ``latestOffset()`` without arguments (PySpark checks
the arity), so then the reader remembers the end it returned last. ``read`` is stateless:
a LogRange says everything. ``commit`` has nothing to do: no broker keeps our position.
"""
from __future__ import annotations

import math
from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition

from spark.errors import StromSparkError
from spark.layout import Layout, PartitionState
from spark.options import READ_COMMITTED, ReadOptions, TopicPartition
from spark.planning import LogRange, ReadSettings, plan_ranges, resolve_start
from spark.reader import read_range

try:  # PySpark 4.2+
    from pyspark.sql.streaming.datasource import (
        ReadAllAvailable,
        ReadMaxRows,
        SupportsTriggerAvailableNow,
    )
except ImportError:  # 4.0/4.1: no read limits, no Trigger.AvailableNow for Python sources
    ReadAllAvailable = ReadMaxRows = None  # type: ignore[assignment,misc]

    class SupportsTriggerAvailableNow:  # type: ignore[no-redef]
        pass

Offsets = dict[TopicPartition, int]


class StromStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: ReadOptions):
        self.options = options
        self.starting = options.starting_for_stream()
        self._last_end: Offsets | None = None  # 4.0/4.1 only
        self._available_now: Offsets | None = None

    # ---- offsets -------------------------------------------------------------------------

    def initialOffset(self) -> dict:
        options = self.options
        offsets = {
            tp: resolve_start(state, self.starting, options.starting_timestamps,
                              options.timestamp_strategy, options.fail_on_data_loss)
            for tp, state in self._states().items()
        }
        return to_json(offsets)

    def getDefaultReadLimit(self):
        if self.options.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.options.max_offsets_per_trigger)
        return ReadAllAvailable()

    def latestOffset(self, start: dict | None = None, limit=None) -> dict:
        if start is not None:
            begin = from_json(start)
        elif self._last_end is not None:
            begin = self._last_end
        else:
            begin = from_json(self.initialOffset())
        states = self._states()
        begin = self._check_lost(begin, states)
        latest = {tp: state.latest for tp, state in states.items()}
        if self._available_now is not None:
            latest = {tp: min(v, self._available_now.get(tp, states[tp].log_start_offset))
                      for tp, v in latest.items()}
        from_offsets = {tp: begin.get(tp, states[tp].log_start_offset) for tp in latest}
        max_offsets = self._max_offsets(limit)
        end = latest if max_offsets is None else rate_limit(from_offsets, latest, max_offsets)
        end = {tp: max(offset, from_offsets[tp]) for tp, offset in end.items()}
        self._last_end = end
        return to_json(end)

    def prepareForTriggerAvailableNow(self) -> None:
        self._available_now = {tp: state.latest for tp, state in self._states().items()}

    def _max_offsets(self, limit) -> int | None:
        if limit is None:  # 4.0/4.1
            return self.options.max_offsets_per_trigger
        if ReadMaxRows is not None and isinstance(limit, ReadMaxRows):
            return limit.max_rows
        return None

    def _states(self) -> dict[TopicPartition, PartitionState]:
        layout = Layout(self.options.paths)
        return {tp: layout.state(tp, self.options.isolation)
                for tp in layout.select(self.options.subscription, strict=False)}

    def _check_lost(self, begin: Offsets, states: dict[TopicPartition, PartitionState]) -> Offsets:
        """Partitions that vanished, or whose log now ends before where the query got to
        (deleted and re-created, or truncated): an error with failOnDataLoss, else go on
        from what there is."""
        gone = [tp for tp in begin if tp not in states]
        behind = [tp for tp in begin if tp in states and begin[tp] > states[tp].log_end_offset]
        if (gone or behind) and self.options.fail_on_data_loss:
            problems = [f"{t}-{p} is no longer under {', '.join(self.options.paths)}" for t, p in gone]
            problems += [f"{t}-{p} ends at offset {states[(t, p)].log_end_offset}, before offset "
                         f"{begin[(t, p)]} this query reached (re-created or truncated?)"
                         for t, p in behind]
            raise StromSparkError(f"{'; '.join(problems)}; set failOnDataLoss=false to go on")
        return {tp: states[tp].latest if tp in behind else offset
                for tp, offset in begin.items() if tp in states}

    # ---- micro-batches -------------------------------------------------------------------

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        options = self.options
        begin, until = from_json(start), from_json(end)
        layout = Layout(options.paths)
        ranges = []
        for tp, hi in until.items():
            if tp not in layout.replicas:
                self._check_lost({tp: hi}, {})
                continue
            state = layout.state(tp, options.isolation)
            lo = begin.get(tp, state.log_start_offset)
            lo = self._after_data_loss(state, lo, hi)
            if lo < hi:
                ranges.append((state, lo, hi))
        return list(plan_ranges(ranges, ReadSettings(
            options.max_partition_bytes, options.min_partitions, options.include_headers,
            options.check_crcs, read_committed=options.isolation == READ_COMMITTED,
        )))

    def _after_data_loss(self, state: PartitionState, lo: int, hi: int) -> int:
        tp = state.tp
        if lo < state.log_start_offset:
            if self.options.fail_on_data_loss:
                raise StromSparkError(
                    f"offsets [{lo}, {state.log_start_offset}) of {tp[0]}-{tp[1]} were deleted "
                    f"(retention or DeleteRecords) before this query read them; set "
                    f"failOnDataLoss=false to skip them"
                )
            lo = state.log_start_offset
        if state.log_end_offset < hi and self.options.fail_on_data_loss:
            raise StromSparkError(
                f"{tp[0]}-{tp[1]} ends at offset {state.log_end_offset} in {state.replica.dir}, "
                f"but offsets up to {hi} were committed before (the log was truncated or "
                f"replaced); set failOnDataLoss=false to go on"
            )
        return lo

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_range(partition) if isinstance(partition, LogRange) else iter(())

    def commit(self, end: dict) -> None:
        pass


def rate_limit(start: Offsets, latest: Offsets, limit: int) -> Offsets:
    """Spark's Kafka rule: each partition's share of ``limit`` is proportional to its
    backlog; a share below one offset rounds up (no partition starves), others round down;
    never past the latest offset."""
    backlog = {tp: latest[tp] - start[tp] for tp in latest if latest[tp] > start[tp]}
    total = sum(backlog.values())
    if total < 1:
        return dict(latest)
    end = {}
    for tp, offset in latest.items():
        if tp not in backlog:
            end[tp] = offset
            continue
        share = limit * (backlog[tp] / total)
        end[tp] = min(offset, start[tp] + int(math.ceil(share) if share < 1 else math.floor(share)))
    return end


def to_json(offsets: Offsets) -> dict:
    out: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        out.setdefault(topic, {})[str(partition)] = offset
    return out


def from_json(offsets: dict) -> Offsets:
    try:
        return {(topic, int(p)): int(o) for topic, parts in offsets.items() for p, o in parts.items()}
    except (AttributeError, TypeError, ValueError):
        raise StromSparkError(
            f'offsets {offsets!r} are not Strom offsets ({{"topic": {{"0": 42}}}}): was this '
            f"checkpoint written by another source?"
        ) from None
