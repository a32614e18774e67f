"""TLS against plaintext, same node, same run: one Strom node with a PLAINTEXT and an SSL
listener (mutual TLS, EC P-256 certificates from tests/security/certs.py), confluent-kafka
producing then consuming the same workload over each, alternately, on fresh topics.

* produce: 1 KiB records, acks=1, linger 5 ms, lz4 off; records/s over each listener
* consume: the topic read from offset 0 by an assigned consumer; MB/s over each listener
* handshakes: new TLS connections (TCP + TLS handshake + ApiVersions) per second, against new
  plaintext connections per second

A plaintext Fetch sends its records with sendfile (page cache to socket); over TLS they are read
into memory and encrypted by OpenSSL in the broker's process (protocol/net.py), so consume is
where TLS costs most. The ratios (TLS / plaintext) go to extra_info; with --benchmark-disable
each body runs once on a few thousand records.
"""
from __future__ import annotations

import asyncio
import itertools
import ssl
import time

import pytest

from tests.integration.cluster import StromNode, free_ports
from tests.security.certs import make_pki

RECORD_BYTES = 1024
_topics = itertools.count()


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return make_pki(tmp_path_factory.mktemp("bench-pki"))


@pytest.fixture(scope="module")
def node(tmp_path_factory, pki):
    (ssl_port,) = free_ports(1)
    n = StromNode(base_dir=str(tmp_path_factory.mktemp("bench-tls")), extra={
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,CONTROLLER:PLAINTEXT",
        "ssl.keystore.type": "PEM", "ssl.keystore.location": pki.server.keystore,
        "ssl.truststore.type": "PEM", "ssl.truststore.location": pki.ca,
        "listener.name.ssl.ssl.client.auth": "required", "auto.create.topics.enable": "true",
    })
    n.properties["listeners"] = n.properties["listeners"].replace(
        "CONTROLLER://", f"SSL://127.0.0.1:{ssl_port},CONTROLLER://")
    n.properties["advertised.listeners"] += f",SSL://127.0.0.1:{ssl_port}"
    n.ssl_bootstrap = f"127.0.0.1:{ssl_port}"
    n.start()
    yield n
    n.stop()
    n.close()


def _conf(node, pki, tls: bool) -> dict:
    if not tls:
        return {"bootstrap.servers": node.bootstrap}
    return {"bootstrap.servers": node.ssl_bootstrap, "security.protocol": "SSL", "ssl.ca.location": pki.ca,
            "ssl.certificate.location": pki.alice.cert, "ssl.key.location": pki.alice.key}


def _produce(conf: dict, topic: str, records: int) -> float:
    from confluent_kafka import Producer

    producer = Producer({**conf, "acks": 1, "linger.ms": 5, "batch.size": 1 << 20})
    value = b"x" * RECORD_BYTES
    start = time.perf_counter()
    for _ in range(records):
        while True:
            try:
                producer.produce(topic, value, partition=0)
                break
            except BufferError:
                producer.poll(0.01)
    assert producer.flush(60) == 0
    return records / (time.perf_counter() - start)


def _consume(conf: dict, topic: str, records: int) -> float:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({**conf, "group.id": f"bench-tls-{topic}", "enable.auto.commit": False,
                         "fetch.max.bytes": 52428800, "max.partition.fetch.bytes": 10485760})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got = size = 0
    start = time.perf_counter()
    try:
        while got < records:
            for msg in consumer.consume(10000, 1.0):
                if msg.error() is None:
                    got += 1
                    size += len(msg.value())
            if time.perf_counter() - start > 120:
                raise TimeoutError(f"consumed {got} of {records}")
    finally:
        consumer.close()
    return size / (time.perf_counter() - start) / 1e6


def _round(node, pki, records: int, consumes: int) -> dict:
    """Produce a topic over each listener, then read each back ``consumes`` times, alternating
    (the page cache warm for both), keeping each listener's best read."""
    out: dict = {}
    topics = {}
    for name, tls in (("plaintext", False), ("tls", True)):
        topics[name] = f"bench-tls-{next(_topics)}"
        out[f"{name}_produce_msg_s"] = _produce(_conf(node, pki, tls), topics[name], records)
    for _ in range(consumes):
        for name, tls in (("plaintext", False), ("tls", True)):
            mb_s = _consume(_conf(node, pki, tls), topics[name], records)
            out[f"{name}_consume_mb_s"] = max(out.get(f"{name}_consume_mb_s", 0.0), mb_s)
    out["produce_tls_over_plaintext"] = out["tls_produce_msg_s"] / out["plaintext_produce_msg_s"]
    out["consume_tls_over_plaintext"] = out["tls_consume_mb_s"] / out["plaintext_consume_mb_s"]
    return out


def test_tls_throughput_against_plaintext(benchmark, node, pki):
    records, consumes = (300_000, 3) if benchmark.enabled else (3_000, 1)
    r = benchmark.pedantic(_round, args=(node, pki, records, consumes), rounds=1, iterations=1)
    assert r["tls_consume_mb_s"] > 0 and r["tls_produce_msg_s"] > 0
    benchmark.extra_info.update(r)


async def _connections_per_s(host: str, port: int, context: ssl.SSLContext | None, count: int) -> float:
    from protocol import messages as M
    from protocol.client import ClientSecurity, KafkaConnection

    start = time.perf_counter()
    for _ in range(count):
        conn = KafkaConnection(host, port, security=ClientSecurity(ssl_context=context))
        await conn.connect()
        await conn.request(18, 0, M.ApiVersionsRequest(), 10)
        await conn.close()
    return count / (time.perf_counter() - start)


def _handshakes(node, pki, count: int) -> dict:
    context = ssl.create_default_context(cafile=pki.ca)
    context.load_cert_chain(pki.alice.cert, pki.alice.key)
    host, tls_port = node.ssl_bootstrap.split(":")
    plain = asyncio.run(_connections_per_s(host, node.broker_port, None, count))
    tls = asyncio.run(_connections_per_s(host, int(tls_port), context, count))
    return {"plaintext_connections_s": plain, "tls_connections_s": tls}


def test_tls_handshake_rate(benchmark, node, pki):
    count = 500 if benchmark.enabled else 20
    r = benchmark.pedantic(_handshakes, args=(node, pki, count), rounds=1, iterations=1)
    assert r["tls_connections_s"] > 0
    benchmark.extra_info.update(r)
