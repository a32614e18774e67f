"""The log cleaner's benchmarks, each reported as ratios measured in one run:

* ``test_cleaner_throughput[superseded|partly_kept]``: engine/cleaner.py over a Log written
  in-process (50 MB of 100-byte values, one key in ten live), MB/s of the log cleaned, against
  the same run's memcpy and page-cache write ceilings (bench/e2e/ceilings.py). ``superseded``:
  each key is rewritten in whole batches, so the clean drops whole batches and copies the last
  tenth byte for byte; ``partly_kept``: keys drawn at random, so most batches keep some of
  their records and are rebuilt (Kafka's filterTo per record).
* ``test_coordinator_load_compacted_vs_uncompacted``: broker/groups/storage.py's load of a
  ``__consumer_offsets`` partition after a history of commits, then of the same Log once
  cleaned: the ratio of load times and of bytes.
* ``test_produce_p99_cleaner_busy_vs_idle`` (starts a node: marked ``processes``): a
  latency producer's produce p99 while a writer keeps a compacted topic dirty (the cleaner
  busy in the broker's worker thread) over the same writer on a delete-policy topic (the
  cleaner idle), in alternating rounds; the cleaner thread's share of the broker's CPU.

With ``--benchmark-disable`` (the default test run) each body runs once at a tiny size.
"""
from __future__ import annotations

import os
import random
import shutil
import tempfile
import time

import pytest

from bench.e2e import ceilings
from broker.groups.storage import build_records_batch, load_partition, offset_commit_key, offset_commit_value
from engine.cleaner import Cleaner, clean_filthiest
from engine.config import LogConfig
from engine.log import Log
from ext.batch import build_batch
from ext.offset_map import OffsetMap

MB = 1_000_000
VALUE_BYTES = 100
BATCH_RECORDS = 1000


def _loadavg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def _compacted(segment_bytes: int) -> LogConfig:
    return LogConfig(cleanup_policy="compact", segment_bytes=segment_bytes, min_cleanable_dirty_ratio=0.0,
                     file_delete_delay_ms=0)


def _log_bytes(lg: Log) -> int:
    return sum(s.size for s in lg.segments)


