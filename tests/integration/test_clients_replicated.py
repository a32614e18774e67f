"""The five real clients against a replicated cluster: 3 controllers and 3 brokers on loopback
(ReplicatedCluster: default.replication.factor 3, min.insync.replicas 2,
offsets.topic.replication.factor 3), one cluster for the whole module.

What each client must see there that a single node cannot show:

| test                                  | the rule it checks                                         |
|---------------------------------------|------------------------------------------------------------|
| acks 0 / 1 / all, every codec         | each partition is written through its own leader, and      |
|                                       | every record a consumer reads (below the high watermark)   |
|                                       | is held by every ISR member, byte for byte the same        |
| explicit partitions                   | the client routes each partition to its leader, which the  |
|                                       | striped placement spreads over all three brokers           |
| idempotent producer                   | each message once; every replica holds the same producer   |
|                                       | id and sequences (what a follower rebuilds its producer    |
|                                       | state from)                                                |
| admin create / describe               | the topic has 3 replicas and an ISR of 3 on every          |
|                                       | partition, as the client's own Metadata request tells      |
| group commit + resume                 | offsets committed to the replicated __consumer_offsets     |
|                                       | resume the group where it stopped                          |
| leader killed (slow)                  | acks=all records survive kill -9 of their leader; the      |
|                                       | client, bootstrapped with the dead broker too, writes and  |
|                                       | reads through the new leaders; the broker rejoins the ISR  |

The default run takes one codec per client, five codecs in all; the other codecs and the
kill -9 test are ``slow``. Helpers (messages, the exactly-once check, the client parameters) are
test_clients.py's.
"""
from __future__ import annotations

import uuid
from collections import defaultdict

import pytest

from .clients import CODECS
from .clients import confluent as reference
from .test_clients import (
    CLIENTS,
    PARTITIONS,
    _eventually,
    assert_exactly,
    produce_at_every_acks,
    text_messages,
)

pytestmark = pytest.mark.timeout(180)

REPLICATION_FACTOR = 3
BROKERS = {4, 5, 6}  # ReplicatedCluster's broker ids (controllers are 1-3)
# one codec per client in the default run, each codec once across the five clients
DEFAULT_CODEC = {"confluent": "zstd", "kafka_python": "gzip", "aiokafka_client": "lz4",
                 "kcat": "snappy", "kafkajs": "none"}
CONSUMER_OFFSETS = "__consumer_offsets"


def _codec_param(client, codec):
    (module,) = client.values
    marks = [*client.marks, *(() if DEFAULT_CODEC[client.id] == codec else (pytest.mark.slow,))]
    return pytest.param(module, codec, id=f"{client.id}-{codec}", marks=marks)


CLIENT_CODECS = [_codec_param(client, codec) for client in CLIENTS for codec in CODECS]


# ---------------------------------------------------------------------------- helpers

def fully_replicated(cluster, topic, partitions):
    """A check for ``cluster.wait_until``: every live broker lists each partition of ``topic``
    with ``REPLICATION_FACTOR`` replicas, all of them in the ISR, one of them the leader."""
    def check(views):
        for view in views.values():
            mine = [] if view is None else [p for p in view.partitions if p.topic == topic]
            if len(mine) != partitions or any(
                    len(p.replicas) != REPLICATION_FACTOR or set(p.isr) != set(p.replicas)
                    or p.leader not in p.replicas for p in mine):
                return None
        return sorted(mine, key=lambda p: p.partition)
    return check


def new_rf3_topic(cluster, partitions=PARTITIONS, config=None) -> str:
    topic = f"rf3-{uuid.uuid4().hex[:12]}"
    reference.create_topic(cluster.bootstrap, topic, partitions=partitions,
                           replication_factor=REPLICATION_FACTOR, config=config)
    cluster.wait_until(f"{topic} fully replicated", fully_replicated(cluster, topic, partitions))
    return topic


def assert_every_isr_member_holds(cluster, topic, records):
    """Consumers read only below the high watermark, and everything below it is on every ISR
    member: each replica of the (full) ISR holds exactly the consumed records at the same
    offsets, read from its segment files."""
    by_partition = defaultdict(list)
    for r in records:
        by_partition[r.partition].append((r.offset, r.key, r.value))
    for partition, want in sorted(by_partition.items()):
        isr = cluster.isr_of(topic, partition)
        assert isr == BROKERS, f"{topic}-{partition}: ISR {sorted(isr)}"
        for broker in sorted(isr):
            held = [(s.offset, s.key, s.value) for s in cluster.replica_records(broker, topic, partition)]
            assert held == sorted(want), (
                f"{topic}-{partition} on broker {broker}: holds {len(held)} records, "
                f"consumers read {len(want)}; first difference "
                f"{next(((h, w) for h, w in zip(held, sorted(want)) if h != w), None)}")


# ---------------------------------------------------------------------------- produce + consume

