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
  cleaner idle), in alternating rounds; the cleaner thread's share of the broker's CPU and of
  its GIL. A third kind of round, ``process``, stands in for a cleaner in a process of its own:
  the delete-policy writer, and beside the broker a process doing the same cleaning work on a
  Log of its own (the same records appended at the writer's rate, the same key space, a clean
  after every 1 MiB roll), so the broker's CPU and disk see the cleaner's load without its GIL.

With ``--benchmark-disable`` (the default test run) each body runs once at a tiny size.
"""
from __future__ import annotations

import contextlib
import itertools
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

import psutil
import pytest

from bench.conftest import STROM_BROKER_GROUP
from bench.e2e import ceilings
from broker.groups.storage import build_records_batch, load_partition, offset_commit_key, offset_commit_value
from engine.cleaner import Cleaner, clean_filthiest, read_cleaner_checkpoint
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
def test_cleaner_throughput(benchmark, size, case):
    total, rounds, segment_bytes = size((50 * MB, 3, 8 * MB), (MB, 1, 256 * 1024))
    work = tempfile.mkdtemp(prefix="strom-bench-cleaner-")
    try:
        ceiling_s = size(1.0, 0.1)
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


def test_coordinator_load_compacted_vs_uncompacted(benchmark, size, tmp_path):
    commits, groups, partitions, repeats = size((20_000, 20, 50, 3), (200, 4, 10, 1))
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


# ---- produce p99 with the cleaner busy and idle (a node) ----------------------------------------
#
# One node whose cleaner looks for work every 100 ms. Each round starts a writer (a client
# process) on a topic of its own at WRITER_RATE records/s of 100-byte values over WRITER_KEYS
# keys at random, segment.bytes 1 MiB: with cleanup.policy=compact and min.cleanable.dirty.ratio
# 0.01 the cleaner cleans it again after nearly every roll, re-reading the ~12 MB it keeps each
# time (busy); with cleanup.policy=delete the same writes leave it nothing to do (idle). After
# WRITER_WARMUP_S a latency producer (bench.e2e.workloads' ack_latency: linger.ms 0, acks=1,
# paced) measures produce p99 on a topic of its own. Busy and idle rounds alternate. Each round
# also takes the broker's threads' CPU (psutil): the cleaner runs in the default executor of the
# broker's event loop, so the busiest thread other than the loop's is the cleaner in a busy round.

WRITER_RATE = 20_000
WRITER_KEYS = 100_000
WRITER_WARMUP_S = 3.0
LATENCY_RATE = 2000
COMPACTED = {"cleanup.policy": "compact", "segment.bytes": str(1 << 20), "min.cleanable.dirty.ratio": "0.01"}
NOT_COMPACTED = {"cleanup.policy": "delete", "segment.bytes": str(1 << 20)}
MODES = ("idle", "busy", "process")
_topics = itertools.count()


def _writer(spec: dict) -> None:
    """Produce keyed records at ``spec["rate"]`` until killed (a client process)."""
    from confluent_kafka import Producer

    from bench.e2e import workloads as W

    W.create_topic(spec["bootstrap"], spec["topic"], 1, config=spec["config"])
    p = Producer({"bootstrap.servers": spec["bootstrap"], "linger.ms": 5, "acks": "1",
                  "delivery.report.only.error": True, "queue.buffering.max.messages": 1_000_000})
    rng = random.Random(1)
    value = b"v" * VALUE_BYTES
    per_tick, tick = max(1, spec["rate"] // 100), 0.01
    print("ready", flush=True)
    start = time.monotonic()
    for n in itertools.count():
        for _ in range(per_tick):
            try:
                p.produce(spec["topic"], value, key=b"key-%09d" % rng.randrange(spec["keys"]), partition=0)
            except BufferError:
                p.poll(0.001)
        p.poll(0)
        lag = start + (n + 1) * tick - time.monotonic()
        if lag > 0:
            time.sleep(lag)


@contextlib.contextmanager
def writing(bootstrap: str, topic: str, config: dict, rate: int, keys: int):
    spec = {"bootstrap": bootstrap, "topic": topic, "config": config, "rate": rate, "keys": keys}
    from tests.integration.cluster import REPO_ROOT

    proc = subprocess.Popen([sys.executable, "-m", "bench.test_bench_cleaner", "writer", json.dumps(spec)],
                            cwd=REPO_ROOT, stdout=subprocess.PIPE, text=True)
    try:
        if proc.stdout.readline().strip() != "ready":
            raise RuntimeError(f"the writer did not start ({proc.wait(10)})")
        yield proc
    finally:
        proc.kill()
        proc.wait(10)
        from bench.e2e import workloads as W
        W.delete_topic(bootstrap, topic)


def _cleaner_process(spec: dict) -> None:
    """The cleaner's work in a process of its own (until killed): ``spec["rate"]`` records/s of
    100-byte values over ``spec["keys"]`` keys at random appended to a compacted Log in
    ``spec["dir"]``, rolled and cleaned at every 1 MiB, as the broker's cleaner does the dirty
    topic of a busy round."""
    lg = Log(spec["dir"], _compacted(1 << 20))
    rng = random.Random(1)
    value = b"v" * VALUE_BYTES
    step = (1 << 20) // (VALUE_BYTES + 20) // BATCH_RECORDS * BATCH_RECORDS
    interval = step / spec["rate"]
    print("ready", flush=True)
    due = time.monotonic()
    while True:
        now = int(time.time() * 1000)
        for _ in range(step // BATCH_RECORDS):
            batch = build_batch([(b"key-%09d" % rng.randrange(spec["keys"]), value, [], now)
                                 for _ in range(BATCH_RECORDS)])
            lg.append_as_leader(bytearray(batch), 0, now)
        lg.update_high_watermark(lg.log_end_offset)
        lg.roll()
        clean_whole(lg, slots=1 << 18)
        lg.delete_pending_segments()
        due += interval
        time.sleep(max(0.0, due - time.monotonic()))


@contextlib.contextmanager
def cleaning_beside(rate: int, keys: int):
    """``_cleaner_process`` running beside the broker."""
    from tests.integration.cluster import REPO_ROOT

    work = tempfile.mkdtemp(prefix="strom-bench-cleaner-process-")
    spec = {"dir": os.path.join(work, "t-0"), "rate": rate, "keys": keys}
    proc = subprocess.Popen([sys.executable, "-m", "bench.test_bench_cleaner", "cleaner", json.dumps(spec)],
                            cwd=REPO_ROOT, stdout=subprocess.PIPE, text=True)
    try:
        if proc.stdout.readline().strip() != "ready":
            raise RuntimeError(f"the cleaner process did not start ({proc.wait(10)})")
        yield proc
    finally:
        proc.kill()
        proc.wait(10)
        shutil.rmtree(work, ignore_errors=True)


def thread_cpu(pid: int) -> dict[int, float]:
    return {t.id: t.user_time + t.system_time for t in psutil.Process(pid).threads()}


def latency_round(broker, mode: str, rate: int, seconds: float, warmup_s: float,
                  writer_rate: int, keys: int, profile_s: float = 0.0) -> dict:
    """One round: ``mode`` "idle", "busy" (the broker's cleaner thread) or "process" (the same
    cleaning in a process beside the broker)."""
    from bench.e2e import workloads as W

    n = next(_topics)
    dirty = f"dirty-{n}"
    beside = cleaning_beside(writer_rate, keys) if mode == "process" else contextlib.nullcontext()
    config = COMPACTED if mode == "busy" else NOT_COMPACTED
    with writing(broker.bootstrap, dirty, config, writer_rate, keys), beside:
        time.sleep(warmup_s)
        profiler = None
        if profile_s and shutil.which("py-spy"):
            out = os.path.join(tempfile.mkdtemp(prefix="strom-bench-pyspy-"), "gil.txt")
            cmd = ["py-spy", "record", "--pid", str(broker.pid), "--gil", "--nonblocking", "--duration",
                   str(int(profile_s)), "--rate", "200", "--format", "raw", "--output", out]
            profiler = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        threads0, cpu0, t0 = thread_cpu(broker.pid), psutil.Process(broker.pid).cpu_times(), time.monotonic()
        r = W.run_round({"bootstrap": broker.bootstrap, "broker_pid": broker.pid, "topic": f"lat-{n}",
                         "kind": "ack_latency", "rate": rate, "seconds": seconds, "acks": "1"})
        threads1, cpu1, t1 = thread_cpu(broker.pid), psutil.Process(broker.pid).cpu_times(), time.monotonic()
        # where the next clean of the dirty topic starts (0: never cleaned)
        r["cleaned_to"] = read_cleaner_checkpoint(broker.data_dir).get((dirty, 0), 0)
        if profiler is not None:
            profiler.wait(profile_s + 60)
            r["gil"] = gil_shares(out, profile_s, 200)
            shutil.rmtree(os.path.dirname(out), ignore_errors=True)
    wall = t1 - t0
    deltas = {tid: (threads1[tid] - threads0.get(tid, 0.0)) / wall for tid in threads1}
    others = sorted((v for tid, v in deltas.items() if tid != broker.pid), reverse=True)
    r.update({"loop_thread_cores": deltas.get(broker.pid, 0.0),
              "busiest_other_thread_cores": others[0] if others else 0.0,
              "broker_cores": (cpu1.user + cpu1.system - cpu0.user - cpu0.system) / wall,
              "loadavg_1m": os.getloadavg()[0]})
    return r


def gil_shares(raw_path: str, seconds: float, rate: int) -> dict:
    """From py-spy's raw --gil samples (one stack per line, its count last): the share of the
    seconds in which some thread held the GIL, and the share the cleaner (engine/cleaner.py,
    ext.offset_map) held it."""
    total = cleaner = 0
    with contextlib.suppress(OSError), open(raw_path) as f:
        for line in f:
            stack, _, count = line.rstrip().rpartition(" ")
            if not count.isdigit():
                continue
            total += int(count)
            if "cleaner.py" in stack or "clean_once" in stack:
                cleaner += int(count)
    samples = seconds * rate
    return {"gil_held": total / samples, "cleaner_gil": cleaner / samples}


@pytest.fixture(scope="module")
def cleaner_node(strom_broker):
    with strom_broker({"log.cleaner.backoff.ms": 100}) as b:
        yield b


@pytest.mark.processes
@pytest.mark.xdist_group(STROM_BROKER_GROUP)
@pytest.mark.timeout(900)
def test_produce_p99_cleaner_busy_vs_idle(benchmark, size, cleaner_node):
    pytest.importorskip("confluent_kafka")
    from bench.e2e.failover import paired_ratio

    enabled = benchmark.enabled
    reps, seconds, warmup = size((3, 8.0, WRITER_WARMUP_S), (1, 0.5, 0.5))
    writer_rate, keys = size((WRITER_RATE, WRITER_KEYS), (2000, 1000))
    rate = size(LATENCY_RATE, 500)

    def rounds() -> dict:
        out: dict[str, list[dict]] = {mode: [] for mode in MODES}
        for _ in range(reps):
            for mode in MODES:
                out[mode].append(latency_round(cleaner_node, mode, rate, seconds, warmup, writer_rate, keys))
        if enabled:  # one more busy round under py-spy: the GIL's share (not in the ratio)
            out["profiled"] = [latency_round(cleaner_node, "busy", rate, seconds, warmup, writer_rate, keys,
                                             profile_s=seconds)]
        return out

    r = benchmark.pedantic(rounds, rounds=1, iterations=1)
    p99 = paired_ratio([x["p99_ms"] for x in r["busy"]], [x["p99_ms"] for x in r["idle"]])
    p50 = paired_ratio([x["p50_ms"] for x in r["busy"]], [x["p50_ms"] for x in r["idle"]])
    process_p99 = paired_ratio([x["p99_ms"] for x in r["process"]], [x["p99_ms"] for x in r["idle"]])
    process_p50 = paired_ratio([x["p50_ms"] for x in r["process"]], [x["p50_ms"] for x in r["idle"]])
    assert all(x["p99_ms"] >= x["p50_ms"] > 0 for mode in MODES for x in r[mode])
    # the broker never cleans a delete-policy topic
    assert all(x["cleaned_to"] == 0 for x in r["idle"] + r["process"])
    if enabled:
        assert all(x["cleaned_to"] > 0 for x in r["busy"]), "the cleaner never cleaned the dirty topic"

    def median(mode: str, field: str) -> float:
        values = sorted(x[field] for x in r[mode])
        return values[len(values) // 2]

    info = {"rate": rate, "writer_rate": writer_rate, "writer_keys": keys, "seconds": seconds,
            "busy_over_idle_p99": p99["ratio"], "p99_pairs": p99["pairs"],
            "busy_over_idle_p50": p50["ratio"], "p50_pairs": p50["pairs"],
            "process_over_idle_p99": process_p99["ratio"], "process_p99_pairs": process_p99["pairs"],
            "process_over_idle_p50": process_p50["ratio"], "process_p50_pairs": process_p50["pairs"]}
    for mode in MODES:
        for field in ("p50_ms", "p99_ms", "p999_ms", "loop_thread_cores", "busiest_other_thread_cores",
                      "broker_cores", "loadavg_1m", "cleaned_to"):
            info[f"{mode}_{field}"] = median(mode, field)
    if "profiled" in r:
        info["profiled_busy_round"] = r["profiled"][0]
    benchmark.extra_info.update(info)


if __name__ == "__main__":
    if sys.argv[1] == "writer":
        _writer(json.loads(sys.argv[2]))
    elif sys.argv[1] == "cleaner":
        _cleaner_process(json.loads(sys.argv[2]))
