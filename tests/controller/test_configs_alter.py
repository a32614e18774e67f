"""IncrementalAlterConfigs at the controller, as Kafka's ConfigurationControlManager and
ControllerConfigurationValidator decide it: APPEND/SUBTRACT on LIST configs, group configs
(KIP-848's GROUP resource) within the broker-side bounds, and the BROKER resource, which has
no dynamic config here."""
import pytest

from controller.config_control import apply_list_op
from controller.process import controller_settings
from controller.quorum_controller import QuorumController
from controller.topic_control import TopicControl
from metadata.configs import (
    APPEND,
    BROKER_RESOURCE,
    DELETE,
    GROUP_RESOURCE,
    SET,
    SUBTRACT,
    TOPIC_RESOURCE,
    GroupBounds,
)
from protocol import messages as M
from protocol.errors import Error
from strom.config import ServerConfig
from tests.controller.scenario import Scenario

GROUP, TOPIC, BROKER = GROUP_RESOURCE, TOPIC_RESOURCE, BROKER_RESOURCE
R = M.IncrementalAlterConfigsRequest
OK = [(Error.NONE, None)]


def resource(resource_type, name, *ops):
    return R.AlterConfigsResource(resource_type=resource_type, resource_name=name, configs=[
        R.AlterConfigsResource.AlterableConfig(name=n, config_operation=op, value=v) for n, op, v in ops])


def alter(s: Scenario, *resources, validate_only=False):
    """The responses, committing what the controller wrote (kept in s.last_records)."""
    response = s.apply(s.topics.incremental_alter_configs(
        s.image, R(resources=list(resources), validate_only=validate_only)))
    return [(r.error_code, r.error_message) for r in response.responses]


@pytest.fixture
def s():
    s = Scenario(brokers=1)
    assert s.create_topic("t", rf=1).error_code == Error.NONE
    return s


# ---- APPEND / SUBTRACT ------------------------------------------------------------------
def test_append_to_a_list_config_starts_from_the_configs_own_default(s):
    assert alter(s, resource(TOPIC, "t", ("cleanup.policy", APPEND, "compact"))) == OK
    assert s.image.topic_config("t") == {"cleanup.policy": "delete,compact"}


def test_append_adds_only_values_not_present_and_subtract_removes_them(s):
    s.set_topic_config("t", "cleanup.policy", "compact")
    assert alter(s, resource(TOPIC, "t", ("cleanup.policy", APPEND, "compact,delete"))) == OK
    assert s.image.topic_config("t") == {"cleanup.policy": "compact,delete"}
    assert alter(s, resource(TOPIC, "t", ("cleanup.policy", SUBTRACT, "compact"))) == OK
    assert s.image.topic_config("t") == {"cleanup.policy": "delete"}


def test_subtracting_every_value_leaves_the_empty_list_kafka_reads_as_infinite_retention(s):
    assert alter(s, resource(TOPIC, "t", ("cleanup.policy", SUBTRACT, "delete"))) == OK
    assert s.image.topic_config("t") == {"cleanup.policy": ""}


THROTTLED = "leader.replication.throttled.replicas"
FOLLOWER_THROTTLED = "follower.replication.throttled.replicas"


def test_throttled_replicas_lists_take_append_subtract_and_delete_as_kafka_reassign_partitions_uses_them(s):
    """kafka-reassign-partitions --throttle APPENDs partition:broker pairs to a topic's
    leader/follower.replication.throttled.replicas and --verify SUBTRACTs or DELETEs them."""
    assert alter(s, resource(TOPIC, "t", (THROTTLED, APPEND, "0:1,1:2"),
                             (FOLLOWER_THROTTLED, APPEND, "0:3"))) == OK
    assert s.image.topic_config("t") == {THROTTLED: "0:1,1:2", FOLLOWER_THROTTLED: "0:3"}
    assert alter(s, resource(TOPIC, "t", (THROTTLED, SUBTRACT, "0:1"))) == OK
    assert s.image.topic_config("t")[THROTTLED] == "1:2"
    assert alter(s, resource(TOPIC, "t", (THROTTLED, DELETE, None),
                             (FOLLOWER_THROTTLED, DELETE, None))) == OK
    assert s.image.topic_config("t") == {}
    assert alter(s, resource(TOPIC, "t", (THROTTLED, SET, "*"))) == OK


@pytest.mark.parametrize("value", ["0:x", "*,0:1", "broker-1"])
def test_a_throttled_replicas_value_is_star_or_partition_broker_pairs_as_kafkas_validator_says(s, value):
    [(code, message)] = alter(s, resource(TOPIC, "t", (THROTTLED, APPEND, value)))
    assert code == Error.INVALID_CONFIG and "must be the literal '*'" in message, message
    assert s.image.topic_config("t") == {}


