"""The wire edge without sockets: framing and dispatch (protocol/net.py, protocol/dispatch.py)."""
import asyncio
import struct

import pytest

from protocol import messages as M
from protocol.dispatch import Api, Dispatcher
from protocol.errors import Error
from protocol.frames import BUFFER_BYTES, HEAD_BYTES
from protocol.headers import encode_request, read_response_header
from protocol.net import FrameReader, FrameTooLarge
from protocol.types import Reader


def test_frames_are_split_across_arbitrary_reads():
    frames = [b"a" * 5, b"", b"xyz" * 100]
    stream = b"".join(struct.pack(">i", len(f)) + f for f in frames)
    for step in (1, 2, 3, 7, 1000):
        reader = FrameReader(1 << 20)
        out = []
        for i in range(0, len(stream), step):
            out += reader.feed(stream[i:i + step])
        assert [bytes(f) for f in out] == frames


def test_a_frame_larger_than_the_buffer_is_received_into_its_own_buffer():
    """The receiving side writes into get_buffer(): a frame that cannot fit the shared
    buffer is filled in place (no copy per read), and frames around it still split."""
    small, big = b"s" * 10, bytes(range(256)) * 40  # 10,240 bytes against a 1 KiB buffer
    stream = b"".join(struct.pack(">i", len(f)) + f for f in (small, big, small))
    reader = FrameReader(1 << 20, buffer_bytes=1024)
    out, pos = [], 0
    while pos < len(stream):
        buf = reader.get_buffer()
        n = min(len(buf), 700, len(stream) - pos)
        buf[:n] = stream[pos:pos + n]
        pos += n
        out += reader.updated(n)
        if len(out) == 2:
            assert reader.big is None  # the big frame's buffer was handed out whole
    assert [bytes(f) for f in out] == [small, big, small]
    assert all(isinstance(f, bytearray) for f in out)


def _greedy_reads(reader, stream):
    """A socket with the whole stream waiting: each read fills all the reader offers.
    Returns the frames and the length of every buffer offered."""
    out, offered, pos = [], [], 0
    while pos < len(stream):
        buf = reader.get_buffer()
        offered.append(len(buf))
        n = min(len(buf), len(stream) - pos)
        buf[:n] = stream[pos:pos + n]
        pos += n
        out += reader.updated(n)
    return out, offered


def test_after_a_large_frame_an_empty_buffer_is_read_short_so_little_of_the_next_is_copied():
    """A stream of large frames (a replica fetcher's answers): the read that brings a large
    frame's size brings at most HEAD_BYTES of it into the shared buffer, so at most that much
    is copied into the frame's own buffer; small frames between them still split."""
    big = [bytes([i]) * (BUFFER_BYTES + 5000 * i) for i in range(1, 4)]
    small = b"hw-only answer"
    frames = [big[0], small, big[1], big[2], small]
    stream = b"".join(struct.pack(">i", len(f)) + f for f in frames)
    reader = FrameReader(1 << 24)
    out, offered = _greedy_reads(reader, stream)
    assert [bytes(f) for f in out] == frames
    assert offered[0] == BUFFER_BYTES  # nothing large seen yet: the whole buffer
    assert HEAD_BYTES in offered
    assert len(reader.get_buffer()) == HEAD_BYTES


