"""One KRaft voter in its own process, for bench/test_bench_raft.py (committed records/s and
commit latency of a 3-voter quorum on loopback).

    python -m bench.raft_node --id 1 --port 9101 \\
        --voters 1-UUID1@127.0.0.1:9101,2-UUID2@127.0.0.1:9102,3-UUID3@127.0.0.1:9103 \\
        --dir /tmp/b/node-1 --records 100000 --batch 1000 --inflight 16 --out /tmp/b/node-1.json

Each voter runs as a controller does (controller/process.py) minus the quorum controller: a
RaftDriver on an EngineRaftLog (segments, fsync on every flush) in ``<dir>/__cluster_metadata-0``
with its quorum-state file, behind a protocol.net.Server on 127.0.0.1:port. The voter set is
KIP-853's (kraft.version 1): ``--voters`` is ``strom format --initial-controllers`` syntax and
every voter writes the same bootstrap checkpoint (raft.engine_log.write_bootstrap_snapshot) on
its first start. controller.quorum.* are Kafka's defaults (raft.quorum_state.QuorumConfig) but
for ``--linger-ms`` (controller.quorum.append.linger.ms, default 25) and ``--fetch-max-entries``
(not a Kafka setting: the entries a leader puts in one Fetch answer; default the core's).

Theory of operation. The voter that becomes leader first commits one warm-up value (by then its
epoch's LeaderChange record is committed too), then appends ``--records`` values of 100 bytes
in appends of ``--batch`` values (``driver.append`` + ``driver.wait_committed``), keeping at most
``--inflight`` appends waiting for their commit (1: one at a time, the latency run). An append's
commit latency runs from the ``append`` call to ``wait_committed`` returning. It then commits
the value DONE, writes its results and waits (at most 5 s) until every voter's log end offset
has passed DONE: the Fetch that says so is answered at once with the new high watermark, so the
followers apply DONE, and a follower exits when it applies DONE. Every voter gives up after
``--deadline-s`` (exit code 3).

Output (``--out``, JSON, written by every voter):

| field            | who      | meaning                                                         |
|------------------|----------|-----------------------------------------------------------------|
| node_id, leader  | all      | this voter; whether it ran the workload                         |
| cpu_s            | all      | process CPU (user + sys) from the driver's start to exit        |
| log_appends, log_entries, log_flushes | all | RaftLog.append calls, entries appended, flushes (fsyncs) |
| records, batch, inflight, linger_ms, fetch_max_entries, value_bytes | leader | the run |
| elapsed_s        | leader   | first append to the last commit                                 |
| records_per_s, mb_per_s | leader | records (value bytes) committed per second                 |
| cpu_window_s     | leader   | the leader's CPU over elapsed_s                                 |
| latency_ms       | leader   | per-append commit latency: p50, p90, p99, p999, max, mean, count |
| latencies_ms     | leader   | the raw list (latency runs only: inflight 1)                    |
| error            | leader   | set when the run failed (e.g. leadership lost)                  |
"""
from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
import time
from dataclasses import replace

from engine.checkpoint import uuid_from_str
from protocol.dispatch import Dispatcher
from protocol.net import Server
from raft import wire
from raft.driver import DEFAULT_APPEND_LINGER_MS, RaftDriver, RaftDriverConfig
from raft.engine_log import EngineRaftLog, write_bootstrap_snapshot
from raft.quorum_file import QUORUM_STATE_FILE
from raft.quorum_state import QuorumConfig
from raft.settings import METADATA_PARTITION
from raft.voters import DEFAULT_LISTENER, VoterSet
from strom.quorum import parse_initial_controllers

VALUE_BYTES = 100
DONE = b"strom-bench-done"
COMMIT_TIMEOUT_S = 60.0
LINGER_AFTER_DONE_S = 5.0
MAX_REQUEST_BYTES = 100 << 20  # socket.request.max.bytes default


class CountingLog(EngineRaftLog):
    """EngineRaftLog counting appends and flushes: how the core batches its disk work."""

    def __init__(self, partition_dir: str) -> None:
        super().__init__(partition_dir)
        self.appends = self.entries = self.flushes = 0

    def append(self, entries) -> None:
        super().append(entries)
        self.appends += 1
        self.entries += len(entries)

    def flush(self) -> None:
        super().flush()
        self.flushes += 1


class Listener:
    """Applies nothing: notes when DONE is committed."""

    def __init__(self) -> None:
        self.done = asyncio.Event()
        self.applied = 0

    def handle_commit(self, entries) -> None:
        self.applied += len(entries)
        if entries[-1].value == DONE:  # the last value the leader appends
            self.done.set()

    def handle_snapshot(self, snapshot) -> None:
        pass

    def handle_leader_change(self, leader_id: int, epoch: int) -> None:
        pass


