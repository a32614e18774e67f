"""The broker's waits on the disk, kept off its event loop: the periodic offset checkpoints,
the flushes of rolled segments and those a topic's flush.ms asks for, and the log cleaner.

Every replica.high.watermark.checkpoint.interval.ms (5 s) the broker writes each log dir's
replication-offset-checkpoint, and every minute its recovery-point-offset-checkpoint and
log-start-offset-checkpoint (engine/checkpoint.py: a .tmp file, fsync, rename, fsync of the
directory). When a log rolls, the segments before the new one are fsynced and the recovery
point moves to it (engine/log.py, ``Log.flush_plan``), as Kafka's roll schedules
flushUptoOffsetExclusive: recovery after a crash then starts at the last roll. An fsync takes
a millisecond on a quiet disk, tens of milliseconds on a busy one, and seconds for a gigabyte
segment just written; on the event loop each would stall every produce and fetch the broker
is answering, so they run in a worker thread, as Kafka's run on its kafka-scheduler thread.

What crosses to the thread is made on the loop and owned by the thread from then on: a fresh
dict of offsets and a path, or a FlushPlan with file descriptors of its own. What comes back
is the thread's OSError, if any, which the loop hands to the log dir failure channel (its
handler takes partitions offline and is the loop's alone), and a flushed plan, which the log
takes back on the loop (``Log.flushed``). One write or flush at a time. Cancelled (the broker
stopping), a job ends only once the write under way is done: the shutdown then flushes and
writes the same files from the loop, and two writers would share a checkpoint's .tmp file.
"""
from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from typing import Any

from engine.checkpoint import write_offset_checkpoint
from engine.cleaner import CleanAborted, Cleaner
from engine.log_dir_failure import KafkaStorageError
from engine.manager import LogManager


async def _in_thread(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)`` in the loop's worker threads; a cancel waits for it to end, then raises."""
    done = asyncio.get_running_loop().run_in_executor(None, fn, *args)
    try:
        return await asyncio.shield(done)
    except asyncio.CancelledError:
        await asyncio.wait([done])
        raise


async def write_off_loop(logs: LogManager, name: str) -> None:
    """Write the offset checkpoint ``name`` (engine/manager.py) of every online log dir, each
    with the offsets its logs have as its turn comes. A write that fails takes its dir offline
    and raises KafkaStorageError, as ``LogManager.checkpoint`` does."""
    for log_dir, path, offsets in logs.checkpoint_contents(name):
        try:
            await _in_thread(write_offset_checkpoint, path, offsets)
        except OSError as e:
            raise logs.failure_channel.maybe_add_offline_log_dir(log_dir, f"writing {name}", e) from e


async def _flush(logs: LogManager, log_: Any, upto: int, clock: Callable[[], int]) -> bool:
    """Flush ``log_`` up to ``upto`` in a worker thread, then move its recovery point on the
    loop; whether it moved. A flush that fails takes the log's dir offline."""
    try:
        plan = log_.flush_plan(upto)
    except KafkaStorageError:
        return False  # its dir is offline now: the failure channel has said so
    if plan is None:
        return False
    try:
        await _in_thread(plan.run)
    except OSError as e:
        logs.failure_channel.maybe_add_offline_log_dir(
            log_.parent_dir, f"flushing {os.path.basename(log_.dir)}", e)
        return False
    before = log_.recovery_point
    log_.flushed(plan, clock())
    return log_.recovery_point > before


async def flush_rolled_off_loop(logs: LogManager, now_ms: Callable[[], int] | None = None) -> int:
    """Flush every log that rolled since the last call (``LogManager.take_rolled``) up to its
    last roll (``Log.flush_wanted``) and move its recovery point there; how many moved. A log
    whose flush fails takes its dir offline; the others go on. Cancelled, the logs not done
    yet are handed back for the next call."""
    clock = now_ms or _wall_clock_ms
    rolled = logs.take_rolled()
    moved = 0
    try:
        while rolled:
            log_ = rolled[-1]
            if not logs.failure_channel.is_offline(log_.parent_dir):
                moved += await _flush(logs, log_, log_.flush_wanted, clock)
            rolled.pop()
    finally:
        logs.rolled_again(rolled)
    return moved


async def flush_dirty_off_loop(logs: LogManager, now_ms: Callable[[], int] | None = None) -> int:
    """Flush every log its flush.ms says is due (``LogManager.due_for_flush``) up to its log
    end offset, as Kafka's scheduler does every log.flush.scheduler.interval.ms; how many
    recovery points moved. flush.messages is not this: an append that reaches it flushes at
    once, on the loop, as in Kafka."""
    clock = now_ms or _wall_clock_ms
    moved = 0
    for log_ in logs.due_for_flush(clock()):
        if not logs.failure_channel.is_offline(log_.parent_dir):
            moved += await _flush(logs, log_, log_.log_end_offset, clock)
    return moved


def _wall_clock_ms() -> int:
    return int(time.time() * 1000)


