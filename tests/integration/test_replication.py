"""Replication on real processes: 3 controllers and 3 brokers on loopback, topics of RF 3 with
min.insync.replicas 2, an idempotent acks=all confluent-kafka producer writing without pause.

Every scenario ends by reading each replica's segment files and checking that every record the
producer saw acknowledged is there exactly once and in order (tests/integration/replicated_cluster.py).
The default run does a short version of each scenario; ``-m slow`` runs the long ones (20 kills).
Stalls (kill -> the first acknowledgement of a record sent after the kill on a partition the
killed broker led) are printed with ``-s``.
"""
from __future__ import annotations

import asyncio
import os
import statistics
import threading
import time

import pytest

from tests.integration.replicated_cluster import AckedRecords, ReplicatedCluster

confluent_kafka = pytest.importorskip("confluent_kafka")

pytestmark = pytest.mark.timeout(300)
BROKERS = (4, 5, 6)
PARTITIONS = 12


class Writer:
    """An idempotent acks=all producer writing values ``<tag>-<n>`` round-robin to every partition
    of a topic from its own thread until stopped, keeping what was acknowledged."""

    def __init__(self, cluster: ReplicatedCluster, topic: str, partitions: int, tag: str = "w",
                 rate_per_s: int = 2000, **config) -> None:
        self.topic = topic
        self.partitions = partitions
        self.tag = tag
        self.rate = rate_per_s
        self.acks = AckedRecords()
        self.ack_times: dict[int, list[float]] = {p: [] for p in range(partitions)}
        self.sent = 0
        self.producer = confluent_kafka.Producer({
            "bootstrap.servers": ",".join(cluster.brokers[b].bootstrap for b in cluster.brokers),
            "enable.idempotence": True, "acks": "all", "linger.ms": 5,
            "message.timeout.ms": 120000, "topic.metadata.refresh.interval.ms": 1000, **config})
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _delivered(self, err, msg) -> None:
        self.acks(err, msg)
        if err is None:
            self.ack_times[msg.partition()].append(time.monotonic())

    def _run(self) -> None:
        started = time.monotonic()
        while not self._stop.is_set():
            due = int((time.monotonic() - started) * self.rate)
            while self.sent < due and not self._stop.is_set():
                try:
                    self.producer.produce(self.topic, f"{self.tag}-{self.sent}".encode(),
                                          partition=self.sent % self.partitions, on_delivery=self._delivered)
                except BufferError:
                    break
                self.sent += 1
            self.producer.poll(0.01)

    def start(self) -> Writer:
        self._thread.start()
        return self

    def acked_since(self, partition: int, t: float) -> int:
        return sum(1 for a in self.ack_times[partition] if a >= t)

    def first_ack_after(self, partitions, t: float) -> float | None:
        """The time of the first acknowledgement after ``t`` on each partition, the latest of them."""
        latest = None
        for p in partitions:
            after = [a for a in self.ack_times[p] if a > t]
            if not after:
                return None
            latest = max(latest or 0.0, after[0])
        return latest

    def stop(self, timeout: float = 120) -> None:
        self._stop.set()
        self._thread.join(30)
        left = self.producer.flush(timeout)
        assert left == 0, f"{left} records still unacknowledged after {timeout} s"
        assert not self.acks.errors, f"delivery errors: {self.acks.errors[:10]}"


@pytest.fixture(scope="module")
def cluster():
    with ReplicatedCluster(broker_extra={"replica.lag.time.max.ms": "4000"}) as c:
        yield c


@pytest.fixture(autouse=True)
def all_brokers_back(cluster):
    yield
    for b in BROKERS:
        if b in cluster.paused:
            cluster.resume(b)
        if not cluster.brokers[b].running:
            cluster.restart(b)


def led_by(cluster: ReplicatedCluster, topic: str, broker: int, partitions: int = PARTITIONS) -> list[int]:
    return [p for p in range(partitions) if cluster.leader_of(topic, p) == broker]


def wait_for_full_isrs(cluster: ReplicatedCluster, topic: str, partitions: int = PARTITIONS,
                       timeout: float = 60) -> None:
    for p in range(partitions):
        cluster.wait_for_isr(topic, p, BROKERS, timeout)


