"""Produce through the ReplicaManager (broker/handlers/produce.py): acks=all waits for the high
watermark, min.insync.replicas, timeouts, lost leadership and KIP-951 leader hints."""
import asyncio

from protocol import messages as M
from protocol.errors import Error
from tests.broker.replica_nodes import BASE_TS, TOPIC, Cluster, Node, endpoint_port, records, settle


def run(coro):
    return asyncio.run(coro)


def test_acks_all_parks_until_follower_fetches_advance_the_high_watermark(tmp_path):
    async def main():
        cluster = Cluster()
        cluster.create_topic(replicas=(1, 2, 3))
        leader = Node(tmp_path, 1, cluster)
        produce = asyncio.ensure_future(leader.produce(10, acks=-1))
        await settle()
        assert not produce.done()
        assert leader.log().log_end_offset == 10 and leader.log().high_watermark == 0
        pd = await leader.replica_fetch(2, 10, last_fetched_epoch=0)
        assert pd.error_code == Error.NONE
        await settle()
        assert not produce.done(), "replica 3 of the ISR has not fetched the records yet"
        pd = await leader.replica_fetch(3, 10, last_fetched_epoch=0)
        assert pd.high_watermark == 10  # the follower learns the high watermark its fetch moved
        pr = await asyncio.wait_for(produce, 1)
        assert (pr.error_code, pr.base_offset) == (Error.NONE, 0)
        assert len(leader.replicas.purgatory) == 0
    run(main())


def test_acks_all_completes_in_offset_order_as_the_high_watermark_passes_each_batch(tmp_path):
    async def main():
        cluster = Cluster(brokers=(1, 2))
        cluster.create_topic(replicas=(1, 2))
        leader = Node(tmp_path, 1, cluster)
        first = asyncio.ensure_future(leader.produce(5, acks=-1))
        await settle()
        second = asyncio.ensure_future(leader.produce(5, acks=-1))
        await settle()
        await leader.replica_fetch(2, 5, last_fetched_epoch=0)
        await settle()
        assert first.done() and not second.done()
        await leader.replica_fetch(2, 10, last_fetched_epoch=0)
        assert (await asyncio.wait_for(second, 1)).base_offset == 5
    run(main())


def test_a_single_replica_partition_commits_acks_all_at_once(tmp_path):
    async def main():
        cluster = Cluster(brokers=(1,))
        cluster.create_topic(replicas=(1,))
        leader = Node(tmp_path, 1, cluster)
        pr = await asyncio.wait_for(leader.produce(10, acks=-1), 1)
        assert (pr.error_code, pr.base_offset) == (Error.NONE, 0)
        assert leader.log().high_watermark == leader.log().log_end_offset == 10
    run(main())


def test_acks_all_under_min_isr_is_refused_before_anything_is_written(tmp_path):
    async def main():
        cluster = Cluster()
        cluster.create_topic(replicas=(1, 2, 3), isr=(1,), configs={"min.insync.replicas": "2"})
        leader = Node(tmp_path, 1, cluster)
        pr = await leader.produce(10, acks=-1)
        assert pr.error_code == Error.NOT_ENOUGH_REPLICAS
        assert leader.log().log_end_offset == 0
        pr = await leader.produce(10, acks=1)  # acks=1 does not ask for the min ISR
        assert (pr.error_code, pr.base_offset) == (Error.NONE, 0)
    run(main())


def test_acks_all_is_answered_request_timed_out_at_its_timeout(tmp_path):
    async def main():
        cluster = Cluster()
        cluster.create_topic(replicas=(1, 2, 3))
        leader = Node(tmp_path, 1, cluster)
        pr = await asyncio.wait_for(leader.produce(10, acks=-1, timeout_ms=30), 2)
        assert pr.error_code == Error.REQUEST_TIMED_OUT
        assert leader.log().log_end_offset == 10  # written, not committed
        assert len(leader.replicas.purgatory) == 0
    run(main())


def test_acks_all_waiting_when_leadership_moves_is_answered_not_leader(tmp_path):
    async def main():
        cluster = Cluster()
        cluster.create_topic(replicas=(1, 2, 3))
        leader = Node(tmp_path, 1, cluster)
        produce = asyncio.ensure_future(leader.produce(10, acks=-1))
        await settle()
        cluster.change(leader=2, isr=(2, 3))
        leader.sync()
        pr = await asyncio.wait_for(produce, 1)
        assert pr.error_code == Error.NOT_LEADER_OR_FOLLOWER
    run(main())


def test_acks_one_is_answered_after_the_leader_append_without_waiting(tmp_path):
    async def main():
        cluster = Cluster()
        cluster.create_topic(replicas=(1, 2, 3))
        leader = Node(tmp_path, 1, cluster)
        pr = await asyncio.wait_for(leader.produce(10, acks=1), 1)
        assert (pr.error_code, pr.base_offset) == (Error.NONE, 0)
        assert leader.log().high_watermark == 0
        assert await leader.produce(3, acks=0) is None
        assert leader.log().log_end_offset == 13
    run(main())


