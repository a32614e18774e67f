"""Topics and replica placement: the striped, rack-aware placer over usable brokers, manual
assignments, default.replication.factor, topic configs (min.insync.replicas,
unclean.leader.election.enable), CreatePartitions."""
import random
from collections import Counter

import pytest

from controller.placement import InvalidReplicationFactor, StripedReplicaPlacer, UsableBroker
from metadata.configs import TOPIC_RESOURCE
from protocol import messages as M
from protocol.errors import Error
from tests.controller.scenario import Scenario


def test_placement_puts_each_partition_on_as_many_racks_as_there_are():
    brokers = [UsableBroker(b, rack) for b, rack in
               [(1, "a"), (2, "a"), (3, "b"), (4, "b"), (5, "c"), (6, "c")]]
    racks = {b.broker_id: b.rack for b in brokers}
    for seed in range(20):
        for replicas in StripedReplicaPlacer(random.Random(seed)).place(brokers, 12, 3):
            assert len(set(replicas)) == 3
            assert sorted(racks[b] for b in replicas) == ["a", "b", "c"], replicas


def test_placement_alternates_racks_when_the_replication_factor_exceeds_them():
    brokers = [UsableBroker(b, rack) for b, rack in [(1, "a"), (2, "a"), (3, "b"), (4, "b")]]
    racks = {b.broker_id: b.rack for b in brokers}
    for replicas in StripedReplicaPlacer(random.Random(1)).place(brokers, 8, 3):
        assert [racks[b] for b in replicas] in (["a", "b", "a"], ["b", "a", "b"]), replicas


def test_placement_spreads_leaders_and_replicas_evenly():
    brokers = [UsableBroker(b, None) for b in range(1, 7)]
    placed = StripedReplicaPlacer(random.Random(3)).place(brokers, 12, 3)
    assert set(Counter(r[0] for r in placed).values()) == {2}, "each broker leads two"
    assert set(Counter(b for r in placed for b in r).values()) == {6}, "each broker holds six"


def test_placement_with_too_few_brokers_is_an_invalid_replication_factor():
    with pytest.raises(InvalidReplicationFactor, match="only 2 broker"):
        StripedReplicaPlacer(random.Random(0)).place([UsableBroker(1, None), UsableBroker(2, None)], 1, 3)


def test_new_topic_isr_is_its_replicas_led_by_the_first():
    s = Scenario(brokers=3)
    result = s.create_topic("t", partitions=6, rf=3)
    assert result.error_code == Error.NONE and (result.num_partitions, result.replication_factor) == (6, 3)
    for p in s.image.topics["t"].partitions.values():
        assert p.isr == p.replicas and p.leader == p.replicas[0] and len(set(p.replicas)) == 3
        assert (p.leader_epoch, p.partition_epoch) == (0, 0)


def test_placement_uses_only_unfenced_brokers_not_shutting_down():
    s = Scenario(brokers=4)
    s.heartbeat(4, want_shut_down=True)
    s.cluster.connection_closed(s.connections[3], s.now)
    s.advance(1000)
    s.heartbeat_all(skip=(3,))
    s.tick()
    assert s.create_topic("three", rf=3).error_code == Error.INVALID_REPLICATION_FACTOR
    s.create_topic("two", partitions=4, rf=2)
    assert all(set(p.replicas) == {1, 2} for p in s.image.topics["two"].partitions.values())


def test_too_few_brokers_is_invalid_replication_factor_with_kafkas_message():
    s = Scenario(brokers=1)
    result = s.create_topic("t", rf=3)
    assert result.error_code == Error.INVALID_REPLICATION_FACTOR
    assert result.error_message == ("Unable to replicate the partition 3 time(s): The target replication "
                                    "factor of 3 cannot be reached because only 1 broker(s) are registered.")
    assert "t" not in s.image.topics


def test_default_replication_factor_and_partitions_apply_to_minus_one():
    s = Scenario(brokers=3)
    s.topics.default_replication_factor, s.topics.num_partitions = 2, 5
    result = s.create_topic("t", partitions=-1, rf=-1)
    assert (result.num_partitions, result.replication_factor) == (5, 2)
    assert all(len(p.replicas) == 2 for p in s.image.topics["t"].partitions.values())


