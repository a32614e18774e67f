"""TLS on a client listener, with every real client: one node with an SSL listener
(``listener.name.ssl.ssl.client.auth=required``: mutual TLS) beside its PLAINTEXT one, PEM key and
trust stores from tests/security/certs.py.

The listener's certificate is rotated without a restart with ``strom configs --alter`` of
``listener.name.ssl.ssl.keystore.location`` on the broker: confluent-kafka then connects
trusting only the new certificate's CA, and a key store with another subject is refused with
Kafka's reason.

confluent-kafka, kafka-python, aiokafka, kafkajs and kcat each produce and consume over mutual
TLS with a client certificate of the trusted CA. A certificate from another CA and an expired
one are refused at the handshake (the client reports an SSL error and delivers nothing) while a
good client on the same listener keeps working. The clients are the shared drivers of
tests/integration/clients, connecting as clients/security.py's ``mutual_tls`` describes.
"""
from __future__ import annotations

import datetime
import os
import socket
import ssl
import time
import uuid

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from strom.cli import main
from tests.security import certs
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


def _served_certificate(node, who) -> bytes:
    """The certificate a new TLS connection to the SSL listener is served (DER)."""
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    context.load_cert_chain(who.cert, who.key)
    host, port = node.ssl_bootstrap.split(":")
    with socket.create_connection((host, int(port)), timeout=10) as raw:
        with context.wrap_socket(raw, server_hostname=host) as conn:
            return conn.getpeercert(binary_form=True)


def _der(path: str) -> bytes:
    with open(path, "rb") as f:
        return x509.load_pem_x509_certificate(f.read()).public_bytes(serialization.Encoding.DER)


def _broker_configs(capsys, node, *args) -> tuple[int, str]:
    capsys.readouterr()
    rc = main(["configs", "--bootstrap-server", node.bootstrap, "--entity-type", "brokers",
               "--entity-name", str(node.node_id), "--alter", *args])
    out = capsys.readouterr()
    return rc, out.out + out.err


def _until_served(node, who, der: bytes) -> bytes:
    deadline = time.monotonic() + 10
    served = _served_certificate(node, who)
    while served != der and time.monotonic() < deadline:
        time.sleep(0.1)
        served = _served_certificate(node, who)
    return served


def test_a_certificate_rotated_with_strom_configs_serves_new_connections_without_a_restart(
        tls_node, pki, tmp_path, capsys):
    # The successor: the same subject and names as the server's, from a CA only the new client trusts.
    now = datetime.datetime.now(datetime.UTC)
    ca_key, ca_cert = certs._ca("Renewal CA", certs.ORG, now)
    day = datetime.timedelta(days=1)
    key, cert = certs._leaf(ca_key, ca_cert, certs._name("localhost", "Brokers", certs.ORG), server=True,
                            not_before=now - day, not_after=now + 9 * day)
    renewed = certs._identity(str(tmp_path), "renewed", key, cert, ca_cert)
    renewal_ca = certs._write(os.path.join(tmp_path, "renewal-ca.pem"), certs._pem(ca_cert))
    location = "listener.name.ssl.ssl.keystore.location"

    rc, out = _broker_configs(capsys, tls_node, "--add-config", f"{location}={pki.alice.keystore}")
    assert rc != 0 and "Keystore DistinguishedName does not match" in out, out
    assert _served_certificate(tls_node, pki.alice) == _der(pki.server.cert)

    rc, out = _broker_configs(capsys, tls_node, "--add-config", f"{location}={renewed.keystore}")
    assert rc == 0, out
    try:
        assert _until_served(tls_node, pki.alice, _der(renewed.cert)) == _der(renewed.cert)
        renewal = mutual_tls(renewal_ca, pki.alice.cert, pki.alice.key)
        got = roundtrip("confluent", tls_node.ssl_bootstrap, _topic(), MESSAGES, security=renewal,
                        timeout=CLIENT_TIMEOUT_S)
        assert got == MESSAGES
    finally:  # back to the static key store, for the module's other tests
        rc, out = _broker_configs(capsys, tls_node, "--delete-config", location)
        assert rc == 0, out
        assert _until_served(tls_node, pki.alice, _der(pki.server.cert)) == _der(pki.server.cert)
    with open(tls_node.log_path) as f:
        assert "Traceback" not in f.read()
