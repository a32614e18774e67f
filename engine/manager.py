"""LogManager: the partitions of one node across its log.dirs.

Each log dir holds (as Apache Kafka lays it out)::

    meta.properties                      cluster.id, node.id, directory.id, version=1
    .lock                                flock'd while a process owns the dir
    .kafka_cleanshutdown                 present only between a clean shutdown and the next start
    replication-offset-checkpoint        high watermarks
    recovery-point-offset-checkpoint     offsets below which everything was fsynced
    log-start-offset-checkpoint          log start offsets (raised by retention/DeleteRecords)
    <topic>-<partition>/                 one Log each
    <topic>-<partition>.<id>-delete/     a deleted partition awaiting removal
    <topic>-<partition>.<id>-future/     the future log of a replica moving into this dir
    <topic>-<partition>.<id>-replaced/   a current log its future replaced, awaiting removal
    <topic>-<partition>.<id>-stray/      a log the metadata did not place here at startup, kept
                                         aside, never loaded nor deleted (an operator's to remove)

Startup loads every partition, recovering those of a dir without the clean-shutdown marker
past their recovery points, then removes the marker. Shutdown flushes every log, writes the
three checkpoints, closes the logs and writes the marker last.
"""
from __future__ import annotations

import fcntl
import json
import logging
import os
import re
import shutil
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from engine.checkpoint import (
    new_uuid,
    read_offset_checkpoint,
    read_partition_metadata,
    read_properties,
    write_atomically,
    write_meta_properties,
    write_offset_checkpoint,
    write_partition_metadata,
)
from engine.cleaner import (
    CleanAborted,
    Cleaner,
    CleanResult,
    clean_filthiest,
    update_cleaner_checkpoint,
)
from engine.cleaner import checkpoint_path as cleaner_checkpoint_path
from engine.config import LogConfig
from engine.errors import CorruptRecordError, InvalidIndexError, LogDirError
from engine.log import PARTITION_METADATA, Log
from engine.log_dir_failure import KafkaStorageError, LogDirFailureChannel
from engine.reader import parse_partition_dir

log = logging.getLogger(__name__)

META_PROPERTIES = "meta.properties"
LOCK_FILE = ".lock"
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
REPLICATION_CHECKPOINT = "replication-offset-checkpoint"
RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_CHECKPOINT = "log-start-offset-checkpoint"
CLEANER_CHECKPOINT = "cleaner-offset-checkpoint"  # the log cleaner's first dirty offsets
# What each offset checkpoint records of a log.
_CHECKPOINTED = {
    REPLICATION_CHECKPOINT: lambda lg: lg.high_watermark,
    RECOVERY_POINT_CHECKPOINT: lambda lg: lg.recovery_point,
    LOG_START_CHECKPOINT: lambda lg: lg.log_start_offset,
}
DELETE_SUFFIX = "-delete"
FUTURE_SUFFIX = "-future"
REPLACED_SUFFIX = "-replaced"
STRAY_SUFFIX = "-stray"
_SUFFIXED_DIR = re.compile(r"^(?P<name>.+-\d+)\.[0-9a-f]{32}(?P<suffix>-future|-replaced)$")
METADATA_PARTITION_DIR = "__cluster_metadata-0"

TopicPartition = tuple[str, int]


def format_log_dir(path: str, cluster_id: str, node_id: int, directory_id: str | None = None) -> str:
    """Write meta.properties into a new or empty log dir; returns its directory id."""
    os.makedirs(path, exist_ok=True)
    meta = os.path.join(path, META_PROPERTIES)
    if os.path.exists(meta):
        raise LogDirError(f"{path} is already formatted ({META_PROPERTIES} exists)")
    directory_id = directory_id or new_uuid()
    write_meta_properties(meta, cluster_id, node_id, directory_id)
    return directory_id


