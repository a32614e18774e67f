"""The options of ``spark.read.format("strom")``, named as Spark's Kafka source names them.

    option                              value                                        default
    path                                comma-separated log dirs, or directories     (required)
                                        above them (a cluster's data dir; searched
                                        3 levels down); .load(path) or .load([...])
    assign                              JSON {"orders":[0,1]}                        exactly one of
    subscribe                           comma-separated topics                       these three
    subscribePattern                    regex matching whole topic names
    startingOffsets                     earliest, latest, or JSON                    batch: earliest
                                        {"orders":{"0":42,"1":-2}} (-2 earliest,     stream: latest
                                        -1 latest)
    endingOffsets                       latest, or JSON (batch only)                 latest
    startingTimestamp                   ms since the epoch, for every partition
    endingTimestamp                     ms since the epoch (batch only)
    startingOffsetsByTimestamp          JSON {"orders":{"0":1700000000000}}
    endingOffsetsByTimestamp            JSON, as above (batch only)
    startingOffsetsByTimestampStrategy  error or latest: no committed record is      error
                                        that new
    includeHeaders                      true: add the headers column                 false
    isolation                           read_committed, read_uncommitted, log_end    read_committed
    failOnDataLoss                      fail when wanted offsets were deleted        true
    minPartitions                       at least this many Spark partitions
    maxPartitionBytes                   segment bytes per Spark partition            64 MiB
    maxOffsetsPerTrigger                stream: offsets per micro-batch, shared
                                        across partitions by backlog
    pushFilters                         true: prune by topic/partition/offset/       false
                                        timestamp predicates (spark/filters.py)
    checkCrcs                           verify each batch's CRC32C while decoding    true
                                        (Kafka's check.crcs)

Precedence for where a partition starts (as in Spark): ``startingOffsetsByTimestamp``,
then ``startingTimestamp``, then ``startingOffsets``; likewise for the end.

Isolation: ``read_committed`` reads below the high watermark, skips control batches and
would skip aborted transactional data (Strom has no transactions yet, so today it equals
``read_uncommitted``, which keeps aborted data as Kafka's read_uncommitted does);
``log_end`` reads everything in the files up to the log end offset, including data a new
leader may still truncate.
"""
from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from spark.errors import StromSparkError

EARLIEST = -2
LATEST = -1

READ_COMMITTED = "read_committed"
READ_UNCOMMITTED = "read_uncommitted"
LOG_END = "log_end"
ISOLATIONS = (READ_COMMITTED, READ_UNCOMMITTED, LOG_END)

DEFAULT_MAX_PARTITION_BYTES = 64 * 1024 * 1024

TopicPartition = tuple[str, int]

# Lower-case, as PySpark hands options over (a case-insensitive dict).
KNOWN_OPTIONS = {
    name.lower(): name for name in (
        "path", "paths", "assign", "subscribe", "subscribePattern", "startingOffsets", "endingOffsets",
        "startingTimestamp", "endingTimestamp", "startingOffsetsByTimestamp",
        "endingOffsetsByTimestamp", "startingOffsetsByTimestampStrategy", "includeHeaders",
        "isolation", "failOnDataLoss", "minPartitions", "maxPartitionBytes",
        "maxOffsetsPerTrigger", "pushFilters", "checkCrcs",
    )
}


@dataclass(frozen=True)
class Subscription:
    """Which partitions to read: ``assign`` names them, ``subscribe`` names topics,
    ``subscribePattern`` matches topic names."""

    kind: str  # "assign", "subscribe" or "subscribePattern"
    topics: tuple[str, ...] = ()
    pattern: str | None = None
    assigned: tuple[TopicPartition, ...] = ()

    def describe(self) -> str:
        if self.kind == "assign":
            return "assign " + ", ".join(f"{t}-{p}" for t, p in self.assigned)
        if self.kind == "subscribe":
            return "subscribe " + ",".join(self.topics)
        return f"subscribePattern {self.pattern}"


@dataclass(frozen=True)
class OffsetSpec:
    """A default (EARLIEST or LATEST) with per-partition offsets (-2/-1 allowed)."""

    default: int
    offsets: dict[TopicPartition, int] = field(default_factory=dict)

    def for_partition(self, tp: TopicPartition) -> int:
        return self.offsets.get(tp, self.default)


@dataclass(frozen=True)
class TimestampSpec:
    """Timestamps (ms) to resolve through the time index: one for every partition and/or
    per partition; partitions with neither fall back to the offset spec."""

    default: int | None = None
    timestamps: dict[TopicPartition, int] = field(default_factory=dict)

    def for_partition(self, tp: TopicPartition) -> int | None:
        return self.timestamps.get(tp, self.default)


