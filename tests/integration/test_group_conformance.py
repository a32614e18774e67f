"""Group offsets as Kafka 4.x answers them, driven through real clients against one node:

- a consumer commits in its partitions-revoked callback while the group is
  PreparingRebalance (confluent-kafka and kafka-python), and OffsetFetch returns it after;
- AdminClient.alter_consumer_group_offsets on a topic that does not exist answers
  UNKNOWN_TOPIC_OR_PARTITION and stores nothing;
- OffsetDelete (kafka-python's delete_group_offsets; confluent-kafka's Python AdminClient has
  no call for it) deletes a topic the group no longer consumes and refuses one it does with
  GROUP_SUBSCRIBED_TO_TOPIC;
- describe_consumer_groups(include_authorized_operations=True) lists the group's operations.

One node for the module; each test uses its own topics and groups.
"""
import threading
import time
import uuid

import pytest

from .clients import confluent as cf

pytestmark = [
    pytest.mark.timeout(120),
]

RECORDS = 10  # per partition
WAIT_S = 30.0


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _left_ms(deadline: float) -> int:
    return max(0, int((deadline - time.monotonic()) * 1000))


def _topic(node, partitions=2) -> str:
    topic = _name("t")
    cf.create_topic(node.bootstrap, topic, partitions=partitions)
    cf.produce(node.bootstrap, topic, [(None, b"v%d" % i, [], p) for p in range(partitions)
                                       for i in range(RECORDS)])
    return topic


def _admin(bootstrap):
    from confluent_kafka.admin import AdminClient
    return AdminClient({**cf.BASE, "bootstrap.servers": bootstrap})


def _committed(node, group: str, topic: str, partitions=2) -> dict[int, int]:
    """OffsetFetch through confluent-kafka's AdminClient: {partition: committed offset}."""
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    admin = _admin(node.bootstrap)
    request = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in range(partitions)])
    result = admin.list_consumer_group_offsets([request])[group].result(WAIT_S)
    return {tp.partition: tp.offset for tp in result.topic_partitions}


def _second_member_joins(node, topic, group):
    """A confluent-kafka GroupMember joins the group: the first member must rebalance."""
    return cf.GroupMember().start(node.bootstrap, topic, group)


# ---- commit in the partitions-revoked callback ---------------------------------------------

def test_offset_commit_in_the_revoke_callback_is_stored_as_kafka_does_confluent(shared_node):
    from confluent_kafka import Consumer, KafkaException
    topic, group = _topic(shared_node), _name("g")
    outcome: list = []

    def on_revoke(consumer, partitions):
        if partitions:
            try:
                consumer.commit(asynchronous=False)
                outcome.append("committed")
            except KafkaException as e:
                outcome.append(str(e.args[0]))

    consumer = Consumer({**cf.BASE, "bootstrap.servers": shared_node.bootstrap, "group.id": group,
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "session.timeout.ms": 6000, "heartbeat.interval.ms": 300,
                         "partition.assignment.strategy": "range"})
    member = None
    try:
        consumer.subscribe([topic], on_revoke=on_revoke)
        deadline = time.monotonic() + WAIT_S
        seen = 0
        while seen < 2 * RECORDS and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                seen += 1
        assert seen == 2 * RECORDS
        member = _second_member_joins(shared_node, topic, group)
        while not outcome and time.monotonic() < deadline + WAIT_S:
            consumer.poll(0.2)
        assert outcome == ["committed"], outcome
        while member.rebalances == 0 and time.monotonic() < deadline + 2 * WAIT_S:
            consumer.poll(0.2)  # the rebalance completes
    finally:
        if member is not None:
            member.close()
        consumer.close()
    assert _committed(shared_node, group, topic) == {0: RECORDS, 1: RECORDS}


