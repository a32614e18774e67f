"""Where the partitions are on disk, and what is committed in each.

A ``path`` names log dirs (a directory holding ``meta.properties``, the offset
checkpoints or ``<topic>-<partition>/`` directories), or directories above them: a
cluster's data dir with one or more log dirs per broker, found up to three levels down.
The metadata log (``__cluster_metadata-0``) is never a topic.

A partition found in several log dirs has a replica in each (one per broker). Every
in-sync replica holds the same data below the high watermark, so any of them will do; the
one with the highest checkpointed high watermark (``replication-offset-checkpoint`` in its
log dir) sees the most committed data, and for ``isolation=log_end`` the one with the
highest log end offset sees the most data.

What a partition offers (a ``PartitionState``, snapshotted when a query is planned)::

    log start offset   max(log-start-offset-checkpoint, first segment's base offset):
                       earlier offsets were deleted by retention or DeleteRecords
    high watermark     replication-offset-checkpoint (a broker writes it every
                       replica.high.watermark.checkpoint.interval.ms, 5 s by default, so it
                       lags the live HW); a partition absent from it has nothing committed
    log end offset     the offset after the last whole batch in the files
    last stable offset read_committed only: the least first offset of a transaction open
                       at the high watermark, else the high watermark (spark/transactions.py)
    latest             last stable offset (read_committed), high watermark
                       (read_uncommitted) or log end offset (log_end), within
                       [log start offset, log end offset]
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass

from engine.checkpoint import read_offset_checkpoint
from engine.reader import PartitionReader, parse_partition_dir
from spark.errors import StromSparkError
from spark.options import LOG_END, READ_COMMITTED, Subscription, TopicPartition
from spark.transactions import last_stable_offset

REPLICATION_CHECKPOINT = "replication-offset-checkpoint"
LOG_START_CHECKPOINT = "log-start-offset-checkpoint"
META_PROPERTIES = "meta.properties"
METADATA_TOPIC = "__cluster_metadata"
_SEARCH_DEPTH = 3


@dataclass(frozen=True)
class Replica:
    """One log dir's copy of a partition, with what that log dir checkpointed for it."""

    log_dir: str
    dir: str
    high_watermark: int | None
    log_start_offset: int


@dataclass
class PartitionState:
    topic: str
    partition: int
    replica: Replica
    reader: PartitionReader
    log_start_offset: int
    high_watermark: int
    log_end_offset: int
    latest: int
    last_stable_offset: int | None = None  # read_committed only

    @property
    def tp(self) -> TopicPartition:
        return self.topic, self.partition


class Layout:
    """The partitions under a set of paths, as the directories stand now."""

    def __init__(self, paths: tuple[str, ...]):
        self.paths = paths
        self.log_dirs = find_log_dirs(paths)
        self.replicas: dict[TopicPartition, list[Replica]] = {}
        for log_dir in self.log_dirs:
            for tp, replica in _replicas_in(log_dir):
                self.replicas.setdefault(tp, []).append(replica)

    @property
    def topics(self) -> list[str]:
        return sorted({t for t, _ in self.replicas})

    def partitions_of(self, topic: str) -> list[int]:
        return sorted(p for t, p in self.replicas if t == topic)

    def select(self, subscription: Subscription, strict: bool = True) -> list[TopicPartition]:
        """The partitions a subscription names. With ``strict`` a named topic or assigned
        partition that is not on disk is an error (a pattern may match nothing)."""
        if subscription.kind == "subscribePattern":
            pattern = re.compile(subscription.pattern or "")
            return [tp for tp in sorted(self.replicas)
                    if pattern.fullmatch(tp[0]) and not tp[0].startswith("__")]
        if subscription.kind == "subscribe":
            missing = [t for t in subscription.topics if not self.partitions_of(t)]
            if missing and strict:
                raise StromSparkError(
                    f"topic {', '.join(repr(t) for t in missing)} does not exist under "
                    f"{self.where()} (topics there: {', '.join(self.topics) or 'none'})"
                )
            return [(t, p) for t in subscription.topics for p in self.partitions_of(t)]
        missing = [tp for tp in subscription.assigned if tp not in self.replicas]
        if missing and strict:
            names = ", ".join(f"{t}-{p}" for t, p in missing)
            raise StromSparkError(
                f"assign: partition {names} does not exist under {self.where()} "
                f"(topics there: {', '.join(self.topics) or 'none'})"
            )
        return [tp for tp in subscription.assigned if tp in self.replicas]

    def where(self) -> str:
        return ", ".join(self.paths)

    def state(self, tp: TopicPartition, isolation: str) -> PartitionState:
        """Open the best replica of a partition and snapshot its offsets."""
        states = [_state(tp, replica, isolation) for replica in self.replicas[tp]]
        if isolation == LOG_END:
            return max(states, key=lambda s: (s.log_end_offset, s.high_watermark))
        best = max(states, key=lambda s: (s.high_watermark, s.log_end_offset))
        if isolation == READ_COMMITTED:
            best.last_stable_offset = last_stable_offset(best.reader, best.log_start_offset,
                                                         best.high_watermark)
            best.latest = best.last_stable_offset
        return best


