"""Where a request comes from: its connection's session and the request's context.

A connection's ``Session`` is made when a listener accepts it: the listener's name and
security protocol (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL) and the client's address. The TLS
handshake (a client certificate, mapped by ``ssl.principal.mapping.rules``) and SASL
authentication fill in its principal; until a SASL listener's client has authenticated,
``authenticated`` is false and the connection may send nothing but ApiVersions and the SASL
handshake. The connection's task sets ``current_session`` (protocol/net.py), as it sets the
connection itself.

Each request is handled with a ``RequestContext``, as Kafka's RequestContext: the request's
header and its connection's session, so that a handler knows who asks (the principal), on which
listener, from which address, with which API and version. It answers the header's attribute
names too (``api_version``, ``client_id``, ...), so code that reads only the header takes either.
"""
from __future__ import annotations

import contextvars
from dataclasses import dataclass

from protocol.headers import RequestHeader

PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL = "PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"
SECURITY_PROTOCOLS = (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)
SASL_PROTOCOLS = frozenset({SASL_PLAINTEXT, SASL_SSL})
TLS_PROTOCOLS = frozenset({SSL, SASL_SSL})


@dataclass(frozen=True)
class KafkaPrincipal:
    """Kafka's KafkaPrincipal: a type (``User``) and a name; ``User:alice`` in ACLs."""
    type: str
    name: str

    def __str__(self) -> str:
        return f"{self.type}:{self.name}"

    @classmethod
    def parse(cls, text: str) -> KafkaPrincipal:
        """``User:alice`` -> KafkaPrincipal("User", "alice"); ValueError without a type."""
        kind, sep, name = text.partition(":")
        if not sep or not kind:
            raise ValueError(f"expected a principal of the form Type:name, got {text!r}")
        return cls(kind, name)


USER_TYPE = "User"
ANONYMOUS = KafkaPrincipal(USER_TYPE, "ANONYMOUS")


class Session:
    """One connection's security state (see the module doc)."""

    __slots__ = ("listener_name", "security_protocol", "client_address", "principal",
                 "authenticated", "sasl_mechanism", "reauth_deadline_ms", "sasl_exchange")

    def __init__(self, listener_name: str | None = None, security_protocol: str = PLAINTEXT,
                 client_address: str = "", principal: KafkaPrincipal = ANONYMOUS):
        self.listener_name = listener_name
        self.security_protocol = security_protocol
        self.client_address = client_address
        self.principal = principal
        # A SASL listener's connection has authenticated once its SaslAuthenticate succeeded.
        self.authenticated = security_protocol not in SASL_PROTOCOLS
        self.sasl_mechanism: str | None = None
        # connections.max.reauth.ms (KIP-368): the connection must re-authenticate before this
        # (the event loop's clock, ms); None: never.
        self.reauth_deadline_ms: int | None = None
        # The SASL exchange in progress on this connection (security/sasl/apis.py's state between
        # its SaslHandshake and SaslAuthenticate requests); None before the first handshake.
        self.sasl_exchange: object | None = None

    def __repr__(self) -> str:
        return (f"Session({self.listener_name!r}, {self.security_protocol}, {self.client_address!r}, "
                f"{self.principal}, authenticated={self.authenticated})")


# The session of the connection whose requests are handled in this context (each connection's
# task runs in its own context); outside one, an anonymous PLAINTEXT session on no listener.
NO_SESSION = Session()
current_session: contextvars.ContextVar[Session] = contextvars.ContextVar("current_session",
                                                                          default=NO_SESSION)


class RequestContext:
    """A request's header and its connection's session (see the module doc)."""

    __slots__ = ("header", "session")

    def __init__(self, header: RequestHeader, session: Session = NO_SESSION):
        self.header = header
        self.session = session

    # The header's attributes, so that code reading only those takes a context or a header.
    @property
    def api_key(self) -> int:
        return self.header.api_key

    @property
    def api_version(self) -> int:
        return self.header.api_version

    @property
    def correlation_id(self) -> int:
        return self.header.correlation_id

    @property
    def client_id(self) -> str | None:
        return self.header.client_id

    @property
    def header_version(self) -> int:
        return self.header.header_version

    @property
    def listener_name(self) -> str | None:
        return self.header.listener_name

    # Where it came from.
    @property
    def principal(self) -> KafkaPrincipal:
        return self.session.principal

    @property
    def client_address(self) -> str:
        return self.session.client_address

    @property
    def security_protocol(self) -> str:
        return self.session.security_protocol

    def __repr__(self) -> str:
        return f"RequestContext({self.header}, {self.session})"