def test_a_list_op_that_leaves_the_override_as_it_was_writes_no_record(s):
    s.set_topic_config("t", "cleanup.policy", "compact")
    assert alter(s, resource(TOPIC, "t", ("cleanup.policy", SUBTRACT, "delete"))) == OK
    assert s.last_records == []
    # On the default, the result becomes the override (Kafka compares with the override).
    assert alter(s, resource(TOPIC, "t", ("cleanup.policy", DELETE, None))) == OK
    assert alter(s, resource(TOPIC, "t", ("cleanup.policy", SUBTRACT, "compact"))) == OK
    assert s.image.topic_config("t") == {"cleanup.policy": "delete"}


def test_the_result_of_a_list_op_is_validated_as_a_set_would_be(s):
    ((code, message),) = alter(s, resource(TOPIC, "t", ("cleanup.policy", APPEND, "shred")))
    assert code == Error.INVALID_CONFIG and "cleanup.policy" in message
    assert s.image.topic_config("t") == {} and s.last_records == []


@pytest.mark.parametrize("op,word", [(APPEND, "APPEND"), (SUBTRACT, "SUBTRACT")])
def test_append_or_subtract_on_a_config_that_is_not_a_list_is_invalid_config_as_kafka_says(s, op, word):
    ((code, message),) = alter(s, resource(TOPIC, "t", ("retention.ms", op, "1000")))
    assert (code, message) == (Error.INVALID_CONFIG,
                               f"Can't {word} to key retention.ms because its type is not LIST.")
    ((code, message),) = alter(s, resource(GROUP, "g", ("consumer.session.timeout.ms", op, "50000")))
    assert (code, message) == (Error.INVALID_CONFIG, f"Can't {word} to key consumer.session.timeout.ms "
                                                     "because its type is not LIST.")
    assert s.last_records == []


def test_one_failing_key_fails_its_resource_whole_and_no_other(s):
    s.create_topic("u", rf=1)
    responses = alter(s, resource(TOPIC, "t", ("retention.ms", SET, "1000"), ("segment.ms", APPEND, "1")),
                      resource(TOPIC, "u", ("cleanup.policy", APPEND, "compact")))
    assert [code for code, _ in responses] == [Error.INVALID_CONFIG, Error.NONE]
    assert s.image.topic_config("t") == {}
    assert s.image.topic_config("u") == {"cleanup.policy": "delete,compact"}


@pytest.mark.parametrize("op,current,default,value,result", [
    (APPEND, None, "delete", "compact", "delete,compact"),
    (APPEND, "delete", "delete", "delete", "delete"),
    (APPEND, "", "delete", "compact", "compact"),  # an empty override is the empty list
    (APPEND, ",delete,", "delete", "compact", "delete,compact"),  # empty parts dropped
    (APPEND, "delete", "delete", "compact,", "delete,compact"),  # Java's split drops a trailing ""
    (SUBTRACT, "a,b,a", None, "a", "b,a"),  # one occurrence
    (SUBTRACT, None, None, "a", ""),
])
def test_list_ops_follow_kafkas_splitting(op, current, default, value, result):
    assert apply_list_op(op, current, default, value) == result


# ---- validation order and the request's shape --------------------------------------------
def test_a_missing_topic_is_found_after_its_configs_are_validated(s):
    assert alter(s, resource(TOPIC, "nope", ("retention.ms", SET, "1000"))) == [
        (Error.UNKNOWN_TOPIC_OR_PARTITION, "The topic 'nope' does not exist.")]
    assert alter(s, resource(TOPIC, "nope", ("no.such.config", SET, "1"))) == [
        (Error.INVALID_CONFIG, "Unknown topic config name: no.such.config")]
    assert alter(s, resource(TOPIC, "", ("retention.ms", SET, "1"))) == [
        (Error.INVALID_REQUEST, "Default topic resources are not allowed.")]


def test_the_shape_of_the_request_is_checked_first(s):
    twice = resource(TOPIC, "t", ("retention.ms", SET, "1000"))
    assert alter(s, twice, twice) == [(Error.INVALID_REQUEST, "Each resource must appear at most once.")] * 2
    assert alter(s, resource(TOPIC, "t", ("retention.ms", SET, "1"), ("retention.ms", DELETE, None))) == [
        (Error.INVALID_REQUEST, "Error due to duplicate config keys")]
    assert alter(s, resource(TOPIC, "t", ("retention.ms", SET, None), ("segment.ms", APPEND, None))) == [
        (Error.INVALID_REQUEST, "Null value not supported for : retention.ms, segment.ms")]
    assert alter(s, resource(16, "metrics", ("interval.ms", SET, "1"))) == [
        (Error.INVALID_REQUEST, "Unknown resource type 16")]
    assert s.image.topic_config("t") == {}


