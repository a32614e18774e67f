"""Request dispatch: one frame in, one response out, no IO.

A process registers a handler per API with the version range it serves; ``ApiVersions``
is answered here from exactly that table, so a process advertises only what it serves.
An unknown API key or a malformed request closes the connection (None); a known API at a
version outside the served range gets UNSUPPORTED_VERSION. The decoders refuse what Kafka's
refuse at parse time (a null where the schema allows none, a bad length), so a handler sees
only well-formed requests. A response that cannot be encoded (a handler echoed a value its
field cannot hold) closes that connection with one log line; it never escapes to the
connection's task.

A handler may answer ``Deferred(awaitable)``: its part that must keep the connection's order
is done (a produce has appended) and the rest only waits (for replication). An asyncio Future
that a callback completes (an acks=all produce's, from the call that moves the high watermark)
is encoded from its done callback; any other awaitable gets a task. The connection
then handles its next requests while it waits, and sends the answers in request order
(protocol/net.py). Kafka's broker holds the connection until the answer; an acks=all
producer pipelining small requests would otherwise wait a replication round trip per
request.

ApiVersions v3+ also carries the process's features (KIP-584): ``supported_features``, the
range of each it supports, and, where the process follows a metadata image (a broker),
``finalized_features``: the image's finalized levels and the image's offset as their epoch, as
Kafka's ApiVersionsResponse (a client turns transaction.version 2 on from them, KIP-890). Below
v4 a supported range is never said to start at 0: clients before KAFKA-17011 refuse that, so it
starts at 1, and a feature supported only at 0 is left out (Kafka's alterFeatureLevel0).

A handler is called with the request's ``RequestContext`` (protocol/context.py): its header
and its connection's session (listener, security protocol, client address, principal), as
Kafka's handlers get a RequestContext. The connection's task sets ``current_session``
(protocol/net.py); ``Dispatcher.handle`` puts the session's listener on the header as well, so a
broker answers each client with the endpoints of that listener.

Until a SASL listener's connection has authenticated (its session's ``authenticated``), it may
send ApiVersions, SaslHandshake and SaslAuthenticate only, each of at most
``unauthenticated_max_bytes`` (sasl.server.max.receive.size); anything else closes it with one
INFO line (Kafka's IllegalSaslStateException, InvalidReceiveException). Past its session's
``reauth_deadline_ms`` (KIP-368, on the event loop's clock) a connection may send nothing but
the SASL handshake that re-authenticates it: anything else closes it. After a SaslHandshake v0
the client sends its SASL tokens bare, each a size-prefixed frame with no request header: while
the session's exchange says so (``raw_tokens``), each frame goes to the SaslHandshake Api's
``raw`` handler and its answer goes back size-prefixed, as Kafka's SaslServerAuthenticator does.
"""
from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from time import perf_counter
from typing import Any

from protocol import messages
from protocol.context import RequestContext, current_session
from protocol.errors import Error
from protocol.headers import (
    API_VERSIONS_KEY,
    RequestHeader,
    decode_request,
    encode_response,
    read_request_header,
)
from protocol.types import ProtocolError, Reader

log = logging.getLogger(__name__)

HandlerFn = Callable[[RequestContext, Any], Awaitable[Any]]
# A bare SASL token of an unauthenticated session -> the answer token (None: close).
RawTokenFn = Callable[[Any, bytes], Awaitable["bytes | None"]]


class Deferred:
    """An answer that comes later: ``response`` is an awaitable of the response body (from a
    handler) or, from ``Dispatcher.handle``, a future of the encoded parts (None: close)."""

    __slots__ = ("response",)

    def __init__(self, response: Awaitable[Any]):
        self.response = response


async def resolve(response: Any) -> Any:
    """A handler's answer, waiting for it if it is deferred (for callers of ``Api.fn``)."""
    return await response.response if isinstance(response, Deferred) else response


@dataclass(frozen=True)
class Api:
    key: int
    min_version: int
    max_version: int
    fn: HandlerFn
    raw: RawTokenFn | None = None  # SaslHandshake's: the bare tokens that follow its v0


# What a connection may send before it has authenticated, and after its session expired.
SASL_HANDSHAKE_KEY, SASL_AUTHENTICATE_KEY = 17, 36
UNAUTHENTICATED_API_KEYS = frozenset({API_VERSIONS_KEY, SASL_HANDSHAKE_KEY, SASL_AUTHENTICATE_KEY})
REAUTHENTICATION_API_KEYS = frozenset({SASL_HANDSHAKE_KEY, SASL_AUTHENTICATE_KEY})
SASL_SERVER_MAX_RECEIVE_SIZE = 524288  # Kafka's sasl.server.max.receive.size default

