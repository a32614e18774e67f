"""Per-log configuration: Kafka's topic-level property names, types and defaults.

A topic config is the broker's defaults (the ``log.*`` properties, mapped by
``BROKER_SYNONYMS``) overlaid with the topic's own overrides. Unknown names and invalid
values raise ConfigError naming the property.

compression.gzip.level, compression.lz4.level and compression.zstd.level (KIP-390) are the
levels the leader compresses at when it rewrites a batch in compression.type's codec; only
the level of that codec is used (``compression_level``), and their ranges and defaults are
the codecs' own (ext.compress.LEVELS).
"""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from typing import Any

from engine.checkpoint import java_int
from engine.errors import ConfigError
from ext.compress import LEVELS

LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1


def java_integer(name: str, raw: Any) -> int:
    """An integer config value as Kafka's ConfigDef reads INT and LONG: Integer.parseInt /
    Long.parseLong of the trimmed text (engine.checkpoint.java_int), ConfigError naming the
    property otherwise."""
    try:
        return java_int(str(raw).strip())
    except ValueError:
        raise ConfigError(name, f"expected an integer, got {raw!r}") from None


@dataclass(frozen=True)
class LogConfig:
    segment_bytes: int = 1073741824  # segment.bytes
    segment_ms: int = 604800000  # segment.ms
    segment_jitter_ms: int = 0  # segment.jitter.ms
    segment_index_bytes: int = 10485760  # segment.index.bytes
    index_interval_bytes: int = 4096  # index.interval.bytes
    retention_ms: int = 604800000  # retention.ms (-1: unlimited)
    retention_bytes: int = -1  # retention.bytes (-1: unlimited)
    max_message_bytes: int = 1048588  # max.message.bytes
    message_timestamp_type: str = "CreateTime"  # message.timestamp.type
    message_timestamp_before_max_ms: int = LONG_MAX  # message.timestamp.before.max.ms
    message_timestamp_after_max_ms: int = 3600000  # message.timestamp.after.max.ms
    flush_messages: int = LONG_MAX  # flush.messages
    flush_ms: int = LONG_MAX  # flush.ms
    file_delete_delay_ms: int = 60000  # file.delete.delay.ms
    cleanup_policy: str = "delete"  # cleanup.policy
    compression_type: str = "producer"  # compression.type
    compression_gzip_level: int = LEVELS["gzip"].default_level  # compression.gzip.level (-1: zlib's 6)
    compression_lz4_level: int = LEVELS["lz4"].default_level  # compression.lz4.level (9)
    compression_zstd_level: int = LEVELS["zstd"].default_level  # compression.zstd.level (3)
    min_insync_replicas: int = 1  # min.insync.replicas
    unclean_leader_election_enable: bool = False  # unclean.leader.election.enable
    preallocate: bool = False  # preallocate
    leader_replication_throttled_replicas: str = ""  # leader.replication.throttled.replicas
    follower_replication_throttled_replicas: str = ""  # follower.replication.throttled.replicas
    # Compaction (the log cleaner, engine/cleaner.py; Kafka's defaults).
    min_cleanable_dirty_ratio: float = 0.5  # min.cleanable.dirty.ratio
    min_compaction_lag_ms: int = 0  # min.compaction.lag.ms
    max_compaction_lag_ms: int = LONG_MAX  # max.compaction.lag.ms
    delete_retention_ms: int = 86400000  # delete.retention.ms (1 day)

    @property
    def deletes(self) -> bool:
        """cleanup.policy lists delete: retention and DeleteRecords may remove old segments."""
        return "delete" in self.cleanup_policy.split(",")

    @property
    def compacts(self) -> bool:
        """cleanup.policy lists compact (alone or with delete): offsets may have gaps."""
        return "compact" in self.cleanup_policy.split(",")

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

    @property
    def compression_level(self) -> int | None:
        """The level the leader compresses at when it rewrites a batch in compression.type's
        codec, as Kafka's LogConfig builds its Compression: that codec's level config. None
        for snappy and uncompressed (no levels) and for producer (no rewrite)."""
        return {"gzip": self.compression_gzip_level, "lz4": self.compression_lz4_level,
                "zstd": self.compression_zstd_level}.get(self.compression_type)

    def with_overrides(self, overrides: dict[str, Any]) -> LogConfig:
        """A copy with topic-level overrides (Kafka names, string or typed values)."""
        changes = {}
        for name, raw in overrides.items():
            spec = TOPIC_CONFIGS.get(name)
            if spec is None:
                raise ConfigError(name, "unknown topic config")
            changes[spec.attr] = spec.parse(name, raw)
        config = replace(self, **changes)
        config.validate_values()
        return config

    def validate_values(self) -> None:
        """Kafka's LogConfig.validateValues: the checks across properties, on the merged config."""
        if self.min_compaction_lag_ms > self.max_compaction_lag_ms:
            message = (f"conflict topic config setting min.compaction.lag.ms ({self.min_compaction_lag_ms}) "
                       f"> max.compaction.lag.ms ({self.max_compaction_lag_ms})")
            error = ConfigError("min.compaction.lag.ms", message)
            error.args = (message,)  # Kafka's message alone, as kafka-configs prints it
            raise error

    def to_properties(self) -> dict[str, str]:
        out = {}
        for name, spec in TOPIC_CONFIGS.items():
            value = getattr(self, spec.attr)
            out[name] = str(value).lower() if isinstance(value, bool) else str(value)
        return out


