"""The client properties of a tool's --command-config (security/client_config.py), as Kafka's
clients read them: the TLS context and SASL authentication a connection to a secured listener
is made with, and a clear error naming the property for a bad one."""
from __future__ import annotations

import ssl

import pytest

from security.client_config import CommandConfigError, client_security
from strom.acls import read_command_config

from .certs import make_pki

SCRAM_JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
              'username="admin" password="admin-secret";')


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return make_pki(tmp_path_factory.mktemp("pki"))


def test_plaintext_is_the_default_and_needs_no_security():
    assert client_security({}) is None
    assert client_security({"security.protocol": "PLAINTEXT", "ssl.truststore.location": "/nowhere"}) is None


def test_ssl_trusts_the_truststore_and_checks_the_host_name_by_default(pki):
    security = client_security({"security.protocol": "SSL", "ssl.truststore.type": "PEM",
                                "ssl.truststore.location": pki.ca})
    assert security is not None and security.authenticate is None
    context = security.ssl_context
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    assert [c["subject"] for c in context.get_ca_certs()], "the CA is loaded"


def test_an_empty_endpoint_identification_algorithm_turns_the_host_name_check_off(pki):
    security = client_security({"security.protocol": "SSL", "ssl.truststore.type": "PEM",
                                "ssl.truststore.location": pki.ca,
                                "ssl.endpoint.identification.algorithm": ""})
    assert security is not None and not security.ssl_context.check_hostname


def test_sasl_ssl_with_scram_authenticates_with_the_jaas_username_and_password(pki):
    security = client_security({"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
                                "sasl.jaas.config": SCRAM_JAAS, "ssl.truststore.type": "PEM",
                                "ssl.truststore.location": pki.ca})
    assert security is not None and security.ssl_context is not None and callable(security.authenticate)


@pytest.mark.parametrize("props, name", [
    ({"security.protocol": "KERBEROS"}, "security.protocol"),
    ({"security.protocol": "SASL_PLAINTEXT"}, "sasl.mechanism"),  # GSSAPI, Kafka's default, is not had
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN"}, "sasl.jaas.config"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256",
      "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required username="a";'},
     "sasl.jaas.config"),
    ({"security.protocol": "SSL", "ssl.truststore.type": "JKS", "ssl.truststore.location": "/x.jks"},
     "ssl.truststore.type"),
    ({"security.protocol": "SSL", "ssl.truststore.location": "/x.jks"}, "ssl.truststore.type"),  # JKS default
])
def test_a_bad_client_property_is_named(props, name):
    with pytest.raises(CommandConfigError) as e:
        client_security(props)
    assert e.value.name == name and name in str(e.value)


def test_the_command_config_file_is_read_as_java_properties(tmp_path, pki):
    path = tmp_path / "client.properties"
    path.write_text(f"# admin\nsecurity.protocol=SSL\nssl.truststore.type=PEM\n"
                    f"ssl.truststore.location={pki.ca}\nssl.keystore.type=PEM\nssl.keystore.location={pki.alice.keystore}\n")
    security = read_command_config(str(path))
    assert security is not None and security.ssl_context is not None
    assert read_command_config(None) is None
    with pytest.raises(CommandConfigError, match="cannot read"):
        read_command_config(str(tmp_path / "missing.properties"))
