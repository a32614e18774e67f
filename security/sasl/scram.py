"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) as Kafka's ScramSaslServer and
ScramSaslClient speak them.

The exchange: client-first ``n,,n=<user>,r=<client nonce>`` -> server-first
``r=<client nonce><server nonce>,s=<salt>,i=<iterations>`` -> client-final
``c=biws,r=<nonce>,p=<proof>`` -> server-final ``v=<server signature>``. The server holds only
the user's salt, iteration count, StoredKey and ServerKey (metadata.security.ScramCredential,
from UserScramCredentialRecord), never the password.

As Kafka: only the gs2 header ``n`` (no channel binding); extensions are ignored, except
``tokenauth``, refused (Strom has no delegation tokens); a credential stored with fewer
iterations than the mechanism's minimum (4096) is refused. An unknown user is answered with a
server-first message all the same (a salt derived from the name and a secret of this server),
so that it fails at the client's proof exactly as a wrong password does.
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
from collections.abc import Callable

from metadata.security import SCRAM_MECHANISMS, ScramCredential
from security.sasl.mechanism import AuthenticationFailed, InvalidCredentials, SaslServer

MECHANISM_CODES = {name: code for code, name in SCRAM_MECHANISMS.items()}
HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
MIN_ITERATIONS = 4096  # Kafka's ScramMechanism minIterations, both mechanisms
MAX_ITERATIONS = 16384  # what Kafka's AlterUserScramCredentials accepts at most
TOKEN_AUTH = "tokenauth"

_VALUE = r"[\x01-\x2b\x2d-\x7f]+"
_PRINTABLE = r"[\x21-\x2b\x2d-\x7e]+"
_SASLNAME = r"(?:[\x01-\x2b\x2d-\x3c\x3e-\x7f]|=2C|=3D)+"
_BASE64 = r"(?:[a-zA-Z0-9/+]{4})*(?:[a-zA-Z0-9/+]{3}=|[a-zA-Z0-9/+]{2}==)?"
_EXTENSIONS = rf"(?:,[A-Za-z]+={_VALUE})*"
_CLIENT_FIRST = re.compile(
    rf"(?P<gs2>n,(?:a=(?P<authzid>{_SASLNAME}))?,)"
    rf"(?P<bare>(?:m={_VALUE},)?n=(?P<saslname>{_SASLNAME}),r=(?P<nonce>{_PRINTABLE})(?P<ext>{_EXTENSIONS}))")
_CLIENT_FINAL = re.compile(
    rf"(?P<without_proof>c=(?P<channel>{_BASE64}),r=(?P<nonce>{_PRINTABLE}){_EXTENSIONS}),p=(?P<proof>{_BASE64})")
_SERVER_FIRST = re.compile(
    rf"(?:m={_VALUE},)?r=(?P<nonce>{_PRINTABLE}),s=(?P<salt>{_BASE64}),i=(?P<iterations>[0-9]+){_EXTENSIONS}")
_SERVER_FINAL = re.compile(
    rf"(?:e=(?P<error>[\x01-\x2b\x2d-\x3c\x3e-\x7f]+)|v=(?P<signature>{_BASE64})){_EXTENSIONS}")


# ---- RFC 5802's functions -------------------------------------------------------------

def _hmac(hash_name: str, key: bytes, data: bytes) -> bytes:
    return hmac.new(key, data, hash_name).digest()


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac(HASHES[mechanism], password.encode("utf-8"), salt, iterations)


def client_key(mechanism: str, salted: bytes) -> bytes:
    return _hmac(HASHES[mechanism], salted, b"Client Key")


def stored_key(mechanism: str, key: bytes) -> bytes:
    return hashlib.new(HASHES[mechanism], key).digest()


def server_key(mechanism: str, salted: bytes) -> bytes:
    return _hmac(HASHES[mechanism], salted, b"Server Key")


def make_credential(mechanism: str, password: str, salt: bytes | None = None,
                    iterations: int = MIN_ITERATIONS) -> ScramCredential:
    """The credential a server stores for ``password`` (a random salt unless given)."""
    if mechanism not in HASHES:
        raise ValueError(f"unknown SCRAM mechanism {mechanism!r}")
    if salt is None:
        salt = secrets.token_bytes(32)
    salted = salted_password(mechanism, password, salt, iterations)
    return ScramCredential(mechanism=MECHANISM_CODES[mechanism], salt=salt,
                           stored_key=stored_key(mechanism, client_key(mechanism, salted)),
                           server_key=server_key(mechanism, salted), iterations=iterations)


