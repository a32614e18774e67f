"""Rebuilding idempotent producer state from the log's batch headers (a restart, a truncation).

The state a rebuild finds must be the state the appends left: per producer the newest epoch,
the last five batches of that epoch and the max timestamp of the last one. The rebuild walks
the segments' batch headers in C chunk by chunk; Python sees one loop step per producer batch
and makes no call per batch (a log of small idempotent batches has millions of them, and a
follower truncating its log rebuilds on the event loop).
"""
from __future__ import annotations

import random

import pytest

from engine.config import LogConfig
from engine.log import Log
from ext.batch import build_batch
from tests.engine.batches import BASE_TS, python_calls


def state(log: Log) -> dict:
    return {pid: (entry.epoch, list(entry.batches), entry.last_timestamp)
            for pid, entry in log.producer_state.producers.items()}


def follower_batch(offset: int, n: int, pid: int = -1, epoch: int = -1, seq: int = -1,
                   ts: int = BASE_TS, control: bool = False) -> bytearray:
    records = [(b"k", b"v%d" % i, [], ts + i) for i in range(n)]
    return bytearray(build_batch(records, base_offset=offset, partition_leader_epoch=0,
                                 producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                                 is_transactional=control, is_control=control))


def write_history(log: Log, rng: random.Random, batches: int) -> None:
    """Follower appends (taken as the leader sent them) from a few producers: epoch bumps,
    a stale epoch's batch after a bump, sequences wrapping at 2**31, control batches and
    batches of no producer."""
    epochs = {pid: 0 for pid in range(4)}
    seqs = {pid: 0 for pid in range(4)}
    seqs[3] = 2**31 - 7  # wraps within the history
    for i in range(batches):
        kind = rng.random()
        n = rng.randint(1, 4)
        offset = log.log_end_offset
        ts = BASE_TS + i * 10
        if kind < 0.1:
            buf = follower_batch(offset, n, ts=ts)
        elif kind < 0.15:
            buf = follower_batch(offset, 1, pid=rng.randrange(4), epoch=0, seq=-1, ts=ts, control=True)
        else:
            pid = rng.randrange(4)
            if kind < 0.2:
                epochs[pid] += 1
                seqs[pid] = 0
            epoch = epochs[pid] - 1 if kind > 0.97 and epochs[pid] > 0 else epochs[pid]
            buf = follower_batch(offset, n, pid=pid, epoch=epoch, seq=seqs[pid], ts=ts)
            seqs[pid] = (seqs[pid] + n) % 2**31
        log.append_as_follower(buf, BASE_TS)


def history_log(path: str, seed: int, batches: int, config: LogConfig | None = None) -> Log:
    """A log at ``path`` (4 KiB segments unless ``config`` says otherwise) holding
    ``write_history`` of ``seed``."""
    log = Log(path, config or LogConfig(segment_bytes=4096))
    write_history(log, random.Random(seed), batches)
    return log


@pytest.mark.parametrize("seed", range(8))
def test_rebuild_finds_the_state_the_appends_left(tmp_path, seed):
    log = history_log(str(tmp_path / "t-0"), seed, 400)
    assert len(log.segments) > 3
    live = state(log)
    assert live  # producers were seen
    log._rebuild_producer_state()
    assert state(log) == live
    log.close()


def test_reopened_log_has_the_producer_state_it_had(tmp_path):
    path = str(tmp_path / "t-0")
    log = history_log(path, 99, 300)
    live = state(log)
    log.close()
    reopened = Log(path, LogConfig(segment_bytes=4096), recovery_point=0, had_clean_shutdown=False)
    assert state(reopened) == live
    reopened.close()


def test_truncation_rebuilds_the_state_below_the_truncation_point(tmp_path):
    log = Log(str(tmp_path / "t-0"), LogConfig(segment_bytes=4096))
    rng = random.Random(7)
    write_history(log, rng, 200)
    cut = log.log_end_offset
    below = state(log)
    write_history(log, rng, 100)
    assert state(log) != below
    log.truncate_to(cut)
    assert log.log_end_offset == cut
    assert state(log) == below
    log.close()


def test_rebuild_makes_no_python_call_per_batch(tmp_path):
    calls = []
    for count in (50, 1000):
        log = Log(str(tmp_path / f"t-{count}"), LogConfig(segment_bytes=1 << 20))
        for i in range(count):
            log.append_as_follower(follower_batch(i, 1, pid=i % 3, epoch=0, seq=i // 3), BASE_TS)
        assert len(log.segments) == 1
        calls.append(python_calls(log._rebuild_producer_state))
        log.close()
    assert calls[0] == calls[1]
