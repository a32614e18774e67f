"""SASL/OAUTHBEARER (RFC 7628, KIP-255) with KIP-768's broker-side validation of the bearer
token as a JWT (Kafka's OAuthBearerValidatorCallbackHandler and its ValidatorAccessTokenValidator).

The client's one message is ``n,[a=<authzid>],\\x01auth=Bearer <jwt>\\x01[key=value\\x01...]\\x01``.
The token must be a JWS signed by a key of the JWKS (``sasl.oauthbearer.jwks.endpoint.url``: a
``file:`` URL, read when the listener starts, or an http(s) one, fetched when the listener starts,
every ``sasl.oauthbearer.jwks.endpoint.refresh.ms`` and when a token names a key id it does not
hold; reading a node's configuration fetches nothing), with an ``alg`` other than none that
fits the key; it must carry ``exp`` and ``iat``, be unexpired within
``sasl.oauthbearer.clock.skew.seconds``, name an audience of ``sasl.oauthbearer.expected.audience``
and the issuer ``sasl.oauthbearer.expected.issuer`` when those are set. The principal is the
``sasl.oauthbearer.sub.claim.name`` claim (``sub``);
the scopes are the ``sasl.oauthbearer.scope.claim.name`` claim (``scope``). The session may
last until the token expires (KIP-368).

An invalid token is answered, as RFC 7628 says, with the error JSON
``{"status":"invalid_token"}``; the client acknowledges with ``\\x01`` and the exchange fails with
that JSON as its message.
"""
from __future__ import annotations

import json
import re
import threading
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass

import jwt

from security.sasl.mechanism import OAUTHBEARER, AuthenticationFailed, InvalidCredentials, SaslServer

