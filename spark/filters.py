"""Filter pushdown (``pushFilters=true``): predicates that prune before decoding.

Spark does not re-apply a filter the source accepts, so a filter is accepted only when the
reader enforces it exactly:

    column     accepted                         enforced by
    topic      =, IN, IS NOT NULL               reading only those topics
    partition  =, IN, <, <=, >, >=, IS NOT NULL reading only those partitions
    offset     =, <, <=, >, >=, IS NOT NULL     narrowing each partition's offset range:
                                                segments and index-sized runs of batches
                                                outside it are never read
    timestamp  =, <, <=, >, >=                  a lower bound starts each partition at its
                                                first record that new (the time index, as
                                                startingTimestamp); both bounds then mask
                                                the decoded rows (CreateTime timestamps
                                                need not grow with offsets)

Everything else (OR, NOT, key/value predicates, ``IS NULL``, string matches) goes back to
Spark. Several accepted filters combine with AND; contradictory ones read nothing.

Why opt-in: in PySpark 4.3.0, after a query on a DataFrame or temp view whose filters were
pushed, a later query on the same DataFrame without filters reuses the pruned plan (it
counts only the filtered rows). A fresh ``load()`` is correct. Select data through the
Kafka-style options by default; turn this on per DataFrame you filter once. It needs the
session conf ``spark.sql.python.filterPushdown.enabled=true``, or planning fails with
DATA_SOURCE_PUSHDOWN_DISABLED.
"""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from pyspark.sql.datasource import (
    EqualNullSafe,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNotNull,
    LessThan,
    LessThanOrEqual,
)

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_MICROSECOND = dt.timedelta(microseconds=1)
_NEVER_NULL = ("topic", "partition", "offset")


@dataclass
class Pruning:
    """What accepted filters allow: None means unrestricted. Offsets are [lo, hi);
    partitions and timestamps (microseconds) are inclusive bounds."""

    topics: frozenset[str] | None = None
    partitions: frozenset[int] | None = None
    partition_lo: int | None = None
    partition_hi: int | None = None
    offset_lo: int | None = None
    offset_hi: int | None = None
    timestamp_lo_us: int | None = None
    timestamp_hi_us: int | None = None

    def accept(self, f: Filter) -> bool:
        """Fold ``f`` in if it is enforced exactly; False hands it back to Spark."""
        attribute = getattr(f, "attribute", ())  # Not has a child instead
        if len(attribute) != 1:
            return False
        column = attribute[0].lower()
        if isinstance(f, IsNotNull):
            return column in _NEVER_NULL
        if column == "topic":
            return self._topic(f)
        if column == "partition":
            return self._partition(f)
        if column == "offset":
            return self._offset(f)
        if column == "timestamp":
            return self._timestamp(f)
        return False

    def allows(self, topic: str, partition: int) -> bool:
        return ((self.topics is None or topic in self.topics)
                and (self.partitions is None or partition in self.partitions)
                and (self.partition_lo is None or partition >= self.partition_lo)
                and (self.partition_hi is None or partition <= self.partition_hi))

    def offsets(self, start: int, end: int) -> tuple[int, int]:
        """[start, end) narrowed by the offset bounds (possibly empty: start >= end)."""
        if self.offset_lo is not None:
            start = max(start, self.offset_lo)
        if self.offset_hi is not None:
            end = min(end, self.offset_hi)
        return start, max(start, end)

    @property
    def timestamp_lo_ms(self) -> int | None:
        """The smallest record timestamp (ms) the lower bound lets through."""
        return None if self.timestamp_lo_us is None else -(-self.timestamp_lo_us // 1000)

    # ---- per column ----------------------------------------------------------------------

    def _topic(self, f: Filter) -> bool:
        values = _equal_values(f, str)
        if values is None:
            return False
        self.topics = values if self.topics is None else self.topics & values
        return True

    def _partition(self, f: Filter) -> bool:
        values = _equal_values(f, int)
        if values is not None:
            self.partitions = values if self.partitions is None else self.partitions & values
            return True
        bound = _bound(f, int)
        if bound is None:
            return False
        lo, hi = bound
        if lo is not None:
            self.partition_lo = lo if self.partition_lo is None else max(self.partition_lo, lo)
        if hi is not None:
            self.partition_hi = hi if self.partition_hi is None else min(self.partition_hi, hi)
        return True

    def _offset(self, f: Filter) -> bool:
        values = _equal_values(f, int) if not isinstance(f, In) else None
        bound = (min(values), max(values)) if values else _bound(f, int)
        if bound is None:
            return False
        lo, hi = bound
        if lo is not None:
            self.offset_lo = lo if self.offset_lo is None else max(self.offset_lo, lo)
        if hi is not None:
            self.offset_hi = hi + 1 if self.offset_hi is None else min(self.offset_hi, hi + 1)
        return True

    def _timestamp(self, f: Filter) -> bool:
        if isinstance(f, In):
            return False
        if isinstance(f, EqualTo | EqualNullSafe):
            value = _micros(f.value)
            bound = None if value is None else (value, value)
        else:
            bound = _bound(f, dt.datetime)
        if bound is None:
            return False
        lo, hi = bound
        if lo is not None:
            self.timestamp_lo_us = lo if self.timestamp_lo_us is None else max(self.timestamp_lo_us, lo)
        if hi is not None:
            self.timestamp_hi_us = hi if self.timestamp_hi_us is None else min(self.timestamp_hi_us, hi)
        return True


def _equal_values(f: Filter, kind: type) -> frozenset | None:
    if isinstance(f, EqualTo | EqualNullSafe):
        values = [f.value]
    elif isinstance(f, In):
        values = list(f.value)
    else:
        return None
    if not values or not all(_is(v, kind) for v in values):
        return None
    return frozenset(values)


def _bound(f: Filter, kind: type) -> tuple[int | None, int | None] | None:
    """(inclusive lower, inclusive upper) for a comparison, in ints (timestamps in µs)."""
    if not isinstance(f, GreaterThan | GreaterThanOrEqual | LessThan | LessThanOrEqual):
        return None
    if kind is dt.datetime:
        value = _micros(f.value)
    else:
        value = f.value if _is(f.value, kind) else None
    if value is None:
        return None
    if isinstance(f, GreaterThan):
        return value + 1, None
    if isinstance(f, GreaterThanOrEqual):
        return value, None
    if isinstance(f, LessThan):
        return None, value - 1
    return None, value


def _is(value: object, kind: type) -> bool:
    return isinstance(value, kind) and not isinstance(value, bool)


def _micros(value: object) -> int | None:
    """Microseconds since the epoch of a timezone-aware datetime (what Spark pushes for
    timestamp literals); None for anything else, which then goes back to Spark."""
    if not isinstance(value, dt.datetime) or value.tzinfo is None:
        return None
    return (value - _EPOCH) // _MICROSECOND
