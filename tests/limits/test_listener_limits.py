"""Per-listener connection limits, as Kafka's ConnectionQuotas keeps them (KIP-402, KIP-612):
listener.name.<l>.max.connections and listener.name.<l>.max.connection.creation.rate bound one
listener (each defaulting to the broker-wide property), the broker-wide max.connections and
max.connection.creation.rate bound all of them, but the inter-broker listener is exempt from the
broker-wide ones while the server has more than one listener. The core over a clock given by the
test, then real loopback listeners of one protocol.net.Server."""
from __future__ import annotations

import asyncio

from protocol.limits import UNLIMITED, ConnectionQuotas, ListenerLimits, ListenerQuota
from protocol.net import Server
from strom.config import ServerConfig
from tests.limits.echo import echo, request

TEST_TIMEOUT_S = 20
IP = "127.0.0.1"


def quotas(**limits) -> ConnectionQuotas:
    return ConnectionQuotas(ListenerLimits(**limits))


def fill(q: ConnectionQuotas, listener: str, n: int) -> None:
    for _ in range(n):
        assert q.slot_available(listener)
        assert q.try_add(IP, listener)


def test_a_listeners_max_connections_bounds_that_listener_only():
    q = quotas(listeners={"CLIENT": ListenerQuota(max_connections=2), "OTHER": ListenerQuota()})
    fill(q, "CLIENT", 2)
    assert not q.slot_available("CLIENT")
    assert q.slot_available("OTHER")
    q.remove(IP, "CLIENT")
    assert q.slot_available("CLIENT")


def test_the_broker_wide_max_connections_bounds_every_listener_together():
    q = quotas(max_connections=3, listeners={"A": ListenerQuota(), "B": ListenerQuota()})
    fill(q, "A", 2)
    fill(q, "B", 1)
    assert not q.slot_available("A") and not q.slot_available("B")


def test_the_inter_broker_listener_is_exempt_from_the_broker_wide_max_connections():
    q = quotas(max_connections=2, inter_broker_listener="REPLICATION",
               listeners={"CLIENT": ListenerQuota(), "REPLICATION": ListenerQuota()})
    fill(q, "CLIENT", 2)
    assert not q.slot_available("CLIENT")
    fill(q, "REPLICATION", 3)  # counted in the total, never bounded by it
    assert q.total == 5
    assert not q.slot_available("CLIENT")


def test_the_inter_broker_listener_keeps_its_own_listener_limit():
    q = quotas(max_connections=1, inter_broker_listener="REPLICATION",
               listeners={"CLIENT": ListenerQuota(), "REPLICATION": ListenerQuota(max_connections=2)})
    fill(q, "REPLICATION", 2)
    assert not q.slot_available("REPLICATION")


def test_a_lone_inter_broker_listener_is_not_exempt():
    q = quotas(max_connections=1, inter_broker_listener="PLAINTEXT", listeners={"PLAINTEXT": ListenerQuota()})
    fill(q, "PLAINTEXT", 1)
    assert not q.slot_available("PLAINTEXT")


def test_a_listeners_creation_rate_delays_that_listener_only():
    q = quotas(listeners={"A": ListenerQuota(max_connection_creation_rate=2), "B": ListenerQuota()})
    for now in (0, 10):
        assert q.creation_delay_ms(now, "A") == 0
        q.record_creation(now, "A")
    assert q.creation_delay_ms(20, "A") == 980  # the first leaves the window at 1000
    assert q.creation_delay_ms(20, "B") == 0
    assert q.creation_delay_ms(1000, "A") == 0


def test_the_broker_wide_creation_rate_counts_every_listener_but_the_inter_broker_one():
    q = quotas(max_connection_creation_rate=1, inter_broker_listener="R",
               listeners={"A": ListenerQuota(), "B": ListenerQuota(), "R": ListenerQuota()})
    q.record_creation(0, "A")
    assert q.creation_delay_ms(1, "B") == 999
    assert q.creation_delay_ms(1, "R") == 0
    q.record_creation(1, "R")
    assert q.creation_delay_ms(1000, "B") == 0  # R's connection did not count broker-wide


def test_a_reconfigured_listener_limit_holds_from_the_next_accept_and_the_counts_stay():
    q = quotas(listeners={"A": ListenerQuota(max_connections=1)})
    fill(q, "A", 1)
    q.update(ListenerLimits(listeners={"A": ListenerQuota(max_connections=3)}))
    fill(q, "A", 2)
    assert not q.slot_available("A")
    assert q.listener_counts["A"] == 3


