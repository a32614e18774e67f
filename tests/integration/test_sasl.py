"""SASL on client listeners, with every real client: one node with a SASL_SSL and a
SASL_PLAINTEXT listener beside its PLAINTEXT one, PLAIN and SCRAM-SHA-512 enabled on both
(PLAIN's users in the listener's JAAS config, SCRAM's in the metadata log: alice from
``strom format --add-scram``, bob from AlterUserScramCredentials while the node runs).

confluent-kafka, kafka-python, aiokafka, kafkajs and kcat each produce and consume over
SASL_SSL with SCRAM-SHA-512; confluent-kafka over SASL_PLAINTEXT with PLAIN. A wrong password
and an unknown user are refused with each client's own authentication error while another
client keeps producing; an unauthenticated Produce closes its connection with one info line
and no traceback. Clients run side by side (threads) to keep the module short.

OAUTHBEARER (KIP-255, KIP-768) on the same listeners: the node validates JWTs against a JWKS
file (an RSA key's public JWK) with an expected audience and issuer. confluent-kafka (oauth_cb),
kafka-python and aiokafka (sasl_oauth_token_provider) and kafkajs (oauthBearerProvider) produce
and consume over SASL_SSL with a token the key signed; an expired token, a token for another
audience and one signed by another key are refused (confluent-kafka and kafka-python with their
authentication error; aiokafka and kafkajs, which never send RFC 7628's closing %x01, see the
connection closed at their next request, as against Kafka), as is kcat's token (librdkafka's
unsecured JWT is the only token Debian's kcat can send: its librdkafka has no OIDC). The
principal is the token's sub: the node runs Kafka's StandardAuthorizer with no ACLs at all and
every principal of this module a super user, so a good token whose sub is not one of them
authenticates and is refused TOPIC_AUTHORIZATION_FAILED.
"""
from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import shutil
import socket
import struct
import subprocess
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from protocol.messages import API_NAMES
from tests.security.certs import make_pki

from .cluster import StromNode, free_ports

pytestmark = pytest.mark.timeout(120)

JS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "js")
KAFKAJS = os.path.join(JS_DIR, "node_modules", "kafkajs")
MESSAGES = [(f"k{i}".encode(), f"v{i}".encode()) for i in range(3)]
CLIENT_TIMEOUT_S = 25.0
SCRAM = "SCRAM-SHA-512"
PLAIN_USERS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
               'user_carol="carol-secret";')
OAUTHBEARER = "OAUTHBEARER"
AUDIENCE, ISSUER = "strom", "https://idp.example"
# Every principal of this module but User:svc-audit (OAUTHBEARER's sub) is a super user.
SUPER_USERS = "User:ANONYMOUS;User:alice;User:bob;User:carol;User:svc-orders"


class Who:
    """The listener and credentials a client connects with (``token``: OAUTHBEARER's JWT)."""

    def __init__(self, bootstrap: str, protocol: str, mechanism: str, user: str, password: str, ca: str,
                 token: str | None = None):
        self.bootstrap, self.protocol, self.mechanism = bootstrap, protocol, mechanism
        self.user, self.password, self.ca = user, password, ca
        self.token = token

    @property
    def oauth(self) -> bool:
        return self.mechanism == OAUTHBEARER

    @property
    def tls(self) -> bool:
        return self.protocol == "SASL_SSL"


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return make_pki(tmp_path_factory.mktemp("pki"))


class IdentityProvider:
    """The keys an identity provider signs tokens with, its JWKS in a file (a file: URL), and a
    second key the node does not know."""

    def __init__(self, directory):
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.other_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self.key.public_key()))
        jwk.update(kid="idp-1", use="sig", alg="RS256")
        path = directory / "jwks.json"
        path.write_text(json.dumps({"keys": [jwk]}))
        self.jwks_url = path.as_uri()

    def token(self, sub: str = "svc-orders", audience: str = AUDIENCE, lifetime_s: int = 600,
              key=None) -> str:
        now = int(time.time())
        claims = {"sub": sub, "iss": ISSUER, "aud": audience, "iat": now - 5, "exp": now + lifetime_s,
                  "scope": "kafka"}
        return jwt.encode(claims, key or self.key, algorithm="RS256", headers={"kid": "idp-1"})


