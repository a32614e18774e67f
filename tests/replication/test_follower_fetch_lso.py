"""A follower's fetch answers the leader's last stable offset, as Kafka's readFromLog answers
every fetch, a replica's too, with its log's lastStableOffset."""
import asyncio

from ext.batch import build_batch
from tests.broker.replica_nodes import BASE_TS, TOPIC, Cluster, Node


def test_a_follower_fetch_answers_the_leaders_last_stable_offset_as_kafka_does(tmp_path):
    async def main():
        cluster = Cluster()
        cluster.create_topic(replicas=(1, 2, 3))
        node = Node(tmp_path, 1, cluster)
        await node.produce(4, acks=1)
        batch = build_batch([(b"k", b"v%d" % i, [], BASE_TS + i) for i in range(3)], producer_id=7,
                            producer_epoch=0, base_sequence=0, is_transactional=True)
        node.replicas.append_local(TOPIC, 0, bytearray(batch))  # a transaction opens at offset 4
        log = node.log()
        end = log.log_end_offset
        replicas = node.replicas
        for replica in (2, 3):  # both followers fetch to the log end: the HW passes the open transaction
            replicas.read_for_follower(TOPIC, 0, replica, 100 + replica, 0, end, 0, 0, 1 << 20)
        assert log.high_watermark == end and log.last_stable_offset == 4
        fetched = replicas.read_for_follower(TOPIC, 0, 2, 102, 0, end, 0, 0, 1 << 20)
        assert (fetched.high_watermark, fetched.last_stable_offset) == (end, 4)
        waited = replicas.read_for_follower(TOPIC, 0, 2, 102, 0, end, 0, 0, 1 << 20,
                                            update_fetch_state=False)
        assert (waited.high_watermark, waited.last_stable_offset) == (end, 4)
    asyncio.run(main())
