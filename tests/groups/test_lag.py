"""Consumer lag as kafka-lag-exporter publishes it, and the group coordinator's counts by state."""
import random

from broker.groups.lag import consumer_lags, group_values, max_lags


def test_lag_is_log_end_offset_less_committed_offset_and_max_lag_is_the_groups_greatest():
    ends = {("t", 0): 100, ("t", 1): 40, ("u", 0): 7}
    offsets = {"g": {("t", 0): 90, ("t", 1): 40}, "h": {("u", 0): 9, ("gone", 0): 3}}
    rows = consumer_lags(offsets, lambda topic, p: ends.get((topic, p)))
    assert rows == [("g", "t", 0, 90, 100, 10), ("g", "t", 1, 40, 40, 0),
                    ("h", "u", 0, 9, 7, 0)]  # never negative; an unknown partition left out
    assert max_lags(rows) == {"g": 10, "h": 0}


def test_group_counts_by_protocol_and_state():
    values = group_values(["Stable", "Stable", "Empty"], ["Reconciling"], offset_count=5)
    assert values[("kafka_coordinator_group_groupmetadatamanager_numgroups", ())] == 4
    assert values[("kafka_coordinator_group_groupmetadatamanager_numgroupsstable", ())] == 2
    assert values[("kafka_coordinator_group_groupmetadatamanager_numoffsets", ())] == 5
    assert values[("kafka_server_group_coordinator_metrics_group_count", (("protocol", "consumer"),))] == 1
    assert values[("kafka_server_group_coordinator_metrics_consumer_group_count",
                   (("state", "reconciling"),))] == 1


def test_lag_gauges_render_per_group_topic_and_partition():
    from prometheus_client.parser import text_string_to_metric_families

    from broker.groups.coordinator import CoordinatorConfig, GroupCoordinator
    from broker.groups.lag import register
    from broker.groups.storage import OffsetAndMetadata
    from protocol.metrics import Registry

    core = GroupCoordinator(CoordinatorConfig(), random.Random(0))
    core.offsets["g"] = {("t", 0): OffsetAndMetadata(3, -1, "", 0)}
    registry = Registry()
    register(registry, core, lambda topic, p: 10)
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for f in text_string_to_metric_families(registry.render().decode()) for s in f.samples}
    assert samples[("kafka_consumergroup_group_lag",
                    (("group", "g"), ("partition", "0"), ("topic", "t")))] == 7
    assert samples[("kafka_consumergroup_group_max_lag", (("group", "g"),))] == 7
