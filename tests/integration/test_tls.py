"""TLS on a client listener, with every real client: one node with an SSL listener
(``listener.name.ssl.ssl.client.auth=required``: mutual TLS) beside its PLAINTEXT one, PEM key and
trust stores from tests/security/certs.py.

confluent-kafka, kafka-python, aiokafka, kafkajs and kcat each produce and consume over mutual
TLS with a client certificate of the trusted CA. A certificate from another CA and an expired
one are refused at the handshake (the client reports an SSL error and delivers nothing) while a
good client on the same listener keeps working. Each client is driven here with its own TLS
options (the shared drivers in tests/integration/clients speak PLAINTEXT only).
"""
from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import uuid

import pytest

from tests.security.certs import make_pki

from .cluster import StromNode, free_ports

pytestmark = pytest.mark.timeout(120)

JS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "js")
KAFKAJS = os.path.join(JS_DIR, "node_modules", "kafkajs")
MESSAGES = [(f"k{i}".encode(), f"v{i}".encode()) for i in range(3)]
CLIENT_TIMEOUT_S = 25.0


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def tls_node(tmp_path_factory, pki):
    (ssl_port,) = free_ports(1)
    node = StromNode(base_dir=str(tmp_path_factory.mktemp("tls-node")), extra={
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,CONTROLLER:PLAINTEXT",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": pki.server.keystore,
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": pki.ca,
        "listener.name.ssl.ssl.client.auth": "required",
        "ssl.principal.mapping.rules": "RULE:^CN=(.*?),OU=Clients,.*$/$1/,DEFAULT",
    })
    props = node.properties
    props["listeners"] = props["listeners"].replace(
        "CONTROLLER://", f"SSL://127.0.0.1:{ssl_port},CONTROLLER://")
    props["advertised.listeners"] += f",SSL://127.0.0.1:{ssl_port}"
    node.ssl_bootstrap = f"127.0.0.1:{ssl_port}"
    try:
        node.start()
        yield node
    finally:
        node.stop()
        node.close()


def _topic() -> str:
    return f"tls-{uuid.uuid4().hex[:8]}"


# ---- one producer and one consumer per client, with its TLS options -------------------------------

def _confluent_conf(bootstrap, pki, who):
    return {"bootstrap.servers": bootstrap, "security.protocol": "SSL", "ssl.ca.location": pki.ca,
            "ssl.certificate.location": who.cert, "ssl.key.location": who.key}


def confluent_roundtrip(bootstrap, pki, who, topic):
    from confluent_kafka import Consumer, Producer

    producer = Producer(_confluent_conf(bootstrap, pki, who))
    for key, value in MESSAGES:
        producer.produce(topic, value, key)
    assert producer.flush(CLIENT_TIMEOUT_S) == 0
    consumer = Consumer({**_confluent_conf(bootstrap, pki, who), "group.id": "tls-confluent",
                         "enable.auto.commit": False})
    from confluent_kafka import TopicPartition
    consumer.assign([TopicPartition(topic, 0, 0)])
    got = []
    try:
        for _ in range(int(CLIENT_TIMEOUT_S * 2)):
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                got.append((msg.key(), msg.value()))
            if len(got) == len(MESSAGES):
                break
    finally:
        consumer.close()
    return got


def kafka_python_roundtrip(bootstrap, pki, who, topic):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    tls = {"security_protocol": "SSL", "ssl_cafile": pki.ca, "ssl_certfile": who.cert, "ssl_keyfile": who.key}
    producer = KafkaProducer(bootstrap_servers=bootstrap, **tls)
    for key, value in MESSAGES:
        producer.send(topic, value, key).get(CLIENT_TIMEOUT_S)
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                             consumer_timeout_ms=int(CLIENT_TIMEOUT_S * 1000), **tls)
    consumer.assign([TopicPartition(topic, 0)])
    consumer.seek_to_beginning()
    got = []
    for record in consumer:
        got.append((record.key, record.value))
        if len(got) == len(MESSAGES):
            break
    consumer.close()
    return got


def aiokafka_roundtrip(bootstrap, pki, who, topic):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
    from aiokafka.helpers import create_ssl_context

    async def run():
        context = create_ssl_context(cafile=pki.ca, certfile=who.cert, keyfile=who.key)
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, security_protocol="SSL", ssl_context=context)
        await producer.start()
        try:
            for key, value in MESSAGES:
                await producer.send_and_wait(topic, value, key)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, security_protocol="SSL", ssl_context=context,
                                    enable_auto_commit=False)
        await consumer.start()
        got = []
        try:
            tp = TopicPartition(topic, 0)
            consumer.assign([tp])
            await consumer.seek_to_beginning(tp)
            while len(got) < len(MESSAGES):
                batch = await consumer.getmany(tp, timeout_ms=1000)
                got += [(r.key, r.value) for r in batch.get(tp, [])]
        finally:
            await consumer.stop()
        return got

    return asyncio.run(asyncio.wait_for(run(), CLIENT_TIMEOUT_S))


