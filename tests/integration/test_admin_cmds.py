"""Kafka's smaller admin tools as `strom` commands against one real node, driven by
confluent-kafka: each command's output in the layout of its Kafka tool (kafka-get-offsets,
kafka-delete-records, kafka-log-dirs, kafka-features, kafka-transactions)."""
import json
import os
import re
import subprocess
import sys
import time

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from .cluster import REPO_ROOT

TOPIC = "orders"
# The records' timestamps: recent, as a real producer's. Timestamps of 1970 are past retention.ms,
# and the retention pass (log.retention.check.interval.ms, 5 minutes) would delete their segments
# under a module that ran that long.
T0 = int(time.time()) * 1000


def strom(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "strom", *args], cwd=REPO_ROOT, capture_output=True,
                          text=True, stdin=subprocess.DEVNULL, timeout=60)


@pytest.fixture(scope="module")
def node(shared_node):
    """Five records with timestamps T0..T0+4, alternately in partitions 0 and 1 of `orders`."""
    admin = AdminClient({"bootstrap.servers": shared_node.bootstrap})
    admin.create_topics([NewTopic(TOPIC, 2, 1)])[TOPIC].result(30)
    producer = Producer({"bootstrap.servers": shared_node.bootstrap})
    for i in range(5):
        producer.produce(TOPIC, b"v%d" % i, partition=i % 2, timestamp=T0 + i)
    assert producer.flush(30) == 0
    return shared_node


def test_get_offsets_prints_topic_partition_offset_for_latest_earliest_and_a_timestamp(node):
    latest = strom("get-offsets", "--bootstrap-server", node.bootstrap, "--topic", TOPIC)
    assert latest.returncode == 0, latest.stderr
    assert latest.stdout == "orders:0:3\norders:1:2\n"
    earliest = strom("get-offsets", "--bootstrap-server", node.bootstrap, "--topic", TOPIC, "--time", "-2",
                     "--partitions", "1")
    assert earliest.stdout == "orders:1:0\n"
    # the first offset whose timestamp is at or after T0+3: offset 2 (T0+4) and offset 1 (T0+3)
    at = strom("get-offsets", "--bootstrap-server", node.bootstrap, "--topic", "ord.*", "--time", str(T0 + 3))
    assert at.stdout == "orders:0:2\norders:1:1\n"
    past = strom("get-offsets", "--bootstrap-server", node.bootstrap, "--topic", TOPIC,
                 "--time", str(T0 + 10**9))
    assert past.returncode == 0 and past.stdout == ""


def test_get_offsets_refuses_a_malformed_time_and_an_unmatched_filter(node):
    bad = strom("get-offsets", "--bootstrap-server", node.bootstrap, "--time", "yesterday")
    assert bad.returncode == 1 and bad.stderr.startswith("Error occurred: Malformed time argument yesterday.")
    none = strom("get-offsets", "--bootstrap-server", node.bootstrap, "--topic", "nothing-like-this")
    assert none.returncode == 1
    assert "Could not match any topic-partitions with the specified filters" in none.stderr


def test_delete_records_reports_each_partitions_low_watermark(node, tmp_path):
    topic = "deletable"
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": node.bootstrap})
    for _ in range(4):
        producer.produce(topic, b"x", partition=0)
    assert producer.flush(30) == 0
    offsets = tmp_path / "offsets.json"
    offsets.write_text(json.dumps({"partitions": [{"topic": topic, "partition": 0, "offset": 3},
                                                  {"topic": topic, "partition": 7, "offset": 1}],
                                   "version": 1}))
    done = strom("delete-records", "--bootstrap-server", node.bootstrap, "--offset-json-file", str(offsets))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[:3] == ["Executing records delete operation", "Records delete operation completed:",
                         f"partition: {topic}-0\tlow_watermark: 3"]
    assert lines[3].startswith(f"partition: {topic}-7\terror: ")
    earliest = strom("get-offsets", "--bootstrap-server", node.bootstrap, "--topic", topic,
                     "--time", "earliest")
    assert earliest.stdout == f"{topic}:0:3\n"


def test_delete_records_refuses_duplicate_partitions_naming_them(node, tmp_path):
    offsets = tmp_path / "dup.json"
    offsets.write_text('{"partitions": [{"topic": "a", "partition": 0, "offset": 1},'
                       ' {"topic": "a", "partition": 0, "offset": 2}], "version": 1}')
    done = strom("delete-records", "--bootstrap-server", node.bootstrap, "--offset-json-file", str(offsets))
    assert done.returncode == 1
    assert "Offset json file contains duplicate topic partitions: a-0" in done.stderr


