"""SASL/PLAIN (RFC 4616) as Kafka's PlainSaslServer: one message ``authzid NUL authcid NUL
passwd``, checked against the listener's JAAS user list (``user_<name>="<password>"``)."""
from __future__ import annotations

import hmac
from collections.abc import Callable

from security.sasl.mechanism import PLAIN, AuthenticationFailed, SaslServer

# The user's password, None for an unknown user.
PasswordLookup = Callable[[str], "str | None"]


class PlainServer(SaslServer):
    mechanism = PLAIN

    def __init__(self, passwords: PasswordLookup):
        super().__init__()
        self._passwords = passwords

    def evaluate(self, token: bytes) -> bytes:
        if self.complete:
            raise AuthenticationFailed("Authentication failed: unexpected SASL/PLAIN message "
                                       "after completion")
        text = token.decode("utf-8", errors="replace")
        tokens = text.split("\x00", 3)
        if len(tokens) != 3:
            raise AuthenticationFailed(f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(tokens)}")
        authzid, username, password = tokens
        if not username:
            raise AuthenticationFailed("Authentication failed: username not specified")
        if not password:
            raise AuthenticationFailed("Authentication failed: password not specified")
        expected = self._passwords(username)
        # An unknown user is compared against a password of its own, so that both fail alike.
        if not hmac.compare_digest((expected if expected is not None else "\x00" + password).encode(),
                                   password.encode()) or expected is None:
            raise AuthenticationFailed("Authentication failed: Invalid username or password")
        if authzid and authzid != username:
            raise AuthenticationFailed("Authentication failed: Client requested an authorization id "
                                       "that is different from username")
        self.principal_name = username
        self.complete = True
        return b""


def plain_client_token(username: str, password: str, authzid: str = "") -> bytes:
    """A PLAIN client's one message."""
    return f"{authzid}\x00{username}\x00{password}".encode()
