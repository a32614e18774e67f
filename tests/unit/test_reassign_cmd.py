"""strom reassign-partitions' and leader-election's pure parts: Kafka's JSON, its proposal, the
throttled replica lists and the output lines (strom/reassign.py)."""
import json
import random

import pytest

from engine.config import TOPIC_CONFIGS
from engine.errors import ConfigError
from protocol.errors import Error
from strom import reassign as r


def test_reassignment_json_is_kafkas_compact_layout_in_topic_partition_order():
    text = r.reassignment_json({("b", 0): [2, 3], ("a", 1): [1, 2], ("a", 0): [3, 1]})
    assert text == ('{"version":1,"partitions":['
                    '{"topic":"a","partition":0,"replicas":[3,1],"log_dirs":["any","any"]},'
                    '{"topic":"a","partition":1,"replicas":[1,2],"log_dirs":["any","any"]},'
                    '{"topic":"b","partition":0,"replicas":[2,3],"log_dirs":["any","any"]}]}')
    assert r.parse_reassignment(text) == {("a", 0): [3, 1], ("a", 1): [1, 2], ("b", 0): [2, 3]}


@pytest.mark.parametrize("text, message", [
    ('{"version":1,"partitions":[]}', "cannot be empty"),
    ('{"partitions":[{"topic":"t","partition":0,"replicas":[1,1]}]}', "duplicate entries"),
    ('{"partitions":[{"topic":"t","partition":0,"replicas":[1]},{"topic":"t","partition":0,"replicas":[2]}]}',
     "multiple entries for t-0"),
    ('{"partitions":[{"topic":"t","partition":0,"replicas":[1],"log_dirs":["/d","/e"]}]}',
     "is different from size of log dirs list"),
    ("not json", "not JSON"),
])
def test_a_bad_reassignment_file_is_refused_naming_the_option(text, message):
    with pytest.raises(ConfigError, match=message) as e:
        r.parse_reassignment(text)
    assert "--reassignment-json-file" in str(e.value)


def test_topics_to_move_refuses_duplicates():
    assert r.parse_topics_to_move('{"version":1,"topics":[{"topic":"a"},{"topic":"b"}]}') == ["a", "b"]
    with pytest.raises(ConfigError, match=r"duplicate entries: \[a\]"):
        r.parse_topics_to_move('{"topics":[{"topic":"a"},{"topic":"a"}]}')


def test_generate_keeps_each_topics_replication_factor_on_the_listed_brokers_spread_evenly():
    current = {("t", p): [1, 2, 3] for p in range(8)} | {("u", 0): [1, 2]}
    proposed = r.propose(current, [4, 2, 3], random.Random(7))
    assert set(proposed) == set(current)
    for tp, replicas in proposed.items():
        assert len(replicas) == len(current[tp]) == len(set(replicas))
        assert set(replicas) <= {2, 3, 4}
    leaders = [proposed[("t", p)][0] for p in range(8)]
    assert max(leaders.count(b) for b in (2, 3, 4)) - min(leaders.count(b) for b in (2, 3, 4)) <= 1


def test_generate_refuses_a_replication_factor_above_the_broker_count():
    with pytest.raises(ConfigError, match="larger than available brokers"):
        r.propose({("t", 0): [1, 2, 3]}, [1, 2], random.Random(0))


def test_throttled_replicas_are_the_sources_for_the_leader_and_the_new_replicas_for_the_follower():
    moves = {("t", 0): r.Move([1, 2, 3], [2, 3, 4]), ("t", 1): r.Move([2, 3, 1], [2, 3, 1])}
    leader, follower = r.throttled_replicas(moves)["t"]
    assert leader == "0:1,0:2,0:3,1:1,1:2,1:3"
    assert follower == "0:4"
    # Each is a value the topic config takes (Kafka's ThrottledReplicaListValidator).
    for value in (leader, follower):
        TOPIC_CONFIGS["leader.replication.throttled.replicas"].check(
            "leader.replication.throttled.replicas", value.split(","))


def test_verify_states_are_kafkas_lines():
    text = r.reassignment_states({("t", 0): [2, 3, 4], ("t", 1): [2, 3], ("t", 2): [1, 2]},
                                 {("t", 0): [2, 3, 4], ("t", 1): [1, 2, 3], ("t", 2): [2, 3]}, {("t", 1)})
    assert text.splitlines() == [
        "Status of partition reassignment:",
        "Reassignment of partition t-0 is completed.",
        "Reassignment of partition t-1 is still in progress.",
        "There is no active reassignment of partition t-2, but replica set is 2,3 rather than 1,2.",
    ]


def test_list_is_kafkas_layout():
    assert r.list_text({}) == "No partition reassignments found."
    assert r.list_text({("t", 0): ([1, 2, 3, 4], [4], [1])}) == (
        "Current partition reassignments:\nt-0: replicas: 1,2,3,4. adding: 4. removing: 1.")


def test_leader_election_lines_are_kafkas():
    text, failed = r.election_text("PREFERRED", {
        ("t", 0): (Error.NONE, None), ("t", 1): (Error.NONE, None),
        ("t", 2): (Error.ELECTION_NOT_NEEDED, None),
        ("t", 3): (Error.PREFERRED_LEADER_NOT_AVAILABLE, "down")})
    assert failed == 1
    assert text.splitlines() == [
        "Successfully completed leader election (PREFERRED) for partitions t-0, t-1",
        "Valid replica already elected for partitions t-2",
        "Error completing leader election (PREFERRED) for partition: t-3: "
        "org.apache.kafka.common.errors.PreferredLeaderNotAvailableException: down",
    ]


def test_election_file_is_kafkas_layout():
    doc = json.dumps({"partitions": [{"topic": "t", "partition": 0}, {"topic": "u", "partition": 2}]})
    assert r.parse_election_file(doc) == [("t", 0), ("u", 2)]
    with pytest.raises(ConfigError, match="duplicate partitions: t-0"):
        r.parse_election_file('{"partitions":[{"topic":"t","partition":0},{"topic":"t","partition":0}]}')
