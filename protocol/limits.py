"""A listener's limits under overload: Kafka's socket server quotas, as protocol.net.Server applies them.

| property                         | what happens beyond it                                    |
|----------------------------------|-----------------------------------------------------------|
| socket.request.max.bytes         | the connection is closed once the size prefix is read     |
| queued.max.request.bytes         | (bytes, all connections) reading stops on every connection |
|                                  | that needs more (MemoryPool); a request larger than the   |
|                                  | whole budget closes its connection                        |
| max.connections                  | accepting stops until a connection closes (the kernel's   |
|                                  | backlog holds new ones), as Kafka's acceptor waits; while |
|                                  | more are open (lowered, or the protected listener past    |
|                                  | it) the least recently used are closed (see below)        |
| max.connections.per.ip, and      | a new connection from that address is accepted and closed |
| max.connections.per.ip.overrides | at once (KIP-402)                                         |
| max.connection.creation.rate     | accepting waits until the last second saw fewer (KIP-612) |
| listener.name.<l>.max.connections, | the same, for listener <l> alone (each defaulting to the |
| listener.name.<l>.max.connection.  | broker-wide property, as Kafka's ListenerConnection-    |
| creation.rate                      | Quota reads the listener's values with its prefix)      |
| an ip's connection_creation_rate | (a client quota of the ip entity, KIP-612) the connection  |
|                                  | is accepted, held without being read for the throttle time |
|                                  | and closed, as Kafka's acceptor delays the close          |
| connections.max.idle.ms          | a connection that waited that long for a request is       |
|                                  | closed; a half-sent frame counts as waiting               |

Per listener (Kafka's ConnectionQuotas): a new connection on listener <l> needs a slot under
<l>'s own max.connections and, but on the inter-broker listener while the Server has more than
one listener (it is "protected", so replication never starves behind clients), under the
broker-wide max.connections, which counts every listener's connections, the inter-broker
listener's too. The creation rates likewise: <l>'s own window, and the broker-wide one, which
the inter-broker listener neither waits for nor counts in.

The connection limits change without a restart (``ConnectionQuotas.update``, Kafka's
SocketServer.reconfigure): a new max.connections or creation rate holds from the next accept, a
lower max.connections.per.ip closes nothing already open, as Kafka's; a max.connections lowered
below the open connections closes the excess (below).

Excess connections (Kafka's Processor.closeExcessConnections): while the Server's connections
number more than the broker-wide max.connections (it was lowered, or the protected listener
accepted past it), every listener but the protected one is over it (``max_connections_exceeded``)
and the Server closes the least recently used of their connections, ``excess()`` of them: the
oldest ``last_active_ms`` (when its last request was taken up, or answers that waited for
replication were sent: one clock read a request, near Kafka's Selector, which orders its channels
for idle expiry by their last read or write; a request in flight does not spare its connection,
as lowestPriorityChannel does not look at it). The protected listener's connections are never
closed for it.

Theory of the memory pool (queued.max.request.bytes; Kafka's MemoryPool that mutes channels).
Bytes of requests in memory are bounded across all the connections of a Server: a request's bytes
are reserved once its size prefix is read and it no longer fits the connection's shared receive
buffer (it is about to get a buffer of its own), or once it is whole in that buffer and about to be
copied out; they are released when the handler is done with the request (Kafka releases the
request's buffer once KafkaApis has handled it; an acks=all answer then waits for replication
without holding the budget, so follower fetches are never queued behind the produce requests
that wait for them). A reader that cannot reserve stops splitting, leaves its bytes where they
are and joins the FIFO ``waiting`` queue; its connection pauses reading. Every release wakes
waiters from the head while the head fits, so a large request is never starved by small ones:
while anyone waits, every reservation goes through ``admit`` and the FIFO order.

| field   | meaning                                                                             |
|---------|-------------------------------------------------------------------------------------|
| limit   | queued.max.request.bytes                                                            |
| free    | limit minus the bytes reserved; minus ``BLOCKED`` too while ``waiting`` is not empty, |
|         | so the receive path's one comparison (``size > free``) sends it to ``admit``        |
| waiting | readers blocked on a reservation, oldest first; each has ``blocked_size``          |

Invariant: bytes reserved (limit - free, without BLOCKED) never exceed ``limit``, and equal the sum
of every live reader's ``held``; a reader leaving (its connection closed) gives back all it held
but the frame its handler still has, which is given back once handled.
"""
from __future__ import annotations

