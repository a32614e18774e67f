"""queued.max.request.bytes: the memory pool that FrameReaders of one Server share (protocol/limits.py).

Unit tests feed FrameReaders bytes by hand; the Server tests run real sockets on 127.0.0.1 inside
the test's event loop, with handlers the test holds back, so what the pool has reserved can be
read at any moment."""
from __future__ import annotations

import asyncio
import struct

import pytest

from protocol.frames import FrameReader
from protocol.limits import FrameTooLarge, ListenerLimits, MemoryPool
from protocol.net import Server

TEST_TIMEOUT_S = 20


def frame(size: int, tag: int = 0) -> bytes:
    return struct.pack(">i", size) + bytes([tag % 256]) * size


class Reader(FrameReader):
    """A FrameReader whose resume() splits again and keeps what comes out (a connection's part)."""

    def __init__(self, pool: MemoryPool, buffer_bytes: int = 1024):
        super().__init__(1 << 20, buffer_bytes=buffer_bytes, pool=pool)
        self.out: list[bytearray] = []
        self.on_resume = lambda: self.out.extend(self.updated(0))

    def give(self, data: bytes) -> None:
        self.out += self.feed(data)


def test_frames_handed_out_are_reserved_until_released():
    pool = MemoryPool(1000)
    r = Reader(pool)
    r.give(frame(300) + frame(200))
    assert [len(f) for f in r.out] == [300, 200]
    assert pool.used == 500 == r.held
    r.release(300)
    assert pool.used == 200 == r.held


def test_a_frame_that_does_not_fit_blocks_its_reader_until_memory_is_released():
    pool = MemoryPool(1000)
    r = Reader(pool)
    r.give(frame(600) + frame(500, tag=1))
    assert [len(f) for f in r.out] == [600], "the second frame waits: 600 + 500 > 1000"
    assert r.blocked and pool.used == 600
    r.release(600)
    assert [len(f) for f in r.out] == [600, 500] and bytes(r.out[1]) == b"\x01" * 500
    assert not r.blocked and pool.used == 500


def test_a_large_frame_is_reserved_before_it_gets_its_own_buffer():
    pool = MemoryPool(10_000)
    r = Reader(pool, buffer_bytes=1024)
    r.give(frame(100))
    head = frame(8000)[:600]  # the size prefix and the first bytes: the rest is still on the wire
    r.give(head)
    assert r.big is not None and pool.used == 8100, "a frame being received counts in full"
    r.release(100)
    other = Reader(pool)
    other.give(frame(3000)[:500])  # a connection stops reading here: its buffer holds the rest
    assert other.blocked and other.big is None, "8000 being received + 3000 > 10000"
    r.give(frame(8000)[600:])
    r.release(8000)
    assert other.big is not None and not other.blocked and pool.used == 3000
    other.give(frame(3000)[500:])
    assert [len(f) for f in other.out] == [3000]


def test_waiting_readers_are_admitted_in_order_so_a_large_frame_is_not_starved():
    pool = MemoryPool(1000)
    holder, large, small = Reader(pool), Reader(pool), Reader(pool)
    holder.give(frame(900))
    large.give(frame(800))
    assert large.blocked
    small.give(frame(50))
    assert small.blocked and small.out == [], "it would fit, but a reader waits before it"
    holder.release(900)
    assert [len(f) for f in large.out] == [800] and [len(f) for f in small.out] == [50]
    assert pool.used == 850


def test_a_frame_larger_than_the_whole_budget_is_refused():
    pool = MemoryPool(1000)
    r = Reader(pool, buffer_bytes=4096)
    with pytest.raises(FrameTooLarge, match="queued.max.request.bytes"):
        r.give(frame(1001))


def test_a_reader_that_leaves_gives_back_everything_and_wakes_the_next():
    pool = MemoryPool(1000)
    gone, waiting, blocked_gone = Reader(pool), Reader(pool), Reader(pool)
    gone.give(frame(700))
    blocked_gone.give(frame(400))
    waiting.give(frame(400))
    assert blocked_gone.blocked and waiting.blocked
    blocked_gone.leave()
    assert waiting.blocked, "still no room: 700 held"
    gone.leave()
    assert [len(f) for f in waiting.out] == [400] and pool.used == 400
    gone.release(700)  # a late release from a connection already gone changes nothing
    assert pool.used == 400


# ---- a Server's connections share one pool --------------------------------------------------------

def run(scenario):
    asyncio.run(asyncio.wait_for(scenario(), TEST_TIMEOUT_S))