def kill_and_restart_leaders(cluster: ReplicatedCluster, topic: str, kills: int) -> list[float]:
    """Kill -9 the leader of a partition (a different broker each time), measure how long until
    every partition it led acknowledged a new record, restart it and wait for the full ISRs."""
    writer = Writer(cluster, topic, PARTITIONS).start()
    stalls = []
    try:
        time.sleep(1.0)
        for i in range(kills):
            victim = cluster.leader_of(topic, i % PARTITIONS)
            led = led_by(cluster, topic, victim)
            killed_at = time.monotonic()
            cluster.kill9(victim)
            deadline = killed_at + 60
            while (resumed := writer.first_ack_after(led, killed_at)) is None:
                assert time.monotonic() < deadline, f"partitions {led} took no write for 60 s after kill {i}"
                time.sleep(0.01)
            stalls.append(resumed - killed_at)
            cluster.restart(victim)
            wait_for_full_isrs(cluster, topic)
    finally:
        writer.stop()
    wait_for_full_isrs(cluster, topic)
    cluster.assert_all_acknowledged(writer.acks, brokers=BROKERS)
    assert writer.acks.count() > 0
    return stalls


def report(what: str, stalls: list[float]) -> None:
    if stalls:
        print(f"\n{what}: {len(stalls)} stalls, min {min(stalls):.3f} s, median "
              f"{statistics.median(stalls):.3f} s, max {max(stalls):.3f} s: "
              + " ".join(f"{s:.3f}" for s in stalls))


@pytest.mark.parametrize("kills", [1, pytest.param(20, marks=pytest.mark.slow)])
def test_killed_leaders_lose_no_acknowledged_record(cluster, kills):
    """One kill -9 of a leader in the default run (the module's other scenarios kill leaders
    too), twenty under ``-m slow``."""
    topic = f"kills{kills}"
    cluster.create_topic(topic, PARTITIONS, 3, {"min.insync.replicas": "2"})
    report(f"kill -9 of a leader ({kills})", kill_and_restart_leaders(cluster, topic, kills))


def test_lost_disk_re_replicates_and_loses_nothing_acknowledged(cluster):
    topic = "lostdisk"
    cluster.create_topic(topic, PARTITIONS, 3, {"min.insync.replicas": "2"})
    writer = Writer(cluster, topic, PARTITIONS).start()
    try:
        time.sleep(1.0)
        victim = cluster.leader_of(topic, 0)
        cluster.kill9(victim)
        time.sleep(1.0)
        removed = cluster.wipe_partitions(victim, [topic])
        assert len(removed) == PARTITIONS
        cluster.restart(victim)
        wait_for_full_isrs(cluster, topic)
        time.sleep(0.5)
    finally:
        writer.stop()
    wait_for_full_isrs(cluster, topic)
    cluster.assert_all_acknowledged(writer.acks, brokers=BROKERS)


def flip_last_epoch(partition_dir: str) -> None:
    """Set a high bit of the partitionLeaderEpoch of the last batch of the active segment."""
    name = sorted(n for n in os.listdir(partition_dir) if n.endswith(".log"))[-1]
    path = os.path.join(partition_dir, name)
    with open(path, "r+b") as f:
        data = f.read()
        position = last = 0
        while position + 12 <= len(data):
            last = position
            position += 12 + int.from_bytes(data[position + 8:position + 12], "big")
        f.seek(last + 12)
        f.write(bytes([data[last + 12] ^ 0x10]))


