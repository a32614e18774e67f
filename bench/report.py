"""Turn a pytest-benchmark JSON file into throughput figures (MB/s, records/s, ns/op).

    python -m bench.report .benchmarks/latest.json
"""
from __future__ import annotations

import json
import platform
import sys


def rows(data: dict) -> list[tuple[str, str, str]]:
    out = []
    for bench in sorted(data["benchmarks"], key=lambda b: b["name"]):
        stats, extra = bench["stats"], bench.get("extra_info", {})
        median = stats["median"]
        # Raft runs (test_bench_raft.py): one round times a whole quorum run, processes and all;
        # the figures are the ones measured inside it.
        if "produce_msg_s" in extra:  # test_bench_e2e.py: one round, figures measured inside
            figure = (f"{extra['broker']}: produce {extra['produce_msg_s']:,.0f} msg/s "
                      f"{extra['produce_mb_s']:.0f} MB/s ({extra['produce_cpu_s_per_mb'] * 1e3:.2f} ms "
                      f"broker CPU/MB), consume {extra['consume_mb_s']:.0f} MB/s client, "
                      f"{extra['wire_mb_s']:.0f} MB/s wire")
        elif "rf3_over_rf1" in extra:  # test_bench_replication.py
            figure = (f"RF=1 acks=1 {extra['rf1_msg_s']:,.0f} msg/s, RF=3 acks=all {extra['rf3_msg_s']:,.0f} "
                      f"msg/s: {extra['rf3_over_rf1']:.2f}x")
        elif "p999_ms" in extra:
            figure = (f"{extra['broker']} at {extra['rate']:,} msg/s: p50 {extra['p50_ms']:.2f} ms "
                      f"p99 {extra['p99_ms']:.2f} ms p99.9 {extra['p999_ms']:.2f} ms")
        elif "records_per_s" in extra:
            figure = (f"{extra['records_per_s']:,.0f} records/s, {extra['mb_per_s']:.2f} MB/s, commit "
                      f"p50 {extra['latency_p50_ms']:.2f} ms p99 {extra['latency_p99_ms']:.2f} ms")
        elif "failover_p50_s" in extra:
            figure = (f"failover min {extra['failover_min_s']:.2f} s p50 {extra['failover_p50_s']:.2f} s "
                      f"p90 {extra['failover_p90_s']:.2f} s max {extra['failover_max_s']:.2f} s")
        elif "bytes" in extra:
            figure = f"{extra['bytes'] / median / 1e6:,.0f} MB/s"
        elif "records" in extra:
            figure = f"{extra['records'] / median / 1e6:,.2f} M records/s"
        elif "lookups_per_round" in extra:
            figure = f"{median / extra['lookups_per_round'] * 1e9:,.0f} ns/lookup"
        else:
            figure = f"{1 / median:,.0f} ops/s"
        out.append((bench["name"], f"{median * 1e6:,.1f} µs", figure))
    return out


def main(path: str) -> None:
    with open(path) as f:
        data = json.load(f)
    machine = data.get("machine_info", {})
    cpu = machine.get("cpu", {}).get("brand_raw", platform.processor())
    print(f"Machine: {cpu}, {machine.get('cpu', {}).get('count', '?')} cores, "
          f"Python {machine.get('python_version', platform.python_version())}\n")
    print("| benchmark | median | throughput |")
    print("|---|---|---|")
    for name, median, figure in rows(data):
        print(f"| `{name}` | {median} | {figure} |")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else ".benchmarks/latest.json")