import collections
import ipaddress
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

UNLIMITED = (1 << 31) - 1  # Kafka's default for the connection limits: Int.MaxValue
BLOCKED = 1 << 62  # taken off MemoryPool.free while readers wait (see the table above)
CREATION_WINDOW_MS = 1000


def resolve_ip_overrides(overrides: Mapping[str, int],
                         unresolved: Callable[[str, OSError], None]) -> dict[str, int]:
    """max.connections.per.ip.overrides keyed by the address a peer's connection shows: an IP as
    written, a host name by each address it resolves to (once, now); a host that does not
    resolve goes to ``unresolved(host, error)``, which raises (a node's config at start) or
    logs it and leaves it out (a dynamic change)."""
    out: dict[str, int] = {}
    for host, n in overrides.items():
        try:
            out[str(ipaddress.ip_address(host))] = n
            continue
        except ValueError:
            pass
        try:
            infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
        except OSError as e:
            unresolved(host, e)
            continue
        for info in infos:
            out[str(ipaddress.ip_address(info[4][0]))] = n
    return out


class FrameTooLarge(Exception):
    pass


@dataclass(frozen=True)
class ListenerQuota:
    """One listener's own limits: listener.name.<l>.max.connections and
    .max.connection.creation.rate (each the broker-wide property where the listener has none)."""

    max_connections: int = UNLIMITED
    max_connection_creation_rate: int = UNLIMITED


@dataclass(frozen=True)
class ListenerLimits:
    """What a Server enforces; the defaults enforce nothing (the node's come from strom.config)."""

    queued_max_request_bytes: int = -1  # -1 (any value <= 0): unbounded
    max_connections: int = UNLIMITED
    max_connections_per_ip: int = UNLIMITED
    # address (an IP, as the peer's address reads) -> its own max.connections.per.ip
    max_connections_per_ip_overrides: Mapping[str, int] = field(default_factory=dict)
    max_connection_creation_rate: int = UNLIMITED
    connections_max_idle_ms: int = -1  # < 0: never closed for idleness
    # listener name (upper case) -> its own limits; a listener not named has none of its own
    listeners: Mapping[str, ListenerQuota] = field(default_factory=dict)
    # inter.broker.listener.name: exempt from the broker-wide limits beside other listeners
    inter_broker_listener: str | None = None


class MemoryPool:
    """queued.max.request.bytes across a Server's connections (see the module docstring)."""

    __slots__ = ("limit", "free", "waiting")

    def __init__(self, limit: int):
        self.limit = limit
        self.free = limit
        self.waiting: collections.deque = collections.deque()

    @property
    def used(self) -> int:
        return self.limit - self.free - (BLOCKED if self.waiting else 0)

    def admit(self, reader, size: int) -> bool:
        """May ``reader`` reserve ``size`` bytes now? The slow path of the receive path, taken
        when ``size > free``. True: the caller takes them off ``free``. False: the reader waits
        (it is queued, once) and is resumed by a release."""
        if size > self.limit:
            raise FrameTooLarge(f"request of {size} bytes exceeds queued.max.request.bytes ({self.limit})")
        waiting = self.waiting
        if not waiting:
            if size <= self.free:
                return True
        elif waiting[0] is reader and size <= self.free + BLOCKED:
            waiting.popleft()
            reader.blocked = False
            if not waiting:
                self.free += BLOCKED
            return True
        if not reader.blocked:
            reader.blocked = True
            if not waiting:
                self.free -= BLOCKED
            waiting.append(reader)
        reader.blocked_size = size
        return False

    def release(self, n: int) -> None:
        self.free += n
        waiting = self.waiting
        while waiting:
            head = waiting[0]
            if head.blocked_size > self.free + BLOCKED:
                return
            head.resume()  # splits again: admit() takes it off the queue, or it stays blocked
            if waiting and waiting[0] is head:
                return

    def leave(self, reader, keep: int = 0) -> None:
        """``reader``'s connection is gone: give back what it held but ``keep`` bytes (a frame
        its handler still has) and drop it from the queue."""
        if reader.blocked:
            reader.blocked = False
            self.waiting.remove(reader)
            if not self.waiting:
                self.free += BLOCKED
        held, reader.held = reader.held - keep, keep
        self.release(held)