@pytest.mark.parametrize("flip", [False, True])
def test_the_only_in_sync_replica_losing_its_disk_elects_the_most_complete_replica_and_loses_nothing(
        cluster, flip):
    """The 100-trial soak's seed 1032. The followers are killed one after the other and come
    back uncleanly (out of ISR and ELR), then the leader, the only in-sync replica, is killed
    and comes back with an empty disk. It is the last known leader; electing it (Kafka 4.x's
    balanced recovery) would make the others truncate to nothing. The controller asks every
    replica for its log end and elects the most complete one: the follower that left last.

    With ``flip`` (seed 1013), the follower that left first also has a bit flipped in the
    partitionLeaderEpoch of its last batch, which the CRC does not cover: it would claim the
    latest epoch and win. Its recovery finds the batch's epoch is not the checkpointed one
    and truncates it."""
    topic = f"lastisr-{'flip' if flip else 'wipe'}"
    cluster.create_topic(topic, 1, 3, {"min.insync.replicas": "2"})
    leader = cluster.leader_of(topic, 0)
    first, last = [b for b in BROKERS if b != leader]
    writers = [Writer(cluster, topic, 1, tag="all3", rate_per_s=500).start()]
    time.sleep(1.0)
    writers[0].stop()
    cluster.kill9(first)
    cluster.wait_for_isr(topic, 0, {leader, last}, timeout=30)
    writers.append(Writer(cluster, topic, 1, tag="two", rate_per_s=500).start())
    time.sleep(1.0)
    writers[1].stop()
    assert writers[1].acks.count() > 0, "nothing acknowledged while only two replicas held it"
    cluster.kill9(last)
    cluster.wait_for_isr(topic, 0, {leader}, timeout=30)
    cluster.kill9(leader)
    time.sleep(2.0)  # fenced: ISR [], ELR [leader], last known leader [leader]
    if flip:
        flip_last_epoch(cluster.partition_dir(first, topic, 0))
    for b in (first, last):
        cluster.restart(b)  # uncleanly: neither is in the ISR or the ELR
    assert cluster.wipe_partitions(leader, [topic]) == [f"{topic}-0"]
    cluster.restart(leader)
    cluster.wait_for_isr(topic, 0, BROKERS, timeout=60)
    acked = writers[0].acks.acked[(topic, 0)] + writers[1].acks.acked[(topic, 0)]
    cluster.assert_acknowledged(topic, 0, acked, BROKERS)
    assert cluster.leader_of(topic, 0) == last
    said = "".join(open(c.log_path, errors="replace").read() for c in cluster.controllers.values())
    assert f"{topic}-0 had no in-sync or eligible replica left; balanced recovery elected {last}" in said
    assert produce_one(cluster, topic, 0, b"after", "all") is None


@pytest.mark.parametrize("how", ["kill9", "sigterm"])
def test_with_one_broker_down_every_partition_takes_acks_all_writes(cluster, how):
    topic = f"onedown-{how}"
    cluster.create_topic(topic, PARTITIONS, 3, {"min.insync.replicas": "2"})
    writer = Writer(cluster, topic, PARTITIONS).start()
    try:
        time.sleep(1.0)
        victim = BROKERS[0]
        led = led_by(cluster, topic, victim)
        stopped_at = time.monotonic()
        if how == "kill9":
            cluster.kill9(victim)
        else:
            assert cluster.terminate(victim) == 0
        deadline = stopped_at + 60
        while (resumed := writer.first_ack_after(range(PARTITIONS), stopped_at)) is None:
            assert time.monotonic() < deadline, "some partition took no write for 60 s"
            time.sleep(0.01)
        report(f"{how}: every partition writing again ({len(led)} led by the stopped broker)",
               [resumed - stopped_at])
        for p in range(PARTITIONS):
            cluster.wait_for_leader(topic, p, exclude=[victim])
        probe = time.monotonic()
        while slow := [p for p in range(PARTITIONS) if writer.acked_since(p, probe) == 0]:
            assert time.monotonic() < probe + 60, \
                f"partitions {slow} took no acks=all write with broker {victim} down"
            time.sleep(0.05)
    finally:
        writer.stop()
    cluster.restart(victim)
    wait_for_full_isrs(cluster, topic)
    cluster.assert_all_acknowledged(writer.acks, brokers=BROKERS)


def test_paused_follower_leaves_the_isr_and_rejoins_after_sigcont(cluster):
    topic = "paused"
    cluster.create_topic(topic, 1, 3, {"min.insync.replicas": "2"})
    leader = cluster.leader_of(topic, 0)
    follower = next(b for b in BROKERS if b != leader)
    writer = Writer(cluster, topic, 1, rate_per_s=500).start()
    try:
        time.sleep(0.5)
        cluster.pause(follower)
        # replica.lag.time.max.ms is 4 s here: out of the ISR after that, while the HW moves on.
        cluster.wait_for_isr(topic, 0, set(BROKERS) - {follower}, timeout=20)
        probe = time.monotonic()
        time.sleep(1.0)
        assert writer.acked_since(0, probe) > 0, "the HW did not move with the follower out of the ISR"
        cluster.resume(follower)
        cluster.wait_for_isr(topic, 0, BROKERS, timeout=30)
    finally:
        writer.stop()
    cluster.assert_all_acknowledged(writer.acks, brokers=BROKERS)