def test_log_dirs_describe_prints_kafkas_json_for_each_broker(node):
    done = strom("log-dirs", "--describe", "--bootstrap-server", node.bootstrap, "--topic-list", TOPIC)
    assert done.returncode == 0, done.stderr
    head, received, text = done.stdout.splitlines()
    assert head == "Querying brokers for log directories information"
    assert received == "Received log directory information from brokers 1"
    assert text.startswith('{"brokers":[{"broker":1,"logDirs":[{"partitions":[{"partition":"orders-0",'
                           '"size":')
    doc = json.loads(text)
    assert list(doc) == ["brokers", "version"] and doc["version"] == 1
    (log_dir,) = doc["brokers"][0]["logDirs"]
    assert list(log_dir) == ["partitions", "error", "logDir"]
    assert log_dir["error"] is None and os.path.samefile(log_dir["logDir"], node.log_dir)
    assert [p["partition"] for p in log_dir["partitions"]] == ["orders-0", "orders-1"]
    assert all(list(p) == ["partition", "size", "offsetLag", "isFuture"] and p["size"] > 0
               and p["offsetLag"] == 0 and p["isFuture"] is False for p in log_dir["partitions"])
    missing = strom("log-dirs", "--describe", "--bootstrap-server", node.bootstrap, "--broker-list", "1,9")
    assert missing.returncode == 1
    assert missing.stderr.strip() == ("ERROR: The given brokers do not exist from --broker-list: 9. "
                                      "Current existent brokers: 1")


def test_features_describe_prints_supported_and_finalized_levels(node):
    done = strom("features", "--bootstrap-server", node.bootstrap, "describe")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert [line.split("\t")[0] for line in lines] == [
        "Feature: eligible.leader.replicas.version", "Feature: group.version", "Feature: kraft.version",
        "Feature: metadata.version", "Feature: transaction.version"]
    assert re.fullmatch(r"Feature: group.version\tSupportedMinVersion: 0\tSupportedMaxVersion: 1\t"
                        r"FinalizedVersionLevel: 1\tEpoch: \d+", lines[1]), lines[1]
    # kraft.version from the metadata log the broker follows (a --standalone node: dynamic, 1)
    assert re.fullmatch(r"Feature: kraft.version\tSupportedMinVersion: 0\tSupportedMaxVersion: 1\t"
                        r"FinalizedVersionLevel: 1\tEpoch: \d+", lines[2]), lines[2]
    assert re.fullmatch(r"Feature: metadata.version\tSupportedMinVersion: 3.0-IV1\tSupportedMaxVersion: "
                        r"4.0-IV3\tFinalizedVersionLevel: 4.0-IV\d\tEpoch: \d+", lines[3]), lines[3]



def test_features_upgrade_and_downgrade_change_the_finalized_levels_as_kafka_features(node, capsys):
    from strom.cli import main

    def features(*args: str) -> tuple[int, str]:
        rc = main(["features", *args])
        return rc, capsys.readouterr().out

    refused = strom("features", "--bootstrap-server", node.bootstrap, "upgrade", "--feature",
                    "transaction.version=3", "--feature", "metadata.version=25", "--dry-run")
    assert refused.returncode == 1
    assert refused.stdout.splitlines() == [
        "Can not upgrade metadata.version to 25. The update failed for all features since the following "
        "feature had an error: Invalid update version 3 for feature transaction.version. Local controller 1 "
        "only supports versions 0-2",
        "Can not upgrade transaction.version to 3. The update failed for all features since the following "
        "feature had an error: Invalid update version 3 for feature transaction.version. Local controller 1 "
        "only supports versions 0-2"]
    assert refused.stderr == "2 out of 2 operation(s) failed.\n"
    assert features("--bootstrap-server", node.bootstrap, "downgrade", "--metadata", "4.0-IV2") == (
        0, " `metadata` flag is deprecated and may be removed in a future release.\n"
           "metadata.version was downgraded to 24.\n")
    rc, described = features("--bootstrap-server", node.bootstrap, "describe")
    assert "Feature: metadata.version\tSupportedMinVersion: 3.0-IV1\tSupportedMaxVersion: 4.0-IV3\t" \
           "FinalizedVersionLevel: 4.0-IV2\t" in described
    assert features("--bootstrap-controller", f"127.0.0.1:{node.controller_port}", "upgrade",
                    "--release-version", "4.0-IV3") == (
        0, "eligible.leader.replicas.version was upgraded to 1.\ngroup.version was upgraded to 1.\n"
           "metadata.version was upgraded to 25.\ntransaction.version was upgraded to 2.\n")

