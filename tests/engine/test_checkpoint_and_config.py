import pytest

from engine.checkpoint import (
    read_offset_checkpoint,
    read_partition_metadata,
    uuid_from_str,
    uuid_to_str,
    write_offset_checkpoint,
    write_partition_metadata,
)
from engine.config import LogConfig, log_config_from_broker
from engine.errors import ConfigError


def test_offset_checkpoint_is_kafkas_text_format(tmp_path):
    path = str(tmp_path / "replication-offset-checkpoint")
    write_offset_checkpoint(path, {("orders", 1): 998, ("orders", 0): 1042})
    with open(path) as f:
        assert f.read() == "0\n2\norders 0 1042\norders 1 998\n"
    assert read_offset_checkpoint(path) == {("orders", 0): 1042, ("orders", 1): 998}


@pytest.mark.parametrize("text,why", [
    ("1\n0\n", "version"),
    ("0\n2\nt 0 1\n", "count"),
    ("0\n1\nt x 1\n", "integers"),
    ("0\n1\nt 0\n", "topic partition offset"),
])
def test_malformed_offset_checkpoint_names_file_and_line(tmp_path, text, why):
    path = tmp_path / "cp"
    path.write_text(text)
    with pytest.raises(ValueError, match=why) as err:
        read_offset_checkpoint(str(path))
    assert str(path) in str(err.value)


def test_partition_metadata_round_trip(tmp_path):
    path = str(tmp_path / "partition.metadata")
    write_partition_metadata(path, "vLk2bEzzTlOnSDbIVrGRnA")
    assert open(path).read() == "version: 0\ntopic_id: vLk2bEzzTlOnSDbIVrGRnA\n"
    assert read_partition_metadata(path) == "vLk2bEzzTlOnSDbIVrGRnA"


def test_uuid_is_url_safe_base64_of_16_bytes():
    raw = bytes(range(16))
    assert uuid_to_str(raw) == "AAECAwQFBgcICQoLDA0ODw"
    assert uuid_from_str("AAECAwQFBgcICQoLDA0ODw") == raw


def test_topic_overrides_use_kafka_names_and_defaults():
    config = LogConfig().with_overrides({"segment.bytes": "1024", "cleanup.policy": "delete",
                                         "message.timestamp.type": "LogAppendTime"})
    assert config.segment_bytes == 1024 and config.log_append_time
    assert config.retention_ms == 7 * 24 * 3600 * 1000 and config.index_interval_bytes == 4096


@pytest.mark.parametrize("name,value,why", [
    ("segment.bytes", "ten", "integer"),
    ("segment.bytes", "3", "at least"),
    ("message.timestamp.type", "Now", "one of"),
    ("no.such.config", "1", "unknown"),
    ("preallocate", "yes", "true or false"),
])
def test_bad_topic_config_names_the_property(name, value, why):
    with pytest.raises(ConfigError, match=why) as err:
        LogConfig().with_overrides({name: value})
    assert str(err.value).startswith(name)


def test_broker_defaults_map_log_properties():
    config = log_config_from_broker({"log.segment.bytes": "2048", "log.retention.hours": "2",
                                     "log.index.interval.bytes": "100", "unrelated": "x"})
    assert (config.segment_bytes, config.retention_ms, config.index_interval_bytes) == (2048, 7200000, 100)
    assert log_config_from_broker({"log.retention.ms": "5", "log.retention.hours": "2"}).retention_ms == 5


@pytest.mark.parametrize("policy,deletes,compacts", [
    ("delete", True, False), ("compact", False, True), ("delete,compact", True, True),
    ("compact, delete", True, True), ("", False, False)])
def test_cleanup_policy_is_a_list_read_by_membership(policy, deletes, compacts):
    """cleanup.policy is Kafka's LIST: retention and DeleteRecords need `delete` among its values,
    and a log may have offset gaps whenever `compact` is among them, in either order."""
    config = LogConfig().with_overrides({"cleanup.policy": policy})
    assert (config.deletes, config.compacts) == (deletes, compacts)