@dataclass(frozen=True)
class _Spec:
    attr: str
    kind: type
    minimum: int | None = None
    choices: tuple[str, ...] | None = None
    maximum: int | None = None
    also: int | None = None  # an integer valid outside [minimum, maximum] (gzip's level -1)
    is_list: bool = False  # Kafka's LIST type: comma-separated values, each among choices
    check: Callable[[str, list[str]], None] | None = None  # a list's own validator

    def parts(self, raw: Any) -> list[str]:
        """A list config's values as Kafka's ConfigDef parses a LIST: trimmed, split at commas
        (with the whitespace around them); an empty value is the empty list."""
        text = str(raw).strip()
        return [p.strip() for p in text.split(",")] if text else []

    def parse(self, name: str, raw: Any) -> Any:
        if self.kind is bool:
            if isinstance(raw, bool):
                return raw
            text = str(raw).strip().lower()
            if text not in ("true", "false"):
                raise ConfigError(name, f"expected true or false, got {raw!r}")
            return text == "true"
        if self.kind is float:
            return self._parse_double(name, raw)
        if self.kind is int:
            value = raw if isinstance(raw, int) else java_integer(name, raw)
            if value == self.also:
                return value
            if (self.also is not None and self.minimum is not None and self.maximum is not None
                    and not self.minimum <= value <= self.maximum):
                raise ConfigError(name, f"must be between {self.minimum} and {self.maximum} "
                                        f"or equal to {self.also}, got {value}")
            if self.minimum is not None and value < self.minimum:
                raise ConfigError(name, f"must be at least {self.minimum}, got {value}")
            if self.maximum is not None and value > self.maximum:
                raise ConfigError(name, f"must be no more than {self.maximum}, got {value}")
            if not -(2**63) <= value <= LONG_MAX:
                raise ConfigError(name, f"out of range: {value}")
            return value
        text = str(raw).strip()
        parts = self.parts(raw) if self.is_list else [text]
        if self.choices is not None:
            for part in parts:
                if part not in self.choices:
                    raise ConfigError(name, f"must be one of {', '.join(self.choices)}, got {raw!r}")
        if self.check is not None:
            self.check(name, parts)
        return ",".join(parts)


    def _parse_double(self, name: str, raw: Any) -> float:
        """Kafka's DOUBLE: Double.parseDouble of the trimmed text (an int or float as it is),
        within [minimum, maximum] when they are set (Range.between)."""
        if isinstance(raw, bool):
            raise ConfigError(name, f"expected a double, got {raw!r}")
        if isinstance(raw, (int, float)):
            value = float(raw)
        else:
            text = str(raw).strip()
            if not _JAVA_DOUBLE.fullmatch(text):
                raise ConfigError(name, f"expected a double, got {raw!r}")
            value = float(text.rstrip("dDfF"))
        if self.minimum is not None and value < self.minimum:
            raise ConfigError(name, f"must be at least {self.minimum}, got {value}")
        if self.maximum is not None and value > self.maximum:
            raise ConfigError(name, f"must be no more than {self.maximum}, got {value}")
        return value