def find_log_dirs(paths: tuple[str, ...]) -> list[str]:
    """Every log dir at or below the given paths, in path order, each once."""
    found: list[str] = []
    for path in paths:
        if not os.path.exists(path):
            raise StromSparkError(f"path {path} does not exist")
        if not os.path.isdir(path):
            raise StromSparkError(f"path {path} is not a directory (give a log dir or a data dir)")
        dirs = _search(os.path.abspath(path), _SEARCH_DEPTH)
        if not dirs:
            raise StromSparkError(
                f"path {path} holds no Strom or Kafka log dir (no meta.properties, "
                f"{REPLICATION_CHECKPOINT} or <topic>-<partition> directory within "
                f"{_SEARCH_DEPTH} levels)"
            )
        found.extend(d for d in dirs if d not in found)
    return found


def _search(path: str, depth: int) -> list[str]:
    if _is_log_dir(path):
        return [path]
    if depth == 0:
        return []
    try:
        names = sorted(os.listdir(path))
    except OSError:
        return []
    return [d for name in names if os.path.isdir(os.path.join(path, name))
            for d in _search(os.path.join(path, name), depth - 1)]


def _is_log_dir(path: str) -> bool:
    try:
        names = os.listdir(path)
    except OSError:
        return False
    if META_PROPERTIES in names or REPLICATION_CHECKPOINT in names:
        return True
    return any(_is_partition_dir(os.path.join(path, n), n) for n in names)


def _is_partition_dir(path: str, name: str) -> bool:
    tp = parse_partition_dir(name)
    if tp is None or tp[0] == METADATA_TOPIC or not os.path.isdir(path):
        return False
    return any(n.endswith(".log") for n in os.listdir(path))


def _replicas_in(log_dir: str) -> list[tuple[TopicPartition, Replica]]:
    high_watermarks = _checkpoint(log_dir, REPLICATION_CHECKPOINT)
    log_starts = _checkpoint(log_dir, LOG_START_CHECKPOINT)
    found = []
    for name in sorted(os.listdir(log_dir)):
        tp = parse_partition_dir(name)
        path = os.path.join(log_dir, name)
        if tp is None or tp[0] == METADATA_TOPIC or not os.path.isdir(path):
            continue
        found.append((tp, Replica(log_dir, path, high_watermarks.get(tp), log_starts.get(tp, 0))))
    return found


def _checkpoint(log_dir: str, name: str) -> dict[TopicPartition, int]:
    try:
        return read_offset_checkpoint(os.path.join(log_dir, name))
    except ValueError as e:
        raise StromSparkError(f"{e}") from None


def _state(tp: TopicPartition, replica: Replica, isolation: str) -> PartitionState:
    reader = _open(replica.dir)
    log_end = reader.log_end_offset()
    first_base = reader.base_offsets[0] if reader.base_offsets else replica.log_start_offset
    log_end = first_base if log_end is None else log_end
    log_start = min(max(replica.log_start_offset, first_base), log_end)
    hw = log_start if replica.high_watermark is None else replica.high_watermark
    hw = min(max(hw, log_start), log_end)
    latest = log_end if isolation == LOG_END else hw
    return PartitionState(tp[0], tp[1], replica, reader, log_start, hw, log_end, latest)


def _open(partition_dir: str) -> PartitionReader:
    """A reader over the segments as they are now. Retention may delete a segment between
    listing the directory and reading its size: list again."""
    for _ in range(3):
        try:
            return PartitionReader(partition_dir)
        except FileNotFoundError:
            continue
    return PartitionReader(partition_dir)
