"""protocol.client.KafkaConnection against scripted peers on 127.0.0.1.

Each peer is an asyncio stream server whose handler reads request frames and writes whatever
bytes the test scripts (answers out of order, split at awkward places, truncated, never sent)
or ends the connection in one of the ways the client must tell apart: an end of stream and a
reset (the peer's doing: ConnectionClosedByPeer, which raft.peers reports as CLOSED), a
malformed frame and a local close (plain ConnectionError, which it does not).
"""
from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import struct

import pytest

from protocol import messages as M
from protocol.client import ConnectionClosedByPeer, KafkaConnection
from protocol.headers import RequestHeader, encode_response, read_request_header
from protocol.net import BUFFER_BYTES
from protocol.types import ProtocolError, Reader

HOST = "127.0.0.1"
DESCRIBE_CLUSTER, FETCH, PRODUCE = 60, 1, 0


def run(coro, timeout: float = 10.0):
    async def bounded():
        async with asyncio.timeout(timeout):
            return await coro
    return asyncio.run(bounded())


@contextlib.asynccontextmanager
async def peer(handler):
    """A connection to a server that runs ``handler(reader, writer)`` for it."""
    server = await asyncio.start_server(handler, HOST, 0)
    conn = KafkaConnection(HOST, server.sockets[0].getsockname()[1], "test")
    await conn.connect(2.0)
    try:
        yield conn
    finally:
        await conn.close()
        server.close()


async def read_request(reader: asyncio.StreamReader) -> RequestHeader:
    size = int.from_bytes(await reader.readexactly(4), "big")
    return read_request_header(Reader(await reader.readexactly(size)))


def answer(header: RequestHeader, body) -> bytes:
    """The whole response frame (size prefix included) to ``header``'s request."""
    return b"".join(encode_response(header.api_key, header.api_version, header.correlation_id, body))


def describe_cluster(conn: KafkaConnection, tag: int, timeout: float = 5.0):
    return conn.request(DESCRIBE_CLUSTER, 1, M.DescribeClusterRequest(endpoint_type=tag), timeout)


def fetch(conn: KafkaConnection, timeout: float = 5.0):
    request = M.FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 30, isolation_level=0,
                             session_id=0, session_epoch=-1, topics=[], forgotten_topics_data=[], rack_id="")
    return conn.request(FETCH, 16, request, timeout)


def fetch_response(records: bytes):
    R = M.FetchResponse
    return R(responses=[R.FetchableTopicResponse(topic_id=bytes(16), partitions=[
        R.PartitionData(partition_index=0, high_watermark=1, records=records)])])


def records_of(response) -> memoryview:
    return response.responses[0].partitions[0].records


def cluster_id(header: RequestHeader) -> M.DescribeClusterResponse:
    return M.DescribeClusterResponse(cluster_id=f"answer-to-{header.correlation_id}")


# ---- matching ----------------------------------------------------------------------------------


def test_pipelined_requests_are_matched_to_answers_sent_in_reverse_order():
    async def reverse(reader, writer):
        headers = [await read_request(reader) for _ in range(5)]
        writer.write(b"".join(answer(h, cluster_id(h)) for h in reversed(headers)))

    async def scenario():
        async with peer(reverse) as conn:
            answers = await asyncio.gather(*(describe_cluster(conn, 1) for _ in range(5)))
            ids = [int(a.cluster_id.removeprefix("answer-to-")) for a in answers]
            assert len(set(ids)) == 5 and ids == sorted(ids)  # each got its own, in request order

    run(scenario())


def test_a_timed_out_request_fails_alone_and_its_late_answer_is_dropped():
    async def late_first(reader, writer):
        first = await read_request(reader)
        second = await read_request(reader)
        writer.write(answer(first, cluster_id(first)))  # after the first timed out
        writer.write(answer(second, cluster_id(second)))

    async def scenario():
        async with peer(late_first) as conn:
            with pytest.raises(TimeoutError):
                await describe_cluster(conn, 1, timeout=0.1)
            second = await describe_cluster(conn, 1)
            assert second.cluster_id == "answer-to-2"
            assert conn.connected

    run(scenario())


def test_an_answer_that_does_not_decode_fails_only_its_request():
    async def scenario():
        async def garbage_then_good(reader, writer):
            first = await read_request(reader)
            # A flexible DescribeCluster answer cut after its correlation id: size 4 + 1 byte.
            writer.write((5).to_bytes(4, "big") + first.correlation_id.to_bytes(4, "big") + b"\x05")
            second = await read_request(reader)
            writer.write(answer(second, cluster_id(second)))

        async with peer(garbage_then_good) as conn:
            with pytest.raises(ProtocolError):
                await describe_cluster(conn, 1)
            assert (await describe_cluster(conn, 1)).cluster_id == "answer-to-2"

    run(scenario())


# ---- large answers -----------------------------------------------------------------------------


