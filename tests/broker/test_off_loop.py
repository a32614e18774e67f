"""The broker's waits on the disk run in a worker thread, as Kafka's run on its kafka-scheduler
thread, so a slow disk never stalls the event loop that answers produce and fetch requests: the
periodic offset checkpoints (replication-offset-checkpoint every
replica.high.watermark.checkpoint.interval.ms, the recovery points and log start offsets every
minute), the flush of what a log rolled away from, which moves its recovery point, and the
flushes a topic's flush.ms asks for. The faults
here are a slow disk (fsync that takes 0.3 s) and a failing one (fsync raising EIO)."""
from __future__ import annotations

import asyncio
import errno
import os
import threading
import time

import pytest

from broker.off_loop import flush_dirty_off_loop, flush_rolled_off_loop, write_off_loop
from engine.checkpoint import read_offset_checkpoint
from engine.config import LogConfig
from engine.log_dir_failure import KafkaStorageError, LogDirFailureChannel
from engine.manager import LOG_START_CHECKPOINT, RECOVERY_POINT_CHECKPOINT, REPLICATION_CHECKPOINT, LogManager
from tests.broker.replica_nodes import records

SLOW_FSYNC_S = 0.3


@pytest.fixture
def logs(tmp_path):
    reports: list[tuple[str, str]] = []
    manager = LogManager([str(tmp_path / "data")], cluster_id="c", node_id=1,
                         failure_channel=LogDirFailureChannel(lambda d, m: reports.append((d, m))))
    manager.startup()
    manager.reports = reports
    log = manager.get_or_create_log("t", 0)
    log.append_as_leader(records(7), 0)
    log.update_high_watermark(5)
    yield manager
    manager.shutdown()


# Set while _ticks_while's ticker runs: each tick of the event loop sets it.
_loop_ticked: threading.Event | None = None
TICK_WAIT_S = 30  # a bound on waiting for the loop's next tick, not a measurement


class FsyncCalls(list):
    """The thread of each fsync call, and in ``loop_ran`` (while a ticker runs) whether the
    event loop ticked while that fsync was under way."""

    def __init__(self):
        super().__init__()
        self.loop_ran: list[bool] = []

    def clear(self):
        super().clear()
        self.loop_ran.clear()


@pytest.fixture
def slow_disk(monkeypatch):
    """fsync takes SLOW_FSYNC_S; records the thread of each call and, under _ticks_while,
    whether the loop ticked before the call returned. An fsync on the loop's thread, or one
    the loop waits for synchronously, sees no tick: it waits TICK_WAIT_S and records False."""
    real = os.fsync
    threads = FsyncCalls()

    def fsync(fd):
        threads.append(threading.current_thread())
        ticked = _loop_ticked
        if ticked is not None:
            ticked.clear()
        time.sleep(SLOW_FSYNC_S)
        if ticked is not None:
            threads.loop_ran.append(ticked.wait(TICK_WAIT_S))
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    return threads


async def _ticks_while(coro) -> float:
    """Run ``coro`` while a task ticks the loop every 10 ms; how long ``coro`` took."""
    global _loop_ticked
    loop = asyncio.get_running_loop()
    ticked = threading.Event()

    async def tick():
        while True:
            ticked.set()
            await asyncio.sleep(0.01)

    ticker = loop.create_task(tick())
    await asyncio.sleep(0.02)
    _loop_ticked = ticked
    t0 = loop.time()
    try:
        await coro
    finally:
        _loop_ticked = None
        ticker.cancel()
    return loop.time() - t0


def _loop_ran_during_each(fsyncs: FsyncCalls) -> bool:
    return bool(fsyncs.loop_ran) and all(fsyncs.loop_ran)