def produce_one(cluster: ReplicatedCluster, topic: str, partition: int, value: bytes, acks: str):
    """One record, no retries: the error code the broker answered (None if acknowledged)."""
    p = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap, "acks": acks,
                                  "enable.idempotence": False, "retries": 0,
                                  "message.timeout.ms": 10000})
    result = []
    p.produce(topic, value, partition=partition, on_delivery=lambda err, msg: result.append(err))
    p.flush(15)
    assert result, "no delivery report"
    return None if result[0] is None else result[0].name()


def test_two_replicas_down_refuse_acks_all_but_take_acks_1_and_lose_nothing(cluster):
    topic = "twodown"
    cluster.create_topic(topic, 1, 3, {"min.insync.replicas": "2"})
    writer = Writer(cluster, topic, 1, rate_per_s=200).start()
    time.sleep(0.5)
    writer.stop()
    survivor = cluster.leader_of(topic, 0)
    down = [b for b in BROKERS if b != survivor]
    for b in down:
        cluster.kill9(b)
    cluster.wait_for_isr(topic, 0, {survivor}, timeout=30)
    # KIP-966 through kafka-python's describe_topic_partitions (DescribeTopicPartitions): the
    # replicas that left the ISR below min.insync.replicas are eligible leader replicas.
    from kafka.admin import KafkaAdminClient
    admin = KafkaAdminClient(bootstrap_servers=cluster.brokers[survivor].bootstrap, request_timeout_ms=30000)
    try:
        [described] = admin.describe_topic_partitions([topic])["topics"]
    finally:
        admin.close()
    [p] = described["partitions"]
    assert (p["leader_id"], p["isr_nodes"]) == (survivor, [survivor])
    assert p["eligible_leader_replicas"] and set(p["eligible_leader_replicas"]) <= set(down), p
    assert sorted(p["offline_replicas"]) == sorted(down)
    assert produce_one(cluster, topic, 0, b"all", "all") == "NOT_ENOUGH_REPLICAS"
    assert produce_one(cluster, topic, 0, b"one", "1") is None
    for b in down:
        cluster.restart(b)
    cluster.wait_for_isr(topic, 0, BROKERS, timeout=60)
    assert produce_one(cluster, topic, 0, b"all-again", "all") is None
    cluster.assert_acknowledged(topic, 0, writer.acks.acked[(topic, 0)] + [b"one", b"all-again"], BROKERS)


def test_former_leader_returns_and_truncates_exactly_its_unreplicated_tail(cluster):
    topic = "tail"
    cluster.create_topic(topic, 1, 3, {"min.insync.replicas": "2"})
    writer = Writer(cluster, topic, 1, tag="committed", rate_per_s=200).start()
    time.sleep(0.5)
    writer.stop()
    old = cluster.leader_of(topic, 0)
    followers = [b for b in BROKERS if b != old]
    for b in followers:
        cluster.pause(b)
    # A Fetch the followers sent before they stopped is still parked at the leader: let it be
    # answered (replica.fetch.wait.max.ms), so nothing carries the tail into their sockets.
    time.sleep(1.0)
    tail = Writer(cluster, topic, 1, tag="tail", rate_per_s=200, acks="1", **{"enable.idempotence": False})
    tail.start()
    time.sleep(1.0)
    tail.stop()
    assert tail.acks.count() > 0
    held = [r.value for r in cluster.replica_records(old, topic, 0)]
    assert held[-tail.acks.count():] == tail.acks.acked[(topic, 0)]
    cluster.kill9(old)
    for b in followers:
        cluster.resume(b)
    cluster.wait_for_leader(topic, 0, exclude=[old])
    after = Writer(cluster, topic, 1, tag="after", rate_per_s=200).start()
    time.sleep(0.5)
    after.stop()
    cluster.restart(old)
    cluster.wait_for_isr(topic, 0, BROKERS, timeout=60)
    new_leader = cluster.leader_of(topic, 0)
    expected = [r.value for r in cluster.replica_records(new_leader, topic, 0)]
    assert [r.value for r in cluster.replica_records(old, topic, 0)] == expected
    assert not {v for v in expected if v.startswith(b"tail-")}, "the unreplicated tail survived"
    committed = writer.acks.acked[(topic, 0)] + after.acks.acked[(topic, 0)]
    cluster.assert_acknowledged(topic, 0, committed, BROKERS)
    assert len(expected) == len(committed)


