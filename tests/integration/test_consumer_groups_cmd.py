"""`strom consumer-groups` against a real node, with real confluent-kafka consumers of the
classic and the consumer (KIP-848) protocols: the layouts, messages and exit codes of Kafka's
kafka-consumer-groups (ConsumerGroupCommand)."""
import re
import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from strom.cli import main

PER_PARTITION = 5


def cmd(capsys, node, *args):
    rc = main(["consumer-groups", "--bootstrap-server", node.bootstrap, *args])
    out, err = capsys.readouterr()
    return rc, out, err


def rows(out):
    return [line.split() for line in out.strip().splitlines()[1:]]


@pytest.fixture(scope="module")
def topic(shared_node):
    name = f"orders-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": shared_node.bootstrap})
    admin.create_topics([NewTopic(name, 2, 1)])[name].result(30)
    producer = Producer({"bootstrap.servers": shared_node.bootstrap})
    for p in (0, 1):
        for i in range(PER_PARTITION):
            producer.produce(name, value=b"v%d" % i, partition=p)
    assert producer.flush(30) == 0
    return name


def consume_all(node, topic, group, protocol="classic", client_id="app-1"):
    """A member that has read and committed every record, left running."""
    config = {"bootstrap.servers": node.bootstrap, "group.id": group, "client.id": client_id,
              "auto.offset.reset": "earliest", "enable.auto.commit": False, "group.protocol": protocol}
    if protocol == "classic":
        config["session.timeout.ms"] = 6000
    consumer = Consumer(config)
    consumer.subscribe([topic])
    seen, deadline = 0, time.monotonic() + 30
    while seen < 2 * PER_PARTITION and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            seen += 1
    assert seen == 2 * PER_PARTITION
    consumer.commit(asynchronous=False)
    return consumer


def test_describe_shows_each_partition_s_offsets_lag_and_the_member_s_host_as_kafka_prints_them(
        shared_node, topic, capsys):
    group = "describe-" + topic
    consumer = consume_all(shared_node, topic, group)
    try:
        rc, out, _ = cmd(capsys, shared_node, "--describe", "--group", group)
        assert rc == 0
        lines = out.split("\n")
        assert lines[0] == "" and re.match(r"GROUP +TOPIC +PARTITION +CURRENT-OFFSET +LOG-END-OFFSET +LAG +"
                                          r"CONSUMER-ID +HOST +CLIENT-ID$", lines[1])
        # printOffsetFormat: group and topic at least 15 wide, PARTITION 10, the offsets 15
        assert lines[1].index("TOPIC") == max(15, len(group)) + 1
        table = rows(out)
        assert [(r[1], r[2], r[3], r[4], r[5], r[7], r[8]) for r in table] == [
            (topic, str(p), str(PER_PARTITION), str(PER_PARTITION), "0", "/127.0.0.1", "app-1")
            for p in (0, 1)]
        rc, out, _ = cmd(capsys, shared_node, "--describe", "--group", group, "--members", "--verbose")
        assert re.match(r"GROUP +CONSUMER-ID +HOST +CLIENT-ID +#PARTITIONS +ASSIGNMENT$", out.split("\n")[1])
        (member,) = rows(out)
        assert member[2:] == ["/127.0.0.1", "app-1", "2", "(0,1)"]
        rc, out, _ = cmd(capsys, shared_node, "--describe", "--group", group, "--state")
        header = out.split("\n")[1]
        assert re.match(r"GROUP +COORDINATOR \(ID\) +ASSIGNMENT-STRATEGY +STATE +#MEMBERS$", header)
        assert rows(out)[0][-2:] == ["Stable", "1"] and "(1)" in out
        # a reset while the group is active is refused with Kafka's message, exit 0 as Kafka's
        rc, out, _ = cmd(capsys, shared_node, "--reset-offsets", "--group", group, "--topic", topic,
                         "--to-earliest", "--execute")
        assert rc == 0
        assert (f"Error: Assignments can only be reset if the group '{group}' is inactive, but the current "
                "state is Stable.") in out
        rc, out, _ = cmd(capsys, shared_node, "--delete", "--group", group)
        assert f"* Group '{group}' could not be deleted due to: " in out and "GroupNotEmptyException" in out
    finally:
        consumer.close()
    rc, out, err = cmd(capsys, shared_node, "--describe", "--group", group)
    assert f"Consumer group '{group}' has no active members." in err
    assert [(r[2], r[5], r[6], r[7], r[8]) for r in rows(out)] == [
        (str(p), "0", "-", "-", "-") for p in (0, 1)]


