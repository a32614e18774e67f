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


# ---- receiving a large Fetch response (the replica fetcher's path) -------------------------------

FETCH_PARTITIONS = 4  # x 1 MiB (replica.fetch.max.bytes) = a 4 MiB Fetch response
FETCH_PARTITION_BYTES = 1 << 20
FETCH_VERSION = 16


def _serve_fetch(fd: int):
    """A protocol.net.Server handler answering every request with the same 4 MiB Fetch response,
    its records sent from a file with sendfile, as a leader answers a replica fetch."""
    from engine.segment import FileSlice

    R = M.FetchResponse
    partitions = [R.PartitionData(partition_index=i, high_watermark=1000, last_stable_offset=1000,
                                  log_start_offset=0,
                                  records=FileSlice(fd, i * FETCH_PARTITION_BYTES, FETCH_PARTITION_BYTES))
                  for i in range(FETCH_PARTITIONS)]
    response = R(session_id=0, responses=[R.FetchableTopicResponse(topic="orders", topic_id=bytes(16),
                                                                   partitions=partitions)])

    async def handle(frame: memoryview):
        correlation_id = int.from_bytes(frame[4:8], "big", signed=True)
        return encode_response(1, FETCH_VERSION, correlation_id, response)

    return handle


def test_fetch_response_4mib_received_through_kafka_connection(benchmark, tmp_path):
    """A 4 MiB Fetch response over loopback, from request to decoded body: what the replica
    fetcher pays per Fetch (the receive path of protocol.client.KafkaConnection)."""
    import asyncio

    from protocol.client import KafkaConnection
    from protocol.net import Server

    data = os.urandom(FETCH_PARTITIONS * FETCH_PARTITION_BYTES)
    path = tmp_path / "records"
    path.write_bytes(data)
    fd = os.open(path, os.O_RDONLY)
    loop = asyncio.new_event_loop()
    server = Server(_serve_fetch(fd), 1 << 20)
    port = server.bind("127.0.0.1", 0)
    conn = KafkaConnection("127.0.0.1", port, "bench")
    request = M.FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=len(data),
                             isolation_level=0, session_id=0, session_epoch=-1, topics=[],
                             forgotten_topics_data=[], rack_id="")

    def fetch():
        return loop.run_until_complete(conn.request(1, FETCH_VERSION, request))

    try:
        loop.call_soon(server.start)
        loop.run_until_complete(conn.connect())
        body = benchmark(fetch)
    finally:
        loop.run_until_complete(conn.close())
        loop.run_until_complete(server.close())
        loop.close()
        os.close(fd)
    records = [p.records for t in body.responses for p in t.partitions]
    assert b"".join(records) == data
