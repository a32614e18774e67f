"""A steady producer, and what it sees when a leader fails (bench.e2e.replication's trials).

``SteadyWriter`` is an idempotent acks=all confluent-kafka producer writing ``rate`` records/s
round-robin over a topic's partitions from one thread, while a second thread serves its delivery
reports as they come (``poll`` returns as soon as one is queued), so each acknowledgement is
stamped within a wake-up of its arrival. Every value starts with the record's sequence number,
which finds its send time. What was acknowledged goes into an ``AckLog``:

| field             | what                                                                   |
|-------------------|------------------------------------------------------------------------|
| sent[p][i]        | CLOCK_MONOTONIC seconds when the i-th record acknowledged on partition |
|                   | p was handed to produce()                                              |
| acked[p][i]       | when its acknowledgement reached the application                       |

Invariant: ``acked[p]`` never decreases (one thread appends, stamping with a monotonic clock),
so a window of it is found by bisection.

The stall of a fault at t0 (``ResumeWatch``): the time until every partition the victim led has
acknowledged a record *sent at or after t0*, i.e. the latest over those partitions of the first
such acknowledgement, minus t0. Records sent before t0 do not count: an acknowledgement the dead
leader had written before it died can reach the client after t0 and would hide the stall.

``longest_gap``: the longest time any partition went without an acknowledgement inside a window
(controller failover trials: the brokers should keep acknowledging while the quorum elects).
"""
from __future__ import annotations

import bisect
import statistics
import threading
import time
from collections.abc import Iterable, Sequence