@pytest.mark.parametrize(("client", "codec"), CLIENT_CODECS)
def test_every_acks_level_is_read_back_exactly_and_held_by_every_isr_member(replicated_node, client, codec):
    cluster = replicated_node
    topic = new_rf3_topic(cluster)
    sent = produce_at_every_acks(client, cluster.bootstrap, topic, codec)
    assigned = client.consume_assign(cluster.bootstrap, topic, range(PARTITIONS), len(sent), timeout=30)
    assert_exactly(assigned, sent, cluster, topic)
    assert_every_isr_member_holds(cluster, topic, assigned)
    grouped = client.consume_group(cluster.bootstrap, topic, f"g-{topic}", len(sent), timeout=45)
    assert_exactly(grouped, sent)


@pytest.mark.parametrize("client", CLIENTS)
def test_explicit_partitions_are_written_through_leaders_on_every_broker(replicated_node, client):
    cluster = replicated_node
    topic = new_rf3_topic(cluster)
    leaders = {p: cluster.leader_of(topic, p) for p in range(PARTITIONS)}
    assert set(leaders.values()) == BROKERS, f"striped placement leads one partition per broker: {leaders}"
    sent = [(None, f"p{p}-{i}".encode(), [("h", b"v")], p) for p in range(PARTITIONS) for i in range(4)]
    client.produce(cluster.bootstrap, topic, sent, acks="all")
    records = client.consume_assign(cluster.bootstrap, topic, range(PARTITIONS), len(sent), timeout=30)
    assert sorted((r.partition, r.offset, r.key, r.value) for r in records) == sorted(
        (p, i, None, f"p{p}-{i}".encode()) for p in range(PARTITIONS) for i in range(4))
    assert_every_isr_member_holds(cluster, topic, records)


@pytest.mark.parametrize("client", CLIENTS)
def test_idempotent_producer_writes_each_message_once_and_followers_hold_its_sequences(
        replicated_node, client):
    cluster = replicated_node
    topic = new_rf3_topic(cluster)
    sent = text_messages(60, "idempotent")
    client.produce(cluster.bootstrap, topic, sent, acks="all", compression="lz4", idempotent=True)
    records = client.consume_assign(cluster.bootstrap, topic, range(PARTITIONS), len(sent), timeout=30)
    assert_exactly(records, sent, cluster, topic)
    assert_every_isr_member_holds(cluster, topic, records)
    for partition in range(PARTITIONS):
        held = {b: [(s.offset, s.producer_id, s.sequence)
                    for s in cluster.replica_records(b, topic, partition)] for b in sorted(BROKERS)}
        leader = cluster.leader_of(topic, partition)
        assert all(pid >= 0 and seq == offset for offset, pid, seq in held[leader]), (
            f"{topic}-{partition}: one producer, sequences from 0 at offset 0: {held[leader][:5]}")
        assert all(h == held[leader] for h in held.values()), f"{topic}-{partition}: {held}"


# ---------------------------------------------------------------------------- admin

@pytest.mark.parametrize("client", CLIENTS)
def test_admin_created_topic_has_three_replicas_in_sync_on_every_partition(replicated_node, client):
    cluster, partitions = replicated_node, 4
    bootstrap, topic = cluster.bootstrap, f"admin-{uuid.uuid4().hex[:12]}"
    creator = client if "create_topic" in client.ADMIN else reference
    creator.create_topic(bootstrap, topic, partitions=partitions, replication_factor=REPLICATION_FACTOR,
                         config={"cleanup.policy": "delete"})
    on_every_broker = cluster.wait_until(f"{topic} fully replicated",
                                         fully_replicated(cluster, topic, partitions))

    described = {}

    def client_sees_full_isr():
        described.update(client.describe_replicas(bootstrap, topic))
        return sorted(described) == list(range(partitions)) and all(
            len(p.replicas) == REPLICATION_FACTOR and set(p.isr) == set(p.replicas) == BROKERS
            and p.leader in p.replicas for p in described.values())

    assert _eventually(client_sees_full_isr), f"{client.NAME} describes {described}"
    assert {p.partition: (p.leader, set(p.replicas), set(p.isr)) for p in on_every_broker} == {
        i: (p.leader, set(p.replicas), set(p.isr)) for i, p in described.items()}
    assert {p.leader for p in described.values()} == BROKERS, described
    leaders = {i: p.leader for i, p in described.items()}
    assert client.describe_topic(bootstrap, topic)["partitions"] == leaders

    if "alter_topic_config" in client.ADMIN:
        client.alter_topic_config(bootstrap, topic, {"retention.ms": "4321000"})
        assert _eventually(lambda: reference.describe_topic_config(bootstrap, topic).get("retention.ms")
                           == "4321000")
        if "describe_topic_config" in client.ADMIN:
            assert client.describe_topic_config(bootstrap, topic)["retention.ms"] == "4321000"
    if "delete_topic" in client.ADMIN:
        client.delete_topic(bootstrap, topic)
        assert _eventually(lambda: all(
            view is not None and all(p.topic != topic for p in view.partitions)
            for view in cluster.views().values())), f"{topic} still listed"


