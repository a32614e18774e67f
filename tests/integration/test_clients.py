"""Real clients against a real `strom` node: every client x every codec x acks 0/1/all,
consumed back exactly by assignment and by group; committed offsets across kill -9;
idempotent producers; admin operations; a consumer group rebalancing.

Skipped as a whole until ``python3 -m strom start --help`` works; from then on it runs.
"""
import threading
import time
import uuid
from collections import Counter

import pytest

from .clients import CODECS, DRIVERS, driver
from .clients import confluent as reference

pytestmark = [
    pytest.mark.timeout(180),
]

PARTITIONS = 3


def _client_param(name):
    module = driver(name)
    return pytest.param(module, id=name, marks=pytest.mark.skipif(
        not module.AVAILABLE, reason=f"{name} is not installed (make setup installs it)"))


CLIENTS = [_client_param(name) for name in DRIVERS]


def new_topic(node, partitions=PARTITIONS, config=None) -> str:
    topic = f"t-{uuid.uuid4().hex[:12]}"
    reference.create_topic(node.bootstrap, topic, partitions=partitions, config=config)
    return topic


def text_messages(count, tag, headers=()):
    """UTF-8 keyed messages, compressible, one header set shared (kcat needs that)."""
    headers = [("tag", tag.encode()), *headers]
    return [(f"key-{i % 7}".encode(), f"{tag}-{i:05d}-".encode() + b"payload " * 20, headers)
            for i in range(count)]


def assert_exactly(records, messages, node=None, topic=None):
    """``records`` are ``messages``, each exactly once, at distinct offsets; with a node,
    the partitions hold nothing else (log end offsets add up to the count)."""
    got = Counter((r.key, r.value, tuple(r.headers)) for r in records)
    want = Counter((m[0], m[1], tuple(m[2])) for m in messages)
    assert got == want, f"missing {want - got}, unexpected {got - want}"
    assert len({(r.partition, r.offset) for r in records}) == len(records)
    by_key = {}
    for r in sorted(records, key=lambda r: (r.partition, r.offset)):
        by_key.setdefault(r.key, []).append(r.value)
    for key, values in by_key.items():  # one key, one partition, produce order
        assert values == [m[1] for m in messages if m[0] == key] or values == sorted(values), key
    if node is not None:
        ends = reference.end_offsets(node.bootstrap, topic, range(PARTITIONS))
        assert sum(ends.values()) == len(messages), ends


def every_acks(codec) -> list:
    """Ten messages for each of acks 0, 1 and all, by acks."""
    return [(acks, text_messages(10, f"{codec}-acks{acks}", headers=[("acks", str(acks).encode())]))
            for acks in (0, 1, "all")]


def produce_at_every_acks(client, bootstrap, topic, codec) -> list:
    """Ten messages at each of acks 0, 1 and all; every message sent."""
    sent = []
    for acks, batch in every_acks(codec):
        client.produce(bootstrap, topic, batch, acks=acks, compression=codec)
        sent += batch
    return sent


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("client", CLIENTS)
def test_produce_and_consume_every_codec_and_acks(shared_node, client, codec):
    """Ten messages produced at each acks, then consumed by assignment and by a group. kafkajs
    runs the five steps in one node process (its batch), the others one call each."""
    bootstrap, topic = shared_node.bootstrap, new_topic(shared_node)
    batches = every_acks(codec)
    sent = [m for _, batch in batches for m in batch]
    group = f"g-{topic}"
    if hasattr(client, "batch"):
        *_, assigned, grouped = client.batch(bootstrap, [
            *(("produce", {"topic": topic, "messages": batch, "acks": acks, "compression": codec})
              for acks, batch in batches),
            ("consume_assign", {"topic": topic, "partitions": range(PARTITIONS), "count": len(sent)}),
            ("consume_group", {"topic": topic, "group": group, "count": len(sent)})], timeout=120)
    else:
        produce_at_every_acks(client, bootstrap, topic, codec)
        assigned = client.consume_assign(bootstrap, topic, range(PARTITIONS), len(sent), timeout=30)
        grouped = client.consume_group(bootstrap, topic, group, len(sent), timeout=45)
    assert_exactly(assigned, sent, shared_node, topic)
    assert_exactly(grouped, sent)


@pytest.mark.parametrize("client", CLIENTS)
def test_produce_to_explicit_partitions_with_null_keys(shared_node, client):
    topic = new_topic(shared_node)
    sent = [(None, f"p{p}-{i}".encode(), [("h", b"v")], p) for p in range(PARTITIONS) for i in range(4)]
    client.produce(shared_node.bootstrap, topic, sent)
    records = client.consume_assign(shared_node.bootstrap, topic, range(PARTITIONS), len(sent), timeout=30)
    assert sorted((r.partition, r.offset, r.key, r.value) for r in records) == sorted(
        (p, i, None, f"p{p}-{i}".encode()) for p in range(PARTITIONS) for i in range(4))


@pytest.mark.timeout(300)  # five clients' consumes, each bounded by its own timeout
def test_committed_offsets_survive_kill9(strom_node):
    """Every client commits in a group of its own, one kill -9 and restart of the node, then each
    client resumes its group from the offsets it committed: the rest, each record once."""
    clients = [driver(name) for name in DRIVERS if driver(name).AVAILABLE]
    assert reference in clients  # confluent-kafka, a test dependency, writes the records below
    topic = new_topic(strom_node)
    sent = text_messages(30, "restart")
    reference.produce(strom_node.bootstrap, topic, sent, acks="all")
    first = {client.NAME: client.consume_group(strom_node.bootstrap, topic, f"g-{topic}-{client.NAME}", 12,
                                               timeout=45) for client in clients}
    strom_node.kill9()
    strom_node.restart()
    for client in clients:
        rest = client.consume_group(strom_node.bootstrap, topic, f"g-{topic}-{client.NAME}",
                                    len(sent) - len(first[client.NAME]), timeout=60)
        try:
            assert_exactly(first[client.NAME] + rest, sent, strom_node, topic)
        except AssertionError as e:
            raise AssertionError(f"{client.NAME}: {e}") from None