def percentile(sorted_values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in [0, 100]) of an ascending list."""
    if not sorted_values:
        return float("nan")
    rank = max(1, -(-len(sorted_values) * q // 100))
    return sorted_values[min(int(rank), len(sorted_values)) - 1]


def latency_summary(latencies_ms: list[float]) -> dict[str, float]:
    s = sorted(latencies_ms)
    return {"p50": percentile(s, 50), "p90": percentile(s, 90), "p99": percentile(s, 99),
            "p999": percentile(s, 99.9), "max": s[-1] if s else float("nan"),
            "mean": sum(s) / len(s) if s else float("nan"), "count": len(s)}


async def lead(driver: RaftDriver, args) -> dict:
    await driver.wait_committed(driver.append([b"warm-up"]), COMMIT_TIMEOUT_S)
    value = os.urandom(VALUE_BYTES)
    sizes = [args.batch] * (args.records // args.batch)
    if args.records % args.batch:
        sizes.append(args.records % args.batch)
    latencies: list[float] = []
    slots = asyncio.Semaphore(args.inflight)

    async def one(values: list[bytes]) -> None:
        try:
            started = time.perf_counter_ns()
            await driver.wait_committed(driver.append(values), COMMIT_TIMEOUT_S)
            latencies.append((time.perf_counter_ns() - started) / 1e6)
        finally:
            slots.release()

    cpu0, t0 = time.process_time(), time.perf_counter()
    pending: list[asyncio.Task] = []
    for n in sizes:
        await slots.acquire()
        pending.append(asyncio.create_task(one([value] * n)))
    await asyncio.gather(*pending)
    elapsed, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    results = {
        "records": args.records, "batch": args.batch, "inflight": args.inflight,
        "linger_ms": args.linger_ms, "fetch_max_entries": args.fetch_max_entries,
        "value_bytes": VALUE_BYTES, "elapsed_s": elapsed, "records_per_s": args.records / elapsed,
        "mb_per_s": args.records * VALUE_BYTES / elapsed / 1e6, "cpu_window_s": cpu,
        "latency_ms": latency_summary(latencies),
    }
    if args.inflight == 1:
        results["latencies_ms"] = [round(x, 3) for x in latencies]
    return results


async def wait_replicated(driver: RaftDriver, offset: int, timeout_s: float) -> None:
    """Until every voter's log end offset passes ``offset`` (the leader's view)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        view = driver.describe()
        if view is None or all(v.log_end_offset > offset for v in view.voters):
            return
        await asyncio.sleep(0.01)


def quorum_config(args) -> QuorumConfig:
    q = QuorumConfig()
    return q if args.fetch_max_entries is None else replace(q, fetch_max_entries=args.fetch_max_entries)


async def serve(args) -> int:
    voters = parse_initial_controllers(args.voters, DEFAULT_LISTENER, "--voters")
    me = voters.get(args.id)
    if me is None:
        raise SystemExit(f"--id {args.id} is not in --voters")
    partition_dir = os.path.join(args.dir, METADATA_PARTITION)
    if not os.path.isdir(partition_dir):
        write_bootstrap_snapshot(partition_dir, voters, 1)
    raft_log = CountingLog(partition_dir)
    listener = Listener()
    config = RaftDriverConfig(
        # No static voters, as a controller formatted with --initial-controllers: the set is the
        # bootstrap checkpoint's VotersRecord.
        node_id=args.id, cluster_id=args.cluster_id, voters=VoterSet(()), endpoints=me.endpoints,
        directory_id=me.directory_id,
        bootstrap_servers=tuple((v.endpoints[0].host, v.endpoints[0].port) for v in voters.voters),
        quorum=quorum_config(args), append_linger_ms=args.linger_ms)
    driver = RaftDriver(config, raft_log, os.path.join(partition_dir, QUORUM_STATE_FILE), listener)
    server = Server(Dispatcher(driver.apis(), wire.kraft_supported_features()).handle, MAX_REQUEST_BYTES)
    server.bind("127.0.0.1", args.port)
    cpu0 = time.process_time()
    await driver.start()
    server.start()
    out: dict = {"node_id": args.id, "leader": False}
    code = 0
    try:
        async with asyncio.timeout(args.deadline_s):
            while not listener.done.is_set() and not driver.is_leader():
                await asyncio.sleep(0.005)
            if not listener.done.is_set():
                out["leader"] = True
                try:
                    out.update(await lead(driver, args))
                    done = driver.append([DONE])
                    await driver.wait_committed(done, COMMIT_TIMEOUT_S)
                except Exception as e:  # NotLeaderError, a commit timeout: report, do not hang
                    out["error"] = f"{type(e).__name__}: {e}"
                    code = 2
                else:
                    await wait_replicated(driver, done, LINGER_AFTER_DONE_S)
                    await asyncio.sleep(0.2)  # the answers carrying the high watermark go out
    except TimeoutError:
        out["error"] = f"deadline of {args.deadline_s} s passed"
        code = 3
    out.update(cpu_s=time.process_time() - cpu0, log_appends=raft_log.appends, log_entries=raft_log.entries,
               log_flushes=raft_log.flushes)
    with open(args.out + ".part", "w") as f:
        json.dump(out, f)
    os.replace(args.out + ".part", args.out)
    await driver.close(graceful=False)
    await server.close()
    raft_log.close()
    return code


def parse_args(argv: list[str] | None = None):
    p = argparse.ArgumentParser(prog="python -m bench.raft_node", description=__doc__.split("\n\n")[0])
    p.add_argument("--id", type=int, required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--voters", required=True,
                   help="id-uuid@host:port,... (as strom format --initial-controllers)")
    p.add_argument("--dir", required=True)
    p.add_argument("--records", type=int, default=100_000)
    p.add_argument("--batch", type=int, default=1000)
    p.add_argument("--inflight", type=int, default=1)
    p.add_argument("--linger-ms", type=int, default=DEFAULT_APPEND_LINGER_MS)
    p.add_argument("--fetch-max-entries", type=int, default=None)
    p.add_argument("--cluster-id", default="c3Ryb20tYmVuY2gtcmFmdA")
    p.add_argument("--deadline-s", type=float, default=600.0)
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)
    if args.records < 1 or args.batch < 1 or args.inflight < 1:
        p.error("--records, --batch and --inflight must be positive")
    uuid_from_str(args.cluster_id)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format=f"%(asctime)s node-{args.id} %(name)s %(levelname)s %(message)s")
    return asyncio.run(serve(args))


if __name__ == "__main__":
    sys.exit(main())