KAFKAJS_SCRIPT = r"""
const { Kafka, logLevel } = require(process.env.KAFKAJS_PATH);
const fs = require('fs');
const c = JSON.parse(process.argv[2]);
const kafka = new Kafka({ clientId: 'tls-test', brokers: [c.bootstrap], logLevel: logLevel.NOTHING,
  ssl: { ca: [fs.readFileSync(c.ca, 'utf8')], cert: fs.readFileSync(c.cert, 'utf8'),
         key: fs.readFileSync(c.key, 'utf8') } });
(async () => {
  const producer = kafka.producer();
  await producer.connect();
  await producer.send({ topic: c.topic, messages: c.messages.map(([k, v]) => ({ key: k, value: v })) });
  await producer.disconnect();
  const consumer = kafka.consumer({ groupId: 'tls-kafkajs-' + c.topic });
  await consumer.connect();
  await consumer.subscribe({ topic: c.topic, fromBeginning: true });
  const got = [];
  await new Promise((resolve) => {
    consumer.run({ eachMessage: async ({ message }) => {
      got.push([message.key.toString(), message.value.toString()]);
      if (got.length === c.messages.length) resolve();
    } });
  });
  await consumer.disconnect();
  console.log(JSON.stringify(got));
})().catch((e) => { console.error(e && e.stack || e); process.exit(1); });
"""


def kafkajs_roundtrip(bootstrap, pki, who, topic, tmp_dir):
    node = shutil.which("node")
    if node is None or not os.path.isdir(KAFKAJS):
        pytest.fail("node or tests/integration/js/node_modules/kafkajs is missing (make setup installs them)")
    script = os.path.join(tmp_dir, "tls_roundtrip.js")
    with open(script, "w") as f:
        f.write(KAFKAJS_SCRIPT)
    command = json.dumps({"bootstrap": bootstrap, "ca": pki.ca, "cert": who.cert, "key": who.key,
                          "topic": topic, "messages": [[k.decode(), v.decode()] for k, v in MESSAGES]})
    proc = subprocess.run([node, script, command], capture_output=True, timeout=CLIENT_TIMEOUT_S + 10,
                          env={**os.environ, "KAFKAJS_PATH": KAFKAJS, "KAFKAJS_NO_PARTITIONER_WARNING": "1"})
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")[-2000:]
    return [(k.encode(), v.encode()) for k, v in json.loads(proc.stdout.decode().strip().splitlines()[-1])]


def _kcat_tls(pki, who):
    return ["-X", "security.protocol=SSL", "-X", f"ssl.ca.location={pki.ca}",
            "-X", f"ssl.certificate.location={who.cert}", "-X", f"ssl.key.location={who.key}"]


def kcat_roundtrip(bootstrap, pki, who, topic):
    kcat = shutil.which("kcat") or shutil.which("kafkacat")
    if kcat is None:
        pytest.fail("kcat is missing (make setup installs it)")
    lines = "".join(f"{k.decode()}:{v.decode()}\n" for k, v in MESSAGES).encode()
    subprocess.run([kcat, "-b", bootstrap, *_kcat_tls(pki, who), "-P", "-t", topic, "-K", ":", "-p", "0"],
                   input=lines, check=True, capture_output=True, timeout=CLIENT_TIMEOUT_S)
    proc = subprocess.run([kcat, "-b", bootstrap, *_kcat_tls(pki, who), "-C", "-t", topic, "-p", "0",
                           "-o", "beginning", "-c", str(len(MESSAGES)), "-e", "-f", "%k:%s\n"],
                          check=True, capture_output=True, timeout=CLIENT_TIMEOUT_S)
    return [tuple(part.encode() for part in line.split(":", 1))
            for line in proc.stdout.decode().splitlines() if line]


ROUNDTRIPS = {
    "confluent": confluent_roundtrip,
    "kafka_python": kafka_python_roundtrip,
    "aiokafka": aiokafka_roundtrip,
    "kafkajs": kafkajs_roundtrip,
    "kcat": kcat_roundtrip,
}


@pytest.mark.parametrize("client", list(ROUNDTRIPS))
def test_each_client_produces_and_consumes_over_mutual_tls(tls_node, pki, client, tmp_path):
    roundtrip = ROUNDTRIPS[client]
    topic = _topic()
    args = (tls_node.ssl_bootstrap, pki, pki.alice, topic)
    got = roundtrip(*args, str(tmp_path)) if client == "kafkajs" else roundtrip(*args)
    assert got == MESSAGES


def _confluent_refused(bootstrap, pki, who, topic) -> tuple[list[str], list[bool]]:
    """What a confluent-kafka producer with ``who``'s certificate reports (its errors), and
    whether its one message was delivered (its delivery report)."""
    from confluent_kafka import Producer

    errors: list[str] = []
    delivered: list[bool] = []
    producer = Producer({**_confluent_conf(bootstrap, pki, who), "error_cb": lambda e: errors.append(str(e)),
                         "message.timeout.ms": 3000})
    producer.produce(topic, b"refused", b"k", on_delivery=lambda err, msg: delivered.append(err is None))
    producer.flush(8)
    return errors, delivered


@pytest.mark.parametrize("who", ["untrusted", "expired"])
def test_a_certificate_from_another_ca_or_expired_is_refused_and_others_keep_working(tls_node, pki, who):
    topic = _topic()
    errors, delivered = _confluent_refused(tls_node.ssl_bootstrap, pki, getattr(pki, who), topic)
    assert delivered == [False]
    assert any("SSL" in e for e in errors), errors
    assert confluent_roundtrip(tls_node.ssl_bootstrap, pki, pki.bob, topic) == MESSAGES
    with open(tls_node.log_path) as f:
        log = f.read()
    assert "TLS handshake with 127.0.0.1 failed" in log
    assert "Traceback" not in log
