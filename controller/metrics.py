"""The controller's metrics, under the names Prometheus' JMX exporter gives Kafka's MBeans with
Strimzi's rules (``kafka.controller:type=KafkaController,name=X`` becomes
``kafka_controller_kafkacontroller_x``), computed from the metadata image on scrape.

``controller_values(image, active)`` is pure. As Kafka's ControllerMetadataMetricsPublisher, a
partition is offline when it has no leader and imbalanced when its leader is not its first
replica; a broker is fenced or active (unfenced). The counts are served by every controller;
ActiveControllerCount is 1 on the active controller only, so its sum over the quorum is 1.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from metadata.image import MetadataImage
from raft.metrics import PREFIX as RAFT_PREFIX
from raft.metrics import RAFT_NAMES, RaftTimings, current_state, raft_values

PREFIX = "kafka_controller_kafkacontroller_"
NO_LEADER = -1


def controller_values(image: MetadataImage, active: bool) -> dict[str, int]:
    partitions = offline = imbalanced = 0
    for topic in image.topics.values():
        for p in topic.partitions.values():
            partitions += 1
            if p.leader == NO_LEADER:
                offline += 1
            if p.replicas and p.replicas[0] != p.leader:
                imbalanced += 1
    fenced = sum(1 for b in image.brokers.values() if b.fenced)
    values = {
        "activecontrollercount": 1 if active else 0,
        "globaltopiccount": len(image.topics),
        "globalpartitioncount": partitions,
        "offlinepartitionscount": offline,
        "preferredreplicaimbalancecount": imbalanced,
        "fencedbrokercount": fenced,
        "activebrokercount": len(image.brokers) - fenced,
        "lastappliedrecordoffset": image.last_offset,
    }
    return {PREFIX + name: value for name, value in values.items()}


def register(registry, controller, timings: RaftTimings | None = None) -> None:
    """Register the controller's gauges and its KRaft replica's in the process's registry
    (protocol/metrics.py's Registry), each computed when scraped."""
    def active() -> bool:
        raft = controller.raft
        return raft is not None and getattr(raft, "core", None) is not None and raft.is_leader()

    for name in controller_values(MetadataImage(), False):
        registry.gauge(name, "Kafka's kafka.controller:type=KafkaController gauge",
                       lambda name=name: controller_values(controller.state, active())[name])
    register_raft(registry, lambda: controller.raft, timings)


def register_raft(registry, driver: Callable[[], Any], timings: RaftTimings | None = None) -> None:
    """raft-metrics as the JMX exporter with Strimzi's rules renders them: current-state a 1
    labelled with the state, the others gauges (append-records-total and the -max latencies
    gauges too: the registry's counters are its own plain counts). ``driver()`` is the
    RaftDriver, None before it exists; nothing is served for a replica not started. The
    latencies and appended records are the driver's own ``timings`` unless ``timings`` is given."""
    def values() -> dict[str, float]:
        raft = driver()
        if raft is None or getattr(raft, "core", None) is None:
            return {}
        return raft_values(raft.core, raft.log.end_offset().offset, timings or getattr(raft, "timings", None))

    def state() -> dict[tuple[str, ...], int]:
        raft = driver()
        if raft is None or getattr(raft, "core", None) is None:
            return {}
        return {(current_state(raft.core),): 1}

    registry.gauge(RAFT_PREFIX + "current_state", "KRaft's current-state", state, ("current_state",))
    for name in RAFT_NAMES:
        add = registry.counter_fn if name.endswith("_total") else registry.gauge
        add(name, "KRaft's raft-metrics", lambda name=name: values().get(name, 0))