def test_topics_alter_adds_partitions_and_describe_reports_filter_as_kafka_topics(node, capsys):
    from strom.cli import main

    def topics(*args: str) -> tuple[int, str]:
        rc = main(["topics", "--bootstrap-server", node.bootstrap, *args])
        return rc, capsys.readouterr().out

    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    admin.create_topics([NewTopic("grown", 1, 1, config={"retention.ms": "60000"})])["grown"].result(30)
    grown = strom("topics", "--alter", "--bootstrap-server", node.bootstrap, "--topic", "grown",
                  "--partitions", "3", "--replica-assignment", "1,1,1")
    assert (grown.returncode, grown.stdout) == (0, ""), grown.stderr
    rc, out = topics("--alter", "--topic", "grown", "--partitions", "2")
    assert rc == 1 and out.startswith("Error while executing topic command : ") and " 3 partition" in out
    assert topics("--create", "--topic", "grown", "--if-not-exists") == (0, "")
    rc, out = topics("--describe", "--topics-with-overrides", "--exclude-internal")
    assert rc == 0 and [line.split("\t")[0] for line in out.splitlines()] == ["Topic: grown"]
    assert "\tPartitionCount: 3\tReplicationFactor: 1\tConfigs: retention.ms=60000" in out
    assert topics("--describe", "--under-replicated-partitions", "--unavailable-partitions") == (0, "")

def _table(text: str) -> list[list[str]]:
    """kafka-transactions' table: every cell padded to its column and followed by a tab."""
    lines = text.splitlines()
    assert all(line.endswith("\t") for line in lines), lines
    rows = [line.split("\t")[:-1] for line in lines]
    for column in range(len(rows[0])):
        widths = {len(row[column]) for row in rows}
        assert len(widths) == 1, (column, rows)
    return [[cell.strip() for cell in row] for row in rows]


def test_transactions_list_describe_and_abort_an_open_transaction(node):
    # The transaction times out long after the test ends: only the abort command ends it here (a
    # coordinator's timeout abort would write a second marker after the command's).
    producer = Producer({"bootstrap.servers": node.bootstrap, "transactional.id": "payments",
                         "transaction.timeout.ms": 900000})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(TOPIC, b"pending", partition=1)
    assert producer.flush(30) == 0

    listed = _table(strom("transactions", "--bootstrap-server", node.bootstrap, "list").stdout)
    assert listed[0] == ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]
    (row,) = [r for r in listed[1:] if r[0] == "payments"]
    assert row[1] == "1" and row[3] == "Ongoing"
    producer_id = row[2]

    described = _table(strom("transactions", "--bootstrap-server", node.bootstrap, "describe",
                             "--transactional-id", "payments").stdout)
    assert described[0] == ["CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch",
                            "TransactionState", "TransactionTimeoutMs", "CurrentTransactionStartTimeMs",
                            "TransactionDurationMs", "TopicPartitions"]
    assert described[1][:3] == ["1", "payments", producer_id]
    assert described[1][4] == "Ongoing" and described[1][8] == "orders-1"

    producers = _table(strom("transactions", "--bootstrap-server", node.bootstrap, "describe-producers",
                             "--topic", TOPIC, "--partition", "1").stdout)
    assert producers[0] == ["ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence",
                            "LastTimestamp", "CurrentTransactionStartOffset"]
    (open_txn,) = [r for r in producers[1:] if r[0] == producer_id]
    assert open_txn[5] == "2"  # the partition held offsets 0 and 1 before the transaction

    # not hanging: its coordinator knows it as ongoing with orders-1
    hanging = strom("transactions", "--bootstrap-server", node.bootstrap, "find-hanging", "--broker-id", "1",
                    "--max-transaction-timeout", "0")
    assert hanging.returncode == 0, hanging.stderr
    assert _table(hanging.stdout)[1:] == []

    aborted = strom("transactions", "--bootstrap-server", node.bootstrap, "abort", "--topic", TOPIC,
                    "--partition", "1", "--start-offset", "2")
    assert aborted.returncode == 0, aborted.stderr
    after = _table(strom("transactions", "--bootstrap-server", node.bootstrap, "describe-producers",
                         "--topic", TOPIC, "--partition", "1").stdout)
    assert [r[5] for r in after[1:] if r[0] == producer_id] == ["None"]
    # the abort marker ends the open transaction: the last stable offset moves past it
    latest = strom("get-offsets", "--bootstrap-server", node.bootstrap, "--topic", TOPIC, "--partitions", "1")
    assert latest.stdout == "orders:1:4\n"
    none = strom("transactions", "--bootstrap-server", node.bootstrap, "abort", "--topic", TOPIC,
                 "--partition", "1", "--start-offset", "2")
    assert none.returncode == 1
    assert "Could not find any open transactions starting at offset 2 on partition orders-1" in none.stderr


