"""Consumer groups against a real node with confluent-kafka (librdkafka): rebalances keep
every partition owned by exactly one member; committed offsets survive a kill -9."""
import time

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

DEADLINE_S = 40.0
PARTITIONS = 6


def _admin(node):
    return AdminClient({"bootstrap.servers": node.bootstrap, "log_level": 0})


def _create_topic(node, name, partitions):
    admin = _admin(node)  # held: a collected client fails its futures
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(timeout=15)


def _consumer(node, group, **extra):
    config = {"bootstrap.servers": node.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
              "enable.auto.commit": False, "session.timeout.ms": 6000, "heartbeat.interval.ms": 500,
              "log_level": 0}
    config.update(extra)
    return Consumer(config)


def _produce(node, topic, count, start=0):
    p = Producer({"bootstrap.servers": node.bootstrap, "log_level": 0})
    for i in range(start, start + count):
        p.produce(topic, key=str(i).encode(), value=str(i).encode(), partition=i % PARTITIONS)
    assert p.flush(15) == 0


def _wait_balanced(consumers, topic, deadline_s=DEADLINE_S):
    """Poll every consumer until their assignments split the topic's partitions among all
    of them, each partition owned once."""
    deadline = time.monotonic() + deadline_s
    owned = []
    while time.monotonic() < deadline:
        for c in consumers:
            c.poll(0.05)
        owned = [sorted(tp.partition for tp in c.assignment() if tp.topic == topic) for c in consumers]
        flat = [p for parts in owned for p in parts]
        if sorted(flat) == list(range(PARTITIONS)) and all(owned):
            # Stable for a moment: nobody is about to revoke.
            time.sleep(0.2)
            again = [sorted(tp.partition for tp in c.assignment() if tp.topic == topic) for c in consumers]
            if again == owned:
                return owned
    raise AssertionError(f"no balanced assignment in time: {owned}")


def test_group_rebalances_when_members_leave_and_join(strom_node):
    _create_topic(strom_node, "rb", PARTITIONS)
    consumers = [_consumer(strom_node, "rb-group") for _ in range(3)]
    try:
        for c in consumers:
            c.subscribe(["rb"])
        owned = _wait_balanced(consumers, "rb")
        assert sorted(len(o) for o in owned) == [2, 2, 2]

        consumers.pop(0).close()  # LeaveGroup
        owned = _wait_balanced(consumers, "rb")
        assert sorted(len(o) for o in owned) == [3, 3]

        newcomer = _consumer(strom_node, "rb-group")
        newcomer.subscribe(["rb"])
        consumers.append(newcomer)
        owned = _wait_balanced(consumers, "rb")
        assert sorted(len(o) for o in owned) == [2, 2, 2]

        admin = _admin(strom_node)
        groups = admin.describe_consumer_groups(["rb-group"])["rb-group"].result(timeout=10)
        assert len(groups.members) == 3 and str(groups.state).endswith("STABLE")
    finally:
        for c in consumers:
            c.close()


def _consume(consumer, count, deadline_s=DEADLINE_S):
    got = []
    deadline = time.monotonic() + deadline_s
    while len(got) < count and time.monotonic() < deadline:
        m = consumer.poll(0.2)
        if m is None or m.error():
            continue
        got.append((m.partition(), m.offset(), int(m.value())))
    return got


def test_committed_offsets_survive_kill_9(strom_node):
    _create_topic(strom_node, "durable", PARTITIONS)
    _produce(strom_node, "durable", 120)
    c = _consumer(strom_node, "durable-group")
    c.subscribe(["durable"])
    first = _consume(c, 60)
    assert len(first) == 60
    next_offsets = {}
    for partition, offset, _ in first:
        next_offsets[partition] = max(next_offsets.get(partition, 0), offset + 1)
    c.commit(offsets=[TopicPartition("durable", p, o) for p, o in next_offsets.items()], asynchronous=False)
    c.close()

    strom_node.restart(kill=True)
    _produce(strom_node, "durable", 60, start=120)

    c = _consumer(strom_node, "durable-group")
    try:
        committed = c.committed([TopicPartition("durable", p) for p in range(PARTITIONS)], timeout=30)
        assert {tp.partition: tp.offset for tp in committed if tp.offset >= 0} == next_offsets
        c.subscribe(["durable"])
        rest = _consume(c, 180 - 60)
    finally:
        c.close()
    values = sorted(v for _, _, v in first + rest)
    assert values == list(range(180))  # nothing lost, nothing read twice
    for partition, offset, _ in rest:
        assert offset >= next_offsets.get(partition, 0)