@dataclass(frozen=True)
class ReadOptions:
    paths: tuple[str, ...]
    subscription: Subscription
    starting_offsets: OffsetSpec | None  # None: the mode's default
    ending_offsets: OffsetSpec | None
    starting_timestamps: TimestampSpec | None
    ending_timestamps: TimestampSpec | None
    timestamp_strategy: str
    include_headers: bool
    isolation: str
    fail_on_data_loss: bool
    min_partitions: int | None
    max_partition_bytes: int
    max_offsets_per_trigger: int | None
    push_filters: bool
    check_crcs: bool

    def starting_for_batch(self) -> OffsetSpec:
        spec = self.starting_offsets or OffsetSpec(EARLIEST)
        if spec.default == LATEST or LATEST in spec.offsets.values():
            raise StromSparkError(
                "startingOffsets: latest (or -1) is not allowed in a batch query: it would read nothing"
            )
        return spec

    def ending_for_batch(self) -> OffsetSpec:
        spec = self.ending_offsets or OffsetSpec(LATEST)
        if spec.default == EARLIEST or EARLIEST in spec.offsets.values():
            raise StromSparkError(
                "endingOffsets: earliest (or -2) is not allowed in a batch query: it would read nothing"
            )
        return spec

    def starting_for_stream(self) -> OffsetSpec:
        if self.ending_offsets is not None or self.ending_timestamps is not None:
            raise StromSparkError(
                "endingOffsets/endingTimestamp/endingOffsetsByTimestamp apply to batch queries only, "
                "not to spark.readStream"
            )
        return self.starting_offsets or OffsetSpec(LATEST)


def parse_options(options: Mapping[str, str]) -> ReadOptions:
    """Validate every option; raise StromSparkError naming the first bad one."""
    opts = {k.lower(): v for k, v in options.items()}
    unknown = sorted(k for k in opts if k not in KNOWN_OPTIONS)
    if unknown:
        raise StromSparkError(
            f"unknown option(s) {', '.join(unknown)}; Strom's options are "
            f"{', '.join(KNOWN_OPTIONS.values())}"
        )
    paths = tuple(p.strip() for p in (opts.get("path") or "").split(",") if p.strip())
    if opts.get("paths"):  # .load([...]): Spark passes the list as JSON
        try:
            listed = json.loads(opts["paths"])
        except ValueError:
            listed = None
        if not isinstance(listed, list) or not all(isinstance(p, str) for p in listed):
            raise StromSparkError(f"paths: expected a JSON list of paths, got {opts['paths']!r}")
        paths += tuple(p for p in listed if p not in paths)
    if not paths:
        raise StromSparkError(
            'no path: give the log dirs to read, e.g. .option("path", "/var/lib/strom/data") or .load(path)'
        )
    return ReadOptions(
        paths=paths,
        subscription=_subscription(opts),
        starting_offsets=_offset_spec(opts, "startingOffsets"),
        ending_offsets=_offset_spec(opts, "endingOffsets"),
        starting_timestamps=_timestamp_spec(opts, "startingTimestamp", "startingOffsetsByTimestamp"),
        ending_timestamps=_timestamp_spec(opts, "endingTimestamp", "endingOffsetsByTimestamp"),
        timestamp_strategy=_choice(opts, "startingOffsetsByTimestampStrategy", ("error", "latest"), "error"),
        include_headers=_bool(opts, "includeHeaders", False),
        isolation=_choice(opts, "isolation", ISOLATIONS, READ_COMMITTED),
        fail_on_data_loss=_bool(opts, "failOnDataLoss", True),
        min_partitions=_positive_int(opts, "minPartitions"),
        max_partition_bytes=_positive_int(opts, "maxPartitionBytes") or DEFAULT_MAX_PARTITION_BYTES,
        max_offsets_per_trigger=_positive_int(opts, "maxOffsetsPerTrigger"),
        push_filters=_bool(opts, "pushFilters", False),
        check_crcs=_bool(opts, "checkCrcs", True),
    )