@pytest.fixture(scope="module")
def idp(tmp_path_factory):
    return IdentityProvider(tmp_path_factory.mktemp("idp"))


@pytest.fixture(scope="module")
def sasl_node(tmp_path_factory, pki, idp):
    ssl_port, plain_port = free_ports(2)
    node = StromNode(base_dir=str(tmp_path_factory.mktemp("sasl-node")), extra={
        "listener.security.protocol.map": ("PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL,"
                                           "SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT"),
        "sasl.enabled.mechanisms": f"PLAIN,{SCRAM},{OAUTHBEARER}",
        "sasl.oauthbearer.jwks.endpoint.url": idp.jwks_url,
        "sasl.oauthbearer.expected.audience": AUDIENCE,
        "sasl.oauthbearer.expected.issuer": ISSUER,
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": SUPER_USERS,
        "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_USERS,
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_USERS,
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": pki.server.keystore,
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": pki.ca,
    }, format_args=["--add-scram", f"{SCRAM}=[name=alice,password=alice-secret]"])
    props = node.properties
    props["listeners"] = props["listeners"].replace(
        "CONTROLLER://", f"SASL_SSL://127.0.0.1:{ssl_port},SASL_PLAINTEXT://127.0.0.1:{plain_port},CONTROLLER://")
    props["advertised.listeners"] += f",SASL_SSL://127.0.0.1:{ssl_port},SASL_PLAINTEXT://127.0.0.1:{plain_port}"
    node.sasl_ssl = f"127.0.0.1:{ssl_port}"
    node.sasl_plaintext = ("127.0.0.1", plain_port)
    try:
        node.start()
        yield node
    finally:
        node.stop()
        node.close()


def scram(node, pki, user="alice", password="alice-secret") -> Who:
    return Who(node.sasl_ssl, "SASL_SSL", SCRAM, user, password, pki.ca)


def oauth(node, pki, token: str) -> Who:
    return Who(node.sasl_ssl, "SASL_SSL", OAUTHBEARER, "", "", pki.ca, token=token)


def _topic() -> str:
    return f"sasl-{uuid.uuid4().hex[:8]}"


# ---- one producer and one consumer per client, with its SASL options -------------------------------

def _confluent_conf(who: Who) -> dict:
    conf = {"bootstrap.servers": who.bootstrap, "security.protocol": who.protocol,
            "sasl.mechanisms": who.mechanism}
    if who.oauth:
        claims = jwt.decode(who.token, options={"verify_signature": False, "verify_exp": False,
                                                "verify_aud": False})
        # oauth_cb: the token, its expiry (seconds since the epoch) and its principal. librdkafka
        # will not send a token it knows expired: it is told a future expiry, so that the broker
        # is the one to judge the token.
        expiry = max(float(claims["exp"]), time.time() + 60)
        conf["oauth_cb"] = lambda _config: (who.token, expiry, claims["sub"])
    else:
        conf.update({"sasl.username": who.user, "sasl.password": who.password})
    if who.tls:
        conf["ssl.ca.location"] = who.ca
    return conf


def confluent_roundtrip(who: Who, topic: str, tmp_dir: str):
    from confluent_kafka import Consumer, Producer, TopicPartition

    producer = Producer(_confluent_conf(who))
    for key, value in MESSAGES:
        producer.produce(topic, value, key)
    assert producer.flush(CLIENT_TIMEOUT_S) == 0
    consumer = Consumer({**_confluent_conf(who), "group.id": "sasl-confluent", "enable.auto.commit": False})
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


