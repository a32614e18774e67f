"""/metrics of a real node: a combined node with metrics.listener serves Prometheus' text,
which prometheus_client's parser reads, under Kafka's MBean names as the JMX exporter renders
them; the counts move with what clients do (messages in by exactly what was produced, bytes in
by the batches' bytes, bytes out to a consumer, requests per API)."""
import glob
import os
import urllib.request
import uuid

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client.parser import text_string_to_metric_families

from .cluster import StromNode, metrics_port

N = 500
PURGATORY = "kafka_server_delayedoperationpurgatory_purgatorysize"


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    port = metrics_port()
    node = StromNode(base_dir=str(tmp_path_factory.mktemp("metrics-node")),
                     extra={"metrics.listener": f"http://127.0.0.1:{port}"})
    node.metrics_url = f"http://127.0.0.1:{port}/metrics"
    try:
        node.start()
        yield node
        assert node.stop() in (0, None), node.failure_message("did not stop cleanly on SIGTERM")
    finally:
        node.close()


def scrape(node) -> dict[tuple[str, tuple], float]:
    with urllib.request.urlopen(node.metrics_url, timeout=10) as response:
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        text = response.read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def requests(samples, api: str) -> float:
    return sum(v for (name, labels), v in samples.items()
               if name == "kafka_network_requestmetrics_requests_total" and ("request", api) in labels)


def create_topic(node, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])[topic].result(timeout=20)


def test_the_node_serves_kafka_s_broker_metric_names_in_prometheus_text(node):
    samples = scrape(node)
    names = {name for name, _ in samples}
    for name in ("kafka_server_brokertopicmetrics_messagesin_total",
                 "kafka_server_brokertopicmetrics_bytesin_total",
                 "kafka_server_brokertopicmetrics_bytesout_total",
                 "kafka_server_replicamanager_underreplicatedpartitions",
                 "kafka_server_replicamanager_underminisrpartitioncount",
                 "kafka_server_replicamanager_isrshrinks_total",
                 "kafka_server_replicamanager_isrexpands_total",
                 "kafka_server_replicamanager_partitioncount",
                 "kafka_server_replicamanager_leadercount",
                 "kafka_server_delayedoperationpurgatory_purgatorysize",
                 "kafka_network_requestmetrics_requests_total",
                 "kafka_network_requestmetrics_totaltimems_count",
                 "kafka_network_requestmetrics_totaltimems_bucket",
                 "kafka_server_kafkaserver_brokerstate"):
        assert name in names, name
    assert samples[("kafka_server_kafkaserver_brokerstate", ())] == 3  # RUNNING
    assert samples[("kafka_server_replicamanager_underreplicatedpartitions", ())] == 0
    for op in ("Produce", "Fetch"):
        assert (PURGATORY, (("delayedOperation", op),)) in samples


def test_messages_in_rises_by_exactly_what_was_produced_and_bytes_in_by_the_batches(node):
    topic = f"metrics-{uuid.uuid4().hex[:8]}"
    create_topic(node, topic)
    before = scrape(node)
    producer = Producer({"bootstrap.servers": node.bootstrap, "acks": "all", "linger.ms": 5})
    for i in range(N):
        producer.produce(topic, key=b"k%d" % i, value=b"v" * 100)
    assert producer.flush(20) == 0
    after = scrape(node)
    label = (("topic", topic),)
    assert after[("kafka_server_brokertopicmetrics_messagesin_total", label)] == N
    segments = glob.glob(os.path.join(node.log_dir, f"{topic}-0", "*.log"))
    segment_bytes = sum(os.path.getsize(p) for p in segments)
    assert after[("kafka_server_brokertopicmetrics_bytesin_total", label)] == segment_bytes > N * 100
    everything = "kafka_server_brokertopicmetrics_messagesin_total", ()
    assert after[everything] - before[everything] == N
    assert requests(after, "Produce") > requests(before, "Produce")
    assert requests(after, "Metadata") > requests(before, "Metadata")

    consumer = Consumer({"bootstrap.servers": node.bootstrap, "group.id": f"g-{topic}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    got = 0
    try:
        for _ in range(60):
            got += len([m for m in consumer.consume(N, timeout=1) if not m.error()])
            if got >= N:
                break
    finally:
        consumer.close()
    assert got == N
    read = scrape(node)
    assert read[("kafka_server_brokertopicmetrics_bytesout_total", label)] >= segment_bytes
    assert read[("kafka_server_brokertopicmetrics_messagesin_total", label)] == N  # reads add nothing
    assert read[("kafka_network_requestmetrics_totaltimems_count", (("request", "Fetch"),))] > 0
    assert requests(read, "JoinGroup") > 0 and requests(read, "SyncGroup") > 0
