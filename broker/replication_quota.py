"""Replication quotas, as Kafka's ReplicationQuotaManager: the bound on the bytes per second a
broker's replication of *throttled* partitions may use, one quota as a leader (the bytes it
serves to followers) and one as a follower (the bytes it fetches).

The bound is the broker config ``leader.replication.throttled.rate`` or
``follower.replication.throttled.rate`` (bytes per second; unset: unbounded). Which partitions
are throttled is each topic's ``leader.replication.throttled.replicas`` /
``follower.replication.throttled.replicas``: ``*`` (every partition of the topic) or
``partition:broker`` pairs, of which a broker takes the partitions paired with its own id
(Kafka's QuotaConfigHandler.parseThrottledPartitions); kafka-reassign-partitions --throttle
names each move's sources in the leader list and its new replicas in the follower list.

Kafka's checks, which the fetch paths make:

- the leader (ReplicaManager.shouldLeaderThrottle): a follower's read of a partition is left
  empty when the partition is throttled here, the follower is not in its ISR, and the leader's
  rate is over its bound; the bytes served of throttled partitions are recorded;
- the follower (ReplicaFetcherThread.shouldFollowerThrottle): a throttled partition whose
  replica here is not in the ISR is left out of the next fetch while the follower's rate is over
  its bound; the bytes fetched for throttled partitions are recorded.

The rate is security/quotas.py's Rate (Kafka's, over ``replication.quota.window.num`` = 11
samples of ``replication.quota.window.size.seconds`` = 1 s): as in Kafka it is measured over at
least ten windows, so a move first runs ten seconds' worth of the bound at full speed, then at
the bound. Time comes in as arguments (ms); nothing here reads a clock.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping

from security.quotas import Rate

LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"
LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"
SAMPLES, WINDOW_MS = 11, 1000

ALL = None  # every partition of a topic ("*")


def throttled_partitions(value: str | None, broker_id: int) -> frozenset[int] | None:
    """The partitions of a topic's throttled-replicas value throttled on ``broker_id``; None
    for ``*`` (all of them). Entries that are not ``partition:broker`` pairs are ignored (the
    config's validator refused them when they were set)."""
    if not value:
        return frozenset()
    entries = [e.strip() for e in value.split(",") if e.strip()]
    if entries == ["*"]:
        return ALL
    out = set()
    for entry in entries:
        partition, _, broker = entry.partition(":")
        if partition.isdigit() and broker.isdigit() and int(broker) == broker_id:
            out.add(int(partition))
    return frozenset(out)


def parse_rate(value: str | None) -> float | None:
    """A throttled rate's bound in bytes per second; None when unset or not a number >= 0."""
    if value is None:
        return None
    try:
        rate = int(value)
    except ValueError:
        return None
    return float(rate) if rate >= 0 else None


class ReplicationQuota:
    """One of a broker's two replication quotas (leader or follower)."""

    def __init__(self, samples: int = SAMPLES, window_ms: int = WINDOW_MS) -> None:
        self.bound: float | None = None
        self._throttled: dict[str, frozenset[int] | None] = {}
        self._rate = Rate(samples, window_ms)

    @property
    def active(self) -> bool:
        """Whether any partition can be throttled (a bound and a throttled partition): the fetch
        paths check nothing more when not."""
        return self.bound is not None and bool(self._throttled)

    def configure(self, bound: float | None, throttled: Mapping[str, frozenset[int] | None]) -> None:
        """The bound (None: unbounded) and, per topic, its throttled partitions (None: all);
        topics with none are left out."""
        self.bound = bound
        self._throttled = {t: ps for t, ps in throttled.items() if ps is None or ps}

    def is_throttled(self, topic: str, partition: int) -> bool:
        if topic not in self._throttled:
            return False
        partitions = self._throttled[topic]
        return partitions is None or partition in partitions

    def exceeded(self, now_ms: int) -> bool:
        """Kafka's isQuotaExceeded: the measured rate is over the bound."""
        return self.bound is not None and self._rate.measure(now_ms) > self.bound

    def record(self, size: int, now_ms: int) -> None:
        self._rate.record(size, now_ms)

    def rate(self, now_ms: int) -> float:
        return self._rate.measure(now_ms)

    def should_throttle(self, topic: str, partition: int, in_sync: bool, now_ms: int) -> bool:
        """shouldLeaderThrottle / shouldFollowerThrottle: a replica out of the ISR of a throttled
        partition while the rate is over the bound."""
        return (not in_sync and self.bound is not None and self.is_throttled(topic, partition)
                and self.exceeded(now_ms))


def configure_from(quota: ReplicationQuota, broker_configs: Mapping[str, str],
                   topic_configs: Iterable[tuple[str, Mapping[str, str]]], broker_id: int,
                   leader: bool) -> None:
    """Set ``quota`` (the leader's or the follower's) from the broker's dynamic configs and
    each topic's configs, as the image holds them."""
    rate_name = LEADER_RATE if leader else FOLLOWER_RATE
    replicas_name = LEADER_REPLICAS if leader else FOLLOWER_REPLICAS
    quota.configure(parse_rate(broker_configs.get(rate_name)),
                    {topic: throttled_partitions(configs.get(replicas_name), broker_id)
                     for topic, configs in topic_configs if configs.get(replicas_name)})
