"""How a client connects to a secured listener, once, and each library's settings for it.

``Security`` describes the connection the way a Kafka user's client properties do: the
listener's security protocol (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL), the CA file the client
trusts, its own certificate and key (mutual TLS), and the SASL mechanism with a username and
password (PLAIN, SCRAM-SHA-*) or an OAUTHBEARER token (a JWT). One function per library turns it
into that library's settings:

    confluent_config(s)     librdkafka properties (confluent-kafka's dict)
    kafka_python_config(s)  kafka-python's keyword arguments
    aiokafka_config(s)      aiokafka's keyword arguments (an ``ssl_context``)
    kafkajs_config(s)       the JSON that secured.js turns into kafkajs's ``ssl`` and ``sasl``
    kcat_options(s)         kcat's ``-X`` options (librdkafka's properties again)
    spark_options(s)        Spark's Kafka sink options (``kafka.``-prefixed Java client properties)

OAUTHBEARER: confluent-kafka gets an ``oauth_cb``, kafka-python and aiokafka a
``sasl_oauth_token_provider``, kafkajs an ``oauthBearerProvider``; kcat (Debian's librdkafka has
no OIDC) sends librdkafka's own unsecured JWT for ``username`` as its principal.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

PLAIN_LOGIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN = "org.apache.kafka.common.security.scram.ScramLoginModule"
OAUTHBEARER = "OAUTHBEARER"


@dataclass(frozen=True)
class Security:
    protocol: str = "PLAINTEXT"
    ca: str | None = None  # PEM file of the CA the client trusts (SSL, SASL_SSL)
    cert: str | None = None  # the client's certificate and key: mutual TLS
    key: str | None = None
    mechanism: str | None = None  # SASL_*: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER
    username: str = ""
    password: str = ""
    token: str | None = None  # OAUTHBEARER's JWT
    check_hostname: bool = True

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.protocol.startswith("SASL_")

    @property
    def oauth(self) -> bool:
        return self.mechanism == OAUTHBEARER


def mutual_tls(ca: str, cert: str, key: str) -> Security:
    return Security("SSL", ca=ca, cert=cert, key=key)


def sasl(protocol: str, mechanism: str, username: str, password: str, ca: str | None = None) -> Security:
    return Security(protocol, ca=ca, mechanism=mechanism, username=username, password=password)


def oauthbearer(token: str, ca: str, protocol: str = "SASL_SSL") -> Security:
    return Security(protocol, ca=ca, mechanism=OAUTHBEARER, token=token)


def _claims(token: str) -> dict[str, Any]:
    import jwt

    return jwt.decode(token, options={"verify_signature": False, "verify_exp": False, "verify_aud": False})


def confluent_config(s: Security) -> dict[str, Any]:
    conf: dict[str, Any] = {"security.protocol": s.protocol}
    if s.sasl:
        conf["sasl.mechanism"] = s.mechanism
        if s.oauth:
            assert s.token is not None
            claims = _claims(s.token)
            # oauth_cb: the token, its expiry (seconds since the epoch) and its principal.
            # librdkafka will not send a token it knows expired: it is told a future expiry,
            # so that the broker is the one to judge the token.
            expiry = max(float(claims["exp"]), time.time() + 60)
            token = s.token
            conf["oauth_cb"] = lambda _config: (token, expiry, claims["sub"])
        else:
            conf.update({"sasl.username": s.username, "sasl.password": s.password})
    if s.tls:
        conf["ssl.ca.location"] = s.ca
        if s.cert:
            conf.update({"ssl.certificate.location": s.cert, "ssl.key.location": s.key})
        if not s.check_hostname:
            conf["ssl.endpoint.identification.algorithm"] = "none"
    return conf


def kcat_options(s: Security) -> list[str]:
    if s.oauth:  # librdkafka's own unsecured JWT (alg none): Debian's build has no OIDC
        conf: dict[str, Any] = {"security.protocol": s.protocol, "sasl.mechanism": s.mechanism,
                                "enable.sasl.oauthbearer.unsecure.jwt": "true",
                                "sasl.oauthbearer.config": f"principal={s.username} scope=kafka"}
        if s.tls:
            conf["ssl.ca.location"] = s.ca
    else:
        conf = confluent_config(s)
    return [arg for name, value in conf.items() for arg in ("-X", f"{name}={value}")]


def _token_provider(base: type, token: str, asynchronous: bool) -> Any:
    if asynchronous:
        class AsyncToken(base):  # type: ignore[misc, valid-type]
            async def token(self) -> str:
                return token
        return AsyncToken()

    class Token(base):  # type: ignore[misc, valid-type]
        def token(self) -> str:
            return token
    return Token()


def kafka_python_config(s: Security) -> dict[str, Any]:
    conf: dict[str, Any] = {"security_protocol": s.protocol}
    if s.sasl:
        conf["sasl_mechanism"] = s.mechanism
        if s.oauth:
            from kafka.net.sasl.oauth import AbstractTokenProvider
            assert s.token is not None
            conf["sasl_oauth_token_provider"] = _token_provider(AbstractTokenProvider, s.token, False)
        else:
            conf.update({"sasl_plain_username": s.username, "sasl_plain_password": s.password})
    if s.tls:
        conf["ssl_cafile"] = s.ca
        if s.cert:
            conf.update({"ssl_certfile": s.cert, "ssl_keyfile": s.key})
        if not s.check_hostname:
            conf["ssl_check_hostname"] = False
    return conf


def aiokafka_config(s: Security) -> dict[str, Any]:
    """aiokafka's keyword arguments; its SSL context is made here, so call this in the thread
    (and event loop) that uses it."""
    conf: dict[str, Any] = {"security_protocol": s.protocol}
    if s.sasl:
        conf["sasl_mechanism"] = s.mechanism
        if s.oauth:
            from aiokafka.abc import AbstractTokenProvider
            assert s.token is not None
            conf["sasl_oauth_token_provider"] = _token_provider(AbstractTokenProvider, s.token, True)
        else:
            conf.update({"sasl_plain_username": s.username, "sasl_plain_password": s.password})
    if s.tls:
        from aiokafka.helpers import create_ssl_context

        context = create_ssl_context(cafile=s.ca, certfile=s.cert, keyfile=s.key)
        context.check_hostname = s.check_hostname
        conf["ssl_context"] = context
    return conf


def kafkajs_config(s: Security) -> dict[str, Any]:
    """The ``security`` field of a secured.js command: file paths, which the script reads."""
    conf: dict[str, Any] = {"ssl": None, "sasl": None}
    if s.tls:
        conf["ssl"] = {"ca": s.ca, "cert": s.cert, "key": s.key, "checkHostname": s.check_hostname}
    if s.sasl:
        assert s.mechanism is not None
        conf["sasl"] = ({"mechanism": "oauthbearer", "token": s.token} if s.oauth else
                        {"mechanism": s.mechanism.lower(), "username": s.username, "password": s.password})
    return conf


def jaas_config(s: Security) -> str:
    """Java's ``sasl.jaas.config`` for a PLAIN or SCRAM user."""
    assert s.mechanism is not None
    login = PLAIN_LOGIN if s.mechanism == "PLAIN" else SCRAM_LOGIN
    return f'{login} required username="{s.username}" password="{s.password}";'


def spark_options(s: Security) -> dict[str, str]:
    """Spark's Kafka sink options: Java's producer properties, ``kafka.``-prefixed."""
    conf = {"security.protocol": s.protocol}
    if s.sasl:
        assert s.mechanism is not None and not s.oauth, "the sink takes PLAIN and SCRAM users"
        conf.update({"sasl.mechanism": s.mechanism, "sasl.jaas.config": jaas_config(s)})
    if s.tls:
        conf.update({"ssl.truststore.type": "PEM", "ssl.truststore.location": str(s.ca)})
        if s.cert:
            raise ValueError("a client certificate for the sink is not described here")
        if not s.check_hostname:
            conf["ssl.endpoint.identification.algorithm"] = ""
    return {f"kafka.{name}": value for name, value in conf.items()}
