"""The shipped Grafana dashboard queries only metrics Strom serves: every metric name in every
panel's PromQL is one the processes' registries hold (each part registered as its process does),
and the Prometheus scrape configuration reads /metrics."""
import json
import os
import random
import re
from types import SimpleNamespace

import yaml

from broker.groups.coordinator import CoordinatorConfig, GroupCoordinator
from broker.groups.lag import register as register_groups
from broker.metadata_follower import register_observer_metrics
from broker.metrics import BROKER_STATE_RUNNING, register_broker_metrics
from broker.off_loop import cleaner_values
from broker.transactions.runtime import register_metrics as register_transactions
from controller.metrics import register as register_controller
from metadata.image import MetadataImage
from protocol.metrics import Registry

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DASHBOARD = os.path.join(ROOT, "monitoring", "grafana-strom-cluster.json")
SCRAPE = os.path.join(ROOT, "monitoring", "prometheus.yml")
HISTOGRAM_SUFFIXES = ("_bucket", "_count", "_sum")


class _Controller:
    state = MetadataImage()
    raft = None


def served_names() -> set[str]:
    """Every family name a controller's and a broker's registries serve."""
    controller = Registry()
    register_controller(controller, _Controller())
    broker = Registry()
    register_broker_metrics(broker, SimpleNamespace(partitions={}), None, lambda: BROKER_STATE_RUNNING)
    register_groups(broker, GroupCoordinator(CoordinatorConfig(), random.Random(0)), lambda t, p: None)
    for name in cleaner_values(None):  # as broker/server.py registers the cleaner's gauges
        broker.gauge(name, "kafka.log:type=LogCleaner", lambda name=name: cleaner_values(None)[name])
    register_transactions(broker, None)  # read on scrape only: names without a runtime
    register_observer_metrics(broker, lambda: None)  # the broker's raft-metrics, as an observer
    return set(controller.names()) | set(broker.names())


def queried_names(expr: str) -> set[str]:
    """The metric names in a PromQL expression (label values left out)."""
    return {token for token in re.findall(r"[a-zA-Z_:][a-zA-Z0-9_:]*", re.sub(r'"[^"]*"', '""', expr))
            if token.startswith("kafka_")}


def is_served(name: str, served: set[str]) -> bool:
    """Served as it is, or as a histogram's _bucket, _count or _sum series."""
    return name in served or any(name.endswith(s) and name[:-len(s)] in served for s in HISTOGRAM_SUFFIXES)


def test_every_dashboard_query_names_a_metric_strom_serves():
    with open(DASHBOARD) as f:
        dashboard = json.load(f)
    served = served_names()
    exprs = [t["expr"] for panel in dashboard["panels"] for t in panel.get("targets", [])]
    assert exprs
    unknown = {name for expr in exprs for name in queried_names(expr) if not is_served(name, served)}
    assert not unknown, f"the dashboard queries metrics Strom does not serve: {sorted(unknown)}"


def test_the_dashboard_charts_every_transaction_coordinator_metric_and_the_brokers_raft_fetches():
    with open(DASHBOARD) as f:
        dashboard = json.load(f)
    queried = {name for panel in dashboard["panels"] for t in panel.get("targets", [])
               for name in queried_names(t["expr"])}
    txn = Registry()
    register_transactions(txn, None)
    assert set(txn.names()) <= queried, sorted(set(txn.names()) - queried)
    assert "kafka_server_raftmetrics_fetch_records_total" in queried


def test_the_scrape_configuration_reads_metrics_of_every_listed_process():
    with open(SCRAPE) as f:
        config = yaml.safe_load(f)
    (job,) = config["scrape_configs"]
    assert job["metrics_path"] == "/metrics"
    assert job["file_sd_configs"][0]["files"]
