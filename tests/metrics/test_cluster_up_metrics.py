"""`strom cluster up` with metrics: each process's metrics.listener from the layout's metrics
block, the supervisor's own /metrics and the Prometheus file-SD targets (strom/cluster.py)."""
import json
import os

from prometheus_client.parser import text_string_to_metric_families

from strom.cluster import (
    TARGETS_FILE,
    Supervisor,
    load_layout,
    plan_layout,
    prepare,
    write_metrics_targets,
)
from strom.config import read_config_file


def test_the_metrics_block_follows_the_ports_order_then_the_supervisor():
    layout = plan_layout("/d", 3, 3, list(range(9092, 9098)), "cid", list(range(9404, 9411)))
    assert [(b.node_id, b.metrics_port) for b in layout.brokers] == [(4, 9404), (5, 9405), (6, 9406)]
    assert [(c.node_id, c.metrics_port) for c in layout.controllers] == [(1, 9407), (2, 9408), (3, 9409)]
    assert layout.metrics_port == 9410
    assert layout.brokers[0].metrics_url == "http://127.0.0.1:9404/metrics"


def test_the_default_port_puts_the_brokers_metrics_at_the_jmx_exporters_9404(tmp_path, monkeypatch):
    import strom.cluster as cluster

    monkeypatch.setattr(cluster, "check_ports_free", lambda layout: None)
    monkeypatch.setattr(cluster, "format_cluster", lambda layout: None)
    layout, _ = prepare(str(tmp_path / "c"), 1, 2, None)
    assert [b.metrics_port for b in layout.brokers] == [9404, 9405]
    assert [c.metrics_port for c in layout.controllers] == [9406]
    assert layout.metrics_port == 9407


def test_every_node_is_formatted_with_its_metrics_listener_and_a_reused_directory_keeps_them(tmp_path):
    directory = str(tmp_path / "c")
    layout, formatted = prepare(directory, 1, 2, 0)
    assert formatted
    for node in layout.nodes:
        config = read_config_file(node.config_path)
        assert config.metrics_address(node.role) == ("127.0.0.1", node.metrics_port) and node.metrics_port
    assert len({n.metrics_port for n in layout.nodes} | {layout.metrics_port}) == 4
    assert load_layout(directory) == layout


def test_the_prometheus_targets_are_one_group_per_role(tmp_path):
    layout = plan_layout(str(tmp_path), 1, 2, [9092, 9093, 9094], "cid", [9404, 9405, 9406, 9407])
    path = write_metrics_targets(layout)
    assert path == os.path.join(str(tmp_path), TARGETS_FILE)
    with open(path, encoding="utf-8") as f:
        assert json.load(f) == [
            {"targets": ["127.0.0.1:9404", "127.0.0.1:9405"], "labels": {"role": "broker"}},
            {"targets": ["127.0.0.1:9406"], "labels": {"role": "controller"}},
            {"targets": ["127.0.0.1:9407"], "labels": {"role": "supervisor"}}]


def test_a_layout_without_metrics_has_no_targets_and_no_metrics_listener(tmp_path):
    layout = plan_layout(str(tmp_path), 1, 1, [9092, 9093], "cid")
    assert all(n.metrics_port == 0 and n.metrics_url is None for n in layout.nodes)
    assert layout.metrics_port == 0


class _Proc:
    def __init__(self, code):
        self.code, self.pid = code, 1

    def poll(self):
        return self.code


def test_the_supervisors_metrics_say_which_children_are_up_and_whether_the_cluster_is_ready(tmp_path):
    from strom.cluster import Child

    layout = plan_layout(str(tmp_path), 1, 1, [9092, 9093], "cid", [9404, 9405, 9406])
    supervisor = Supervisor(layout)
    supervisor.children = [Child(layout.controllers[0], _Proc(None), None),
                           Child(layout.brokers[0], _Proc(1), None)]
    text = supervisor.metrics_registry().render().decode()
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for family in text_string_to_metric_families(text) for s in family.samples}
    assert samples[("strom_cluster_process_up", (("node_id", "1"), ("role", "controller")))] == 1
    assert samples[("strom_cluster_process_up", (("node_id", "2"), ("role", "broker")))] == 0
    assert samples[("strom_cluster_process_starts_total", (("node_id", "2"), ("role", "broker")))] == 1
    assert samples[("strom_cluster_ready", ())] == 0
    supervisor.ready = True
    text = supervisor.metrics_registry().render().decode()
    assert "strom_cluster_ready 1.0" in text
