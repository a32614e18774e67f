"""The consumer group protocol (KIP-848) against a real node with confluent-kafka consumers
using ``group.protocol: consumer``: the coordinator's assignment gives every partition to
exactly one member, through leaves and joins; committed offsets are resumed by a new member;
group.version 0, set by ``strom features``, turns the protocol off and 1 on again."""
import asyncio
import time

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, ConsumerGroupType, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from protocol import messages as M  # noqa: E402
from protocol.client import KafkaConnection  # noqa: E402
from protocol.errors import Error  # noqa: E402

PARTITIONS = 6
DEADLINE_S = 45.0  # a few heartbeat intervals (5 s): a freed partition is handed out on one


def _admin(node):
    return AdminClient({"bootstrap.servers": node.bootstrap, "log_level": 0})


def _create_topic(node, name, partitions=PARTITIONS):
    admin = _admin(node)  # held: a collected client fails its futures
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(timeout=15)


def _consumer(node, group):
    return Consumer({"bootstrap.servers": node.bootstrap, "group.id": group, "group.protocol": "consumer",
                     "auto.offset.reset": "earliest", "enable.auto.commit": False,
                     "broker.address.family": "v4", "log_level": 0})


def _produce(node, topic, count):
    p = Producer({"bootstrap.servers": node.bootstrap, "log_level": 0})
    for i in range(count):
        p.produce(topic, value=str(i).encode(), partition=i % PARTITIONS)
    assert p.flush(15) == 0


def _owned(consumers, topic):
    return [sorted(tp.partition for tp in c.assignment() if tp.topic == topic) for c in consumers]


def _wait_balanced(consumers, topic, deadline_s=DEADLINE_S):
    """Poll every consumer until each owns a share and together they own every partition once."""
    deadline = time.monotonic() + deadline_s
    owned = []
    while time.monotonic() < deadline:
        for c in consumers:
            c.poll(0.05)
        owned = _owned(consumers, topic)
        flat = [p for parts in owned for p in parts]
        assert len(flat) == len(set(flat)), f"a partition owned twice: {owned}"
        if sorted(flat) == list(range(PARTITIONS)) and all(len(o) == PARTITIONS // len(consumers)
                                                           for o in owned):
            return owned
    raise AssertionError(f"no balanced assignment in time: {owned}")


def test_consumer_protocol_members_share_partitions_through_leave_and_join(shared_node):
    _create_topic(shared_node, "kip848")
    consumers = [_consumer(shared_node, "kip848-group") for _ in range(3)]
    try:
        for c in consumers:
            c.subscribe(["kip848"])
        owned = _wait_balanced(consumers, "kip848")
        admin = _admin(shared_node)
        listed = {g.group_id: g for g in admin.list_consumer_groups().result(timeout=10).valid}
        assert listed["kip848-group"].type == ConsumerGroupType.CONSUMER
        described = admin.describe_consumer_groups(["kip848-group"])["kip848-group"].result(timeout=10)
        assert described.partition_assignor == "uniform" and len(described.members) == 3
        assert sorted(sorted(tp.partition for tp in m.assignment.topic_partitions)
                      for m in described.members) == sorted(owned)
        consumers.pop(0).close()  # a leave heartbeat (epoch -1): its partitions go to the others
        consumers.append(_consumer(shared_node, "kip848-group"))
        consumers[-1].subscribe(["kip848"])
        _wait_balanced(consumers, "kip848")
    finally:
        for c in consumers:
            c.close()


def test_consumer_protocol_new_member_resumes_committed_offsets(shared_node):
    _create_topic(shared_node, "kip848-offsets")
    _produce(shared_node, "kip848-offsets", 60)
    first = _consumer(shared_node, "kip848-commit")
    try:
        first.subscribe(["kip848-offsets"])
        _wait_balanced([first], "kip848-offsets")
        seen = 0
        deadline = time.monotonic() + DEADLINE_S
        while seen < 30 and time.monotonic() < deadline:
            msg = first.poll(0.2)
            if msg is not None and msg.error() is None:
                seen += 1
        assert seen >= 30
        positions = first.position(first.assignment())
        first.commit(offsets=positions, asynchronous=False)
    finally:
        first.close()
    committed = {tp.partition: tp.offset for tp in positions}
    second = _consumer(shared_node, "kip848-commit")
    try:
        second.subscribe(["kip848-offsets"])
        _wait_balanced([second], "kip848-offsets")
        got = second.committed([TopicPartition("kip848-offsets", p) for p in range(PARTITIONS)], timeout=10)
        assert {tp.partition: tp.offset for tp in got} == committed
        rest = 0
        deadline = time.monotonic() + DEADLINE_S
        while rest < 60 - sum(max(o, 0) for o in committed.values()) and time.monotonic() < deadline:
            msg = second.poll(0.2)
            if msg is not None and msg.error() is None:
                assert msg.offset() >= committed[msg.partition()]
                rest += 1
        assert rest == 60 - sum(max(o, 0) for o in committed.values())
    finally:
        second.close()


def _heartbeat_at(node, group_version: int):
    """A ConsumerGroupHeartbeat's answer once the broker's ApiVersions finalizes ``group_version``
    (absent is 0), past the coordinator's loading."""
    H = M.ConsumerGroupHeartbeatRequest
    heartbeat = H(group_id="kip848-gv", member_id="kip848-gv-member", member_epoch=0,
                  rebalance_timeout_ms=30000, subscribed_topic_names=["kip848-gv"], topic_partitions=[])

    async def main():
        conn = KafkaConnection("127.0.0.1", node.broker_port)
        await conn.connect()
        try:
            deadline = time.monotonic() + 15
            while True:
                versions = await conn.request(18, 3, M.ApiVersionsRequest(client_software_name="t",
                                                                          client_software_version="1"))
                finalized = {f.name: f.max_version_level for f in versions.finalized_features}
                if finalized.get("group.version", 0) == group_version:
                    answer = await conn.request(68, 1, heartbeat)
                    if answer.error_code not in (Error.COORDINATOR_NOT_AVAILABLE,
                                                 Error.COORDINATOR_LOAD_IN_PROGRESS):
                        return answer
                assert time.monotonic() < deadline, f"group.version {finalized.get('group.version')}"
                await asyncio.sleep(0.05)
        finally:
            await conn.close()
    return asyncio.run(main())


def test_group_version_0_answers_unsupported_version_and_1_serves_the_protocol_again_without_a_restart(
        shared_node, capsys):
    from strom.cli import main

    try:
        assert main(["features", "--bootstrap-server", shared_node.bootstrap, "disable", "--feature",
                     "group.version"]) == 0
        assert capsys.readouterr().out == "group.version was disabled.\n"
        refused = _heartbeat_at(shared_node, 0)
        assert (refused.error_code, refused.member_epoch) == (Error.UNSUPPORTED_VERSION, 0)
    finally:
        assert main(["features", "--bootstrap-server", shared_node.bootstrap, "upgrade", "--feature",
                     "group.version=1"]) == 0
    assert capsys.readouterr().out == "group.version was upgraded to 1.\n"
    joined = _heartbeat_at(shared_node, 1)
    assert (joined.error_code, joined.member_id, joined.member_epoch) == (Error.NONE, "kip848-gv-member", 1)