def test_a_null_value_is_refused_before_an_unknown_operation_as_kafka_preprocesses_the_request(s):
    """ConfigAdminManager.preprocess refuses null values for every resource before any
    operation is looked up; an unknown operation with a value is refused on its own."""
    assert alter(s, resource(TOPIC, "t", ("retention.ms", 7, None))) == [
        (Error.INVALID_REQUEST, "Null value not supported for : retention.ms")]
    assert alter(s, resource(TOPIC, "t", ("retention.ms", 7, "1"))) == [
        (Error.INVALID_REQUEST, "Unknown operations type 7")]


def test_validate_only_writes_nothing(s):
    assert alter(s, resource(TOPIC, "t", ("cleanup.policy", APPEND, "compact")),
                 resource(GROUP, "g", ("consumer.session.timeout.ms", SET, "50000")),
                 validate_only=True) == OK * 2
    assert s.last_records == [] and s.image.topic_config("t") == {} and s.image.group_config("g") == {}


# ---- GROUP (KIP-848) ---------------------------------------------------------------------
def test_group_configs_are_written_as_config_records_for_a_group_that_does_not_exist_yet(s):
    assert alter(s, resource(GROUP, "g", ("consumer.session.timeout.ms", SET, "50000"),
                             ("consumer.heartbeat.interval.ms", SET, "6000"))) == OK
    assert {(r.resource_type, r.resource_name, r.name, r.value) for r in s.last_records} == {
        (GROUP, "g", "consumer.session.timeout.ms", "50000"),
        (GROUP, "g", "consumer.heartbeat.interval.ms", "6000")}
    assert s.image.group_config("g") == {"consumer.session.timeout.ms": "50000",
                                         "consumer.heartbeat.interval.ms": "6000"}


def test_deleting_a_group_config_removes_it_from_the_image(s):
    alter(s, resource(GROUP, "g", ("consumer.session.timeout.ms", SET, "50000")))
    assert alter(s, resource(GROUP, "g", ("consumer.session.timeout.ms", DELETE, None))) == OK
    assert [(r.name, r.value) for r in s.last_records] == [("consumer.session.timeout.ms", None)]
    assert s.image.group_config("g") == {} and "g" not in s.image.group_configs


SESSION, HEARTBEAT = "consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"


@pytest.mark.parametrize("name,value,message", [
    (SESSION, "44999", f"{SESSION} must be greater than or equal to group.consumer.min.session.timeout.ms"),
    (SESSION, "60001", f"{SESSION} must be less than or equal to group.consumer.max.session.timeout.ms"),
    (HEARTBEAT, "4999",
     f"{HEARTBEAT} must be greater than or equal to group.consumer.min.heartbeat.interval.ms"),
    (HEARTBEAT, "15001",
     f"{HEARTBEAT} must be less than or equal to group.consumer.max.heartbeat.interval.ms"),
    ("consumer.session.timeout.ms", "0",
     "Invalid value 0 for configuration consumer.session.timeout.ms: Value must be at least 1"),
    ("consumer.session.timeout.ms", "soon",
     "Invalid value soon for configuration consumer.session.timeout.ms: Not a number of type INT"),
    ("consumer.session.timeout.ms", "50_000",  # Integer.parseInt takes no separators
     "Invalid value 50_000 for configuration consumer.session.timeout.ms: Not a number of type INT"),
    ("share.session.timeout.ms", "50000", "Unknown group config name: share.session.timeout.ms"),
])
def test_a_group_config_out_of_the_broker_side_bounds_is_invalid_config_with_kafkas_message(s, name, value,
                                                                                           message):
    assert alter(s, resource(GROUP, "g", (name, SET, value))) == [(Error.INVALID_CONFIG, message)]
    assert s.last_records == [] and s.image.group_config("g") == {}


def test_a_group_session_timeout_must_exceed_its_heartbeat_interval_counting_an_unset_one_as_kafkas_default():
    s = Scenario(brokers=1)
    s.topics = TopicControl(s.topics.placer, s.topics.new_topic_id,
                            group_bounds=GroupBounds(min_session_timeout_ms=1000,
                                                     min_heartbeat_interval_ms=1000))
    assert alter(s, resource(GROUP, "g", (SESSION, SET, "5000"))) == [
        (Error.INVALID_CONFIG, f"{SESSION} must be greater than {HEARTBEAT}")]
    assert alter(s, resource(GROUP, "g", ("consumer.session.timeout.ms", SET, "5000"),
                             ("consumer.heartbeat.interval.ms", SET, "1000"))) == OK


