"""The listener limits as node properties: Kafka's names, defaults and validation; a bad value
raises ConfigError naming the property."""
import pytest

from engine.errors import ConfigError
from protocol.limits import UNLIMITED
from strom.config import ServerConfig
from tests.broker.test_config import BASE


def test_defaults_bound_request_memory_and_leave_connections_unlimited_as_kafka():
    limits = ServerConfig(BASE).listener_limits()
    assert limits.queued_max_request_bytes == 104857600, "one request of socket.request.max.bytes"
    assert (limits.max_connections, limits.max_connections_per_ip,
            limits.max_connection_creation_rate) == (UNLIMITED, UNLIMITED, UNLIMITED)
    assert limits.max_connections_per_ip_overrides == {}
    assert limits.connections_max_idle_ms == 600000
    assert ServerConfig(BASE)["replica.socket.timeout.ms"] == 30000
    assert ServerConfig(BASE)["controller.socket.timeout.ms"] == 30000


def test_minus_one_leaves_queued_request_bytes_unbounded():
    limits = ServerConfig({**BASE, "queued.max.request.bytes": "-1"}).listener_limits()
    assert limits.queued_max_request_bytes == -1


def test_the_limits_reach_the_listener():
    limits = ServerConfig({**BASE, "queued.max.request.bytes": "209715200", "max.connections": "100",
                           "max.connections.per.ip": "10",
                           "max.connections.per.ip.overrides": "127.0.0.1:3, [::1]:4, localhost:5",
                           "max.connection.creation.rate": "50",
                           "connections.max.idle.ms": "1000"}).listener_limits()
    assert (limits.queued_max_request_bytes, limits.max_connections, limits.max_connections_per_ip,
            limits.max_connection_creation_rate, limits.connections_max_idle_ms) == \
        (209715200, 100, 10, 50, 1000)
    overrides = limits.max_connections_per_ip_overrides
    assert overrides["::1"] == 4
    assert overrides["127.0.0.1"] in (3, 5), "localhost resolves to 127.0.0.1 too"


@pytest.mark.parametrize("props,name,why", [
    ({"queued.max.request.bytes": "1000"}, "queued.max.request.bytes", "at least socket.request.max.bytes"),
    ({"queued.max.request.bytes": "lots"}, "queued.max.request.bytes", "expected an integer"),
    ({"max.connections": "-1"}, "max.connections", "at least 0"),
    ({"max.connections.per.ip": "-5"}, "max.connections.per.ip", "at least 0"),
    ({"max.connections.per.ip": "0"}, "max.connections.per.ip", "only if max.connections.per.ip.overrides"),
    ({"max.connection.creation.rate": "-1"}, "max.connection.creation.rate", "at least 0"),
    ({"max.connections.per.ip.overrides": "hostonly"}, "max.connections.per.ip.overrides", "host:count"),
    ({"max.connections.per.ip.overrides": "h:x"}, "max.connections.per.ip.overrides", "integer count"),
    ({"max.connections.per.ip.overrides": "h:-1"}, "max.connections.per.ip.overrides", "at least 0"),
    ({"max.connections.per.ip.overrides": "bad host!:1"}, "max.connections.per.ip.overrides", "host:count"),
    ({"connections.max.idle.ms": "soon"}, "connections.max.idle.ms", "expected an integer"),
    ({"replica.socket.timeout.ms": "100"}, "replica.socket.timeout.ms", "at least replica.fetch.wait.max.ms"),
    ({"controller.socket.timeout.ms": "0"}, "controller.socket.timeout.ms", "at least 1"),
])
def test_a_bad_limit_names_its_property(props, name, why):
    with pytest.raises(ConfigError) as e:
        ServerConfig({**BASE, **props}).listener_limits()
    assert name in str(e.value) and why in str(e.value)


def test_an_override_host_that_does_not_resolve_names_the_property():
    with pytest.raises(ConfigError, match="max.connections.per.ip.overrides"):
        ServerConfig({**BASE, "max.connections.per.ip.overrides": "no-such-host.invalid:1"}).listener_limits()


def test_a_zero_per_ip_limit_is_allowed_with_overrides():
    limits = ServerConfig({**BASE, "max.connections.per.ip": "0",
                           "max.connections.per.ip.overrides": "127.0.0.1:2"}).listener_limits()
    assert limits.max_connections_per_ip == 0 and limits.max_connections_per_ip_overrides == {"127.0.0.1": 2}
