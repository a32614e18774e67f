"""Metadata snapshots on a real node (KIP-630): the controller snapshots its image every
metadata.log.max.record.bytes.between.snapshots bytes, drops the log below, and after a kill -9
the controller reloads from the snapshot and the broker (an observer with an in-memory log)
copies it with FetchSnapshot. Clients see every topic as before."""
import os

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from raft.engine_log import parse_snapshot_file_name, read_snapshot_file
from raft.settings import METADATA_PARTITION
from tests.integration.cluster import StromNode

pytestmark = pytest.mark.timeout(180)
TOPICS = 40


def snapshots(node: StromNode) -> list:
    directory = os.path.join(node.log_dir, METADATA_PARTITION)
    ids = [parse_snapshot_file_name(name) for name in os.listdir(directory)]
    return sorted((i for i in ids if i is not None), key=lambda i: i.offset)


def test_snapshots_are_taken_and_survive_a_kill9_for_controller_and_broker(tmp_path):
    node = StromNode(str(tmp_path), extra={"metadata.log.max.record.bytes.between.snapshots": 2048})
    try:
        node.start()
        admin = AdminClient({"bootstrap.servers": node.bootstrap})
        names = [f"snap-{i}" for i in range(TOPICS)]
        for future in admin.create_topics([NewTopic(n, num_partitions=2, replication_factor=1)
                                           for n in names], request_timeout=30).values():
            future.result(30)
        taken = snapshots(node)
        assert taken and taken[-1].offset > 0, taken
        latest = read_snapshot_file(os.path.join(node.log_dir, METADATA_PARTITION,
                                                 f"{taken[-1].offset:020d}-{taken[-1].epoch:010d}.checkpoint"))
        assert latest.voters is not None and latest.values  # KIP-853 voters + the image's records
        producer = Producer({"bootstrap.servers": node.bootstrap})
        producer.produce(names[-1], b"before", partition=1)
        assert producer.flush(30) == 0

        node.kill9()
        node.start()

        listed = AdminClient({"bootstrap.servers": node.bootstrap}).list_topics(timeout=30).topics
        assert set(names) <= set(listed)
        assert all(len(listed[n].partitions) == 2 for n in names)
        consumer = Consumer({"bootstrap.servers": node.bootstrap, "group.id": "snap",
                             "enable.auto.commit": False})
        consumer.assign([TopicPartition(names[-1], 1, 0)])
        message = consumer.poll(30)
        consumer.close()
        assert message is not None and message.error() is None and message.value() == b"before"
    finally:
        node.cleanup()
