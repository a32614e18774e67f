"""The controller's metrics, under the names Prometheus' JMX exporter gives Kafka's MBeans with
Strimzi's rules (``kafka.controller:type=KafkaController,name=X`` becomes
``kafka_controller_kafkacontroller_x``), computed from the metadata image on scrape.

``controller_values(image, active)`` is pure. As Kafka's ControllerMetadataMetricsPublisher, a
partition is offline when it has no leader and imbalanced when its leader is not its first
replica; a broker is fenced or active (unfenced). The counts are served by every controller;
ActiveControllerCount is 1 on the active controller only, so its sum over the quorum is 1.
"""
from __future__ import annotations

from metadata.image import MetadataImage
from raft.metrics import RaftTimings, register_raft

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
