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


def register(registry, core, log_end: Callable[[str, int], int | None]) -> None:
    """Register the group coordinator's counts and its groups' lag in the process's registry
    (protocol/metrics.py's Registry), computed when scraped. ``core`` is the GroupCoordinator,
    ``log_end(topic, partition)`` a partition's log end offset as this broker knows it."""
    def offsets() -> dict[str, dict[tuple[str, int], int]]:
        return {group: {tp: o.offset for tp, o in committed.items()}
                for group, committed in core.offsets.items()}

    def counts() -> dict[tuple[str, tuple[tuple[str, str], ...]], int]:
        return group_values([g.state for g in core.groups.values()],
                            [g.state() for g in core.consumer.groups.values()],
                            sum(len(o) for o in core.offsets.values()))

    by_name: dict[str, tuple[str, ...]] = {}
    for name, labels in group_values([], [], 0):
        by_name[name] = tuple(k for k, _ in labels)
    for name, labelnames in by_name.items():
        if labelnames:
            registry.gauge(name, "Kafka's group coordinator gauge",
                           lambda name=name: {tuple(v for _, v in labels): value
                                              for (n, labels), value in counts().items() if n == name},
                           labelnames)
        else:
            registry.gauge(name, "Kafka's group coordinator gauge",
                           lambda name=name: counts()[(name, ())])
    part = ("group", "topic", "partition")

    def lags() -> list[tuple[str, str, int, int, int, int]]:
        return consumer_lags(offsets(), log_end)

    registry.gauge(GROUP_LAG, "Group offset lag of a partition",
                   lambda: {(g, t, str(p)): lag for g, t, p, _o, _e, lag in lags()}, part)
    registry.gauge(GROUP_OFFSET, "Last group consumed offset of a partition",
                   lambda: {(g, t, str(p)): o for g, t, p, o, _e, _lag in lags()}, part)
    registry.gauge(GROUP_MAX_LAG, "Max group offset lag",
                   lambda: {(g,): lag for g, lag in max_lags(lags()).items()}, ("group",))
