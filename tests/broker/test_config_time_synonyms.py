"""DescribeConfigs of a broker's time properties with their synonyms, as Kafka's ConfigHelper
lists them: log.retention.ms with log.retention.minutes and log.retention.hours, log.roll.ms
with log.roll.hours, each source in turn (this broker's dynamic values, the cluster default's,
the static ones), the finest first within a source."""
import asyncio

import pytest

from broker.handlers.admin import AdminApis
from engine.errors import ConfigError
from metadata.image import MetadataImage
from protocol import messages as M
from protocol.context import RequestContext
from protocol.headers import RequestHeader
from strom.config import ServerConfig

from .test_config import BASE

DYNAMIC_BROKER, DYNAMIC_DEFAULT_BROKER, STATIC_BROKER, DEFAULT = 2, 3, 4, 5


def described(props: dict, dynamic: dict, name: str):
    image = MetadataImage()
    for key, configs in dynamic.items():
        image.configs[(4, key)] = configs
    handlers = AdminApis(node_id=1, config=ServerConfig({**BASE, **props}), image=lambda: image,
                         controller=None, topic_log_config=None, replicas=None)
    api = {a.key: a.fn for a in handlers.apis()}[32]
    R = M.DescribeConfigsRequest
    request = R(resources=[R.DescribeConfigsResource(resource_type=4, resource_name="1",
                                                     configuration_keys=[name])],
                include_synonyms=True, include_documentation=False)
    result = asyncio.run(api(RequestContext(RequestHeader(32, 4, 1, "test", 2)), request)).results[0]
    assert result.error_code == 0
    entry = result.configs[0]
    return entry.value, entry.config_source, [(s.source, s.name, s.value) for s in entry.synonyms]


def test_log_retention_ms_lists_the_minutes_and_hours_forms_as_synonyms():
    value, source, synonyms = described({"log.retention.hours": "24"},
                                        {"": {"log.retention.minutes": "30"}}, "log.retention.ms")
    assert (value, source) == ("1800000", DYNAMIC_DEFAULT_BROKER)
    assert synonyms[:2] == [(DYNAMIC_DEFAULT_BROKER, "log.retention.minutes", "30"),
                            (STATIC_BROKER, "log.retention.hours", "24")]


def test_the_hours_form_is_described_with_its_own_synonyms_from_its_name_on():
    _, source, synonyms = described({"log.roll.hours": "2"}, {"1": {"log.roll.ms": "60000"}},
                                    "log.roll.hours")
    assert source == STATIC_BROKER
    assert synonyms[0] == (STATIC_BROKER, "log.roll.hours", "2")
    assert (DYNAMIC_BROKER, "log.roll.ms", "60000") not in synonyms  # dropped before the name, as Kafka


def test_log_roll_jitter_hours_is_a_property_and_the_jitters_synonym():
    """A Kafka server.properties with log.roll.jitter.hours starts: the hours set the topics'
    segment.jitter.ms unless log.roll.jitter.ms is set, and are described as its synonym."""
    assert ServerConfig({**BASE, "log.roll.jitter.hours": "2"}).log_config.segment_jitter_ms == 7200000
    both = ServerConfig({**BASE, "log.roll.jitter.hours": "2", "log.roll.jitter.ms": "5000"})
    assert both.log_config.segment_jitter_ms == 5000
    value, source, synonyms = described({"log.roll.jitter.hours": "2"}, {}, "log.roll.jitter.ms")
    assert (value, source) == ("7200000", STATIC_BROKER)
    assert synonyms[0] == (STATIC_BROKER, "log.roll.jitter.hours", "2")


def test_a_negative_log_roll_jitter_hours_stops_startup_naming_it():
    with pytest.raises(ConfigError, match="log.roll.jitter.hours"):
        ServerConfig({**BASE, "log.roll.jitter.hours": "-1"})