# The first ApiVersions version whose clients accept a supported feature range from 0.
FEATURE_LEVEL_0_VERSION = 4

# A process's finalized features: (epoch, {name: level}) from its metadata image.
FinalizedFeatures = Callable[[], "tuple[int, dict[str, int]]"]


class Dispatcher:
    def __init__(self, apis: list[Api], supported_features: list | None = None,
                 finalized_features: FinalizedFeatures | None = None,
                 unauthenticated_max_bytes: int = SASL_SERVER_MAX_RECEIVE_SIZE, metrics: Any = None):
        """``supported_features``: ApiVersionsResponse.SupportedFeatureKey entries (v3+), e.g. a
        controller's kraft.version range (KIP-853), a broker's transaction.version range.
        ``finalized_features``: called at each ApiVersions for the finalized levels and their
        epoch (a broker's metadata image); None: none are said (epoch -1). ``metrics``: a
        protocol.metrics.RequestMetrics, told of each request decoded and of its answer's time."""
        self.apis = {api.key: api for api in apis}
        self.supported_features = list(supported_features or [])
        self.finalized_features = finalized_features
        self.unauthenticated_max_bytes = unauthenticated_max_bytes
        self.metrics = metrics
        for api in apis:
            schema = messages.REQUESTS[api.key].message.versions
            if api.min_version < schema.lo or api.max_version > schema.hi:
                raise ValueError(f"{messages.API_NAMES[api.key]} {api.min_version}-{api.max_version} "
                                 f"outside its schema {schema}")
        api_versions = messages.REQUESTS[API_VERSIONS_KEY].message.versions
        self.apis[API_VERSIONS_KEY] = Api(API_VERSIONS_KEY, api_versions.lo, min(api_versions.hi, 4),
                                          self._api_versions)

    def api_versions_body(self, error: Error = Error.NONE, version: int = FEATURE_LEVEL_0_VERSION):
        """The ApiVersions answer to a request of ``version`` (its features: see the module doc)."""
        R = messages.ApiVersionsResponse
        supported = list(self.supported_features)
        if version < FEATURE_LEVEL_0_VERSION:
            supported = [R.SupportedFeatureKey(name=f.name, min_version=max(f.min_version, 1),
                                               max_version=f.max_version)
                         for f in supported if f.max_version >= 1]
        body = R(error_code=error, api_keys=[
            R.ApiVersion(api_key=a.key, min_version=a.min_version, max_version=a.max_version)
            for a in sorted(self.apis.values(), key=lambda a: a.key)
        ], supported_features=supported)
        if self.finalized_features is not None:
            epoch, levels = self.finalized_features()
            body.finalized_features_epoch = epoch
            body.finalized_features = [
                R.FinalizedFeatureKey(name=name, min_version_level=level, max_version_level=level)
                for name, level in sorted(levels.items()) if level >= 1]
        return body

    async def _api_versions(self, ctx: RequestContext, request) -> Any:
        return self.api_versions_body(version=ctx.api_version)

    async def handle(self, frame: memoryview) -> list | Deferred | None:
        start = perf_counter()
        r = Reader(frame)
        session = current_session.get()
        if not session.authenticated and getattr(session.sasl_exchange, "raw_tokens", False):
            return await self._raw_sasl_token(session, frame)
        try:
            header = read_request_header(r, session.listener_name)
        except ProtocolError as e:
            log.info("malformed request header: %s", e)
            return None
        if not session.authenticated:
            if header.api_key not in UNAUTHENTICATED_API_KEYS:
                log.info("closing connection from %s on %s: %s request before SASL authentication",
                         session.client_address, session.listener_name,
                         messages.API_NAMES.get(header.api_key, header.api_key))
                return None
            if len(frame) > self.unauthenticated_max_bytes:
                log.info("closing connection from %s on %s: a %d-byte request before SASL authentication "
                         "(sasl.server.max.receive.size %d)", session.client_address, session.listener_name,
                         len(frame), self.unauthenticated_max_bytes)
                return None
        elif (session.reauth_deadline_ms is not None and header.api_key not in REAUTHENTICATION_API_KEYS
              and asyncio.get_running_loop().time() * 1000 > session.reauth_deadline_ms):
            log.info("closing connection from %s on %s: its SASL session expired "
                     "(connections.max.reauth.ms) without re-authentication", session.client_address,
                     session.listener_name)
            return None
        api = self.apis.get(header.api_key)
        if api is None:
            log.info("unknown or unserved API key %d from %r", header.api_key, header.client_id)
            return None
        version = header.api_version
        if not api.min_version <= version <= api.max_version:
            if header.api_key == API_VERSIONS_KEY:
                # KIP-511: answer v0 so the client learns our range and retries.
                return encode_response(API_VERSIONS_KEY, 0, header.correlation_id,
                                       self.api_versions_body(Error.UNSUPPORTED_VERSION))
            return self._unsupported(header)
        try:
            request = decode_request(header.api_key, version, r)
        except ProtocolError as e:
            log.info("malformed %s v%d request from %r: %s",
                     messages.API_NAMES[header.api_key], version, header.client_id, e)
            return None
        except Exception:  # a decoder bug (tests/fuzz holds them to ProtocolError): still one close
            log.exception("%s v%d decoder failed; closing the connection",
                          messages.API_NAMES[header.api_key], version)
            return None
        metrics = self.metrics
        if metrics is not None:
            metrics.received(header.api_key, version)
        try:
            response = await api.fn(RequestContext(header, session), request)
        except Exception:
            log.exception("%s v%d handler failed; closing the connection",
                          messages.API_NAMES[header.api_key], version)
            return None
        if isinstance(response, Deferred):
            pending = response.response
            loop = asyncio.get_running_loop()
            if isinstance(pending, asyncio.Future):  # answered by a callback: no task
                parts = loop.create_future()
                pending.add_done_callback(functools.partial(self._finished, header, parts, start))
                return Deferred(parts)
            return Deferred(loop.create_task(self._finish(header, pending, start)))
        if metrics is not None:
            metrics.answered(header.api_key, (perf_counter() - start) * 1000)
        if response is None:
            return []
        return _encode(header, response)

    async def _raw_sasl_token(self, session, frame: memoryview) -> list | None:
        api = self.apis.get(SASL_HANDSHAKE_KEY)
        if api is None or api.raw is None:
            return None
        if len(frame) > self.unauthenticated_max_bytes:
            log.info("closing connection from %s on %s: a %d-byte SASL token "
                     "(sasl.server.max.receive.size %d)", session.client_address, session.listener_name,
                     len(frame), self.unauthenticated_max_bytes)
            return None
        try:
            answer = await api.raw(session, bytes(frame))
        except Exception:
            log.exception("the SASL token handler failed; closing the connection")
            return None
        return None if answer is None else [len(answer).to_bytes(4, "big") + answer]

    async def _finish(self, header: RequestHeader, pending: Awaitable[Any], start: float) -> list | None:
        try:
            response = await pending
        except Exception:
            log.exception("%s v%d handler failed; closing the connection",
                          messages.API_NAMES[header.api_key], header.api_version)
            return None
        if self.metrics is not None:
            self.metrics.answered(header.api_key, (perf_counter() - start) * 1000)
        if response is None:
            return []
        return _encode(header, response)

    def _finished(self, header: RequestHeader, parts: asyncio.Future, start: float,
                  body: asyncio.Future) -> None:
        """``_finish`` for a handler's future: ``parts`` gets the encoded answer (None: close)."""
        if parts.done():  # the connection closed meanwhile
            return
        if body.cancelled():
            parts.set_result(None)
            return
        error = body.exception()
        if error is not None:
            log.error("%s v%d handler failed; closing the connection",
                      messages.API_NAMES[header.api_key], header.api_version, exc_info=error)
            parts.set_result(None)
            return
        response = body.result()
        if self.metrics is not None:
            self.metrics.answered(header.api_key, (perf_counter() - start) * 1000)
        parts.set_result([] if response is None else _encode(header, response))

    def _unsupported(self, header: RequestHeader) -> list | None:
        codec = messages.RESPONSES[header.api_key]
        if header.api_version not in codec.message.versions:
            return None
        body = codec.cls()
        if "error_code" not in codec.cls._fields:
            return None
        body.error_code = Error.UNSUPPORTED_VERSION
        return _encode(header, body)


def _encode(header: RequestHeader, response: Any) -> list | None:
    """The response frame, or None (close the connection) when it cannot be encoded."""
    try:
        return encode_response(header.api_key, header.api_version, header.correlation_id, response)
    except Exception as e:  # ValueError, struct.error, OverflowError, TypeError: all one line
        log.warning("cannot encode the %s v%d response to %r, closing the connection: %s: %s",
                    messages.API_NAMES[header.api_key], header.api_version, header.client_id,
                    type(e).__name__, e)
        return None
