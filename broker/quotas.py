"""The broker's client quotas: Kafka's ClientQuotaManager for produce and fetch bytes and its
ClientRequestQuotaManager for request time (KIP-13, KIP-55, KIP-124), enforced as KIP-219 does.

The quotas are the broker's metadata image's ``client_quotas`` (AlterClientQuotas writes them);
the rates and throttle times are security/quotas.py's, over ``quota.window.num`` samples of
``quota.window.size.seconds``, on the event loop's clock. ``BrokerQuotas.wrap`` puts them
around the broker's handlers:

- Produce: the request's record bytes are recorded for (the principal's name, the client id)
  against ``producer_byte_rate``; acks=0 included (it gets no answer, only the mute).
- Fetch, a consumer's only (a replica's never): the response's record bytes against
  ``consumer_byte_rate``; the fetch asks for no more than the quota allows in one window
  (Kafka's getMaxValueInQuotaWindow); a fetch that is throttled answers no records (its bytes
  are taken back, as Kafka's unrecord) with the throttle time, the session id kept only for an
  incremental session, as Kafka's FetchContext.getThrottledResponse.
- Every request but ApiVersions, the SASL exchange, WriteTxnMarkers and a replica's fetch:
  the time its handler's own code ran on the loop (not the time it waited), as a percentage of
  a second, against ``request_percentage`` (at most one window of throttle).

The answer carries the larger throttle time in ``throttle_time_ms`` and goes out at once; the
connection's next request is not handled until that time has passed (KIP-219's muted channel:
requests queue, and reading stops once enough wait). A client over its quota therefore slows
down whether or not it honours throttle_time_ms itself, and no other connection waits. A user
quota applies to the principal's name (``ANONYMOUS`` without authentication).

With no quota of a kind in the image, nothing of that kind is measured.
"""
from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import time
from collections.abc import Callable, Generator
from typing import TYPE_CHECKING, Any

from protocol.context import RequestContext
from protocol.dispatch import Api, Deferred
from security.quotas import CONSUMER_BYTE_RATE, PRODUCER_BYTE_RATE, REQUEST_PERCENTAGE, ClientQuotaManager

if TYPE_CHECKING:
    from metadata.image import MetadataImage

PRODUCE_KEY, FETCH_KEY = 0, 1
# Not measured against request_percentage (Kafka exempts the cluster's own and the handshake's).
REQUEST_EXEMPT_KEYS = frozenset({17, 18, 27, 36})
NANOS_TO_PERCENT = 100.0 / 1e9  # Kafka's NanosToPercentagePerSecond

# The loop time (s) until which this connection's next request waits: set in the connection's
# own task (each connection's task has its own context), read at its next request.
_muted_until: contextvars.ContextVar[float] = contextvars.ContextVar("quota_muted_until", default=0.0)


class _Timed:
    """Awaits a coroutine, adding up the time its own code runs (``ns``), not the time it waits."""

    __slots__ = ("coro", "ns")

    def __init__(self, coro):
        self.coro = coro
        self.ns = 0

    def __await__(self) -> Generator[Any, Any, Any]:
        coro = self.coro
        send: Any = None
        error: BaseException | None = None
        while True:
            start = time.perf_counter_ns()
            try:
                yielded = coro.send(send) if error is None else coro.throw(error)
            except StopIteration as done:
                self.ns += time.perf_counter_ns() - start
                return done.value
            except BaseException:
                self.ns += time.perf_counter_ns() - start
                raise
            self.ns += time.perf_counter_ns() - start
            try:
                send, error = (yield yielded), None
            except BaseException as e:  # a cancellation or error thrown into the await
                send, error = None, e


def _records_size(records) -> int:
    if records is None:
        return 0
    size = getattr(records, "size", None)
    if isinstance(size, int):
        return size
    if isinstance(records, list):
        return sum(_records_size(r) for r in records)
    return len(records)


def _consumer_fetch(ctx: RequestContext, req) -> bool:
    replica_id = req.replica_state.replica_id if ctx.api_version >= 15 else req.replica_id
    return replica_id < 0


def _loop_ms() -> float:
    return asyncio.get_running_loop().time() * 1000.0


