"""Transactional produce against idempotent produce on one node (KIP-98's cost), as ratios of
rounds run back to back in one run.

``test_transactional_produce_ratio[100|1000|10000]``: the same records (100-byte values, one
partition) by confluent-kafka with the same producer settings on every side (acks=all,
enable.idempotence, linger.ms 5, batch.size 1 MiB, no compression), each round a fresh
client process on a fresh topic, three kinds alternating:

* ``idempotent``: every record produced, then one flush (the baseline: the stream a
  non-transactional application writes);
* ``idempotent_flush``: the same, flushed after every ``txn`` records (what a transaction's
  commit waits for, without the transaction);
* ``transactional``: begin_transaction, ``txn`` records, commit_transaction, repeated.

Every producer is connected and warm before the clock starts (one record delivered, and for
the transactional one init_transactions and one committed transaction); the clock runs from
the first timed produce() to the last flush or commit returning. Figures: msg/s of each kind,
the transactional/idempotent ratio (Kafka's is close to 1 for large transactions) and its
decomposition: idempotent_flush/idempotent (the cost of waiting for the acks every ``txn``
records) times transactional/idempotent_flush (what the transaction adds: AddPartitionsToTxn,
EndTxn and the markers the coordinator writes before answering it); the broker's and the
client's CPU per record.

With ``--benchmark-disable`` (the default test run) each body runs one round of each kind on
a few hundred records.
"""
from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import time

import pytest

from bench.conftest import STROM_BROKER_GROUP
from bench.e2e.brokers import StromBroker, cpu_seconds
from bench.e2e.failover import paired_ratio
from tests.integration.cluster import REPO_ROOT

pytest.importorskip("confluent_kafka")

pytestmark = [pytest.mark.processes, pytest.mark.xdist_group(STROM_BROKER_GROUP)]

RECORD_BYTES = 100
KINDS = ("idempotent", "idempotent_flush", "transactional")
ROUND_TIMEOUT_S = 600.0
_topics = itertools.count()


@pytest.fixture(scope="module")
def broker(strom_broker):
    with strom_broker({"transaction.state.log.num.partitions": 5}) as b:
        yield b


def producer_config(bootstrap: str) -> dict:
    return {"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 5,
            "batch.size": 1 << 20, "message.max.bytes": 1 << 21, "compression.type": "none",
            "queue.buffering.max.messages": 1_000_000, "queue.buffering.max.kbytes": 1 << 20,
            "delivery.report.only.error": True}


