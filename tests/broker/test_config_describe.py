"""DescribeConfigs of a topic: each topic config with its value and where the value comes from
(Kafka's ConfigSource: the topic's override, the broker's static property, or the default),
as Kafka's broker answers it. Shown here for KIP-390's compression levels."""
import asyncio

from broker.handlers.admin import AdminApis
from protocol import messages as M
from protocol.context import RequestContext
from protocol.headers import RequestHeader
from strom.config import ServerConfig
from tests.broker.replica_nodes import TOPIC, Cluster

from .test_config import BASE

DYNAMIC_TOPIC_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 1, 4, 5
BOOLEAN, STRING, INT, LONG, DOUBLE, LIST, PASSWORD = 1, 2, 3, 5, 6, 7, 9  # DescribeConfigs' ConfigType


def describe_topic(config: ServerConfig, overrides: dict[str, str], names=None, version: int = 4) -> dict:
    """name -> (value, config_source, is_default) of TOPIC's configs, as DescribeConfigs answers."""
    return {c.name: (c.value, c.config_source, c.is_default)
            for c in described_entries(config, overrides, names, version)}


def described_entries(config: ServerConfig, overrides: dict[str, str], names=None, version: int = 4) -> list:
    """TOPIC's config entries as DescribeConfigs answers them."""
    cluster = Cluster(brokers=(1,))
    cluster.create_topic(replicas=(1,), configs=overrides)

    def topic_log_config(topic):
        own = cluster.image.topic_config(topic)
        return config.log_config.with_overrides(own) if own else config.log_config

    handlers = AdminApis(node_id=1, config=config, image=lambda: cluster.image, controller=None,
                         topic_log_config=topic_log_config, replicas=None)
    api = {a.key: a for a in handlers.apis()}[32]
    R = M.DescribeConfigsRequest
    request = R(resources=[R.DescribeConfigsResource(resource_type=2, resource_name=TOPIC,
                                                     configuration_keys=names)],
                include_synonyms=False, include_documentation=False)
    response = asyncio.run(api.fn(RequestContext(RequestHeader(32, version, 1, "test", 2)), request))
    result = response.results[0]
    assert result.error_code == 0
    return result.configs


def test_describe_configs_shows_the_compression_levels_with_their_sources():
    config = ServerConfig({**BASE, "compression.lz4.level": "4"})
    described = describe_topic(config, {"compression.type": "zstd", "compression.zstd.level": "19"})
    assert described["compression.gzip.level"] == ("-1", DEFAULT_CONFIG, True)
    assert described["compression.lz4.level"] == ("4", STATIC_BROKER_CONFIG, False)
    assert described["compression.zstd.level"] == ("19", DYNAMIC_TOPIC_CONFIG, False)
    assert described["compression.type"] == ("zstd", DYNAMIC_TOPIC_CONFIG, False)


def test_describe_configs_answers_the_levels_asked_for_by_name():
    names = ["compression.zstd.level", "compression.lz4.level"]
    described = describe_topic(ServerConfig(BASE), {}, names=names)
    assert described == {"compression.zstd.level": ("3", DEFAULT_CONFIG, True),
                         "compression.lz4.level": ("9", DEFAULT_CONFIG, True)}


def test_describe_configs_gives_each_topic_config_the_type_kafka_defines_it_with():
    """Kafka's TopicConfig definitions: sizes that fit an int are INT, times and the byte
    counts that may not are LONG, cleanup.policy is a LIST."""
    types = {c.name: c.config_type for c in described_entries(ServerConfig(BASE), {})}
    assert {n for n, t in types.items() if t == INT} == {
        "segment.bytes", "segment.index.bytes", "index.interval.bytes", "max.message.bytes",
        "min.insync.replicas", "compression.gzip.level", "compression.lz4.level", "compression.zstd.level"}
    assert {n for n, t in types.items() if t == LONG} == {
        "segment.ms", "segment.jitter.ms", "retention.ms", "retention.bytes", "flush.messages", "flush.ms",
        "file.delete.delay.ms", "message.timestamp.before.max.ms", "message.timestamp.after.max.ms",
        "delete.retention.ms", "min.compaction.lag.ms", "max.compaction.lag.ms"}
    assert types["min.cleanable.dirty.ratio"] == DOUBLE
    assert types["cleanup.policy"] == LIST
    assert {n for n, t in types.items() if t == BOOLEAN} == {"unclean.leader.election.enable", "preallocate"}
    assert {n for n, t in types.items() if t == STRING} == {"compression.type", "message.timestamp.type"}


def described_broker(config: ServerConfig) -> dict:
    """name -> (value, config_source, config_type) of the broker's own configs."""
    cluster = Cluster(brokers=(1,))
    handlers = AdminApis(node_id=1, config=config, image=lambda: cluster.image, controller=None,
                         topic_log_config=None, replicas=None)
    api = {a.key: a for a in handlers.apis()}[32]
    R = M.DescribeConfigsRequest
    request = R(resources=[R.DescribeConfigsResource(resource_type=4, resource_name="1",
                                                     configuration_keys=None)],
                include_synonyms=False, include_documentation=False)
    (result,) = asyncio.run(api.fn(RequestContext(RequestHeader(32, 4, 1, "test", 2)), request)).results
    assert result.error_code == 0
    return {c.name: (c.value, c.config_source, c.config_type) for c in result.configs}


def test_describe_configs_of_a_broker_types_each_property_as_declared():
    described = described_broker(ServerConfig({**BASE, "num.partitions": "3", "log.segment.bytes": "2048"}))
    assert described["num.partitions"] == ("3", STATIC_BROKER_CONFIG, INT)
    assert described["log.retention.check.interval.ms"][1:] == (DEFAULT_CONFIG, LONG)
    assert described["auto.create.topics.enable"] == ("true", DEFAULT_CONFIG, BOOLEAN)
    assert described["log.segment.bytes"] == ("2048", STATIC_BROKER_CONFIG, INT)  # as its topic config
    assert described["log.dirs"][2] == STRING


def test_a_brokers_password_configs_are_sensitive_without_their_value():
    """Kafka's PASSWORD-typed properties (sasl.jaas.config, the ssl passwords, keys and
    certificates) are described as sensitive, PASSWORD-typed, with a null value."""
    jaas = 'org.apache.kafka.common.security.plain.PlainLoginModule required username="a" password="b";'
    described = described_broker(ServerConfig({**BASE, "sasl.jaas.config": jaas, "ssl.key.password": "k"}))
    assert described["sasl.jaas.config"] == (None, STATIC_BROKER_CONFIG, PASSWORD)
    assert described["ssl.key.password"] == (None, STATIC_BROKER_CONFIG, PASSWORD)
