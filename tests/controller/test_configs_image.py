"""Group configs (KIP-848's GROUP config resource, type 32) in the metadata image: ConfigRecords
replayed into ``image.group_configs``, read through ``image.group_config(group_id)``."""
from metadata.configs import GROUP_RESOURCE, TOPIC_RESOURCE
from metadata.image import MetadataImage
from protocol import messages as M
from protocol.metadata_records import decode_record, encode_record


def replayed(records, image=None) -> MetadataImage:
    image = image or MetadataImage()
    for offset, record in enumerate(records):
        image.replay(offset, decode_record(encode_record(record))[2])
    return image


def group_record(group, name, value):
    return M.ConfigRecord(resource_type=GROUP_RESOURCE, resource_name=group, name=name, value=value)


def test_group_config_records_replay_into_group_configs_for_a_group_that_does_not_exist_yet():
    image = replayed([group_record("g", "consumer.session.timeout.ms", "50000"),
                      group_record("g", "consumer.heartbeat.interval.ms", "6000")])
    assert image.group_configs == {"g": {"consumer.session.timeout.ms": "50000",
                                         "consumer.heartbeat.interval.ms": "6000"}}
    assert image.group_config("g") == {"consumer.session.timeout.ms": "50000",
                                       "consumer.heartbeat.interval.ms": "6000"}
    assert image.group_config("other") == {}
    assert (GROUP_RESOURCE, "g") not in image.configs  # groups are not topics


def test_deleting_a_group_config_removes_it_and_the_group_once_it_has_none():
    image = replayed([group_record("g", "consumer.session.timeout.ms", "50000"),
                      group_record("g", "consumer.heartbeat.interval.ms", "6000"),
                      group_record("g", "consumer.session.timeout.ms", None)])
    assert image.group_config("g") == {"consumer.heartbeat.interval.ms": "6000"}
    replayed([group_record("g", "consumer.heartbeat.interval.ms", None)], image)
    assert "g" not in image.group_configs
    assert image.group_config("g") == {}


def test_a_snapshot_carries_group_configs_and_rebuilds_them():
    image = replayed([group_record("b", "consumer.session.timeout.ms", "50000"),
                      group_record("a", "consumer.heartbeat.interval.ms", "6000"),
                      M.ConfigRecord(resource_type=TOPIC_RESOURCE, resource_name="t", name="retention.ms",
                                     value="1000")])
    again = replayed(image.records())
    assert again.group_configs == image.group_configs
    assert again.configs == image.configs == {(TOPIC_RESOURCE, "t"): {"retention.ms": "1000"}}


def test_a_topic_left_with_no_override_is_dropped_as_a_snapshot_would_drop_it():
    image = replayed([M.ConfigRecord(resource_type=TOPIC_RESOURCE, resource_name="t", name="retention.ms",
                                     value="1000"),
                      M.ConfigRecord(resource_type=TOPIC_RESOURCE, resource_name="t", name="retention.ms",
                                     value=None)])
    assert image.configs == {} == replayed(image.records()).configs