def read_meta_properties(path: str) -> dict[str, str] | None:
    meta = os.path.join(path, META_PROPERTIES)
    if not os.path.exists(meta):
        return None
    props = read_properties(meta)
    for key in ("version", "cluster.id", "node.id"):
        if key not in props:
            raise LogDirError(f"{meta}: missing {key}")
    if props["version"] != "1":
        raise LogDirError(f"{meta}: unsupported version {props['version']} (expected 1)")
    return props


@dataclass
class _OpenedDir:
    """What ``LogManager.open`` read of a log dir for ``load``."""
    hws: dict
    recovery_points: dict
    log_starts: dict
    partitions: list  # (topic-partition, path, topic id)
    futures: list | None = None  # (topic-partition, path, topic id) of "-future" dirs
    replaced: list | None = None  # (topic-partition, path) of "-replaced" dirs


class LogManager:
    def __init__(self, log_dirs: list[str], default_config: LogConfig | None = None,
                 *, cluster_id: str | None = None, node_id: int | None = None,
                 failure_channel: LogDirFailureChannel | None = None):
        if not log_dirs:
            raise LogDirError("log.dirs is empty")
        self.log_dirs = [os.path.abspath(d) for d in log_dirs]
        self.default_config = default_config or LogConfig()
        # told how long each log's flush took, in ms (the broker's LogFlushRateAndTimeMs)
        self.on_flush: Callable[[float], None] | None = None
        self.cluster_id = cluster_id
        self.node_id = node_id
        self.logs: dict[TopicPartition, Log] = {}
        # The future logs of replicas moving between log dirs (AlterReplicaLogDirs), each in
        # its target dir as <topic>-<partition>.<id>-future until it replaces the current log.
        self.future_logs: dict[TopicPartition, Log] = {}
        self._copying: set[Log] = set()  # future logs a worker thread is appending to
        self._discard_after_copy: set[Log] = set()
        self._replaced: list[tuple[int, Log, str]] = []  # (due ms, log, its -replaced dir)
        self._rolled: set[Log] = set()  # rolled since take_rolled: their flush is due
        self._locks: list[int] = []
        self.had_clean_shutdown: dict[str, bool] = {}
        self.clean_shutdown_epochs: dict[str, int] = {}  # brokerEpoch of the marker, -1 if none
        self._opened: dict[str, _OpenedDir] = {}  # open() read them; load() loads their logs
        # Storage operations while serving take a failing dir offline (engine/log_dir_failure.py).
        self.failure_channel = failure_channel or LogDirFailureChannel()
        # The log cleaner (clean_once): the partitions it is cleaning, and those it gave up on
        # (Kafka's LogCleanerManager in-progress and uncleanable partitions).
        self.cleaning: set[TopicPartition] = set()
        self.uncleanable: set[TopicPartition] = set()
        # One lock per log dir around each read-modify-write of its cleaner-offset-checkpoint
        # (the cleaner's thread and delete_log on the logs' thread both rewrite it).
        self._cleaner_checkpoint_locks = {d: threading.Lock() for d in self.log_dirs}

    # ---- startup -------------------------------------------------------------------------

    def startup(self, topic_configs: dict[str, LogConfig] | None = None) -> None:
        """``open`` then ``load``."""
        self.open()
        self.load(topic_configs)

    def open(self) -> None:
        """Lock each log dir, check (or write) its meta.properties and read its small files (the
        clean-shutdown marker, for ``previous_broker_epoch``; the offset checkpoints; each
        partition's partition.metadata), so that a corrupt one stops the broker at once, naming
        it; no log is loaded yet: a broker loads its logs once it has their topics' configs
        from the metadata log (``load``), as Kafka's LogManager starts after the broker caught
        up with it."""
        for d in self.log_dirs:
            os.makedirs(d, exist_ok=True)
            self._lock(d)
            self._check_meta_properties(d)
            marker = os.path.join(d, CLEAN_SHUTDOWN_FILE)
            clean = os.path.exists(marker)
            self.had_clean_shutdown[d] = clean
            self.clean_shutdown_epochs[d] = _clean_shutdown_epoch(marker) if clean else -1
            self._opened[d] = self._read_dir(d)
        self._resolve_replaced()

    def _resolve_replaced(self) -> None:
        """A crash inside ``replace_current_with_future``: a "-replaced" dir whose future took
        the partition's name is deleted; one whose future did not is the current log again
        (renamed back), its future resumed from the "-future" dir."""
        live = {tp for opened in self._opened.values() for tp, _, _ in opened.partitions}
        for d, opened in self._opened.items():
            for tp, path in opened.replaced or []:
                if tp in live:
                    shutil.rmtree(path, ignore_errors=True)
                    continue
                back = os.path.join(d, f"{tp[0]}-{tp[1]}")
                os.rename(path, back)
                live.add(tp)
                opened.partitions.append(
                    (tp, back, read_partition_metadata(os.path.join(back, PARTITION_METADATA))))

    def load(self, topic_configs: dict[str, LogConfig] | None = None) -> None:
        """Load (and recover) every log of the opened dirs, each with its topic's config from
        ``topic_configs`` (the broker default for a topic not there): recovery reads a
        compacted log's offset gaps as the cleaner's, a delete-policy log's as corruption."""
        topic_configs = topic_configs or {}
        for d in self.log_dirs:
            self._load_dir(d, topic_configs)

    def _lock(self, d: str) -> None:
        fd = os.open(os.path.join(d, LOCK_FILE), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise LogDirError(f"{d} is in use by another process (its {LOCK_FILE} is held)") from None
        self._locks.append(fd)

    def _check_meta_properties(self, d: str) -> None:
        props = read_meta_properties(d)
        if props is None:
            if self.cluster_id is None or self.node_id is None:
                raise LogDirError(f"{d} is not formatted (no {META_PROPERTIES})")
            format_log_dir(d, self.cluster_id, self.node_id)
            return
        if self.cluster_id is None:
            self.cluster_id = props["cluster.id"]
        elif props["cluster.id"] != self.cluster_id:
            raise LogDirError(f"{d}: cluster.id {props['cluster.id']} does not match {self.cluster_id}")
        node_id = int(props["node.id"])
        if self.node_id is None:
            self.node_id = node_id
        elif node_id != self.node_id:
            raise LogDirError(f"{d}: node.id {node_id} does not match {self.node_id}")

    def _read_dir(self, d: str) -> _OpenedDir:
        """The small files of log dir ``d``: its offset checkpoints and, per partition dir,
        its path and topic id (directories being deleted go here, as Kafka's load removes them)."""
        partitions, futures, replaced = [], [], []
        for name in sorted(os.listdir(d)):
            path = os.path.join(d, name)
            if not os.path.isdir(path):
                continue
            if name.endswith(DELETE_SUFFIX):
                shutil.rmtree(path, ignore_errors=True)
                continue
            if name.endswith(STRAY_SUFFIX):
                log.warning("%s: a stray log, kept aside and not loaded", path)
                continue
            suffixed = _SUFFIXED_DIR.match(name)
            if suffixed is not None:
                tp = parse_partition_dir(suffixed.group("name"))
                if tp is not None and suffixed.group("suffix") == FUTURE_SUFFIX:
                    topic_id = read_partition_metadata(os.path.join(path, PARTITION_METADATA))
                    futures.append((tp, path, topic_id))
                elif tp is not None:
                    replaced.append((tp, path))
                continue
            tp = parse_partition_dir(name)
            if tp is None or name == METADATA_PARTITION_DIR:
                continue
            partitions.append((tp, path, read_partition_metadata(os.path.join(path, PARTITION_METADATA))))
        return _OpenedDir(hws=read_offset_checkpoint(os.path.join(d, REPLICATION_CHECKPOINT)),
                          recovery_points=read_offset_checkpoint(os.path.join(d, RECOVERY_POINT_CHECKPOINT)),
                          log_starts=read_offset_checkpoint(os.path.join(d, LOG_START_CHECKPOINT)),
                          partitions=partitions, futures=futures, replaced=replaced)

    def _load_dir(self, d: str, topic_configs: dict[str, LogConfig]) -> None:
        marker = os.path.join(d, CLEAN_SHUTDOWN_FILE)
        clean = self.had_clean_shutdown[d]
        opened = self._opened.pop(d)
        for tp, path, topic_id in opened.partitions:
            if tp in self.logs:
                raise LogDirError(f"{tp[0]}-{tp[1]} is in two log dirs: {self.logs[tp].dir} and {path}")
            self.logs[tp] = Log(
                path,
                topic_configs.get(tp[0], self.default_config),
                log_start_offset=opened.log_starts.get(tp, 0),
                recovery_point=opened.recovery_points.get(tp, 0),
                high_watermark=opened.hws.get(tp),
                had_clean_shutdown=clean,
                topic_id=topic_id,
                failure_channel=self.failure_channel,
            )
            self.logs[tp].on_roll = self._rolled.add
            self.logs[tp].on_flush = self._flush_took
        for tp, path, topic_id in opened.futures or []:
            if tp in self.future_logs:  # a second future of one partition: the first wins
                shutil.rmtree(path, ignore_errors=True)
                continue
            # No checkpoint covers a future log: it is recovered whole (nothing it holds was
            # acknowledged from it; the current log still has it all).
            self.future_logs[tp] = self._future_log(path, topic_configs.get(tp[0], self.default_config),
                                                    topic_id, tp)
        if clean:
            os.unlink(marker)

    # ---- partitions ----------------------------------------------------------------------

    def take_rolled(self) -> list[Log]:
        """The logs that rolled since the last call and are still served (their flush up to
        the roll is due: broker/off_loop.py); ``rolled_again`` hands back any not done."""
        rolled = [lg for lg in self._rolled if self.logs.get((lg.topic, lg.partition)) is lg]
        self._rolled.clear()
        return rolled

    def rolled_again(self, logs: list[Log]) -> None:
        self._rolled.update(logs)

    def get_log(self, topic: str, partition: int) -> Log | None:
        return self.logs.get((topic, partition))

    def get_or_create_log(self, topic: str, partition: int, config: LogConfig | None = None,
                          topic_id: str | None = None) -> Log:
        existing = self.logs.get((topic, partition))
        if existing is not None:
            return existing
        if parse_partition_dir(f"{topic}-{partition}") is None:
            raise ValueError(f"invalid topic name {topic!r}")
        d = min(self.log_dirs, key=lambda x: len(self.logs_in(x)))
        path = os.path.join(d, f"{topic}-{partition}")
        with self.failure_channel.guard(d, f"creating {topic}-{partition}"):
            os.makedirs(path, exist_ok=True)
            if topic_id is not None:
                write_partition_metadata(os.path.join(path, PARTITION_METADATA), topic_id)
            log_ = Log(path, config or self.default_config, topic_id=topic_id,
                       failure_channel=self.failure_channel)
        log_.on_roll = self._rolled.add
        log_.on_flush = self._flush_took
        self.logs[(topic, partition)] = log_
        return log_

    # ---- moving a replica between log dirs ----------------------------------------------------

    def _future_log(self, path: str, config: LogConfig, topic_id: str | None, tp: TopicPartition,
                    had_clean_shutdown: bool = False) -> Log:
        future = Log(path, config, had_clean_shutdown=had_clean_shutdown, topic_id=topic_id,
                     failure_channel=self.failure_channel)
        future.topic, future.partition = tp  # its dir's name is not the partition's
        return future

    def log_dir_of(self, log_dir: str) -> str | None:
        """``log_dir`` as one of this node's log dirs (absolute), None if it is not one."""
        path = os.path.abspath(log_dir)
        return path if path in self.log_dirs else None

    def future_dir_of(self, topic: str, partition: int) -> str | None:
        future = self.future_logs.get((topic, partition))
        return None if future is None else future.parent_dir

    def create_future_log(self, topic: str, partition: int, log_dir: str) -> Log | None:
        """The future log of ``topic``-``partition`` in ``log_dir`` (Kafka's
        maybeCreateFutureReplica): created empty as <topic>-<partition>.<id>-future unless the
        current log is already there (None: nothing to move) or the same future exists. A
        future in another dir is removed first (the move's target changed)."""
        tp = (topic, partition)
        current = self.logs.get(tp)
        d = self.log_dir_of(log_dir)
        if current is None or d is None or current.parent_dir == d:
            self.remove_future_log(topic, partition)
            return None
        future = self.future_logs.get(tp)
        if future is not None:
            if future.parent_dir == d:
                return future
            self.remove_future_log(topic, partition)
        path = os.path.join(d, f"{topic}-{partition}.{uuid.uuid4().hex}{FUTURE_SUFFIX}")
        with self.failure_channel.guard(d, f"creating the future log of {topic}-{partition}"):
            os.makedirs(path)
            if current.topic_id is not None:
                write_partition_metadata(os.path.join(path, PARTITION_METADATA), current.topic_id)
            future = self._future_log(path, current.config, current.topic_id, tp, had_clean_shutdown=True)
        self.future_logs[tp] = future
        return future

    def remove_future_log(self, topic: str, partition: int) -> bool:
        """Drop the partition's future log and its directory (the move is abandoned)."""
        future = self.future_logs.pop((topic, partition), None)
        if future is None:
            return False
        if future in self._copying:
            # a worker thread is appending to it: deleted once that append is done (end_copy)
            self._discard_after_copy.add(future)
            return True
        self._discard_future_log(future)
        return True

    def begin_copy(self, future: Log) -> None:
        """A worker thread appends to ``future`` until ``end_copy``: it is not closed meanwhile."""
        self._copying.add(future)

    def end_copy(self, future: Log) -> None:
        self._copying.discard(future)
        if future in self._discard_after_copy:
            self._discard_after_copy.discard(future)
            self._discard_future_log(future)

    def _discard_future_log(self, future: Log) -> None:
        """Close a future log no longer in ``future_logs`` and delete its directory."""
        future.close(snapshot=False)
        doomed = f"{future.dir[:-len(FUTURE_SUFFIX)]}{DELETE_SUFFIX}"
        with self.failure_channel.guard(future.parent_dir,
                                        f"deleting the future log of {future.topic}-{future.partition}"):
            os.rename(future.dir, doomed)
        shutil.rmtree(doomed, ignore_errors=True)

    def replace_current_with_future(self, topic: str, partition: int) -> Log:
        """The future log becomes the partition's log (Kafka's replaceCurrentWithFutureLog), on
        the logs' thread, once it holds what the current does. Crash-safe in three renames:
        the current dir to <name>.<id>-replaced, the future dir to <name>, then the replaced
        dir deleted; a restart between them finds the partition whole (``_resolve_replaced``).
        The new log keeps the current's high watermark and log start offset."""
        tp = (topic, partition)
        current, future = self.logs[tp], self.future_logs[tp]
        if future.log_end_offset != current.log_end_offset:
            raise LogDirError(f"{topic}-{partition}: the future log ends at {future.log_end_offset}, "
                              f"the current at {current.log_end_offset}")
        hw, start = current.high_watermark, current.log_start_offset
        with self.failure_channel.guard(future.parent_dir, f"replacing {topic}-{partition}"):
            future.flush()
            future.close()  # its producer snapshot at the log end: the reopened log loads it
        del self.future_logs[tp]
        replaced = f"{current.dir}.{uuid.uuid4().hex}{REPLACED_SUFFIX}"
        with self.failure_channel.guard(current.parent_dir, f"replacing {topic}-{partition}"):
            os.rename(current.dir, replaced)
            _fsync_dir(current.parent_dir)
        path = os.path.join(future.parent_dir, f"{topic}-{partition}")
        with self.failure_channel.guard(future.parent_dir, f"replacing {topic}-{partition}"):
            os.rename(future.dir, path)
            _fsync_dir(future.parent_dir)
            moved = Log(path, current.config, log_start_offset=start, recovery_point=future.log_end_offset,
                        high_watermark=hw, had_clean_shutdown=True, topic_id=current.topic_id,
                        failure_channel=self.failure_channel)
        moved.on_roll = self._rolled.add
        moved.on_flush = self._flush_took
        self.logs[tp] = moved
        self.uncleanable.discard(tp)
        # Reads under way (a fetch's FileSlice) keep the replaced log's files open until
        # file.delete.delay.ms has passed, as a deleted segment's (delete_replaced_logs).
        self._replaced.append((_wall_ms() + current.config.file_delete_delay_ms, current, replaced))
        return moved

    def delete_replaced_logs(self, now_ms: int | None = None, force: bool = False) -> int:
        """Close and delete the logs replaced by their future whose file.delete.delay.ms has
        passed (every one with ``force``); how many."""
        now_ms = _wall_ms() if now_ms is None else now_ms
        due = [entry for entry in self._replaced if force or entry[0] <= now_ms]
        self._replaced = [entry for entry in self._replaced if not (force or entry[0] <= now_ms)]
        for _, replaced_log, path in due:
            replaced_log.close_handlers()
            shutil.rmtree(path, ignore_errors=True)
        return len(due)

    def _flush_took(self, ms: float) -> None:
        if self.on_flush is not None:
            self.on_flush(ms)

    def delete_log(self, topic: str, partition: int) -> bool:
        """Rename the partition directory to ``<name>.<id>-delete`` (so a crash mid-delete
        never resurrects it) and remove it."""
        doomed = self._set_aside(topic, partition, DELETE_SUFFIX, "deleting")
        if doomed is None:
            return False
        shutil.rmtree(doomed, ignore_errors=True)
        return True

    def mark_stray(self, topic: str, partition: int) -> str | None:
        """Kafka's stray replica: the partition's log, which the metadata does not place on this
        broker at startup, renamed to ``<name>.<id>-stray`` and kept, never served nor deleted
        (what may be the only copy of its records is an operator's to remove). Its new path,
        or None when there was no such log."""
        return self._set_aside(topic, partition, STRAY_SUFFIX, "setting aside")

    def _set_aside(self, topic: str, partition: int, suffix: str, doing: str) -> str | None:
        """The partition's log (and any future of it) out of this manager, its directory renamed
        ``<name>.<id><suffix>``: the new path, or None when there was no such log."""
        self.remove_future_log(topic, partition)
        log_ = self.logs.pop((topic, partition), None)
        if log_ is None:
            return None
        log_.close(snapshot=suffix != DELETE_SUFFIX)
        self.uncleanable.discard((topic, partition))
        if os.path.exists(cleaner_checkpoint_path(log_.parent_dir)):
            with self.failure_channel.guard(log_.parent_dir, f"updating {CLEANER_CHECKPOINT}"), \
                    self.cleaner_checkpoint_lock(log_.parent_dir):
                update_cleaner_checkpoint(log_.parent_dir, {}, remove=[(topic, partition)])
        moved = f"{log_.dir}.{uuid.uuid4().hex}{suffix}"
        with self.failure_channel.guard(log_.parent_dir, f"{doing} {topic}-{partition}"):
            os.rename(log_.dir, moved)
        return moved

    # ---- periodic work -------------------------------------------------------------------

    def cleanup_logs(self, now_ms: int | None = None) -> int:
        """One retention pass over every log (log.retention.check.interval.ms). A log the
        cleaner is cleaning is skipped (Kafka's deletableLogs leaves it to the next pass)."""
        deleted = 0
        for tp, log_ in self.logs.items():
            if tp in self.cleaning:
                continue
            deleted += log_.delete_old_segments(now_ms)
            log_.delete_pending_segments(now_ms)
        self.delete_replaced_logs(now_ms)
        return deleted

    def cleaner_checkpoint_lock(self, log_dir: str) -> threading.Lock:
        """The lock of ``log_dir``'s cleaner-offset-checkpoint."""
        return self._cleaner_checkpoint_locks.setdefault(os.path.abspath(log_dir), threading.Lock())

    def clean_once(self, cleaner: Cleaner, now_ms: int,
                   on_survey: Callable[[float], None] | None = None) -> CleanResult | None:
        """One pass of Kafka's CleanerThread (log.cleaner.backoff.ms apart when it finds
        nothing): the filthiest compacted log of the online log dirs is cleaned, on the
        caller's thread (a worker thread; ``Cleaner.on_log_thread`` brings the swap back to
        the logs' thread, and takes the cleaner's snapshot of the log there first: segment
        list, dup'd fds, aborted-transaction entries, producers). A truncation or deletion
        of the log meanwhile aborts the clean (None, the log as it was). Retention skips the
        log meanwhile. A log whose batches do not parse is marked uncleanable (Kafka's
        markPartitionUncleanable) and skipped from then on; an OSError takes its log dir
        offline through the failure channel. ``on_survey``: clean_filthiest's, told the
        greatest dirty ratio of each pass. None when no log needed cleaning."""
        def candidates() -> list[Log]:
            return [lg for d in self.log_dirs if not self.failure_channel.is_offline(d)
                    for tp, lg in self.logs_in(d).items() if tp not in self.uncleanable]

        logs = cleaner.call_on_log_thread(candidates)  # self.logs changes on the logs' thread only
        chosen: list[TopicPartition] = []

        def mark(tp: TopicPartition) -> None:
            chosen.append(tp)
            self.cleaning.add(tp)

        try:
            return clean_filthiest(cleaner, logs, now_ms, self.uncleanable, on_choice=mark,
                                   checkpoint_lock=self.cleaner_checkpoint_lock, on_survey=on_survey)
        except CleanAborted as e:
            log.info("cleaning aborted: %s", e)
            return None
        except (CorruptRecordError, InvalidIndexError, ValueError) as e:
            for tp in chosen:
                log.error("%s-%d: marked uncleanable: %s", tp[0], tp[1], e)
                self.uncleanable.add(tp)
            return None
        except OSError as e:
            lg = self.logs.get(chosen[0]) if chosen else None
            if lg is None:
                raise
            raise self.failure_channel.maybe_add_offline_log_dir(
                lg.parent_dir, f"cleaning {lg.topic}-{lg.partition}", e) from e
        finally:
            for tp in chosen:
                self.cleaning.discard(tp)

    def due_for_flush(self, now_ms: int) -> list[Log]:
        """The logs a flush.ms asks to flush now (Kafka's flushDirtyLogs): something written
        past the recovery point, and flush.ms passed since the last flush."""
        return [log_ for log_ in self.logs.values()
                if log_.log_end_offset > log_.recovery_point
                and now_ms - log_.last_flush_ms >= log_.config.flush_ms]

    def remove_expired_producers(self, now_ms: int, expiration_ms: int) -> int:
        """One producer.id.expiration.ms pass over every log, leader or follower (Kafka's
        PeriodicProducerExpirationCheck); how many producers were forgotten."""
        return sum(log_.remove_expired_producers(now_ms, expiration_ms) for log_ in self.logs.values())

    def checkpoint_high_watermarks(self) -> None:
        self.checkpoint(REPLICATION_CHECKPOINT)

    def checkpoint_recovery_points(self) -> None:
        self.checkpoint(RECOVERY_POINT_CHECKPOINT)

    def checkpoint_log_start_offsets(self) -> None:
        self.checkpoint(LOG_START_CHECKPOINT)

    def checkpoint(self, name: str) -> None:
        """Write the offset checkpoint ``name`` of every online log dir, here and now (the
        broker's periodic writes go through broker/off_loop.py, off its event loop)."""
        for d, path, offsets in self.checkpoint_contents(name):
            with self.failure_channel.guard(d, f"writing {name}"):
                write_offset_checkpoint(path, offsets)

    def checkpoint_contents(self, name: str) -> Iterator[tuple[str, str, dict[TopicPartition, int]]]:
        """(log dir, file, offsets) of the offset checkpoint ``name`` of each online log dir, one
        dir at a time, each as its logs stand when it is reached; a dir taken offline is left
        as it is (Kafka checkpoints its live log dirs)."""
        for d in self.log_dirs:
            if not self.failure_channel.is_offline(d):
                yield d, *self._checkpoint_of(d, name)

    def _checkpoint_of(self, d: str, name: str) -> tuple[str, dict[TopicPartition, int]]:
        value = _CHECKPOINTED[name]
        return os.path.join(d, name), {tp: value(lg) for tp, lg in self.logs_in(d).items()}

    def logs_in(self, d: str) -> dict[TopicPartition, Log]:
        """The logs of log dir ``d``."""
        return {tp: lg for tp, lg in self.logs.items() if os.path.dirname(lg.dir) == d}

    def previous_broker_epoch(self) -> int:
        """The broker epoch of the last clean shutdown if every log dir had one and they agree
        (KIP-966: a clean restart keeps the broker's places as an eligible leader replica),
        else -1. Read at startup, before the markers are removed."""
        epochs = set(self.clean_shutdown_epochs.values())
        if len(epochs) != 1 or len(self.clean_shutdown_epochs) != len(self.log_dirs):
            return -1
        return epochs.pop()

    # ---- shutdown ------------------------------------------------------------------------

    def shutdown(self, broker_epoch: int = -1) -> None:
        """Kafka's LogManager.shutdown, one log dir at a time: a live dir's logs are flushed,
        its checkpoints written, its logs closed, then its clean-shutdown marker written. A dir
        that is offline, or fails on the way (it goes offline), gets nothing more written: its
        files are closed as they stand and, with no marker, recovered at the next start. It
        does not keep the other dirs from a clean shutdown."""
        marker = json.dumps({"version": 0, "brokerEpoch": broker_epoch}).encode()
        self.delete_replaced_logs(force=True)
        for future in self.future_logs.values():  # resumed from its dir at the next start
            future.close_handlers()
        self.future_logs.clear()
        for d in self.log_dirs:
            logs = self.logs_in(d).values()
            if not self.failure_channel.is_offline(d):
                try:
                    with self.failure_channel.guard(d, "shutting down"):
                        for log_ in logs:
                            log_.flush()
                        for name in _CHECKPOINTED:
                            write_offset_checkpoint(*self._checkpoint_of(d, name))
                        for log_ in logs:
                            log_.close()
                        write_atomically(os.path.join(d, CLEAN_SHUTDOWN_FILE), marker)
                    continue
                except KafkaStorageError:
                    pass  # offline now, and said so: closed below as an offline dir
            for log_ in logs:
                log_.close_handlers()
        self.logs.clear()
        for fd in self._locks:
            os.close(fd)
        self._locks.clear()


def _wall_ms() -> int:
    return int(time.time() * 1000)


def _fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _clean_shutdown_epoch(path: str) -> int:
    """brokerEpoch of a ``.kafka_cleanshutdown`` marker; -1 if it is empty or unreadable
    (older markers carry no JSON)."""
    try:
        with open(path, "rb") as f:
            value = json.loads(f.read() or b"{}").get("brokerEpoch", -1)
    except (OSError, ValueError, AttributeError):
        return -1
    return value if isinstance(value, int) else -1
