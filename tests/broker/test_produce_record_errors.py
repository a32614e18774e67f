"""Produce to a compacted topic of a record without a key (broker/handlers/produce.py): the
partition answers INVALID_RECORD with Kafka's error_message and, from v8, the refused records'
batch indexes (KIP-467's record_errors), and nothing is written."""
import asyncio

import pytest

from ext.batch import build_batch
from protocol import messages as M
from protocol.errors import Error
from protocol.headers import decode_response, encode_response, read_response_header
from protocol.types import Reader
from tests.broker.replica_nodes import BASE_TS, TOPIC, TOPIC_ID, Cluster, Node

WHY = f"Compacted topic cannot accept message without key in topic partition {TOPIC}-0"


def run(coro):
    return asyncio.run(coro)


def batch(keys) -> memoryview:
    return memoryview(bytearray(build_batch(
        [(k, b"v%d" % i, [], BASE_TS + i) for i, k in enumerate(keys)])))


async def produce(node: Node, records, version: int, acks: int = -1):
    R = M.ProduceRequest
    request = R(transactional_id=None, acks=acks, timeout_ms=5000, topic_data=[
        R.TopicProduceData(name=TOPIC, topic_id=TOPIC_ID, partition_data=[
            R.PartitionProduceData(index=0, records=records)])])
    return await node.call(0, version, request)


def on_the_wire(version: int, response):
    """The response as a client decodes it at ``version``."""
    frame = b"".join(bytes(part) for part in encode_response(0, version, 7, response))
    r = Reader(frame[4:])
    read_response_header(r, 0, version)
    return decode_response(0, version, r).responses[0].partition_responses[0]


def compacted_leader(tmp_path, policy: str = "compact") -> Node:
    cluster = Cluster(brokers=(1,))
    cluster.create_topic(replicas=(1,), configs={"cleanup.policy": policy})
    return Node(tmp_path, 1, cluster)


@pytest.mark.parametrize("acks", [1, -1])
def test_produce_of_a_record_without_key_to_a_compacted_topic_lists_the_record_errors_as_kafka_does(
        tmp_path, acks):
    async def main():
        leader = compacted_leader(tmp_path)
        response = await produce(leader, batch([b"a", None, b"b", None]), 9, acks)
        pr = on_the_wire(9, response)
        assert pr.error_code == Error.INVALID_RECORD
        assert [(e.batch_index, e.batch_index_error_message) for e in pr.record_errors] == [
            (1, WHY), (3, WHY)]
        assert pr.error_message == (
            "One or more records have been rejected due to 2 record errors in total, and only "
            f"showing the first three errors at most: [RecordError(batchIndex=1, message='{WHY}'), "
            f"RecordError(batchIndex=3, message='{WHY}')]")
        assert pr.base_offset == -1
        assert leader.log().log_end_offset == 0
        ok = on_the_wire(9, await produce(leader, batch([b"a", b"b"]), 9, acks))
        assert (ok.error_code, ok.base_offset, ok.record_errors, ok.error_message) == (
            Error.NONE, 0, [], None)
    run(main())


def test_a_version_before_8_answers_invalid_record_without_record_errors(tmp_path):
    async def main():
        leader = compacted_leader(tmp_path, "compact,delete")
        pr = on_the_wire(7, await produce(leader, batch([None]), 7))
        assert pr.error_code == Error.INVALID_RECORD
        assert leader.log().log_end_offset == 0
    run(main())


def test_a_record_without_key_is_stored_on_a_topic_that_does_not_compact(tmp_path):
    async def main():
        cluster = Cluster(brokers=(1,))
        cluster.create_topic(replicas=(1,))
        leader = Node(tmp_path, 1, cluster)
        pr = on_the_wire(9, await produce(leader, batch([None, None]), 9))
        assert (pr.error_code, pr.base_offset, pr.record_errors) == (Error.NONE, 0, [])
        assert leader.log().log_end_offset == 2
    run(main())
