"""The transaction coordinator's gauges as the JMX exporter renders Kafka's MBeans: the marker
channel's UnknownDestinationQueueSize and LogAppendRetryQueueSize, and TransactionStateManager's
partition-load-time-avg/max over the last window of loads (NaN when none)."""
from __future__ import annotations

import math
import time
from collections import deque
from types import SimpleNamespace

from prometheus_client.parser import text_string_to_metric_families

from broker.transactions.coordinator import MarkerRequest
from broker.transactions.markers import MarkerChannel
from broker.transactions.runtime import LOAD_TIME_WINDOW_S, load_time_stats, register_metrics
from protocol.metrics import Registry

UNKNOWN = "kafka_coordinator_transaction_transactionmarkerchannelmanager_unknowndestinationqueuesize"
RETRY = "kafka_coordinator_transaction_transactionmarkerchannelmanager_logappendretryqueuesize"


def partition(leader: int):
    return SimpleNamespace(leader=leader)


def channel_with(leaders: dict[tuple[str, int], int]) -> MarkerChannel:
    topics: dict[str, SimpleNamespace] = {}
    for (topic, p), leader in leaders.items():
        topics.setdefault(topic, SimpleNamespace(partitions={})).partitions[p] = partition(leader)
    runtime = SimpleNamespace(broker=SimpleNamespace(image=SimpleNamespace(topics=topics)))
    return MarkerChannel(runtime)


def marker(tid: str, partitions: list[tuple[str, int]]) -> MarkerRequest:
    return MarkerRequest(tid, 1000, 0, True, 0, partitions, 0)


def test_unknown_destination_queue_counts_transactions_waiting_for_a_partitions_leader():
    channel = channel_with({("orders", 0): 1, ("orders", 1): -1, ("audit", 0): -1})
    channel.add(marker("known", [("orders", 0)]))
    channel.add(marker("one-unknown", [("orders", 0), ("orders", 1)]))
    channel.add(marker("two-unknown", [("orders", 1), ("audit", 0)]))
    assert channel.unknown_destination_size() == 2
    channel.pending["one-unknown"].in_flight.add(("orders", 1))  # sent: no longer waiting
    assert channel.unknown_destination_size() == 1


def test_partition_load_time_is_the_avg_and_max_of_the_loads_in_the_window():
    loads: deque[tuple[float, float]] = deque([(100.0, 40.0), (150.0, 10.0), (155.0, 25.0)])
    assert load_time_stats(loads, 155.0) == {"avg": 25.0, "max": 40.0}
    assert load_time_stats(loads, 100.0 + LOAD_TIME_WINDOW_S) == {"avg": 17.5, "max": 25.0}
    stats = load_time_stats(loads, 155.0 + LOAD_TIME_WINDOW_S)
    assert math.isnan(stats["avg"]) and math.isnan(stats["max"]) and not loads


def test_the_gauges_are_read_from_the_runtime_on_scrape_under_kafkas_names():
    channel = channel_with({("orders", 0): -1})
    runtime = SimpleNamespace(markers=channel, append_retries=set(), load_times=deque())
    registry = Registry()
    register_metrics(registry, runtime)

    def scrape() -> dict[str, float]:
        text = registry.render().decode()
        return {s.name: s.value for f in text_string_to_metric_families(text) for s in f.samples}

    before = scrape()
    assert before[UNKNOWN] == 0
    assert before[RETRY] == 0
    assert math.isnan(before["kafka_server_transaction_coordinator_metrics_partition_load_time_max"])
    channel.add(marker("t", [("orders", 0)]))
    runtime.append_retries.update({1, 2})
    runtime.load_times.append((time.monotonic(), 12.0))
    after = scrape()
    assert after[UNKNOWN] == 1
    assert after[RETRY] == 2
    assert after["kafka_server_transaction_coordinator_metrics_partition_load_time_max"] == 12.0
    assert after["kafka_server_transaction_coordinator_metrics_partition_load_time_avg"] == 12.0
