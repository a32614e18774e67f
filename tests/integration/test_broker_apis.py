"""Broker APIs against a real node, spoken with Strom's own protocol client (what the
client libraries do not exercise directly: long polls, byte limits, timestamps, leader
epochs, DeleteRecords, CreatePartitions, auto-creation)."""
import asyncio
import os
import stat
import time

import pytest

from ext.batch import build_batch, iter_batches
from protocol import messages as M
from protocol.client import KafkaConnection
from protocol.errors import Error

pytestmark = pytest.mark.timeout(120)
TS = 1_700_000_000_000


def run(node, fn):
    async def main():
        conn = KafkaConnection("127.0.0.1", node.broker_port)
        await conn.connect()
        try:
            return await fn(conn)
        finally:
            await conn.close()
    return asyncio.run(main())


async def create(conn, name, partitions=1, configs=None):
    R = M.CreateTopicsRequest
    resp = await conn.request(19, 7, R(topics=[R.CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=1,
        configs=[R.CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()])],
        timeout_ms=10000))
    assert resp.topics[0].error_code == Error.NONE, resp
    return resp.topics[0]


async def produce(conn, topic, partition, records, acks=-1, **batch):
    R = M.ProduceRequest
    data = build_batch(records, **batch)
    resp = await conn.request(0, 9, R(acks=acks, timeout_ms=5000, topic_data=[R.TopicProduceData(
        name=topic, partition_data=[R.PartitionProduceData(index=partition, records=data)])]))
    return resp.responses[0].partition_responses[0]


def fetch_request(topic, partition, offset, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20,
                  partition_max_bytes=1 << 20):
    R = M.FetchRequest
    return R(replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=max_bytes,
             isolation_level=0, session_id=0, session_epoch=-1, topics=[R.FetchTopic(
                 topic=topic, partitions=[R.FetchPartition(
                     partition=partition, fetch_offset=offset, partition_max_bytes=partition_max_bytes)])])


def recs(n, size=100, ts=TS):
    return [(b"k%d" % i, b"x" * size, [], ts + i) for i in range(n)]


def test_a_waiting_fetch_is_answered_when_data_arrives_not_at_its_timeout(shared_node):
    """The fetch may wait 120 s; an answer within 60 s of the append can only be the append
    waking it (the bound is a timeout, not a measurement)."""
    async def body(conn):
        await create(conn, "longpoll")
        other = KafkaConnection("127.0.0.1", shared_node.broker_port)
        await other.connect()
        request = fetch_request("longpoll", 0, 0, max_wait_ms=120_000)
        waiting = asyncio.ensure_future(other.request(1, 12, request, timeout=150))
        await asyncio.sleep(0.5)
        assert not waiting.done()
        assert (await produce(conn, "longpoll", 0, recs(3))).error_code == Error.NONE
        resp = await asyncio.wait_for(waiting, 60)
        await other.close()
        return resp.responses[0].partitions[0]
    part = run(shared_node, body)
    assert [h.records_count for h in iter_batches(part.records)] == [3]


def test_fetch_byte_limits_return_whole_batches_but_at_least_one(shared_node):
    async def body(conn):
        await create(conn, "limits")
        for _ in range(5):
            await produce(conn, "limits", 0, recs(10))
        size = len(build_batch(recs(10)))
        small = await conn.request(1, 12, fetch_request("limits", 0, 0, partition_max_bytes=size * 2 + 10))
        tiny = await conn.request(1, 12, fetch_request("limits", 0, 0, partition_max_bytes=10))
        capped = await conn.request(1, 12, fetch_request("limits", 0, 0, max_bytes=size * 3))
        return [len(r.responses[0].partitions[0].records) for r in (small, tiny, capped)], size
    sizes, size = run(shared_node, body)
    assert sizes == [size * 2, size, size * 3]


