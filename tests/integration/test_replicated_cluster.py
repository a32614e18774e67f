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


# ---- compaction: the replicas agree byte for byte below the cleaned point ------------------
# Last in the module: it kills and restarts a broker.

COMPACTED_TOPIC = "compacted-replicas"
COMPACTED_SEGMENT_BYTES = 16384
DELETE_HORIZON = 0x40  # KIP-534: the batch's base timestamp is its delete horizon


def _cleaned_point(cluster: ReplicatedCluster, broker: int, topic: str) -> int | None:
    """The broker's cleaner-offset-checkpoint entry for partition 0 of ``topic``."""
    from engine.cleaner import read_cleaner_checkpoint

    return read_cleaner_checkpoint(cluster.log_dir(broker)).get((topic, 0))


def _wait_cleaned_to(cluster: ReplicatedCluster, topic: str, point: int, brokers, timeout: float) -> None:
    import time

    deadline = time.monotonic() + timeout
    while True:
        points = {b: _cleaned_point(cluster, b, topic) for b in brokers}
        if all(p == point for p in points.values()):
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"cleaner checkpoints {points}, wanted {point} on each")
        time.sleep(0.2)


def _batches_below(cluster: ReplicatedCluster, broker: int, topic: str, point: int) -> list[tuple]:
    """(header, bytes) of every batch of partition 0 below ``point`` in the broker's segment
    files, in offset order, each checked against its CRC."""
    from engine.reader import PartitionReader

    return [(header, bytes(data)) for header, data in
            PartitionReader(cluster.partition_dir(broker, topic, 0)).batches(0, point, check_crc=True)]


def _without_delete_horizon(header, data: bytes) -> tuple:
    """A batch with its KIP-534 delete horizon left out: every header field but the base
    timestamp (the horizon), the attribute bit saying so and the CRC (and the length, as the
    records' timestamp deltas are taken from the base timestamp), and each record with its
    absolute offset, timestamp, key, value and headers."""
    from ext.batch import decode_records

    return (header.base_offset, header.last_offset_delta, header.partition_leader_epoch,
            header.attributes & ~DELETE_HORIZON, header.producer_id, header.producer_epoch,
            header.base_sequence, header.max_timestamp, header.records_count,
            [(r.offset, r.timestamp, r.key, r.value, tuple(r.headers))
             for r in decode_records(data, 0, False)])


def _assert_same_batches(by_broker: dict[int, list[tuple]]) -> None:
    """The replicas' batch streams agree byte for byte, except in the delete horizon of a
    batch that carries one on any replica (compared without it, ``_without_delete_horizon``)."""
    (first, reference), *others = by_broker.items()
    for broker, batches in others:
        assert [h.base_offset for h, _ in batches] == [h.base_offset for h, _ in reference], \
            f"brokers {first} and {broker} hold different batches"
        for (h1, b1), (h2, b2) in zip(reference, batches):
            if (h1.attributes | h2.attributes) & DELETE_HORIZON:
                assert _without_delete_horizon(h1, b1) == _without_delete_horizon(h2, b2), \
                    f"batch {h1.base_offset}: brokers {first} and {broker} differ beyond its delete horizon"
            else:
                assert b1 == b2, f"batch {h1.base_offset}: brokers {first} and {broker} differ"


