"""Protocol codec benchmarks. Targets (issue 3): Produce v9+ request parse <= 5 us excluding
records; Fetch response framing for 100 partitions <= 30 us; Metadata response with 100
topics x 10 partitions <= 1 ms.

Each path is measured twice: as the broker runs it (header + protocol.fastcodec, through
protocol.headers) and through the generic codec alone (``*_generic``), for comparison."""
import os

from protocol import headers
from protocol import messages as M
from protocol.headers import (
    decode_request,
    encode_request,
    encode_response,
    encode_response_generic,
    read_request_header,
)
from protocol.types import Reader

RECORDS = os.urandom(16 * 1024)


class Slice:
    """A stand-in for a segment file slice (what Fetch sends with sendfile)."""

    def __init__(self, size: int):
        self.size = size
        self.fd = -1
        self.position = 0


def produce_frame(version: int = 9) -> bytes:
    R = M.ProduceRequest
    body = R(transactional_id=None, acks=-1, timeout_ms=30000, topic_data=[
        R.TopicProduceData(name="orders", partition_data=[R.PartitionProduceData(index=0, records=RECORDS)])])
    return encode_request(0, version, 1, "bench", body)


def test_fast_codec_is_measured():
    assert headers.FAST_CODEC, "protocol.fastcodec is not built: the fast benchmarks would be generic"


def test_produce_request_parse(benchmark):
    frame = memoryview(bytearray(produce_frame()))[4:]

    def parse():
        r = Reader(frame)
        header = read_request_header(r)
        return decode_request(header.api_key, header.api_version, r)

    request = benchmark(parse)
    records = request.topic_data[0].partition_data[0].records
    assert isinstance(records, memoryview) and len(records) == len(RECORDS)


def test_produce_request_parse_generic(benchmark):
    frame = memoryview(bytearray(produce_frame()))[4:]

    def parse():
        r = Reader(frame)
        header = read_request_header(r)
        return M.REQUESTS[0].decode(header.api_version, r)

    request = benchmark(parse)
    records = request.topic_data[0].partition_data[0].records
    assert isinstance(records, memoryview) and len(records) == len(RECORDS)


def fetch_response(partitions: int = 100):
    R = M.FetchResponse
    return R(session_id=0, responses=[R.FetchableTopicResponse(topic="orders", partitions=[
        R.PartitionData(partition_index=i, high_watermark=1000, last_stable_offset=1000,
                        log_start_offset=0, records=Slice(65536))
        for i in range(partitions)])])


def test_fetch_response_framing_100_partitions(benchmark):
    response = fetch_response()
    parts = benchmark(encode_response, 1, 12, 7, response)
    assert sum(1 for p in parts if isinstance(p, Slice)) == 100


def test_fetch_response_framing_100_partitions_generic(benchmark):
    response = fetch_response()
    parts = benchmark(encode_response_generic, 1, 12, 7, response)
    assert sum(1 for p in parts if isinstance(p, Slice)) == 100


def metadata_response(topics: int = 100, partitions: int = 10):
    R = M.MetadataResponse
    return R(brokers=[R.MetadataResponseBroker(node_id=i, host=f"broker-{i}", port=9092) for i in range(3)],
             cluster_id="c", controller_id=1, topics=[
        R.MetadataResponseTopic(name=f"topic-{t}", topic_id=os.urandom(16), partitions=[
            R.MetadataResponsePartition(partition_index=p, leader_id=p % 3, leader_epoch=1,
                                        replica_nodes=[0, 1, 2], isr_nodes=[0, 1, 2])
            for p in range(partitions)])
        for t in range(topics)])


def test_metadata_response_100_topics_x_10_partitions(benchmark):
    response = metadata_response()
    parts = benchmark(encode_response, 3, 12, 7, response)
    assert len(parts) == 1 and len(parts[0]) > 10000


def test_metadata_response_100_topics_x_10_partitions_generic(benchmark):
    response = metadata_response()
    parts = benchmark(encode_response_generic, 3, 12, 7, response)
    assert len(parts) == 1 and len(parts[0]) > 10000