def test_the_high_watermark_checkpoint_fsyncs_off_the_event_loop(logs, slow_disk):
    took = asyncio.run(_ticks_while(write_off_loop(logs, REPLICATION_CHECKPOINT)))
    assert took >= 2 * SLOW_FSYNC_S, "the file and its directory are both fsynced"
    assert slow_disk and all(t is not threading.main_thread() for t in slow_disk)
    assert _loop_ran_during_each(slow_disk), "the loop waited for an fsync"
    d = logs.log_dirs[0]
    assert read_offset_checkpoint(os.path.join(d, REPLICATION_CHECKPOINT)) == {("t", 0): 5}
    assert not os.path.exists(os.path.join(d, REPLICATION_CHECKPOINT + ".tmp"))


def test_each_checkpoint_writes_what_its_offsets_were_when_it_began(logs):
    log = logs.get_log("t", 0)
    log.maybe_increment_log_start_offset(2)
    log.flush()

    async def write_all():
        for name in (REPLICATION_CHECKPOINT, RECOVERY_POINT_CHECKPOINT, LOG_START_CHECKPOINT):
            await write_off_loop(logs, name)

    asyncio.run(write_all())
    d = logs.log_dirs[0]
    assert read_offset_checkpoint(os.path.join(d, REPLICATION_CHECKPOINT)) == {("t", 0): 5}
    assert read_offset_checkpoint(os.path.join(d, RECOVERY_POINT_CHECKPOINT)) == {("t", 0): 7}
    assert read_offset_checkpoint(os.path.join(d, LOG_START_CHECKPOINT)) == {("t", 0): 2}


def test_a_cancelled_checkpoint_ends_only_once_its_write_is_done(logs, slow_disk):
    """Stopping the broker cancels the periodic task, then writes the checkpoints once more at
    shutdown: the thread's write must be over by then, or the two would share the .tmp file."""
    d = logs.log_dirs[0]
    path = os.path.join(d, REPLICATION_CHECKPOINT)

    async def cancel_midway():
        task = asyncio.get_running_loop().create_task(write_off_loop(logs, REPLICATION_CHECKPOINT))
        await asyncio.sleep(SLOW_FSYNC_S / 3)
        assert slow_disk, "the write has begun"
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return os.path.exists(path + ".tmp"), read_offset_checkpoint(path)

    tmp_left, written = asyncio.run(cancel_midway())
    assert not tmp_left and written == {("t", 0): 5}


@pytest.fixture
def failing_disk(logs, monkeypatch):
    """Call it and fsync raises EIO from then on; it returns the threads that report a dir
    offline to the failure channel."""
    def fail() -> list[threading.Thread]:
        caller: list[threading.Thread] = []
        channel = logs.failure_channel
        real_add = channel.maybe_add_offline_log_dir

        def add(*args):
            caller.append(threading.current_thread())
            return real_add(*args)

        def fsync(fd):
            raise OSError(errno.EIO, "Input/output error")

        monkeypatch.setattr(channel, "maybe_add_offline_log_dir", add)
        monkeypatch.setattr(os, "fsync", fsync)
        return caller

    return fail


def test_a_checkpoint_whose_fsync_fails_takes_the_dir_offline_from_the_loop(logs, failing_disk, monkeypatch):
    caller = failing_disk()
    with pytest.raises(KafkaStorageError):
        asyncio.run(write_off_loop(logs, REPLICATION_CHECKPOINT))
    d = logs.log_dirs[0]
    assert caller == [threading.main_thread()], "the failure channel is the loop's, never a thread's"
    assert [r[0] for r in logs.reports] == [d]
    assert "writing replication-offset-checkpoint" in logs.reports[0][1]
    assert "Input/output error" in logs.reports[0][1]
    monkeypatch.undo()
    # An offline dir is written no more (Kafka checkpoints its live log dirs only).
    asyncio.run(write_off_loop(logs, REPLICATION_CHECKPOINT))
    assert not os.path.exists(os.path.join(d, REPLICATION_CHECKPOINT))


# ---- flushing what a roll left behind -----------------------------------------------------------


def _rolled(logs: LogManager):
    log = logs.get_or_create_log("r", 0, LogConfig(segment_bytes=500))
    for _ in range(12):
        log.append_as_leader(records(7), 0)
    assert len(log.segments) >= 3 and log.recovery_point == 0
    return log


