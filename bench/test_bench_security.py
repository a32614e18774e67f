"""Security against plaintext, same node, same run: one Strom node with four client listeners,
PLAINTEXT, SSL (mutual TLS), SASL_PLAINTEXT and SASL_SSL (SCRAM-SHA-512, the user written into
the metadata log by ``strom format --add-scram``), EC P-256 certificates from
tests/security/certs.py, confluent-kafka producing then consuming the same workload over each.

* produce: 1 KiB records, acks=1, linger 5 ms, no compression, one partition; each listener's
  topic written in three passes, the listeners alternating (A, B, C, A, B, C), the best pass's
  records/s kept
* consume: each topic read from offset 0 by an assigned consumer, three times, alternating, the
  best read's MB/s kept
* the node's CPU milliseconds per MB produced and per MB consumed over each listener (all
  passes): what TLS costs the broker even where the client is what bounds the rate
* handshakes: new connections per second, each connected, secured (TLS handshake; SaslHandshake
  and SCRAM's two SaslAuthenticate exchanges) and asked ApiVersions, by protocol.client's
  KafkaConnection, in alternating passes over PLAINTEXT, SSL, SASL_PLAINTEXT and SASL_SSL, and
  the node's CPU milliseconds per connection (the client's PBKDF2 bounds the SASL rates here)

A plaintext Fetch sends its records with sendfile (page cache to socket); over TLS they are read
into memory and encrypted by OpenSSL in the broker's process (protocol/net.py), so consume is
where TLS costs most. SASL adds nothing per byte once a connection is authenticated: SASL_SSL
should read like SSL, SASL_PLAINTEXT like PLAINTEXT; SCRAM costs at the handshake (the client's
PBKDF2 over 4096 iterations, the server's proof check, two more round trips).

The consumer keeps fetching while the application drains, as bench/e2e/workloads.py's does:
with librdkafka 2.x's defaults it stops fetching at 100 k queued records (or 64 MiB) and backs
off a second (fetch.queue.backoff.ms) each time, so a read's time counted its backoffs, and the
faster listener, whose queue filled first and more often, read slower (plaintext at ~200 MB/s
against TLS at ~370 MB/s before this tuning).

The ratios (over plaintext) go to extra_info; with --benchmark-disable each body runs once on a
few thousand records and twenty connections per listener.
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
SCRAM = "SCRAM-SHA-512"
USER, PASSWORD = "alice", "alice-secret"
LISTENERS = ("plaintext", "ssl", "sasl_plaintext", "sasl_ssl")
THROUGHPUT_LISTENERS = ("plaintext", "ssl", "sasl_ssl")
_topics = itertools.count()


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return make_pki(tmp_path_factory.mktemp("bench-pki"))


@pytest.fixture(scope="module")
def strom_node(tmp_path_factory, pki):
    ssl_port, sasl_plain_port, sasl_ssl_port = free_ports(3)
    n = StromNode(base_dir=str(tmp_path_factory.mktemp("bench-security")), extra={
        "listener.security.protocol.map": ("PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,"
                                           "SASL_SSL:SASL_SSL,CONTROLLER:PLAINTEXT"),
        "ssl.keystore.type": "PEM", "ssl.keystore.location": pki.server.keystore,
        "ssl.truststore.type": "PEM", "ssl.truststore.location": pki.ca,
        "listener.name.ssl.ssl.client.auth": "required", "auto.create.topics.enable": "true",
        "sasl.enabled.mechanisms": SCRAM,
    }, format_args=["--add-scram", f"{SCRAM}=[name={USER},password={PASSWORD}]"])
    ports = {"ssl": ssl_port, "sasl_plaintext": sasl_plain_port, "sasl_ssl": sasl_ssl_port}
    added = ",".join(f"{name.upper()}://127.0.0.1:{port}" for name, port in ports.items())
    n.properties["listeners"] = n.properties["listeners"].replace("CONTROLLER://", f"{added},CONTROLLER://")
    n.properties["advertised.listeners"] += f",{added}"
    n.ports = {"plaintext": n.broker_port, **ports}
    n.start()
    yield n
    n.stop()
    n.close()


def _conf(node, pki, listener: str) -> dict:
    conf = {"bootstrap.servers": f"127.0.0.1:{node.ports[listener]}"}
    if listener == "ssl":
        conf.update({"security.protocol": "SSL", "ssl.certificate.location": pki.alice.cert,
                     "ssl.key.location": pki.alice.key})
    elif listener.startswith("sasl_"):
        conf.update({"security.protocol": listener.upper(), "sasl.mechanisms": SCRAM,
                     "sasl.username": USER, "sasl.password": PASSWORD})
    if listener.endswith("ssl"):
        conf["ssl.ca.location"] = pki.ca
    return conf


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

    consumer = Consumer({**conf, "group.id": f"bench-security-{topic}", "enable.auto.commit": False,
                         "fetch.max.bytes": 52428800, "max.partition.fetch.bytes": 10485760,
                         # keep fetching while the application drains (the module's doc)
                         "queued.max.messages.kbytes": 262144, "queued.min.messages": 10_000_000,
                         "fetch.queue.backoff.ms": 0})
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


def _round(node, pki, records: int, passes: int) -> dict:
    """Produce each listener's topic in ``passes`` alternating passes, then read each topic back
    ``passes`` times, alternating (the page cache warm for all), keeping each one's best."""
    out: dict = {}
    topics = {name: f"bench-security-{next(_topics)}" for name in THROUGHPUT_LISTENERS}
    each = records // passes
    cpu: dict = {}
    for _ in range(passes):
        for name in THROUGHPUT_LISTENERS:
            before = _node_cpu_seconds(node)
            msg_s = _produce(_conf(node, pki, name), topics[name], each)
            cpu[("produce", name)] = cpu.get(("produce", name), 0.0) + _node_cpu_seconds(node) - before
            out[f"{name}_produce_msg_s"] = max(out.get(f"{name}_produce_msg_s", 0.0), msg_s)
    for _ in range(passes):
        for name in THROUGHPUT_LISTENERS:
            before = _node_cpu_seconds(node)
            mb_s = _consume(_conf(node, pki, name), topics[name], each * passes)
            cpu[("consume", name)] = cpu.get(("consume", name), 0.0) + _node_cpu_seconds(node) - before
            out[f"{name}_consume_mb_s"] = max(out.get(f"{name}_consume_mb_s", 0.0), mb_s)
    mb = each * passes * RECORD_BYTES / 1e6  # what each listener's produces, and each of its reads, carried
    for (what, name), seconds in cpu.items():
        out[f"{name}_{what}_node_cpu_ms_per_mb"] = 1000 * seconds / (mb * passes if what == "consume" else mb)
    for name in THROUGHPUT_LISTENERS[1:]:
        out[f"produce_{name}_over_plaintext"] = out[f"{name}_produce_msg_s"] / out["plaintext_produce_msg_s"]
        out[f"consume_{name}_over_plaintext"] = out[f"{name}_consume_mb_s"] / out["plaintext_consume_mb_s"]
    return out


