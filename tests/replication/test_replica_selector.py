"""replication/replica_selector.py: Kafka's findPreferredReadReplica candidates and its
RackAwareReplicaSelector, as a pure rule (KIP-392)."""
import pytest

from replication.replica_selector import (
    RACK_AWARE,
    FollowerView,
    preferred_read_replica,
    selector_name,
)
from tests.purity import IO_CLOCK_RANDOMNESS, imports, top_level


def view(broker_id, rack, *, end=100, start=0, in_isr=True, endpoint=True, since=0):
    return FollowerView(broker_id, rack if endpoint else None, endpoint, in_isr, start, end, since)


def pick(followers, client_rack="b", leader_rack="a", fetch_offset=50, selector=RACK_AWARE):
    return preferred_read_replica(selector, client_rack, leader_rack, followers, fetch_offset)


def test_the_selector_is_pure():
    assert not top_level(imports("replication", "replica_selector")) & (
        IO_CLOCK_RANDOMNESS | {"engine", "protocol", "ext", "metadata", "broker"})


def test_replica_selector_class_takes_kafkas_rack_aware_selector_name_or_nothing():
    assert selector_name(None) is None and selector_name("") is None
    assert selector_name("org.apache.kafka.common.replica.RackAwareReplicaSelector") == RACK_AWARE
    assert selector_name("rack-aware") == RACK_AWARE
    with pytest.raises(ValueError, match="replica.selector.class"):
        selector_name("com.example.NearestReplicaSelector")


def test_a_consumer_in_a_followers_rack_is_sent_to_that_follower_as_kafka_does():
    assert pick([view(2, "b"), view(3, "c")]) == 2
    assert pick([view(2, "b"), view(3, "c")], client_rack="c") == 3


def test_the_leader_serves_without_a_selector_a_client_rack_or_a_same_rack_replica():
    followers = [view(2, "b"), view(3, "c")]
    assert pick(followers, selector=None) is None
    assert pick(followers, client_rack="") is None and pick(followers, client_rack=None) is None
    assert pick(followers, client_rack="z") is None


def test_the_leader_serves_a_consumer_in_its_own_rack_even_beside_a_follower_there():
    assert pick([view(2, "a"), view(3, "c")], client_rack="a", leader_rack="a") is None


def test_a_follower_outside_the_isr_or_not_holding_the_fetch_offset_is_never_named():
    assert pick([view(2, "b", in_isr=False)]) is None
    assert pick([view(2, "b", end=49)]) is None  # its log ends before the fetch offset
    assert pick([view(2, "b", end=50)]) == 2  # at its log end: an empty answer there, not an error
    assert pick([view(2, "b", start=51)]) is None  # the offset is below its log start
    assert pick([view(2, "b", start=50)]) == 2


def test_a_follower_without_an_endpoint_on_the_requests_listener_is_never_named():
    assert pick([view(2, "b", endpoint=False)]) is None
    assert pick([view(2, "b", endpoint=False), view(3, "b")]) == 3


def test_of_several_followers_in_the_rack_the_most_caught_up_is_named():
    assert pick([view(2, "b", end=90), view(3, "b", end=100)]) == 3
    # the same log end offset: the one caught up most recently
    assert pick([view(2, "b", since=500), view(3, "b", since=20)]) == 3
    # a full tie: the highest id, whatever the order (Kafka takes the max of ReplicaView.comparator,
    # whose last key is the broker id)
    assert pick([view(3, "b"), view(2, "b")]) == 3
    assert pick([view(2, "b"), view(3, "b")]) == 3


def test_a_node_config_accepts_kafkas_selector_and_refuses_another_naming_the_property():
    from engine.errors import ConfigError
    from strom.config import ServerConfig
    from tests.broker.test_config import BASE

    assert ServerConfig(BASE)["replica.selector.class"] is None
    config = ServerConfig({**BASE, "replica.selector.class": RACK_AWARE})
    assert selector_name(config["replica.selector.class"]) == RACK_AWARE
    with pytest.raises(ConfigError, match="replica.selector.class"):
        ServerConfig({**BASE, "replica.selector.class": "com.example.NearestReplicaSelector"})