@pytest.mark.parametrize("client", CLIENTS)
def test_idempotent_producer_writes_each_message_once(shared_node, client):
    topic = new_topic(shared_node)
    sent = text_messages(60, "idempotent")
    client.produce(shared_node.bootstrap, topic, sent, acks="all", compression="lz4", idempotent=True)
    records = client.consume_assign(shared_node.bootstrap, topic, range(PARTITIONS), len(sent), timeout=30)
    assert_exactly(records, sent, shared_node, topic)


@pytest.mark.slow
def test_idempotent_producer_retries_across_kill9_without_duplicates(strom_node):
    """librdkafka keeps producing while the node is killed and restarted; retried batches
    the log already holds must be deduplicated from the recovered producer state."""
    topic = new_topic(strom_node)
    sent = text_messages(3000, "retry")
    errors = []
    producing = threading.Thread(target=lambda: _produce_catching(strom_node, topic, sent, errors))
    producing.start()
    time.sleep(1.0)
    strom_node.kill9()
    time.sleep(0.5)
    strom_node.restart()
    producing.join(120)
    assert not producing.is_alive() and not errors, errors
    records = reference.consume_assign(strom_node.bootstrap, topic, range(PARTITIONS), len(sent), timeout=60)
    assert_exactly(records, sent, strom_node, topic)


def _produce_catching(node, topic, messages, errors):
    try:
        for i in range(0, len(messages), 100):  # slices, so the kill lands mid-stream
            reference.produce(node.bootstrap, topic, messages[i:i + 100], acks="all",
                              idempotent=True, timeout=90)
    except Exception as e:  # reported by the test thread
        errors.append(e)


@pytest.mark.parametrize("client", CLIENTS)
def test_admin_create_describe_alter_delete(shared_node, client):
    bootstrap, topic = shared_node.bootstrap, f"admin-{uuid.uuid4().hex[:12]}"
    if "create_topic" not in client.ADMIN:
        pytest.skip(f"{client.NAME} cannot create topics")
    client.create_topic(bootstrap, topic, partitions=4, config={"cleanup.policy": "delete"})
    assert reference.describe_topic(bootstrap, topic)["partitions"].keys() == {0, 1, 2, 3}
    described = client.describe_topic(bootstrap, topic)
    assert sorted(described["partitions"]) == [0, 1, 2, 3]
    assert set(described["partitions"].values()) == {shared_node.node_id}
    if "alter_topic_config" in client.ADMIN:
        client.alter_topic_config(bootstrap, topic, {"retention.ms": "4321000"})
        assert _eventually(lambda: reference.describe_topic_config(bootstrap, topic).get("retention.ms")
                           == "4321000")
        if "describe_topic_config" in client.ADMIN:
            assert client.describe_topic_config(bootstrap, topic)["retention.ms"] == "4321000"
    if "delete_topic" in client.ADMIN:
        client.delete_topic(bootstrap, topic)
        assert _eventually(lambda: topic not in _topics(bootstrap))


@pytest.mark.parametrize("client", [c for c in CLIENTS if "create_topic" not in driver(c.id).ADMIN])
def test_describe_only_clients_see_topics(shared_node, client):
    topic = new_topic(shared_node, partitions=2)
    described = client.describe_topic(shared_node.bootstrap, topic)
    assert described == {"partitions": {0: shared_node.node_id, 1: shared_node.node_id}}


def _topics(bootstrap):
    from confluent_kafka.admin import AdminClient
    return set(AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).topics)


def _eventually(check, timeout=15.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.2)
    return check()


# ---------------------------------------------------------------------------- a group rebalancing

def _member(bootstrap, group, topic):
    from confluent_kafka import Consumer
    consumer = Consumer({**reference.BASE, "bootstrap.servers": bootstrap, "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "session.timeout.ms": 6000, "heartbeat.interval.ms": 300})
    consumer.subscribe([topic])
    return consumer


def _balanced(members, partitions):
    """Poll every member once; True when each owns at least one partition and every
    partition is owned by exactly one member."""
    owned = []
    for member in members:
        member.poll(0.1)
        owned.append({tp.partition for tp in member.assignment()})
    every = [p for mine in owned for p in mine]
    return all(owned) and sorted(every) == list(range(partitions))


def test_group_rebalances_when_members_leave_and_join(shared_node):
    partitions = 6
    topic = new_topic(shared_node, partitions=partitions)
    group = f"g-{topic}"
    members = [_member(shared_node.bootstrap, group, topic) for _ in range(3)]
    try:
        assert _eventually(lambda: _balanced(members, partitions), 45), "3 members never balanced"
        members.pop(0).close()  # LeaveGroup
        assert _eventually(lambda: _balanced(members, partitions), 45), "2 members never balanced"
        members.append(_member(shared_node.bootstrap, group, topic))
        assert _eventually(lambda: _balanced(members, partitions), 45), "3 members never rebalanced"
    finally:
        for member in members:
            member.close()