def test_offset_commit_in_the_revoke_callback_is_stored_as_kafka_does_kafka_python(shared_node):
    from kafka import AsyncConsumerRebalanceListener, KafkaConsumer
    from kafka.errors import KafkaError
    topic, group = _topic(shared_node), _name("g")
    outcome: list = []
    consumer = KafkaConsumer(bootstrap_servers=shared_node.bootstrap, group_id=group,
                             enable_auto_commit=False, auto_offset_reset="earliest",
                             session_timeout_ms=6000, heartbeat_interval_ms=300, metadata_max_age_ms=2000)
    # kafka-python's range assignor assigns nothing for a topic its metadata does not hold yet and
    # rebalances only at its next metadata refresh: have the topic's partitions first.
    deadline = time.monotonic() + WAIT_S
    while not consumer.partitions_for_topic(topic) and time.monotonic() < deadline:
        time.sleep(0.1)

    class CommitOnRevoke(AsyncConsumerRebalanceListener):
        """kafka-python 3 runs the listener on its IO loop: a blocking commit() there cannot
        complete, so the callback awaits the commit it sends."""

        async def on_partitions_revoked(self, revoked):
            if revoked:
                try:
                    await consumer.commit_async()
                    outcome.append("committed")
                except KafkaError as e:
                    outcome.append(repr(e))

        async def on_partitions_assigned(self, assigned):
            pass

    member = None
    try:
        consumer.subscribe([topic], listener=CommitOnRevoke())
        deadline = time.monotonic() + WAIT_S
        seen = 0
        while seen < 2 * RECORDS and time.monotonic() < deadline:
            # The poll waits out a join whole: kafka-python 3.0.12 strands a rejoin whose wait
            # a short poll's timeout cut (clients/kafka_python.subscribe).
            seen += sum(len(records) for records in consumer.poll(_left_ms(deadline)).values())
        assert seen == 2 * RECORDS
        member = _second_member_joins(shared_node, topic, group)
        while not outcome and time.monotonic() < deadline + WAIT_S:
            consumer.poll(200)
        # One rebalance or more (an eager member revokes everything at each): every commit made
        # in the callback is stored.
        assert outcome and set(outcome) == {"committed"}, outcome
    finally:
        if member is not None:
            member.close()
        consumer.close(autocommit=False)
    assert _committed(shared_node, group, topic) == {0: RECORDS, 1: RECORDS}


# ---- admin ---------------------------------------------------------------------------------

def test_alter_consumer_group_offsets_of_a_missing_topic_is_unknown_topic_or_partition(shared_node):
    from confluent_kafka import ConsumerGroupTopicPartitions, KafkaError, KafkaException, TopicPartition
    group, missing = _name("g"), _name("missing")
    admin = _admin(shared_node.bootstrap)
    request = ConsumerGroupTopicPartitions(group, [TopicPartition(missing, 0, 5)])
    future = admin.alter_consumer_group_offsets([request])[group]
    try:
        errors = [tp.error.code() if tp.error else KafkaError.NO_ERROR
                  for tp in future.result(WAIT_S).topic_partitions]
    except KafkaException as e:
        errors = [e.args[0].code()]
    assert errors == [KafkaError.UNKNOWN_TOPIC_OR_PART]
    assert _committed(shared_node, group, missing, partitions=1) == {0: -1001}  # nothing stored


def test_delete_group_offsets_deletes_an_unsubscribed_topic_and_refuses_a_subscribed_one(shared_node):
    from kafka import TopicPartition
    from kafka.admin import KafkaAdminClient
    from kafka.errors import GroupSubscribedToTopicError, NoError
    subscribed, other, group = _topic(shared_node, 1), _topic(shared_node, 1), _name("g")
    admin = KafkaAdminClient(bootstrap_servers=shared_node.bootstrap)
    member = cf.GroupMember().start(shared_node.bootstrap, subscribed, group)
    try:
        deadline = time.monotonic() + WAIT_S
        while member.assignment() != {0} and time.monotonic() < deadline:
            time.sleep(0.1)
        generation_commit = _commit_as_member(shared_node, group, subscribed, other)
        assert generation_commit == "ok", generation_commit
        result = admin.delete_group_offsets(group, [TopicPartition(subscribed, 0), TopicPartition(other, 0)])
        assert result == {TopicPartition(subscribed, 0): GroupSubscribedToTopicError,
                          TopicPartition(other, 0): NoError}
        assert _committed(shared_node, group, subscribed, 1) == {0: 3}
        assert _committed(shared_node, group, other, 1) == {0: -1001}
    finally:
        member.close()
        admin.close()


