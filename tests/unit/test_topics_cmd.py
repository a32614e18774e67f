"""strom topics' alter, create and describe options as Kafka's TopicCommand reads and applies
them, from fixed inputs (no cluster)."""
from types import SimpleNamespace as NS

import pytest

from strom import topics
from strom.cli import build_parser


def part(index, leader, replicas, isr):
    return NS(partition_index=index, leader_id=leader, replica_nodes=replicas, isr_nodes=isr,
              eligible_leader_replicas=None, last_known_elr=None)


PARTITIONS = [part(0, 1, [1, 2, 3], [1, 2, 3]),   # in sync
              part(1, 2, [2, 3, 1], [2, 3]),      # under-replicated, at min ISR 2
              part(2, -1, [3, 1, 2], [3]),        # no leader: under min ISR, unavailable
              part(3, 4, [4, 1, 2], [4, 1, 2])]   # led by broker 4, which is not live
LIVE = {1, 2, 3}


def described(options, configs=()):
    return topics.format_topic("t", bytes(16), PARTITIONS, list(configs), options, 2, LIVE).splitlines()


def partitions_of(lines):
    return [int(line.split("\tPartition: ")[1].split("\t")[0]) for line in lines if line.startswith("\t")]


def test_partition_reports_print_only_the_partitions_they_name_without_the_topic_line():
    for options, expected in ((topics.DescribeOptions(under_replicated=True), [1, 2]),
                              (topics.DescribeOptions(under_min_isr=True), [2]),
                              (topics.DescribeOptions(at_min_isr=True), [1]),
                              (topics.DescribeOptions(unavailable=True), [2, 3]),
                              (topics.DescribeOptions(under_replicated=True, unavailable=True), [1, 2, 3])):
        lines = described(options)
        assert partitions_of(lines) == expected and not lines[0].startswith("Topic:"), options


def test_topics_with_overrides_prints_only_topic_lines_of_topics_with_a_config_set():
    options = topics.DescribeOptions(with_overrides=True)
    assert described(options) == []
    assert described(options, [("retention.ms", "1000")]) == [
        "Topic: t\tPartitionCount: 4\tReplicationFactor: 3\tConfigs: retention.ms=1000"]


def test_describe_without_reports_prints_the_topic_and_every_partition():
    lines = described(topics.ALL)
    assert lines[0].startswith("Topic: t\tPartitionCount: 4") and partitions_of(lines) == [0, 1, 2, 3]


def test_exclude_internal_leaves_out_the_brokers_own_topics():
    names = ["orders", "__consumer_offsets", "__transaction_state", "_private"]
    assert topics.select_topics(names, None) == ["__consumer_offsets", "__transaction_state", "_private",
                                                 "orders"]
    assert topics.select_topics(names, None, exclude_internal=True) == ["_private", "orders"]
    assert topics.select_topics(names, "__.*", exclude_internal=True) == []


def test_replica_assignment_is_read_as_kafka_topics_reads_it():
    assert topics.parse_replica_assignment("1:2,2:3, 3:1") == [[1, 2], [2, 3], [3, 1]]
    with pytest.raises(topics.TopicError,
                       match="^Partition replica lists may not contain duplicate entries: 2$"):
        topics.parse_replica_assignment("1:2,2:2")
    with pytest.raises(topics.TopicError,
                       match=r"^Partition 1 has different replication factor: \[2, 3, 1\]$"):
        topics.parse_replica_assignment("1:2,2:3:1")


def test_alter_sends_only_the_new_partitions_assignments():
    new = topics.new_partitions(2, 4, [[1, 2], [2, 3], [3, 1], [1, 3]])
    assert [a.broker_ids for a in new] == [[3, 1], [1, 3]]
    assert topics.new_partitions(2, 4, None) is None


def args(*argv):
    return build_parser().parse_args(["topics", "--bootstrap-server", "127.0.0.1:1", *argv])


def test_options_are_refused_with_an_action_that_does_not_take_them():
    assert topics.check_options(args("--alter", "--topic", "t", "--partitions", "3")) == "alter"
    with pytest.raises(ValueError, match=r'^Missing required argument "\[partitions\]"$'):
        topics.check_options(args("--alter", "--topic", "t"))
    with pytest.raises(ValueError,
                       match=r'^Option "\[if-not-exists\]" can\'t be used with option "\[alter\]"$'):
        topics.check_options(args("--alter", "--topic", "t", "--partitions", "3", "--if-not-exists"))
    with pytest.raises(ValueError,
                       match=r'^Option "\[exclude-internal\]" can\'t be used with option "\[create\]"$'):
        topics.check_options(args("--create", "--topic", "t", "--exclude-internal"))
    with pytest.raises(ValueError, match=r'^Option "\[replica-assignment\]" can\'t be used with option '
                                         r'"\[partitions\]"$'):
        topics.check_options(args("--create", "--topic", "t", "--partitions", "2",
                                  "--replica-assignment", "1"))
    with pytest.raises(ValueError, match=r'^Option "\[topics-with-overrides\]" can\'t be used with option '
                                         r'"\[under-replicated-partitions\]"$'):
        topics.check_options(args("--describe", "--topics-with-overrides", "--under-replicated-partitions"))