def sasl_name(username: str) -> str:
    """A user name as SCRAM carries it (``=`` and ``,`` escaped)."""
    return username.replace("=", "=3D").replace(",", "=2C")


def username_of(name: str) -> str:
    """The user name a SCRAM saslname stands for; ValueError if it is badly escaped."""
    unescaped = name.replace("=2C", ",")
    if "=" in unescaped.replace("=3D", ""):
        raise ValueError(f"Invalid username: {name}")
    return unescaped.replace("=3D", "=")


def _xor(a: bytes, b: bytes) -> bytes:
    return bytes(x ^ y for x, y in zip(a, b, strict=True))


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def new_nonce() -> str:
    """A nonce of printable characters without a comma (URL-safe base64 of 24 random bytes)."""
    return secrets.token_urlsafe(24)


def _extensions(text: str) -> dict[str, str]:
    out = {}
    for item in text.split(",")[1:]:
        key, _, value = item.partition("=")
        out[key] = value
    return out


# ---- the server -----------------------------------------------------------------------

# A user's credential for this mechanism, None if there is none.
CredentialLookup = Callable[[str], "ScramCredential | None"]


class ScramServer(SaslServer):
    """One server-side exchange (see the module doc). ``credentials(user)`` reads the metadata
    image's credential for this mechanism; ``nonce`` makes the server nonce (tests pass the
    RFC's); ``secret`` keys the salts made up for unknown users."""

    def __init__(self, mechanism: str, credentials: CredentialLookup,
                 nonce: Callable[[], str] = new_nonce, secret: bytes | None = None):
        super().__init__()
        if mechanism not in HASHES:
            raise ValueError(f"unknown SCRAM mechanism {mechanism!r}")
        self.mechanism = mechanism
        self._credentials = credentials
        self._nonce = nonce
        self._secret = secret if secret is not None else _PROCESS_SECRET
        self._state = "first"
        self._credential: ScramCredential | None = None
        self._unknown_user = False
        self._gs2 = ""
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce_full = ""
        self._username = ""

    def evaluate(self, token: bytes) -> bytes:
        try:
            if self._state == "first":
                return self._first(token)
            if self._state == "final":
                return self._final(token)
            raise AuthenticationFailed(f"Unexpected challenge in Sasl server state {self._state.upper()}")
        except (AuthenticationFailed, InvalidCredentials):
            self._state = "failed"
            self._credential = None
            raise

    def _first(self, token: bytes) -> bytes:
        text = token.decode("utf-8", errors="replace")
        m = _CLIENT_FIRST.fullmatch(text)
        if m is None:
            raise InvalidCredentials(f"Invalid SCRAM client first message format: {text}")
        extensions = _extensions(m.group("ext"))
        try:
            username = username_of(m.group("saslname"))
        except ValueError as e:
            raise InvalidCredentials(str(e)) from None
        if extensions.get(TOKEN_AUTH, "").lower() == "true":
            raise InvalidCredentials(f"Token Authentication failed: Invalid tokenId : {username}")
        authzid = m.group("authzid")
        if authzid and authzid != username:
            raise AuthenticationFailed("Authentication failed: Client requested an authorization id "
                                       "that is different from username")
        credential = self._credentials(username)
        if credential is None:
            # Answered as if the user existed; the proof cannot match (see the module doc).
            self._unknown_user = True
            salt = _hmac("sha256", self._secret, username.encode("utf-8"))
            credential = ScramCredential(MECHANISM_CODES[self.mechanism], salt, b"", b"", MIN_ITERATIONS)
        elif credential.iterations < MIN_ITERATIONS:
            raise InvalidCredentials(f"Iterations {credential.iterations} is less than the minimum "
                                     f"{MIN_ITERATIONS} for {self.mechanism}")
        self._credential = credential
        self._username = username
        self._gs2 = m.group("gs2")
        self._client_first_bare = m.group("bare")
        self._nonce_full = m.group("nonce") + self._nonce()
        self._server_first = f"r={self._nonce_full},s={_b64(credential.salt)},i={credential.iterations}"
        self._state = "final"
        return self._server_first.encode("ascii")

    def _final(self, token: bytes) -> bytes:
        text = token.decode("utf-8", errors="replace")
        m = _CLIENT_FINAL.fullmatch(text)
        if m is None:
            raise InvalidCredentials(f"Invalid SCRAM client final message format: {text}")
        # Kafka's ScramSaslServer asks only that the nonce end with the server-first one (librdkafka
        # before 2.1 sends its client nonce again in front of it).
        if not m.group("nonce").endswith(self._nonce_full):
            raise InvalidCredentials("Invalid client nonce in the final client message.")
        if base64.b64decode(m.group("channel")) != self._gs2.encode("utf-8"):
            raise InvalidCredentials("Invalid channel binding in the final client message.")
        credential = self._credential
        assert credential is not None
        hash_name = HASHES[self.mechanism]
        auth_message = f"{self._client_first_bare},{self._server_first},{m.group('without_proof')}".encode()
        proof = base64.b64decode(m.group("proof"))
        signature = _hmac(hash_name, credential.stored_key or b"\x00", auth_message)
        if len(proof) != len(signature):
            raise InvalidCredentials("Invalid client credentials")
        computed = stored_key(self.mechanism, _xor(proof, signature))
        if self._unknown_user or not hmac.compare_digest(computed, credential.stored_key):
            raise InvalidCredentials("Invalid client credentials")
        server_signature = _hmac(hash_name, credential.server_key, auth_message)
        self._credential = None
        self._state = "complete"
        self.principal_name = self._username
        self.complete = True
        return f"v={_b64(server_signature)}".encode("ascii")


