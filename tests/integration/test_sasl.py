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

import json
import os
import socket
import struct
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from protocol.messages import API_NAMES
from tests.security.certs import make_pki

from .clients import refusals, roundtrip
from .clients.security import OAUTHBEARER, Security, confluent_config, oauthbearer, sasl
from .cluster import StromNode, free_ports

pytestmark = pytest.mark.timeout(120)

JS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "js")
KAFKAJS = os.path.join(JS_DIR, "node_modules", "kafkajs")
MESSAGES = [(f"k{i}".encode(), f"v{i}".encode()) for i in range(3)]
CLIENT_TIMEOUT_S = 25.0
SCRAM = "SCRAM-SHA-512"
PLAIN_USERS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
               'user_carol="carol-secret";')
AUDIENCE, ISSUER = "strom", "https://idp.example"
# Every principal of this module but User:svc-audit (OAUTHBEARER's sub) is a super user.
SUPER_USERS = "User:ANONYMOUS;User:alice;User:bob;User:carol;User:svc-orders"


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


def scram(pki, user="alice", password="alice-secret") -> Security:
    return sasl("SASL_SSL", SCRAM, user, password, pki.ca)


def oauth(pki, token: str) -> Security:
    return oauthbearer(token, pki.ca)


def _topic() -> str:
    return f"sasl-{uuid.uuid4().hex[:8]}"


# the test's name for each client: its driver's (tests/integration/clients)
CLIENTS = {"confluent": "confluent", "kafka_python": "kafka_python", "aiokafka": "aiokafka_client",
           "kafkajs": "kafkajs", "kcat": "kcat"}


def run_roundtrip(client: str, node, security: Security, bootstrap: str | None = None):
    """``client`` produces MESSAGES to a new topic and reads them back over the SASL_SSL listener
    (or ``bootstrap``)."""
    return roundtrip(CLIENTS[client], bootstrap or node.sasl_ssl, _topic(), MESSAGES, security=security,
                     timeout=CLIENT_TIMEOUT_S)


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


def test_each_client_produces_and_consumes_over_sasl_ssl_with_scram_sha_512(sasl_node, pki):
    who = scram(pki)
    got = side_by_side({name: (lambda name=name: run_roundtrip(name, sasl_node, who)) for name in CLIENTS})
    assert got == {name: MESSAGES for name in CLIENTS}


def test_plain_over_sasl_plaintext_authenticates_against_the_listeners_jaas_users(sasl_node, pki):
    host, port = sasl_node.sasl_plaintext
    who = sasl("SASL_PLAINTEXT", "PLAIN", "carol", "carol-secret")
    assert run_roundtrip("confluent", sasl_node, who, bootstrap=f"{host}:{port}") == MESSAGES


# ---- refusals: each client's own authentication error ------------------------------------------------

SCRAM_REFUSED = ("Authentication failed during authentication due to invalid credentials with SASL mechanism "
                 "SCRAM-SHA-512")
REFUSALS = {
    "confluent": (refusals.confluent_authentication, f"SASL authentication error: {SCRAM_REFUSED}"),
    "kafka_python": (refusals.kafka_python, SCRAM_REFUSED),
    "aiokafka": (refusals.aiokafka, SCRAM_REFUSED),
    "kafkajs": (refusals.kafkajs_error, "ERROR KafkaJSSASLAuthenticationError: SASL SCRAM SHA512 "
                                        f"authentication failed: {SCRAM_REFUSED}"),
    "kcat": (refusals.kcat_stderr, f"SASL authentication error: {SCRAM_REFUSED}"),
}


def test_a_wrong_password_and_an_unknown_user_are_refused_while_another_client_keeps_producing(
        sasl_node, pki):
    calls = {}
    for name, (refused, _) in REFUSALS.items():
        for case, who in (("wrong password", scram(pki, "alice", "wrong")),
                          ("unknown user", scram(pki, "mallory", "alice-secret"))):
            calls[name, case] = lambda refused=refused, who=who: refused(sasl_node.sasl_ssl, who, _topic())
    calls["good"] = lambda: run_roundtrip("confluent", sasl_node, scram(pki))
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
        sasl_node, pki):
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    bob = scram(pki, "bob", "bob-secret")
    refusals.confluent_authentication(sasl_node.sasl_ssl, bob, _topic())  # not yet a user
    admin = AdminClient({"bootstrap.servers": sasl_node.bootstrap})
    upsert = UserScramCredentialUpsertion("bob", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192),
                                          b"bob-secret")
    for future in admin.alter_user_scram_credentials([upsert], request_timeout=15).values():
        assert future.result(15) is None
    assert run_roundtrip("kafka_python", sasl_node, bob) == MESSAGES


