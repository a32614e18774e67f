"""ListOffsets, OffsetForLeaderEpoch and DeleteRecords through the ReplicaManager
(broker/handlers/offsets.py)."""
import asyncio

from ext.batch import COMPRESSION_ZSTD, build_batch
from protocol import messages as M
from protocol.errors import Error
from tests.broker.replica_nodes import BASE_TS, TOPIC, TOPIC_ID, Cluster, Node

LATEST, EARLIEST, MAX_TIMESTAMP = -1, -2, -3


def run(coro):
    return asyncio.run(coro)


async def leader_with_uncommitted_tail(tmp_path):
    """Leader 1 of (1, 2): offsets 0..9 committed, 10..14 written only on the leader."""
    cluster = Cluster(brokers=(1, 2))
    cluster.create_topic(replicas=(1, 2))
    leader = Node(tmp_path, 1, cluster)
    await leader.produce(10, acks=1)
    await leader.replica_fetch(2, 10, last_fetched_epoch=0)
    await leader.produce(5, acks=1, ts=BASE_TS + 1000)
    return cluster, leader


def test_list_offsets_latest_is_the_high_watermark_for_clients_and_the_log_end_for_replicas(tmp_path):
    async def main():
        _, leader = await leader_with_uncommitted_tail(tmp_path)
        client = await leader.list_offsets(LATEST)
        assert (client.error_code, client.offset, client.leader_epoch) == (Error.NONE, 10, 0)
        assert (await leader.list_offsets(LATEST, replica_id=2)).offset == 15
        assert (await leader.list_offsets(EARLIEST)).offset == 0
    run(main())


def test_list_offsets_by_timestamp_finds_nothing_at_or_past_the_high_watermark(tmp_path):
    async def main():
        _, leader = await leader_with_uncommitted_tail(tmp_path)
        assert (await leader.list_offsets(BASE_TS + 3)).offset == 3
        found = await leader.list_offsets(BASE_TS + 1000)  # offset 10: not committed
        assert (found.error_code, found.offset) == (Error.NONE, -1)
        assert (await leader.list_offsets(MAX_TIMESTAMP)).offset == -1  # the tail holds it
        assert (await leader.list_offsets(MAX_TIMESTAMP, replica_id=2)).offset == 14
    run(main())


async def produce_timestamps(node, *deltas: int, compression: int = 0):
    """One producer batch whose records carry BASE_TS + each delta, acks=1."""
    R = M.ProduceRequest
    batch = build_batch([(b"k", b"v%d" % i, [], BASE_TS + d) for i, d in enumerate(deltas)],
                        compression=compression)
    request = R(transactional_id=None, acks=1, timeout_ms=5000, topic_data=[R.TopicProduceData(
        name=TOPIC, topic_id=TOPIC_ID, partition_data=[R.PartitionProduceData(
            index=0, records=memoryview(bytearray(batch)))])])
    answer = (await node.call(0, 11, request)).responses[0].partition_responses[0]
    assert answer.error_code == Error.NONE


def test_list_offsets_max_timestamp_is_the_record_holding_it_not_its_batch_last_offset(tmp_path):
    """Kafka 3.8+ (KAFKA-16310): the offset, timestamp and leader epoch of the first record
    with the greatest timestamp, found inside its (compressed) batch."""
    async def main():
        cluster = Cluster(brokers=(1,))
        cluster.create_topic(replicas=(1,))
        leader = Node(tmp_path, 1, cluster)
        await produce_timestamps(leader, 1, 2, 3)  # 0..2
        cluster.change(leader=1)  # epoch 1
        leader.sync()
        await produce_timestamps(leader, 4, 900, 5, 900, 6, compression=COMPRESSION_ZSTD)  # 3..7
        await produce_timestamps(leader, 7, 8)  # 8..9
        found = await leader.list_offsets(MAX_TIMESTAMP)
        assert (found.error_code, found.offset, found.timestamp, found.leader_epoch) == \
            (Error.NONE, 4, BASE_TS + 900, 1)
    run(main())


