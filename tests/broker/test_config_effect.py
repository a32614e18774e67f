"""Every property a node accepts either changes what it does or is named, with why not, when
a config sets it: a Kafka server.properties starts unchanged, and nothing set is silently
dropped."""
import pathlib
import re

import pytest

from broker.server import DEFAULT_FLUSH_CHECK_MS, flush_check_ms
from controller.process import metadata_log_config
from engine.config import BROKER_SYNONYMS, TOPIC_CONFIGS, TOPIC_WITHOUT_EFFECT
from engine.errors import ConfigError
from strom.config import METADATA_LOG_SEGMENT_MIN_BYTES, PROPERTIES, WITHOUT_EFFECT, ServerConfig

from .test_config import BASE

REPO = pathlib.Path(__file__).resolve().parents[2]
PACKAGES = ("ext", "engine", "protocol", "metadata", "security", "raft", "controller", "broker",
            "replication", "spark", "strom")


def _quoted_names_in_sources(leave_out: tuple[str, ...] = ()) -> dict[str, int]:
    """How often each "quoted.name" appears in the product's Python sources (less ``leave_out``)."""
    counts: dict[str, int] = {}
    for package in PACKAGES:
        for path in (REPO / package).rglob("*.py"):
            if str(path.relative_to(REPO)) in leave_out:
                continue
            for name in re.findall(r'"([a-z][a-z0-9]*(?:\.[a-z0-9]+)*)"', path.read_text()):
                counts[name] = counts.get(name, 0) + 1
    return counts


def _attribute_reads_in_sources() -> str:
    return "\n".join(path.read_text() for package in PACKAGES for path in (REPO / package).rglob("*.py"))


def test_every_accepted_property_is_read_somewhere_or_says_it_has_no_effect():
    counts = _quoted_names_in_sources()
    # Its declaration in PROPERTIES is one mention; taking effect needs another. A log.* property
    # takes effect through the topic config it is the default of (checked below).
    ignored = sorted(name for name in PROPERTIES if counts.get(name, 0) < 2
                     and name not in WITHOUT_EFFECT and name not in BROKER_SYNONYMS)
    assert ignored == [], f"accepted but never read, and not in WITHOUT_EFFECT: {ignored}"


def test_every_topic_config_is_read_somewhere_or_says_it_has_no_effect():
    sources = _attribute_reads_in_sources()
    # Read as the LogConfig's attribute, or by its name from the topic's configs in the image (the
    # replication quotas' throttled replicas) somewhere but where the topic configs are declared.
    named = _quoted_names_in_sources(leave_out=("engine/config.py",))
    ignored = sorted(name for name, spec in TOPIC_CONFIGS.items()
                     if not re.search(rf"\.{spec.attr}\b", sources) and not named.get(name)
                     and name not in TOPIC_WITHOUT_EFFECT)
    assert ignored == [], f"topic configs never read, and not in TOPIC_WITHOUT_EFFECT: {ignored}"
    assert all(name in TOPIC_CONFIGS for name in TOPIC_WITHOUT_EFFECT)


def test_a_property_without_effect_is_named_with_why_only_when_the_config_sets_it():
    assert ServerConfig(BASE).without_effect() == {}
    config = ServerConfig({**BASE, "num.io.threads": "16", "num.partitions": "3"})
    assert config.without_effect() == {"num.io.threads": WITHOUT_EFFECT["num.io.threads"]}
    assert all(name in PROPERTIES for name in WITHOUT_EFFECT)


def test_a_property_nothing_serves_is_refused_as_unknown():
    with pytest.raises(ConfigError, match="strom.metrics.port.*unknown property"):
        ServerConfig({**BASE, "strom.metrics.port": "9100"})


def test_the_controllers_metadata_log_rolls_at_metadata_log_segment_bytes():
    assert metadata_log_config(ServerConfig(BASE)).segment_bytes == 1 << 30
    config = ServerConfig({**BASE, "metadata.log.segment.bytes": str(16 << 20)})
    assert metadata_log_config(config).segment_bytes == 16 << 20


def test_metadata_log_segment_bytes_below_kafkas_minimum_is_refused_naming_it():
    with pytest.raises(ConfigError, match="metadata.log.segment.bytes.*at least 8388608"):
        ServerConfig({**BASE, "metadata.log.segment.bytes": str(METADATA_LOG_SEGMENT_MIN_BYTES - 1)})


@pytest.mark.parametrize("name", ["log.flush.scheduler.interval.ms",
                                  "log.flush.offset.checkpoint.interval.ms",
                                  "log.flush.start.offset.checkpoint.interval.ms"])
def test_a_flush_or_checkpoint_interval_below_one_ms_is_refused_naming_it(name):
    with pytest.raises(ConfigError, match=f"{re.escape(name)}.*at least 1"):
        ServerConfig({**BASE, name: "0"})


def test_logs_are_checked_against_flush_ms_every_log_flush_scheduler_interval_ms_when_set():
    assert flush_check_ms(ServerConfig(BASE)) == DEFAULT_FLUSH_CHECK_MS
    assert flush_check_ms(ServerConfig({**BASE, "log.flush.scheduler.interval.ms": "250"})) == 250