def test_min_bytes_holds_a_fetch_until_enough_data(shared_node):
    async def body(conn):
        await create(conn, "minbytes")
        await produce(conn, "minbytes", 0, recs(1))
        started = time.monotonic()
        resp = await conn.request(1, 12, fetch_request("minbytes", 0, 0, max_wait_ms=1500, min_bytes=1 << 20))
        return time.monotonic() - started, resp.responses[0].partitions[0]
    waited, part = run(shared_node, body)
    assert waited >= 1.0 and part.error_code == Error.NONE and len(part.records) > 0


def test_list_offsets_earliest_latest_by_timestamp_and_max_timestamp(shared_node):
    async def body(conn):
        await create(conn, "times")
        for i in range(4):
            await produce(conn, "times", 0, recs(5, ts=TS + 1000 * i))
        R = M.ListOffsetsRequest
        answers = []
        for ts in (-2, -1, TS + 2001, TS + 2500, -3, TS + 10**9):
            resp = await conn.request(2, 8, R(replica_id=-1, isolation_level=0, topics=[R.ListOffsetsTopic(
                name="times", partitions=[R.ListOffsetsPartition(partition_index=0, timestamp=ts)])]))
            p = resp.topics[0].partitions[0]
            answers.append((p.error_code, p.offset))
        return answers
    assert run(shared_node, body) == [(0, 0), (0, 20), (0, 11), (0, 15), (0, 19), (0, -1)]


def test_delete_records_raises_the_log_start_offset(shared_node):
    async def body(conn):
        await create(conn, "trim")
        for _ in range(3):
            await produce(conn, "trim", 0, recs(10))
        R = M.DeleteRecordsRequest
        resp = await conn.request(21, 2, R(timeout_ms=5000, topics=[R.DeleteRecordsTopic(
            name="trim", partitions=[R.DeleteRecordsPartition(partition_index=0, offset=12)])]))
        low = resp.topics[0].partitions[0].low_watermark
        out_of_range = await conn.request(1, 12, fetch_request("trim", 0, 5))
        return low, out_of_range.responses[0].partitions[0].error_code
    assert run(shared_node, body) == (12, Error.OFFSET_OUT_OF_RANGE)


def test_offsets_for_leader_epoch_answers_from_the_epoch_cache(shared_node):
    async def body(conn):
        await create(conn, "epochs")
        await produce(conn, "epochs", 0, recs(7))
        R = M.OffsetForLeaderEpochRequest
        resp = await conn.request(23, 4, R(replica_id=-1, topics=[R.OffsetForLeaderTopic(
            topic="epochs", partitions=[R.OffsetForLeaderPartition(partition=0, current_leader_epoch=-1,
                                                                   leader_epoch=0)])]))
        p = resp.topics[0].partitions[0]
        return p.error_code, p.leader_epoch, p.end_offset
    assert run(shared_node, body) == (0, 0, 7)


def test_create_partitions_and_metadata_auto_creation(shared_node):
    async def body(conn):
        await create(conn, "grow", 2)
        R = M.CreatePartitionsRequest
        grown = await conn.request(37, 3, R(topics=[R.CreatePartitionsTopic(name="grow", count=5)],
                                            timeout_ms=5000, validate_only=False))
        shrink = await conn.request(37, 3, R(topics=[R.CreatePartitionsTopic(name="grow", count=3)],
                                             timeout_ms=5000, validate_only=False))
        meta = await conn.request(3, 12, M.MetadataRequest(topics=[
            M.MetadataRequest.MetadataRequestTopic(name=n) for n in ("grow", "auto-made", "bad/name")],
            allow_auto_topic_creation=True))
        return grown.results[0].error_code, shrink.results[0].error_code, {
            t.name: (t.error_code, len(t.partitions)) for t in meta.topics}
    grown, shrink, topics = run(shared_node, body)
    assert grown == Error.NONE and shrink == Error.INVALID_PARTITIONS
    assert topics["grow"] == (0, 5)
    assert topics["auto-made"][0] in (Error.NONE, Error.LEADER_NOT_AVAILABLE)
    assert topics["bad/name"][0] == Error.INVALID_TOPIC_EXCEPTION


