"""Client quotas, as Kafka's ClientQuotaManager: which quota a request's user and client id fall
under, the rate it has used, and how long to throttle it (KIP-13, KIP-55, KIP-124, KIP-546).

Quotas are stored per entity (``image.client_quotas``): the entity as sorted (entity type,
name) pairs, a name of None being that type's default (``user`` and ``client-id``; KIP-546's
``ip`` is kept in the image but not enforced here), and per quota key a value:

============================  ===========================================================
``producer_byte_rate``        bytes per second a Produce may append
``consumer_byte_rate``        bytes per second a Fetch may return
``request_percentage``        percent of one request thread's time per second (KIP-124)
============================  ===========================================================

Resolution (KIP-55): the first entity of this list that has the key sets the bound, and also
which clients share one measured rate (the *metric tags*: the user and client id, either left
empty when the entity does not name it; a default entity still measures each user or client
apart):

  1. user=u, client-id=c           tags (u, c)
  2. user=u, client-id=<default>   tags (u, c)
  3. user=u                        tags (u, "")
  4. user=<default>, client-id=c   tags (u, c)
  5. user=<default>, client-id=<default>  tags (u, c)
  6. user=<default>                tags (u, "")
  7. client-id=c                   tags ("", c)
  8. client-id=<default>           tags ("", c)

The rate is Kafka's Rate over a SampledStat: ``quota.window.num`` samples of
``quota.window.size.seconds`` each; a sample whose last event is older than the whole window
is reset, and the rate divides the sum of the samples by the time since the oldest one began,
counted as at least ``samples - 1`` full windows (so a new client's first bytes are not taken
for a huge rate). After recording, a rate above the bound is throttled by the delay that would
bring it back to the bound if nothing more came (QuotaUtils.throttleTime):
``(rate - bound) / bound * window`` ms; the request-time quota caps it at one window.

Time comes in as arguments (ms); nothing here reads a clock.
"""
from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass

from protocol import messages as M
from protocol.errors import Error

PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE, REQUEST_PERCENTAGE = (
    "producer_byte_rate", "consumer_byte_rate", "request_percentage")
QUOTA_KEYS = frozenset({PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE, REQUEST_PERCENTAGE})
USER, CLIENT_ID, IP = "user", "client-id", "ip"

Entity = tuple[tuple[str, "str | None"], ...]
QuotaTable = Mapping[Entity, Mapping[str, float]]


def entity(**names: str | None) -> Entity:
    """The image's key for an entity: ``entity(user="alice", client_id=None)`` is alice with
    the default client id."""
    return tuple(sorted((kind.replace("_", "-"), name) for kind, name in names.items()))


class _Sample:
    __slots__ = ("start_ms", "last_event_ms", "value", "events")

    def __init__(self, now_ms: int):
        self.reset(now_ms)

    def reset(self, now_ms: int) -> None:
        self.start_ms = now_ms
        self.last_event_ms = now_ms
        self.value = 0.0
        self.events = 0


class Rate:
    """Kafka's Rate over a windowed sum (the module doc): ``record`` values at times,
    ``measure`` per second."""

    def __init__(self, samples: int = 11, window_ms: int = 1000):
        if samples < 1 or window_ms < 1:
            raise ValueError("a rate needs at least one sample of at least 1 ms")
        self.samples = samples
        self.window_ms = window_ms
        self._samples: list[_Sample] = []
        self._current = 0
        self.last_event_ms: int | None = None

    def record(self, value: float, now_ms: int) -> None:
        sample = self._current_sample(now_ms)
        if now_ms - sample.start_ms >= self.window_ms:
            # One sample more than configured: the one overlapping the window's start.
            self._current = (self._current + 1) % (self.samples + 1)
            if self._current >= len(self._samples):
                sample = _Sample(now_ms)
                self._samples.append(sample)
            else:
                sample = self._samples[self._current]
                sample.reset(now_ms)
        sample.value += value
        sample.events += 1
        sample.last_event_ms = now_ms
        self.last_event_ms = now_ms

    def _current_sample(self, now_ms: int) -> _Sample:
        if not self._samples:
            self._samples.append(_Sample(now_ms))
        return self._samples[self._current]

    def _purge(self, now_ms: int) -> None:
        expire = self.samples * self.window_ms
        for sample in self._samples:
            if now_ms - sample.last_event_ms >= expire:
                sample.reset(now_ms)

    def window_size_ms(self, now_ms: int) -> int:
        """The time the rate is measured over (Rate.windowSize)."""
        self._purge(now_ms)
        oldest = min(s.start_ms for s in self._samples) if self._samples else now_ms
        elapsed = now_ms - oldest
        full = elapsed // self.window_ms
        if full < self.samples - 1:
            elapsed += (self.samples - 1 - full) * self.window_ms
        return max(elapsed, 1)

    def measure(self, now_ms: int) -> float:
        """The rate per second."""
        self._purge(now_ms)
        total = sum(s.value for s in self._samples)
        return total / (self.window_size_ms(now_ms) / 1000.0)