# ---- OAUTHBEARER -------------------------------------------------------------------------------------

OAUTH_CLIENTS = [name for name in CLIENTS if name != "kcat"]


def test_each_client_produces_and_consumes_over_sasl_ssl_with_an_oauthbearer_token(sasl_node, pki, idp):
    who = oauth(pki, idp.token())
    got = side_by_side({name: (lambda name=name: run_roundtrip(name, sasl_node, who))
                        for name in OAUTH_CLIENTS})
    assert got == {name: MESSAGES for name in OAUTH_CLIENTS}


# RFC 7628's error, the message Kafka's OAuthBearerSaslServer fails the exchange with.
INVALID_TOKEN = '{"status":"invalid_token"}'


def aiokafka_oauth_refused(bootstrap: str, who: Security, topic: str) -> str:
    """aiokafka sends its token and takes any answer without an error code as success (it never
    sends RFC 7628's closing %x01), so the node's error challenge passes unnoticed and the next
    request, still unauthenticated, closes the connection, as Kafka's authenticator does."""
    return refusals.aiokafka(bootstrap, who, topic, only=None)


OAUTH_REFUSALS = {
    "confluent": (refusals.confluent_authentication, f"SASL authentication error: {INVALID_TOKEN}"),
    "kafka_python": (refusals.kafka_python, f"SaslAuthenticationFailedError: {INVALID_TOKEN}"),
    # aiokafka and kafkajs never send RFC 7628's %x01: what they see is the connection closed
    # at their next request, as against Kafka; the node's log says why (asserted below).
    "aiokafka": (aiokafka_oauth_refused, "KafkaConnectionError: Connection at"),
    "kafkajs": (refusals.kafkajs_error, "ERROR KafkaJSNumberOfRetriesExceeded: Closed connection"),
}


def test_an_expired_token_another_audience_and_a_foreign_key_are_refused_while_others_keep_working(
        sasl_node, pki, idp):
    tokens = {"expired": idp.token(lifetime_s=-3600),  # beyond the 30 s clock skew
              "another audience": idp.token(audience="billing"),
              "another key": idp.token(key=idp.other_key)}
    calls = {}
    for name, (refused, _) in OAUTH_REFUSALS.items():
        for case, token in tokens.items():
            who = oauth(pki, token)
            calls[name, case] = lambda refused=refused, who=who: refused(sasl_node.sasl_ssl, who, _topic())
    # kcat sends librdkafka's unsecured JWT for the username as its principal
    unsecured = Security("SASL_SSL", ca=pki.ca, mechanism=OAUTHBEARER, username="svc-orders",
                         token="unsecured")
    calls["kcat", "unsecured"] = lambda: refusals.kcat_stderr(sasl_node.sasl_ssl, unsecured, _topic())
    calls["good"] = lambda: run_roundtrip("confluent", sasl_node, oauth(pki, idp.token()))
    got = side_by_side(calls)
    assert got.pop("good") == MESSAGES
    expected = {key: (f"SASL authentication error: {INVALID_TOKEN}" if key[0] == "kcat"
                      else OAUTH_REFUSALS[key[0]][1]) for key in got}
    failures = {key: value for key, value in got.items()
                if isinstance(value, BaseException) or expected[key] not in value}
    assert not failures, "\n".join(f"{key}: {value!r}" for key, value in failures.items())
    with open(sasl_node.log_path) as f:
        refused = [line for line in f if "Failed authentication" in line and "token refused" in line]
    for reason in ("Signature has expired", "Audience doesn't match", "Signature verification failed",
                   "the token's algorithm 'none'"):
        assert any(reason in line for line in refused), (reason, refused[-5:])


def test_the_principal_of_an_oauthbearer_session_is_the_tokens_sub(sasl_node, pki, idp):
    from confluent_kafka import KafkaError, Producer

    topic = _topic()
    # svc-orders, a super user, produced and consumed above; svc-audit, the same issuer's token
    # for another sub, authenticates but is no super user and no ACL names it: refused, and the
    # node's audit log names it as the principal refused.
    results: list = []
    producer = Producer({**confluent_config(oauth(pki, idp.token("svc-audit"))),
                         "bootstrap.servers": sasl_node.sasl_ssl, "message.timeout.ms": 5000})
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
