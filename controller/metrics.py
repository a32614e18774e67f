"""The controller's metrics, under the names Prometheus' JMX exporter gives Kafka's MBeans with
Strimzi's rules (``kafka.controller:type=KafkaController,name=X`` becomes
``kafka_controller_kafkacontroller_x``), computed from the metadata image on scrape.

``controller_values(image, active)`` is pure. As Kafka's ControllerMetadataMetricsPublisher, a
partition is offline when it has no leader and imbalanced when its leader is not its first
replica; a broker is fenced or active (unfenced). The counts are served by every controller;
ActiveControllerCount is 1 on the active controller only, so its sum over the quorum is 1.
"""
from __future__ import annotations

from collections.abc import Mapping

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, UnknownMetricFamily

from metadata.image import MetadataImage
from raft.metrics import PREFIX as RAFT_PREFIX
from raft.metrics import RaftTimings, current_state, raft_values

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


class ControllerCollector:
    """A prometheus_client collector of a controller process: the controller's gauges and its
    KRaft replica's, read when scraped (``registry.register(ControllerCollector(controller))``)."""

    def __init__(self, controller, timings: RaftTimings | None = None) -> None:
        self.controller = controller
        self.timings = timings

    def collect(self):
        c = self.controller
        raft = c.raft
        active = raft is not None and getattr(raft, "core", None) is not None and raft.is_leader()
        yield from gauges(controller_values(c.state, active),
                          "Kafka's kafka.controller type=KafkaController gauge")
        if raft is not None and getattr(raft, "core", None) is not None:
            yield from raft_families(raft.core, raft.log.end_offset().offset, self.timings)


def gauges(values: Mapping[str, float], doc: str):
    for name, value in values.items():
        yield GaugeMetricFamily(name, doc, value=value)


def raft_families(core, log_end_offset: int, timings: RaftTimings | None = None):
    """raft-metrics as the JMX exporter with Strimzi's rules renders them: current-state an
    untyped 1 labelled with the state, append-records-total and the -max latencies counters,
    the others gauges."""
    state = UnknownMetricFamily(RAFT_PREFIX + "current_state", "KRaft's current-state",
                                labels=["current_state"])
    state.add_metric([current_state(core)], 1)
    yield state
    for name, value in raft_values(core, log_end_offset, timings).items():
        if name.endswith("_max") or name.endswith("_total"):
            yield CounterMetricFamily(name, "KRaft's raft-metrics", value=value)
        else:
            yield GaugeMetricFamily(name, "KRaft's raft-metrics", value=value)