def test_a_rolled_log_is_flushed_off_the_event_loop_and_its_recovery_point_follows(logs, slow_disk):
    log = _rolled(logs)
    slow_disk.clear()  # creating the log wrote its partition.metadata
    moved = []

    async def flush():
        moved.append(await flush_rolled_off_loop(logs))

    took = asyncio.run(_ticks_while(flush()))
    assert moved == [1], "the log that rolled; the other never did"
    assert log.recovery_point == log.active_segment.base_offset
    assert logs.get_log("t", 0).recovery_point == 0
    assert took >= SLOW_FSYNC_S and all(t is not threading.main_thread() for t in slow_disk)
    assert _loop_ran_during_each(slow_disk), "the loop waited for an fsync"
    assert asyncio.run(flush_rolled_off_loop(logs)) == 0, "flushed up to its roll already"
    assert logs.take_rolled() == []


def test_a_cancelled_flush_ends_once_its_fsyncs_are_done_and_hands_its_log_back(logs, slow_disk):
    log = _rolled(logs)
    slow_disk.clear()

    async def cancel_midway():
        task = asyncio.get_running_loop().create_task(flush_rolled_off_loop(logs))
        await asyncio.sleep(SLOW_FSYNC_S / 3)
        assert slow_disk, "the flush has begun"
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return len(slow_disk)

    fsyncs = asyncio.run(cancel_midway())
    time.sleep(2 * SLOW_FSYNC_S)
    assert fsyncs == len(slow_disk), "no fsync of it runs on after the job ended"
    assert log.recovery_point == 0
    assert asyncio.run(flush_rolled_off_loop(logs)) == 1, "the next round flushes it"
    assert log.recovery_point == log.active_segment.base_offset


def test_a_failed_flush_takes_the_dir_offline_from_the_loop_and_keeps_the_recovery_point(logs, failing_disk):
    log = _rolled(logs)
    caller = failing_disk()
    assert asyncio.run(flush_rolled_off_loop(logs)) == 0
    assert caller == [threading.main_thread()]
    assert log.recovery_point == 0
    assert "flushing r-0" in logs.reports[0][1] and "Input/output error" in logs.reports[0][1]


# ---- flush.ms ---------------------------------------------------------------------------------


def test_flush_ms_flushes_off_the_event_loop_up_to_the_log_end(logs, slow_disk):
    timed = logs.get_or_create_log("f", 0, LogConfig(flush_ms=1000))
    timed.append_as_leader(records(5), 0)
    slow_disk.clear()
    now = timed.last_flush_ms
    assert asyncio.run(flush_dirty_off_loop(logs, lambda: now + 999)) == 0, "not due yet"
    assert not slow_disk
    moved = []

    async def flush():
        moved.append(await flush_dirty_off_loop(logs, lambda: now + 1000))

    took = asyncio.run(_ticks_while(flush()))
    assert moved == [1], "only the log with a flush.ms: the other keeps Kafka's default (never)"
    assert timed.recovery_point == timed.log_end_offset == 5
    assert timed.last_flush_ms == now + 1000 and timed.unflushed_messages == 0
    assert logs.get_log("t", 0).recovery_point == 0
    assert took >= SLOW_FSYNC_S and all(t is not threading.main_thread() for t in slow_disk)
    assert _loop_ran_during_each(slow_disk), "the loop waited for an fsync"
    slow_disk.clear()
    assert asyncio.run(flush_dirty_off_loop(logs, lambda: now + 5000)) == 0, "nothing new to flush"
    assert not slow_disk


def test_a_failed_flush_ms_flush_takes_the_dir_offline_from_the_loop(logs, failing_disk):
    timed = logs.get_or_create_log("f", 0, LogConfig(flush_ms=0))
    timed.append_as_leader(records(5), 0)
    caller = failing_disk()
    assert asyncio.run(flush_dirty_off_loop(logs, lambda: timed.last_flush_ms + 1)) == 0
    assert caller == [threading.main_thread()]
    assert timed.recovery_point == 0
    assert "flushing f-0" in logs.reports[0][1]
