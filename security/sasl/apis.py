"""The SASL APIs a listener serves (KIP-152): SaslHandshake v0-1 and SaslAuthenticate v0-2, as
Kafka's SaslServerAuthenticator answers them.

A connection on a SASL listener starts unauthenticated (protocol/context.py's Session); until
it authenticates, the Dispatcher lets through only ApiVersions and these two
(protocol/dispatch.py). SaslHandshake names a mechanism: one the listener does not enable is
answered UNSUPPORTED_SASL_MECHANISM with the enabled list and the connection closed. Each
SaslAuthenticate carries the client's next token to the mechanism's server
(security/sasl/{plain,scram,oauthbearer}.py) and its answer back. On success the session holds
``User:<name>`` and the mechanism; SaslAuthenticate v1+ answers the session's lifetime
(KIP-368: the sooner of connections.max.reauth.ms and the credential's expiry, 0 for none),
after which the connection must re-authenticate (a second SaslHandshake and SaslAuthenticate
over the same connection, with the same mechanism and principal) or be closed.

A failure is answered SASL_AUTHENTICATION_FAILED with Kafka's message (credentials are never
said to be wrong in more words than "invalid credentials"), after
connection.failed.authentication.delay.ms (KIP-306), and the connection is then closed; the
node logs one INFO line, without a traceback. After a SaslHandshake v0 (Kafka's deprecated
version, which librdkafka before 2.x still requires to be advertised) the client sends its tokens
bare, each a size-prefixed frame: protocol/dispatch.py hands them to ``raw_token``, a failure
closes the connection without an answer, and such a session cannot re-authenticate.

The exchange in progress belongs to the connection: it lives in the connection's session
(``Session.sasl_exchange``), between the handshake and the SaslAuthenticate requests that follow.
"""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from metadata.security import ScramCredential
from protocol import messages as M
from protocol.context import SASL_PROTOCOLS, USER_TYPE, KafkaPrincipal, RequestContext, Session
from protocol.dispatch import Api
from protocol.errors import Error
from security.sasl.config import ListenerSasl, start_jwks
from security.sasl.mechanism import (
    OAUTHBEARER,
    PLAIN,
    AuthenticationFailed,
    InvalidCredentials,
    SaslServer,
)
from security.sasl.oauthbearer import OAuthBearerServer
from security.sasl.plain import PlainServer
from security.sasl.scram import HASHES, MECHANISM_CODES, ScramServer

log = logging.getLogger(__name__)

SASL_HANDSHAKE_KEY, SASL_AUTHENTICATE_KEY = 17, 36
SASL_API_KEYS = frozenset({SASL_HANDSHAKE_KEY, SASL_AUTHENTICATE_KEY})
DEFAULT_FAILED_AUTHENTICATION_DELAY_MS = 100

# user -> mechanism name -> credential, None if there is none (a broker's metadata image).
ScramLookup = Callable[[str, str], "ScramCredential | None"]


@dataclass
class _Exchange:
    mechanism: str
    server: SaslServer | None  # None: a re-authentication that named another mechanism
    reauthenticating: bool
    error: str | None = None  # the failure the next SaslAuthenticate answers
    done: bool = False
    # Whether this connection's client said it can re-authenticate (a SaslAuthenticate v1+);
    # a re-authentication's exchange inherits it.
    reauth_capable: bool = False
    # After a SaslHandshake v0 the tokens come bare, not in SaslAuthenticate requests
    # (protocol/dispatch.py hands them to ``SaslApis.raw_token``).
    raw_tokens: bool = False


@dataclass
class _Failure:
    message: str  # what SaslAuthenticate answers


def _exchange_of(session: Session) -> _Exchange | None:
    exchange = session.sasl_exchange
    return exchange if isinstance(exchange, _Exchange) else None


def _now_ms() -> int:
    return int(asyncio.get_running_loop().time() * 1000)


def _wall_ms() -> int:
    import time

    return int(time.time() * 1000)


# How long a connection refused at authentication stays open after its answer is written, unless
# its client closes it first (as clients do on an authentication error). A client that reads its
# answer and our close in one read may drop the answer and report only a lost connection
# (kafka-python 3.x reads until EOF and then discards what it read): the linger lets it read the
# answer alone. Meanwhile the connection is served nothing but ApiVersions (protocol/dispatch.py's
# gating closes it on any other request, and a new handshake closes it).
CLOSE_LINGER_S = 0.5


def _close_after_answer() -> None:
    """Close this connection CLOSE_LINGER_S after the answer being made (asyncio flushes a
    transport's buffer before it closes)."""
    from protocol.net import current_connection

    conn = current_connection.get()
    if conn is not None and conn.transport is not None:
        asyncio.get_running_loop().call_later(CLOSE_LINGER_S, conn.transport.close)


