"""A TLS listener's certificate rotated without a restart (KIP-226): Kafka's dynamic per-listener
ssl.* configs, SslFactory's validation of a new key store (the same subject and alternative
names unless allowed otherwise), the context swapped for new connections while open ones keep
theirs, and a failed reload leaving the old context serving."""
from __future__ import annotations

import asyncio
import datetime
import logging
import shutil
import ssl
import struct

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from protocol.net import Server
from security import tls
from security.listener_ssl import is_sensitive, listener_ssl_name, refusal
from strom.config import ServerConfig
from tests.security import certs

TIMEOUT_S = 10
LOCATION = "listener.name.ssl.ssl.keystore.location"


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    """A CA and four server identities of it: the first, its successor (the same subject and
    names, a new key), one with another subject and one without the host's names."""
    directory = str(tmp_path_factory.mktemp("rotate"))
    now = datetime.datetime.now(datetime.UTC)
    ca_key, ca_cert = certs._ca("Rotation CA", certs.ORG, now)
    valid = {"not_before": now - datetime.timedelta(days=1), "not_after": now + datetime.timedelta(days=30)}

    def identity(name, cn, server=True):
        subject = certs._name(cn, "Brokers", certs.ORG)
        key, cert = certs._leaf(ca_key, ca_cert, subject, server=server, **valid)
        return certs._identity(directory, name, key, cert, ca_cert)

    ca = certs._write(f"{directory}/ca.pem", certs._pem(ca_cert))
    _, other_cert = certs._ca("Other CA", "Elsewhere", now)
    other_ca = certs._write(f"{directory}/other-ca.pem", certs._pem(other_cert))
    return {"dir": directory, "ca": ca, "other_ca": other_ca, "first": identity("first", "localhost"),
            "second": identity("second", "localhost"), "renamed": identity("renamed", "broker-7"),
            "nameless": identity("nameless", "localhost", server=False)}


def _config(pki, keystore):
    return ServerConfig({
        "process.roles": "broker,controller", "node.id": "1",
        "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,CONTROLLER:PLAINTEXT",
        "controller.listener.names": "CONTROLLER", "controller.quorum.voters": "1@127.0.0.1:9093",
        "ssl.keystore.type": "PEM", "ssl.keystore.location": keystore,
        "ssl.truststore.type": "PEM", "ssl.truststore.location": pki["ca"]})


def _der(identity) -> bytes:
    cert = x509.load_pem_x509_certificate(open(identity.cert, "rb").read())
    return cert.public_bytes(serialization.Encoding.DER)


async def _echo(frame):
    return [struct.pack(">i", len(frame)), bytes(frame)]


class _Listener:
    """An SSL listener on loopback with its reloader; ``connect`` opens a TLS connection trusting the CA."""

    def __init__(self, pki, keystore):
        self.config = _config(pki, keystore)
        self.client = ssl.create_default_context(cafile=pki["ca"])
        self.server = Server(_echo, 1 << 20)
        self.port = self.server.bind("127.0.0.1", 0, "SSL", **self.config.listener_binding("SSL"))
        self.reloader = tls.TlsReloader.of(self.config, ["PLAINTEXT", "SSL"], self.server.set_ssl_context)

    async def connect(self):
        reader, writer = await asyncio.open_connection("127.0.0.1", self.port, ssl=self.client,
                                                       server_hostname="localhost")
        return reader, writer, writer.get_extra_info("ssl_object").getpeercert(binary_form=True)


async def _echoes(reader, writer, tag: bytes) -> bool:
    writer.write(struct.pack(">i", len(tag)) + tag)
    await writer.drain()
    return await reader.readexactly(4 + len(tag)) == struct.pack(">i", len(tag)) + tag


def _run(scenario, pki, keystore):
    async def main():
        listener = _Listener(pki, keystore)
        listener.server.start()
        try:
            return await scenario(listener)
        finally:
            await listener.server.close()
    return asyncio.run(asyncio.wait_for(main(), TIMEOUT_S))


