"""strom reassign-partitions' log_dirs (strom/reassign.py), in-process: the replicas a file moves
between their broker's log dirs and --verify's lines for each move, as kafka-reassign-partitions
reads and prints them."""
import json

import pytest

from engine.errors import ConfigError
from strom.reassign import log_dir_move_states, parse_log_dirs, parse_reassignment


def plan(*partitions):
    return json.dumps({"version": 1, "partitions": list(partitions)})


def test_log_dirs_other_than_any_name_the_replicas_to_move():
    text = plan({"topic": "t", "partition": 0, "replicas": [1, 2], "log_dirs": ["/d/b", "any"]},
                {"topic": "t", "partition": 1, "replicas": [2, 3]})
    assert parse_reassignment(text) == {("t", 0): [1, 2], ("t", 1): [2, 3]}
    assert parse_log_dirs(text) == {("t", 0, 1): "/d/b"}


def test_a_log_dirs_list_of_another_size_than_the_replicas_is_refused_as_kafka():
    expected = (r"Size of replicas list \[1, 2\] is different from size of log dirs list \[any\] "
                r"for partition t-0")
    with pytest.raises(ConfigError, match=expected):
        parse_reassignment(plan({"topic": "t", "partition": 0, "replicas": [1, 2], "log_dirs": ["any"]}))


def test_verify_reports_each_log_dir_move_as_kafka_in_broker_topic_partition_order():
    targets = {("t", 0, 2): "/b", ("t", 0, 1): "/b", ("t", 1, 1): "/b", ("u", 0, 1): "/b", ("u", 1, 1): "/b"}
    found = {("t", 0, 1): ("/a", "/b"), ("t", 0, 2): ("/b", None), ("t", 1, 1): ("/a", None),
             ("u", 0, 1): ("/a", "/c")}
    text, moving = log_dir_move_states(targets, found)
    assert moving
    assert text.split("\n") == [
        "Reassignment of replica t-0-1 is still in progress.",
        "Partition t-1 on broker 1 is not being moved from log dir /a to /b.",
        "Partition u-0 on broker 1 is being moved to log dir /c instead of /b.",
        "Partition u-1 cannot be found in any live log directory on broker 1.",
        "Reassignment of replica t-0-2 completed successfully.",
    ]
    assert log_dir_move_states({("t", 0, 2): "/b"}, {("t", 0, 2): ("/b", None)})[1] is False
