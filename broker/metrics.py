"""The broker's metrics, under Kafka's MBean names as the JMX exporter's rules render them
(protocol/metrics.py has the naming). What moves with requests is counted where it happens, in
plain integers (the Dispatcher's RequestMetrics, the ReplicaManager's BrokerTopicStats and ISR
changes); the rest is read from the broker's state at each scrape.

Each family's help text names the MBean it stands for.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from protocol import messages
from protocol.metrics import BrokerTopicStats, Registry, RequestMetrics

# Kafka's BrokerState values (metadata's BrokerState enum).
BROKER_STATE_STARTING, BROKER_STATE_RUNNING, BROKER_STATE_PENDING_CONTROLLED_SHUTDOWN = 1, 3, 6


def register_broker_metrics(registry: Registry, replicas: Any, fetch_waiters: Any,
                            broker_state: Callable[[], int], logs: Any = None) -> RequestMetrics:
    """Register the broker's families on ``registry``, set the ReplicaManager's topic stats, and
    answer the RequestMetrics the Dispatcher counts with. ``logs`` (the LogManager): each log
    flush's time goes to LogFlushRateAndTimeMs."""
    replicas.topic_stats = BrokerTopicStats(registry)
    flushes = registry.histogram("kafka_log_logflushstats_logflushrateandtimems",
                                 "Log flush times in ms (LogFlushStats LogFlushRateAndTimeMs)")[()]
    if logs is not None:
        logs.on_flush = flushes.observe
    request_metrics = RequestMetrics(registry, messages.API_NAMES)

    def partitions() -> list[Any]:
        return list(replicas.partitions.values())

    def offline() -> int:
        return sum(1 for p in partitions() if replicas._offline(p))

    registry.gauge("kafka_server_replicamanager_partitioncount", "Partitions on this broker (PartitionCount)",
                   lambda: len(replicas.partitions))
    registry.gauge("kafka_server_replicamanager_leadercount", "Partitions this broker leads (LeaderCount)",
                   lambda: sum(1 for p in partitions() if p.is_leader))
    registry.gauge("kafka_server_replicamanager_underreplicatedpartitions",
                   "Partitions led here whose ISR is smaller than their replicas (UnderReplicatedPartitions)",
                   lambda: sum(1 for p in partitions() if p.is_under_replicated))
    registry.gauge("kafka_server_replicamanager_underminisrpartitioncount",
                   "Partitions led here whose ISR is below min.insync.replicas (UnderMinIsrPartitionCount)",
                   lambda: sum(1 for p in partitions() if p.is_under_min_isr))
    registry.gauge("kafka_server_replicamanager_offlinereplicacount",
                   "Replicas on offline log dirs (OfflineReplicaCount)", offline)
    registry.counter_fn("kafka_server_replicamanager_isrshrinks_total",
                        "ISR shrinks committed (IsrShrinksPerSec)", lambda: replicas.isr_shrinks)
    registry.counter_fn("kafka_server_replicamanager_isrexpands_total",
                        "ISR expansions committed (IsrExpandsPerSec)", lambda: replicas.isr_expands)
    registry.gauge("kafka_server_delayedoperationpurgatory_purgatorysize",
                   "Requests waiting: acks=all produces for replication, fetches for data (PurgatorySize)",
                   lambda: {("Produce",): len(replicas.purgatory),
                            ("Fetch",): fetches_watched(fetch_waiters)},
                   ("delayedOperation",))
    registry.gauge("kafka_server_kafkaserver_brokerstate",
                   "Kafka's BrokerState: 1 starting, 3 running, 6 pending controlled shutdown (BrokerState)",
                   broker_state)
    return request_metrics


def fetches_watched(fetch_waiters: Any) -> int:
    """Waiting fetches counted once per partition each watches, as Kafka's PurgatorySize counts
    an operation once per key it watches."""
    return sum(len(futures) for waiting in (fetch_waiters._waiting, fetch_waiters._replicas)
               for futures in list(waiting.values()))