def test_listener_prefixed_properties_set_each_listeners_limits_defaulting_to_the_broker_wide_ones():
    config = ServerConfig({
        "process.roles": "broker", "node.id": "1", "controller.quorum.voters": "0@localhost:9093",
        "controller.listener.names": "CONTROLLER",
        "listeners": "CLIENT://:9092,REPLICATION://:9094",
        "listener.security.protocol.map": "CLIENT:PLAINTEXT,REPLICATION:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "inter.broker.listener.name": "REPLICATION",
        "max.connections": "100", "max.connection.creation.rate": "50",
        "listener.name.client.max.connections": "10",
        "listener.name.replication.max.connection.creation.rate": "5",
    })
    limits = config.listener_limits()
    assert limits.inter_broker_listener == "REPLICATION"
    assert limits.listeners["CLIENT"] == ListenerQuota(max_connections=10, max_connection_creation_rate=50)
    assert limits.listeners["REPLICATION"] == ListenerQuota(max_connections=100,
                                                            max_connection_creation_rate=5)


# ---- real loopback listeners -------------------------------------------------------------


async def open_served(port: int, tag: bytes = b"ping", timeout: float = 2.0):
    """A new connection whose request is answered within ``timeout``, or None."""
    reader, writer = await asyncio.open_connection(IP, port)
    try:
        writer.write(request(tag))
        if await asyncio.wait_for(reader.readexactly(4 + len(tag)), timeout) == request(tag):
            return reader, writer
    except (TimeoutError, asyncio.IncompleteReadError, ConnectionError):
        pass
    writer.close()
    return None


def test_a_full_client_listener_waits_while_the_inter_broker_listener_accepts():
    async def scenario():
        limits = ListenerLimits(max_connections=2, inter_broker_listener="REPLICATION",
                                listeners={"CLIENT": ListenerQuota(max_connections=2),
                                           "REPLICATION": ListenerQuota()})
        server = Server(echo, 1 << 20, limits=limits)
        client_port = server.bind(IP, 0, "CLIENT")
        replication_port = server.bind(IP, 0, "REPLICATION")
        server.start()
        try:
            held = [await open_served(client_port) for _ in range(2)]
            assert all(held)
            assert await open_served(client_port, b"third", timeout=0.5) is None  # waits in the backlog
            replicas = [await open_served(replication_port, b"fetch") for _ in range(3)]
            assert all(replicas)  # beyond the broker-wide max.connections
            # ... and, as Kafka's closeExcessConnections, each past it closed a client's: the
            # least recently used of the unprotected listener, here both held ones.
            for reader, _ in held:
                assert await asyncio.wait_for(reader.read(), 2.0) == b""
            # The inter-broker listener's connections count in the broker-wide total: a client
            # waits while they are open, though its own listener has free slots.
            assert await open_served(client_port, b"waits", timeout=0.5) is None
            for conn in replicas:
                conn[1].close()
            assert await open_served(client_port, b"again", timeout=5.0) is not None
            for _, writer in held:
                writer.close()
        finally:
            await server.close()

    asyncio.run(asyncio.wait_for(scenario(), TEST_TIMEOUT_S))


def test_one_listeners_max_connections_leaves_another_listener_open():
    async def scenario():
        limits = ListenerLimits(listeners={"A": ListenerQuota(max_connections=1), "B": ListenerQuota()})
        server = Server(echo, 1 << 20, limits=limits)
        a = server.bind(IP, 0, "A")
        b = server.bind(IP, 0, "B")
        server.start()
        try:
            first = await open_served(a)
            assert first is not None
            assert await open_served(a, b"second", timeout=0.5) is None
            others = [await open_served(b) for _ in range(3)]
            assert all(others)
            assert server.quotas.listener_counts == {"A": 1, "B": 3}
            first[1].close()
            for conn in others:
                conn[1].close()
        finally:
            await server.close()

    asyncio.run(asyncio.wait_for(scenario(), TEST_TIMEOUT_S))


def test_unlimited_is_kafkas_int_max():
    assert ListenerQuota() == ListenerQuota(max_connections=UNLIMITED, max_connection_creation_rate=UNLIMITED)