def _commit_as_member(node, group, *topics) -> str:
    """Offset 3 of partition 0 of each topic, committed by a second, short-lived member of the
    group while the first stays subscribed (confluent-kafka commits any partition given)."""
    from confluent_kafka import Consumer, TopicPartition
    joined = threading.Event()
    consumer = Consumer({**cf.BASE, "bootstrap.servers": node.bootstrap, "group.id": group,
                         "enable.auto.commit": False, "session.timeout.ms": 6000,
                         "heartbeat.interval.ms": 300})
    try:
        consumer.subscribe([topics[0]], on_assign=lambda c, ps: joined.set())
        deadline = time.monotonic() + WAIT_S
        while not joined.is_set() and time.monotonic() < deadline:
            consumer.poll(0.2)
        consumer.commit(offsets=[TopicPartition(t, 0, 3) for t in topics], asynchronous=False)
        return "ok"
    except Exception as e:  # noqa: BLE001 - reported by the test
        return repr(e)
    finally:
        consumer.close()


def test_describe_consumer_groups_returns_the_groups_authorized_operations(shared_node):
    from confluent_kafka.admin import AclOperation
    topic, group = _topic(shared_node, 1), _name("g")
    member = cf.GroupMember().start(shared_node.bootstrap, topic, group)
    admin = _admin(shared_node.bootstrap)
    try:
        deadline = time.monotonic() + WAIT_S
        while member.assignment() != {0} and time.monotonic() < deadline:
            time.sleep(0.1)
        described = admin.describe_consumer_groups([group], include_authorized_operations=True)[group] \
            .result(WAIT_S)
    finally:
        member.close()
    assert set(described.authorized_operations or ()) == {
        AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE, AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS}


# ---- group configs (KIP-848) ---------------------------------------------------------------

def test_group_config_altered_by_the_admin_client_sets_the_groups_heartbeat_interval(shared_node):
    """IncrementalAlterConfigs on the GROUP resource, then a ConsumerGroupHeartbeat as a
    group.protocol=consumer member sends it: the answer carries the group's interval once the
    broker's metadata image has the config, the broker's default for another group."""
    import asyncio

    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    from protocol import messages as M
    from protocol.client import KafkaConnection
    from protocol.errors import Error
    group = _name("g")
    admin = _admin(shared_node.bootstrap)
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[ConfigEntry(
        "consumer.heartbeat.interval.ms", "7000", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([resource])[resource].result(WAIT_S)

    async def heartbeat_intervals() -> tuple[int, int]:
        conn = KafkaConnection("127.0.0.1", shared_node.broker_port)
        await conn.connect()
        try:
            async def join(group_id) -> int | None:
                """The heartbeat interval a joining member is told; None while the coordinator
                is not available yet (``__consumer_offsets`` is created on first use)."""
                R = M.ConsumerGroupHeartbeatRequest
                response = await conn.request(68, 0, R(
                    group_id=group_id, member_id="", member_epoch=0, rebalance_timeout_ms=30000,
                    subscribed_topic_names=["none"], topic_partitions=[]))
                if response.error_code in (Error.COORDINATOR_NOT_AVAILABLE,
                                           Error.COORDINATOR_LOAD_IN_PROGRESS):
                    return None
                assert response.error_code == Error.NONE, response
                await conn.request(68, 0, R(group_id=group_id, member_id=response.member_id, member_epoch=-1))
                return response.heartbeat_interval_ms

            async def interval(group_id, wanted=None) -> int | None:
                deadline = time.monotonic() + WAIT_S
                while True:
                    got = await join(group_id)
                    if got is not None and wanted in (None, got) or time.monotonic() >= deadline:
                        return got
                    await asyncio.sleep(0.2)  # no coordinator yet, or the config not replayed yet
            return await interval(group, 7000), await interval(_name("other"))
        finally:
            await conn.close()

    assert asyncio.run(heartbeat_intervals()) == (7000, 5000)