def _kafka_python_conf(who: Who) -> dict:
    conf = {"bootstrap_servers": who.bootstrap, "security_protocol": who.protocol,
            "sasl_mechanism": who.mechanism}
    if who.oauth:
        from kafka.net.sasl.oauth import AbstractTokenProvider

        class Token(AbstractTokenProvider):
            def token(self):
                return who.token

        conf["sasl_oauth_token_provider"] = Token()
    else:
        conf.update({"sasl_plain_username": who.user, "sasl_plain_password": who.password})
    if who.tls:
        conf["ssl_cafile"] = who.ca
    return conf


def kafka_python_roundtrip(who: Who, topic: str, tmp_dir: str):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    producer = KafkaProducer(**_kafka_python_conf(who))
    for key, value in MESSAGES:
        producer.send(topic, value, key).get(CLIENT_TIMEOUT_S)
    producer.close()
    consumer = KafkaConsumer(enable_auto_commit=False, consumer_timeout_ms=int(CLIENT_TIMEOUT_S * 1000),
                             **_kafka_python_conf(who))
    consumer.assign([TopicPartition(topic, 0)])
    consumer.seek_to_beginning()
    got = []
    for record in consumer:
        got.append((record.key, record.value))
        if len(got) == len(MESSAGES):
            break
    consumer.close()
    return got


def _aiokafka_conf(who: Who) -> dict:
    from aiokafka.helpers import create_ssl_context

    conf = {"bootstrap_servers": who.bootstrap, "security_protocol": who.protocol,
            "sasl_mechanism": who.mechanism}
    if who.oauth:
        from aiokafka.abc import AbstractTokenProvider

        class Token(AbstractTokenProvider):
            async def token(self):
                return who.token

        conf["sasl_oauth_token_provider"] = Token()
    else:
        conf.update({"sasl_plain_username": who.user, "sasl_plain_password": who.password})
    if who.tls:
        conf["ssl_context"] = create_ssl_context(cafile=who.ca)
    return conf


def aiokafka_roundtrip(who: Who, topic: str, tmp_dir: str):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    async def run():
        producer = AIOKafkaProducer(**_aiokafka_conf(who))
        await producer.start()
        try:
            for key, value in MESSAGES:
                await producer.send_and_wait(topic, value, key)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(enable_auto_commit=False, **_aiokafka_conf(who))
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
const kafka = new Kafka({ clientId: 'sasl-test', brokers: [c.bootstrap], logLevel: logLevel.NOTHING,
  ssl: c.ca ? { ca: [fs.readFileSync(c.ca, 'utf8')] } : false,
  sasl: c.token ? { mechanism: 'oauthbearer', oauthBearerProvider: async () => ({ value: c.token }) }
    : { mechanism: c.mechanism.toLowerCase(), username: c.user, password: c.password },
  retry: { retries: c.retries } });
