"""What a SASL listener serves, read from Kafka's properties through a node's per-listener lookup
(``listener_value(listener, property, mechanism)``: ``listener.name.<listener>.<mechanism>.<property>``,
then ``listener.name.<listener>.<property>``, then ``<property>``):

- sasl.enabled.mechanisms: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER; GSSAPI (Kafka's
  default) is refused naming the property: there is no Kerberos;
- sasl.jaas.config (per mechanism): required for PLAIN, whose ``user_<name>`` options are its
  users; for the others optional, checked to name the mechanism's login module;
- connections.max.reauth.ms (per mechanism): KIP-368's longest session, 0 for none;
- sasl.oauthbearer.*: OAUTHBEARER's JWT validation (security/sasl/oauthbearer.py).

A bad value raises SaslConfigError naming the property, as the listener's prefix spells it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from security.sasl.jaas import (
    OAUTHBEARER_LOGIN_MODULE,
    PLAIN_LOGIN_MODULE,
    SCRAM_LOGIN_MODULE,
    JaasConfigError,
    login_entry,
    plain_users,
)
from security.sasl.mechanism import GSSAPI, MECHANISMS, OAUTHBEARER, PLAIN, SCRAM_SHA_256, SCRAM_SHA_512
from security.sasl.oauthbearer import JwksKeys, JwtValidator

LOGIN_MODULES = {PLAIN: PLAIN_LOGIN_MODULE, SCRAM_SHA_256: SCRAM_LOGIN_MODULE,
                 SCRAM_SHA_512: SCRAM_LOGIN_MODULE, OAUTHBEARER: OAUTHBEARER_LOGIN_MODULE}

# Kafka's names and defaults (BrokerSecurityConfigs, SaslConfigs): name -> (type, default).
PROPERTIES: dict[str, tuple[str, Any]] = {
    "sasl.enabled.mechanisms": ("list", GSSAPI),
    "sasl.mechanism.inter.broker.protocol": ("string", GSSAPI),
    "sasl.mechanism.controller.protocol": ("string", GSSAPI),
    "sasl.jaas.config": ("string", None),
    "sasl.server.max.receive.size": ("int", 524288),
    "connections.max.reauth.ms": ("long", 0),
    "connection.failed.authentication.delay.ms": ("int", 100),
    "sasl.oauthbearer.jwks.endpoint.url": ("string", None),
    "sasl.oauthbearer.jwks.endpoint.refresh.ms": ("long", 3600000),
    "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms": ("long", 100),
    "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms": ("long", 10000),
    "sasl.oauthbearer.expected.audience": ("list", None),
    "sasl.oauthbearer.expected.issuer": ("string", None),
    "sasl.oauthbearer.sub.claim.name": ("string", "sub"),
    "sasl.oauthbearer.scope.claim.name": ("string", "scope"),
    "sasl.oauthbearer.clock.skew.seconds": ("int", 30),
}


class SaslConfigError(ValueError):
    """A bad sasl.* value: ``name`` is the property, as the listener's prefix spells it."""

    def __init__(self, name: str, message: str):
        super().__init__(f"{name}: {message}")
        self.name = name
        self.message = message


class ListenerConfig(Protocol):
    def listener_value(self, listener_name: str | None, name: str, mechanism: str | None = None) -> Any: ...


def prefixed(listener_name: str | None, name: str, mechanism: str | None = None) -> str:
    """A property as it is set for one listener (and mechanism), the way Kafka spells it."""
    if listener_name is None:
        return name
    middle = f"{mechanism.lower()}." if mechanism else ""
    return f"listener.name.{listener_name.lower()}.{middle}{name}"


@dataclass
class ListenerSasl:
    """One SASL listener's mechanisms and what each authenticates against."""
    listener_name: str | None
    mechanisms: list[str]
    plain_users: dict[str, str] = field(default_factory=dict)
    reauth_ms: dict[str, int] = field(default_factory=dict)  # connections.max.reauth.ms per mechanism
    oauth: JwtValidator | None = None