def test_list_offsets_with_a_stale_or_future_leader_epoch_is_refused(tmp_path):
    async def main():
        cluster, leader = await leader_with_uncommitted_tail(tmp_path)
        cluster.change(leader=1)
        leader.sync()
        stale = await leader.list_offsets(LATEST, current_leader_epoch=0)
        future = await leader.list_offsets(LATEST, current_leader_epoch=2)
        assert stale.error_code == Error.FENCED_LEADER_EPOCH
        assert future.error_code == Error.UNKNOWN_LEADER_EPOCH
    run(main())


def test_list_offsets_latest_is_not_available_while_the_high_watermark_is_below_the_epoch_start(tmp_path):
    async def main():
        cluster, leader = await leader_with_uncommitted_tail(tmp_path)
        cluster.change(leader=1)  # a new epoch starting at the LEO (15), the HW still at 10
        leader.sync()
        assert leader.partition().leader_epoch_start_offset == 15
        assert (await leader.list_offsets(LATEST)).error_code == Error.OFFSET_NOT_AVAILABLE
        assert (await leader.list_offsets(LATEST, replica_id=2)).offset == 15
        await leader.replica_fetch(2, 15, last_fetched_epoch=0, current_leader_epoch=1)
        latest = await leader.list_offsets(LATEST)
        assert (latest.error_code, latest.offset, latest.leader_epoch) == (Error.NONE, 15, 1)
    run(main())


def test_list_offsets_on_a_follower_is_not_leader(tmp_path):
    async def main():
        cluster = Cluster(brokers=(1, 2))
        cluster.create_topic(replicas=(1, 2), leader=1)
        node = Node(tmp_path, 2, cluster)
        assert (await node.list_offsets(LATEST)).error_code == Error.NOT_LEADER_OR_FOLLOWER
    run(main())


def test_list_offsets_latest_from_the_debugging_replica_id_is_any_replicas_log_end_and_last_epoch(tmp_path):
    """What balanced recovery asks every replica of a partition that has no leader: its log
    end offset and the epoch of its last batch, not the partition's current leader epoch."""
    async def main():
        cluster, node = await leader_with_uncommitted_tail(tmp_path)  # epoch 0: 0..14
        cluster.change(leader=-1, isr=[])  # offline: no leader, epoch 1
        node.sync()
        assert not node.partition().is_leader and node.partition().leader_epoch == 1
        assert (await node.list_offsets(LATEST)).error_code == Error.NOT_LEADER_OR_FOLLOWER
        found = await node.list_offsets(LATEST, replica_id=-2)
        assert (found.error_code, found.offset, found.leader_epoch) == (Error.NONE, 15, 0)
        cluster.change(leader=2, isr=[2])  # a follower of another leader answers alike
        node.sync()
        found = await node.list_offsets(LATEST, replica_id=-2)
        assert (found.error_code, found.offset, found.leader_epoch) == (Error.NONE, 15, 0)
    run(main())


def test_offset_for_leader_epoch_answers_where_each_epoch_ends_in_the_leader_log(tmp_path):
    async def main():
        cluster, leader = await leader_with_uncommitted_tail(tmp_path)  # epoch 0: 0..14
        cluster.change(leader=1)
        leader.sync()
        await leader.produce(3, acks=1)  # epoch 1: 15..17
        answer = await leader.offset_for_leader_epoch(0, current_leader_epoch=1)
        assert (answer.error_code, answer.leader_epoch, answer.end_offset) == (Error.NONE, 0, 15)
        answer = await leader.offset_for_leader_epoch(1, current_leader_epoch=1)
        assert (answer.leader_epoch, answer.end_offset) == (1, 18)
        answer = await leader.offset_for_leader_epoch(0, current_leader_epoch=0)
        assert answer.error_code == Error.FENCED_LEADER_EPOCH
    run(main())