def test_create_topic_errors(shared_node):
    async def body(conn):
        await create(conn, "dup")
        R = M.CreateTopicsRequest
        resp = await conn.request(19, 7, R(topics=[
            R.CreatableTopic(name="dup", num_partitions=1, replication_factor=1),
            R.CreatableTopic(name="toomany", num_partitions=1, replication_factor=3),
            R.CreatableTopic(name="badcfg", num_partitions=1, replication_factor=1,
                             configs=[R.CreatableTopicConfig(name="segment.bytes", value="x")]),
        ], timeout_ms=5000))
        return [t.error_code for t in resp.topics]
    assert run(shared_node, body) == [Error.TOPIC_ALREADY_EXISTS, Error.INVALID_REPLICATION_FACTOR,
                                      Error.INVALID_CONFIG]


def test_produce_errors_per_partition(shared_node):
    async def body(conn):
        await create(conn, "strict", configs={"max.message.bytes": "500"})
        too_big = await produce(conn, "strict", 0, recs(10))
        unknown = await produce(conn, "strict", 7, recs(1))
        R = M.ProduceRequest
        bad = bytearray(build_batch(recs(2)))
        bad[-1] ^= 0xFF
        corrupt = await conn.request(0, 9, R(acks=1, timeout_ms=5000, topic_data=[R.TopicProduceData(
            name="strict", partition_data=[R.PartitionProduceData(index=0, records=bytes(bad))])]))
        bad_acks = await produce(conn, "strict", 0, recs(1), acks=2)
        return (too_big.error_code, unknown.error_code,
                corrupt.responses[0].partition_responses[0].error_code, bad_acks.error_code)
    assert run(shared_node, body) == (Error.MESSAGE_TOO_LARGE, Error.UNKNOWN_TOPIC_OR_PARTITION,
                                      Error.CORRUPT_MESSAGE, Error.INVALID_REQUIRED_ACKS)


def test_idempotent_sequences_are_checked(shared_node):
    async def body(conn):
        await create(conn, "idem")
        init = await conn.request(22, 4, M.InitProducerIdRequest(transactional_id=None,
                                                                  transaction_timeout_ms=60000))
        pid = init.producer_id
        first = await produce(conn, "idem", 0, recs(3), producer_id=pid, producer_epoch=0, base_sequence=0)
        retry = await produce(conn, "idem", 0, recs(3), producer_id=pid, producer_epoch=0, base_sequence=0)
        gap = await produce(conn, "idem", 0, recs(3), producer_id=pid, producer_epoch=0, base_sequence=9)
        return (init.error_code, (first.error_code, first.base_offset),
                (retry.error_code, retry.base_offset), gap.error_code)
    init, first, retry, gap = run(shared_node, body)
    assert init == Error.NONE and first == (0, 0) and retry == (0, 0)
    assert gap == Error.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_a_nodes_log_dirs_and_files_are_its_users_alone(shared_node):
    """Spark reads segment files directly, past the authorizer: what a node writes (its log dirs,
    segments, indexes, checkpoints, metadata log) must not be readable by other users."""
    async def body(conn):
        await create(conn, "private")
        assert (await produce(conn, "private", 0, recs(5))).error_code == Error.NONE
    run(shared_node, body)
    seen = 0
    for directory, _dirs, files in os.walk(shared_node.log_dir):
        for path in [directory] + [os.path.join(directory, f) for f in files]:
            try:
                mode = os.stat(path).st_mode
            except FileNotFoundError:  # a file the node replaced meanwhile
                continue
            assert mode & (stat.S_IRWXG | stat.S_IRWXO) == 0, f"{path} is {stat.filemode(mode)}"
            seen += 1
    assert seen > 10