SEPARATOR = "\x01"
_SASLNAME = r"(?:[\x01-\x2b\x2d-\x3c\x3e-\x7f]|=2C|=3D)+"
_KVPAIRS = r"(?:[A-Za-z]+=[\x21-\x7e \t\r\n]+\x01)*"
_INITIAL = re.compile(rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,\x01(?P<kvpairs>{_KVPAIRS})\x01", re.DOTALL)
_AUTH = re.compile(r"(?P<scheme>\w+) +(?P<token>[-_~+/.a-zA-Z0-9]+=*)")

# The signature algorithms a key of each JWK type may verify (never "none").
_ALGORITHMS = {
    "RSA": {"RS256", "RS384", "RS512", "PS256", "PS384", "PS512"},
    "EC": {"ES256", "ES384", "ES512", "ES256K"},
    "OKP": {"EdDSA"},
    "oct": {"HS256", "HS384", "HS512"},
}


class InvalidToken(Exception):
    """A bearer token that does not validate; ``str(e)`` says why (for the log)."""


@dataclass(frozen=True)
class ValidToken:
    value: str
    principal_name: str
    scopes: frozenset[str]
    lifetime_ms: int  # exp, ms since the epoch
    issued_at_ms: int


class JwksKeys:
    """The verification keys of a JWKS URL (see the module doc). ``fetch(url)`` returns the
    JWKS document's bytes (tests pass their own); ``now()`` is the clock for refreshes, seconds."""

    def __init__(self, url: str, refresh_ms: int = 3_600_000, retry_backoff_ms: int = 100,
                 fetch: Callable[[str], bytes] | None = None, now: Callable[[], float] | None = None,
                 property_name: str = "sasl.oauthbearer.jwks.endpoint.url"):
        import time

        self.url = url
        self.property_name = property_name  # as the listener's prefix spells it, for start's error
        self.refresh_ms = refresh_ms
        self.retry_backoff_ms = retry_backoff_ms
        self._fetch = fetch or _fetch_url
        self._now = now or time.monotonic
        self._lock = threading.Lock()
        self._keys: dict[str | None, jwt.PyJWK] = {}
        self._loaded_at: float | None = None  # nothing is fetched until start() or the first token
        self._tried_at = -1e18

    @property
    def is_file(self) -> bool:
        return self.url.startswith("file:")

    def start(self) -> None:
        """Read the JWKS once, as Kafka's listener does when it starts (its VerificationKeyResolver's
        init, one attempt): OSError or ValueError when it cannot be read, and the listener does not
        start. Later refreshes keep the keys at hand when they fail."""
        self._tried_at = self._now()
        self.refresh()

    def refresh(self) -> None:
        data = json.loads(self._fetch(self.url))
        if not isinstance(data, dict) or not isinstance(data.get("keys"), list):
            raise ValueError("not a JWKS: expected a JSON object with a \"keys\" list")
        keys: dict[str | None, jwt.PyJWK] = {}
        for jwk in data["keys"]:
            if not isinstance(jwk, dict):
                continue
            if jwk.get("use", "sig") != "sig":
                continue
            try:
                key = jwt.PyJWK(jwk)
            except (jwt.PyJWKError, jwt.InvalidKeyError):
                continue  # a key type or algorithm pyjwt cannot use: as jose4j, skipped
            keys[jwk.get("kid")] = key
        with self._lock:
            self._keys = keys
            self._loaded_at = self._tried_at = self._now()

    def key(self, kid: str | None) -> jwt.PyJWK:
        """The key a token's header names (its ``kid``; without one, the only key)."""
        now = self._now()
        backed_off = now - self._tried_at >= self.retry_backoff_ms / 1000
        if self._loaded_at is None:  # never read (a validator used before its listener started)
            again = backed_off
        elif self.is_file:  # read once, as Kafka's JwksFileVerificationKeyResolver
            again = False
        else:
            due = now - self._loaded_at >= self.refresh_ms / 1000
            again = backed_off and (due or kid not in self._keys)
        if again:
            self._tried_at = now
            try:
                self.refresh()
            except (OSError, ValueError) as e:
                if not self._keys:
                    raise InvalidToken(f"cannot read the JWKS at {self.url}: {e}") from None
        keys = self._keys
        if kid is None and len(keys) == 1:
            return next(iter(keys.values()))
        found = keys.get(kid)
        if found is None:
            raise InvalidToken(f"no key in the JWKS at {self.url} matches the token's key id {kid!r}")
        return found


def _fetch_url(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=10) as response:
        return response.read()


class JwtValidator:
    """KIP-768's ValidatorAccessTokenValidator over ``keys`` (see the module doc)."""

    def __init__(self, keys: JwksKeys, expected_audience: list[str] | None = None,
                 expected_issuer: str | None = None, sub_claim_name: str = "sub",
                 scope_claim_name: str = "scope", clock_skew_seconds: int = 30):
        self.keys = keys
        self.expected_audience = list(expected_audience or [])
        self.expected_issuer = expected_issuer
        self.sub_claim_name = sub_claim_name
        self.scope_claim_name = scope_claim_name
        self.clock_skew_seconds = clock_skew_seconds

    def validate(self, token: str) -> ValidToken:
        if token.count(".") != 2:
            raise InvalidToken(f"Malformed JWT provided; expected three sections (header, payload, and "
                               f"signature), but {token.count('.') + 1} sections provided")
        try:
            header = jwt.get_unverified_header(token)
            kid = header.get("kid")
            key = self.keys.key(kid)
            alg = header.get("alg")
            allowed = _ALGORITHMS.get(key.key_type or "", set())
            if key.algorithm_name and key.algorithm_name in allowed:
                allowed = {key.algorithm_name}
            if alg not in allowed:
                raise InvalidToken(f"the token's algorithm {alg!r} is not one its key "
                                   f"({key.key_type}) may verify")
            claims = jwt.decode(
                token, key.key, algorithms=[alg],
                audience=self.expected_audience or None, issuer=self.expected_issuer,
                leeway=self.clock_skew_seconds,
                options={"require": ["exp", "iat"], "verify_aud": bool(self.expected_audience),
                         "verify_iss": self.expected_issuer is not None})
        except jwt.PyJWTError as e:
            raise InvalidToken(f"Could not validate the access token: {e}") from None
        sub = claims.get(self.sub_claim_name)
        if not isinstance(sub, str) or not sub.strip():
            raise InvalidToken(f"The {self.sub_claim_name} claim is required and must be a non-empty string")
        raw_scope = claims.get(self.scope_claim_name)
        if isinstance(raw_scope, str):
            scopes = frozenset(raw_scope.split())
        elif isinstance(raw_scope, list):
            scopes = frozenset(str(s).strip() for s in raw_scope)
        else:
            scopes = frozenset()
        return ValidToken(token, sub.strip(), scopes, int(float(claims["exp"]) * 1000),
                          int(float(claims["iat"]) * 1000))


def parse_initial_response(token: bytes) -> tuple[str, str, dict[str, str]]:
    """(bearer token, authzid, extensions) of a client's message; InvalidCredentials if malformed."""
    text = token.decode("utf-8", errors="replace")
    m = _INITIAL.fullmatch(text)
    if m is None:
        raise InvalidCredentials("Invalid OAUTHBEARER client first message")
    pairs = {}
    for item in m.group("kvpairs").split(SEPARATOR):
        if item:
            key, _, value = item.partition("=")
            pairs[key] = value
    auth = pairs.pop("auth", None)
    if auth is None:
        raise InvalidCredentials("Invalid OAUTHBEARER client first message: 'auth' not specified")
    a = _AUTH.fullmatch(auth)
    if a is None:
        raise InvalidCredentials("Invalid OAUTHBEARER client first message: invalid 'auth' format")
    if a.group("scheme").lower() != "bearer":
        raise InvalidCredentials(f"Invalid scheme in OAUTHBEARER client first message: {a.group('scheme')}")
    return a.group("token"), m.group("authzid") or "", pairs


def client_initial_response(token: str, authzid: str = "", extensions: dict[str, str] | None = None) -> bytes:
    extra = "".join(f"{key}={value}{SEPARATOR}" for key, value in (extensions or {}).items())
    authz = f"a={authzid}" if authzid else ""
    return f"n,{authz},{SEPARATOR}auth=Bearer {token}{SEPARATOR}{extra}{SEPARATOR}".encode()


class OAuthBearerServer(SaslServer):
    mechanism = OAUTHBEARER

    def __init__(self, validate: Callable[[str], ValidToken]):
        super().__init__()
        self._validate = validate
        self._error: str | None = None
        self.token: ValidToken | None = None
        self.reason: str | None = None  # why the token was refused, for the log

    def evaluate(self, token: bytes) -> bytes:
        if self._error is not None:
            if token == SEPARATOR.encode():
                raise AuthenticationFailed(self._error)
            raise AuthenticationFailed(self._error)
        if self.complete:
            raise AuthenticationFailed("Authentication failed: unexpected OAUTHBEARER message "
                                       "after completion")
        value, authzid, _extensions = parse_initial_response(token)
        try:
            valid = self._validate(value)
        except InvalidToken as e:
            self.reason = str(e)
            self._error = json.dumps({"status": "invalid_token"}, separators=(",", ":"))
            return self._error.encode()
        if authzid and authzid != valid.principal_name:
            raise AuthenticationFailed(
                f"Authentication failed: Client requested an authorization id ({authzid}) that is different "
                f"from the token's principal name ({valid.principal_name})")
        self.token = valid
        self.principal_name = valid.principal_name
        self.credential_expiry_ms = valid.lifetime_ms
        self.complete = True
        return b""