# ---------------------------------------------------------------------------- groups

@pytest.mark.parametrize("client", CLIENTS)
def test_committed_offsets_resume_the_group_where_it_stopped(replicated_node, client):
    cluster = replicated_node
    topic = new_rf3_topic(cluster)
    group = f"g-{topic}"
    sent = text_messages(30, "resume")
    reference.produce(cluster.bootstrap, topic, sent, acks="all")
    first = client.consume_group(cluster.bootstrap, topic, group, 12, timeout=45)
    committed = reference.committed(cluster.bootstrap, topic, group, range(PARTITIONS))
    last = defaultdict(lambda: -1)
    for r in first:
        last[r.partition] = max(last[r.partition], r.offset)
    assert {p: o for p, o in committed.items() if p in last} == {p: o + 1 for p, o in last.items()}
    rest = client.consume_group(cluster.bootstrap, topic, group, len(sent) - len(first), timeout=45)
    assert_exactly(first + rest, sent, cluster, topic)


def test_consumer_offsets_is_replicated_three_ways_once_a_group_commits(replicated_node):
    partitions = wait_for_offsets_topic(replicated_node)
    assert all(set(p.replicas) == BROKERS for p in partitions), partitions


def wait_for_offsets_topic(cluster):
    """A group commits (creating ``__consumer_offsets`` if this is the first group: Kafka refuses
    to create it with fewer brokers up than offsets.topic.replication.factor, so do this while all
    three are); then wait until every broker lists each of its partitions fully replicated."""
    topic = new_rf3_topic(cluster)
    reference.produce(cluster.bootstrap, topic, text_messages(3, "offsets"), acks="all")
    reference.consume_group(cluster.bootstrap, topic, f"g-{topic}", 3, timeout=45)

    def offsets_partitions(views):
        listed = next(([p for p in v.partitions if p.topic == CONSUMER_OFFSETS]
                       for v in views.values() if v is not None), [])
        return fully_replicated(cluster, CONSUMER_OFFSETS, len(listed))(views) if listed else None

    return cluster.wait_until(f"{CONSUMER_OFFSETS} fully replicated", offsets_partitions)


# ---------------------------------------------------------------------------- failover

@pytest.mark.slow
@pytest.mark.parametrize("client", CLIENTS)
def test_acks_all_records_survive_their_leaders_kill9_and_the_client_follows_the_new_leaders(
        replicated_node, client):
    """The bootstrap still lists the killed broker, as a client's configuration would. The
    group coordinator must be reachable on two brokers (kafkajs reads through a group), so the
    offsets topic exists before the kill, and is back to an ISR of 3 before the next test."""
    cluster = replicated_node
    wait_for_offsets_topic(cluster)
    every_broker = ",".join(cluster.brokers[b].bootstrap for b in sorted(BROKERS))
    topic = new_rf3_topic(cluster)
    before = text_messages(15, "before")
    client.produce(every_broker, topic, before, acks="all")
    victim = cluster.leader_of(topic, 0)
    cluster.kill9(victim)
    try:
        for partition in range(PARTITIONS):
            cluster.wait_for_leader(topic, partition, exclude={victim})
        after = text_messages(15, "after")
        client.produce(every_broker, topic, after, acks="all")
        records = client.consume_assign(every_broker, topic, range(PARTITIONS), 30, timeout=45)
        assert_exactly(records, before + after, cluster, topic)
    finally:
        cluster.restart(victim)
    for partition in range(PARTITIONS):
        cluster.wait_for_isr(topic, partition, BROKERS)
    wait_for_offsets_topic(cluster)
    assert_every_isr_member_holds(cluster, topic, records)


def test_delete_records_answers_once_every_replica_raised_its_log_start(replicated_node):
    """confluent-kafka's delete_records on RF=3: answered once every replica's log start
    offset reached the offset (the low watermark, Kafka's DelayedDeleteRecords), within the
    request's timeout; consumers start there."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient

    cluster = replicated_node
    topic = new_rf3_topic(cluster, partitions=1)
    sent = [(None, f"d-{i}".encode(), [], 0) for i in range(50)]
    reference.produce(cluster.bootstrap, topic, sent, acks="all")
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    futures = admin.delete_records([TopicPartition(topic, 0, 30)], request_timeout=30)
    deleted = next(iter(futures.values())).result(30)
    assert deleted.low_watermark == 30  # the leader's and both followers' log start offsets
    records = reference.consume_assign(cluster.bootstrap, topic, [0], 20, timeout=30)
    assert [r.offset for r in records] == list(range(30, 50))
