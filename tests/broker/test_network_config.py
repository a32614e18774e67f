"""Server properties of the network edge, as Kafka's KafkaConfig reads and validates them:
fetch.max.bytes, the socket buffer sizes (socket.send.buffer.bytes, socket.receive.buffer.bytes,
replica.socket.receive.buffer.bytes) and inter.broker.listener.name; and where a broker puts them
(its replica fetchers, its registration). A bad value raises ConfigError naming the property."""
import pytest

from broker.server import Broker
from engine.errors import ConfigError
from strom.config import ServerConfig
from tests.broker.test_config import BASE

BROKER = {
    "process.roles": "broker",
    "node.id": "4",
    "controller.listener.names": "CONTROLLER",
    "controller.quorum.bootstrap.servers": "127.0.0.1:9093",
    "log.dirs": "/nonexistent/strom-network-config-test",  # a Broker is built, never started
}
TWO_LISTENERS = {**BROKER, "listeners": "EXTERNAL://127.0.0.1:9092,INTERNAL://127.0.0.1:9094"}
NOT_ADVERTISED = "must be a listener name defined in advertised.listeners"
BUFFERS = ("socket.send.buffer.bytes", "socket.receive.buffer.bytes", "replica.socket.receive.buffer.bytes")


def test_defaults_are_kafkas_but_socket_buffers_are_left_to_the_os():
    config = ServerConfig(BASE)
    assert config["fetch.max.bytes"] == 57671680
    assert (config["socket.send.buffer.bytes"], config["socket.receive.buffer.bytes"]) == (-1, -1)
    assert config["replica.socket.receive.buffer.bytes"] == -1
    assert config["delete.topic.enable"] is True
    assert config.inter_broker_listener_name == "PLAINTEXT"


def test_fetch_max_bytes_below_1024_is_refused_naming_it():
    assert ServerConfig({**BASE, "fetch.max.bytes": "1024"})["fetch.max.bytes"] == 1024
    with pytest.raises(ConfigError, match=r"^fetch\.max\.bytes: must be at least 1024"):
        ServerConfig({**BASE, "fetch.max.bytes": "1023"})


@pytest.mark.parametrize("name", BUFFERS)
def test_a_socket_buffer_size_is_minus_one_for_the_os_default_or_positive(name):
    assert ServerConfig({**BASE, name: "-1"})[name] == -1
    assert ServerConfig({**BASE, name: "1"})[name] == 1
    for bad in ("0", "-2"):
        with pytest.raises(ConfigError, match=r"-1 \(the OS default\) or at least 1") as e:
            ServerConfig({**BASE, name: bad})
        assert str(e.value).startswith(name)


def test_unset_inter_broker_listener_name_is_the_plaintext_listener_even_when_not_first():
    config = ServerConfig({**BROKER, "listeners": "EXTERNAL://127.0.0.1:9092,PLAINTEXT://127.0.0.1:9094"})
    assert config.inter_broker_listener_name == "PLAINTEXT"


def test_without_inter_broker_listener_name_a_broker_needs_a_plaintext_listener():
    with pytest.raises(ConfigError) as e:
        ServerConfig(TWO_LISTENERS)
    assert str(e.value) == (f"inter.broker.listener.name: {NOT_ADVERTISED}. The valid options based on "
                            "currently configured listeners are EXTERNAL,INTERNAL")


@pytest.mark.parametrize("props", [
    {**TWO_LISTENERS, "inter.broker.listener.name": "OTHER"},
    # a listener, but not among advertised.listeners
    {**TWO_LISTENERS, "inter.broker.listener.name": "INTERNAL",
     "advertised.listeners": "EXTERNAL://broker.example:9092"},
    # a controller listener is never a broker's
    {**BASE, "inter.broker.listener.name": "CONTROLLER"},
])
def test_inter_broker_listener_name_must_name_an_advertised_broker_listener(props):
    with pytest.raises(ConfigError, match=NOT_ADVERTISED) as e:
        ServerConfig(props)
    assert str(e.value).startswith("inter.broker.listener.name")


def test_inter_broker_listener_name_is_matched_in_upper_case_as_kafka_normalises_it():
    config = ServerConfig({**TWO_LISTENERS, "inter.broker.listener.name": "internal"})
    assert config.inter_broker_listener_name == "INTERNAL"


def test_a_controller_only_node_has_no_inter_broker_listener_to_check():
    config = ServerConfig({**BROKER, "process.roles": "controller", "listeners": "CONTROLLER://127.0.0.1:9093",
                           "controller.quorum.voters": "4@127.0.0.1:9093"})
    assert config.controller_listeners()[0].name == "CONTROLLER"


def test_a_broker_registers_its_inter_broker_listener_first_and_replicates_on_it():
    config = ServerConfig({**TWO_LISTENERS, "inter.broker.listener.name": "INTERNAL"})
    assert [lsn.name for lsn in config.advertised_broker_listeners()] == ["INTERNAL", "EXTERNAL"]
    broker = Broker(config, "network-config-test")
    # BrokerRegistration lists the inter-broker listener first (Kafka's ListenerInfo order) ...
    assert [lsn.name for lsn in broker.follower.listeners] == ["INTERNAL", "EXTERNAL"]
    # ... and the replica fetchers find leaders at their endpoints on it.
    assert broker.listener_name == broker.replicas.brokers.listener_name == "INTERNAL"


def test_a_brokers_replica_fetchers_get_replica_socket_receive_buffer_bytes():
    default = Broker(ServerConfig({**BROKER, "listeners": "PLAINTEXT://127.0.0.1:9092"}), "c")
    assert default.replicas.fetchers.config.socket_receive_buffer_bytes == -1
    config = ServerConfig({**BROKER, "listeners": "PLAINTEXT://127.0.0.1:9092",
                           "replica.socket.receive.buffer.bytes": "65536"})
    assert Broker(config, "c").replicas.fetchers.config.socket_receive_buffer_bytes == 65536