def _compacted_and_cleaned(cluster: ReplicatedCluster, topic: str) -> tuple[int, dict[int, list[tuple]]]:
    """A compacted RF=3 topic written (updates and tombstones of 150 keys, lz4 batches of an
    idempotent producer), then rolled on every replica and cleaned by each to the same point:
    that point and each replica's batches below it."""
    from confluent_kafka import Producer

    cluster.create_topic(topic, partitions=1, replication_factor=3,
                         configs={"cleanup.policy": "compact", "segment.bytes": str(COMPACTED_SEGMENT_BYTES),
                                  "min.cleanable.dirty.ratio": "0.01", "compression.type": "producer"})
    cluster.wait_for_isr(topic, 0, BROKERS)
    acks = AckedRecords()
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "enable.idempotence": True,
                         "linger.ms": 2, "batch.size": 2048, "compression.type": "lz4"})
    for i in range(3000):
        key = b"key-%03d" % (i * 7 % 150)
        value = None if i % 11 == 5 else b"value-%05d" % i  # tombstones among the updates
        producer.produce(topic, value, key, partition=0, on_delivery=acks)
        if i % 1000 == 999:
            producer.flush(30)
    # Two records of incompressible bytes, each over half of segment.bytes: every replica rolls
    # before the second, which is then alone in the active segment.
    for i in range(2):
        producer.produce(topic, os.urandom(COMPACTED_SEGMENT_BYTES // 2 + 100), b"roll-%d" % i,
                         partition=0, on_delivery=acks)
        assert producer.flush(30) == 0
    assert acks.errors == [] and acks.count() == 3002
    point = 3001
    _wait_cleaned_to(cluster, topic, point, BROKERS, 45)
    held = {b: _batches_below(cluster, b, topic, point) for b in sorted(BROKERS)}
    assert held[4] and any(h.records_count < 1 + h.last_offset_delta for h, _ in held[4]), "nothing compacted"
    return point, held


def test_compacted_replicas_and_a_restarted_one_agree_byte_for_byte_below_the_cleaned_point(cluster):
    """Each replica runs its own cleaner (as Kafka's do) at its own times, so below the point
    all three have cleaned to, their logs must hold the same batches.

    What is compared: the concatenated batch bytes below the cleaned point, not the segment
    files. A follower rolls its segments as its fetches arrive and a replica that cleaned in
    two passes grouped different segments than one that cleaned once, so the files may be cut
    elsewhere; the batches may not: a rebuilt batch keeps its base and last offset, producer
    fields, leader epoch and codec, its base timestamp is its first kept record's, and
    rebuilding a rebuilt batch gives what rebuilding the original once gives. The one field
    excluded is KIP-534's delete horizon (a batch keeping a tombstone has its base timestamp
    set to the cleaning replica's clock + delete.retention.ms, as in Kafka), so a batch that
    carries one on any replica is compared with that field, its attribute bit and the CRC left
    out and its records compared by content (tombstones included).

    The cleaned point: the producer stops, then two records larger than half of segment.bytes
    make every replica roll, so everything below the last one is cleanable everywhere; the
    test waits until each replica's cleaner-offset-checkpoint says it cleaned to there.

    Then a follower killed with kill -9 restarts with the bytes below its cleaned point as they
    were (recovery rewrites none and truncates none: a cleaned segment's offset gaps are no
    corruption, the logs being loaded with their topics' configs); with its
    cleaner-offset-checkpoint removed (Kafka cleans from the log start then) it cleans its whole
    already-clean log again at once, and that changes no byte."""
    topic = COMPACTED_TOPIC
    point, held = _compacted_and_cleaned(cluster, topic)
    _assert_same_batches(held)
    leader = cluster.leader_of(topic, 0)
    follower = min(BROKERS - {leader})
    cluster.kill9(follower)
    cluster.restart(follower)
    cluster.wait_for_isr(topic, 0, BROKERS)
    restarted = _batches_below(cluster, follower, topic, point)
    assert [b for _, b in restarted] == [b for _, b in held[follower]], "the restart changed bytes"
    cluster.kill9(follower)
    os.unlink(os.path.join(cluster.log_dir(follower), "cleaner-offset-checkpoint"))
    cluster.restart(follower)
    cluster.wait_for_isr(topic, 0, BROKERS)
    _wait_cleaned_to(cluster, topic, point, [follower], 45)
    again = _batches_below(cluster, follower, topic, point)
    assert [b for _, b in again] == [b for _, b in held[follower]], "cleaning a clean log changed bytes"