(async () => {
  const producer = kafka.producer();
  await producer.connect();
  await producer.send({ topic: c.topic, messages: c.messages.map(([k, v]) => ({ key: k, value: v })) });
  await producer.disconnect();
  const consumer = kafka.consumer({ groupId: 'sasl-kafkajs-' + c.topic });
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
})().catch((e) => { console.error('ERROR ' + (e && e.name) + ': ' + (e && e.message)); process.exit(1); });
"""


def _kafkajs(who: Who, topic: str, tmp_dir: str, retries: int = 5) -> subprocess.CompletedProcess:
    node = shutil.which("node")
    if node is None or not os.path.isdir(KAFKAJS):
        pytest.fail("node or tests/integration/js/node_modules/kafkajs is missing (make setup installs them)")
    script = os.path.join(tmp_dir, "sasl_roundtrip.js")
    with open(script, "w") as f:
        f.write(KAFKAJS_SCRIPT)
    command = json.dumps({"bootstrap": who.bootstrap, "ca": who.ca if who.tls else None,
                          "mechanism": who.mechanism, "user": who.user, "password": who.password,
                          "token": who.token, "retries": retries, "topic": topic,
                          "messages": [[k.decode(), v.decode()] for k, v in MESSAGES]})
    return subprocess.run([node, script, command], capture_output=True, timeout=CLIENT_TIMEOUT_S + 10,
                          env={**os.environ, "KAFKAJS_PATH": KAFKAJS, "KAFKAJS_NO_PARTITIONER_WARNING": "1"})


def kafkajs_roundtrip(who: Who, topic: str, tmp_dir: str):
    proc = _kafkajs(who, topic, tmp_dir)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")[-2000:]
    return [(k.encode(), v.encode()) for k, v in json.loads(proc.stdout.decode().strip().splitlines()[-1])]


def _kcat_args(who: Who) -> list[str]:
    kcat = shutil.which("kcat") or shutil.which("kafkacat")
    if kcat is None:
        pytest.fail("kcat is missing (make setup installs it)")
    args = [kcat, "-b", who.bootstrap, "-X", f"security.protocol={who.protocol}",
            "-X", f"sasl.mechanisms={who.mechanism}"]
    if who.oauth:  # librdkafka's own unsecured JWT (alg none): Debian's build has no OIDC
        args += ["-X", "enable.sasl.oauthbearer.unsecure.jwt=true",
                 "-X", f"sasl.oauthbearer.config=principal={who.user} scope=kafka"]
    else:
        args += ["-X", f"sasl.username={who.user}", "-X", f"sasl.password={who.password}"]
    if who.tls:
        args += ["-X", f"ssl.ca.location={who.ca}"]
    return args


def kcat_roundtrip(who: Who, topic: str, tmp_dir: str):
    lines = "".join(f"{k.decode()}:{v.decode()}\n" for k, v in MESSAGES).encode()
    proc = subprocess.run([*_kcat_args(who), "-P", "-t", topic, "-K", ":", "-p", "0"],
                          input=lines, capture_output=True, timeout=CLIENT_TIMEOUT_S)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")[-2000:]
    proc = subprocess.run([*_kcat_args(who), "-C", "-t", topic, "-p", "0", "-o", "beginning",
                           "-c", str(len(MESSAGES)), "-e", "-f", "%k:%s\n"],
                          capture_output=True, timeout=CLIENT_TIMEOUT_S)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")[-2000:]
    return [tuple(part.encode() for part in line.split(":", 1))
            for line in proc.stdout.decode().splitlines() if line]


ROUNDTRIPS = {
    "confluent": confluent_roundtrip,
    "kafka_python": kafka_python_roundtrip,
    "aiokafka": aiokafka_roundtrip,
    "kafkajs": kafkajs_roundtrip,
    "kcat": kcat_roundtrip,
}


def side_by_side(calls: dict) -> dict:
    """Run each named call in a thread of its own; each one's result, or its exception."""
    out = {}
    with ThreadPoolExecutor(len(calls)) as pool:
        futures = {name: pool.submit(call) for name, call in calls.items()}
        for name, future in futures.items():
            try:
                out[name] = future.result()
            except Exception as e:  # reported per client by the caller's assert
                out[name] = e
    return out


def test_each_client_produces_and_consumes_over_sasl_ssl_with_scram_sha_512(sasl_node, pki, tmp_path):
    who = scram(sasl_node, pki)
    got = side_by_side({name: (lambda rt=rt: rt(who, _topic(), str(tmp_path)))
                        for name, rt in ROUNDTRIPS.items()})
    assert got == {name: MESSAGES for name in ROUNDTRIPS}


def test_plain_over_sasl_plaintext_authenticates_against_the_listeners_jaas_users(sasl_node, pki, tmp_path):
    host, port = sasl_node.sasl_plaintext
    who = Who(f"{host}:{port}", "SASL_PLAINTEXT", "PLAIN", "carol", "carol-secret", pki.ca)
    assert confluent_roundtrip(who, _topic(), str(tmp_path)) == MESSAGES


# ---- refusals: each client's own authentication error ------------------------------------------------

def confluent_refused(who: Who, topic: str, tmp_dir: str) -> str:
    from confluent_kafka import KafkaError, Producer

    errors: list = []
    delivered: list[bool] = []
    producer = Producer({**_confluent_conf(who), "error_cb": errors.append, "message.timeout.ms": 3000})
    producer.produce(topic, b"refused", b"k", on_delivery=lambda err, msg: delivered.append(err is None))
    producer.flush(8)
    assert delivered == [False]
    auth = [e for e in errors if e.code() == KafkaError._AUTHENTICATION]
    assert auth, errors
    return str(auth[0])