def test_manual_assignment_is_honoured_with_live_replicas_in_the_isr():
    s = Scenario(brokers=3)
    s.cluster.connection_closed(s.connections[3], s.now)
    s.advance(1000)
    s.heartbeat_all(skip=(3,))
    s.tick()
    result = s.create_topic("t", assignments={0: [3, 1], 1: [2, 3]})
    assert result.error_code == Error.NONE
    p0, p1 = s.partition("t", 0), s.partition("t", 1)
    assert (p0.replicas, p0.isr, p0.leader) == ([3, 1], [1], 1)
    assert (p1.replicas, p1.isr, p1.leader) == ([2, 3], [2], 2)


@pytest.mark.parametrize("assignments,why", [
    ({0: [1, 1]}, "more than once"),
    ({0: [1, 9]}, "no such broker"),
    ({0: [1, 2], 1: [1]}, "not consistent"),
    ({0: [1], 2: [2]}, "consecutive"),
    ({0: []}, "empty replica list"),
])
def test_manual_assignment_is_validated(assignments, why):
    s = Scenario(brokers=3)
    result = s.create_topic("t", assignments=assignments)
    assert result.error_code == Error.INVALID_REPLICA_ASSIGNMENT and why in result.error_message
    assert "t" not in s.image.topics


def test_manual_assignment_with_every_replica_fenced_is_refused():
    s = Scenario(brokers=2)
    s.cluster.connection_closed(s.connections[2], s.now)
    s.advance(1000)
    s.heartbeat_all(skip=(2,))
    s.tick()
    assert s.create_topic("t", assignments={0: [2]}).error_code == Error.INVALID_REPLICA_ASSIGNMENT


@pytest.mark.parametrize("name,value,ok", [
    ("min.insync.replicas", "2", True), ("min.insync.replicas", "0", False),
    ("min.insync.replicas", "two", False), ("unclean.leader.election.enable", "true", True),
    ("unclean.leader.election.enable", "maybe", False),
])
def test_topic_configs_are_validated_when_a_topic_is_created(name, value, ok):
    s = Scenario(brokers=3)
    result = s.create_topic("t", rf=3, configs={name: value})
    assert result.error_code == (Error.NONE if ok else Error.INVALID_CONFIG)
    assert ("t" in s.image.topics) == ok
    if ok:
        assert s.image.configs[(TOPIC_RESOURCE, "t")] == {name: value}


def test_min_insync_replicas_of_the_topic_overrides_the_broker_default():
    s = Scenario(brokers=3, min_isr=1)
    s.create_topic("t", assignments={0: [1, 2, 3]}, configs={"min.insync.replicas": "2"})
    ref = ("t", s.image.topics["t"].topic_id, 0, s.partition("t"))
    assert s.replication.effective_min_isr(s.image, "t", ref[3]) == 2
    s.create_topic("small", assignments={0: [1]}, configs={"min.insync.replicas": "3"})
    assert s.replication.effective_min_isr(s.image, "small", s.partition("small")) == 1, \
        "capped at the replication factor"


def test_incremental_alter_configs_validates_the_resulting_topic_config():
    s = Scenario(brokers=1)
    s.create_topic("t", rf=1)
    R = M.IncrementalAlterConfigsRequest
    req = R(resources=[R.AlterConfigsResource(resource_type=TOPIC_RESOURCE, resource_name="t", configs=[
        R.AlterConfigsResource.AlterableConfig(name="min.insync.replicas", config_operation=0, value="0")])])
    response = s.apply(s.topics.incremental_alter_configs(s.image, req))
    assert response.responses[0].error_code == Error.INVALID_CONFIG and s.last_records == []


