"""What every server-side SASL mechanism is: a state machine that takes the client's tokens
(SaslAuthenticate's auth_bytes) one at a time and answers the server's, until it is complete
with the client's principal name, or fails.

Two failures, as Kafka's SaslServerAuthenticator tells them apart: ``AuthenticationFailed``
carries a message the client may see (Kafka's SaslAuthenticationException: a malformed PLAIN
response, an authorization id that differs from the user); ``InvalidCredentials`` is told to
the client only as "invalid credentials with SASL mechanism X" (Kafka's SaslException: whether
the user exists or the password was wrong is never said), its detail is for the log.
"""
from __future__ import annotations

import abc

PLAIN = "PLAIN"
SCRAM_SHA_256 = "SCRAM-SHA-256"
SCRAM_SHA_512 = "SCRAM-SHA-512"
OAUTHBEARER = "OAUTHBEARER"
GSSAPI = "GSSAPI"
MECHANISMS = (PLAIN, SCRAM_SHA_256, SCRAM_SHA_512, OAUTHBEARER)


class AuthenticationFailed(Exception):
    """The exchange failed; ``str(e)`` is what the client is told."""


class InvalidCredentials(Exception):
    """The exchange failed on the client's credentials; the client is told only that."""


class SaslServer(abc.ABC):
    """The interface each mechanism's server implements (see the module doc)."""

    mechanism: str = ""

    def __init__(self) -> None:
        self.complete = False
        self.principal_name: str | None = None  # once complete
        # When the credential expires (ms since the epoch; an OAUTHBEARER token's exp), None if
        # it does not: the session lifetime is the sooner of that and connections.max.reauth.ms.
        self.credential_expiry_ms: int | None = None

    @abc.abstractmethod
    def evaluate(self, token: bytes) -> bytes:
        """The server's answer to the client's next token; AuthenticationFailed or
        InvalidCredentials when the exchange fails (the server is then done)."""