@contextlib.contextmanager
def library_log(name: str):
    """The messages a client library logs (at WARNING and above) while the block runs: kafka-python
    and aiokafka log the broker's authentication error and raise only that bootstrap failed."""
    records: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record.getMessage())

    handler = Collect(logging.WARNING)
    logger = logging.getLogger(name)
    logger.addHandler(handler)
    try:
        yield records
    finally:
        logger.removeHandler(handler)


def kafka_python_refused(who: Who, topic: str, tmp_dir: str) -> str:
    from kafka import KafkaProducer
    from kafka.errors import KafkaTimeoutError

    with library_log("kafka") as log, pytest.raises(KafkaTimeoutError, match="Unable to bootstrap"):
        KafkaProducer(bootstrap_timeout_ms=3000, **_kafka_python_conf(who)).close(0)
    return "\n".join(line for line in log if "SaslAuthenticationFailedError" in line)


def aiokafka_refused(who: Who, topic: str, tmp_dir: str) -> str:
    from aiokafka import AIOKafkaProducer
    from aiokafka.errors import KafkaConnectionError

    async def run():
        producer = AIOKafkaProducer(**_aiokafka_conf(who))
        try:
            await producer.start()
        finally:
            await producer.stop()

    with library_log("aiokafka") as log, pytest.raises(KafkaConnectionError, match="Unable to bootstrap"):
        asyncio.run(asyncio.wait_for(run(), CLIENT_TIMEOUT_S))
    return "\n".join(line for line in log if "SaslAuthenticationFailed" in line)


def kafkajs_refused(who: Who, topic: str, tmp_dir: str) -> str:
    proc = _kafkajs(who, topic, tmp_dir, retries=0)
    assert proc.returncode != 0
    return proc.stderr.decode(errors="replace").strip().splitlines()[-1]


def kcat_refused(who: Who, topic: str, tmp_dir: str) -> str:
    proc = subprocess.run([*_kcat_args(who), "-P", "-t", topic, "-p", "0", "-m", "5"],
                          input=b"refused\n", capture_output=True, timeout=CLIENT_TIMEOUT_S)
    return proc.stderr.decode(errors="replace")


REFUSALS = {
    "confluent": (confluent_refused, "SASL authentication error: Authentication failed during authentication "
                                     "due to invalid credentials with SASL mechanism SCRAM-SHA-512"),
    "kafka_python": (kafka_python_refused, "Authentication failed during authentication due to invalid "
                                           "credentials with SASL mechanism SCRAM-SHA-512"),
    "aiokafka": (aiokafka_refused, "Authentication failed during authentication due to invalid "
                                   "credentials with SASL mechanism SCRAM-SHA-512"),
    "kafkajs": (kafkajs_refused, "ERROR KafkaJSSASLAuthenticationError: SASL SCRAM SHA512 authentication "
                                 "failed: Authentication failed during authentication due to invalid "
                                 "credentials with SASL mechanism SCRAM-SHA-512"),
    "kcat": (kcat_refused, "SASL authentication error: Authentication failed during authentication due to "
                           "invalid credentials with SASL mechanism SCRAM-SHA-512"),
}


def test_a_wrong_password_and_an_unknown_user_are_refused_while_another_client_keeps_producing(
        sasl_node, pki, tmp_path):
    calls = {}
    for name, (refused, _) in REFUSALS.items():
        for case, who in (("wrong password", scram(sasl_node, pki, "alice", "wrong")),
                          ("unknown user", scram(sasl_node, pki, "mallory", "alice-secret"))):
            calls[name, case] = lambda refused=refused, who=who: refused(who, _topic(), str(tmp_path))
    calls["good"] = lambda: confluent_roundtrip(scram(sasl_node, pki), _topic(), str(tmp_path))
    got = side_by_side(calls)
    assert got.pop("good") == MESSAGES
    failures = {key: value for key, value in got.items()
                if isinstance(value, BaseException) or REFUSALS[key[0]][1] not in value}
    assert not failures, failures