class SaslApis:
    """``listeners(name)``: a listener's SASL settings (None: not a SASL listener);
    ``scram(user, mechanism)``: a SCRAM credential from the metadata image."""

    def __init__(self, listeners: Callable[[str | None], ListenerSasl | None], scram: ScramLookup,
                 failed_authentication_delay_ms: int = DEFAULT_FAILED_AUTHENTICATION_DELAY_MS):
        self.listeners = listeners
        self.scram = scram
        self.delay_ms = failed_authentication_delay_ms

    def apis(self) -> list[Api]:
        return [Api(SASL_HANDSHAKE_KEY, 0, 1, self.sasl_handshake, raw=self.raw_token),
                Api(SASL_AUTHENTICATE_KEY, 0, 2, self.sasl_authenticate)]

    def _server(self, sasl: ListenerSasl, mechanism: str) -> SaslServer:
        if mechanism == PLAIN:
            return PlainServer(sasl.plain_users.get)
        if mechanism in HASHES:
            return ScramServer(mechanism, lambda user: self.scram(user, mechanism))
        if mechanism == OAUTHBEARER:
            assert sasl.oauth is not None
            return OAuthBearerServer(sasl.oauth.validate)
        raise ValueError(mechanism)

    async def _fail_later(self) -> None:
        if self.delay_ms > 0:
            await asyncio.sleep(self.delay_ms / 1000)
        _close_after_answer()

    async def sasl_handshake(self, ctx: RequestContext, request):
        R = M.SaslHandshakeResponse
        session = ctx.session
        sasl = self.listeners(session.listener_name) if session.security_protocol in SASL_PROTOCOLS else None
        if sasl is None:  # KafkaApis: a handshake on a listener that does not authenticate with SASL
            return R(error_code=Error.ILLEGAL_SASL_STATE, mechanisms=[])
        mechanism = request.mechanism
        exchange = _exchange_of(session)
        if session.authenticated:
            if exchange is None or not exchange.reauth_capable or not exchange.done or ctx.api_version == 0:
                return R(error_code=Error.ILLEGAL_SASL_STATE, mechanisms=[])
        elif exchange is not None:
            log.info("closing connection from %s: a second SaslHandshake during SASL authentication",
                     session.client_address)
            _close_after_answer()
            return R(error_code=Error.ILLEGAL_SASL_STATE, mechanisms=[])
        if mechanism not in sasl.mechanisms:
            log.info("Failed authentication with %s (Unsupported SASL mechanism %s)",
                     session.client_address, _loggable(mechanism))
            await self._fail_later()
            return R(error_code=Error.UNSUPPORTED_SASL_MECHANISM, mechanisms=list(sasl.mechanisms))
        capable = exchange is not None and exchange.reauth_capable
        if session.authenticated and mechanism != session.sasl_mechanism:
            session.sasl_exchange = _Exchange(mechanism, None, True, error=(
                f"SASL mechanism '{mechanism}' requested by client is not supported for re-authentication "
                f"of mechanism '{session.sasl_mechanism}'"), reauth_capable=capable)
        else:
            session.sasl_exchange = _Exchange(mechanism, self._server(sasl, mechanism), session.authenticated,
                                              reauth_capable=capable, raw_tokens=ctx.api_version == 0)
        return R(error_code=Error.NONE, mechanisms=list(sasl.mechanisms))

    async def sasl_authenticate(self, ctx: RequestContext, request):
        R = M.SaslAuthenticateResponse
        session = ctx.session
        exchange = _exchange_of(session)
        if exchange is None or exchange.done:
            if session.authenticated:  # KafkaApis answers it on an authenticated connection
                return R(error_code=Error.SASL_AUTHENTICATION_FAILED, auth_bytes=b"",
                         error_message="SaslAuthenticate request received after successful authentication")
            log.info("closing connection from %s: SaslAuthenticate before SaslHandshake",
                     session.client_address)
            _close_after_answer()
            return R(error_code=Error.ILLEGAL_SASL_STATE, auth_bytes=b"", error_message=(
                "Unexpected Kafka request of type SASL_AUTHENTICATE during SASL handshake."))
        if ctx.api_version > 0:
            exchange.reauth_capable = True
        outcome = await self._evaluate(session, exchange, bytes(request.auth_bytes))
        if isinstance(outcome, _Failure):
            return R(error_code=Error.SASL_AUTHENTICATION_FAILED, error_message=outcome.message,
                     auth_bytes=b"")
        answer, lifetime_ms = outcome
        return R(error_code=Error.NONE, auth_bytes=answer, error_message=None,
                 session_lifetime_ms=lifetime_ms)

    async def raw_token(self, session: Session, token: bytes) -> bytes | None:
        """A bare token after SaslHandshake v0: the answer token, or None (after the failed
        authentication delay) to close the connection, as Kafka answers a v0 client."""
        exchange = _exchange_of(session)
        if exchange is None or exchange.done:
            return None
        outcome = await self._evaluate(session, exchange, token)
        return None if isinstance(outcome, _Failure) else outcome[0]

    async def _evaluate(self, session: Session, exchange: _Exchange,
                        token: bytes) -> tuple[bytes, int] | _Failure:
        """The client's next token through the exchange's mechanism: the answer and, once
        complete, the session's lifetime (0 until then, and for none); or the failure,
        logged, after connection.failed.authentication.delay.ms."""
        what = "re-authentication" if exchange.reauthenticating else "authentication"
        server = exchange.server
        try:
            if exchange.error is not None or server is None:
                raise AuthenticationFailed(exchange.error or "unexpected SASL state")
            if exchange.mechanism == OAUTHBEARER:  # it may fetch the JWKS: not on the loop
                answer = await asyncio.get_running_loop().run_in_executor(None, server.evaluate, token)
            else:
                answer = server.evaluate(token)
            reason = getattr(server, "reason", None)
            if reason is not None and not server.complete:  # OAUTHBEARER's error challenge: say why now
                log.info("Failed authentication with %s (%s token refused: %s)", session.client_address,
                         exchange.mechanism, _loggable(reason))
            principal = None
            if server.complete:
                assert server.principal_name is not None
                principal = KafkaPrincipal(USER_TYPE, server.principal_name)
                if exchange.reauthenticating and principal != session.principal:
                    raise AuthenticationFailed(
                        f"Cannot change principals during re-authentication from {session.principal.type}."
                        f"{session.principal.name}: {principal.type}.{principal.name}")
        except AuthenticationFailed as e:
            return await self._failed(session, exchange, str(e), str(e))
        except InvalidCredentials as e:
            message = (f"Authentication failed during {what} due to invalid credentials with SASL "
                       f"mechanism {exchange.mechanism}")
            return await self._failed(session, exchange, message, str(e))
        lifetime_ms = 0
        if principal is not None:
            lifetime_ms = self._complete(session, exchange, server, principal)
        return answer, lifetime_ms

    def _complete(self, session: Session, exchange: _Exchange, server: SaslServer,
                  principal: KafkaPrincipal) -> int:
        """Mark the session authenticated; its lifetime in ms (0: unlimited), as Kafka's
        calcCompletionTimesAndReturnSessionLifetimeMs."""
        sasl = self.listeners(session.listener_name)
        max_reauth = sasl.reauth_ms.get(exchange.mechanism, 0) if sasl is not None else 0
        expiry = server.credential_expiry_ms
        lifetime = 0
        deadline = None
        if expiry is not None or max_reauth > 0:
            if expiry is None:
                lifetime = max(max_reauth, 0)
            elif max_reauth <= 0:
                lifetime = max(expiry - _wall_ms(), 0)
            else:
                lifetime = max(min(expiry - _wall_ms(), max_reauth), 0)
            deadline = _now_ms() + lifetime
        session.principal = principal
        session.sasl_mechanism = exchange.mechanism
        session.reauth_deadline_ms = deadline
        session.authenticated = True
        exchange.done = True
        log.debug("%s %s on %s as %s", exchange.mechanism,
                  "re-authenticated" if exchange.reauthenticating else "authenticated",
                  session.listener_name, principal)
        return lifetime

    async def _failed(self, session: Session, exchange: _Exchange, message: str, detail: str) -> _Failure:
        exchange.done = True
        log.info("Failed %s with %s (%s)",
                 "re-authentication" if exchange.reauthenticating else "authentication",
                 session.client_address, _loggable(message if detail == message else f"{message}: {detail}"))
        await self._fail_later()
        return _Failure(message)