def throttle_time_ms(rate: float, bound: float, window_ms: int) -> int:
    """The delay that brings a rate over its bound back to it if nothing more is recorded
    (QuotaUtils.throttleTime: O * W / (W + X) = T, so X = (O - T) / T * W), rounded."""
    return int(round((rate - bound) / bound * window_ms))


@dataclass(frozen=True)
class Resolved:
    """Which quota a user and client id fall under: the metric tags of the rate they share
    (user, client id; "" for one the entity does not name) and the bound (None: no quota)."""
    user_tag: str
    client_tag: str
    bound: float | None


def resolve(quotas: QuotaTable, key: str, user: str, client_id: str) -> Resolved:
    """KIP-55's precedence (the module doc) for one quota key."""
    order = (
        (entity(user=user, client_id=client_id), user, client_id),
        (entity(user=user, client_id=None), user, client_id),
        (entity(user=user), user, ""),
        (entity(user=None, client_id=client_id), user, client_id),
        (entity(user=None, client_id=None), user, client_id),
        (entity(user=None), user, ""),
        (entity(client_id=client_id), "", client_id),
        (entity(client_id=None), "", client_id),
    )
    for candidate, user_tag, client_tag in order:
        values = quotas.get(candidate)
        if values is not None and key in values:
            return Resolved(user_tag, client_tag, float(values[key]))
    return Resolved("", client_id, None)


class ClientQuotaManager:
    """One quota key's rates and throttling (Kafka's ClientQuotaManager, or with
    ``max_throttle_ms`` its ClientRequestQuotaManager)."""

    def __init__(self, key: str, samples: int = 11, window_seconds: int = 1,
                 max_throttle_ms: int | None = None, cache: bool = False):
        """``cache``: remember each client's resolution until ``forget_resolutions`` (a caller
        that knows when its quota table changes, as the broker does with its image)."""
        if key not in QUOTA_KEYS:
            raise ValueError(f"unknown quota key {key!r}")
        self.key = key
        self.samples = samples
        self.window_ms = window_seconds * 1000
        self.max_throttle_ms = max_throttle_ms
        self._rates: dict[tuple[str, str], Rate] = {}
        self._cache: dict[tuple[str, str], Resolved] | None = {} if cache else None

    def forget_resolutions(self) -> None:
        if self._cache is not None:
            self._cache.clear()

    def _resolve(self, quotas: QuotaTable, user: str, client_id: str) -> Resolved:
        cache = self._cache
        if cache is None:
            return resolve(quotas, self.key, user, client_id)
        resolved = cache.get((user, client_id))
        if resolved is None:
            resolved = cache[(user, client_id)] = resolve(quotas, self.key, user, client_id)
        return resolved

    @classmethod
    def for_requests(cls, samples: int = 11, window_seconds: int = 1,
                     cache: bool = False) -> ClientQuotaManager:
        """The request_percentage quota: throttled at most one window."""
        return cls(REQUEST_PERCENTAGE, samples, window_seconds, max_throttle_ms=window_seconds * 1000,
                   cache=cache)

    def _rate(self, resolved: Resolved) -> Rate:
        tags = (resolved.user_tag, resolved.client_tag)
        rate = self._rates.get(tags)
        if rate is None:
            rate = self._rates[tags] = Rate(self.samples, self.window_ms)
        return rate

    def record_and_get_throttle_time_ms(self, quotas: QuotaTable, user: str, client_id: str, value: float,
                                        now_ms: int) -> int:
        """Records ``value`` (bytes, or request-thread percent) for the client and answers how
        long to throttle it: 0 within its quota or without one."""
        resolved = self._resolve(quotas, user, client_id)
        if resolved.bound is None:
            return 0
        rate = self._rate(resolved)
        rate.record(value, now_ms)
        measured = rate.measure(now_ms)
        if measured <= resolved.bound:
            return 0
        throttle = throttle_time_ms(measured, resolved.bound, rate.window_size_ms(now_ms))
        if self.max_throttle_ms is not None:
            throttle = min(throttle, self.max_throttle_ms)
        return max(throttle, 0)

    def unrecord(self, quotas: QuotaTable, user: str, client_id: str, value: float, now_ms: int) -> None:
        """Takes back a recorded value (a throttled Fetch returns nothing, as Kafka's)."""
        resolved = self._resolve(quotas, user, client_id)
        if resolved.bound is not None:
            self._rate(resolved).record(-value, now_ms)

    def max_value_in_window(self, quotas: QuotaTable, user: str, client_id: str) -> float | None:
        """The most that can be recorded at once without a certain throttle (a Fetch's byte
        cap): bound * (samples - 1) * window seconds; None without a quota."""
        resolved = self._resolve(quotas, user, client_id)
        if resolved.bound is None:
            return None
        return resolved.bound * (self.samples - 1) * self.window_ms / 1000.0

    def expire(self, now_ms: int, inactive_ms: int = 3_600_000) -> None:
        """Forgets the rates of clients idle this long (Kafka's inactive sensor expiry, 1 h)."""
        for tags in [t for t, r in self._rates.items()
                     if r.last_event_ms is not None and now_ms - r.last_event_ms >= inactive_ms]:
            del self._rates[tags]


