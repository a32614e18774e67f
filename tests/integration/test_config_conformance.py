"""IncrementalAlterConfigs and DescribeConfigs as Kafka 4.x answers them, driven through
confluent-kafka's AdminClient (librdkafka) against one node: APPEND and SUBTRACT on a topic's
cleanup.policy, APPEND refused on a config that is not a list, a consumer group's configs
(KIP-848's GROUP resource) altered, described and bounded by the broker's
group.consumer.min/max.* properties, and a broker property that is not dynamic."""
import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

from .clients.confluent import BASE

pytestmark = pytest.mark.timeout(120)
WAIT_S = 30
SESSION, HEARTBEAT = "consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"


@pytest.fixture(scope="module")
def admin(shared_node):
    return AdminClient({**BASE, "bootstrap.servers": shared_node.bootstrap})


def alter(admin, kind, name, *ops):
    """incremental_alter_configs of one resource: ops are (name, AlterConfigOpType, value)."""
    resource = ConfigResource(kind, name, incremental_configs=[
        ConfigEntry(n, v, incremental_operation=op) for n, op, v in ops])
    (future,) = admin.incremental_alter_configs([resource]).values()
    return future.result(WAIT_S)


def refused(admin, kind, name, *ops) -> KafkaError:
    with pytest.raises(KafkaException) as e:
        alter(admin, kind, name, *ops)
    return e.value.args[0]


def describe(admin, kind, name) -> dict:
    (future,) = admin.describe_configs([ConfigResource(kind, name)]).values()
    return future.result(WAIT_S)


def test_append_and_subtract_apply_to_a_topics_cleanup_policy_as_kafka_does(admin):
    admin.create_topics([NewTopic("policy", 1, 1)])["policy"].result(WAIT_S)
    topic = ConfigResource.Type.TOPIC
    alter(admin, topic, "policy", ("cleanup.policy", AlterConfigOpType.APPEND, "compact"))
    assert describe(admin, topic, "policy")["cleanup.policy"].value == "delete,compact"
    alter(admin, topic, "policy", ("cleanup.policy", AlterConfigOpType.SUBTRACT, "delete"))
    assert describe(admin, topic, "policy")["cleanup.policy"].value == "compact"


def test_append_to_a_config_that_is_not_a_list_is_invalid_config(admin):
    admin.create_topics([NewTopic("not-a-list", 1, 1)])["not-a-list"].result(WAIT_S)
    error = refused(admin, ConfigResource.Type.TOPIC, "not-a-list",
                    ("retention.ms", AlterConfigOpType.APPEND, "1000"))
    assert error.code() == KafkaError.INVALID_CONFIG
    assert "Can't APPEND to key retention.ms because its type is not LIST." in error.str()
    assert describe(admin, ConfigResource.Type.TOPIC, "not-a-list")["retention.ms"].value == "604800000"


def test_a_groups_configs_are_altered_and_described_with_their_source(admin):
    """The group need not exist yet; its session timeout is its own, its heartbeat interval the
    broker's group.consumer.heartbeat.interval.ms (a default)."""
    alter(admin, ConfigResource.Type.GROUP, "configured", (SESSION, AlterConfigOpType.SET, "50000"))
    described = describe(admin, ConfigResource.Type.GROUP, "configured")
    assert (described[SESSION].value, described[SESSION].source) == ("50000", 8)  # GROUP_CONFIG
    assert (described[HEARTBEAT].value, described[HEARTBEAT].source) == ("5000", 5)  # DEFAULT_CONFIG
    alter(admin, ConfigResource.Type.GROUP, "configured", (SESSION, AlterConfigOpType.DELETE, None))
    assert describe(admin, ConfigResource.Type.GROUP, "configured")[SESSION].value == "45000"


def test_a_group_session_timeout_out_of_the_brokers_bounds_is_refused(admin):
    error = refused(admin, ConfigResource.Type.GROUP, "bounded", (SESSION, AlterConfigOpType.SET, "70000"))
    assert error.code() == KafkaError.INVALID_CONFIG
    assert f"{SESSION} must be less than or equal to group.consumer.max.session.timeout.ms" in error.str()
    assert describe(admin, ConfigResource.Type.GROUP, "bounded")[SESSION].value == "45000"


def test_a_broker_property_that_is_not_dynamic_is_refused_as_kafka_refuses_it(admin, shared_node):
    error = refused(admin, ConfigResource.Type.BROKER, "1", ("num.partitions", AlterConfigOpType.APPEND, "2"))
    assert error.code() == KafkaError.INVALID_CONFIG
    error = refused(admin, ConfigResource.Type.BROKER, "1", ("num.partitions", AlterConfigOpType.SET, "2"))
    assert error.code() == KafkaError.INVALID_REQUEST
    assert "Cannot update these configs dynamically: Set(num.partitions)" in error.str()
