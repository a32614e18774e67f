"""Consumer lag per group and partition, as kafka-lag-exporter publishes it: a committed offset's
lag is the partition's log end offset less it (never below zero), and a group's max lag is the
greatest of its partitions'. Computed by the group coordinator's broker on scrape, from the
offsets it holds and the log end offsets the broker knows; a partition whose log end offset is
unknown here is left out.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping

GROUP_LAG = "kafka_consumergroup_group_lag"
GROUP_MAX_LAG = "kafka_consumergroup_group_max_lag"
GROUP_OFFSET = "kafka_consumergroup_group_offset"
PARTITION_LATEST_OFFSET = "kafka_partition_latest_offset"


def consumer_lags(offsets: Mapping[str, Mapping[tuple[str, int], int]],
                  log_end: Callable[[str, int], int | None]) -> list[tuple[str, str, int, int, int, int]]:
    """(group, topic, partition, committed offset, log end offset, lag) per committed offset,
    sorted by group, topic and partition."""
    rows = []
    for group in sorted(offsets):
        for (topic, partition), committed in sorted(offsets[group].items()):
            end = log_end(topic, partition)
            if end is None:
                continue
            rows.append((group, topic, partition, committed, end, max(0, end - committed)))
    return rows


def max_lags(rows: list[tuple[str, str, int, int, int, int]]) -> dict[str, int]:
    """Each group's greatest lag over its partitions."""
    out: dict[str, int] = {}
    for group, _topic, _partition, _committed, _end, lag in rows:
        out[group] = max(out.get(group, 0), lag)
    return out


def group_values(classic_states: list[str], consumer_states: list[str],
                 offset_count: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], int]:
    """The group coordinator's counts as Kafka 4's GroupCoordinatorMetrics has them, each under
    the JMX exporter's rendering: its Yammer gauges (``kafka.coordinator.group:type=
    GroupMetadataManager``: NumGroups, NumGroupsStable, ..., NumOffsets) and its
    ``group-coordinator-metrics`` (group-count by protocol, classic-group-count and
    consumer-group-count by state, lower case as Kafka names them). Keyed by (name, labels)."""
    yammer = "kafka_coordinator_group_groupmetadatamanager_"
    kmetrics = "kafka_server_group_coordinator_metrics_"
    out: dict[tuple[str, tuple[tuple[str, str], ...]], int] = {
        (yammer + "numgroups", ()): len(classic_states) + len(consumer_states),
        (yammer + "numoffsets", ()): offset_count,
        (kmetrics + "group_count", (("protocol", "classic"),)): len(classic_states),
        (kmetrics + "group_count", (("protocol", "consumer"),)): len(consumer_states),
    }
    for state in ("PreparingRebalance", "CompletingRebalance", "Stable", "Dead", "Empty"):
        out[(yammer + "numgroups" + state.lower(), ())] = classic_states.count(state)
        out[(kmetrics + "classic_group_count", (("state", state.lower()),))] = classic_states.count(state)
    for state in ("Empty", "Assigning", "Reconciling", "Stable", "Dead"):
        out[(kmetrics + "consumer_group_count", (("state", state.lower()),))] = consumer_states.count(state)
    return out


class GroupCoordinatorCollector:
    """A prometheus_client collector of a broker's group coordinator: its group and offset
    counts and the lag of every group it coordinates, computed when scraped. ``core`` is the
    GroupCoordinator; ``log_end(topic, partition)`` the partition's log end offset as this broker
    knows it (None when unknown)."""

    def __init__(self, core, log_end: Callable[[str, int], int | None]) -> None:
        self.core = core
        self.log_end = log_end

    def collect(self):
        from prometheus_client.core import GaugeMetricFamily

        core = self.core
        classic = [g.state for g in core.groups.values()]
        consumer = [g.state() for g in core.consumer.groups.values()]
        offsets = {group: {tp: o.offset for tp, o in committed.items()}
                   for group, committed in core.offsets.items()}
        families: dict[str, GaugeMetricFamily] = {}
        for (name, labels), value in group_values(classic, consumer,
                                                  sum(len(o) for o in offsets.values())).items():
            family = families.get(name)
            if family is None:
                family = families[name] = GaugeMetricFamily(
                    name, "Kafka's group coordinator gauge", labels=[k for k, _ in labels])
            family.add_metric([v for _, v in labels], value)
        yield from families.values()
        rows = consumer_lags(offsets, self.log_end)
        lag = GaugeMetricFamily(GROUP_LAG, "Group offset lag of a partition",
                                labels=["group", "topic", "partition"])
        committed = GaugeMetricFamily(GROUP_OFFSET, "Last group consumed offset of a partition",
                                      labels=["group", "topic", "partition"])
        for group, topic, partition, offset, _end, behind in rows:
            lag.add_metric([group, topic, str(partition)], behind)
            committed.add_metric([group, topic, str(partition)], offset)
        yield lag
        yield committed
        max_lag = GaugeMetricFamily(GROUP_MAX_LAG, "Max group offset lag", labels=["group"])
        for group, value in max_lags(rows).items():
            max_lag.add_metric([group], value)
        yield max_lag