def leader_recovery_states(cluster: ReplicatedCluster, topic: str) -> list[int]:
    """Every leader_recovery_state a PartitionRecord or PartitionChangeRecord of ``topic`` set,
    read from the active controller's metadata log."""
    from protocol.metadata_records import decode_record
    from tests.integration.replicated_cluster import read_partition_dir

    leader = cluster.quorum_leader().leader_id
    path = os.path.join(cluster.quorum.controllers[leader].metadata_dir, "__cluster_metadata-0")
    topic_id = None
    states = []
    for r in read_partition_dir(path):
        if r.value is None:
            continue
        try:
            record = decode_record(r.value)[2]
        except Exception:
            continue
        kind = type(record).__name__
        if kind == "TopicRecord" and record.name == topic:
            topic_id = record.topic_id
        elif kind in ("PartitionRecord", "PartitionChangeRecord") and record.topic_id == topic_id \
                and record.leader_recovery_state >= 0:  # -1: a change that leaves it as it was
            states.append(record.leader_recovery_state)
    return states


@pytest.mark.parametrize("unclean", ["false", "true"])
def test_unclean_leader_election_only_when_the_topic_allows_it(cluster, unclean):
    topic = f"unclean-{unclean}"
    cluster.create_topic(topic, 1, 3, {"min.insync.replicas": "1", "unclean.leader.election.enable": unclean})
    old = cluster.leader_of(topic, 0)
    others = [b for b in BROKERS if b != old]
    for b in others:
        cluster.kill9(b)
    cluster.wait_for_isr(topic, 0, {old}, timeout=30)
    only_on_old = Writer(cluster, topic, 1, tag="only-old", rate_per_s=200, acks="all").start()
    time.sleep(0.5)
    only_on_old.stop()
    cluster.kill9(old)
    for b in others:
        cluster.restart(b)
    if unclean == "false":
        time.sleep(3.0)
        assert cluster.leader_of(topic, 0) == -1, "a partition without an ISR member was led"
        cluster.restart(old)
        cluster.wait_for_leader(topic, 0)
        assert cluster.leader_of(topic, 0) == old
        cluster.wait_for_isr(topic, 0, BROKERS, timeout=60)
        cluster.assert_acknowledged(topic, 0, only_on_old.acks.acked[(topic, 0)], BROKERS)
    else:
        p = cluster.wait_for_leader(topic, 0, exclude=[old])
        assert p.leader in others
        assert 1 in leader_recovery_states(cluster, topic), "the unclean election was not marked RECOVERING"
        cluster.restart(old)
        cluster.wait_for_isr(topic, 0, BROKERS, timeout=60)
        assert leader_recovery_states(cluster, topic)[-1] == 0, "the partition never recovered"


def find_coordinator(cluster: ReplicatedCluster, group: str) -> int:
    """The group coordinator's node id, asked over FindCoordinator v3."""
    from protocol import messages as M
    from protocol.client import KafkaConnection

    async def ask():
        b = cluster.brokers[cluster.live_brokers()[0]]
        conn = KafkaConnection("127.0.0.1", b.port)
        await conn.connect()
        try:
            return await conn.request(10, 3, M.FindCoordinatorRequest(key=group, key_type=0))
        finally:
            await conn.close()

    response = asyncio.run(ask())
    assert response.error_code == 0, response
    return response.node_id