class ConnectionQuotas:
    """max.connections, max.connections.per.ip (with overrides) and max.connection.creation.rate
    for one Server, and the ip entities' connection rate quotas through ``ip_throttle``. Time
    comes in as ``now_ms``."""

    def __init__(self, limits: ListenerLimits):
        self.total = 0
        self.per_ip: dict[str, int] = {}
        # Accept times within the last CREATION_WINDOW_MS (only while a rate is set): the
        # broker-wide ones, and each listener's.
        self.created: collections.deque[int] = collections.deque()
        self.listener_counts: dict[str, int] = {}
        self.listener_created: dict[str, collections.deque[int]] = {}
        # The listeners the Server has bound (Kafka's listenerCounts, one per socket server): a
        # combined node's broker serves its listeners, not the controller's its limits name too.
        self.served: set[str] = set()
        self.update(limits)
        # (ip, now_ms) -> how long to hold a connection from ip before closing it, 0 to accept
        # it (a rate that refuses records nothing): the ip quotas, set by the broker.
        self.ip_throttle: Callable[[str, int], int] | None = None

    def update(self, limits: ListenerLimits) -> None:
        """The limits a reconfiguration sets (see the module doc); the counts stay."""
        self.max_connections = limits.max_connections
        self.max_per_ip = limits.max_connections_per_ip
        self.overrides = {_normal_ip(ip): n for ip, n in limits.max_connections_per_ip_overrides.items()}
        self.rate = limits.max_connection_creation_rate
        self.listeners = {name.upper(): quota for name, quota in limits.listeners.items()}
        self.inter_broker = (limits.inter_broker_listener or "").upper() or None
        for name in self.listeners:
            self.listener_counts.setdefault(name, 0)
            self.listener_created.setdefault(name, collections.deque())

    def ip_throttle_ms(self, ip: str, now_ms: int) -> int:
        """Kafka's recordIpConnectionMaybeThrottle: 0 when ``ip``'s connection rate quota takes
        one connection more (it is recorded), else the time to hold it before closing it."""
        throttle = self.ip_throttle
        return 0 if throttle is None else throttle(_normal_ip(ip), now_ms)

    def serve(self, listener: str) -> None:
        self.served.add(listener.upper())

    def unserve(self, listener: str) -> None:
        self.served.discard(listener.upper())

    def _protected(self, listener: str | None) -> bool:
        """Kafka's protectedListener: the inter-broker listener, beside at least one other that
        its Server serves (a core alone, never bound: the listeners its limits name)."""
        return (listener is not None and listener == self.inter_broker
                and len(self.served or self.listeners) > 1)

    def max_connections_exceeded(self, listener: str | None) -> bool:
        """Kafka's maxConnectionsExceeded: the broker-wide count is over max.connections, and
        ``listener`` is not the protected one, so it closes its least recently used connection."""
        return self.total > self.max_connections and not self._protected(
            listener.upper() if listener is not None else None)

    def excess(self) -> int:
        """How many connections the broker-wide count is over max.connections."""
        return max(0, self.total - self.max_connections)

    def slot_available(self, listener: str | None = None) -> bool:
        """Kafka's connectionSlotAvailable: under the listener's own max.connections, and under
        the broker-wide one unless the listener is the protected inter-broker one."""
        if listener is not None:
            listener = listener.upper()
            quota = self.listeners.get(listener)
            if quota is not None and self.listener_counts.get(listener, 0) >= quota.max_connections:
                return False
            if self._protected(listener):
                return True
        return self.total < self.max_connections

    def limit_for(self, ip: str) -> int:
        return self.overrides.get(_normal_ip(ip), self.max_per_ip)

    def try_add(self, ip: str, listener: str | None = None) -> bool:
        """Count a new connection from ``ip`` on ``listener``, unless that address already has
        its maximum."""
        ip = _normal_ip(ip)
        count = self.per_ip.get(ip, 0)
        if count >= self.overrides.get(ip, self.max_per_ip):
            return False
        self.per_ip[ip] = count + 1
        self.total += 1
        if listener is not None and listener.upper() in self.listener_counts:
            self.listener_counts[listener.upper()] += 1
        return True

    def remove(self, ip: str, listener: str | None = None) -> None:
        ip = _normal_ip(ip)
        count = self.per_ip.get(ip, 0) - 1
        if count > 0:
            self.per_ip[ip] = count
        else:
            self.per_ip.pop(ip, None)
        self.total -= 1
        if listener is not None and self.listener_counts.get(listener.upper(), 0) > 0:
            self.listener_counts[listener.upper()] -= 1

    def creation_delay_ms(self, now_ms: int, listener: str | None = None) -> int:
        """How long the acceptor of ``listener`` waits before it may accept the next connection:
        0 while the last CREATION_WINDOW_MS saw fewer than max.connection.creation.rate of them
        broker-wide (but on the protected inter-broker listener) and fewer than the listener's
        own rate on it; else the longer of the two waits, as Kafka's."""
        delay = 0
        if listener is not None:
            listener = listener.upper()
            quota = self.listeners.get(listener)
            if quota is not None:
                rate = quota.max_connection_creation_rate
                delay = _window_delay(self.listener_created[listener], rate, now_ms)
            if self._protected(listener):
                return delay
        return max(delay, _window_delay(self.created, self.rate, now_ms))

    def record_creation(self, now_ms: int, listener: str | None = None) -> None:
        if listener is not None:
            listener = listener.upper()
            quota = self.listeners.get(listener)
            if quota is not None and quota.max_connection_creation_rate < UNLIMITED:
                self.listener_created[listener].append(now_ms)
            if self._protected(listener):
                return
        if self.rate < UNLIMITED:
            self.created.append(now_ms)