def _subscription(opts: dict[str, str]) -> Subscription:
    given = [name for name in ("assign", "subscribe", "subscribePattern") if opts.get(name.lower())]
    if len(given) != 1:
        raise StromSparkError(
            "give exactly one of the options assign, subscribe, subscribePattern"
            + (f" (got {', '.join(given)})" if given else "")
        )
    kind = given[0]
    value = opts[kind.lower()]
    if kind == "subscribe":
        topics = tuple(dict.fromkeys(t.strip() for t in value.split(",") if t.strip()))
        if not topics:
            raise StromSparkError(f"subscribe: no topic in {value!r}")
        return Subscription(kind, topics=topics)
    if kind == "subscribePattern":
        try:
            re.compile(value)
        except re.error as e:
            raise StromSparkError(
                f"subscribePattern: {value!r} is not a valid regular expression: {e}"
            ) from None
        return Subscription(kind, pattern=value)
    assigned = []
    for topic, partitions in _json_object(value, "assign", '{"orders":[0,1]}').items():
        if not isinstance(partitions, list) or not all(_is_int(p) and p >= 0 for p in partitions):
            raise StromSparkError(
                f'assign: topic {topic!r} needs a list of partition numbers, like {{"{topic}":[0,1]}}'
            )
        assigned.extend((topic, p) for p in partitions)
    if not assigned:
        raise StromSparkError(f"assign: no partition in {value!r}")
    return Subscription(kind, assigned=tuple(dict.fromkeys(assigned)))


def _offset_spec(opts: dict[str, str], name: str) -> OffsetSpec | None:
    value = opts.get(name.lower())
    if value is None:
        return None
    word = value.strip().lower()
    if word == "earliest":
        return OffsetSpec(EARLIEST)
    if word == "latest":
        return OffsetSpec(LATEST)
    example = '{"orders":{"0":42,"1":-2}}'
    per_partition = _partition_json(value, name, example)
    for tp, offset in per_partition.items():
        if offset < EARLIEST:
            raise StromSparkError(f"{name}: offset {offset} of {tp[0]}-{tp[1]} is not an offset, -2 or -1")
    default = EARLIEST if name == "startingOffsets" else LATEST
    return OffsetSpec(default, per_partition)


def _timestamp_spec(opts: dict[str, str], single: str, by_partition: str) -> TimestampSpec | None:
    default = None
    if opts.get(single.lower()) is not None:
        default = _int_value(opts[single.lower()], single)
        if default < 0:
            raise StromSparkError(f"{single}: {default} is negative; give milliseconds since the epoch")
    timestamps: dict[TopicPartition, int] = {}
    if opts.get(by_partition.lower()) is not None:
        timestamps = _partition_json(
            opts[by_partition.lower()], by_partition, '{"orders":{"0":1700000000000}}'
        )
        if any(ts < 0 for ts in timestamps.values()):
            raise StromSparkError(
                f"{by_partition}: timestamps are milliseconds since the epoch, not negative"
            )
    if default is None and not timestamps:
        return None
    return TimestampSpec(default, timestamps)


def _partition_json(value: str, name: str, example: str) -> dict[TopicPartition, int]:
    result: dict[TopicPartition, int] = {}
    for topic, partitions in _json_object(value, name, example).items():
        if not isinstance(partitions, dict):
            raise StromSparkError(
                f"{name}: topic {topic!r} needs an object of partition -> value, like {example}"
            )
        for partition, number in partitions.items():
            if not partition.isdigit() or not _is_int(number):
                raise StromSparkError(
                    f"{name}: {topic!r} partition {partition!r}: expected a partition number and an "
                    f"integer, like {example}"
                )
            result[(topic, int(partition))] = number
    return result


def _json_object(value: str, name: str, example: str) -> dict:
    try:
        parsed = json.loads(value)
    except ValueError:
        parsed = None
    if not isinstance(parsed, dict):
        raise StromSparkError(f"{name}: expected JSON like {example}, got {value!r}")
    return parsed


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _int_value(value: str, name: str) -> int:
    try:
        return int(value.strip())
    except ValueError:
        raise StromSparkError(f"{name}: expected an integer, got {value!r}") from None


def _positive_int(opts: dict[str, str], name: str) -> int | None:
    if opts.get(name.lower()) is None:
        return None
    number = _int_value(opts[name.lower()], name)
    if number <= 0:
        raise StromSparkError(f"{name}: expected a positive integer, got {number}")
    return number


def _bool(opts: dict[str, str], name: str, default: bool) -> bool:
    value = opts.get(name.lower())
    if value is None:
        return default
    word = str(value).strip().lower()
    if word not in ("true", "false"):
        raise StromSparkError(f"{name}: expected true or false, got {value!r}")
    return word == "true"


def _choice(opts: dict[str, str], name: str, choices: tuple[str, ...], default: str) -> str:
    value = opts.get(name.lower())
    if value is None:
        return default
    word = value.strip().lower()
    if word not in choices:
        raise StromSparkError(f"{name}: expected one of {', '.join(choices)}, got {value!r}")
    return word
