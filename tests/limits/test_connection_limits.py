"""max.connections, max.connections.per.ip (KIP-402), max.connection.creation.rate (KIP-612) and
connections.max.idle.ms on a protocol.net.Server: real sockets on 127.0.0.1 in the test's event
loop; time-based rules are driven with the tracker's clock given by the test."""
from __future__ import annotations

import asyncio
import struct

from protocol.limits import ConnectionQuotas, IdleTracker, ListenerLimits
from protocol.net import Server
from tests.limits.echo import echo, request, served

TEST_TIMEOUT_S = 20


def run(scenario):
    asyncio.run(asyncio.wait_for(scenario(), TEST_TIMEOUT_S))


async def start_server(**limits) -> tuple[Server, int]:
    server = Server(echo, 1 << 20, limits=ListenerLimits(**limits))
    port = server.bind("127.0.0.1", 0)
    server.start()
    return server, port


async def closed_at_once(reader: asyncio.StreamReader) -> bool:
    try:
        return await asyncio.wait_for(reader.read(1), 2) == b""
    except ConnectionResetError:
        return True


def test_beyond_max_connections_a_new_connection_waits_until_one_closes():
    async def scenario():
        server, port = await start_server(max_connections=2)
        held = [await asyncio.open_connection("127.0.0.1", port) for _ in range(2)]
        for reader, writer in held:
            writer.write(request(b"a"))
            assert await reader.readexactly(5) == request(b"a")
        third = asyncio.ensure_future(served(port, b"third", timeout=5.0))
        await asyncio.sleep(0.3)
        assert not third.done(), "not accepted while two connections are open"
        assert len(server.connections) == 2
        held[0][1].close()
        assert await third, "accepted once a connection closed"
        held[1][1].close()
        await server.close()
    run(scenario)


def test_beyond_max_connections_per_ip_a_new_connection_is_closed_at_once():
    async def scenario():
        server, port = await start_server(max_connections_per_ip=2)
        held = [await asyncio.open_connection("127.0.0.1", port) for _ in range(2)]
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        assert await closed_at_once(reader)
        writer.close()
        for r, w in held:
            w.write(request(b"ok"))
            assert await r.readexactly(6) == request(b"ok"), "the connections already open are served"
        held[0][1].close()
        await asyncio.sleep(0.1)
        assert await served(port), "a slot of that address freed: accepted again"
        held[1][1].close()
        await server.close()
    run(scenario)


def test_max_connections_per_ip_overrides_set_an_address_its_own_limit():
    async def scenario():
        server, port = await start_server(max_connections_per_ip=0,
                                          max_connections_per_ip_overrides={"127.0.0.1": 1})
        first = await asyncio.open_connection("127.0.0.1", port)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        assert await closed_at_once(reader)
        writer.close()
        first[1].write(request(b"x"))
        assert await first[0].readexactly(5) == request(b"x")
        first[1].close()
        await server.close()
    run(scenario)


def test_max_connections_per_ip_overrides_match_ipv4_mapped_ipv6_peers():
    quotas = ConnectionQuotas(ListenerLimits(max_connections_per_ip=5,
                                             max_connections_per_ip_overrides={"10.0.0.7": 1}))
    assert quotas.try_add("::ffff:10.0.0.7")
    assert not quotas.try_add("10.0.0.7")
    assert quotas.try_add("10.0.0.8") and quotas.total == 2
    quotas.remove("10.0.0.7")
    assert quotas.try_add("10.0.0.7")


def test_connection_creation_rate_delays_accepting_without_refusing():
    quotas = ConnectionQuotas(ListenerLimits(max_connection_creation_rate=3))
    now = 10_000
    for t in (now, now + 10, now + 20):
        assert quotas.creation_delay_ms(t) == 0
        quotas.record_creation(t)
    assert quotas.creation_delay_ms(now + 30) == 970, "the 4th waits until the 1st leaves the window"
    assert quotas.creation_delay_ms(now + 1000) == 0
    quotas.record_creation(now + 1000)
    assert quotas.creation_delay_ms(now + 1001) == 9


def test_connection_creation_rate_on_a_listener_accepts_every_connection_at_the_rate():
    async def scenario():
        server, port = await start_server(max_connection_creation_rate=4)
        accepted: list[int] = []
        record = server.quotas.record_creation
        server.quotas.record_creation = lambda now_ms, *rest: (accepted.append(now_ms), record(now_ms, *rest))
        results = await asyncio.gather(*(served(port, b"%d" % i, timeout=8.0) for i in range(9)))
        assert all(results), "delayed, never refused"
        assert len(accepted) == 9
        assert all(b - a >= 1000 for a, b in zip(accepted, accepted[4:])), \
            "no window of 1 s saw more than 4 accepts"
        await server.close()
    run(scenario)


class Clock:
    def __init__(self):
        self.now_ms = 0


async def idle_server(idle_ms: int, clock: Clock) -> tuple[Server, int]:
    server = Server(echo, 1 << 20, limits=ListenerLimits())  # no reaper task: the test checks
    server.idle = IdleTracker(idle_ms)
    server.now_ms = lambda: clock.now_ms
    port = server.bind("127.0.0.1", 0)
    server.start()
    return server, port


def test_a_connection_without_a_request_for_connections_max_idle_ms_is_closed():
    async def scenario():
        clock = Clock()
        server, port = await idle_server(1000, clock)
        quiet = await asyncio.open_connection("127.0.0.1", port)
        busy = await asyncio.open_connection("127.0.0.1", port)
        await asyncio.sleep(0.05)
        for step in range(1, 6):
            clock.now_ms = step * 300
            busy[1].write(request(b"b"))
            assert await busy[0].readexactly(5) == request(b"b")
            await asyncio.sleep(0.02)
            server.idle.check(server.connections, clock.now_ms)
        assert await closed_at_once(quiet[0]), "idle from 0 to 1500 ms"
        busy[1].write(request(b"c"))
        assert await busy[0].readexactly(5) == request(b"c"), "a request every 300 ms keeps it open"
        busy[1].close()
        await server.close()
    run(scenario)


def test_a_half_sent_frame_counts_as_idle_and_is_closed_after_the_same_time():
    async def scenario():
        clock = Clock()
        server, port = await idle_server(1000, clock)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(request(b"done"))
        assert await reader.readexactly(8) == request(b"done")
        writer.write(struct.pack(">i", 100) + b"only part of it")
        await asyncio.sleep(0.05)
        server.idle.check(server.connections, 0)
        clock.now_ms = 900
        server.idle.check(server.connections, 900)
        assert not reader.at_eof()
        writer.write(b"a few more bytes, still not a request")
        await asyncio.sleep(0.05)
        server.idle.check(server.connections, 1000)
        assert await closed_at_once(reader), "bytes that make no request do not keep it open"
        await server.close()
    run(scenario)


def test_a_connection_whose_request_is_being_handled_is_not_idle():
    async def scenario():
        clock = Clock()
        release = asyncio.Event()

        async def slow(frame: memoryview):
            await release.wait()
            return [struct.pack(">i", len(frame)), bytes(frame)]

        server = Server(slow, 1 << 20, limits=ListenerLimits())
        server.idle = IdleTracker(1000)
        server.now_ms = lambda: clock.now_ms
        port = server.bind("127.0.0.1", 0)
        server.start()
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(request(b"long"))
        await asyncio.sleep(0.05)
        for now in (0, 2000, 4000):
            server.idle.check(server.connections, now)
        release.set()
        assert await reader.readexactly(8) == request(b"long")
        writer.close()
        await server.close()
    run(scenario)
