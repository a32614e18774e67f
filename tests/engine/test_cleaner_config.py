"""The compaction settings as Kafka's LogConfig defines and validates them: the topic configs
min.cleanable.dirty.ratio, min.compaction.lag.ms, max.compaction.lag.ms, delete.retention.ms
and their broker defaults log.cleaner.*."""
import pytest

from engine.cleaner import compaction_settings
from engine.config import BROKER_SYNONYMS, TOPIC_CONFIGS, LogConfig, log_config_from_broker
from engine.errors import ConfigError

LONG_MAX = 2**63 - 1


def test_the_compaction_topic_configs_have_kafkas_defaults():
    props = LogConfig().to_properties()
    assert props["min.cleanable.dirty.ratio"] == "0.5"
    assert props["min.compaction.lag.ms"] == "0"
    assert props["max.compaction.lag.ms"] == str(LONG_MAX)
    assert props["delete.retention.ms"] == "86400000"


def test_each_compaction_topic_config_has_its_log_cleaner_broker_synonym():
    assert BROKER_SYNONYMS["log.cleaner.min.cleanable.ratio"] == "min.cleanable.dirty.ratio"
    assert BROKER_SYNONYMS["log.cleaner.min.compaction.lag.ms"] == "min.compaction.lag.ms"
    assert BROKER_SYNONYMS["log.cleaner.max.compaction.lag.ms"] == "max.compaction.lag.ms"
    assert BROKER_SYNONYMS["log.cleaner.delete.retention.ms"] == "delete.retention.ms"
    config = log_config_from_broker({"log.cleaner.min.cleanable.ratio": "0.25",
                                     "log.cleaner.delete.retention.ms": "1000",
                                     "log.cleaner.min.compaction.lag.ms": "5",
                                     "log.cleaner.max.compaction.lag.ms": "10"})
    assert (config.min_cleanable_dirty_ratio, config.delete_retention_ms) == (0.25, 1000)
    assert (config.min_compaction_lag_ms, config.max_compaction_lag_ms) == (5, 10)


def test_a_topic_overrides_its_compaction_settings_and_the_cleaner_reads_them():
    config = LogConfig().with_overrides({
        "cleanup.policy": "compact,delete", "min.cleanable.dirty.ratio": "0.01",
        "min.compaction.lag.ms": "100", "max.compaction.lag.ms": "200", "delete.retention.ms": "0"})
    assert config.compacts and config.deletes and config.delete_retention_ms == 0

    class _Log:
        pass

    lg = _Log()
    lg.config = config
    settings = compaction_settings(lg)
    assert (settings.min_cleanable_dirty_ratio, settings.min_compaction_lag_ms,
            settings.max_compaction_lag_ms) == (0.01, 100, 200)


@pytest.mark.parametrize("name, value", [
    ("min.cleanable.dirty.ratio", "1.5"), ("min.cleanable.dirty.ratio", "-0.1"),
    ("min.cleanable.dirty.ratio", "half"), ("min.compaction.lag.ms", "-1"),
    ("max.compaction.lag.ms", "0"), ("delete.retention.ms", "-1"), ("delete.retention.ms", "1.5"),
])
def test_a_compaction_setting_outside_kafkas_range_is_refused(name, value):
    with pytest.raises(ConfigError) as e:
        LogConfig().with_overrides({name: value})
    assert name in str(e.value)


@pytest.mark.parametrize("value, expected", [("0", 0.0), ("1", 1.0), (" 0.75 ", 0.75), ("5e-1", 0.5),
                                             ("0.3d", 0.3)])
def test_min_cleanable_dirty_ratio_is_read_as_javas_double(value, expected):
    config = LogConfig().with_overrides({"min.cleanable.dirty.ratio": value})
    assert config.min_cleanable_dirty_ratio == expected


def test_min_compaction_lag_above_max_compaction_lag_is_refused_with_kafkas_message():
    with pytest.raises(ConfigError) as e:
        LogConfig().with_overrides({"min.compaction.lag.ms": "60000", "max.compaction.lag.ms": "1"})
    assert str(e.value) == ("conflict topic config setting min.compaction.lag.ms (60000) > "
                            "max.compaction.lag.ms (1)")
    # The merged config is checked: a topic's lag against the broker's default of the other.
    defaults = LogConfig().with_overrides({"max.compaction.lag.ms": "1000"})
    with pytest.raises(ConfigError):
        defaults.with_overrides({"min.compaction.lag.ms": "2000"})
    assert defaults.with_overrides({"min.compaction.lag.ms": "1000"}).min_compaction_lag_ms == 1000


def test_the_compaction_configs_are_topic_configs_kafka_names():
    assert {"min.cleanable.dirty.ratio", "min.compaction.lag.ms", "max.compaction.lag.ms",
            "delete.retention.ms"} <= set(TOPIC_CONFIGS)