def _as_list(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [item.strip() for item in value.split(",") if item.strip()]
    return [str(item).strip() for item in value if str(item).strip()]


def _as_int(config: ListenerConfig, listener: str | None, name: str, mechanism: str | None = None) -> int:
    value = config.listener_value(listener, name, mechanism)
    if value is None:
        value = PROPERTIES[name][1]
    try:
        return int(str(value).strip())
    except ValueError:
        raise SaslConfigError(prefixed(listener, name, mechanism),
                              f"expected an integer, got {value!r}") from None


def listener_sasl(config: ListenerConfig, listener_name: str | None) -> ListenerSasl:
    """What ``listener_name`` (a SASL_PLAINTEXT or SASL_SSL listener) serves; SaslConfigError."""
    mechanisms = _as_list(config.listener_value(listener_name, "sasl.enabled.mechanisms")
                          or PROPERTIES["sasl.enabled.mechanisms"][1])
    name = prefixed(listener_name, "sasl.enabled.mechanisms")
    if not mechanisms:
        raise SaslConfigError(name, "a SASL listener needs at least one mechanism")
    for mechanism in mechanisms:
        if mechanism == GSSAPI:
            raise SaslConfigError(name, "GSSAPI (Kerberos) is not supported; enable PLAIN, SCRAM-SHA-256, "
                                  "SCRAM-SHA-512 or OAUTHBEARER")
        if mechanism not in MECHANISMS:
            raise SaslConfigError(name, f"unknown SASL mechanism {mechanism!r}; "
                                  f"supported: {', '.join(MECHANISMS)}")
    out = ListenerSasl(listener_name, mechanisms)
    for mechanism in mechanisms:
        jaas_name = prefixed(listener_name, "sasl.jaas.config", mechanism)
        text = config.listener_value(listener_name, "sasl.jaas.config", mechanism)
        entry = None
        if text is not None:
            try:
                entry = login_entry(str(text), LOGIN_MODULES[mechanism])
            except JaasConfigError as e:
                raise SaslConfigError(jaas_name, str(e)) from None
        if mechanism == PLAIN:
            if entry is None:
                raise SaslConfigError(jaas_name, "required for PLAIN: the PlainLoginModule entry whose "
                                      'user_<name>="<password>" options are the users')
            out.plain_users = plain_users(entry)
        reauth = _as_int(config, listener_name, "connections.max.reauth.ms", mechanism)
        if reauth < 0:
            raise SaslConfigError(prefixed(listener_name, "connections.max.reauth.ms", mechanism),
                                  "must be at least 0")
        out.reauth_ms[mechanism] = reauth
    if OAUTHBEARER in mechanisms:
        out.oauth = _oauth_validator(config, listener_name)
    return out


def _oauth_validator(config: ListenerConfig, listener: str | None) -> JwtValidator:
    def get(name: str) -> Any:
        value = config.listener_value(listener, name, OAUTHBEARER)
        return PROPERTIES[name][1] if value is None else value

    url_name = prefixed(listener, "sasl.oauthbearer.jwks.endpoint.url", OAUTHBEARER)
    url = get("sasl.oauthbearer.jwks.endpoint.url")
    if not url:
        raise SaslConfigError(url_name, "required for OAUTHBEARER: the JWKS (a file: or https: URL) "
                              "whose keys sign the tokens")
    url = str(url).strip()
    if not url.startswith(("file:", "http:", "https:")):
        raise SaslConfigError(url_name, f"expected a file:, http: or https: URL, got {url!r}")
    refresh = _as_int(config, listener, "sasl.oauthbearer.jwks.endpoint.refresh.ms", OAUTHBEARER)
    if refresh <= 0 and not url.startswith("file:"):  # a file is read once
        raise SaslConfigError(prefixed(listener, "sasl.oauthbearer.jwks.endpoint.refresh.ms", OAUTHBEARER),
                              "must be positive")
    backoff = _as_int(config, listener, "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms", OAUTHBEARER)
    if backoff < 0:
        raise SaslConfigError(prefixed(listener, "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms",
                                       OAUTHBEARER), "must be at least 0")
    # Nothing is fetched here: a node's configuration is read by commands that start no listener
    # (strom format); the listener reads the JWKS when it starts (start_jwks).
    keys = JwksKeys(url, refresh_ms=refresh, retry_backoff_ms=backoff, property_name=url_name)
    skew = _as_int(config, listener, "sasl.oauthbearer.clock.skew.seconds", OAUTHBEARER)
    issuer = get("sasl.oauthbearer.expected.issuer")
    return JwtValidator(keys, expected_audience=_as_list(get("sasl.oauthbearer.expected.audience")),
                        expected_issuer=None if issuer in (None, "") else str(issuer),
                        sub_claim_name=str(get("sasl.oauthbearer.sub.claim.name")),
                        scope_claim_name=str(get("sasl.oauthbearer.scope.claim.name")),
                        clock_skew_seconds=skew)


def start_jwks(sasl: ListenerSasl) -> None:
    """Read the JWKS of a listener that serves OAUTHBEARER, as Kafka's listener does when it
    starts; SaslConfigError naming sasl.oauthbearer.jwks.endpoint.url (as the listener's prefix
    spells it) when it cannot be read, and the node does not start."""
    if sasl.oauth is None:
        return
    keys = sasl.oauth.keys
    try:
        keys.start()
    except (OSError, ValueError) as e:
        raise SaslConfigError(keys.property_name, f"cannot read the JWKS at {keys.url} to validate "
                              f"OAUTHBEARER tokens on listener {sasl.listener_name}: {e}") from None


def client_credentials(config: ListenerConfig, listener_name: str | None, mechanism: str) -> tuple[str, str]:
    """The username and password a node authenticates with on ``listener_name`` (its
    ``sasl.jaas.config``'s ``username`` and ``password`` options), for PLAIN and SCRAM."""
    name = prefixed(listener_name, "sasl.jaas.config", mechanism)
    text = config.listener_value(listener_name, "sasl.jaas.config", mechanism)
    if text is None:
        raise SaslConfigError(name, f"required: the {mechanism} login module with the username and password "
                              "this node authenticates with")
    try:
        entry = login_entry(str(text), LOGIN_MODULES.get(mechanism))
    except JaasConfigError as e:
        raise SaslConfigError(name, str(e)) from None
    username, password = entry.options.get("username"), entry.options.get("password")
    if not username or password is None:
        raise SaslConfigError(name, "needs the username and password options")
    return username, password