def test_committed_offsets_survive_killing_the_leader_of_their_offsets_partition(cluster):
    topic = "groups"
    cluster.create_topic(topic, 3, 3, {"min.insync.replicas": "2"})
    writer = Writer(cluster, topic, 3, rate_per_s=300).start()
    time.sleep(0.5)
    writer.stop()
    group = "survivors"
    config = {"bootstrap.servers": cluster.bootstrap, "group.id": group, "enable.auto.commit": False,
              "auto.offset.reset": "earliest"}
    consumer = confluent_kafka.Consumer(config)
    consumer.subscribe([topic])
    seen = 0
    deadline = time.monotonic() + 60
    while seen < 50 and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            seen += 1
    assert seen >= 50
    committed = consumer.commit(asynchronous=False)
    committed = {(tp.partition, tp.offset) for tp in committed}
    consumer.close()
    coordinator = find_coordinator(cluster, group)
    assert coordinator in BROKERS
    cluster.kill9(coordinator)
    again = confluent_kafka.Consumer({**config, "bootstrap.servers": cluster.bootstrap})
    parts = [confluent_kafka.TopicPartition(topic, p) for p in range(3)]
    deadline = time.monotonic() + 60
    while True:
        try:
            got = {(tp.partition, tp.offset) for tp in again.committed(parts, timeout=10)}
            if got == committed:
                break
        except confluent_kafka.KafkaException:
            got = None
        assert time.monotonic() < deadline, f"committed offsets {committed}, read back {got}"
        time.sleep(0.5)
    again.close()


def test_preferred_leader_election_through_a_broker_moves_leadership_back(cluster):
    """ElectLeaders (PREFERRED) sent by confluent-kafka's admin client to a broker, forwarded to
    the active controller: partitions whose leader moved away get their first replica back."""
    from confluent_kafka.admin import AdminClient

    topic = "preferred"
    cluster.create_topic(topic, 3, 3, {"min.insync.replicas": "2"})
    victim = cluster.leader_of(topic, 0)
    moved = led_by(cluster, topic, victim, 3)
    cluster.kill9(victim)
    for p in moved:
        cluster.wait_for_leader(topic, p, exclude=[victim])
    cluster.restart(victim)
    wait_for_full_isrs(cluster, topic, 3)
    assert all(cluster.leader_of(topic, p) != victim for p in moved)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    parts = [confluent_kafka.TopicPartition(topic, p) for p in moved]
    admin.elect_leaders(confluent_kafka.ElectionType.PREFERRED, parts).result(30)
    for p in moved:
        info = cluster.wait_until(f"{topic}-{p} led by its preferred replica",
                                  lambda views, p=p: cluster.partition(topic, p).leader
                                  == cluster.partition(topic, p).replicas[0])
        assert info
    assert all(cluster.leader_of(topic, p) == victim for p in moved)


def test_a_broker_killed_with_the_active_controller_is_fenced_without_waiting_out_its_session():
    """The new active controller never saw the broker's connection close; it tries every
    broker's listener when it takes over, and a refusal fences the dead one after the short
    grace period. The session timeout here is a minute: a leader that moves within it
    was moved by that, not by the session expiring. The cluster is secured as a production one
    (SASL_SSL on every listener, the controllers' and the inter-broker one included), and an
    idempotent acks=all producer writes through both kills and loses nothing acknowledged."""
    with ReplicatedCluster(controller_extra={"broker.session.timeout.ms": "60000"}, secure=True) as c:
        c.create_topic("together", 3, 3, {"min.insync.replicas": "2"})
        writer = Writer(c, "together", 3, rate_per_s=500, **c.client_config()).start()
        time.sleep(1.0)
        active = c.quorum_leader().leader_id
        victim = c.leader_of("together", 0)
        led = led_by(c, "together", victim, 3)
        killed_at = time.monotonic()
        c.controllers[active].kill9()
        c.kill9(victim)
        for p in led:
            c.wait_for_leader("together", p, exclude=[victim], timeout=40)
        moved = time.monotonic() - killed_at
        print(f"\nbroker {victim} and active controller {active} killed together: "
              f"its leaderships moved after {moved:.3f} s")
        survivors = set(BROKERS) - {victim}
        assert c.wait_for_metadata_agreement().unfenced >= survivors, "a live broker was fenced"
        agreed = time.monotonic()
        while writer.first_ack_after(range(3), agreed) is None:  # the writes go on after both kills
            assert time.monotonic() < agreed + 60, "no partition took a write for 60 s after the kills"
            time.sleep(0.05)
        writer.stop()
        c.assert_all_acknowledged(writer.acks)
        assert writer.acks.count() > 0