@pytest.mark.parametrize("name,value,ok", [
    ("compression.gzip.level", "-1", True), ("compression.gzip.level", "0", False),
    ("compression.lz4.level", "17", True), ("compression.lz4.level", "18", False),
    ("compression.zstd.level", "-131072", True), ("compression.zstd.level", "23", False),
])
def test_a_compression_level_out_of_kafkas_range_is_invalid_config_naming_it(name, value, ok):
    """KIP-390's levels at CreateTopics and IncrementalAlterConfigs: INVALID_CONFIG, the
    message naming the config, nothing written."""
    s = Scenario(brokers=1)
    result = s.create_topic("created", rf=1, configs={"compression.type": "zstd", name: value})
    assert result.error_code == (Error.NONE if ok else Error.INVALID_CONFIG)
    assert ok or result.error_message.startswith(f"{name}: ")
    s.create_topic("altered", rf=1)
    R = M.IncrementalAlterConfigsRequest
    req = R(resources=[R.AlterConfigsResource(resource_type=TOPIC_RESOURCE, resource_name="altered", configs=[
        R.AlterConfigsResource.AlterableConfig(name=name, config_operation=0, value=value)])])
    response = s.apply(s.topics.incremental_alter_configs(s.image, req)).responses[0]
    assert response.error_code == (Error.NONE if ok else Error.INVALID_CONFIG)
    assert s.image.topic_config("altered") == ({name: value} if ok else {})
    assert ok or response.error_message.startswith(f"{name}: ")


def test_create_partitions_places_new_partitions_with_the_topic_replication_factor():
    s = Scenario(brokers=3)
    s.create_topic("t", partitions=2, rf=2)
    R = M.CreatePartitionsRequest
    grow = R(topics=[R.CreatePartitionsTopic(name="t", count=5, assignments=None)], timeout_ms=1000)
    assert s.apply(s.topics.create_partitions(s.image, grow)).results[0].error_code == Error.NONE
    assert sorted(s.image.topics["t"].partitions) == [0, 1, 2, 3, 4]
    assert all(len(p.replicas) == 2 for p in s.image.topics["t"].partitions.values())
    manual = R(topics=[R.CreatePartitionsTopic(name="t", count=6, assignments=[
        R.CreatePartitionsTopic.CreatePartitionsAssignment(broker_ids=[3, 1])])], timeout_ms=1000)
    assert s.apply(s.topics.create_partitions(s.image, manual)).results[0].error_code == Error.NONE
    assert s.partition("t", 5).replicas == [3, 1]
    wrong_rf = R(topics=[R.CreatePartitionsTopic(name="t", count=7, assignments=[
        R.CreatePartitionsTopic.CreatePartitionsAssignment(broker_ids=[3])])], timeout_ms=1000)
    result = s.apply(s.topics.create_partitions(s.image, wrong_rf)).results[0]
    assert result.error_code == Error.INVALID_REPLICA_ASSIGNMENT


def test_a_create_topics_request_for_more_than_10000_partitions_is_a_policy_violation_before_placement():
    """One request may not make the controller place (and hold in memory) more than
    MAX_PARTITIONS_PER_REQUEST partitions, as Kafka's validateTotalNumberOfPartitions: a fuzzed
    num_partitions of 2**31-1 otherwise blocks the controller's loop placing them."""
    s = Scenario(brokers=3)
    R = M.CreateTopicsRequest

    def topic(name, partitions):
        return R.CreatableTopic(name=name, num_partitions=partitions, replication_factor=1,
                                assignments=[], configs=[])
    for validate_only in (False, True):
        for topics in ([topic("huge", 2**31 - 1)], [topic("a", 6000), topic("b", 4001)]):
            response = s.apply(s.topics.create_topics(s.image, R(topics=topics, validate_only=validate_only)))
            assert {(t.error_code, t.error_message) for t in response.topics} == \
                {(Error.POLICY_VIOLATION, "Excessively large number of partitions per request.")}
            assert len(response.topics) == len(topics)
            assert s.last_records == [] and not s.image.topics
    s.topics.num_partitions = 5001  # the default counts for num_partitions=-1
    response = s.apply(s.topics.create_topics(s.image, R(topics=[topic("a", -1), topic("b", -1)])))
    assert {t.error_code for t in response.topics} == {Error.POLICY_VIOLATION}
    response = s.apply(s.topics.create_topics(s.image, R(topics=[topic("a", 6000), topic("b", 4000)])))
    assert [t.error_code for t in response.topics] == [Error.NONE, Error.NONE]
    assert len(s.image.topics["a"].partitions) + len(s.image.topics["b"].partitions) == 10000


