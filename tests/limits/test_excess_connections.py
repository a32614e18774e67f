"""Connections over the broker-wide max.connections, as Kafka's network processors close them
(SocketServer's Processor.closeExcessConnections): while the node's connections number more
than max.connections, a listener that is not protected closes its least recently used
connection (Selector.lowestPriorityChannel: the oldest last request or response, whether or
not a request is in flight), until the count is within the limit; the protected inter-broker
listener's connections are never closed for it. The pure rule, then real loopback listeners of
one protocol.net.Server whose activity is stamped with a clock the test sets."""
from __future__ import annotations

import asyncio

from protocol.limits import UNLIMITED, ConnectionQuotas, ListenerLimits, ListenerQuota
from protocol.net import Server
from tests.limits.echo import echo, request

TEST_TIMEOUT_S = 20
IP = "127.0.0.1"


def client_only(max_connections: int = UNLIMITED) -> ListenerLimits:
    return ListenerLimits(max_connections=max_connections, listeners={"CLIENT": ListenerQuota()})


def client_and_replication(max_connections: int) -> ListenerLimits:
    return ListenerLimits(max_connections=max_connections, inter_broker_listener="REPLICATION",
                          listeners={"CLIENT": ListenerQuota(), "REPLICATION": ListenerQuota()})


# ---- the rule ------------------------------------------------------------------------------


def test_max_connections_exceeded_only_beyond_the_limit_and_never_on_the_protected_listener():
    q = ConnectionQuotas(client_and_replication(2))
    for listener in ("CLIENT", "CLIENT", "REPLICATION"):
        q.try_add(IP, listener)
    assert q.excess() == 1
    assert q.max_connections_exceeded("CLIENT")
    assert q.max_connections_exceeded("client")
    assert not q.max_connections_exceeded("REPLICATION")
    q.remove(IP, "CLIENT")
    assert q.excess() == 0
    assert not q.max_connections_exceeded("CLIENT")


def test_a_lone_inter_broker_listener_sheds_like_any_other():
    q = ConnectionQuotas(ListenerLimits(max_connections=1, inter_broker_listener="REPLICATION",
                                        listeners={"REPLICATION": ListenerQuota()}))
    q.try_add(IP, "REPLICATION")
    q.try_add(IP, "REPLICATION")
    assert q.max_connections_exceeded("REPLICATION")


# ---- real listeners ------------------------------------------------------------------------


class Clock:
    def __init__(self):
        self.now_ms = 0


async def start(limits: ListenerLimits, clock: Clock, *listeners: str, handle=echo) -> tuple[Server, dict]:
    server = Server(handle, 1 << 20, limits=limits)
    server.now_ms = lambda: clock.now_ms
    ports = {name: server.bind(IP, 0, name) for name in listeners}
    server.start()
    return server, ports


async def connect(port: int):
    reader, writer = await asyncio.open_connection(IP, port)
    return reader, writer


async def answers(conn, tag: bytes = b"ping", timeout: float = 2.0) -> bool:
    reader, writer = conn
    try:
        writer.write(request(tag))
        return await asyncio.wait_for(reader.readexactly(4 + len(tag)), timeout) == request(tag)
    except (TimeoutError, asyncio.IncompleteReadError, ConnectionError):
        return False


async def is_closed(conn) -> bool:
    try:
        return await asyncio.wait_for(conn[0].read(1), 2) == b""
    except ConnectionError:
        return True


async def used_at(clock: Clock, conn, now_ms: int) -> None:
    """A request on ``conn`` at ``now_ms``: answered, so the server took it up then."""
    clock.now_ms = now_ms
    assert await answers(conn)


async def settled(server: Server, total: int) -> None:
    for _ in range(200):
        if server.quotas.total == total:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"{server.quotas.total} connections, not {total}")


def run(scenario):
    asyncio.run(asyncio.wait_for(scenario(), TEST_TIMEOUT_S))


def test_lowering_max_connections_closes_the_least_recently_used_connections_until_within_it():
    async def scenario():
        clock = Clock()
        server, ports = await start(client_only(), clock, "CLIENT")
        try:
            conns = [await connect(ports["CLIENT"]) for _ in range(5)]
            for now_ms, i in enumerate((2, 0, 4, 1, 3)):  # 2 is the least recently used, then 0
                await used_at(clock, conns[i], 100 * (now_ms + 1))
            clock.now_ms = 1000
            server.update_limits(client_only(3))
            assert await is_closed(conns[2]) and await is_closed(conns[0])
            await settled(server, 3)
            for i in (4, 1, 3):
                assert await answers(conns[i], b"still")
            for conn in conns:
                conn[1].close()
        finally:
            await server.close()
    run(scenario)