# ---- pure helpers ------------------------------------------------------------------------------


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile, q in [0, 100]: with fewer than 100 values p99 is the maximum."""
    s = sorted(values)
    if not s:
        raise ValueError("no values")
    return s[min(len(s), max(1, int(-(-len(s) * q // 100)))) - 1]


def distribution(values: Sequence[float], digits: int = 4) -> dict:
    """{"n", "min", "p50", "p90", "p99", "max", "mean", "values"} of a list of durations."""
    return {"n": len(values), "min": round(min(values), digits),
            "p50": round(percentile(values, 50), digits), "p90": round(percentile(values, 90), digits),
            "p99": round(percentile(values, 99), digits), "max": round(max(values), digits),
            "mean": round(statistics.fmean(values), digits), "values": [round(v, digits) for v in values]}


def paired_ratio(numerators: Sequence[float], denominators: Sequence[float]) -> dict:
    """The ratio of medians, and the range of the ratios of rounds run back to back (the i-th
    numerator round right after the i-th denominator round, so each pair shares the box's mood)."""
    if len(numerators) != len(denominators) or not numerators:
        raise ValueError("one numerator per denominator, at least one pair")
    pairs = [n / d for n, d in zip(numerators, denominators, strict=True)]
    return {"ratio": statistics.median(numerators) / statistics.median(denominators),
            "pair_min": min(pairs), "pair_max": max(pairs), "pairs": pairs}


class AckLog:
    """Per partition, the send and acknowledgement times of every acknowledged record, in the
    order the acknowledgements came (see the module's table)."""

    def __init__(self, partitions: int) -> None:
        self.sent: list[list[float]] = [[] for _ in range(partitions)]
        self.acked: list[list[float]] = [[] for _ in range(partitions)]

    def add(self, partition: int, sent: float, acked: float) -> None:
        # acked first: a reader that sees sent[p][i] also sees acked[p][i]
        self.acked[partition].append(acked)
        self.sent[partition].append(sent)

    def count(self) -> int:
        return sum(len(s) for s in self.sent)

    def first_at_or_after(self, partition: int, t: float) -> int:
        """The index of the first acknowledgement at or after ``t``."""
        return bisect.bisect_left(self.acked[partition], t)


class ResumeWatch:
    """When every one of ``partitions`` has acknowledged a record sent at or after ``t0``.

    ``check()`` may be called as often as wanted while the log grows: each call scans only the
    acknowledgements that arrived since the last one."""

    def __init__(self, log: AckLog, partitions: Iterable[int], t0: float) -> None:
        self.log = log
        self.t0 = t0
        self.cursor = {p: log.first_at_or_after(p, t0) for p in partitions}
        self.resumed: dict[int, float] = {}

    def check(self) -> float | None:
        """The stall in seconds once every partition has resumed, else None."""
        for p, i in self.cursor.items():
            if p in self.resumed:
                continue
            sent, acked = self.log.sent[p], self.log.acked[p]
            n = len(sent)
            while i < n and sent[i] < self.t0:
                i += 1
            self.cursor[p] = i
            if i < n:
                self.resumed[p] = acked[i]
        if len(self.resumed) < len(self.cursor):
            return None
        return max(self.resumed.values(), default=self.t0) - self.t0

    def per_partition(self) -> dict[int, float]:
        return {p: t - self.t0 for p, t in sorted(self.resumed.items())}


def longest_gap(log: AckLog, partitions: Iterable[int], start: float, end: float) -> float:
    """The longest stretch of [start, end] in which one of ``partitions`` acknowledged nothing."""
    worst = 0.0
    for p in partitions:
        acked = log.acked[p]
        previous = start
        for i in range(log.first_at_or_after(p, start), len(acked)):
            if acked[i] > end:
                break
            worst = max(worst, acked[i] - previous)
            previous = acked[i]
        worst = max(worst, end - previous)
    return worst


# ---- the producer ------------------------------------------------------------------------------


class SteadyWriter:
    """An idempotent acks=all producer at ``rate`` records/s over ``partitions`` (see above).

    Client settings are librdkafka's defaults but for acks, idempotence, linger.ms 5 (as the
    throughput workloads) and a long message.timeout.ms: a record is retried across failovers,
    never failed."""

    SEQ_BYTES = 8

    def __init__(self, bootstrap: str, topic: str, partitions: int, rate: int = 2000,
                 value_bytes: int = 100, **config) -> None:
        from confluent_kafka import Producer

        self.topic = topic
        self.partitions = partitions
        self.rate = rate
        self.pad = b"v" * max(0, value_bytes - self.SEQ_BYTES)
        self.log = AckLog(partitions)
        self.errors: list[str] = []
        self.sent_at: list[float] = []
        self.producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                                  "acks": "all", "linger.ms": 5, "message.timeout.ms": 120000,
                                  "log_level": 2,  # the faults' refused connections are expected
                                  "on_delivery": self._delivered, **config})
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._produce, daemon=True, name="steady-produce"),
                         threading.Thread(target=self._poll, daemon=True, name="steady-poll")]

    def _delivered(self, err, msg) -> None:
        seq = int.from_bytes(msg.value()[:self.SEQ_BYTES], "big")
        if err is not None:
            self.errors.append(f"{msg.partition()}:{seq}:{err.name()}")
        else:
            self.log.add(msg.partition(), self.sent_at[seq], time.monotonic())

    def _produce(self) -> None:
        produce, sent_at, parts = self.producer.produce, self.sent_at, self.partitions
        started = time.monotonic()
        seq = 0
        while not self._stop.is_set():
            due = int((time.monotonic() - started) * self.rate)
            while seq < due:
                sent_at.append(time.monotonic())
                try:
                    produce(self.topic, seq.to_bytes(self.SEQ_BYTES, "big") + self.pad, partition=seq % parts)
                except BufferError:  # the queue is full (a long stall): try this one again later
                    sent_at.pop()
                    break
                seq += 1
            time.sleep(0.002)

    def _poll(self) -> None:
        while not self._stop.is_set():
            self.producer.poll(0.05)

    def start(self) -> SteadyWriter:
        for t in self._threads:
            t.start()
        return self

    def stop(self, timeout: float = 120.0) -> int:
        """Stop producing; wait for every record's report. The number still unacknowledged."""
        self._stop.set()
        for t in self._threads:
            t.join(30)
        left = self.producer.flush(timeout)
        # The producer holds our callback and so us: drop it now, or its threads keep
        # reconnecting to every broker the next trials stop until a garbage collection.
        self.producer = None
        return left
