"""A client's security settings from Kafka's client properties, as the admin tools read their
``--command-config`` file (kafka-acls, kafka-topics, kafka-metadata-quorum): how to reach a
secured listener.

- ``security.protocol``: PLAINTEXT (the default), SSL, SASL_PLAINTEXT or SASL_SSL.
- ``sasl.mechanism``: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512, with ``sasl.jaas.config``'s
  ``username`` and ``password`` options (the mechanism's login module).
- the PEM ``ssl.*`` stores security/tls.py reads (``ssl.truststore.*``, ``ssl.keystore.*`` for
  mutual TLS), with ``ssl.endpoint.identification.algorithm`` https by default, as Kafka's
  clients.

``librdkafka_config`` turns the same Java client properties into librdkafka's (confluent-kafka),
which refuses JAAS configs and Java's store properties: the Spark sink takes Spark's Kafka sink
options, written for Java's producer, and produces through librdkafka.

Other properties are ignored, as Kafka's clients ignore what they do not know (a controller's
properties file may serve both as kafka-metadata-quorum's --command-config and as the new
controller's configuration). A bad or missing value raises CommandConfigError naming the
property.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from protocol.client import ClientSecurity
from security.sasl.client import CLIENT_MECHANISMS, authenticator
from security.sasl.config import LOGIN_MODULES
from security.sasl.jaas import JaasConfigError, login_entry
from security.tls import client_context

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
# Kafka's client defaults: its store types are JKS, which Strom refuses naming the property
# (set ssl.truststore.type=PEM, ssl.keystore.type=PEM, as Kafka's PEM users do).
CLIENT_DEFAULTS = {"security.protocol": "PLAINTEXT", "sasl.mechanism": "GSSAPI",
                   "ssl.endpoint.identification.algorithm": "https", "ssl.keystore.type": "JKS",
                   "ssl.truststore.type": "JKS"}


class CommandConfigError(ValueError):
    """A bad --command-config: ``name`` is the property."""

    def __init__(self, name: str, message: str):
        super().__init__(f"--command-config: {name}: {message}")
        self.name = name
        self.message = message


class _ClientProperties:
    """A client's properties as security/tls.py reads a listener's (one set, no listener prefix)."""

    def __init__(self, props: Mapping[str, str]):
        self.props = props

    def listener_value(self, listener_name: str | None, name: str, mechanism: str | None = None) -> Any:
        return self.props.get(name, CLIENT_DEFAULTS.get(name))


def client_security(props: Mapping[str, str]) -> ClientSecurity | None:
    """How to connect with these client properties (None: plaintext, no authentication)."""
    config = _ClientProperties(props)
    protocol = str(config.listener_value(None, "security.protocol")).upper()
    if protocol not in SECURITY_PROTOCOLS:
        raise CommandConfigError("security.protocol", f"expected one of {', '.join(SECURITY_PROTOCOLS)}, "
                                 f"got {protocol}")
    if protocol == "PLAINTEXT":
        return None
    context = None
    if protocol in ("SSL", "SASL_SSL"):
        try:
            context = client_context(config, None)
        except ValueError as e:
            raise CommandConfigError(getattr(e, "name", "ssl"), getattr(e, "message", str(e))) from None
    authenticate = None
    if protocol.startswith("SASL_"):
        mechanism = str(config.listener_value(None, "sasl.mechanism"))
        if mechanism not in CLIENT_MECHANISMS:
            raise CommandConfigError("sasl.mechanism", f"expected one of {', '.join(CLIENT_MECHANISMS)}, "
                                     f"got {mechanism}")
        text = config.listener_value(None, "sasl.jaas.config")
        if not text:
            raise CommandConfigError("sasl.jaas.config", f"required with security.protocol={protocol}: the "
                                     f"{mechanism} login module with username and password")
        try:
            entry = login_entry(str(text), LOGIN_MODULES[mechanism])
        except JaasConfigError as e:
            raise CommandConfigError("sasl.jaas.config", str(e)) from None
        username, password = entry.options.get("username"), entry.options.get("password")
        if not username or password is None:
            raise CommandConfigError("sasl.jaas.config", "needs the username and password options")
        authenticate = authenticator(mechanism, username, password)
    return ClientSecurity(ssl_context=context, authenticate=authenticate)


# Java client properties -> librdkafka's, for what librdkafka names otherwise (PEM stores only).
_LIBRDKAFKA_NAMES = {
    "ssl.truststore.location": "ssl.ca.location",
    "ssl.truststore.certificates": "ssl.ca.pem",
    "ssl.keystore.certificate.chain": "ssl.certificate.pem",
    "ssl.keystore.key": "ssl.key.pem",
}


def librdkafka_config(props: Mapping[str, str]) -> dict[str, str]:
    """``props`` (Java client properties) as librdkafka takes them: ``sasl.jaas.config``'s
    username and password as ``sasl.username`` / ``sasl.password``, a PEM trust store as
    ``ssl.ca.location`` (or ``ssl.ca.pem``), a PEM key store file as ``ssl.certificate.location``
    and ``ssl.key.location`` (one file holds both), inline PEM as ``ssl.certificate.pem`` /
    ``ssl.key.pem``, an empty ``ssl.endpoint.identification.algorithm`` as ``none``; the store
    types go (PEM, or CommandConfigError naming the property). Anything else is passed as it is."""
    out = dict(props)
    for store in ("ssl.truststore.type", "ssl.keystore.type"):
        kind = out.pop(store, None)
        if kind is not None and kind.upper() != "PEM":
            raise CommandConfigError(store, f"only PEM stores can be read, got {kind}")
    for name in ("ssl.truststore.password", "ssl.keystore.password"):
        if out.pop(name, None) is not None:
            raise CommandConfigError(name, "a PEM store has no password (ssl.key.password is the key's)")
    text = out.pop("sasl.jaas.config", None)
    if text is not None:
        mechanism = out.get("sasl.mechanism", CLIENT_DEFAULTS["sasl.mechanism"])
        if mechanism not in CLIENT_MECHANISMS:
            raise CommandConfigError("sasl.mechanism", f"expected one of {', '.join(CLIENT_MECHANISMS)} "
                                     f"with sasl.jaas.config, got {mechanism}")
        try:
            entry = login_entry(text, LOGIN_MODULES[mechanism])
        except JaasConfigError as e:
            raise CommandConfigError("sasl.jaas.config", str(e)) from None
        username, password = entry.options.get("username"), entry.options.get("password")
        if not username or password is None:
            raise CommandConfigError("sasl.jaas.config", "needs the username and password options")
        out.setdefault("sasl.username", username)
        out.setdefault("sasl.password", password)
    keystore = out.pop("ssl.keystore.location", None)
    if keystore is not None:
        out.setdefault("ssl.certificate.location", keystore)
        out.setdefault("ssl.key.location", keystore)
    for java, librdkafka in _LIBRDKAFKA_NAMES.items():
        if java in out:
            out.setdefault(librdkafka, out.pop(java))
    if out.get("ssl.endpoint.identification.algorithm") == "":
        out["ssl.endpoint.identification.algorithm"] = "none"
    return out
