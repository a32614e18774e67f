"""Which ssl.* properties a broker takes without a restart, and where (KIP-226).

Kafka reconfigures a listener's TLS from ``listener.name.<listener>.<property>`` for the
properties of SslConfigs.RECONFIGURABLE_CONFIGS (the key and trust stores, their types and
passwords) and ``ssl.client.auth`` (DynamicListenerConfig), only per broker
(DynamicBrokerConfig.validateConfigs):

- the property without its listener prefix: "These security configs can be dynamically updated
  only per-listener using the listener prefix: Set(...)";
- the listener's property at the cluster default (broker resource ""): "Cannot update these
  configs at default cluster level, broker id must be specified: Set(...)";

both INVALID_REQUEST, as ConfigAdminManager answers a failed broker config validation. The
key's and the stores' passwords and the inline PEM are Kafka's PASSWORD configs: sensitive,
described with a null value. Pure: the names only (security/tls.py builds the contexts).
"""
from __future__ import annotations

import re

# SslConfigs.RECONFIGURABLE_CONFIGS, and ssl.client.auth from DynamicListenerConfig.
RECONFIGURABLE = frozenset({
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password",
    "ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.password",
    "ssl.keystore.certificate.chain", "ssl.keystore.key", "ssl.truststore.certificates",
})
DYNAMIC = RECONFIGURABLE | {"ssl.client.auth"}
# ConfigDef.Type.PASSWORD among them (SslConfigs.addClientSslSupport).
PASSWORDS = frozenset({
    "ssl.keystore.password", "ssl.key.password", "ssl.truststore.password", "ssl.keystore.key",
    "ssl.keystore.certificate.chain", "ssl.truststore.certificates",
})

# Every ConfigDef.Type.PASSWORD property of a broker or controller (KafkaConfig's: the ssl ones,
# sasl.jaas.config, the password encoder's and the delegation tokens' secrets).
PASSWORD_CONFIGS = PASSWORDS | {"sasl.jaas.config", "password.encoder.secret", "password.encoder.old.secret",
                                "delegation.token.secret.key"}

_LISTENER = re.compile(r"listener\.name\.([^.]*)\.(.*)")


def listener_ssl_name(name: str) -> tuple[str, str] | None:
    """``listener.name.<l>.<ssl property>`` of a dynamic one: (the listener, upper case, and the
    property); None for any other name."""
    m = _LISTENER.fullmatch(name)
    if m is None or m.group(2) not in DYNAMIC:
        return None
    return m.group(1).upper(), m.group(2)


def is_sensitive(name: str) -> bool:
    """A PASSWORD config, under its own name or with a listener's (and a SASL mechanism's) prefix:
    by how the name ends, as DynamicBrokerConfig.isPasswordConfig."""
    return any(name == p or name.endswith("." + p) for p in PASSWORD_CONFIGS)


def refusal(names: list[str], per_broker: bool) -> str | None:
    """Kafka's message refusing these names of a broker config change (its id given:
    ``per_broker``), or None when the listeners' ssl.* among them may change."""
    bare = [n for n in names if n in RECONFIGURABLE]
    if bare:
        return ("These security configs can be dynamically updated only per-listener using the "
                f"listener prefix: Set({', '.join(bare)})")
    if not per_broker:
        listener = [n for n in names if listener_ssl_name(n) is not None]
        if listener:
            return ("Cannot update these configs at default cluster level, broker id must be "
                    f"specified: Set({', '.join(listener)})")
    return None
