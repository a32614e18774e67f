"""The connection limits changed without a restart (Kafka's SocketServer.reconfigure) and the ip
entities' connection rate quotas (KIP-612, Kafka's ConnectionQuotas.updateIpConnectionRateQuota
and recordIpConnectionMaybeThrottle): the pure parts with the test's clock, then a real
listener on 127.0.0.1."""
from __future__ import annotations

import asyncio

from protocol.limits import ConnectionQuotas, ListenerLimits
from protocol.net import Server
from security.quotas import IpConnectionQuotas, entity
from tests.limits.echo import echo, request

TEST_TIMEOUT_S = 20
RATE = "connection_creation_rate"


def test_reconfigured_limits_hold_from_the_next_connection_and_the_counts_stay():
    quotas = ConnectionQuotas(ListenerLimits(max_connections=1, max_connections_per_ip=1))
    assert quotas.try_add("10.0.0.1")
    assert not quotas.slot_available() and not quotas.try_add("10.0.0.1")
    quotas.update(ListenerLimits(max_connections=3, max_connections_per_ip=2,
                                 max_connections_per_ip_overrides={"::ffff:10.0.0.2": 0},
                                 max_connection_creation_rate=5))
    assert quotas.total == 1 and quotas.slot_available()
    assert quotas.try_add("10.0.0.1")
    assert not quotas.try_add("10.0.0.2"), "an override applies to the address as a peer shows it"
    assert quotas.rate == 5
    quotas.update(ListenerLimits(max_connections_per_ip=1))
    assert quotas.per_ip == {"10.0.0.1": 2}, "a lower max.connections.per.ip closes nothing open"


def test_an_ip_without_a_quota_and_no_default_is_never_throttled():
    ips = IpConnectionQuotas()
    ips.update({entity(ip="10.0.0.9"): {RATE: 1.0}, entity(user="alice"): {"producer_byte_rate": 10.0}})
    assert all(ips.throttle_ms("10.0.0.1", 0) == 0 for _ in range(1000))


def test_a_connection_over_the_ips_rate_is_throttled_for_the_delay_back_to_the_quota():
    ips = IpConnectionQuotas(samples=11, window_seconds=1)
    ips.update({entity(ip="10.0.0.1"): {RATE: 2.0}})
    # a new ip's rate is measured over at least (samples - 1) windows: 20 connections at once fit
    assert [ips.throttle_ms("10.0.0.1", 0) for _ in range(20)] == [0] * 20
    throttle = ips.throttle_ms("10.0.0.1", 0)
    assert throttle == 500  # (21 / 10 s - 2) / 2 * 10 s, the connection taken back
    assert ips.throttle_ms("10.0.0.1", 0) == 500, "a throttled connection is not counted"
    assert ips.throttle_ms("10.0.0.2", 0) == 0, "another ip has its own rate and no quota"


def test_the_default_ip_entity_bounds_every_ip_without_its_own_quota():
    ips = IpConnectionQuotas(samples=2, window_seconds=1)
    ips.update({entity(ip=None): {RATE: 1.0}, entity(ip="10.0.0.5"): {RATE: 100.0}})
    assert ips.throttle_ms("10.0.0.1", 0) == 0
    assert ips.throttle_ms("10.0.0.1", 0) == 1000, "bounded by one window"
    assert ips.throttle_ms("10.0.0.3", 0) == 0, "each ip measured apart"
    assert [ips.throttle_ms("10.0.0.5", 0) for _ in range(100)] == [0] * 100
    ips.update({})
    assert ips.throttle_ms("10.0.0.1", 0) == 0, "the quota removed: accepted again"


def test_a_quota_of_zero_throttles_every_connection_for_one_window():
    ips = IpConnectionQuotas(samples=11, window_seconds=1)
    ips.update({entity(ip="10.0.0.1"): {RATE: 0.0}})
    assert ips.throttle_ms("10.0.0.1", 0) == 1000


def test_rates_of_ips_idle_for_an_hour_are_forgotten():
    ips = IpConnectionQuotas()
    ips.update({entity(ip=None): {RATE: 5.0}})
    ips.throttle_ms("10.0.0.1", 0)
    ips.expire(3_600_000)
    assert ips._rates == {}


# ---- a real listener ----------------------------------------------------------------------

def run(scenario):
    asyncio.run(asyncio.wait_for(scenario(), TEST_TIMEOUT_S))


async def start_server(**limits) -> tuple[Server, int]:
    server = Server(echo, 1 << 20, limits=ListenerLimits(**limits))
    port = server.bind("127.0.0.1", 0)
    server.start()
    return server, port


def test_raising_max_connections_on_a_running_listener_accepts_the_connection_that_waited():
    async def scenario():
        server, port = await start_server(max_connections=1)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(request(b"a"))
        assert await reader.readexactly(5) == request(b"a")
        second_reader, second_writer = await asyncio.open_connection("127.0.0.1", port)
        second_writer.write(request(b"b"))
        answer = asyncio.ensure_future(second_reader.readexactly(5))
        await asyncio.sleep(0.3)
        assert not answer.done(), "not accepted while max.connections is 1"
        server.update_limits(ListenerLimits(max_connections=2))
        assert await answer == request(b"b")
        writer.close()
        second_writer.close()
        await server.close()
    run(scenario)


def test_a_connection_over_its_ips_rate_is_held_unread_and_then_closed():
    async def scenario():
        server, port = await start_server()
        ips = IpConnectionQuotas(samples=11, window_seconds=1)
        ips.update({entity(ip="127.0.0.1"): {RATE: 0.0}})
        server.quotas.ip_throttle = ips.throttle_ms
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(request(b"x"))
        try:
            assert await asyncio.wait_for(reader.read(5), 5) == b"", "closed unanswered"
        except ConnectionResetError:
            pass
        assert not server.connections and server.quotas.total == 0
        writer.close()
        ips.update({})
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(request(b"y"))
        assert await reader.readexactly(5) == request(b"y"), "served once the quota is removed"
        writer.close()
        await server.close()
    run(scenario)


def test_an_ip_entity_is_matched_as_the_peers_address_reads():
    ips = IpConnectionQuotas(samples=2, window_seconds=1)
    ips.update({entity(ip="0:0:0:0:0:0:0:1"): {RATE: 1.0}})
    assert ips.rate_for("::1") == 1.0


def test_a_new_ip_beyond_many_rates_forgets_those_idle_for_an_hour():
    ips = IpConnectionQuotas()
    ips.update({entity(ip=None): {RATE: 5.0}})
    for n in range(1024):
        ips.throttle_ms(f"10.0.{n // 256}.{n % 256}", 0)
    ips.throttle_ms("10.9.9.9", 3_600_000)
    assert list(ips._rates) == ["10.9.9.9"]