def test_security_throughput_against_plaintext(benchmark, size, strom_node, pki):
    records, passes = size((300_000, 3), (3_000, 1))
    r = benchmark.pedantic(_round, args=(strom_node, pki, records, passes), rounds=1, iterations=1)
    for name in THROUGHPUT_LISTENERS:
        assert r[f"{name}_consume_mb_s"] > 0 and r[f"{name}_produce_msg_s"] > 0
    benchmark.extra_info.update(r)


def _security(pki, listener: str, password: str = PASSWORD):
    from protocol.client import ClientSecurity
    from security.sasl.client import authenticator

    context = None
    if listener.endswith("ssl"):
        context = ssl.create_default_context(cafile=pki.ca)
        if listener == "ssl":
            context.load_cert_chain(pki.alice.cert, pki.alice.key)
    authenticate = authenticator(SCRAM, USER, password) if listener.startswith("sasl_") else None
    return ClientSecurity(ssl_context=context, authenticate=authenticate)


async def _connect_seconds(port: int, security, count: int) -> float:
    """Seconds to open, secure, use (ApiVersions) and close ``count`` connections, one by one."""
    from protocol import messages as M
    from protocol.client import KafkaConnection

    start = time.perf_counter()
    for _ in range(count):
        conn = KafkaConnection("127.0.0.1", port, security=security)
        await conn.connect()
        await conn.request(18, 0, M.ApiVersionsRequest(), 10)
        await conn.close()
    return time.perf_counter() - start


def _node_cpu_seconds(node) -> float:
    """User + system CPU seconds of the node's processes so far."""
    import psutil

    root = psutil.Process(node.proc.pid)
    return sum(sum(p.cpu_times()[:2]) for p in (root, *root.children(recursive=True)))


def _handshakes(node, pki, count: int, passes: int) -> dict:
    """Connections per second over each listener, and the node's CPU milliseconds per connection
    (the client, on the same cores, pays SCRAM's PBKDF2: a few milliseconds a connection)."""
    seconds = dict.fromkeys(LISTENERS, 0.0)
    cpu = dict.fromkeys(LISTENERS, 0.0)
    each = count // passes
    for _ in range(passes):
        for name in LISTENERS:
            before = _node_cpu_seconds(node)
            seconds[name] += asyncio.run(_connect_seconds(node.ports[name], _security(pki, name), each))
            cpu[name] += _node_cpu_seconds(node) - before
    out: dict = {}
    for name in LISTENERS:
        out[f"{name}_connections_s"] = each * passes / seconds[name]
        out[f"{name}_node_cpu_ms_per_connection"] = 1000 * cpu[name] / (each * passes)
    plain = out["plaintext_connections_s"]
    for name in LISTENERS[1:]:
        out[f"connections_{name}_over_plaintext"] = out[f"{name}_connections_s"] / plain
    return out


def test_authenticated_connection_rate(benchmark, size, strom_node, pki):
    # What is timed is a real authentication: the wrong password is refused on both SASL listeners.
    for name in ("sasl_plaintext", "sasl_ssl"):
        with pytest.raises(ConnectionError, match="authentication"):
            asyncio.run(_connect_seconds(strom_node.ports[name], _security(pki, name, "wrong"), 1))
    count, passes = size((400, 4), (20, 1))
    r = benchmark.pedantic(_handshakes, args=(strom_node, pki, count, passes), rounds=1, iterations=1)
    for name in LISTENERS:
        assert r[f"{name}_connections_s"] > 0
    benchmark.extra_info.update(r)