CONNECTION_CREATION_RATE = "connection_creation_rate"
IP_CONNECTION_RATE_DEFAULT = 2**31 - 1  # Kafka's QuotaConfig.IP_CONNECTION_RATE_DEFAULT: no quota
MAX_IDLE_CHECKED_RATES = 1024  # ip rates kept before a new ip's looks for idle ones to forget


class IpConnectionQuotas:
    """KIP-612's connection rate quotas of ip entities, as Kafka's ConnectionQuotas enforces
    them on accept: an ip's own ``connection_creation_rate``, else the default ip entity's,
    else none. Each ip with a quota has its Rate over the client quotas' window (quota.window.num
    samples of quota.window.size.seconds); a new connection is recorded, and when the rate is
    then over the quota it is taken back and the connection is throttled: held for the delay
    that brings the rate back to the quota (at most one window, Kafka's maxThrottleTimeMs) and
    then closed (protocol.limits, protocol.net). A quota of 0 throttles every connection."""

    def __init__(self, samples: int = 11, window_seconds: int = 1):
        self.samples = samples
        self.window_ms = window_seconds * 1000
        self.per_ip: dict[str, float] = {}
        self.default: float = IP_CONNECTION_RATE_DEFAULT
        self._rates: dict[str, Rate] = {}

    def update(self, quotas: QuotaTable) -> None:
        """The ip entities' quotas from the image's client quotas (Kafka's
        updateIpConnectionRateQuota for each); the rates measured so far are kept."""
        per_ip: dict[str, float] = {}
        default: float = IP_CONNECTION_RATE_DEFAULT
        for found, values in quotas.items():
            if len(found) != 1 or found[0][0] != IP or CONNECTION_CREATION_RATE not in values:
                continue
            name = found[0][1]
            if name is None:
                default = values[CONNECTION_CREATION_RATE]
            else:
                try:  # as a peer's address reads (Kafka keys them by InetAddress)
                    name = str(ipaddress.ip_address(name))
                except ValueError:
                    pass
                per_ip[name] = values[CONNECTION_CREATION_RATE]
        self.per_ip, self.default = per_ip, default

    def rate_for(self, ip: str) -> float:
        """Kafka's connectionRateForIp."""
        return self.per_ip.get(ip, self.default)

    def throttle_ms(self, ip: str, now_ms: int) -> int:
        """Records a connection from ``ip`` and answers 0, or, over its quota, takes it back and
        answers how long to hold the connection before closing it."""
        bound = self.rate_for(ip)
        if bound >= IP_CONNECTION_RATE_DEFAULT:
            return 0
        rate = self._rates.get(ip)
        if rate is None:
            if len(self._rates) >= MAX_IDLE_CHECKED_RATES:
                self.expire(now_ms)
            rate = self._rates[ip] = Rate(self.samples, self.window_ms)
        rate.record(1.0, now_ms)
        measured = rate.measure(now_ms)
        if measured <= bound:
            return 0
        if bound <= 0:
            throttle = self.window_ms
        else:
            throttle = min(throttle_time_ms(measured, bound, rate.window_size_ms(now_ms)), self.window_ms)
        if throttle <= 0:
            return 0  # over by less than a millisecond's worth: accepted, as Kafka's
        rate.record(-1.0, now_ms)
        return throttle

    def expire(self, now_ms: int, inactive_ms: int = 3_600_000) -> None:
        """Forgets the rates of ips idle this long (Kafka's ip sensors expire after an hour)."""
        for ip in [ip for ip, r in self._rates.items()
                   if r.last_event_ms is not None and now_ms - r.last_event_ms >= inactive_ms]:
            del self._rates[ip]


MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2


class InvalidFilter(Exception):
    """A DescribeClientQuotas filter Kafka refuses: ``code`` and the message."""

    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code


def parse_filter(components) -> tuple[dict[str, str | None], set[str]]:
    """A DescribeClientQuotas filter's components as Kafka's ClientQuotasImage.describe reads
    them: (the types matched exactly, a name or None for the default entity; the types any
    named entity matches). Raises InvalidFilter (INVALID_REQUEST, or UNSUPPORTED_VERSION for
    an entity type it does not know)."""
    exact: dict[str, str | None] = {}
    typed: set[str] = set()
    for c in components:
        kind = c.entity_type
        if kind == "":
            raise InvalidFilter(Error.INVALID_REQUEST, "Invalid empty entity type.")
        if kind in exact or kind in typed:
            raise InvalidFilter(Error.INVALID_REQUEST,
                                f"Entity type {kind} cannot appear more than once in the filter.")
        if kind not in (IP, USER, CLIENT_ID):
            raise InvalidFilter(Error.UNSUPPORTED_VERSION, f"Unsupported entity type {kind}")
        if c.match_type == MATCH_EXACT:
            if c.match is None:
                raise InvalidFilter(Error.INVALID_REQUEST,
                                    "Request specified MATCH_TYPE_EXACT, but set match string to null.")
            exact[kind] = c.match
        elif c.match_type == MATCH_DEFAULT:
            if c.match is not None:
                raise InvalidFilter(Error.INVALID_REQUEST, "Request specified MATCH_TYPE_DEFAULT, "
                                    "but also specified a match string.")
            exact[kind] = None
        elif c.match_type == MATCH_SPECIFIED:
            if c.match is not None:
                raise InvalidFilter(Error.INVALID_REQUEST, "Request specified MATCH_TYPE_SPECIFIED, "
                                    "but also specified a match string.")
            typed.add(kind)
        else:
            raise InvalidFilter(Error.INVALID_REQUEST, f"Unknown match type {c.match_type}")
    if (IP in exact or IP in typed) and ({USER, CLIENT_ID} & (set(exact) | typed)):
        raise InvalidFilter(Error.INVALID_REQUEST, "Invalid entity filter component combination. IP filter "
                            "component should not be used with user or clientId filter component.")
    return exact, typed


def filter_matches(found: Entity, exact: Mapping[str, str | None], typed: set[str], strict: bool) -> bool:
    """ClientQuotasImage.matches: every exact component names the entity's name for its type
    (None: the default), every typed one is a type the entity has (default or not, as
    Kafka's); strict: the entity has no other type."""
    names = dict(found)
    if strict and len(names) != len(exact) + len(typed):
        return False
    for kind, name in exact.items():
        if kind not in names or names[kind] != name:
            return False
    return all(kind in names for kind in typed)


def describe_client_quotas(quotas: QuotaTable, req):
    """DescribeClientQuotas from an image's ``client_quotas`` (KRaftMetadataCache's answer)."""
    R = M.DescribeClientQuotasResponse
    try:
        exact, typed = parse_filter(req.components)
    except InvalidFilter as e:
        return R(error_code=e.code, error_message=str(e), entries=None)
    entries = []
    for found, values in sorted(quotas.items(), key=lambda e: [(k, n is not None, n or "") for k, n in e[0]]):
        if filter_matches(found, exact, typed, req.strict):
            entries.append(R.EntryData(
                entity=[R.EntryData.EntityData(entity_type=kind, entity_name=name) for kind, name in found],
                values=[R.EntryData.ValueData(key=key, value=float(value))
                        for key, value in sorted(values.items())]))
    return R(error_code=Error.NONE, error_message=None, entries=entries)