def test_dump_log_prints_each_file_of_a_partition_by_its_type(node):
    directory = os.path.join(node.log_dir, f"{TOPIC}-0")
    done = strom("dump-log", directory)
    assert done.returncode == 0, done.stderr
    dumped = [line.split("/")[-1] for line in done.stdout.splitlines() if line.startswith("Dumping ")]
    assert "00000000000000000000.log" in dumped and "00000000000000000000.timeindex" in dumped
    assert "00000000000000000000.index" in dumped
    assert re.search(r"^baseOffset: 0 lastOffset: \d+ count: \d+ .* isvalid: true$", done.stdout,
                     flags=re.MULTILINE)
    assert re.search(r"^offset: \d+ position: \d+$", done.stdout, flags=re.MULTILINE)
    assert re.search(r"^timestamp: \d+ offset: \d+$", done.stdout, flags=re.MULTILINE)
    state = strom("dump-log", os.path.join(node.log_dir, "__cluster_metadata-0", "quorum-state"))
    assert state.returncode == 0, state.stderr
    assert json.loads(state.stdout.splitlines()[1])["leaderId"] == 1


def test_dump_log_decodes_the_metadata_log_and_its_snapshot_as_cluster_metadata(node):
    """kafka-dump-log --cluster-metadata-decoder: each metadata record's payload as JSON with its
    type, version and data, and a snapshot's control records."""
    directory = os.path.join(node.log_dir, "__cluster_metadata-0")
    done = strom("dump-log", "--cluster-metadata-decoder", directory)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    payloads = [json.loads(line.split(" payload: ", 1)[1]) for line in lines if " payload: " in line]
    topic_ids = [p["data"]["topicId"] for p in payloads
                 if p["type"] == "TOPIC_RECORD" and p["data"]["name"] == TOPIC]
    assert len(topic_ids) == 1 and len(topic_ids[0]) == 22  # Kafka's Uuid.toString
    partitions = [p["data"] for p in payloads if p["type"] == "PARTITION_RECORD"]
    assert sorted(p["partitionId"] for p in partitions if p["topicId"] == topic_ids[0]) == [0, 1]
    assert any(p["type"] == "REGISTER_BROKER_RECORD" and p["data"]["brokerId"] == 1 for p in payloads)
    assert "Log starting offset: 0" in lines
    assert "Snapshot end offset: 0, epoch: 0" in lines  # the bootstrap checkpoint strom format writes
    assert any(re.search(r' KRaftVoters \{"version":0,"voters":\[\{"voterId":1,', line) for line in lines)
    assert any(line.endswith(' SnapshotFooter {"version":0}') for line in lines)
    assert "strom dump-log --cluster-metadata-decoder" in strom("dump-log", "--help").stdout


def test_quorum_through_a_broker_describes_what_the_controller_describes(node):
    """A broker forwards DescribeQuorum to the active controller, as Kafka 4's brokers do."""
    controller = f"127.0.0.1:{node.controller_port}"
    through_broker = strom("quorum", "--bootstrap-server", node.bootstrap, "describe", "--status")
    assert through_broker.returncode == 0, through_broker.stderr
    direct = strom("quorum", "--bootstrap-controller", controller, "describe", "--status")
    assert direct.returncode == 0, direct.stderr

    def fields(text):
        return dict(line.split(":", 1) for line in text.splitlines())

    broker_view, controller_view = fields(through_broker.stdout), fields(direct.stdout)
    assert broker_view["ClusterId"].strip() not in ("", "unknown")
    for key in ("ClusterId", "LeaderId", "CurrentVoters"):
        assert broker_view[key] == controller_view[key], key
    replication = strom("quorum", "--bootstrap-server", node.bootstrap, "describe", "--replication")
    assert replication.returncode == 0, replication.stderr
    assert replication.stdout.splitlines()[1].split()[-1] == "Leader"