def test_a_create_partitions_request_adding_more_than_10000_partitions_is_a_policy_violation():
    s = Scenario(brokers=3)
    s.create_topic("t", partitions=2, rf=2)
    R = M.CreatePartitionsRequest
    for count in (2**31 - 1, 10003):
        grow = R(topics=[R.CreatePartitionsTopic(name="t", count=count, assignments=None)], timeout_ms=1000)
        result = s.apply(s.topics.create_partitions(s.image, grow)).results[0]
        assert (result.error_code, result.error_message) == \
            (Error.POLICY_VIOLATION, "Excessively large number of partitions per request.")
        assert sorted(s.image.topics["t"].partitions) == [0, 1]
    grow = R(topics=[R.CreatePartitionsTopic(name="t", count=10002, assignments=None)], timeout_ms=1000)
    assert s.apply(s.topics.create_partitions(s.image, grow)).results[0].error_code == Error.NONE
    assert len(s.image.topics["t"].partitions) == 10002


def delete_request(version: int, *names: str, ids: tuple[bytes, ...] = ()):
    """DeleteTopics as a client of that version sends it: by name (v6 also by id), or topic_names."""
    R = M.DeleteTopicsRequest
    if version >= 6:
        return R(topics=[R.DeleteTopicState(name=n, topic_id=bytes(16)) for n in names]
                 + [R.DeleteTopicState(name=None, topic_id=i) for i in ids], timeout_ms=1000)
    return R(topic_names=list(names), timeout_ms=1000)


def test_delete_topics_is_refused_with_topic_deletion_disabled_when_delete_topic_enable_is_false():
    s = Scenario(brokers=1)
    for name in ("a", "b"):
        s.create_topic(name, rf=1)
    s.topics.delete_topic_enable = False
    a_id = s.image.topics["a"].topic_id
    for version, req in ((6, delete_request(6, "a", "missing", ids=(a_id,))),
                         (5, delete_request(5, "a", "b")), (3, delete_request(3, "b"))):
        response = s.apply(s.topics.delete_topics(s.image, req, version))
        # Every topic of the request gets the error as it was asked for (Kafka's
        # DeleteTopicsRequest.getErrorResponse), with no message of its own: a client shows
        # TOPIC_DELETION_DISABLED's, "Topic deletion is disabled.".
        asked = [(t.name, t.topic_id) for t in req.topics] or [(n, bytes(16)) for n in req.topic_names]
        assert [(r.name, bytes(r.topic_id), r.error_code, r.error_message) for r in response.responses] == \
            [(name, bytes(topic_id), Error.TOPIC_DELETION_DISABLED, None) for name, topic_id in asked]
        assert s.last_records == [], "nothing is deleted"
    assert sorted(s.image.topics) == ["a", "b"]
    s.topics.delete_topic_enable = True
    response = s.apply(s.topics.delete_topics(s.image, delete_request(6, "a"), 6))
    assert response.responses[0].error_code == Error.NONE and "a" not in s.image.topics


def test_delete_topics_before_v3_is_an_invalid_request_when_deletion_is_disabled():
    s = Scenario(brokers=1)
    s.create_topic("a", rf=1)
    s.topics.delete_topic_enable = False
    for version in (1, 2):
        response = s.apply(s.topics.delete_topics(s.image, delete_request(version, "a"), version))
        assert [(r.name, r.error_code) for r in response.responses] == [("a", Error.INVALID_REQUEST)]
        assert "a" in s.image.topics


def test_create_partitions_that_is_no_increase_is_refused_with_kafkas_messages():
    """ReplicationControlManager.createPartitions: the same count and a lower one are
    INVALID_PARTITIONS, each with its own message."""
    s = Scenario(brokers=3)
    s.create_topic("t", partitions=3, rf=1)
    R = M.CreatePartitionsRequest
    answers = {}
    for count in (3, 2):
        req = R(topics=[R.CreatePartitionsTopic(name="t", count=count, assignments=None)], timeout_ms=1000)
        result = s.apply(s.topics.create_partitions(s.image, req)).results[0]
        answers[count] = (result.error_code, result.error_message)
    assert answers == {
        3: (Error.INVALID_PARTITIONS, "Topic already has 3 partition(s)."),
        2: (Error.INVALID_PARTITIONS,
            "The topic t currently has 3 partition(s); 2 would not be an increase."),
    }
    assert sorted(s.image.topics["t"].partitions) == [0, 1, 2]