def rf2_topic_under_writer(cluster: ReplicatedCluster, topic: str) -> Writer:
    """A topic of one RF=2 partition (min.insync.replicas 1), a writer on it for a second."""
    cluster.create_topic(topic, 1, 2, {"min.insync.replicas": "1"})
    writer = Writer(cluster, topic, 1, rate_per_s=500).start()
    time.sleep(1.0)
    return writer


def rf2_roles(cluster: ReplicatedCluster, topic: str) -> tuple[int, int, int]:
    """(leader, the other replica, the broker that is not a replica) of an RF=2 partition 0."""
    info = cluster.partition(topic, 0)
    return (info.leader, next(b for b in info.replicas if b != info.leader),
            next(b for b in BROKERS if b not in info.replicas))


def wait_for_replicas(cluster: ReplicatedCluster, topic: str, replicas: tuple[int, ...]) -> None:
    """Until every live broker shows partition 0 on exactly ``replicas``, all of them in sync."""
    def moved(views):
        return all(v is None or any(p.topic == topic and p.replicas == replicas
                                    and set(p.isr) == set(replicas) for p in v.partitions)
                   for v in views.values())
    cluster.wait_until(f"{topic}: replicas not moved to {list(replicas)}", moved, 60)


def wait_for_no_dir(path: str, timeout: float = 30) -> bool:
    deadline = time.monotonic() + timeout
    while os.path.isdir(path) and time.monotonic() < deadline:
        time.sleep(0.1)
    return not os.path.isdir(path)


def test_reassignment_moves_a_partition_off_its_leader_while_acks_all_writes_go_on(cluster):
    """kafkajs's alterPartitionReassignments (KIP-455) moves an RF=2 partition off its leader to the
    third broker under an idempotent acks=all writer: the new replica catches up and joins the ISR,
    the reassignment completes with a new leader, the old replica's log is deleted, and every
    acknowledged record is on both new replicas exactly once and in order."""
    from tests.integration.clients import kafkajs

    topic = "reassign"
    writer = rf2_topic_under_writer(cluster, topic)
    try:
        leader, stays, added = rf2_roles(cluster, topic)
        old_dir = cluster.partition_dir(leader, topic, 0)
        assert os.path.isdir(old_dir)
        kafkajs.reassign(cluster.bootstrap, topic, {0: [added, stays]})
        wait_for_replicas(cluster, topic, (added, stays))
        assert cluster.leader_of(topic, 0) in (added, stays)
        assert kafkajs.list_reassignments(cluster.bootstrap, topic) == {}
        time.sleep(0.5)
    finally:
        writer.stop()
    assert wait_for_no_dir(old_dir), "the removed replica's log is deleted"
    assert writer.acks.count() > 500
    cluster.assert_all_acknowledged(writer.acks, brokers=(added, stays))
    # What an operator checks after a move: each broker's log dirs (kafka-python's
    # describe_log_dirs, DescribeLogDirs) list the partition where it now is, and only there.
    from kafka.admin import KafkaAdminClient
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=30000)
    try:
        answers = admin.describe_log_dirs({topic: [0]}, brokers=list(BROKERS))
    finally:
        admin.close()
    sizes = {a["broker"]: [p["partition_size"] for d in a["log_dirs"] if d["error_code"] == 0
                           for t in d["topics"] if t["name"] == topic for p in t["partitions"]]
             for a in answers}
    assert sizes[leader] == [], "the removed replica's broker no longer lists it"
    assert len(sizes[added]) == 1 and len(sizes[stays]) == 1 and sizes[added][0] > 0, sizes


