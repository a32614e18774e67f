"""metrics.listener: where a process serves /metrics; a bad value stops startup naming it."""
import pytest

from engine.errors import ConfigError
from strom.config import ServerConfig

COMBINED = {"process.roles": "broker,controller", "node.id": "1",
            "listeners": "PLAINTEXT://:9092,CONTROLLER://:9093", "controller.listener.names": "CONTROLLER",
            "controller.quorum.voters": "1@localhost:9093"}
BROKER = {"process.roles": "broker", "node.id": "2", "listeners": "PLAINTEXT://:9092",
          "controller.listener.names": "CONTROLLER", "controller.quorum.voters": "1@localhost:9093"}


def test_metrics_are_off_when_metrics_listener_is_unset():
    assert ServerConfig(COMBINED).metrics_address("broker") is None
    assert ServerConfig(COMBINED).metrics_address("controller") is None


def test_a_combined_node_serves_the_broker_on_metrics_listener_and_the_controller_on_the_next_port():
    config = ServerConfig({**COMBINED, "metrics.listener": "http://127.0.0.1:9404"})
    assert config.metrics_address("broker") == ("127.0.0.1", 9404)
    assert config.metrics_address("controller") == ("127.0.0.1", 9405)


def test_a_broker_alone_serves_on_metrics_listener_and_port_0_takes_any_free_port():
    every_interface = ServerConfig({**BROKER, "metrics.listener": "http://:9404"})
    assert every_interface.metrics_address("broker") == ("", 9404)
    config = ServerConfig({**COMBINED, "metrics.listener": "http://127.0.0.1:0"})
    assert config.metrics_address("controller") == ("127.0.0.1", 0)
    assert ServerConfig({**BROKER, "metrics.listener": "http://[::1]:9404/"}).metrics_address("broker") == \
        ("::1", 9404)


@pytest.mark.parametrize("value", ["127.0.0.1:9404", "https://127.0.0.1:9404", "http://127.0.0.1",
                                   "http://127.0.0.1:70000", "http://127.0.0.1:port", "PLAINTEXT://:9404"])
def test_a_bad_metrics_listener_stops_startup_naming_the_property(value):
    with pytest.raises(ConfigError) as e:
        ServerConfig({**BROKER, "metrics.listener": value})
    assert "metrics.listener" in str(e.value) and value in str(e.value)