def _loggable(text: str) -> str:
    """What a client sent, fit for one log line: control characters escaped, so that a
    mechanism or token with a newline cannot forge lines in the node's log."""
    return text.encode("unicode_escape").decode("ascii")


class NodeConfig(Protocol):
    """What ``node_sasl_apis`` reads of a node's configuration (strom.config.ServerConfig, which
    reads each SASL listener's settings once, at startup: a bad one stops it naming its property)."""

    def listener_sasl(self, listener_name: str) -> ListenerSasl | None: ...

    def __getitem__(self, name: str) -> Any: ...


def node_sasl_apis(config: NodeConfig, listener_names: list[str], scram: ScramLookup) -> list[Api]:
    """The SASL APIs of a node serving ``listener_names``, called as its listeners start: an
    OAUTHBEARER listener reads its JWKS now, and one that cannot be read stops the node with a
    SaslConfigError naming sasl.oauthbearer.jwks.endpoint.url."""
    listeners: dict[str | None, ListenerSasl] = {}
    for name in listener_names:
        sasl = config.listener_sasl(name)
        if sasl is not None:
            start_jwks(sasl)
            listeners[name] = sasl
    delay_ms = config["connection.failed.authentication.delay.ms"]
    return SaslApis(lambda name: listeners.get(name), scram, delay_ms).apis()


def image_scram_lookup(image: Callable[[], Any]) -> ScramLookup:
    """A SCRAM credential from a metadata image's ``scram_credentials`` (user -> mechanism code
    -> credential), read at each authentication: a credential altered takes effect at once."""
    def lookup(user: str, mechanism: str) -> ScramCredential | None:
        return image().scram_credentials.get(user, {}).get(MECHANISM_CODES[mechanism])

    return lookup