def _frame(api_key: int, version: int, correlation_id: int, body: bytes) -> bytes:
    client_id = b"raw"
    header = struct.pack(">hhih", api_key, version, correlation_id, len(client_id)) + client_id
    return struct.pack(">i", len(header) + len(body)) + header + body


def test_an_unauthenticated_produce_closes_the_connection_without_a_traceback(sasl_node):
    host, port = sasl_node.sasl_plaintext
    with socket.create_connection((host, port), timeout=10) as sock:
        # Produce v3: transactional_id null, acks 1, timeout 1000, no topics.
        sock.sendall(_frame(0, 3, 7, struct.pack(">hhii", -1, 1, 1000, 0)))
        assert sock.recv(4096) == b""  # closed, nothing answered
    with open(sasl_node.log_path) as f:
        log = f.read()
    assert f"on SASL_PLAINTEXT: {API_NAMES[0]} request before SASL authentication" in log
    assert "Traceback" not in log


def test_a_user_created_by_alter_user_scram_credentials_authenticates_without_a_restart(
        sasl_node, pki, tmp_path):
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    bob = scram(sasl_node, pki, "bob", "bob-secret")
    confluent_refused(bob, _topic(), str(tmp_path))  # not yet a user
    admin = AdminClient({"bootstrap.servers": sasl_node.bootstrap})
    upsert = UserScramCredentialUpsertion("bob", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192),
                                          b"bob-secret")
    for future in admin.alter_user_scram_credentials([upsert], request_timeout=15).values():
        assert future.result(15) is None
    assert kafka_python_roundtrip(bob, _topic(), str(tmp_path)) == MESSAGES


# ---- OAUTHBEARER -------------------------------------------------------------------------------------

OAUTH_ROUNDTRIPS = {name: rt for name, rt in ROUNDTRIPS.items() if name != "kcat"}


def test_each_client_produces_and_consumes_over_sasl_ssl_with_an_oauthbearer_token(sasl_node, pki, idp,
                                                                                     tmp_path):
    who = oauth(sasl_node, pki, idp.token())
    got = side_by_side({name: (lambda rt=rt: rt(who, _topic(), str(tmp_path)))
                        for name, rt in OAUTH_ROUNDTRIPS.items()})
    assert got == {name: MESSAGES for name in OAUTH_ROUNDTRIPS}


# RFC 7628's error, the message Kafka's OAuthBearerSaslServer fails the exchange with.
INVALID_TOKEN = '{"status":"invalid_token"}'


def aiokafka_oauth_refused(who: Who, topic: str, tmp_dir: str) -> str:
    """aiokafka sends its token and takes any answer without an error code as success (it never
    sends RFC 7628's closing %x01), so the node's error challenge passes unnoticed and the next
    request, still unauthenticated, closes the connection, as Kafka's authenticator does."""
    from aiokafka import AIOKafkaProducer
    from aiokafka.errors import KafkaConnectionError

    async def run():
        producer = AIOKafkaProducer(**_aiokafka_conf(who))
        try:
            await producer.start()
        finally:
            await producer.stop()

    with library_log("aiokafka") as log, pytest.raises(KafkaConnectionError, match="Unable to bootstrap"):
        asyncio.run(asyncio.wait_for(run(), CLIENT_TIMEOUT_S))
    return "\n".join(log)
OAUTH_REFUSALS = {
    "confluent": (confluent_refused, f"SASL authentication error: {INVALID_TOKEN}"),
    "kafka_python": (kafka_python_refused, f"SaslAuthenticationFailedError: {INVALID_TOKEN}"),
    # aiokafka and kafkajs never send RFC 7628's %x01: what they see is the connection closed
    # at their next request, as against Kafka; the node's log says why (asserted below).
    "aiokafka": (aiokafka_oauth_refused, "KafkaConnectionError: Connection at"),
    "kafkajs": (kafkajs_refused, "ERROR KafkaJSNumberOfRetriesExceeded: Closed connection"),
}