def _window_delay(created: collections.deque[int], rate: int, now_ms: int) -> int:
    """The wait until ``created`` (accept times) holds fewer than ``rate`` within the last
    CREATION_WINDOW_MS; a rate of 0 admits nothing, as Kafka's quota of 0."""
    if rate >= UNLIMITED:
        return 0
    if rate <= 0:
        return CREATION_WINDOW_MS
    while created and created[0] <= now_ms - CREATION_WINDOW_MS:
        created.popleft()
    if len(created) < rate:
        return 0
    return created[len(created) - rate] + CREATION_WINDOW_MS - now_ms


def _normal_ip(ip: str) -> str:
    """An address as one spelling: an IPv4-mapped IPv6 peer (::ffff:1.2.3.4) counts as 1.2.3.4."""
    if ip.startswith("::ffff:"):
        try:
            mapped = ipaddress.IPv6Address(ip).ipv4_mapped
        except ValueError:
            return ip
        if mapped is not None:
            return str(mapped)
    return ip


class IdleTracker:
    """connections.max.idle.ms. ``check(now_ms)`` is called every ``interval_ms``; a connection
    is idle while it waits for a request (nothing queued, handled or answered later; a half-sent
    frame does not count as a request) and is closed once its last activity (``last_active_ms``:
    when its last request was taken up, the one clock excess connections are ordered by too) is
    ``idle_ms`` old. Connections must offer ``waiting`` (True while it waits for a request),
    ``last_active_ms`` and ``close_idle``."""

    def __init__(self, idle_ms: int):
        self.idle_ms = idle_ms
        self.interval_ms = max(10, min(1000, idle_ms // 4))

    def check(self, connections, now_ms: int) -> list:
        idle_ms = self.idle_ms
        expired = [conn for conn in connections if conn.waiting and now_ms - conn.last_active_ms >= idle_ms]
        for conn in expired:
            conn.close_idle(idle_ms)
        return expired


def least_recently_used(connections, n: int) -> list:
    """The ``n`` connections whose last activity is oldest (Kafka's Selector.lowestPriorityChannel,
    taken ``n`` times), oldest first."""
    if n <= 0:
        return []
    return sorted(connections, key=_last_active)[:n]


def _last_active(conn) -> float:
    return conn.last_active_ms


__all__ = ["BLOCKED", "ConnectionQuotas", "FrameTooLarge", "IdleTracker", "ListenerLimits",
           "ListenerQuota", "MemoryPool", "UNLIMITED", "least_recently_used"]