def test_delete_records_moves_the_log_start_only_up_to_the_high_watermark(tmp_path):
    async def main():
        cluster, leader = await leader_with_uncommitted_tail(tmp_path)
        answer = await leader.delete_records(12)
        assert answer.error_code == Error.OFFSET_OUT_OF_RANGE
        cluster.fence(2)  # no live follower to wait for
        leader.sync()
        answer = await leader.delete_records(-1)
        assert (answer.error_code, answer.low_watermark) == (Error.NONE, 10)
        assert leader.log().log_start_offset == 10
    run(main())


def test_delete_records_with_a_negative_offset_other_than_the_high_watermark_is_out_of_range(tmp_path):
    """Kafka's Partition.deleteRecordsOnLeader: -1 means the high watermark; any other
    negative offset answers OFFSET_OUT_OF_RANGE (low watermark -1) and deletes nothing."""
    async def main():
        cluster, leader = await leader_with_uncommitted_tail(tmp_path)
        cluster.fence(2)
        leader.sync()
        for offset in (-2, -5, -(2**63)):
            answer = await leader.delete_records(offset)
            assert (answer.error_code, answer.low_watermark) == (Error.OFFSET_OUT_OF_RANGE, -1)
        assert leader.log().log_start_offset == 0
    run(main())


def test_delete_records_of_an_internal_topic_is_refused_as_an_invalid_topic(tmp_path):
    async def main():
        _, leader = await leader_with_uncommitted_tail(tmp_path)
        R = M.DeleteRecordsRequest
        request = R(timeout_ms=1000, topics=[R.DeleteRecordsTopic(name=name, partitions=[
            R.DeleteRecordsTopic.DeleteRecordsPartition(partition_index=0, offset=-1)])
            for name in ("__consumer_offsets", "__transaction_state")])
        answer = await leader.call(21, 2, request)
        assert [(p.error_code, p.low_watermark) for t in answer.topics for p in t.partitions] == \
            [(Error.INVALID_TOPIC_EXCEPTION, -1)] * 2
    run(main())


def test_delete_records_of_a_compacted_only_topic_is_a_policy_violation(tmp_path):
    """Kafka refuses DeleteRecords unless cleanup.policy includes delete."""
    async def main():
        cluster = Cluster(brokers=(1,))
        cluster.create_topic(replicas=(1,), configs={"cleanup.policy": "compact"})
        leader = Node(tmp_path, 1, cluster)
        await leader.produce(5, acks=1)
        answer = await leader.delete_records(3)
        assert (answer.error_code, answer.low_watermark) == (Error.POLICY_VIOLATION, -1)
        assert leader.log().log_start_offset == 0
    run(main())


def test_delete_records_answers_once_every_live_follower_has_raised_its_log_start(tmp_path):
    """Kafka's DelayedDeleteRecords: the answer waits for the low watermark (the lowest log
    start offset among live replicas) to reach the offset, and reports it."""
    async def main():
        _, leader = await leader_with_uncommitted_tail(tmp_path)
        answer = asyncio.ensure_future(leader.delete_records(-1))
        await asyncio.sleep(0.05)
        assert not answer.done(), "answered before the follower deleted anything"
        await leader.replica_fetch(2, 15, last_fetched_epoch=0, log_start_offset=10)
        got = await asyncio.wait_for(answer, 1)
        assert (got.error_code, got.low_watermark) == (Error.NONE, 10)
    run(main())


def test_delete_records_times_out_with_the_low_watermark_so_far(tmp_path):
    async def main():
        _, leader = await leader_with_uncommitted_tail(tmp_path)  # follower 2 reported log start 0
        answer = await leader.delete_records(-1)  # timeout_ms 1000
        assert (answer.error_code, answer.low_watermark) == (Error.REQUEST_TIMED_OUT, 0)
        assert leader.log().log_start_offset == 10
    run(main())