async def start_server(handle, **limits) -> tuple[Server, int]:
    server = Server(handle, 1 << 20, pipelined=frozenset(), limits=ListenerLimits(**limits))
    port = server.bind("127.0.0.1", 0)
    server.start()
    return server, port


def test_many_clients_with_large_requests_stay_within_the_budget_and_all_are_answered():
    budget, size, clients, per_client = 1 << 20, 200_000, 12, 6

    async def scenario():
        peak = 0

        async def handle(frame: memoryview):
            nonlocal peak
            peak = max(peak, server.pool.used)
            await asyncio.sleep(0.005)  # slower than the clients: requests pile up
            return [struct.pack(">ii", 4, frame[0])]

        server, port = await start_server(handle, queued_max_request_bytes=budget)

        async def client(n: int) -> list[int]:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"".join(frame(size, tag=n * per_client + i) for i in range(per_client)))
            answers = []
            for _ in range(per_client):
                head = await reader.readexactly(8)
                answers.append(struct.unpack(">ii", head)[1])
            writer.close()
            return answers

        results = await asyncio.gather(*(client(n) for n in range(clients)))
        assert results == [[(n * per_client + i) % 256 for i in range(per_client)] for n in range(clients)]
        assert 0 < peak <= budget
        assert peak > budget - size, "the budget was used up: the test did create pressure"
        await asyncio.sleep(0.05)
        assert server.pool.used == 0, "every connection gave back what it held"
        await server.close()
    run(scenario)


def test_a_request_larger_than_queued_max_request_bytes_closes_only_its_connection(caplog):
    async def scenario():
        async def handle(frame: memoryview):
            return [struct.pack(">ii", 4, len(frame))]

        server, port = await start_server(handle, queued_max_request_bytes=100_000)
        bystander_r, bystander_w = await asyncio.open_connection("127.0.0.1", port)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(struct.pack(">i", 100_001))
        assert await asyncio.wait_for(reader.read(), 5) == b"", "closed by the server"
        bystander_w.write(frame(50_000))
        assert struct.unpack(">ii", await bystander_r.readexactly(8)) == (4, 50_000)
        bystander_w.close()
        writer.close()
        await server.close()
    with caplog.at_level("INFO", logger="protocol.net"):
        run(scenario)
    lines = [r.getMessage() for r in caplog.records if "queued.max.request.bytes" in r.getMessage()]
    assert len(lines) == 1 and "100001 bytes" in lines[0]


def test_a_closed_connection_drops_its_buffers_at_once_not_at_the_next_garbage_collection():
    """A connection and its FrameReader refer to each other, so a closed one is freed by the
    cyclic collector only, which a busy broker runs rarely: a live fuzz held a thousand closed
    connections' 256 KiB buffers and half-received large frames (over 400 MiB, past a 100 MiB
    queued.max.request.bytes). Closing drops them at once."""
    import gc

    async def scenario():
        async def handle(frame: memoryview):
            return []

        server, port = await start_server(handle, queued_max_request_bytes=64 << 20)
        writers = []
        for _ in range(8):
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(struct.pack(">i", 900_000) + bytes(300_000))  # a large frame, part sent
            writers.append(writer)
        while sum(c.reader.big is not None for c in server.connections) < 8:
            await asyncio.sleep(0.01)
        readers = [c.reader for c in server.connections]
        assert server.pool.used == 8 * 900_000
        for writer in writers:
            writer.close()
        while server.connections:
            await asyncio.sleep(0.01)
        assert [(len(r.buf), r.big is None) for r in readers] == [(0, True)] * 8
        assert server.pool.used == 0
        await server.close()
    gc.disable()
    try:
        run(scenario)
    finally:
        gc.enable()


def test_a_request_being_handled_when_its_connection_closes_stays_reserved_until_it_is_handled():
    """Its frame is still in memory while the handler runs: the pool counts it until then. The
    requests queued behind it are dropped with the connection and given back at once."""
    size = 200_000

    async def scenario():
        started, finish = asyncio.Event(), asyncio.Event()

        async def handle(frame: memoryview):
            started.set()
            await finish.wait()
            return []

        server, port = await start_server(handle, queued_max_request_bytes=1 << 20)
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(frame(size) * 3)
        await started.wait()
        while server.pool.used < 3 * size:
            await asyncio.sleep(0.01)
        writer.close()
        while server.connections:
            await asyncio.sleep(0.01)
        assert server.pool.used == size, "the frame in its handler, not the two queued behind it"
        finish.set()
        while server.pool.used:
            await asyncio.sleep(0.01)
        await server.close()
    run(scenario)