def test_a_new_connection_is_served_the_rotated_certificate_and_an_open_one_keeps_going(pki):
    async def scenario(listener):
        reader, writer, before = await listener.connect()
        listener.reloader.apply({LOCATION: pki["second"].keystore})
        _, new_writer, after = await listener.connect()
        new_writer.close()
        kept = await _echoes(reader, writer, b"still here")
        writer.close()
        return before, after, kept

    before, after, kept = _run(scenario, pki, pki["first"].keystore)
    assert before == _der(pki["first"])
    assert after == _der(pki["second"])
    assert kept


def test_deleting_the_dynamic_keystore_goes_back_to_the_static_one(pki):
    async def scenario(listener):
        listener.reloader.apply({LOCATION: pki["second"].keystore})
        listener.reloader.apply({})
        _, writer, served = await listener.connect()
        writer.close()
        return served

    assert _run(scenario, pki, pki["first"].keystore) == _der(pki["first"])


def test_a_keystore_with_another_distinguished_name_is_refused(pki):
    listener_tls = tls.ListenerTls(_config(pki, pki["first"].keystore), "SSL")
    with pytest.raises(tls.SslConfigError) as e:
        listener_tls.build({"ssl.keystore.location": pki["renamed"].keystore})
    assert e.value.name == LOCATION
    assert e.value.message == (
        "Validation of dynamic config update of SSLFactory failed: "
        "Keystore DistinguishedName does not match:  "
        "existing={alias=kafka, DN=CN=localhost, OU=Brokers, O=Strom Test}, "
        "new={alias=kafka, DN=CN=broker-7, OU=Brokers, O=Strom Test}")


def test_a_keystore_that_drops_a_subject_alternative_name_is_refused(pki):
    listener_tls = tls.ListenerTls(_config(pki, pki["first"].keystore), "SSL")
    with pytest.raises(tls.SslConfigError, match=r"Keystore SubjectAltNames do not match:  "
                       r"existing=\{alias=kafka, SAN=\[\[2, localhost\], \[7, 127.0.0.1\]\]\}, "
                       r"new=\{alias=kafka, SAN=\[\]\}"):
        listener_tls.build({"ssl.keystore.location": pki["nameless"].keystore})


def test_a_keystore_that_cannot_be_read_is_refused_naming_the_listener_property(pki):
    listener_tls = tls.ListenerTls(_config(pki, pki["first"].keystore), "SSL")
    with pytest.raises(tls.SslConfigError) as e:
        listener_tls.build({"ssl.keystore.location": pki["dir"] + "/missing.pem"})
    assert e.value.name == LOCATION and "cannot read" in e.value.message


def test_a_failed_reload_keeps_the_old_context_serving_and_says_why_in_one_line(pki, caplog):
    async def scenario(listener):
        with caplog.at_level(logging.INFO, logger="security.tls"):
            listener.reloader.apply({LOCATION: pki["renamed"].keystore})
        _, writer, served = await listener.connect()
        writer.close()
        return served

    assert _run(scenario, pki, pki["first"].keystore) == _der(pki["first"])
    lines = [r for r in caplog.records if r.name == "security.tls"]
    assert len(lines) == 1 and lines[0].levelno == logging.WARNING
    assert "listener SSL keeps serving its TLS context" in lines[0].getMessage()
    assert "Keystore DistinguishedName does not match" in lines[0].getMessage()


def test_the_same_path_set_again_reloads_what_the_file_now_holds(pki, tmp_path):
    rotating = str(tmp_path / "keystore.pem")
    shutil.copy(pki["first"].keystore, rotating)

    async def scenario(listener):
        listener.reloader.apply({LOCATION: rotating})
        shutil.copy(pki["second"].keystore, rotating)
        listener.reloader.check({LOCATION: rotating}, {LOCATION: rotating}, validate_only=True)
        _, writer, checked = await listener.connect()
        writer.close()
        listener.reloader.check({LOCATION: rotating}, {LOCATION: rotating}, validate_only=False)
        _, writer, reloaded = await listener.connect()
        writer.close()
        return checked, reloaded

    checked, reloaded = _run(scenario, pki, pki["first"].keystore)
    assert checked == _der(pki["first"])  # validate_only changes nothing
    assert reloaded == _der(pki["second"])


