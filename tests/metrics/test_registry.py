"""The metrics registry: plain counts rendered as Prometheus' text under Kafka's MBean names
(as the JMX exporter's rules render them), parsed back with prometheus_client's parser."""
import asyncio

import pytest
from prometheus_client.parser import text_string_to_metric_families

from protocol.metrics import BrokerTopicStats, Histogram, Registry, RequestMetrics, serve

REQUESTS = "kafka_network_requestmetrics_requests_total"
PURGATORY = "kafka_server_delayedoperationpurgatory_purgatorysize"


def samples(registry: Registry) -> dict[tuple[str, tuple], float]:
    out = {}
    for family in text_string_to_metric_families(registry.render().decode()):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def families(registry: Registry) -> dict[str, str]:
    return {f.name: f.type for f in text_string_to_metric_families(registry.render().decode())}


def test_messages_in_counts_each_topic_and_all_topics_under_one_name():
    r = Registry()
    stats = BrokerTopicStats(r)
    stats.appended("orders", 3, 300)
    stats.appended("orders", 2, 120)
    stats.appended("audit", 1, 70)
    stats.read("orders", 420)
    got = samples(r)
    assert got[("kafka_server_brokertopicmetrics_messagesin_total", (("topic", "orders"),))] == 5
    assert got[("kafka_server_brokertopicmetrics_messagesin_total", ())] == 6
    assert got[("kafka_server_brokertopicmetrics_bytesin_total", (("topic", "audit"),))] == 70
    assert got[("kafka_server_brokertopicmetrics_bytesin_total", ())] == 490
    assert got[("kafka_server_brokertopicmetrics_bytesout_total", (("topic", "orders"),))] == 420
    assert got[("kafka_server_brokertopicmetrics_bytesout_total", (("topic", "audit"),))] == 0
    assert families(r)["kafka_server_brokertopicmetrics_messagesin"] == "counter"


def test_request_metrics_count_per_api_and_version_and_time_as_a_histogram():
    r = Registry()
    m = RequestMetrics(r, {0: "Produce", 1: "Fetch"})
    for version in (9, 9, 11):
        m.received(0, version)
    m.received(1, 16)
    m.answered(0, 0.2)
    m.answered(0, 7.0)
    m.answered(0, 60000.0)  # past every bound: +Inf only
    got = samples(r)
    assert got[(REQUESTS, (("request", "Produce"), ("version", "9")))] == 2
    assert got[(REQUESTS, (("request", "Produce"), ("version", "11")))] == 1
    assert got[(REQUESTS, (("request", "Fetch"), ("version", "16")))] == 1
    produce = (("request", "Produce"),)
    assert got[("kafka_network_requestmetrics_totaltimems_count", produce)] == 3
    assert got[("kafka_network_requestmetrics_totaltimems_sum", produce)] == pytest.approx(60007.2)
    assert got[("kafka_network_requestmetrics_totaltimems_bucket", (("le", "0.5"), *produce))] == 1
    assert got[("kafka_network_requestmetrics_totaltimems_bucket", (("le", "10.0"), *produce))] == 2
    assert got[("kafka_network_requestmetrics_totaltimems_bucket", (("le", "30000.0"), *produce))] == 2
    assert got[("kafka_network_requestmetrics_totaltimems_bucket", (("le", "+Inf"), *produce))] == 3
    assert families(r)["kafka_network_requestmetrics_totaltimems"] == "histogram"


def test_a_histogram_bucket_bound_is_inclusive_as_prometheus_le():
    h = Histogram((1.0, 2.0))
    for v in (1.0, 1.5, 2.0, 2.5):
        h.observe(v)
    assert h.cumulative() == [("1.0", 1), ("2.0", 3), ("+Inf", 4)]
    assert h.count == 4


def test_a_gauge_is_read_on_scrape_and_labels_come_from_its_dict():
    r = Registry()
    sizes = {"Produce": 0, "Fetch": 0}
    r.gauge("kafka_server_delayedoperationpurgatory_purgatorysize", "waiting",
            lambda: {(k,): v for k, v in sizes.items()}, ("delayedOperation",))
    sizes["Fetch"] = 4
    got = samples(r)
    assert got[(PURGATORY, (("delayedOperation", "Fetch"),))] == 4
    sizes["Fetch"] = 0
    got = samples(r)
    assert got[(PURGATORY, (("delayedOperation", "Fetch"),))] == 0


def test_a_failing_gauge_leaves_the_rest_of_the_scrape():
    r = Registry()
    r.gauge("kafka_server_replicamanager_partitioncount", "partitions", lambda: 1 // 0)
    r.gauge("kafka_server_replicamanager_leadercount", "leaders", lambda: 2)
    got = samples(r)
    assert got == {("kafka_server_replicamanager_leadercount", ()): 2}


def test_a_name_is_registered_once_and_a_counter_ends_with_total():
    r = Registry()
    r.counter("kafka_server_replicamanager_isrshrinks_total", "shrinks")
    with pytest.raises(ValueError, match="twice"):
        r.counter("kafka_server_replicamanager_isrshrinks_total", "shrinks")
    with pytest.raises(ValueError, match="_total"):
        r.counter("kafka_server_replicamanager_isrexpands", "expands")


def test_the_endpoint_serves_metrics_and_refuses_other_paths_and_garbage():
    async def main():
        r = Registry()
        r.counter("kafka_server_replicamanager_isrexpands_total", "expands")[()] += 2
        server = await serve(r, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]

        async def ask(raw: bytes) -> bytes:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(raw)
            writer.write_eof()
            await writer.drain()
            answer = await reader.read()
            writer.close()
            return answer

        ok = await ask(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        missing = await ask(b"GET /other HTTP/1.1\r\n\r\n")
        posted = await ask(b"POST /metrics HTTP/1.1\r\n\r\n")
        garbage = await ask(b"\x00\x01 not http, and never a blank line")
        after = await ask(b"GET /metrics?x=1 HTTP/1.0\r\n\r\n")
        server.close()
        await server.wait_closed()
        return ok, missing, posted, garbage, after

    ok, missing, posted, garbage, after = asyncio.run(main())
    head, _, body = ok.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 OK") and b"text/plain; version=0.0.4" in head
    names = {f.name for f in text_string_to_metric_families(body.decode())}
    assert "kafka_server_replicamanager_isrexpands" in names
    assert missing.startswith(b"HTTP/1.1 404")
    assert posted.startswith(b"HTTP/1.1 405")
    assert garbage == b""
    assert after.startswith(b"HTTP/1.1 200 OK")
