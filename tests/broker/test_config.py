"""Node configuration: Kafka's names and defaults; a bad property names itself, no traceback."""
import subprocess
import sys

import pytest

from engine.errors import ConfigError
from strom.config import ServerConfig

BASE = {
    "process.roles": "broker,controller",
    "node.id": "1",
    "listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
    "controller.listener.names": "CONTROLLER",
    "controller.quorum.voters": "1@127.0.0.1:9093",
    "log.dirs": "/tmp/x",
}


def test_kafka_defaults_apply():
    config = ServerConfig(BASE)
    assert config["num.partitions"] == 1 and config["auto.create.topics.enable"] is True
    assert config["socket.request.max.bytes"] == 104857600
    assert config.log_config.segment_bytes == 1073741824
    assert [str(lsn) for lsn in config.broker_listeners()] == ["PLAINTEXT://127.0.0.1:9092"]
    assert config.voters == {1: ("127.0.0.1", 9093)}


def test_log_properties_become_topic_defaults():
    config = ServerConfig({**BASE, "log.segment.bytes": "2048", "log.retention.hours": "1"})
    assert (config.log_config.segment_bytes, config.log_config.retention_ms) == (2048, 3600000)


@pytest.mark.parametrize("name,value,why", [
    ("no.such.property", "1", "unknown property"),
    ("num.partitions", "many", "expected an integer"),
    ("num.partitions", "1_000", "expected an integer"),  # Java's parseInt takes no separators
    ("num.partitions", "0", "at least 1"),
    ("num.replica.fetchers", "0", "at least 1"),
    ("auto.create.topics.enable", "maybe", "true or false"),
    ("listeners", "PLAINTEXT//nohost", "NAME://host:port"),
    ("controller.quorum.voters", "one@host:1", "id@host:port"),
    ("process.roles", "router", "unknown roles"),
    ("log.segment.bytes", "1", "at least"),
])
def test_a_bad_property_is_named(name, value, why):
    with pytest.raises(ConfigError, match=why) as err:
        ServerConfig({**BASE, name: value})
    assert str(err.value).startswith(name)


@pytest.mark.processes
def test_the_command_reports_a_bad_config_without_a_traceback(tmp_path):
    path = tmp_path / "server.properties"
    path.write_text("\n".join(f"{k}={v}" for k, v in {**BASE, "num.partitons": "3"}.items()))
    out = subprocess.run([sys.executable, "-m", "strom", "start", "--config", str(path)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 1
    assert "num.partitons: unknown property" in out.stderr
    assert "Traceback" not in out.stderr


@pytest.mark.parametrize("name,default", [
    ("offsets.retention.minutes", 10080), ("offsets.retention.check.interval.ms", 600000),
    ("producer.id.expiration.ms", 86400000), ("producer.id.expiration.check.interval.ms", 600000),
])
def test_offsets_retention_and_producer_id_expiration_default_as_kafka_and_are_at_least_1(name, default):
    assert ServerConfig(BASE)[name] == default
    with pytest.raises(ConfigError, match="at least 1") as err:
        ServerConfig({**BASE, name: "0"})
    assert str(err.value).startswith(name)


@pytest.mark.parametrize("name,value,why", [
    ("compression.gzip.level", "0", "between 1 and 9 or equal to -1"),
    ("compression.lz4.level", "18", "no more than 17"),
    ("compression.zstd.level", "23", "no more than 22"),
    ("compression.zstd.level", "fast", "expected an integer"),
])
def test_a_broker_compression_level_out_of_kafkas_range_stops_startup_naming_it(name, value, why):
    with pytest.raises(ConfigError, match=why) as err:
        ServerConfig({**BASE, name: value})
    assert str(err.value).startswith(name)


def test_the_broker_compression_levels_are_every_topics_default():
    """KIP-390's broker properties carry the topic configs' names."""
    def levels(config: ServerConfig) -> tuple[int, int, int]:
        c = config.log_config
        return c.compression_gzip_level, c.compression_lz4_level, c.compression_zstd_level

    assert levels(ServerConfig(BASE)) == (-1, 9, 3)
    assert levels(ServerConfig({**BASE, "compression.gzip.level": "9", "compression.lz4.level": "1",
                                "compression.zstd.level": "-3"})) == (9, 1, -3)


@pytest.mark.parametrize("props,why", [
    ({"group.consumer.session.timeout.ms": "6000"},
     "group.consumer.session.timeout.ms.*greater than or equal to group.consumer.min.session.timeout.ms"),
    ({"group.consumer.heartbeat.interval.ms": "20000"},
     "group.consumer.heartbeat.interval.ms.*less than or equal to group.consumer.max.heartbeat.interval.ms"),
    ({"group.consumer.max.session.timeout.ms": "40000"},
     "group.consumer.max.session.timeout.ms.*greater than or equal to group.consumer.min.session.timeout.ms"),
    ({"group.consumer.min.heartbeat.interval.ms": "0"},
     "group.consumer.min.heartbeat.interval.ms.*at least 1"),
    ({"group.consumer.min.session.timeout.ms": "1000", "group.consumer.session.timeout.ms": "5000"},
     "group.consumer.heartbeat.interval.ms.*less than group.consumer.session.timeout.ms"),
])
def test_the_consumer_group_timeouts_must_lie_within_their_bounds_as_kafka_requires(props, why):
    with pytest.raises(ConfigError, match=why):
        ServerConfig({**BASE, **props})


def test_lower_bounds_let_a_broker_run_consumer_groups_with_short_timeouts():
    config = ServerConfig({**BASE, "group.consumer.min.session.timeout.ms": "1000",
                           "group.consumer.session.timeout.ms": "6000",
                           "group.consumer.min.heartbeat.interval.ms": "100",
                           "group.consumer.heartbeat.interval.ms": "500"})
    assert (config["group.consumer.session.timeout.ms"], config["group.consumer.max.session.timeout.ms"]) == \
        (6000, 60000)
