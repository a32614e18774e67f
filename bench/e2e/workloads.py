"""librdkafka (confluent-kafka) workloads run against any broker on loopback.

* ``produce``: N records of a fixed size, round-robin over the partitions (explicit
  partition, no partitioner cost), as fast as the producer takes them; timed from the first
  produce() to flush() returning. Only failed deliveries call back into Python.
* ``consume``: the same records read back from offset 0 by an assigned consumer
  (no group), timed from assign() to the last record.
* ``latency``: a paced producer (linger.ms=0) and a consumer at the log end; each value
  starts with its CLOCK_MONOTONIC send time in ns, so a record's end-to-end latency is its
  arrival time minus that. The first second is warm-up and not counted.
* ``ack_latency``: a paced producer (linger.ms=0, given acks) alone; a record's produce
  latency is from produce() to its delivery report, served by a thread blocked in poll()
  so that a report is stamped as it arrives. Warm-up as above.

A round (``run_round``) of kind "throughput" produces and consumes on a single node; kind
"produce" only produces, on a topic of any replication factor and configs (a replicated
cluster, whose partitions' leaders are on several brokers; bench.e2e.replication).

Values are drawn from a 16-symbol alphabet: about half compressible, so lz4 has work to do
and still shrinks the wire. The broker's CPU seconds are sampled around each timed part.
"""
from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from bench.e2e.brokers import cpu_seconds, kernel_cpu_seconds
from tests.integration.cluster import REPO_ROOT

TOPIC_TIMEOUT_S = 30.0
CONSUME_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class Workload:
    record_bytes: int = 100
    partitions: int = 1
    acks: str = "1"  # "1" or "all"
    compression: str = "none"  # "none" or "lz4"
    linger_ms: int = 5
    batch_bytes: int = 1 << 20

    @property
    def label(self) -> str:
        size = f"{self.record_bytes} B" if self.record_bytes < 1024 else f"{self.record_bytes // 1024} KiB"
        batch = f"{self.batch_bytes // 1024} KiB" if self.batch_bytes < 1 << 20 else \
            f"{self.batch_bytes >> 20} MiB"
        return (f"{size}, {self.partitions} partition{'s' if self.partitions > 1 else ''}, "
                f"acks={self.acks}, {self.compression}, linger {self.linger_ms} ms, batch {batch}")

    def as_dict(self) -> dict:
        return asdict(self)


def values(size: int, count: int = 1024, seed: int = 7) -> list[bytes]:
    rng = random.Random(seed)
    alphabet = b"0123456789abcdef"
    return [bytes(rng.choices(alphabet, k=size)) for _ in range(count)]


