"""Moving replicas between a broker's log dirs (Kafka's ReplicaAlterLogDirsManager and its
threads): the asyncio edge of engine/log_move.py's decisions.

One task per moving partition. Each round, on the loop, it looks at the current log and the
future log (LogManager.future_logs) and takes engine/log_move.py's next step: a copy reads
whole batches from the current log on the loop (a FileSlice: fd, position, size) and, in a
worker thread, reads those bytes and appends them to the future log as a follower would
(offsets, epochs and producer state as they are); only the move touches the future log, so
the thread owns it while it writes. Truncations and a new log start are followed on the loop.
When the future ends where the current does, the swap (LogManager.replace_current_with_future)
runs on the loop in the same round as that check, so nothing appended to the current log is
left behind; ``on_swapped`` then hands the new log to its partition.

The copy's bytes per second stay within replica.alter.log.dirs.io.max.bytes.per.second
(``rate()``, None: unbounded), as Kafka's quota of its future-replica fetcher.
"""
from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from engine.log_dir_failure import KafkaStorageError
from engine.log_move import COPY, RESTART, SWAP, TRUNCATE, copy_delay_ms, next_step

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
CHUNK_BYTES = 1 << 20  # one read of the current log (Kafka's replica.fetch.max.bytes)
IDLE_S = 0.05  # nothing to copy yet: look again


def copy_chunk(current: Any, future: Any, max_bytes: int) -> int:
    """Append to ``future`` the batches of ``current`` from the future's end, at most
    ``max_bytes`` (one batch at least); the bytes copied. Runs wholly on the caller's thread
    (the engine tests call it inline)."""
    found = current.read(future.log_end_offset, max_bytes)
    if found.records is None:
        return 0
    data = found.records.read()
    future.append_as_follower(data)
    return len(data)


async def _copy_off_loop(logs: Any, current: Any, future: Any, max_bytes: int) -> int:
    found = current.read(future.log_end_offset, max_bytes)  # on the loop: the log's segments
    if found.records is None:
        return 0
    records = found.records

    def work() -> int:
        data = records.read()
        future.append_as_follower(data)
        return len(data)

    logs.begin_copy(future)  # a removal of the future meanwhile waits for end_copy
    done = asyncio.get_running_loop().run_in_executor(None, work)
    try:
        return await asyncio.shield(done)
    except asyncio.CancelledError:
        await asyncio.wait([done])  # the thread owns the future log until it is done
        raise
    finally:
        logs.end_copy(future)


class LogDirMover:
    def __init__(self, logs: Any, on_swapped: Callable[[TopicPartition, Any], None],
                 rate: Callable[[], float | None] = lambda: None,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], Any] = asyncio.sleep) -> None:
        self.logs = logs
        self.sleep = sleep
        self.on_swapped = on_swapped
        self.rate = rate
        self.clock = clock
        self.tasks: dict[TopicPartition, asyncio.Task] = {}
        self.copied_bytes = 0  # every move's, for the metrics

    def moving(self, tp: TopicPartition) -> bool:
        task = self.tasks.get(tp)
        return task is not None and not task.done()

    def start(self, tp: TopicPartition) -> None:
        """Move ``tp`` into its future log's dir (idempotent)."""
        if not self.moving(tp):
            self.tasks[tp] = asyncio.get_running_loop().create_task(self._run(tp))

    async def cancel(self, tp: TopicPartition) -> None:
        task = self.tasks.pop(tp, None)
        if task is not None and not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def stop(self) -> None:
        for tp in list(self.tasks):
            await self.cancel(tp)

    async def _run(self, tp: TopicPartition) -> None:
        try:
            await self._move(tp)
        except asyncio.CancelledError:
            raise
        except KafkaStorageError as e:  # its dir went offline, and the channel said so
            log.warning("moving %s-%d between log dirs stopped: %s", tp[0], tp[1], e)
        except Exception:
            if tp in self.logs.future_logs:
                log.exception("moving %s-%d between log dirs stopped", *tp)
            # else the partition or its move went away under the copy
        finally:
            if self.tasks.get(tp) is asyncio.current_task():
                del self.tasks[tp]

    async def _move(self, tp: TopicPartition) -> None:
        started, copied = self.clock(), 0
        truncations = None
        while True:
            current, future = self.logs.logs.get(tp), self.logs.future_logs.get(tp)
            if current is None or future is None:
                return  # the partition or its move went away
            diverged = None
            if truncations is not None and current._truncations != truncations and future.latest_epoch >= 0:
                diverged = current.end_offset_for_epoch(future.latest_epoch)[1]
            truncations = current._truncations
            step = next_step(current.log_start_offset, current.log_end_offset, future.log_end_offset,
                             diverged)
            if step.kind == SWAP:
                moved = self.logs.replace_current_with_future(*tp)
                log.info("%s-%d moved to %s", tp[0], tp[1], moved.parent_dir)
                self.on_swapped(tp, moved)
                return
            if step.kind == TRUNCATE:
                future.truncate_to(step.offset)
                continue
            if step.kind == RESTART:
                future.truncate_fully_and_start_at(step.offset)
                continue
            assert step.kind == COPY
            wait = copy_delay_ms(self.rate(), copied, (self.clock() - started) * 1000)
            if wait > 0:
                await self.sleep(wait / 1000)
                continue
            n = await _copy_off_loop(self.logs, current, future, CHUNK_BYTES)
            copied += n
            self.copied_bytes += n
            if n == 0:
                await self.sleep(IDLE_S)