def test_removing_an_unknown_controller_through_a_broker_is_refused_by_the_quorum(node):
    """RemoveRaftVoter is forwarded too: the controller's answer comes back through the broker."""
    done = strom("quorum", "--bootstrap-server", node.bootstrap, "remove-controller", "--controller-id", "42",
                 "--controller-directory-id", "MvDxzVmcRsaTz33bUuRU6A")
    assert done.returncode != 0
    assert "VOTER_NOT_FOUND" in done.stderr or "INVALID_REQUEST" in done.stderr, done.stderr


def test_cluster_unregister_of_an_unknown_broker_is_broker_id_not_registered(node):
    """UnregisterBroker goes through the broker to the controller, whose refusal comes back."""
    done = strom("cluster", "unregister", "--bootstrap-server", node.bootstrap, "--id", "42")
    assert done.returncode == 1 and done.stdout == ""
    assert "BROKER_ID_NOT_REGISTERED: Broker ID 42 is not currently registered" in done.stderr, done.stderr
    missing = strom("cluster", "unregister", "--bootstrap-server", node.bootstrap)
    assert missing.returncode == 1 and "--id is required" in missing.stderr


@pytest.mark.slow
def test_a_replica_moved_between_log_dirs_survives_a_kill_9_mid_copy_and_loses_nothing(tmp_path):
    """kafka-reassign-partitions with log_dirs and --replica-alter-log-dirs-throttle on a node with
    two log dirs: --verify reports the move in progress, a kill -9 during the copy leaves the
    current log serving, the move resumes after the restart and completes, and every record
    acknowledged before the move is read back."""
    from confluent_kafka import Consumer

    from .cluster import StromNode

    first, second = str(tmp_path / "data"), str(tmp_path / "data2")
    node = StromNode(str(tmp_path), extra={"log.dirs": f"{first},{second}"}).start()
    try:
        admin = AdminClient({"bootstrap.servers": node.bootstrap})
        admin.create_topics([NewTopic("moving", 1, 1)])["moving"].result(30)
        producer = Producer({"bootstrap.servers": node.bootstrap, "acks": "all", "linger.ms": 5})
        for i in range(3000):
            producer.produce("moving", b"%06d" % i + b"x" * 1000)
        assert producer.flush(60) == 0
        source = first if os.path.isdir(os.path.join(first, "moving-0")) else second
        target = second if source == first else first
        plan = tmp_path / "plan.json"
        plan.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": "moving", "partition": 0, "replicas": [1], "log_dirs": [target]}]}))
        out = strom("reassign-partitions", "--bootstrap-server", node.bootstrap, "--execute",
                    "--reassignment-json-file", str(plan), "--replica-alter-log-dirs-throttle", "300000")
        assert out.returncode == 0, out.stderr
        assert "The replica-alter-dir throttle limit was set to 300000 B/s" in out.stdout
        assert f"Successfully started moving log directory to {target} for replica moving-0 with broker 1 " \
            in out.stdout
        verify = strom("reassign-partitions", "--bootstrap-server", node.bootstrap, "--verify",
                       "--reassignment-json-file", str(plan))
        assert "Reassignment of replica moving-0-1 is still in progress." in verify.stdout, verify.stdout
        node.restart(kill=True)
        assert os.path.isdir(os.path.join(source, "moving-0"))
        for _ in range(120):
            verify = strom("reassign-partitions", "--bootstrap-server", node.bootstrap, "--verify",
                           "--reassignment-json-file", str(plan))
            if "Reassignment of replica moving-0-1 completed successfully." in verify.stdout:
                break
            subprocess.run(["sleep", "0.5"])
        assert "Reassignment of replica moving-0-1 completed successfully." in verify.stdout, verify.stdout
        assert os.path.isdir(os.path.join(target, "moving-0"))
        assert not os.path.exists(os.path.join(source, "moving-0"))
        consumer = Consumer({"bootstrap.servers": node.bootstrap, "group.id": "mover-check",
                             "auto.offset.reset": "earliest"})
        consumer.subscribe(["moving"])
        seen = set()
        for _ in range(120):
            for msg in consumer.consume(1000, 0.5):
                if msg.error() is None:
                    seen.add(int(msg.value()[:6]))
            if len(seen) == 3000:
                break
        consumer.close()
        assert seen == set(range(3000))
    finally:
        node.close()