def test_a_change_checked_before_it_is_forwarded_raises_kafkas_reason(pki):
    async def scenario(listener):
        with pytest.raises(tls.SslConfigError, match="Keystore DistinguishedName does not match"):
            listener.reloader.check({LOCATION: pki["renamed"].keystore}, {}, validate_only=False)
        listener.reloader.check({LOCATION: pki["second"].keystore}, {}, validate_only=False)
        _, writer, served = await listener.connect()
        writer.close()
        return served

    # A valid new value is only checked: the image's record reloads it.
    assert _run(scenario, pki, pki["first"].keystore) == _der(pki["first"])


# ---- which names may change, where (DynamicBrokerConfig.validateConfigs) ----------------------------

def test_only_a_listeners_prefixed_ssl_configs_are_dynamic():
    assert listener_ssl_name("listener.name.ssl.ssl.keystore.location") == ("SSL", "ssl.keystore.location")
    assert listener_ssl_name("listener.name.external.ssl.client.auth") == ("EXTERNAL", "ssl.client.auth")
    assert listener_ssl_name("listener.name.ssl.ssl.cipher.suites") is None
    assert listener_ssl_name("ssl.keystore.location") is None


def test_an_unprefixed_security_config_is_refused_as_kafka_refuses_it():
    assert refusal(["ssl.keystore.location"], per_broker=True) == (
        "These security configs can be dynamically updated only per-listener using the listener prefix: "
        "Set(ssl.keystore.location)")


def test_a_listeners_ssl_config_at_the_cluster_default_is_refused():
    assert refusal(["listener.name.ssl.ssl.keystore.location"], per_broker=False) == (
        "Cannot update these configs at default cluster level, broker id must be specified: "
        "Set(listener.name.ssl.ssl.keystore.location)")
    assert refusal(["listener.name.ssl.ssl.keystore.location"], per_broker=True) is None


def test_the_keys_and_stores_passwords_and_inline_pem_are_sensitive():
    assert is_sensitive("listener.name.ssl.ssl.key.password")
    assert is_sensitive("listener.name.ssl.ssl.keystore.key")
    assert is_sensitive("ssl.truststore.certificates")
    assert not is_sensitive("listener.name.ssl.ssl.keystore.location")


def test_ssl_allow_dn_changes_and_san_changes_let_a_new_subject_and_names_in(pki):
    config = _config(pki, pki["first"].keystore)
    allowing = ServerConfig({**config.originals, "ssl.allow.dn.changes": "true",
                             "listener.name.ssl.ssl.allow.san.changes": "true"})
    listener_tls = tls.ListenerTls(allowing, "SSL")
    listener_tls.build({"ssl.keystore.location": pki["renamed"].keystore})
    listener_tls.build({"ssl.keystore.location": pki["nameless"].keystore})


@pytest.mark.parametrize("client_auth", ["none", "required"])
def test_on_the_inter_broker_listener_old_and_new_stores_must_still_shake_hands(pki, client_auth):
    config = ServerConfig({**_config(pki, pki["first"].keystore).originals,
                           "listener.name.ssl.ssl.client.auth": client_auth})
    listener_tls = tls.ListenerTls(config, "SSL", inter_broker=True)
    listener_tls.build({"ssl.keystore.location": pki["second"].keystore})
    with pytest.raises(tls.SslConfigError) as e:
        listener_tls.build({"ssl.truststore.location": pki["other_ca"]})
    assert e.value.name == "listener.name.ssl.ssl.truststore.location"
    assert "SSLHandshakeException" in e.value.message and "CERTIFICATE_VERIFY_FAILED" in e.value.message
    # Elsewhere Kafka does not check it: a client listener may move to another CA.
    tls.ListenerTls(config, "SSL").build({"ssl.truststore.location": pki["other_ca"]})