# The decimal forms Java's Double.parseDouble reads (hexadecimal floats aside).
_JAVA_DOUBLE = re.compile(r"[+-]?(NaN|Infinity|(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?[fFdD]?)", re.ASCII)

_THROTTLED_REPLICA = re.compile(r"([0-9]+:[0-9]+)?", re.ASCII)


def _throttled_replicas(name: str, parts: list[str]) -> None:
    """Kafka's ThrottledReplicaListValidator: the literal '*' or partitionId:brokerId pairs."""
    if not (all(_THROTTLED_REPLICA.fullmatch(p) for p in parts) or "".join(parts) == "*"):
        raise ConfigError(name, "must be the literal '*' or a list of replicas in the following format: "
                                "[partitionId]:[brokerId],[partitionId]:[brokerId],...")


def _level_spec(codec: str) -> _Spec:
    """Kafka's validator of a compression level: within the codec's range, or its default
    (which for gzip, -1, lies outside it)."""
    least, greatest, default = LEVELS[codec]
    also = None if least <= default <= greatest else default
    return _Spec(f"compression_{codec}_level", int, least, maximum=greatest, also=also)


TOPIC_CONFIGS: dict[str, _Spec] = {
    "segment.bytes": _Spec("segment_bytes", int, 14),
    "segment.ms": _Spec("segment_ms", int, 1),
    "segment.jitter.ms": _Spec("segment_jitter_ms", int, 0),
    "segment.index.bytes": _Spec("segment_index_bytes", int, 4),
    "index.interval.bytes": _Spec("index_interval_bytes", int, 0),
    "retention.ms": _Spec("retention_ms", int, -1),
    "retention.bytes": _Spec("retention_bytes", int, -1),
    "max.message.bytes": _Spec("max_message_bytes", int, 0),
    "message.timestamp.type": _Spec(
        "message_timestamp_type", str, choices=("CreateTime", "LogAppendTime")
    ),
    "message.timestamp.before.max.ms": _Spec("message_timestamp_before_max_ms", int, 0),
    "message.timestamp.after.max.ms": _Spec("message_timestamp_after_max_ms", int, 0),
    "flush.messages": _Spec("flush_messages", int, 1),
    "flush.ms": _Spec("flush_ms", int, 0),
    "file.delete.delay.ms": _Spec("file_delete_delay_ms", int, 0),
    # Empty: neither deleted nor compacted (infinite retention), as Kafka allows.
    "cleanup.policy": _Spec("cleanup_policy", str, choices=("delete", "compact"), is_list=True),
    "compression.type": _Spec(
        "compression_type", str,
        choices=("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"),
    ),
    "compression.gzip.level": _level_spec("gzip"),
    "compression.lz4.level": _level_spec("lz4"),
    "compression.zstd.level": _level_spec("zstd"),
    "min.insync.replicas": _Spec("min_insync_replicas", int, 1),
    "unclean.leader.election.enable": _Spec("unclean_leader_election_enable", bool),
    "preallocate": _Spec("preallocate", bool),
    "leader.replication.throttled.replicas": _Spec("leader_replication_throttled_replicas", str, is_list=True,
                                                   check=_throttled_replicas),
    "follower.replication.throttled.replicas": _Spec("follower_replication_throttled_replicas", str,
                                                     is_list=True, check=_throttled_replicas),
    "min.cleanable.dirty.ratio": _Spec("min_cleanable_dirty_ratio", float, 0, maximum=1),
    "min.compaction.lag.ms": _Spec("min_compaction_lag_ms", int, 0),
    "max.compaction.lag.ms": _Spec("max_compaction_lag_ms", int, 1),
    "delete.retention.ms": _Spec("delete_retention_ms", int, 0),
}