def _round(spec: dict) -> dict:
    """One timed round in this (fresh) process: ``spec["kind"]`` over ``spec["records"]``."""
    from confluent_kafka import Producer

    from bench.e2e import workloads as W

    bootstrap, topic, kind = spec["bootstrap"], spec["topic"], spec["kind"]
    records, txn = spec["records"], spec["txn"]
    W.create_topic(bootstrap, topic, 1)
    failed: list = []
    config = {**producer_config(bootstrap),
              "on_delivery": lambda err, msg: failed.append(err) if err else None}
    if kind == "transactional":
        config["transactional.id"] = f"bench-{topic}"
    p = Producer(config)
    pool = W.values(RECORD_BYTES)
    if kind == "transactional":  # warm: the coordinator found, the producer id and a transaction
        p.init_transactions(W.TOPIC_TIMEOUT_S)
        p.begin_transaction()
        p.produce(topic, pool[0], partition=0)
        p.commit_transaction(W.TOPIC_TIMEOUT_S)
    else:
        p.produce(topic, pool[0], partition=0)
        p.flush(W.TOPIC_TIMEOUT_S)
    produce_, poll = p.produce, p.poll
    me, broker_pid = os.getpid(), spec["broker_pid"]
    cpu0, client0, t0 = cpu_seconds(broker_pid), cpu_seconds(me), time.perf_counter()
    for start in range(0, records, txn):
        if kind == "transactional":
            p.begin_transaction()
        for i in range(start, min(start + txn, records)):
            while True:
                try:
                    produce_(topic, pool[i & 1023], partition=0)
                    break
                except BufferError:
                    poll(0.0005)
        if kind == "transactional":
            p.commit_transaction(W.CONSUME_TIMEOUT_S)
        elif kind == "idempotent_flush":
            if p.flush(W.CONSUME_TIMEOUT_S):
                raise RuntimeError("records left undelivered by flush")
    left = p.flush(W.CONSUME_TIMEOUT_S)
    t1, cpu1, client1 = time.perf_counter(), cpu_seconds(broker_pid), cpu_seconds(me)
    if left or failed:
        raise RuntimeError(f"{left} records undelivered, {len(failed)} failed: {failed[:3]}")
    transactions = -(-records // txn)
    return {"msg_s": records / (t1 - t0), "seconds": t1 - t0, "ms_per_txn": (t1 - t0) / transactions * 1e3,
            "broker_cpu_ms_per_txn": (cpu1 - cpu0) / transactions * 1e3,
            "broker_cpu_us_per_record": (cpu1 - cpu0) / records * 1e6,
            "client_cpu_us_per_record": (client1 - client0) / records * 1e6}


def run_round(broker: StromBroker, kind: str, records: int, txn: int) -> dict:
    """One round in a fresh client process on a fresh topic, deleted afterwards."""
    from bench.e2e import workloads as W

    spec = {"bootstrap": broker.bootstrap, "broker_pid": broker.pid, "topic": f"txn-bench-{next(_topics)}",
            "kind": kind, "records": records, "txn": txn}
    try:
        out = subprocess.run([sys.executable, "-m", "bench.test_bench_transactions", json.dumps(spec)],
                             cwd=REPO_ROOT, capture_output=True, text=True, timeout=ROUND_TIMEOUT_S)
    finally:
        W.delete_topic(broker.bootstrap, spec["topic"])
    if out.returncode != 0:
        raise RuntimeError(f"round {kind} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def compare(broker: StromBroker, txn: int, records: int, reps: int) -> dict:
    """``reps`` rounds of each kind, alternating; the medians and the paired ratios."""
    rounds: dict[str, list[dict]] = {k: [] for k in KINDS}
    loads = [os.getloadavg()[0]]
    for _ in range(reps):
        for kind in KINDS:
            rounds[kind].append(run_round(broker, kind, records, txn))
        loads.append(os.getloadavg()[0])

    def rate(kind: str) -> list[float]:
        return [r["msg_s"] for r in rounds[kind]]

    def median(kind: str, field: str) -> float:
        values = sorted(r[field] for r in rounds[kind])
        return values[len(values) // 2]

    return {
        "txn_records": txn, "records": records, "reps": reps,
        **{f"{k}_msg_s": median(k, "msg_s") for k in KINDS},
        **{f"{k}_broker_cpu_us_per_record": median(k, "broker_cpu_us_per_record") for k in KINDS},
        **{f"{k}_client_cpu_us_per_record": median(k, "client_cpu_us_per_record") for k in KINDS},
        **{f"{k}_ms_per_txn": median(k, "ms_per_txn") for k in KINDS},
        **{f"{k}_broker_cpu_ms_per_txn": median(k, "broker_cpu_ms_per_txn") for k in KINDS},
        "txn_over_idempotent": paired_ratio(rate("transactional"), rate("idempotent")),
        "flush_over_idempotent": paired_ratio(rate("idempotent_flush"), rate("idempotent")),
        "txn_over_flush": paired_ratio(rate("transactional"), rate("idempotent_flush")),
        "loadavg_1m": loads,
    }


@pytest.mark.timeout(1800)
@pytest.mark.parametrize("txn", [100, 1000, 10_000])
def test_transactional_produce_ratio(benchmark, size, broker, txn):
    # at least ~2 s a round at the real size, where a round of 100,000 records takes 0.3 s
    records, reps = size(({100: 100_000, 1000: 500_000}.get(txn, 1_000_000), 5), (max(txn, 300), 1))
    e = benchmark.pedantic(compare, args=(broker, txn, records, reps), rounds=1, iterations=1)
    assert all(e[f"{k}_msg_s"] > 0 for k in KINDS)
    assert e["txn_over_idempotent"]["pair_min"] <= e["txn_over_idempotent"]["pair_max"]
    benchmark.extra_info.update({**{k: v for k, v in e.items() if not isinstance(v, dict)},
                                 **{k: v["ratio"] for k, v in e.items() if isinstance(v, dict)},
                                 **{f"{k}_pairs": v["pairs"] for k, v in e.items() if isinstance(v, dict)}})


if __name__ == "__main__":
    print(json.dumps(_round(json.loads(sys.argv[1]))))