def test_small_frames_that_fill_the_short_read_give_the_whole_buffer_back():
    big = b"b" * (BUFFER_BYTES + 1)
    smalls = [b"s" * 100] * (2 * BUFFER_BYTES // 104)
    stream = b"".join(struct.pack(">i", len(f)) + f for f in [big, *smalls])
    reader = FrameReader(1 << 24)
    out, offered = _greedy_reads(reader, stream)
    assert [bytes(f) for f in out] == [big, *smalls]
    first_short = offered.index(HEAD_BYTES)
    assert offered[first_short + 1] == BUFFER_BYTES - HEAD_BYTES  # the rest of the buffer
    assert HEAD_BYTES not in offered[first_short + 1:]


@pytest.mark.parametrize("size", [-1, 101])
def test_a_frame_over_socket_request_max_bytes_or_negative_is_refused(size):
    with pytest.raises(FrameTooLarge):
        FrameReader(100).feed(struct.pack(">i", size))


async def _echo(header, request):
    return M.DescribeClusterResponse(error_code=Error.NONE, cluster_id="c", controller_id=1)


def dispatcher() -> Dispatcher:
    return Dispatcher([Api(60, 0, 1, _echo)])


def call(frame: bytes):
    return asyncio.run(dispatcher().handle(memoryview(bytearray(frame[4:]))))


def decode(parts, api_key, version):
    data = b"".join(parts)[4:]
    r = Reader(data)
    correlation_id = read_response_header(r, api_key, version)
    return correlation_id, M.RESPONSES[api_key].decode(version, r)


def test_api_versions_advertises_exactly_what_is_served():
    frame = encode_request(18, 3, 7, "t", M.ApiVersionsRequest(client_software_name="t",
                                                               client_software_version="1"))
    correlation_id, body = decode(call(frame), 18, 3)
    assert correlation_id == 7 and body.error_code == 0
    assert {(k.api_key, k.min_version, k.max_version) for k in body.api_keys} == {(18, 0, 4), (60, 0, 1)}


def test_api_versions_at_an_unknown_version_answers_v0_with_unsupported_version():
    frame = bytearray(encode_request(18, 4, 9, "t", M.ApiVersionsRequest()))
    frame[6:8] = struct.pack(">h", 99)  # a version from the future (flexible header, like v3+)
    correlation_id, body = decode(call(bytes(frame)), 18, 0)
    assert correlation_id == 9 and body.error_code == Error.UNSUPPORTED_VERSION
    assert any(k.api_key == 60 for k in body.api_keys)


def test_a_served_api_at_an_unserved_version_gets_unsupported_version():
    frame = encode_request(60, 2, 5, "t", M.DescribeClusterRequest())
    correlation_id, body = decode(call(frame), 60, 2)
    assert correlation_id == 5 and body.error_code == Error.UNSUPPORTED_VERSION


def test_unknown_api_key_and_malformed_bodies_close_the_connection():
    assert call(struct.pack(">ihhih", 8, 9999, 0, 1, -1)) is None
    good = encode_request(60, 1, 5, "t", M.DescribeClusterRequest())
    assert call(good[:-3]) is None
    assert call(struct.pack(">ihh", 4, 60, 1)) is None  # the header itself is cut short


def test_a_failing_handler_closes_only_that_connection():
    async def boom(header, request):
        raise RuntimeError("bug")

    d = Dispatcher([Api(60, 0, 1, boom)])
    frame = encode_request(60, 1, 5, "t", M.DescribeClusterRequest())
    assert asyncio.run(d.handle(memoryview(bytearray(frame[4:])))) is None


def test_a_handler_learns_the_listener_its_request_came_on():
    """Each listening socket is bound with its listener's name; the header a handler gets
    carries the name of the listener its connection was accepted on (Kafka's
    RequestContext.listenerName), and None on a socket bound without one."""
    from protocol.client import KafkaConnection
    from protocol.net import Server

    async def scenario():
        async def handler(header, request):
            return M.DescribeClusterResponse(error_code=Error.NONE, cluster_id=str(header.listener_name))

        server = Server(Dispatcher([Api(60, 0, 1, handler)]).handle, 1 << 20)
        ports = {name: server.bind("127.0.0.1", 0, name) for name in ("EXTERNAL", "INTERNAL", None)}
        server.start()
        try:
            for name, port in ports.items():
                conn = KafkaConnection("127.0.0.1", port)
                await conn.connect()
                try:
                    for _ in range(2):
                        answer = await conn.request(60, 1, M.DescribeClusterRequest())
                        assert answer.cluster_id == str(name)
                finally:
                    await conn.close()
        finally:
            await server.close()

    asyncio.run(asyncio.wait_for(scenario(), 10))


def test_a_deferred_answer_lets_the_next_requests_in_and_answers_keep_request_order():
    """A produce waiting for replication answers Deferred: the connection handles the
    requests behind it meanwhile (their appends land behind its own), and the answers still
    leave in request order."""
    from protocol.client import KafkaConnection
    from protocol.dispatch import Deferred
    from protocol.net import Server

    async def scenario():
        release = asyncio.Event()
        handled = []

        async def slow_then_fast(header, request):
            handled.append(request.endpoint_type)
            if request.endpoint_type == 1:  # the first request waits for "replication"
                async def later():
                    await release.wait()
                    return M.DescribeClusterResponse(error_code=Error.NONE, cluster_id="first")
                return Deferred(later())
            return M.DescribeClusterResponse(error_code=Error.NONE,
                                             cluster_id=f"next-{request.endpoint_type}")

        server = Server(Dispatcher([Api(60, 0, 1, slow_then_fast)]).handle, 1 << 20,
                        pipelined=frozenset({60}))
        port = server.bind("127.0.0.1", 0)
        server.start()
        conn = KafkaConnection("127.0.0.1", port)
        await conn.connect()
        try:
            answers = [asyncio.ensure_future(conn.request(60, 1, M.DescribeClusterRequest(endpoint_type=t)))
                       for t in (1, 2, 3)]
            for _ in range(100):
                if len(handled) == 3:
                    break
                await asyncio.sleep(0.01)
            assert handled == [1, 2, 3], "the requests behind a deferred one were not handled"
            assert not any(a.done() for a in answers), "an answer overtook the deferred one"
            release.set()
            got = [(await a).cluster_id for a in answers]
            assert got == ["first", "next-2", "next-3"]
        finally:
            await conn.close()
            await server.close()

    asyncio.run(asyncio.wait_for(scenario(), 10))


def test_a_request_that_is_not_pipelined_waits_for_the_answers_before_it_and_sees_their_state():
    """Behind a deferred produce, a Metadata request is handled only once the produce's answer
    is out, as on Kafka's muted channel: its answer describes the state after that answer
    (a dead follower gone from the ISR, a new leader), not the state when it arrived."""
    from protocol.client import KafkaConnection
    from protocol.dispatch import Deferred
    from protocol.net import Server

    async def scenario():
        release = asyncio.Event()
        state = {"cluster": "before"}
        handled = []

        async def handler(header, request):
            if request.endpoint_type == 1:  # stands for a produce waiting for replication
                handled.append("deferred")
                async def later():
                    await release.wait()
                    state["cluster"] = "after"
                    return M.DescribeClusterResponse(error_code=Error.NONE, cluster_id="deferred")
                return Deferred(later())
            handled.append("describe")
            return M.DescribeClusterResponse(error_code=Error.NONE, cluster_id=state["cluster"])

        server = Server(Dispatcher([Api(60, 0, 1, handler)]).handle, 1 << 20, pipelined=frozenset())
        port = server.bind("127.0.0.1", 0)
        server.start()
        conn = KafkaConnection("127.0.0.1", port)
        await conn.connect()
        try:
            first = asyncio.ensure_future(conn.request(60, 1, M.DescribeClusterRequest(endpoint_type=1)))
            second = asyncio.ensure_future(conn.request(60, 1, M.DescribeClusterRequest(endpoint_type=2)))
            await asyncio.sleep(0.2)
            assert handled == ["deferred"], "a request that is not pipelined was handled early"
            release.set()
            assert (await first).cluster_id == "deferred"
            assert (await second).cluster_id == "after"
            assert handled == ["deferred", "describe"]
        finally:
            await conn.close()
            await server.close()

    asyncio.run(asyncio.wait_for(scenario(), 10))


def test_a_malformed_request_behind_a_deferred_one_closes_after_its_answer_and_reads_no_more():
    from protocol.dispatch import Deferred
    from protocol.net import Server

    async def scenario():
        release = asyncio.Event()
        handled = []

        async def deferred_first(header, request):
            handled.append(request.endpoint_type)
            async def later():
                await release.wait()
                return M.DescribeClusterResponse(error_code=Error.NONE, cluster_id="first")
            return Deferred(later()) if request.endpoint_type == 1 else \
                M.DescribeClusterResponse(error_code=Error.NONE, cluster_id="late")

        server = Server(Dispatcher([Api(60, 0, 1, deferred_first)]).handle, 1 << 20)
        port = server.bind("127.0.0.1", 0)
        server.start()
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            def frame(endpoint_type, correlation_id):
                return encode_request(60, 1, correlation_id, "t",
                                      M.DescribeClusterRequest(endpoint_type=endpoint_type))
            bad = struct.pack(">ihhih", 10, 9999, 0, 2, -1)  # an unknown API key: close
            writer.write(frame(1, 1) + bad + frame(3, 3))
            await writer.drain()
            await asyncio.sleep(0.2)
            release.set()
            size = struct.unpack(">i", await reader.readexactly(4))[0]
            body = await reader.readexactly(size)
            assert struct.unpack(">i", body[:4])[0] == 1  # the deferred answer went out first
            assert await reader.read(100) == b""  # then the connection closed
            assert handled == [1], "a request behind the malformed one was handled"
        finally:
            writer.close()
            await server.close()

    asyncio.run(asyncio.wait_for(scenario(), 10))


@pytest.mark.parametrize("slow_reader", [False, True])
def test_file_slices_go_out_in_order_between_bytes_however_fast_the_peer_reads(tmp_path, slow_reader):
    """A response of bytes and file slices (a fetch): small slices are read and sent with the
    bytes around them, large ones with sendfile, at once while the socket takes them and
    through the event loop once it is full (a peer that reads slowly); the peer gets every
    byte in order either way."""
    import os
    import random

    from engine.segment import FileSlice
    from protocol.net import Server

    data = random.Random(7).randbytes(12 << 20)
    path = tmp_path / "segment"
    path.write_bytes(data)
    fd = os.open(path, os.O_RDONLY)
    spans = [(5, 100), (1000, 20 << 10), (50_000, 9 << 20), (10 << 20, 3000)]
    expected = b"head" + b"".join(data[p:p + n] + b"|" for p, n in spans) + b"tail"

    async def handle(frame):
        parts: list = [b"head"]
        for p, n in spans:
            parts += [FileSlice(fd, p, n), b"|"]
        return parts + [b"tail"]

    async def scenario():
        server = Server(handle, 1 << 20)
        port = server.bind("127.0.0.1", 0)
        server.start()
        reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=1 << 16)
        try:
            writer.write(struct.pack(">i", 4) + b"ping")
            await writer.drain()
            got = bytearray()
            while len(got) < len(expected):
                chunk = await reader.read(1 << 16)
                assert chunk, f"closed after {len(got)} of {len(expected)} bytes"
                got += chunk
                if slow_reader:
                    await asyncio.sleep(0.0005)
            assert bytes(got) == expected
        finally:
            writer.close()
            await server.close()

    try:
        asyncio.run(asyncio.wait_for(scenario(), 30))
    finally:
        os.close(fd)