def test_an_expired_token_another_audience_and_a_foreign_key_are_refused_while_others_keep_working(
        sasl_node, pki, idp, tmp_path):
    tokens = {"expired": idp.token(lifetime_s=-3600),  # beyond the 30 s clock skew
              "another audience": idp.token(audience="billing"),
              "another key": idp.token(key=idp.other_key)}
    calls = {}
    for name, (refused, _) in OAUTH_REFUSALS.items():
        for case, token in tokens.items():
            who = oauth(sasl_node, pki, token)
            calls[name, case] = lambda refused=refused, who=who: refused(who, _topic(), str(tmp_path))
    unsecured = Who(sasl_node.sasl_ssl, "SASL_SSL", OAUTHBEARER, "svc-orders", "", pki.ca, token="unsecured")
    calls["kcat", "unsecured"] = lambda: kcat_refused(unsecured, _topic(), str(tmp_path))
    calls["good"] = lambda: confluent_roundtrip(oauth(sasl_node, pki, idp.token()), _topic(), str(tmp_path))
    got = side_by_side(calls)
    assert got.pop("good") == MESSAGES
    expected = {key: (f"SASL authentication error: {INVALID_TOKEN}" if key[0] == "kcat"
                      else OAUTH_REFUSALS[key[0]][1]) for key in got}
    failures = {key: value for key, value in got.items()
                if isinstance(value, BaseException) or expected[key] not in value}
    assert not failures, "\n".join(f"{key}: {value!r}" for key, value in failures.items())
    with open(sasl_node.log_path) as f:
        refusals = [line for line in f if "Failed authentication" in line and "token refused" in line]
    for reason in ("Signature has expired", "Audience doesn't match", "Signature verification failed",
                   "the token's algorithm 'none'"):
        assert any(reason in line for line in refusals), (reason, refusals[-5:])


def test_the_principal_of_an_oauthbearer_session_is_the_tokens_sub(sasl_node, pki, idp, tmp_path):
    from confluent_kafka import KafkaError, Producer

    topic = _topic()
    # svc-orders, a super user, produced and consumed above; svc-audit, the same issuer's token
    # for another sub, authenticates but is no super user and no ACL names it: refused, and the
    # node's audit log names it as the principal refused.
    results: list = []
    producer = Producer({**_confluent_conf(oauth(sasl_node, pki, idp.token("svc-audit"))),
                         "message.timeout.ms": 5000})
    producer.produce(topic, b"audit", b"k", on_delivery=lambda err, msg: results.append(err))
    producer.flush(10)
    assert [e.code() for e in results] == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
    with open(sasl_node.log_path) as f:
        denied = [line for line in f if "User:svc-audit" in line and "Denied" in line]
    assert any(topic in line for line in denied), denied


def test_format_takes_a_config_whose_jwks_endpoint_is_down_and_the_broker_refuses_to_start_naming_it(
        tmp_path):
    from .cluster import NodeError

    port, idp_port = free_ports(2)  # nothing listens on idp_port
    url = f"http://127.0.0.1:{idp_port}/jwks"
    node = StromNode(base_dir=str(tmp_path / "down-idp"), extra={
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,OAUTH:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
        "sasl.enabled.mechanisms": OAUTHBEARER,
        "sasl.oauthbearer.jwks.endpoint.url": url,
    }, ready_timeout=30)
    node.properties["listeners"] = node.properties["listeners"].replace(
        "CONTROLLER://", f"OAUTH://127.0.0.1:{port},CONTROLLER://")
    try:
        node.format()  # reads the config, fetches nothing: the identity provider may come up later
        with pytest.raises(NodeError) as e:
            node.start()
    finally:
        node.close()
    assert (f"listener.name.oauth.oauthbearer.sasl.oauthbearer.jwks.endpoint.url: cannot read the "
            f"JWKS at {url}") in str(e.value)
    assert "Traceback" not in str(e.value)