def test_an_answer_larger_than_the_receive_buffer_arrives_whole_however_it_is_split():
    records = os.urandom(4 * BUFFER_BYTES + 12345)

    async def split(reader, writer):
        big, small = await read_request(reader), await read_request(reader)
        data = answer(big, fetch_response(records)) + answer(small, cluster_id(small))
        # Cut inside the size prefix, inside the header, mid-records and right at the boundary
        # between the two frames (which share the last write).
        cuts = [2, 5, 40, BUFFER_BYTES - 7, BUFFER_BYTES + 1, 3 * BUFFER_BYTES, len(data) - 30, len(data)]
        start = 0
        for cut in cuts:
            writer.write(data[start:cut])
            await writer.drain()
            await asyncio.sleep(0.005)
            start = cut

    async def scenario():
        async with peer(split) as conn:
            big, small = await asyncio.gather(fetch(conn), describe_cluster(conn, 1))
            assert bytes(records_of(big)) == records
            assert small.cluster_id == "answer-to-2"

    run(scenario())


def test_records_of_an_answer_stay_valid_after_later_answers_reuse_the_receive_buffer():
    small_a, big, small_b = os.urandom(1000), os.urandom(2 * BUFFER_BYTES), os.urandom(1000)

    async def three(reader, writer):
        for records in (small_a, big, small_b):
            writer.write(answer(await read_request(reader), fetch_response(records)))

    async def scenario():
        async with peer(three) as conn:
            answers = [await fetch(conn) for _ in range(3)]
            for response, records in zip(answers, (small_a, big, small_b)):
                view = records_of(response)
                assert view.readonly
                assert bytes(view) == records

    run(scenario())


def test_a_request_larger_than_the_write_buffer_waits_until_the_peer_reads():
    records = os.urandom(32 << 20)  # more than the socket buffers of both ends hold
    reading = asyncio.Event()

    async def slow(reader, writer):
        await reading.wait()
        header = await read_request(reader)
        writer.write(answer(header, M.ProduceResponse()))

    async def scenario():
        async with peer(slow) as conn:
            R = M.ProduceRequest
            body = R(acks=-1, timeout_ms=1000, topic_data=[R.TopicProduceData(
                name="t", partition_data=[R.PartitionProduceData(index=0, records=records)])])
            with pytest.raises(TimeoutError):
                await conn.request(PRODUCE, 9, body, timeout=0.3)
        async with peer(slow) as conn:
            request = asyncio.ensure_future(conn.request(PRODUCE, 9, body, timeout=10))
            await asyncio.sleep(0.2)
            assert not request.done()
            reading.set()
            assert (await request).responses == []

    run(scenario(), timeout=30)


# ---- how a connection ends ---------------------------------------------------------------------


def test_end_of_stream_fails_every_pending_request_as_closed_by_the_peer():
    async def two_then_close(reader, writer):
        await read_request(reader)
        await read_request(reader)
        writer.write(b"\x00\x00\x01\x00partial")  # and a frame it never finishes
        writer.close()

    async def scenario():
        async with peer(two_then_close) as conn:
            outcomes = await asyncio.gather(describe_cluster(conn, 1), fetch(conn), return_exceptions=True)
            assert all(isinstance(e, ConnectionClosedByPeer) for e in outcomes), outcomes
            assert not conn.connected
            with pytest.raises(ConnectionError) as later:
                await describe_cluster(conn, 1)
            assert not isinstance(later.value, ConnectionClosedByPeer)  # not connected: our own

    run(scenario())


def test_a_reset_fails_pending_requests_as_closed_by_the_peer():
    async def reset(reader, writer):
        await read_request(reader)
        sock = writer.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close sends RST
        writer.transport.abort()

    async def scenario():
        async with peer(reset) as conn:
            with pytest.raises(ConnectionClosedByPeer):
                await describe_cluster(conn, 1)

    run(scenario())


def test_a_negative_frame_size_is_a_lost_connection_not_one_closed_by_the_peer():
    async def malformed(reader, writer):
        await read_request(reader)
        writer.write((-2).to_bytes(4, "big", signed=True))
        await reader.read()  # stays open: the client closes

    async def scenario():
        async with peer(malformed) as conn:
            with pytest.raises(ConnectionError) as failed:
                await describe_cluster(conn, 1)
            assert not isinstance(failed.value, ConnectionClosedByPeer)
            assert not conn.connected

    run(scenario())


def test_a_local_close_fails_pending_requests_as_a_plain_connection_error():
    async def silent(reader, writer):
        await reader.read()

    async def scenario():
        async with peer(silent) as conn:
            pending = asyncio.ensure_future(describe_cluster(conn, 1))
            await asyncio.sleep(0.05)
            await conn.close()
            with pytest.raises(ConnectionError) as failed:
                await pending
            assert not isinstance(failed.value, ConnectionClosedByPeer)
            assert not conn.connected

    run(scenario())


def test_requests_before_connect_fail_at_once_and_connections_use_tcp_nodelay():
    async def silent(reader, writer):
        await reader.read()

    async def scenario():
        with pytest.raises(ConnectionError):
            await describe_cluster(KafkaConnection(HOST, 1), 1)
        async with peer(silent) as conn:
            sock = conn._transport.get_extra_info("socket")
            assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 1

    run(scenario())