_PROCESS_SECRET = secrets.token_bytes(32)


# ---- the client -----------------------------------------------------------------------

class ScramClient:
    """A client's side of the exchange: ``first()``, ``final(server_first)``,
    ``verify(server_final)``; ValueError when the server's messages are wrong."""

    def __init__(self, mechanism: str, username: str, password: str, nonce: str | None = None):
        if mechanism not in HASHES:
            raise ValueError(f"unknown SCRAM mechanism {mechanism!r}")
        self.mechanism = mechanism
        self.username = username
        self.password = password
        self.nonce = nonce if nonce is not None else new_nonce()
        self._bare = f"n={sasl_name(username)},r={self.nonce}"
        self._server_signature = b""

    def first(self) -> bytes:
        return f"n,,{self._bare}".encode()

    def final(self, server_first: bytes) -> bytes:
        text = server_first.decode("utf-8", errors="replace")
        m = _SERVER_FIRST.fullmatch(text)
        if m is None:
            raise ValueError(f"Invalid SCRAM server first message format: {text}")
        nonce, iterations = m.group("nonce"), int(m.group("iterations"))
        if not nonce.startswith(self.nonce) or len(nonce) == len(self.nonce):
            raise ValueError("Invalid server nonce: does not start with client nonce")
        if iterations < MIN_ITERATIONS:
            raise ValueError(f"Requested iterations {iterations} is less than the minimum {MIN_ITERATIONS} "
                             f"for {self.mechanism}")
        salted = salted_password(self.mechanism, self.password, base64.b64decode(m.group("salt")), iterations)
        without_proof = f"c={_b64(b'n,,')},r={nonce}"
        auth_message = f"{self._bare},{text},{without_proof}".encode()
        key = client_key(self.mechanism, salted)
        signature = _hmac(HASHES[self.mechanism], stored_key(self.mechanism, key), auth_message)
        self._server_signature = _hmac(HASHES[self.mechanism], server_key(self.mechanism, salted),
                                       auth_message)
        return f"{without_proof},p={_b64(_xor(key, signature))}".encode()

    def verify(self, server_final: bytes) -> None:
        text = server_final.decode("utf-8", errors="replace")
        m = _SERVER_FINAL.fullmatch(text)
        if m is None:
            raise ValueError(f"Invalid SCRAM server final message format: {text}")
        if m.group("error"):
            raise ValueError(f"Sasl authentication using {self.mechanism} failed with error: "
                             f"{m.group('error')}")
        if not hmac.compare_digest(base64.b64decode(m.group("signature")), self._server_signature):
            raise ValueError("Invalid server signature in server final message")