def test_not_leader_names_the_current_leader_and_its_endpoint(tmp_path):
    async def main():
        cluster = Cluster()
        cluster.create_topic(replicas=(1, 2, 3), leader=1)
        follower = Node(tmp_path, 2, cluster)
        pr = await follower.produce(10, acks=-1, version=10)
        assert pr.error_code == Error.NOT_LEADER_OR_FOLLOWER
        assert (pr.current_leader.leader_id, pr.current_leader.leader_epoch) == (1, 0)
        response = await follower.call(0, 10, _request(follower))
        assert [(e.node_id, e.host, e.port) for e in response.node_endpoints] == [
            (1, "127.0.0.1", endpoint_port(1))]
        assert follower.log().log_end_offset == 0
    run(main())


def test_an_unknown_partition_is_unknown_and_a_partition_hosted_elsewhere_is_not_leader(tmp_path):
    async def main():
        cluster = Cluster()
        cluster.create_topic(replicas=(2, 3), partitions=2)
        node = Node(tmp_path, 1, cluster)
        assert (await node.produce(1, partition=0)).error_code == Error.NOT_LEADER_OR_FOLLOWER
        assert (await node.produce(1, partition=5)).error_code == Error.UNKNOWN_TOPIC_OR_PARTITION
    run(main())


def test_a_retried_idempotent_batch_gets_its_original_offsets_once_committed(tmp_path):
    async def main():
        cluster = Cluster(brokers=(1, 2))
        cluster.create_topic(replicas=(1, 2))
        leader = Node(tmp_path, 1, cluster)
        batch = dict(producer_id=7, producer_epoch=0, base_sequence=0)
        first = asyncio.ensure_future(leader.produce(4, acks=-1, timeout_ms=20, **batch))
        assert (await asyncio.wait_for(first, 2)).error_code == Error.REQUEST_TIMED_OUT
        retry = asyncio.ensure_future(leader.produce(4, acks=-1, **batch))
        await settle()
        assert not retry.done(), "the retry is acknowledged only once committed"
        await leader.replica_fetch(2, 4, last_fetched_epoch=0)
        pr = await asyncio.wait_for(retry, 1)
        assert (pr.error_code, pr.base_offset) == (Error.NONE, 0)
        assert leader.log().log_end_offset == 4  # written once
    run(main())


def _request(node):
    R = M.ProduceRequest
    return R(transactional_id=None, acks=1, timeout_ms=1000, topic_data=[R.TopicProduceData(
        name=TOPIC, partition_data=[R.PartitionProduceData(index=0, records=memoryview(records(1)))])])


def test_an_acks_all_produce_waiting_for_replication_holds_no_view_of_its_request_frame(tmp_path):
    """The listener's memory pool frees a request's bytes when its handler returns; a produce
    parked in the purgatory must not keep the frame alive behind that accounting."""
    from protocol.dispatch import Deferred
    from tests.broker.replica_nodes import TOPIC_ID, context

    async def main():
        cluster = Cluster()
        cluster.create_topic(replicas=(1, 2, 3))
        leader = Node(tmp_path, 1, cluster)
        frame = bytearray(records(10))
        R = M.ProduceRequest
        request = R(transactional_id=None, acks=-1, timeout_ms=5000, topic_data=[R.TopicProduceData(
            name=TOPIC, topic_id=TOPIC_ID, partition_data=[R.PartitionProduceData(
                index=0, records=memoryview(frame))])])
        deferred = await leader.apis[0].fn(context(0, 11), request)
        del request  # as the dispatcher drops it once the handler has returned
        await settle()
        assert isinstance(deferred, Deferred) and leader.log().log_end_offset == 10
        frame.append(0)  # BufferError while any memoryview of the frame is still alive
        deferred.response.cancel()  # the answer it would have given, never awaited
    run(main())


def test_a_partition_with_other_than_one_magic_2_batch_is_invalid_record_and_zstd_needs_v7(tmp_path):
    """Kafka's ProduceRequest.validateRecords (v3+), per partition, before anything is written:
    exactly one record batch, of magic 2; ZStandard only from v7 (UNSUPPORTED_COMPRESSION_TYPE)."""
    from ext.batch import build_batch

    async def main():
        cluster = Cluster(brokers=(1,))
        cluster.create_topic(replicas=(1,))
        leader = Node(tmp_path, 1, cluster)
        R = M.ProduceRequest

        async def produce(data: bytes, version: int = 11):
            partition = R.PartitionProduceData(index=0, records=memoryview(bytearray(data)))
            request = R(transactional_id=None, acks=1, timeout_ms=5000, topic_data=[R.TopicProduceData(
                name=TOPIC, partition_data=[partition])])
            return (await leader.call(0, version, request)).responses[0].partition_responses[0].error_code

        one = bytes(records(3))
        old_magic = bytearray(one)
        old_magic[16] = 1
        zstd = build_batch([(b"k", b"v" * 100, [], 1_700_000_000_000)], compression=4)
        assert await produce(one + one) == Error.INVALID_RECORD
        assert await produce(bytes(old_magic)) == Error.INVALID_RECORD
        assert await produce(b"") == Error.INVALID_RECORD
        assert await produce(zstd, version=6) == Error.UNSUPPORTED_COMPRESSION_TYPE
        assert leader.log().log_end_offset == 0, "nothing written"
        assert await produce(zstd, version=7) == Error.NONE
        assert await produce(one) == Error.NONE
        assert leader.log().log_end_offset == 4
    run(main())