def test_nothing_is_closed_while_the_count_is_within_max_connections():
    async def scenario():
        clock = Clock()
        server, ports = await start(client_only(), clock, "CLIENT")
        try:
            conns = [await connect(ports["CLIENT"]) for _ in range(3)]
            for now_ms, conn in enumerate(conns):
                await used_at(clock, conn, 100 * (now_ms + 1))
            for limit in (10, 3):
                server.update_limits(client_only(limit))
                await asyncio.sleep(0.05)
                assert all([await answers(conn, b"%d" % limit) for conn in conns])
            assert server.quotas.total == 3
            for conn in conns:
                conn[1].close()
        finally:
            await server.close()
    run(scenario)


def test_a_protected_listener_connection_accepted_past_the_limit_closes_the_lru_client_connection():
    async def scenario():
        clock = Clock()
        server, ports = await start(client_and_replication(2), clock, "CLIENT", "REPLICATION")
        try:
            old, recent = await connect(ports["CLIENT"]), await connect(ports["CLIENT"])
            await used_at(clock, recent, 100)
            await used_at(clock, old, 200)
            await used_at(clock, recent, 300)
            clock.now_ms = 400
            replica = await connect(ports["REPLICATION"])
            assert await answers(replica, b"fetch")
            assert await is_closed(old)
            assert await answers(recent, b"kept")
            second = await connect(ports["REPLICATION"])
            assert await answers(second, b"fetch")
            assert await is_closed(recent)
            await settled(server, 2)
            # Past the limit with only protected connections: none of them is closed for it.
            server.update_limits(client_and_replication(0))
            await asyncio.sleep(0.05)
            assert await answers(replica, b"kept") and await answers(second, b"kept")
            for conn in (old, recent, replica, second):
                conn[1].close()
        finally:
            await server.close()
    run(scenario)


def test_a_connection_with_a_request_in_flight_is_closed_by_its_last_activity_as_kafka_does():
    async def scenario():
        clock = Clock()
        taken_up, release = asyncio.Event(), asyncio.Event()

        async def slow_on_wait(frame: memoryview):
            if bytes(frame) == b"wait":
                taken_up.set()
                await release.wait()
            return await echo(frame)

        server, ports = await start(client_only(), clock, "CLIENT",
                                    handle=slow_on_wait)
        try:
            busy, a, b = [await connect(ports["CLIENT"]) for _ in range(3)]
            await used_at(clock, a, 100)
            clock.now_ms = 200
            busy[1].write(request(b"wait"))  # taken up at 200, answered never
            await taken_up.wait()
            await used_at(clock, b, 300)
            await used_at(clock, a, 400)
            clock.now_ms = 500
            server.update_limits(client_only(2))
            assert await is_closed(busy)
            assert await answers(a, b"kept") and await answers(b, b"kept")
            release.set()
            for conn in (busy, a, b):
                conn[1].close()
        finally:
            await server.close()
    run(scenario)


def test_the_inter_broker_listener_alone_on_its_server_is_not_protected_though_the_node_names_others():
    """A combined node's broker serves its inter-broker listener alone (the controller listener is
    the controller's): Kafka's protectedListener counts the listeners of that socket server only."""
    async def scenario():
        clock = Clock()
        limits = ListenerLimits(max_connections=2, inter_broker_listener="PLAINTEXT",
                                listeners={"PLAINTEXT": ListenerQuota(), "CONTROLLER": ListenerQuota()})
        server, ports = await start(limits, clock, "PLAINTEXT")
        try:
            old, recent = await connect(ports["PLAINTEXT"]), await connect(ports["PLAINTEXT"])
            await used_at(clock, old, 100)
            await used_at(clock, recent, 200)
            third = await connect(ports["PLAINTEXT"])  # in the kernel's backlog
            assert not await answers(third, b"waits", timeout=0.3), "the broker-wide limit holds on it"
            server.update_limits(ListenerLimits(max_connections=1, inter_broker_listener="PLAINTEXT",
                                                listeners=limits.listeners))
            assert await is_closed(old)
            assert await answers(recent, b"kept")
            for conn in (old, recent, third):
                conn[1].close()
        finally:
            await server.close()
    run(scenario)