def write_changelog(directory: str, total_bytes: int, case: str, segment_bytes: int, seed: int = 1) -> Log:
    """A compacted Log of about ``total_bytes`` of keyed 100-byte values in batches of 1000,
    over one key for every ten records, rolled so that all of it is cleanable."""
    records = max(BATCH_RECORDS, total_bytes // (VALUE_BYTES + 20))
    batches = records // BATCH_RECORDS
    distinct = max(1, batches * BATCH_RECORDS // 10)
    cycle = max(1, batches // 10)  # superseded: batch b rewrites the keys of batch b - cycle
    rng = random.Random(seed)
    value = os.urandom(VALUE_BYTES // 2).hex().encode()
    now = int(time.time() * 1000)
    lg = Log(directory, _compacted(segment_bytes))
    for b in range(batches):
        if case == "superseded":
            keys = [(b % cycle) * BATCH_RECORDS + i for i in range(BATCH_RECORDS)]
        else:
            keys = [rng.randrange(distinct) for _ in range(BATCH_RECORDS)]
        batch = build_batch([(b"key-%09d" % k, value, [], now) for k in keys])
        lg.append_as_leader(bytearray(batch), 0, now)
    lg.update_high_watermark(lg.log_end_offset)
    lg.roll()
    return lg


def clean_whole(lg: Log, slots: int) -> tuple[float, object]:
    cleaner = Cleaner(OffsetMap(slots=slots))
    start = time.perf_counter()
    result = clean_filthiest(cleaner, [lg], int(time.time() * 1000))
    return time.perf_counter() - start, result


@pytest.mark.parametrize("case", ["superseded", "partly_kept"])
def test_cleaner_throughput(benchmark, case):
    total = 50 * MB if benchmark.enabled else MB
    rounds = 3 if benchmark.enabled else 1
    segment_bytes = 8 * MB if benchmark.enabled else 256 * 1024
    work = tempfile.mkdtemp(prefix="strom-bench-cleaner-")
    try:
        ceiling_s = 1.0 if benchmark.enabled else 0.1
        e = benchmark.pedantic(_clean_rounds, args=(work, total, case, segment_bytes, rounds, ceiling_s),
                               rounds=1, iterations=1)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    assert e["cleaned_bytes"] < e["log_bytes"] / 5, e  # one key in ten live
    benchmark.extra_info.update({"case": case, **e, "loadavg": _loadavg()})


def _clean_rounds(work: str, total: int, case: str, segment_bytes: int, rounds: int,
                  ceiling_s: float) -> dict:
    """``rounds`` cleans of a fresh changelog each, then the ceilings in the same run."""
    seconds, sizes = [], []
    stats = None
    for r in range(rounds):
        lg = write_changelog(os.path.join(work, f"t-{r}"), total, case, segment_bytes)
        try:
            before = _log_bytes(lg)
            took, result = clean_whole(lg, slots=1 << 20)
            stats = result.stats
            assert result.end_offset == lg.active_segment.base_offset, "the clean stopped short"
            sizes.append((before, _log_bytes(lg)))
            seconds.append(took)
        finally:
            lg.close()
            shutil.rmtree(os.path.join(work, f"t-{r}"), ignore_errors=True)
    memcpy = ceilings.memcpy_gb_s(ceiling_s)
    disk = ceilings.page_cache_writes(ceiling_s, work, limit_bytes=(1 << 30) if ceiling_s >= 1 else 16 << 20)
    best = min(seconds)
    before, after = sizes[seconds.index(best)]
    mb_s = before / best / MB
    return {
        "log_bytes": before, "cleaned_bytes": after, "rounds_s": seconds,
        "cleaner_mb_s": mb_s, "memcpy_mb_s": memcpy * 1000,
        "page_cache_new_mb_s": disk["page_cache_new_gb_s"] * 1000,
        "page_cache_overwrite_mb_s": disk["page_cache_overwrite_gb_s"] * 1000,
        "ratio_to_memcpy": mb_s / (memcpy * 1000),
        "ratio_to_page_cache_write": mb_s / (disk["page_cache_new_gb_s"] * 1000),
        "batches_copied": stats.batches_copied, "batches_rebuilt": stats.batches_rebuilt,
        "batches_dropped": stats.batches_dropped,
    }


def write_offsets_history(directory: str, commits: int, groups: int, partitions: int) -> Log:
    """A ``__consumer_offsets`` partition after ``commits`` OffsetCommits, each one batch of
    one group's ``partitions`` offsets (``groups`` groups in turn): groups x partitions keys."""
    now = int(time.time() * 1000)
    lg = Log(directory, _compacted(1 << 20))
    for c in range(commits):
        group = f"group-{c % groups}"
        records = [(offset_commit_key(group, "events", p), offset_commit_value(c * 100 + p, 0, "", now))
                   for p in range(partitions)]
        lg.append_as_leader(build_records_batch(records, now), 0, now)
    lg.update_high_watermark(lg.log_end_offset)
    lg.roll()
    return lg


def _timed_load(lg: Log, repeats: int):
    times, state = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        state = load_partition(lg)
        times.append(time.perf_counter() - start)
    return min(times), state


def test_coordinator_load_compacted_vs_uncompacted(benchmark, tmp_path):
    commits, groups, partitions = (20_000, 20, 50) if benchmark.enabled else (200, 4, 10)
    repeats = 3 if benchmark.enabled else 1
    e = benchmark.pedantic(_load_both, args=(str(tmp_path), commits, groups, partitions, repeats),
                           rounds=1, iterations=1)
    assert e["compacted_bytes"] < e["uncompacted_bytes"]
    benchmark.extra_info.update({**e, "loadavg": _loadavg()})


def _load_both(work: str, commits: int, groups: int, partitions: int, repeats: int) -> dict:
    """Load the history, clean it, load it again: both times (best of ``repeats``) and sizes."""
    lg = write_offsets_history(os.path.join(work, "__consumer_offsets-0"), commits, groups, partitions)
    try:
        raw_bytes = _log_bytes(lg)
        raw_s, raw_state = _timed_load(lg, 1)  # seconds long at the real size: once is enough
        clean_whole(lg, slots=1 << 16)
        lg.delete_pending_segments()
        compacted_bytes = _log_bytes(lg)
        compacted_s, compacted_state = _timed_load(lg, repeats)
    finally:
        lg.close()
    assert compacted_state.offsets == raw_state.offsets  # the same live state, from less history
    return {
        "commits": commits, "keys": groups * partitions, "records": commits * partitions,
        "uncompacted_bytes": raw_bytes, "compacted_bytes": compacted_bytes,
        "uncompacted_load_s": raw_s, "compacted_load_s": compacted_s,
        "load_time_ratio": compacted_s / raw_s, "bytes_ratio": compacted_bytes / raw_bytes,
    }