def test_a_partial_batch_after_the_first_is_trimmed_as_kafkas_batch_iterator_stops_at_it(tmp_path):
    """Kafka's batch iterator (ByteBufferLogInputStream) ends at bytes too few for the batch
    their header announces: the partition's records are its whole batches, and the log gets
    the first batch alone. A header it cannot read past (a size under the smallest record's,
    a magic above 2) is CORRUPT_MESSAGE; no whole first batch is INVALID_RECORD."""
    async def main():
        cluster = Cluster(brokers=(1,))
        cluster.create_topic(replicas=(1,))
        leader = Node(tmp_path, 1, cluster)
        R = M.ProduceRequest

        async def produce(data: bytes):
            partition = R.PartitionProduceData(index=0, records=memoryview(bytearray(data)))
            request = R(transactional_id=None, acks=1, timeout_ms=5000, topic_data=[R.TopicProduceData(
                name=TOPIC, partition_data=[partition])])
            return (await leader.call(0, 9, request)).responses[0].partition_responses[0].error_code

        one = bytes(records(3))
        assert await produce(one + one[:40]) == Error.NONE
        assert await produce(one + one[:11]) == Error.NONE  # not even a size field
        assert await produce(one + one[:16]) == Error.NONE  # a size field, not yet a magic byte
        assert leader.log().log_end_offset == 9
        read = leader.log().read(0, 1 << 20)
        assert read.size == 3 * len(one), "only the whole batches were written"

        tiny = one[:8] + (13).to_bytes(4, "big") + one[12:40]  # under LegacyRecord.RECORD_OVERHEAD_V0
        bad_magic = bytearray(one[:40])
        bad_magic[16] = 3
        assert await produce(one + tiny) == Error.CORRUPT_MESSAGE
        assert await produce(one + bytes(bad_magic)) == Error.CORRUPT_MESSAGE
        assert await produce(tiny) == Error.CORRUPT_MESSAGE
        assert await produce(one[:-1]) == Error.INVALID_RECORD
        assert await produce(one[:16]) == Error.INVALID_RECORD
        assert leader.log().log_end_offset == 9, "nothing more written"
    run(main())


async def describe_producers(node: Node, partitions=(0,), topic: str = TOPIC):
    R = M.DescribeProducersRequest
    request = R(topics=[R.TopicRequest(name=topic, partition_indexes=list(partitions))])
    response = await node.call(61, 0, request)
    return {p.partition_index: p for t in response.topics for p in t.partitions}


def test_describe_producers_shows_the_leaders_idempotent_producer_state(tmp_path):
    async def main():
        cluster = Cluster(brokers=(1,))
        cluster.create_topic(replicas=(1,))
        leader = Node(tmp_path, 1, cluster)
        idempotent = {"producer_id": 7, "producer_epoch": 2}
        assert (await leader.produce(5, acks=1, base_sequence=0, **idempotent)).error_code == 0
        later = BASE_TS + 100
        assert (await leader.produce(3, acks=1, base_sequence=5, ts=later, **idempotent)).error_code == 0
        assert (await leader.produce(2, acks=1)).error_code == 0  # not idempotent: no producer state
        answer = (await describe_producers(leader))[0]
        assert (answer.error_code, answer.error_message) == (Error.NONE, None)
        [p] = answer.active_producers
        assert (p.producer_id, p.producer_epoch, p.last_sequence) == (7, 2, 7)
        assert p.last_timestamp == BASE_TS + 102, "the last batch's max timestamp"
        assert (p.coordinator_epoch, p.current_txn_start_offset) == (-1, -1), "no transactions"
    run(main())


def test_describe_producers_is_answered_by_the_leader_only(tmp_path):
    async def main():
        cluster = Cluster(brokers=(1, 2))
        cluster.create_topic(replicas=(1, 2), leader=1)
        follower = Node(tmp_path, 2, cluster)
        answers = await describe_producers(follower, partitions=(0, 9))
        assert answers[0].error_code == Error.NOT_LEADER_OR_FOLLOWER and answers[0].active_producers == []
        assert answers[9].error_code == Error.UNKNOWN_TOPIC_OR_PARTITION
        unknown = await describe_producers(follower, topic="nope")
        assert unknown[0].error_code == Error.UNKNOWN_TOPIC_OR_PARTITION
    run(main())
