"""ListOffsets MAX_TIMESTAMP, DeleteRecords' refusals and authorized operations as Kafka 4.x
answers them, driven through confluent-kafka's AdminClient (librdkafka) and kafka-python's
KafkaAdminClient against one node."""
import time

import kafka.admin
import pytest
from confluent_kafka import KafkaError, KafkaException, Producer, TopicCollection, TopicPartition
from confluent_kafka.admin import AclOperation, AdminClient, NewTopic, OffsetSpec

from .clients.confluent import BASE

pytestmark = pytest.mark.timeout(120)
WAIT_S = 30


@pytest.fixture(scope="module")
def admin(shared_node):
    return AdminClient({**BASE, "bootstrap.servers": shared_node.bootstrap})


def create(admin, name: str, **configs: str) -> None:
    admin.create_topics([NewTopic(name, 1, 1, config=configs)])[name].result(WAIT_S)


def produce_one_batch(bootstrap: str, topic: str, timestamps: list[int], compression: str = "none"):
    """Records carrying ``timestamps``, sent together: linger far longer than the produce
    calls take, then one flush, so that they travel (and are stored) as one batch."""
    producer = Producer({**BASE, "bootstrap.servers": bootstrap, "linger.ms": 5000, "acks": "all",
                         "compression.type": compression})
    for i, ts in enumerate(timestamps):
        producer.produce(topic, value=b"v%d" % i, partition=0, timestamp=ts)
    assert producer.flush(WAIT_S) == 0


def led(admin, topic: str) -> bool:
    """Does partition 0 of ``topic`` have a leader yet?"""
    found = admin.list_topics(topic, timeout=WAIT_S).topics.get(topic)
    return found is not None and found.error is None and 0 in found.partitions \
        and found.partitions[0].leader >= 0


def list_offset(admin, topic: str, spec):
    tp = TopicPartition(topic, 0)
    return admin.list_offsets({tp: spec})[tp].result(WAIT_S)


def test_list_offsets_max_timestamp_is_the_record_holding_it_as_kafka_3_8_answers(shared_node, admin):
    """KAFKA-16310: OffsetSpec.max_timestamp() names the first record with the greatest
    timestamp, inside its compressed batch, not the batch's last offset."""
    create(admin, "max-ts")
    now = int(time.time() * 1000)
    produce_one_batch(shared_node.bootstrap, "max-ts", [now - 50, now - 40, now, now - 30, now, now - 20],
                      compression="zstd")  # 0..5: the greatest at 2 (and 4)
    produce_one_batch(shared_node.bootstrap, "max-ts", [now - 10, now - 5])  # 6..7
    found = list_offset(admin, "max-ts", OffsetSpec.max_timestamp())
    assert (found.offset, found.timestamp) == (2, now)
    kp = kafka.admin.KafkaAdminClient(bootstrap_servers=shared_node.bootstrap)
    try:
        tp = kafka.TopicPartition("max-ts", 0)
        found = kp.list_partition_offsets({tp: kafka.admin.OffsetSpec.MAX_TIMESTAMP})[tp]
        assert (found.offset, found.timestamp, found.leader_epoch) == (2, now, 0)
    finally:
        kp.close()
    assert list_offset(admin, "max-ts", OffsetSpec.latest()).offset == 8


def test_delete_records_below_minus_one_is_offset_out_of_range_and_deletes_nothing(shared_node, admin):
    create(admin, "trim-negative")
    now = int(time.time() * 1000)
    produce_one_batch(shared_node.bootstrap, "trim-negative", [now] * 10)
    tp = TopicPartition("trim-negative", 0, -5)
    with pytest.raises(KafkaException) as refused:
        admin.delete_records([tp])[tp].result(WAIT_S)
    assert refused.value.args[0].code() == KafkaError.OFFSET_OUT_OF_RANGE
    assert list_offset(admin, "trim-negative", OffsetSpec.earliest()).offset == 0
    tp = TopicPartition("trim-negative", 0, -1)  # the high watermark
    assert admin.delete_records([tp])[tp].result(WAIT_S).low_watermark == 10


def test_delete_records_of_an_internal_topic_is_an_invalid_topic(shared_node, admin):
    admin.list_consumer_groups().result(WAIT_S)  # makes the offsets topic, as Kafka's ListGroups
    deadline = time.monotonic() + WAIT_S
    while not led(admin, "__consumer_offsets") and time.monotonic() < deadline:
        time.sleep(0.1)
    tp = TopicPartition("__consumer_offsets", 0, -1)
    with pytest.raises(KafkaException) as refused:
        admin.delete_records([tp])[tp].result(WAIT_S)
    assert refused.value.args[0].code() == KafkaError.TOPIC_EXCEPTION


TOPIC_OPERATIONS = {AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DELETE,
                    AclOperation.ALTER, AclOperation.DESCRIBE, AclOperation.DESCRIBE_CONFIGS,
                    AclOperation.ALTER_CONFIGS}
CLUSTER_OPERATIONS = {AclOperation.CREATE, AclOperation.ALTER, AclOperation.DESCRIBE,
                      AclOperation.CLUSTER_ACTION, AclOperation.DESCRIBE_CONFIGS,
                      AclOperation.ALTER_CONFIGS, AclOperation.IDEMPOTENT_WRITE}


def test_describe_cluster_and_topics_answer_every_supported_operation_with_no_authorizer(admin):
    """Kafka with no authorizer: a principal may perform every operation the resource type
    supports; the sets come only when asked for."""
    create(admin, "described")
    cluster = admin.describe_cluster(include_authorized_operations=True).result(WAIT_S)
    assert set(cluster.authorized_operations) == CLUSTER_OPERATIONS
    assert admin.describe_cluster().result(WAIT_S).authorized_operations is None
    topics = admin.describe_topics(TopicCollection(["described"]), include_authorized_operations=True)
    assert set(topics["described"].result(WAIT_S).authorized_operations) == TOPIC_OPERATIONS
    plain = admin.describe_topics(TopicCollection(["described"]))["described"].result(WAIT_S)
    assert plain.authorized_operations is None