class CleanerThread:
    """Kafka's CleanerThread (log.cleaner.enable): ``LogManager.clean_once`` in a worker
    thread, again at once after a clean, log.cleaner.backoff.ms later when nothing needed
    cleaning. The cleaner reads and writes its own files off the loop; what touches a Log (the
    choice of log, the snapshot of its segments, each group's swap) it hands back to the loop
    and waits for (``_on_loop``). Stopping sets ``stopping`` first, so the clean under way
    aborts at its next visit to the loop, and then waits for the thread, so the logs are never
    closed under a swap."""

    def __init__(self, logs: LogManager, config: Any, clock: Callable[[], int] = _wall_clock_ms) -> None:
        self.logs = logs
        self.clock = clock
        self.stopping = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self.reconfigure(config)
        self._running: asyncio.Future | None = None
        # The last clean's (Kafka's lastStats): its time in seconds and its bytes read and
        # written, read by the LogCleaner gauges (cleaner_values).
        self.last_clean_s = 0.0
        self.last_bytes_read = self.last_bytes_written = 0
        # The last pass's greatest dirty ratio (Kafka's dirtiestLogCleanableRatio), set from the
        # cleaner's thread: one float assigned, read by the LogCleanerManager gauge.
        self.max_dirty_ratio = 0.0

    def reconfigure(self, config: Any) -> None:
        """The cleaner's properties (log.cleaner.dedupe.buffer.size, .threads, .io.buffer.size,
        .io.buffer.load.factor, .io.max.bytes.per.second, .backoff.ms), read from ``config`` by
        name: a new Cleaner, used from the next pass (the one under way finishes with the old),
        as Kafka's LogCleaner.reconfigure restarts its cleaner threads. The offset map is each
        thread's share of the dedupe buffer."""
        self.backoff_s = config["log.cleaner.backoff.ms"] / 1000
        self.cleaner = Cleaner(
            dedupe_buffer_size=config["log.cleaner.dedupe.buffer.size"],
            threads=config["log.cleaner.threads"],
            load_factor=config["log.cleaner.io.buffer.load.factor"],
            io_buffer_size=config["log.cleaner.io.buffer.size"],
            io_max_bytes_per_second=config["log.cleaner.io.max.bytes.per.second"],
            on_log_thread=self._on_loop,
        )

    def _on_loop(self, fn: Callable[[], Any]) -> Any:
        """Run ``fn`` on the loop from the cleaner's thread; its exception comes back here."""
        if self.stopping or self._loop is None:
            raise CleanAborted("the broker is stopping")

        async def call() -> Any:
            if self.stopping:
                raise CleanAborted("the broker is stopping")
            return fn()

        return asyncio.run_coroutine_threadsafe(call(), self._loop).result()

    async def run(self) -> None:
        self._loop = asyncio.get_running_loop()
        while not self.stopping:
            started = time.monotonic()
            self._running = self._loop.run_in_executor(None, self.logs.clean_once, self.cleaner, self.clock(),
                                                       self._surveyed)
            try:
                result = await asyncio.shield(self._running)
            except KafkaStorageError:
                result = None  # the failure channel has taken the dir offline
            if result is not None:
                self.last_clean_s = time.monotonic() - started
                stats = result.stats
                self.last_bytes_read, self.last_bytes_written = stats.bytes_read, stats.bytes_written
            if result is None:
                await asyncio.sleep(self.backoff_s)

    def _surveyed(self, max_dirty_ratio: float) -> None:
        self.max_dirty_ratio = max_dirty_ratio

    async def stop(self) -> None:
        self.stopping = True
        if self._running is not None and not self._running.done():
            await asyncio.wait([self._running])


CLEAN_TIME = "kafka_log_logcleaner_max_clean_time_secs"
RECOPY_PERCENT = "kafka_log_logcleaner_cleaner_recopy_percent"
MAX_DIRTY_PERCENT = "kafka_log_logcleanermanager_max_dirty_percent"


def cleaner_values(thread: CleanerThread | None) -> dict[str, float]:
    """kafka.log:type=LogCleaner's gauges of the last clean, as the JMX exporter with Strimzi's
    rules names them: max-clean-time-secs (its time, the greatest over the one cleaner thread)
    and cleaner-recopy-percent (its bytes written as a percentage of its bytes read, an
    integer as Kafka's), and kafka.log:type=LogCleanerManager's max-dirty-percent (the last
    pass's greatest dirty ratio as an integer percentage, cleaned or not). Zero before a clean
    (a pass), and without a cleaner (log.cleaner.enable=false)."""
    if thread is None:
        return {CLEAN_TIME: 0.0, RECOPY_PERCENT: 0, MAX_DIRTY_PERCENT: 0}
    read = thread.last_bytes_read
    return {CLEAN_TIME: thread.last_clean_s,
            RECOPY_PERCENT: 100 * thread.last_bytes_written // read if read else 0,
            MAX_DIRTY_PERCENT: int(100 * thread.max_dirty_ratio)}