class BrokerQuotas:
    def __init__(self, image: Callable[[], MetadataImage], samples: int = 11, window_seconds: int = 1,
                 now_ms: Callable[[], float] = _loop_ms):
        self.image = image
        self.now_ms = now_ms
        self.produce = ClientQuotaManager(PRODUCER_BYTE_RATE, samples, window_seconds, cache=True)
        self.fetch = ClientQuotaManager(CONSUMER_BYTE_RATE, samples, window_seconds, cache=True)
        self.request = ClientQuotaManager.for_requests(samples, window_seconds, cache=True)
        self._seen: tuple[int, int] | None = None
        self._kinds: frozenset[str] = frozenset()
        self._last_expiry_ms = 0.0

    @classmethod
    def from_config(cls, config, image: Callable[[], MetadataImage]) -> BrokerQuotas:
        return cls(image, config["quota.window.num"], config["quota.window.size.seconds"])

    def kinds(self) -> frozenset[str]:
        """The quota keys some entity of the image sets (looked at again when the image changes)."""
        image = self.image()
        seen = (id(image), image.last_offset)
        if seen != self._seen:
            self._seen = seen
            self._kinds = frozenset(key for values in image.client_quotas.values() for key in values)
            for manager in (self.produce, self.fetch, self.request):
                manager.forget_resolutions()
        return self._kinds

    # ---- wrapping the handlers ---------------------------------------------------------------
    def wrap(self, apis: list[Api]) -> list[Api]:
        out = []
        for api in apis:
            if api.key == PRODUCE_KEY:
                fn = self._produce(api.fn)
            elif api.key == FETCH_KEY:
                fn = self._fetch(api.fn)
            elif api.key in REQUEST_EXEMPT_KEYS:
                fn = self._exempt(api.fn)
            else:
                fn = self._other(api.fn)
            out.append(dataclasses.replace(api, fn=fn))
        return out

    @staticmethod
    async def _wait_muted() -> None:
        until = _muted_until.get()
        if until:
            delay = until - asyncio.get_running_loop().time()
            _muted_until.set(0.0)
            if delay > 0:
                await asyncio.sleep(delay)

    def _mute(self, throttle_ms: int) -> None:
        if throttle_ms > 0:
            _muted_until.set(asyncio.get_running_loop().time() + throttle_ms / 1000.0)

    @staticmethod
    def _who(ctx: RequestContext) -> tuple[str, str]:
        return ctx.principal.name, ctx.client_id or ""

    def _expire(self, now_ms: float) -> None:
        if now_ms - self._last_expiry_ms >= 60_000:
            self._last_expiry_ms = now_ms
            for manager in (self.produce, self.fetch, self.request):
                manager.expire(int(now_ms))

    async def _run(self, fn, ctx: RequestContext, req, kinds: frozenset[str]) -> tuple[Any, int]:
        """The handler's answer and its request-time throttle (0 without a request_percentage)."""
        pending = fn(ctx, req)
        if REQUEST_PERCENTAGE not in kinds or not hasattr(pending, "send"):
            return await pending, 0
        timed = _Timed(pending)
        response = await timed
        user, client = self._who(ctx)
        throttle = self.request.record_and_get_throttle_time_ms(
            self.image().client_quotas, user, client, timed.ns * NANOS_TO_PERCENT, int(self.now_ms()))
        return response, throttle

    @staticmethod
    def _answer(response: Any, throttle_ms: int) -> Any:
        """``response`` with ``throttle_time_ms`` set (a deferred one once it is ready)."""
        if throttle_ms <= 0 or response is None:
            return response
        if isinstance(response, Deferred):
            pending = response.response

            async def throttled() -> Any:
                body = await pending
                if body is not None and "throttle_time_ms" in type(body)._fields:
                    body.throttle_time_ms = max(body.throttle_time_ms, throttle_ms)
                return body
            return Deferred(throttled())
        if "throttle_time_ms" in type(response)._fields:
            response.throttle_time_ms = max(response.throttle_time_ms, throttle_ms)
        return response

    def _exempt(self, fn):
        async def exempt(ctx: RequestContext, req) -> Any:
            await self._wait_muted()
            return await fn(ctx, req)
        return exempt

    def _other(self, fn):
        async def other(ctx: RequestContext, req) -> Any:
            await self._wait_muted()
            kinds = self.kinds()
            if REQUEST_PERCENTAGE not in kinds:
                return await fn(ctx, req)
            response, throttle = await self._run(fn, ctx, req, kinds)
            self._mute(throttle)
            return self._answer(response, throttle)
        return other

    def _produce(self, fn):
        async def produce(ctx: RequestContext, req) -> Any:
            await self._wait_muted()
            kinds = self.kinds()
            if not kinds:
                return await fn(ctx, req)
            throttle = 0
            if PRODUCER_BYTE_RATE in kinds:
                size = sum(_records_size(p.records) for t in req.topic_data for p in t.partition_data)
                user, client = self._who(ctx)
                now = self.now_ms()
                self._expire(now)
                throttle = self.produce.record_and_get_throttle_time_ms(
                    self.image().client_quotas, user, client, size, int(now))
            response, request_throttle = await self._run(fn, ctx, req, kinds)
            throttle = max(throttle, request_throttle)
            self._mute(throttle)
            return self._answer(response, throttle)
        return produce

    def _fetch(self, fn):
        async def fetch(ctx: RequestContext, req) -> Any:
            await self._wait_muted()
            kinds = self.kinds()
            if not kinds or not _consumer_fetch(ctx, req):
                return await fn(ctx, req)
            user, client = self._who(ctx)
            if CONSUMER_BYTE_RATE in kinds:
                most = self.fetch.max_value_in_window(self.image().client_quotas, user, client)
                if most is not None:
                    most = max(int(most), 1)
                    req.max_bytes = min(req.max_bytes, most) if req.max_bytes > 0 else most
            response, request_throttle = await self._run(fn, ctx, req, kinds)
            throttle = 0
            answered = response is not None and not isinstance(response, Deferred)
            if CONSUMER_BYTE_RATE in kinds and answered:
                size = sum(_records_size(p.records) for t in response.responses for p in t.partitions)
                now = self.now_ms()
                self._expire(now)
                quotas = self.image().client_quotas
                throttle = self.fetch.record_and_get_throttle_time_ms(quotas, user, client, size, int(now))
                if throttle > 0 and throttle >= request_throttle:
                    # A throttled fetch's bytes are taken back: it answers none (below).
                    self.fetch.unrecord(quotas, user, client, size, int(now))
            if answered and (throttle > 0 or request_throttle > 0):
                # Kafka's FetchContext.getThrottledResponse: no partitions; the session id of
                # an incremental session only.
                response.responses = []
                response.node_endpoints = []
                if req.session_epoch <= 0:
                    response.session_id = 0
            throttle = max(throttle, request_throttle)
            self._mute(throttle)
            return self._answer(response, throttle)
        return fetch
