"""TLS on a client listener, with every real client: one node with an SSL listener
(``listener.name.ssl.ssl.client.auth=required``: mutual TLS) beside its PLAINTEXT one, PEM key and
trust stores from tests/security/certs.py.

confluent-kafka, kafka-python, aiokafka, kafkajs and kcat each produce and consume over mutual
TLS with a client certificate of the trusted CA. A certificate from another CA and an expired
one are refused at the handshake (the client reports an SSL error and delivers nothing) while a
good client on the same listener keeps working. The clients are the shared drivers of
tests/integration/clients, connecting as clients/security.py's ``mutual_tls`` describes.
"""
from __future__ import annotations

import uuid

import pytest

from tests.security.certs import make_pki

from .clients import refusals, roundtrip
from .clients.security import Security, mutual_tls
from .cluster import StromNode, free_ports

pytestmark = pytest.mark.timeout(120)

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


CLIENTS = {"confluent": "confluent", "kafka_python": "kafka_python", "aiokafka": "aiokafka_client",
           "kafkajs": "kafkajs", "kcat": "kcat"}  # the test's name: the driver's (tests/integration/clients)


def tls(pki, who) -> Security:
    return mutual_tls(pki.ca, who.cert, who.key)


@pytest.mark.parametrize("client", list(CLIENTS))
def test_each_client_produces_and_consumes_over_mutual_tls(tls_node, pki, client):
    got = roundtrip(CLIENTS[client], tls_node.ssl_bootstrap, _topic(), MESSAGES, security=tls(pki, pki.alice),
                    timeout=CLIENT_TIMEOUT_S)
    assert got == MESSAGES


@pytest.mark.parametrize("who", ["untrusted", "expired"])
def test_a_certificate_from_another_ca_or_expired_is_refused_and_others_keep_working(tls_node, pki, who):
    topic = _topic()
    errors = refusals.confluent(tls_node.ssl_bootstrap, tls(pki, getattr(pki, who)), topic)
    assert any("SSL" in str(e) for e in errors), errors
    assert roundtrip("confluent", tls_node.ssl_bootstrap, topic, MESSAGES, security=tls(pki, pki.bob),
                     timeout=CLIENT_TIMEOUT_S) == MESSAGES  # and the refused one delivered nothing
    with open(tls_node.log_path) as f:
        log = f.read()
    assert "TLS handshake with 127.0.0.1 failed" in log
    assert "Traceback" not in log
