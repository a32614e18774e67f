"""The replication test harness itself (replicated_cluster.py) on 3 controllers + 3 brokers.

These tests assume nothing of replication: they check that the cluster forms, that a topic of
replication factor 3 is created and described alike by every broker, that each fault the
harness injects does what it says and the broker comes back, and that the on-disk checker finds
what it must (first against records built in memory, then against a leader's segment files)."""
from __future__ import annotations

import os

import pytest

from tests.integration.replicated_cluster import (
    AckedRecords,
    ReplicatedCluster,
    StoredRecord,
    check_replica,
)

pytestmark = pytest.mark.timeout(120)
BROKERS = {4, 5, 6}
TOPIC = "harness"
PARTITIONS = 6


@pytest.fixture(scope="module")
def cluster():
    with ReplicatedCluster() as c:
        c.create_topic(TOPIC, partitions=PARTITIONS, replication_factor=3)
        yield c


def records(*values: bytes) -> list[StoredRecord]:
    return [StoredRecord(offset, None, v, 7, offset, 0) for offset, v in enumerate(values)]


def test_check_replica_accepts_every_acknowledged_value_once_in_order_with_unacknowledged_ones_between():
    check = check_replica(records(b"a", b"x", b"b", b"c"), [b"a", b"b", b"c"])
    assert check.ok and check.held == 4


def test_check_replica_reports_missing_and_duplicated_values():
    check = check_replica(records(b"a", b"b", b"b", b"y", b"y"), [b"a", b"b", b"c"])
    assert check.missing == [b"c"]
    assert check.duplicated == [b"b", b"y"]
    assert check.out_of_order == [] and not check.ok


def test_check_replica_reports_acknowledged_values_held_out_of_order():
    check = check_replica(records(b"a", b"c", b"b"), [b"a", b"b", b"c"])
    assert check.out_of_order == [(b"b", 2, b"c", 1)]
    assert check.missing == [] and check.duplicated == [] and not check.ok


def test_the_cluster_forms_and_every_broker_describes_the_rf3_topic_alike(cluster):
    view = cluster.quorum_leader()
    assert view.voter_ids() == {1, 2, 3}
    assert BROKERS <= {o.replica_id for o in view.observers}
    agreed = cluster.wait_for_metadata_agreement()
    assert agreed.unfenced == BROKERS
    mine = [p for p in agreed.partitions if p.topic == TOPIC]
    assert sorted(p.partition for p in mine) == list(range(PARTITIONS))
    for p in mine:
        assert len(p.replicas) == 3 and set(p.replicas) == BROKERS, p
        assert p.leader in p.replicas and p.leader_epoch >= 0, p
    assert cluster.leader_of(TOPIC, 0) == next(p.leader for p in mine if p.partition == 0)
    assert cluster.wait_for_isr(TOPIC, 0, BROKERS).isr


def test_a_broker_killed_with_kill9_and_restarted_is_listed_again_by_every_broker(cluster):
    victim = cluster.leader_of(TOPIC, 1)
    cluster.kill9(victim)
    assert not cluster.brokers[victim].running
    assert cluster.metadata(victim) is None
    cluster.restart(victim)
    assert cluster.metadata(victim) is not None
    agreed = cluster.wait_for_metadata_agreement()
    assert agreed.unfenced == BROKERS


def test_a_paused_broker_does_not_answer_until_it_is_resumed(cluster):
    cluster.pause(6)
    try:
        assert 6 not in cluster.live_brokers()
        assert cluster.metadata(6, timeout=0.5) is None
    finally:
        cluster.resume(6)
    cluster.wait_for_brokers(BROKERS)
    assert cluster.metadata(6) is not None


def test_the_acknowledged_records_are_read_back_from_the_leaders_segment_files(cluster):
    from confluent_kafka import Producer

    acks = AckedRecords()
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "enable.idempotence": True,
                         "linger.ms": 5})
    values = [f"record-{i:05d}".encode() for i in range(500)]
    for value in values:
        producer.produce(TOPIC, value, partition=2, on_delivery=acks)
    assert producer.flush(30) == 0
    assert acks.errors == [] and acks.acked[(TOPIC, 2)] == values

    leader = cluster.wait_for_leader(TOPIC, 2).leader
    held = cluster.replica_records(leader, TOPIC, 2)
    assert [r.value for r in held] == values
    assert all(r.producer_id >= 0 for r in held)
    assert [r.sequence for r in held] == list(range(500))  # one idempotent producer from sequence 0
    cluster.assert_acknowledged(TOPIC, 2, acks.acked[(TOPIC, 2)], [leader])
    cluster.assert_all_acknowledged(acks, [leader])
    with pytest.raises(AssertionError, match="missing 1"):
        cluster.assert_acknowledged(TOPIC, 2, [*values, b"never produced"], [leader])


def test_a_terminated_broker_whose_partitions_are_wiped_restarts_and_is_listed_again(cluster):
    victim = cluster.leader_of(TOPIC, 3)
    assert cluster.terminate(victim) == 0
    removed = cluster.wipe_partitions(victim, [TOPIC])
    assert removed and all(name.startswith(f"{TOPIC}-") for name in removed)
    assert not os.path.exists(cluster.partition_dir(victim, TOPIC, 3))
    assert os.path.exists(os.path.join(cluster.log_dir(victim), "meta.properties"))
    cluster.restart(victim)
    agreed = cluster.wait_for_metadata_agreement()
    assert agreed.unfenced == BROKERS
    assert len([p for p in agreed.partitions if p.topic == TOPIC]) == PARTITIONS
