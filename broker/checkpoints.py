"""The broker's periodic offset checkpoints, written off the event loop.

Every replica.high.watermark.checkpoint.interval.ms (5 s) the broker writes each log dir's
replication-offset-checkpoint, and every minute its recovery-point-offset-checkpoint and
log-start-offset-checkpoint (engine/checkpoint.py: a .tmp file, fsync, rename, fsync of the
directory). Two fsyncs take a millisecond on a quiet disk and tens of milliseconds on a busy
one; on the event loop that would stall every produce and fetch the broker is answering, so
``write_off_loop`` runs them in a worker thread, as Kafka's kafka-scheduler thread does.

What crosses to the thread is a fresh dict of offsets taken on the loop and the file's path:
no state is shared. What comes back is the thread's OSError, if any, which the loop hands to
the log dir failure channel (its handler takes partitions offline and is the loop's alone).
A checkpoint is written dir after dir, one at a time. Cancelled (the broker stopping), it
ends only once the write under way is done: the shutdown then writes the same files again
from the loop, and two writers would share the .tmp file.
"""
from __future__ import annotations

import asyncio

from engine.checkpoint import write_offset_checkpoint
from engine.manager import LogManager


async def write_off_loop(logs: LogManager, name: str) -> None:
    """Write the offset checkpoint ``name`` (engine/manager.py) of every online log dir, each
    with the offsets its logs have as its turn comes. A write that fails takes its dir offline
    and raises KafkaStorageError, as ``LogManager.checkpoint`` does."""
    loop = asyncio.get_running_loop()
    for log_dir, path, offsets in logs.checkpoint_contents(name):
        written = loop.run_in_executor(None, write_offset_checkpoint, path, offsets)
        try:
            await asyncio.shield(written)
        except asyncio.CancelledError:
            await asyncio.wait([written])
            raise
        except OSError as e:
            raise logs.failure_channel.maybe_add_offline_log_dir(log_dir, f"writing {name}", e) from e