def test_reset_offsets_plans_by_default_and_commits_with_execute(shared_node, topic, capsys):
    group = "reset-" + topic
    consume_all(shared_node, topic, group).close()
    rc, out, _ = cmd(capsys, shared_node, "--reset-offsets", "--group", group, "--topic", f"{topic}:0",
                     "--to-earliest")
    assert rc == 0
    assert out.split("\n")[1] == f"{'GROUP':<30} {'TOPIC':<30} {'PARTITION':<10} {'NEW-OFFSET':<15}"
    assert rows(out) == [[group, topic, "0", "0"]]
    rc, out, _ = cmd(capsys, shared_node, "--describe", "--group", group)
    assert [r[3] for r in rows(out)] == [str(PER_PARTITION)] * 2  # a dry run changed nothing
    cmd(capsys, shared_node, "--reset-offsets", "--group", group, "--all-topics", "--shift-by", "-2",
        "--execute")
    rc, out, _ = cmd(capsys, shared_node, "--describe", "--group", group)
    assert [(r[3], r[5]) for r in rows(out)] == [(str(PER_PARTITION - 2), "2")] * 2
    rc, out, _ = cmd(capsys, shared_node, "--reset-offsets", "--group", group, "--all-topics", "--to-offset",
                     "99", "--execute")
    assert [r[3] for r in rows(out)] == [str(PER_PARTITION)] * 2  # past the end: the end (checkOffsetsRange)
    rc, out, _ = cmd(capsys, shared_node, "--reset-offsets", "--group", group, "--topic", topic,
                     "--to-datetime", "2000-01-01T00:00:00.000", "--execute")
    assert [r[3] for r in rows(out)] == ["0", "0"]
    rc, out, _ = cmd(capsys, shared_node, "--reset-offsets", "--group", group, "--topic", topic,
                     "--by-duration", "PT0S", "--dry-run")
    assert [r[3] for r in rows(out)] == [str(PER_PARTITION)] * 2  # no record newer than now: the end
    rc, _, err = cmd(capsys, shared_node, "--reset-offsets", "--group", group, "--to-latest")
    assert rc == 1 and "One of the reset scopes should be defined: --all-topics, --topic." in err


def test_reset_offsets_export_prints_the_plan_as_csv_and_from_file_commits_it(shared_node, topic, capsys,
                                                                                tmp_path):
    group = "file-" + topic
    consume_all(shared_node, topic, group).close()
    rc, out, _ = cmd(capsys, shared_node, "--reset-offsets", "--group", group, "--topic", topic,
                     "--shift-by", "-3", "--export", "--dry-run")
    assert rc == 0
    # kafka-consumer-groups' CSV of one group: topic,partition,offset (and println's blank line)
    assert out == f"{topic},0,{PER_PARTITION - 3}\n{topic},1,{PER_PARTITION - 3}\n\n"
    rc, described, _ = cmd(capsys, shared_node, "--describe", "--group", group)
    assert [r[3] for r in rows(described)] == [str(PER_PARTITION)] * 2  # the export was a dry run
    plan = tmp_path / "plan.csv"
    plan.write_text(out.replace(f"{topic},1,{PER_PARTITION - 3}", f"{topic},1,1"))
    rc, out, _ = cmd(capsys, shared_node, "--reset-offsets", "--group", group, "--from-file", str(plan),
                     "--execute")
    assert rc == 0 and rows(out) == [[group, topic, "0", str(PER_PARTITION - 3)], [group, topic, "1", "1"]]
    rc, described, _ = cmd(capsys, shared_node, "--describe", "--group", group)
    assert [(r[2], r[3], r[5]) for r in rows(described)] == [("0", str(PER_PARTITION - 3), "3"),
                                                            ("1", "1", str(PER_PARTITION - 1))]
    plan.write_text(f"{topic},0,2\n{topic},zero,2\n")
    rc, _, err = cmd(capsys, shared_node, "--reset-offsets", "--group", group, "--from-file", str(plan),
                     "--execute")
    assert rc == 1 and "line 2 of the reset plan is not topic,partition,offset" in err
    rc, described, _ = cmd(capsys, shared_node, "--describe", "--group", group)
    assert [r[3] for r in rows(described)] == [str(PER_PARTITION - 3), "1"]  # nothing of it committed


def test_list_delete_offsets_and_delete_of_a_consumer_protocol_group(shared_node, topic, capsys):
    group = "kip848-" + topic
    consumer = consume_all(shared_node, topic, group, protocol="consumer", client_id="app-2")
    try:
        rc, out, _ = cmd(capsys, shared_node, "--describe", "--group", group, "--members")
        (member,) = rows(out)
        assert member[2:] == ["/127.0.0.1", "app-2", "2"]
        rc, out, _ = cmd(capsys, shared_node, "--list", "--state", "--type")
        assert re.match(r"GROUP +TYPE +STATE +$", out.split("\n")[0])
        assert [group, "Consumer", "Stable"] in rows("\n" + out)
        rc, out, _ = cmd(capsys, shared_node, "--delete-offsets", "--group", group, "--topic", topic)
        assert "Error: Encounter some partition level error, see the follow-up details:" in out
        assert "GroupSubscribedToTopicException" in out
    finally:
        consumer.close()
    rc, out, _ = cmd(capsys, shared_node, "--list")
    assert group in out.split()
    rc, out, _ = cmd(capsys, shared_node, "--delete-offsets", "--group", group, "--topic", f"{topic}:0")
    assert out.split("\n")[0] == f"Request succeed for deleting offsets with topic {topic}:0 group {group}"
    assert rows(out.split("\n", 1)[1]) == [[topic, "0", "Successful"]]
    rc, out, _ = cmd(capsys, shared_node, "--delete", "--group", group)
    assert out.strip() == f"Deletion of requested consumer groups ('{group}') was successful."
    rc, out, _ = cmd(capsys, shared_node, "--describe", "--group", group)
    assert f"Error: Consumer group '{group}' does not exist." in out
    rc, _, err = cmd(capsys, shared_node, "--list", "--describe")
    assert rc == 1 and "Command must include exactly one action" in err
