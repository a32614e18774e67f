"""Replication quotas (broker/replication_quota.py) as Kafka's ReplicationQuotaManager and
QuotaConfigHandler: which partitions a broker throttles, when, and at what rate."""
from broker.replication_quota import (
    ReplicationQuota,
    configure_from,
    parse_rate,
    throttled_partitions,
)


def test_a_broker_throttles_the_partitions_paired_with_its_own_id():
    assert throttled_partitions("0:1,0:2,1:2,3:4", 2) == {0, 1}
    assert throttled_partitions("0:1", 2) == frozenset()
    assert throttled_partitions("", 2) == frozenset()


def test_the_wildcard_throttles_every_partition_of_the_topic():
    assert throttled_partitions("*", 7) is None
    quota = ReplicationQuota()
    quota.configure(100.0, {"t": None})
    assert quota.is_throttled("t", 0) and quota.is_throttled("t", 99)
    assert not quota.is_throttled("u", 0)


def test_a_rate_is_a_non_negative_integer_else_unbounded():
    assert parse_rate("1000") == 1000.0 and parse_rate("0") == 0.0
    assert parse_rate(None) is None and parse_rate("-1") is None and parse_rate("fast") is None


def test_a_quota_without_a_bound_or_without_throttled_partitions_is_inactive():
    quota = ReplicationQuota()
    assert not quota.active
    quota.configure(None, {"t": frozenset({0})})
    assert not quota.active and not quota.should_throttle("t", 0, False, 0)
    quota.configure(10.0, {"t": frozenset()})
    assert not quota.active


def test_an_out_of_sync_replica_of_a_throttled_partition_is_throttled_once_the_rate_is_over_the_bound():
    quota = ReplicationQuota()
    quota.configure(1000.0, {"t": frozenset({0})})
    assert not quota.should_throttle("t", 0, False, 0)  # nothing recorded yet
    # The rate is measured over at least ten one-second windows: 10,000 bytes at once is 1000/s.
    quota.record(10_000, 0)
    assert not quota.should_throttle("t", 0, False, 0)
    quota.record(1, 0)
    assert quota.should_throttle("t", 0, False, 0)
    assert not quota.should_throttle("t", 0, True, 0)  # an in-sync replica never is
    assert not quota.should_throttle("t", 1, False, 0)  # nor a partition not throttled here


def test_the_rate_falls_back_under_the_bound_as_the_windows_pass():
    quota = ReplicationQuota()
    quota.configure(1000.0, {"t": None})
    quota.record(20_000, 0)
    assert quota.exceeded(5_000)
    assert not quota.exceeded(11_000)  # the only sample has expired


def test_steady_replication_under_the_quota_averages_the_bound():
    """A fetcher that fetches 500 bytes whenever not throttled, every 10 ms for a minute, moves
    about the bound per second once the first ten windows are past."""
    quota = ReplicationQuota()
    quota.configure(2000.0, {"t": None})
    moved = {}
    total = 0
    for now in range(0, 60_000, 10):
        if not quota.should_throttle("t", 0, False, now):
            quota.record(500, now)
            total += 500
        moved[now] = total
    steady = (moved[59_990] - moved[20_000]) / 40
    assert 0.8 * 2000 <= steady <= 1.2 * 2000


def test_configure_from_the_broker_and_topic_configs_as_the_image_holds_them():
    leader, follower = ReplicationQuota(), ReplicationQuota()
    broker = {"leader.replication.throttled.rate": "500", "follower.replication.throttled.rate": "700"}
    topics = [("t", {"leader.replication.throttled.replicas": "0:1,0:2",
                     "follower.replication.throttled.replicas": "0:4"}), ("u", {})]
    configure_from(leader, broker, topics, 2, leader=True)
    configure_from(follower, broker, topics, 2, leader=False)
    assert leader.bound == 500 and leader.is_throttled("t", 0) and leader.active
    assert follower.bound == 700 and not follower.is_throttled("t", 0) and not follower.active
