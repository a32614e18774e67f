"""Replication benchmarks on 3 controllers + 3 brokers on loopback (bench/e2e/replication.py):

* ``test_replicated_produce_throughput``: 1 KiB records over 6 partitions, RF=1 acks=1 and RF=3
  acks=all (min.insync.replicas 2) in alternating rounds; msg/s and the RF=3/RF=1 ratio.
* ``test_acks_all_produce_latency``: produce() to delivery report at 5 k msg/s, linger.ms=0,
  RF=3 acks=all beside RF=1 acks=1.
* ``test_leader_failover[kill9|sigterm]``: the stall of an idempotent acks=all producer when a
  partition leader is killed (or shut down) STROM_BENCH_FAILOVERS times (20).
* ``test_controller_failover``: kill -9 of the active controller STROM_BENCH_FAILOVERS times: the
  time to a new leader that committed its epoch.

The figures go to extra_info (bench/report.py prints them); the report with every figure's range
and the machine's load comes from ``python -m bench.e2e --replication``. With
``--benchmark-disable`` (the default test run) each body runs once on a few thousand records,
one round and one fault, as a test of the measuring code.
"""
from __future__ import annotations

import os
import random

import pytest

from bench.e2e import replication as R
from bench.e2e import workloads as W
from tests.integration.replicated_cluster import ReplicatedCluster

pytest.importorskip("confluent_kafka")

FAILOVERS = int(os.environ.get("STROM_BENCH_FAILOVERS", "20"))
SEED = int(os.environ.get("STROM_BENCH_SEED", "1"))


@pytest.fixture(scope="module")
def cluster():
    with ReplicatedCluster() as c:
        yield c


@pytest.mark.timeout(600)
def test_replicated_produce_throughput(benchmark, size, cluster):
    w = W.Workload(record_bytes=1024, partitions=6)
    records, reps = size((R.records_for(w, quick=True), 3), (2_000, 1))
    e = benchmark.pedantic(R.throughput, args=(cluster, w, records, reps), rounds=1, iterations=1)
    assert e["rf1"]["produce_msg_s"]["median"] > 0 and e["rf3"]["produce_msg_s"]["median"] > 0
    assert e["ratio"]["pair_min"] <= e["ratio"]["pair_max"]
    benchmark.extra_info.update({"rf1_msg_s": e["rf1"]["produce_msg_s"]["median"],
                                 "rf3_msg_s": e["rf3"]["produce_msg_s"]["median"],
                                 "rf3_over_rf1": e["ratio"]["ratio"], "pairs": e["ratio"]["pairs"]})


@pytest.mark.timeout(300)
def test_acks_all_produce_latency(benchmark, size, cluster):
    rate, seconds = size((R.LATENCY_RATE, 5.0), (500, 0.5))
    e = benchmark.pedantic(R.latency, args=(cluster, rate, seconds, 1), rounds=1, iterations=1)
    s = {k: v["median"] for k, v in e["rf3"].items()}
    assert 0 < s["p50_ms"] <= s["p99_ms"] <= s["p999_ms"] <= s["max_ms"]
    ratio = e["vs_rf1"]["rf3"]
    assert ratio["p99_ms"]["pair_min"] <= ratio["p99_ms"]["pair_max"]
    benchmark.extra_info.update({"broker": "3 brokers, RF=3 acks=all", "rate": rate, **s,
                                 "rf1_acks1_p99_ms": e["rf1"]["p99_ms"]["median"],
                                 "p50_over_rf1_acks1": ratio["p50_ms"]["ratio"],
                                 "p99_over_rf1_acks1": ratio["p99_ms"]["ratio"]})


def _failover_info(d: dict) -> dict:
    return {"kills": d["n"], "failover_min_s": d["min"], "failover_p50_s": d["p50"],
            "failover_p90_s": d["p90"], "failover_p99_s": d["p99"], "failover_max_s": d["max"],
            "failovers_s": d["values"]}


@pytest.mark.timeout(120 + 60 * FAILOVERS)
@pytest.mark.parametrize("how", ["kill9", "sigterm"])
def test_leader_failover(benchmark, size, cluster, how):
    trials = size(FAILOVERS, 1)
    e = benchmark.pedantic(R.leader_failover, args=(cluster, how, trials, random.Random(SEED)),
                           rounds=1, iterations=1)
    assert len(e["trials"]) == trials
    assert e["delivery_errors"] == 0 and e["unacknowledged"] == 0, e["first_errors"]
    assert all(t["led"] for t in e["trials"]), "a victim that led nothing measures nothing"
    benchmark.extra_info.update({"how": how, **_failover_info(e["stall_s"])})


@pytest.mark.timeout(120 + 30 * FAILOVERS)
def test_controller_failover(benchmark, size, cluster):
    trials = size(FAILOVERS, 1)
    e = benchmark.pedantic(R.controller_failover, args=(cluster, trials, random.Random(SEED)),
                           rounds=1, iterations=1)
    assert len(e["trials"]) == trials
    assert all(t["new_leader"] != t["victim"] for t in e["trials"])
    assert e["delivery_errors"] == 0 and e["unacknowledged"] == 0, e["first_errors"]
    benchmark.extra_info.update({**_failover_info(e["elected_s"]),
                                 "longest_ack_gap_p99_s": e["longest_ack_gap_s"]["p99"]})