def create_topic(bootstrap: str, topic: str, partitions: int, replication_factor: int = 1,
                 config: dict[str, str] | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    new = NewTopic(topic, partitions, replication_factor, config=config or {})
    futures = admin.create_topics([new], operation_timeout=TOPIC_TIMEOUT_S)
    futures[topic].result(TOPIC_TIMEOUT_S)
    # wait until metadata lists every partition with a leader
    deadline = time.monotonic() + TOPIC_TIMEOUT_S
    while time.monotonic() < deadline:
        md = admin.list_topics(topic, timeout=5).topics.get(topic)
        if md is not None and md.error is None and len(md.partitions) == partitions and \
                all(p.leader >= 0 for p in md.partitions.values()):
            return
        time.sleep(0.1)
    raise TimeoutError(f"topic {topic} has no leaders after {TOPIC_TIMEOUT_S} s")


def producer_config(bootstrap: str, w: Workload) -> dict:
    return {
        "bootstrap.servers": bootstrap,
        "acks": w.acks,
        "compression.type": w.compression,
        "linger.ms": w.linger_ms,
        "batch.size": w.batch_bytes,
        "message.max.bytes": max(w.batch_bytes + 65536, 1_000_000),
        "enable.idempotence": False,
        "queue.buffering.max.messages": 1_000_000,
        "queue.buffering.max.kbytes": 1 << 20,
        "delivery.report.only.error": True,
    }


@dataclass
class Timed:
    seconds: float
    records: int
    bytes: int  # value bytes
    broker_cpu_s: float
    broker_kernel_cpu_s: float = float("nan")  # the system part of broker_cpu_s (produce only)
    client_cpu_s: float = float("nan")  # this client process, user + system (produce only)

    @property
    def records_per_s(self) -> float:
        return self.records / self.seconds

    @property
    def mb_per_s(self) -> float:
        return self.bytes / self.seconds / 1e6

    @property
    def broker_cpu_s_per_mb(self) -> float:
        return self.broker_cpu_s / (self.bytes / 1e6)


def produce(bootstrap: str, broker_pid: int | list[int], topic: str, w: Workload, records: int,
            warm_partitions: int = 1) -> Timed:
    """``warm_partitions``: how many partitions get one record before timing (1: partition 0;
    all of them connects to every leader of a replicated topic)."""
    failed = []
    p = Producer({**producer_config(bootstrap, w),
                  "on_delivery": lambda err, msg: failed.append(err) if err else None})
    pool = values(w.record_bytes)
    for partition in range(warm_partitions):  # connect and learn metadata before timing
        p.produce(topic, pool[0], partition=partition)
    p.flush(TOPIC_TIMEOUT_S)
    parts = w.partitions
    produce_ = p.produce
    me = os.getpid()
    kernel0, client0 = kernel_cpu_seconds(broker_pid), cpu_seconds(me)
    cpu0, t0 = cpu_seconds(broker_pid), time.perf_counter()
    for i in range(records):
        v = pool[i & 1023]
        while True:
            try:
                produce_(topic, v, partition=i % parts)
                break
            except BufferError:
                p.poll(0.0005)
    left = p.flush(CONSUME_TIMEOUT_S)
    t1, cpu1 = time.perf_counter(), cpu_seconds(broker_pid)
    kernel1, client1 = kernel_cpu_seconds(broker_pid), cpu_seconds(me)
    if left or failed:
        raise RuntimeError(f"{left} records undelivered, {len(failed)} failed: {failed[:3]}")
    return Timed(t1 - t0, records, records * w.record_bytes, cpu1 - cpu0, kernel1 - kernel0,
                 client1 - client0)


def consume(bootstrap: str, broker_pid: int, topic: str, w: Workload, records: int) -> Timed:
    """Reads ``records`` records (beyond the one produce() sent ahead) from offset 0."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{os.getpid()}-{time.time_ns()}",
                  "enable.auto.commit": False, "enable.partition.eof": False,
                  "fetch.max.bytes": 52428800, "max.partition.fetch.bytes": 1 << 20,
                  # keep fetching while the application drains: librdkafka's defaults pause
                  # the fetcher at 100 k queued records and back off for a second
                  "queued.max.messages.kbytes": 262144, "queued.min.messages": 10_000_000,
                  "fetch.queue.backoff.ms": 0})
    want = records + 1
    got = 0
    deadline = time.monotonic() + CONSUME_TIMEOUT_S
    cpu0, t0 = cpu_seconds(broker_pid), time.perf_counter()
    c.assign([TopicPartition(topic, p, 0) for p in range(w.partitions)])
    try:
        while got < want:
            if time.monotonic() > deadline:
                raise TimeoutError(f"consumed {got} of {want} records in {CONSUME_TIMEOUT_S} s")
            batch = c.consume(10000, 1.0)
            for m in batch:  # the least per-record Python that still sees every error
                if m.error() is not None:
                    raise KafkaException(m.error())
            got += len(batch)
        t1, cpu1 = time.perf_counter(), cpu_seconds(broker_pid)
    finally:
        c.close()
    return Timed(t1 - t0, got, got * w.record_bytes, cpu1 - cpu0)  # every value is record_bytes long


@dataclass
class Latency:
    rate: int
    samples: int
    p50_ms: float
    p99_ms: float
    p999_ms: float
    max_ms: float
    broker_cpu_s: float


def latency(bootstrap: str, broker_pid: int, topic: str, rate: int, seconds: float,
            record_bytes: int = 100, warmup_s: float = 1.0) -> Latency:
    """End-to-end latency at ``rate`` records/s for ``seconds`` (after ``warmup_s``)."""
    total = int(rate * (seconds + warmup_s))
    warm = int(rate * warmup_s)
    p = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 0,
                  "enable.idempotence": False, "delivery.report.only.error": True})
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-lat-{os.getpid()}-{time.time_ns()}",
                  "enable.auto.commit": False, "enable.partition.eof": False,
                  "fetch.wait.max.ms": 500, "fetch.min.bytes": 1})
    # Warm both connections up: a record must travel before the clock starts; the timed
    # records follow it.
    p.produce(topic, b"x" * record_bytes, partition=0)
    p.flush(TOPIC_TIMEOUT_S)
    c.assign([TopicPartition(topic, 0, 0)])
    first = None
    while first is None:
        first = c.poll(1.0)
    c.assign([TopicPartition(topic, 0, first.offset() + 1)])
    pad = b"x" * max(record_bytes - 8, 0)
    arrivals = [0] * total
    sent = [0] * total

    def run_producer():
        t0 = time.monotonic_ns()
        for i in range(total):
            due = t0 + i * 1_000_000_000 // rate
            now = time.monotonic_ns()
            if due > now + 200_000:
                time.sleep((due - now) / 1e9)
            now = time.monotonic_ns()
            sent[i] = now
            p.produce(topic, i.to_bytes(8, "big") + pad, partition=0)
            p.poll(0)
        p.flush(TOPIC_TIMEOUT_S)

    got = 0
    producer = threading.Thread(target=run_producer, daemon=True)
    deadline = time.monotonic() + seconds + warmup_s + 30
    cpu0 = cpu_seconds(broker_pid)
    producer.start()
    try:
        while got < total and time.monotonic() < deadline:
            m = c.poll(0.1)  # returns with the first record (consume(n) would wait for n)
            if m is None:
                continue
            now = time.monotonic_ns()
            if m.error():
                raise KafkaException(m.error())
            arrivals[int.from_bytes(m.value()[:8], "big")] = now
            got += 1
    finally:
        producer.join(30)
        c.close()
    cpu1 = cpu_seconds(broker_pid)
    if got < total:
        raise TimeoutError(f"{got} of {total} records arrived")
    lat = sorted((arrivals[i] - sent[i]) / 1e6 for i in range(warm, total))
    n = len(lat)
    return Latency(rate, n, lat[n // 2], lat[min(n - 1, int(n * 0.99))], lat[min(n - 1, int(n * 0.999))],
                   lat[-1], cpu1 - cpu0)


def ack_latency(bootstrap: str, broker_pid: int | list[int], topic: str, rate: int, seconds: float,
                acks: str, record_bytes: int = 100, warmup_s: float = 1.0,
                config: dict | None = None) -> Latency:
    """Produce latency (produce() to delivery report) at ``rate`` records/s for ``seconds``
    (after ``warmup_s``), partition 0, linger.ms=0; ``config`` adds producer settings."""
    total = int(rate * (seconds + warmup_s))
    warm = int(rate * warmup_s)
    pad = b"x" * max(record_bytes - 8, 0)
    sent = [0] * total
    acked = [0] * total
    failed = []

    def delivered(err, msg):
        now = time.monotonic_ns()
        if err is not None:
            failed.append(err)
        else:
            acked[int.from_bytes(msg.value()[:8], "big")] = now

    p = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 0, "enable.idempotence": False,
                  "on_delivery": delivered, **(config or {})})
    p.produce(topic, b"w" * 8 + pad, partition=0, on_delivery=lambda err, msg: None)  # connect first
    p.flush(TOPIC_TIMEOUT_S)
    done = threading.Event()

    def run_producer():
        t0 = time.monotonic_ns()
        for i in range(total):
            due = t0 + i * 1_000_000_000 // rate
            now = time.monotonic_ns()
            if due > now + 200_000:
                time.sleep((due - now) / 1e9)
            sent[i] = time.monotonic_ns()
            while True:
                try:
                    p.produce(topic, i.to_bytes(8, "big") + pad, partition=0)
                    break
                except BufferError:
                    time.sleep(0.0005)
        done.set()

    producer = threading.Thread(target=run_producer, daemon=True)
    cpu0 = cpu_seconds(broker_pid)
    producer.start()
    deadline = time.monotonic() + seconds + warmup_s + 90  # a backlog drains after the last send
    while not (done.is_set() and len(p) == 0) and time.monotonic() < deadline:
        p.poll(0.05)  # returns as soon as a report is queued
    producer.join(30)
    cpu1 = cpu_seconds(broker_pid)
    missing = sum(1 for a in acked if a == 0)
    if failed or missing:
        raise RuntimeError(f"{missing} of {total} records unacknowledged, {len(failed)} failed: {failed[:3]}")
    lat = sorted((acked[i] - sent[i]) / 1e6 for i in range(warm, total))
    n = len(lat)
    return Latency(rate, n, lat[n // 2], lat[min(n - 1, int(n * 0.99))], lat[min(n - 1, int(n * 0.999))],
                   lat[-1], cpu1 - cpu0)


# ---- one round in a fresh process -----------------------------------------------------------
#
# Every round runs in its own client process (``run_round``): librdkafka instances keep
# background threads, and a long-lived client process that has made and dropped a dozen
# producers, consumers and admin clients gets measurably slower (smaller batches, more broker
# CPU per MB). A fresh process per round keeps rounds comparable.

def _latency_figures(lat: Latency) -> dict:
    return {"p50_ms": lat.p50_ms, "p99_ms": lat.p99_ms, "p999_ms": lat.p999_ms,
            "max_ms": lat.max_ms, "samples": lat.samples, "cpu_s": lat.broker_cpu_s}


def _round(spec: dict) -> dict:
    bootstrap, pid, topic = spec["bootstrap"], spec["broker_pid"], spec["topic"]
    replication_factor, config = spec.get("replication_factor", 1), spec.get("topic_config")
    if spec["kind"] == "latency":
        create_topic(bootstrap, topic, 1)
        return _latency_figures(latency(bootstrap, pid, topic, spec["rate"], spec["seconds"]))
    if spec["kind"] == "ack_latency":
        create_topic(bootstrap, topic, 1, replication_factor, config)
        lat = ack_latency(bootstrap, pid, topic, spec["rate"], spec["seconds"], spec["acks"],
                          config=spec.get("producer_config"))
        return _latency_figures(lat)
    w = Workload(**spec["workload"])
    records = spec["records"]
    if spec["kind"] == "produce":
        create_topic(bootstrap, topic, w.partitions, replication_factor, config)
        p = produce(bootstrap, pid, topic, w, records, warm_partitions=w.partitions)
        mb = p.bytes / 1e6
        return {"produce_msg_s": p.records_per_s, "produce_mb_s": p.mb_per_s,
                "produce_cpu_s_per_mb": p.broker_cpu_s_per_mb,
                "produce_kernel_cpu_s_per_mb": p.broker_kernel_cpu_s / mb,
                "client_cpu_s_per_mb": p.client_cpu_s / mb}
    from bench.e2e import wire
    create_topic(bootstrap, topic, w.partitions)
    p = produce(bootstrap, pid, topic, w, records)
    c = consume(bootstrap, pid, topic, w, records)
    ends = end_offsets(bootstrap, topic, w.partitions)
    cpu0 = cpu_seconds(pid)
    seconds, wire_bytes, fetches = wire.consume(bootstrap, topic, w.partitions, ends)
    wire_cpu = cpu_seconds(pid) - cpu0
    return {
        "produce_msg_s": p.records_per_s, "produce_mb_s": p.mb_per_s,
        "produce_cpu_s_per_mb": p.broker_cpu_s_per_mb,
        "consume_msg_s": c.records_per_s, "consume_mb_s": c.mb_per_s,
        "consume_cpu_s_per_mb": c.broker_cpu_s_per_mb,
        "wire_mb_s": wire_bytes / seconds / 1e6, "wire_fetches": fetches,
        "wire_cpu_s_per_mb": wire_cpu / (wire_bytes / 1e6),
    }


def end_offsets(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-offsets"})
    try:
        return {p: c.get_watermark_offsets(TopicPartition(topic, p), 10)[1] for p in range(partitions)}
    finally:
        c.close()


def delete_topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # held: a dropped client cancels its requests
    try:
        admin.delete_topics([topic], operation_timeout=TOPIC_TIMEOUT_S)[topic].result(TOPIC_TIMEOUT_S)
    except Exception as e:  # the next round uses a new topic: a leftover costs only disk/memory
        print(f"deleting {topic} failed: {e}", file=sys.stderr)


def run_round(spec: dict, timeout_s: float = 600.0) -> dict:
    """One round (``spec["kind"]``: "throughput", "produce", "latency" or "ack_latency") in a
    fresh client process; the topic is deleted afterwards, whatever happened."""
    try:
        out = subprocess.run([sys.executable, "-m", "bench.e2e.workloads", json.dumps(spec)],
                             cwd=REPO_ROOT, capture_output=True, text=True, timeout=timeout_s)
    finally:
        delete_topic(spec["bootstrap"], spec["topic"])
    if out.returncode != 0:
        raise RuntimeError(f"round {spec['kind']} on {spec['bootstrap']} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    print(json.dumps(_round(json.loads(sys.argv[1]))))