def test_cancelled_reassignment_returns_to_the_original_replicas(cluster):
    """kafka-python's admin client: a reassignment to a broker that is down stays in progress
    (ListPartitionReassignments shows it); cancelling it (replicas None) restores the original
    assignment and ISR."""
    from kafka import TopicPartition
    from kafka.admin import KafkaAdminClient

    topic = "reassign-cancel"
    cluster.create_topic(topic, 1, 2, {"min.insync.replicas": "1"})
    original = cluster.partition(topic, 0).replicas
    added = next(b for b in BROKERS if b not in original)
    cluster.kill9(added)
    cluster.wait_until(f"broker {added} still listed", lambda views: all(
        v is None or added not in v.unfenced for v in views.values()), 30)  # clients ask a live one
    tp = TopicPartition(topic, 0)
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=30000)
    try:
        assert admin.alter_partition_reassignments({tp: [added, original[0]]}) == {tp: None}
        ongoing = admin.list_partition_reassignments([tp])
        assert ongoing == {tp: {"replicas": [added, original[0], original[1]], "adding_replicas": [added],
                                "removing_replicas": [original[1]]}}
        assert admin.alter_partition_reassignments({tp: None}) == {tp: None}
        cluster.wait_until(f"{topic}: not back to {original}", lambda views: all(
            v is None or any(p.topic == topic and p.replicas == original for p in v.partitions)
            for v in views.values()), 30)
        assert admin.list_partition_reassignments([tp]) == {}
        errors = admin.alter_partition_reassignments({tp: None})
        assert errors[tp].errno == 85  # NO_REASSIGNMENT_IN_PROGRESS
    finally:
        admin.close()
    assert set(cluster.isr_of(topic, 0)) == set(original)


def test_reassignment_survives_a_kill_9_of_the_leader_it_removes_and_loses_nothing(cluster):
    """The leader being moved off is killed with kill -9 right after the reassignment starts,
    while the replica being added is stopped (SIGSTOP) so that it has not caught up: the
    remaining ISR member leads, the new replica catches up from it and completes the
    reassignment, and the killed broker, restarted, is no longer a replica and deletes its copy.
    Every acknowledged record is on both new replicas exactly once and in order."""
    from tests.integration.clients import kafkajs

    topic = "reassign-kill"
    writer = rf2_topic_under_writer(cluster, topic)
    try:
        leader, stays, added = rf2_roles(cluster, topic)
        cluster.pause(added)  # so that it cannot catch up before the kill
        kafkajs.reassign(cluster.bootstrap, topic, {0: [added, stays]})
        cluster.kill9(leader)
        assert cluster.partition(topic, 0, on=stays).replicas == (added, stays, leader)
        cluster.resume(added)
        wait_for_replicas(cluster, topic, (added, stays))
        cluster.restart(leader)
        time.sleep(0.5)
    finally:
        writer.stop()
    assert wait_for_no_dir(cluster.partition_dir(leader, topic, 0)), \
        "the restarted broker is no longer a replica and deletes its copy"
    cluster.assert_all_acknowledged(writer.acks, brokers=(added, stays))


def test_describe_producers_shows_the_same_idempotent_state_on_the_leader_after_a_failover(cluster):
    """Idempotent producer state is rebuilt on followers from the replicated batches: kafka-python's
    describe_producers (DescribeProducers) gives the leader's state for an idempotent
    confluent-kafka producer, and after the leader's kill -9 the new leader reports the same
    producer id, epoch and last sequence; a follower asked directly answers NOT_LEADER_OR_FOLLOWER."""
    from kafka import TopicPartition
    from kafka.admin import KafkaAdminClient
    from kafka.errors import NotLeaderForPartitionError

    topic = "producers"
    cluster.create_topic(topic, 1, 3, {"min.insync.replicas": "2"})
    producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap, "enable.idempotence": True,
                                         "acks": "all", "linger.ms": 0})
    for i in range(50):
        producer.produce(topic, f"v{i}".encode(), partition=0)
        producer.poll(0)
    assert producer.flush(30) == 0
    tp = TopicPartition(topic, 0)
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=30000)
    try:
        [before] = admin.describe_producers([tp])[tp].active_producers
        assert before.last_sequence == 49 and before.coordinator_epoch == -1
        leader = cluster.leader_of(topic, 0)
        follower = next(b for b in BROKERS if b != leader)
        with pytest.raises(NotLeaderForPartitionError):  # NOT_LEADER_OR_FOLLOWER
            admin.describe_producers([tp], broker_id=follower)
        cluster.kill9(leader)
        new_leader = cluster.wait_for_leader(topic, 0, exclude=[leader]).leader
        [after] = admin.describe_producers([tp], broker_id=new_leader)[tp].active_producers
        assert (after.producer_id, after.producer_epoch, after.last_sequence) == (
            before.producer_id, before.producer_epoch, before.last_sequence)
    finally:
        admin.close()
