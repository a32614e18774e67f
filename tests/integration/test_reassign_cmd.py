"""`strom reassign-partitions` and `strom leader-election` as processes against 3 controllers and
4 brokers (5, 6, 7 and 8 are not: the launcher numbers brokers after the controllers, 4-7), as
kafka-reassign-partitions.sh and kafka-leader-election.sh are run: the JSON files they write and
read, and their output lines. Replicas are fetched 64 KiB a partition at a time
(replica.fetch.max.bytes), so a throttled move advances in steps small against its rate, whose
window is two seconds (replication.quota.window.num=2)."""
from __future__ import annotations

import json
import subprocess
import sys
import threading
import time

import pytest

from tests.integration.replicated_cluster import AckedRecords, ReplicatedCluster

pytestmark = pytest.mark.timeout(120)
TOPIC = "moved"


@pytest.fixture(scope="module")
def cluster():
    with ReplicatedCluster(brokers=4, broker_extra={"replica.fetch.max.bytes": "65536",
                                                    "replication.quota.window.num": "2",
                                                    "replica.fetch.backoff.ms": "100"}) as c:
        c.create_topic(TOPIC, partitions=2, replication_factor=3)
        yield c


def strom(cluster: ReplicatedCluster, *args: str, ok: bool = True) -> str:
    done = subprocess.run([sys.executable, "-m", "strom", *args, "--bootstrap-server", cluster.bootstrap],
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    if ok:
        assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout + done.stderr


def write(tmp_path, name: str, doc: dict) -> str:
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return str(path)


def test_generate_prints_the_current_and_a_proposed_assignment_in_kafkas_layout(cluster, tmp_path):
    topics = write(tmp_path, "topics.json", {"version": 1, "topics": [{"topic": TOPIC}]})
    out = strom(cluster, "reassign-partitions", "--generate", "--topics-to-move-json-file", topics,
                "--broker-list", "5,6,7").splitlines()
    assert out[0] == "Current partition replica assignment"
    assert out[3] == "Proposed partition reassignment configuration"
    current, proposed = json.loads(out[1]), json.loads(out[4])
    replicas = {p: tuple(cluster.partition(TOPIC, p).replicas) for p in (0, 1)}
    assert current == {"version": 1, "partitions": [
        {"topic": TOPIC, "partition": p, "replicas": list(replicas[p]), "log_dirs": ["any"] * 3}
        for p in (0, 1)]}
    assert [(p["topic"], p["partition"]) for p in proposed["partitions"]] == [(TOPIC, 0), (TOPIC, 1)]
    assert all(sorted(p["replicas"]) == [5, 6, 7] for p in proposed["partitions"])


def test_a_partition_moved_to_another_broker_under_produce_load_loses_nothing(cluster, tmp_path):
    from confluent_kafka import Producer

    before = cluster.partition(TOPIC, 0).replicas
    newcomer = ({4, 5, 6, 7} - set(before)).pop()
    target = [*before[1:], newcomer]  # the first replica leaves, the fourth broker joins
    plan = write(tmp_path, "plan.json", {"version": 1, "partitions": [
        {"topic": TOPIC, "partition": 0, "replicas": target, "log_dirs": ["any"] * 3}]})

    acks, stop = AckedRecords(), threading.Event()
    producer = Producer({**cluster.client_config(), "acks": "all", "enable.idempotence": True,
                         "linger.ms": 5})

    def produce() -> None:
        i = 0
        while not stop.is_set():
            producer.produce(TOPIC, f"v{i:07d}".encode() * 20, partition=0, on_delivery=acks)
            producer.poll(0)
            i += 1
            if i % 200 == 0:
                time.sleep(0.01)
        producer.flush(30)

    writer = threading.Thread(target=produce)
    writer.start()
    try:
        time.sleep(1.0)
        out = strom(cluster, "reassign-partitions", "--execute",
                    "--reassignment-json-file", plan).splitlines()
        assert out[:3] == ["Current partition replica assignment", "",
                           json.dumps({"version": 1, "partitions": [
                               {"topic": TOPIC, "partition": 0, "replicas": list(before),
                                "log_dirs": ["any"] * 3}]}, separators=(",", ":"))]
        assert out[-1] == f"Successfully started partition reassignment for {TOPIC}-0"
        deadline = time.monotonic() + 30
        while True:
            verified = strom(cluster, "reassign-partitions", "--verify", "--reassignment-json-file", plan)
            if "is completed" in verified or time.monotonic() > deadline:
                break
            assert f"Reassignment of partition {TOPIC}-0 is still in progress." in verified
            time.sleep(0.5)
        time.sleep(1.0)
    finally:
        stop.set()
        writer.join(60)
    assert verified.splitlines() == [
        "Status of partition reassignment:", f"Reassignment of partition {TOPIC}-0 is completed.",
        "Clearing broker-level throttles on brokers 4,5,6,7",
        f"Clearing topic-level throttles on topic {TOPIC}"]
    assert acks.errors == [] and acks.count() > 0
    assert tuple(cluster.wait_for_isr(TOPIC, 0, target).replicas) == tuple(target)
    cluster.assert_all_acknowledged(acks, target)
    assert strom(cluster, "reassign-partitions", "--list") == "No partition reassignments found.\n"
    assert strom(cluster, "reassign-partitions", "--cancel", "--reassignment-json-file", plan) == (
        "None of the specified partition reassignments are active.\n")


def test_preferred_election_of_a_partition_led_by_its_preferred_replica_is_not_needed(cluster):
    p = cluster.wait_for_leader(TOPIC, 1)
    assert p.leader == p.replicas[0]
    out = strom(cluster, "leader-election", "--election-type", "preferred",
                "--topic", TOPIC, "--partition", "1")
    assert out == f"Valid replica already elected for partitions {TOPIC}-1\n"


def test_an_unknown_broker_in_the_plan_is_refused_and_nothing_moves(cluster, tmp_path):
    before = cluster.partition(TOPIC, 1).replicas
    plan = write(tmp_path, "bad.json", {"version": 1, "partitions": [
        {"topic": TOPIC, "partition": 1, "replicas": [4, 5, 99]}]})
    out = strom(cluster, "reassign-partitions", "--execute", "--reassignment-json-file", plan, ok=False)
    assert "Unknown broker id 99" in out and "Traceback" not in out
    assert cluster.partition(TOPIC, 1).replicas == before


THROTTLED, RATE = "throttled", 200_000  # bytes per second


def copied_bytes(cluster: ReplicatedCluster, broker_id: int, topic: str) -> int:
    """The bytes of the partition's segments a broker holds on disk."""
    import glob
    import os
    return sum(os.path.getsize(f) for f in glob.glob(os.path.join(cluster.partition_dir(broker_id, topic, 0),
                                                                   "*.log")))


def test_a_throttled_move_copies_at_the_throttled_rate_under_load_and_loses_nothing(cluster, tmp_path):
    """kafka-reassign-partitions --throttle: the leader's and the new follower's replication
    quotas hold the copy to the rate. Kafka's Rate is measured over at least all but one of its
    windows, so a move first goes that many seconds' worth of the bound at full speed, and the
    rate then moves in steps of a window: the module's brokers measure over two one-second
    windows (replication.quota.window.num) and back off a throttled partition 100 ms
    (replica.fetch.backoff.ms), and the rate is measured from 2x the bound copied until 90% of
    what the partition held when the move began."""
    from confluent_kafka import Producer

    cluster.create_topic(THROTTLED, partitions=1, replication_factor=3)
    before = cluster.wait_for_leader(THROTTLED, 0).replicas
    newcomer = ({4, 5, 6, 7} - set(before)).pop()
    target = [*before[1:], newcomer]
    acks = AckedRecords()
    producer = Producer({**cluster.client_config(), "acks": "all", "enable.idempotence": True,
                         "linger.ms": 5, "batch.size": 16384})
    for i in range(2000):  # ~2 MB: ten seconds at the bound
        producer.produce(THROTTLED, f"p{i:07d}".encode() * 125, partition=0, on_delivery=acks)
        producer.poll(0)
    producer.flush(60)
    held = copied_bytes(cluster, before[0], THROTTLED)
    plan = write(tmp_path, "throttled.json", {"version": 1, "partitions": [
        {"topic": THROTTLED, "partition": 0, "replicas": target, "log_dirs": ["any"] * 3}]})

    stop = threading.Event()

    def produce() -> None:
        """A light load throughout, ~5 KB/s: the leader's quota counts what it serves its in-sync
        followers of the partition too (Kafka's sizeOfThrottledPartitions), so a load near the
        bound would leave the new replica nothing."""
        i = 2000
        while not stop.wait(0.2):
            producer.produce(THROTTLED, f"q{i:07d}".encode() * 125, partition=0, on_delivery=acks)
            producer.poll(0)
            i += 1
        producer.flush(30)

    writer = threading.Thread(target=produce)
    writer.start()
    samples: list[tuple[float, int]] = []
    try:
        out = strom(cluster, "reassign-partitions", "--execute", "--throttle", str(RATE),
                    "--reassignment-json-file", plan)
        assert f"Successfully started partition reassignment for {THROTTLED}-0" in out
        deadline = time.monotonic() + 40
        while copied_bytes(cluster, newcomer, THROTTLED) < held and time.monotonic() < deadline:
            samples.append((time.monotonic(), copied_bytes(cluster, newcomer, THROTTLED)))
            time.sleep(0.2)
        while True:
            verified = strom(cluster, "reassign-partitions", "--verify", "--reassignment-json-file", plan)
            if "is completed" in verified or time.monotonic() > deadline:
                break
            time.sleep(0.5)
    finally:
        stop.set()
        writer.join(60)
    assert f"Reassignment of partition {THROTTLED}-0 is completed." in verified, (held, samples[::5])
    steady = [(t, b) for t, b in samples if 2 * RATE <= b <= 0.9 * held]
    assert len(steady) >= 10, (held, samples)
    (t0, b0), (t1, b1) = steady[0], steady[-1]
    measured = (b1 - b0) / (t1 - t0)
    assert 0.8 * RATE <= measured <= 1.2 * RATE, (measured, held, samples)
    assert acks.errors == []
    assert tuple(cluster.wait_for_isr(THROTTLED, 0, target).replicas) == tuple(target)
    cluster.assert_all_acknowledged(acks, target)