# Kafka's LIST-type topic configs (IncrementalAlterConfigs APPEND/SUBTRACT apply to these alone).
TOPIC_LIST_CONFIGS = frozenset(name for name, spec in TOPIC_CONFIGS.items() if spec.is_list)

# Topic configs Strom accepts (a topic made for Kafka is made unchanged) that change nothing
# here, with why.
TOPIC_WITHOUT_EFFECT: dict[str, str] = {
    "preallocate": "segment files grow as they are written (Kafka preallocates for NTFS)",
}

# Broker property -> topic property it supplies the default for.
BROKER_SYNONYMS: dict[str, str] = {
    "log.segment.bytes": "segment.bytes",
    "log.roll.ms": "segment.ms",
    "log.roll.jitter.ms": "segment.jitter.ms",
    "log.index.size.max.bytes": "segment.index.bytes",
    "log.index.interval.bytes": "index.interval.bytes",
    "log.retention.ms": "retention.ms",
    "log.retention.bytes": "retention.bytes",
    "message.max.bytes": "max.message.bytes",
    "log.message.timestamp.type": "message.timestamp.type",
    "log.message.timestamp.before.max.ms": "message.timestamp.before.max.ms",
    "log.message.timestamp.after.max.ms": "message.timestamp.after.max.ms",
    "log.flush.interval.messages": "flush.messages",
    "log.flush.interval.ms": "flush.ms",
    "log.segment.delete.delay.ms": "file.delete.delay.ms",
    "log.cleanup.policy": "cleanup.policy",
    "compression.type": "compression.type",
    "compression.gzip.level": "compression.gzip.level",
    "compression.lz4.level": "compression.lz4.level",
    "compression.zstd.level": "compression.zstd.level",
    "min.insync.replicas": "min.insync.replicas",
    "unclean.leader.election.enable": "unclean.leader.election.enable",
    "log.preallocate": "preallocate",
    "log.cleaner.min.cleanable.ratio": "min.cleanable.dirty.ratio",
    "log.cleaner.min.compaction.lag.ms": "min.compaction.lag.ms",
    "log.cleaner.max.compaction.lag.ms": "max.compaction.lag.ms",
    "log.cleaner.delete.retention.ms": "delete.retention.ms",
}

# Coarser broker properties, used when the finer one is absent: (name, factor to ms).
_COARSE_MS = {
    "log.roll.ms": [("log.roll.hours", 3600000)],
    "log.roll.jitter.ms": [("log.roll.jitter.hours", 3600000)],
    "log.retention.ms": [("log.retention.minutes", 60000), ("log.retention.hours", 3600000)],
}


def log_config_from_broker(props: dict[str, Any]) -> LogConfig:
    """Broker-level defaults for every topic, from ``log.*`` properties (others ignored)."""
    overrides: dict[str, Any] = {}
    for broker_name, coarse in _COARSE_MS.items():
        if broker_name in props:
            continue
        for name, factor in coarse:
            if name in props:
                value = _Spec("", int, -1).parse(name, props[name])
                overrides[BROKER_SYNONYMS[broker_name]] = value * factor if value >= 0 else value
                break
    for broker_name, topic_name in BROKER_SYNONYMS.items():
        if broker_name in props:
            overrides[topic_name] = TOPIC_CONFIGS[topic_name].parse(broker_name, props[broker_name])
    return LogConfig().with_overrides(overrides)


assert {spec.attr for spec in TOPIC_CONFIGS.values()} == {f.name for f in fields(LogConfig)}