def test_group_bounds_come_from_the_controllers_properties():
    s = Scenario(brokers=1)
    s.topics = TopicControl(s.topics.placer, s.topics.new_topic_id,
                            group_bounds=GroupBounds(max_session_timeout_ms=120000))
    assert alter(s, resource(GROUP, "g", ("consumer.session.timeout.ms", SET, "100000"))) == OK


def test_a_default_group_resource_is_refused(s):
    assert alter(s, resource(GROUP, "", ("consumer.session.timeout.ms", SET, "50000"))) == [
        (Error.INVALID_REQUEST, "Default group resources are not allowed.")]


# ---- BROKER ------------------------------------------------------------------------------
def test_a_broker_config_kafka_does_not_update_dynamically_is_refused_and_nothing_written(s):
    both = resource(BROKER, "1", ("log.retention.ms", SET, "1000"), ("num.partitions", SET, "4"))
    refused = "Cannot update these configs dynamically: Set(num.partitions)"
    assert alter(s, both) == [(Error.INVALID_REQUEST, refused)]
    assert s.last_records == []
    assert s.image.configs.get((BROKER, "1")) is None


def test_a_dynamic_broker_config_is_a_config_record_of_the_broker_or_the_cluster_default(s):
    """DynamicLogConfig.ReconfigurableConfigs: the topic configs' broker-wide defaults change
    without a restart, per broker or for the cluster ("" resource)."""
    assert alter(s, resource(BROKER, "1", ("log.retention.ms", SET, "1000"))) == OK
    assert alter(s, resource(BROKER, "", ("message.max.bytes", SET, "2048"))) == OK
    assert s.image.configs[(BROKER, "1")] == {"log.retention.ms": "1000"}
    assert s.image.configs[(BROKER, "")] == {"message.max.bytes": "2048"}
    assert alter(s, resource(BROKER, "1", ("log.retention.ms", DELETE, None))) == OK
    assert s.image.configs.get((BROKER, "1")) is None
    assert alter(s, resource(BROKER, "", ("log.cleanup.policy", APPEND, "compact"))) == OK
    assert s.image.configs[(BROKER, "")]["log.cleanup.policy"] == "delete,compact"


def test_an_invalid_dynamic_broker_value_is_invalid_config_naming_the_broker_property(s):
    code, message = alter(s, resource(BROKER, "", ("log.segment.bytes", SET, "ten")))[0]
    assert code == Error.INVALID_CONFIG
    assert message.startswith("Invalid value ten for configuration log.segment.bytes")
    assert alter(s, resource(BROKER, "", ("message.max.bytes", APPEND, "1")))[0][0] == Error.INVALID_CONFIG
    assert s.image.configs.get((BROKER, "")) is None


@pytest.mark.parametrize("name,answer", [
    ("x", (Error.INVALID_REQUEST, "Unable to parse broker name as a base 10 number.")),
    ("-2", (Error.INVALID_REQUEST, "Invalid negative broker ID.")),
    ("9", (Error.BROKER_ID_NOT_REGISTERED, "No node with id 9 found.")),
])
def test_a_broker_resource_must_name_a_registered_broker(s, name, answer):
    assert alter(s, resource(BROKER, name, ("log.retention.ms", DELETE, None))) == [answer]


def test_the_nodes_group_consumer_bounds_reach_the_controllers_group_config_check():
    """group.consumer.min/max.* set in a controller's properties bound the group configs it
    takes, as Kafka's controller reads them from its own configuration."""
    config = ServerConfig({
        "process.roles": "controller", "node.id": "1",
        "listeners": "CONTROLLER://127.0.0.1:9093", "controller.listener.names": "CONTROLLER",
        "controller.quorum.voters": "1@127.0.0.1:9093", "log.dirs": "/tmp/x",
        "group.consumer.min.session.timeout.ms": "10000", "group.consumer.max.session.timeout.ms": "20000",
        "group.consumer.min.heartbeat.interval.ms": "1000",
        "group.consumer.max.heartbeat.interval.ms": "3000",
        "group.consumer.session.timeout.ms": "15000", "group.consumer.heartbeat.interval.ms": "2000"})
    bounds = QuorumController(1, "c", controller_settings(config)).topics.configs.group_bounds
    assert bounds == GroupBounds(min_session_timeout_ms=10000, max_session_timeout_ms=20000,
                                 min_heartbeat_interval_ms=1000, max_heartbeat_interval_ms=3000)
