"""Each admin command's output, from its formatting functions with fixed inputs, against the text
Kafka's tool prints for the same inputs. The expected text is worked out from the tool's source
(the class and method named in each test), not from strom's code: same headers, column order,
padding, tabs, messages and blank lines. No network, no process."""
from __future__ import annotations

import argparse
import asyncio
from types import SimpleNamespace as NS

import pytest

from metadata.security import ALLOW, LITERAL, READ, TOPIC
from protocol.errors import Error
from strom import acls, consumer_groups, delete_records, features, get_offsets, topics
from strom.admin_client import pretty_table
from strom.kafka_errors import exception_text
from strom.transactions import DESCRIBE_HEADERS, HANGING_HEADERS, LIST_HEADERS, PRODUCERS_HEADERS

TOPIC_ID = bytes(range(16))  # Uuid.toString: url-safe base64 without padding
TOPIC_ID_TEXT = "AAECAwQFBgcICQoLDA0ODw"


def _partition(index: int, leader: int, replicas: list[int], isr: list[int],
               elr: list[int] | None = None, last_known_elr: list[int] | None = None) -> NS:
    return NS(partition_index=index, leader_id=leader, replica_nodes=replicas, isr_nodes=isr,
              eligible_leader_replicas=elr, last_known_elr=last_known_elr)


# ---- kafka-topics ------------------------------------------------------------------------------

def test_topics_describe_prints_topic_id_configs_leader_none_and_elr_as_topic_command():
    """TopicCommand.TopicDescription.printDescription (TopicId unless zero, Configs of the
    non-default entries joined by ','), PartitionDescription.printDescription (partitions by id,
    Leader 'none' without one, Elr/LastKnownElr from DescribeTopicPartitions, N/A when absent)."""
    text = topics.format_topic(
        "orders", TOPIC_ID,
        [_partition(1, -1, [2, 3, 1], [], [], []), _partition(0, 1, [1, 2, 3], [1, 2, 3], [2], [])],
        [("cleanup.policy", "compact"), ("retention.ms", "86400000")])
    assert text == (
        f"Topic: orders\tTopicId: {TOPIC_ID_TEXT}\tPartitionCount: 2\tReplicationFactor: 3\t"
        "Configs: cleanup.policy=compact,retention.ms=86400000\n"
        "\tTopic: orders\tPartition: 0\tLeader: 1\tReplicas: 1,2,3\tIsr: 1,2,3\tElr: 2\tLastKnownElr: \n"
        "\tTopic: orders\tPartition: 1\tLeader: none\tReplicas: 2,3,1\tIsr: \tElr: \tLastKnownElr: ")


def test_topics_describe_leaves_out_a_zero_topic_id_and_shows_elr_na_without_it():
    """TopicDescription.printDescription skips TopicId for Uuid.ZERO_UUID; 'Configs: ' stays with
    none set; PartitionDescription prints 'Elr: N/A' when the description has no ELR (Metadata)."""
    text = topics.format_topic("t", bytes(16), [_partition(0, 1, [1], [1])], [])
    assert text == ("Topic: t\tPartitionCount: 1\tReplicationFactor: 1\tConfigs: \n"
                    "\tTopic: t\tPartition: 0\tLeader: 1\tReplicas: 1\tIsr: 1\tElr: N/A\tLastKnownElr: N/A")


# ---- kafka-features ----------------------------------------------------------------------------

def test_features_describe_is_one_tab_separated_line_per_feature_sorted_by_name():
    """FeatureCommand.handleDescribe: printf("Feature: %s\\tSupportedMinVersion: %s\\t
    SupportedMaxVersion: %s\\tFinalizedVersionLevel: %s\\tEpoch: %s%n"), features sorted,
    levelToString (metadata.version as its release name), 0 when not finalized, '-' with no epoch."""
    answer = NS(
        supported_features=[NS(name="transaction.version", min_version=0, max_version=2),
                            NS(name="metadata.version", min_version=1, max_version=25)],
        finalized_features=[NS(name="metadata.version", max_version_level=25)],
        finalized_features_epoch=12)
    assert features.format_features(answer) == (
        "Feature: metadata.version\tSupportedMinVersion: 3.0-IV1\tSupportedMaxVersion: 4.0-IV3\t"
        "FinalizedVersionLevel: 4.0-IV3\tEpoch: 12\n"
        "Feature: transaction.version\tSupportedMinVersion: 0\tSupportedMaxVersion: 2\t"
        "FinalizedVersionLevel: 0\tEpoch: 12")
    answer.finalized_features_epoch = -1
    answer.supported_features = [NS(name="metadata.version", min_version=1, max_version=99)]
    assert features.format_features(answer) == (
        "Feature: metadata.version\tSupportedMinVersion: 3.0-IV1\tSupportedMaxVersion: UNKNOWN 99\t"
        "FinalizedVersionLevel: 4.0-IV3\tEpoch: -")


# ---- kafka-delete-records ----------------------------------------------------------------------

def test_delete_records_report_prints_each_low_watermark_or_the_exceptions_message():
    """DeleteRecordsCommand.execute: 'Executing records delete operation', 'Records delete
    operation completed:', then printf("partition: %s\\tlow_watermark: %s%n") or
    printf("partition: %s\\terror: %s%n", tp, e.getMessage()): an ExecutionException's message is
    its cause's class and message (Errors' default message for the code)."""
    offsets = {("orders", 0): 100, ("orders", 7): 1}
    results = {("orders", 0): "low_watermark: 100",
               ("orders", 7): "error: " + exception_text(Error.UNKNOWN_TOPIC_OR_PARTITION)}
    assert delete_records.format_results(offsets, results) == (
        "Executing records delete operation\n"
        "Records delete operation completed:\n"
        "partition: orders-0\tlow_watermark: 100\n"
        "partition: orders-7\terror: org.apache.kafka.common.errors.UnknownTopicOrPartitionException: "
        "This server does not host this topic-partition.")


@pytest.mark.parametrize("text, message", [
    ("not json", "The input string is not a valid JSON"),
    ('{"version": 2, "partitions": []}', "Not supported version field value 2"),
    ('{"version": 1}', "Missing partitions field"),
    ('{"partitions": [{"topic": "a", "partition": 0, "offset": 1},'
     ' {"topic": "a", "partition": 0, "offset": 2}]}',
     "Offset json file contains duplicate topic partitions: a-0"),
])
def test_delete_records_refuses_a_bad_offset_file_with_kafkas_message(text, message):
    """DeleteRecordsCommand.parseOffsetJsonStringWithoutDedup and parseJsonData's
    AdminOperationException messages, and execute's AdminCommandFailedException for duplicates."""
    with pytest.raises(delete_records.OffsetFileError) as e:
        delete_records.parse_offset_json(text)
    assert str(e.value) == message


# ---- kafka-get-offsets -------------------------------------------------------------------------

def test_get_offsets_prints_topic_partition_offset_ordered_by_the_partitions_name():
    """GetOffsetShell.execute: String.join(":", topic, partition, offset) per entry of a TreeMap
    ordered by TopicPartition.toString ('orders-10' before 'orders-2')."""
    offsets = {("orders", 2): 5, ("orders", 10): 7, ("alpha", 0): 0}
    assert get_offsets.format_offsets(offsets) == "alpha:0:0\norders:10:7\norders:2:5"


def test_get_offsets_messages_are_get_offset_shells():
    """GetOffsetShell.parseOffsetSpec's, createTopicPartitionFilter's, parsePartitions' and
    parseRuleSpec's TerseException messages, and fetchOffsets' skip line on stderr."""
    with pytest.raises(get_offsets.UsageError) as e:
        get_offsets.parse_time("yesterday")
    assert str(e.value) == ("Malformed time argument yesterday. Please use -1 or latest / -2 or earliest / "
                            "-3 or max-timestamp / -4 or earliest-local / -5 or latest-tiered, or a "
                            "specified long format timestamp")
    args = argparse.Namespace(topic=None, partitions="1,x", topic_partitions=None)
    with pytest.raises(get_offsets.UsageError) as e:
        get_offsets.filters(args)
    assert str(e.value) == ("--partitions expects a comma separated list of numeric partition ids, but "
                            "received: 1,x")
    args = argparse.Namespace(topic="t", partitions=None, topic_partitions="t:0")
    with pytest.raises(get_offsets.UsageError) as e:
        get_offsets.filters(args)
    assert str(e.value) == "--topic-partitions cannot be used with --topic or --partitions"
    args = argparse.Namespace(topic=None, partitions=None, topic_partitions="orders:x")
    with pytest.raises(get_offsets.UsageError) as e:
        get_offsets.filters(args)
    assert str(e.value) == "Invalid rule specification: orders:x"
    assert get_offsets.skip_text("orders", 3, Error.LEADER_NOT_AVAILABLE) == (
        "Skip getting offsets for topic-partition orders-3 due to error: "
        "org.apache.kafka.common.errors.LeaderNotAvailableException: There is no leader for this "
        "topic-partition as we are in the middle of a leadership election.")


# ---- kafka-consumer-groups ---------------------------------------------------------------------

def test_consumer_groups_describe_offsets_pads_as_print_offset_format():
    """ConsumerGroupCommand.printOffsets with printOffsetFormat: "\\n%-Gs %-Ts %-10s %-15s %-15s %-15s
    %-Cs %-Hs %s" (G, T, C, H at least 15), '-' for a missing value, then println."""
    rows = [("billing", "orders", 0, 10, 12, 2, "consumer-1-0c5a2a9c", "/127.0.0.1", "consumer-1"),
            ("billing", "orders", 1, None, 5, None, None, None, None)]
    assert consumer_groups.offsets_table(rows) == (
        "\nGROUP           TOPIC           PARTITION  CURRENT-OFFSET  LOG-END-OFFSET  LAG             "
        "CONSUMER-ID         HOST            CLIENT-ID"
        "\nbilling         orders          0          10              12              2               "
        "consumer-1-0c5a2a9c /127.0.0.1      consumer-1"
        "\nbilling         orders          1          -               5               -               "
        "-                   -               -"
        "\n")


def test_consumer_groups_members_pads_as_print_members():
    """ConsumerGroupCommand.printMembers: "\\n" + format1 header (no GROUP-INSTANCE-ID column when no
    member has one), 'ASSIGNMENT' with --verbose, println; each row "%-Gs %-Cs %-Hs %-Is %-15s "
    then its partitions per topic as "(0,1)" sorted, joined by ", "."""
    rows = [("g", "c-1", "", "/10.0.0.1", "app", 3, {"a": [1, 0], "b": [2]})]
    assert consumer_groups.members_table(rows, verbose=True) == (
        "\nGROUP           CONSUMER-ID     HOST            CLIENT-ID       #PARTITIONS     ASSIGNMENT\n"
        "g               c-1             /10.0.0.1       app             3               (0,1), (2)\n")
    rows = [("g", "c-1", "static-1", "/10.0.0.1", "app", 0, {})]
    assert consumer_groups.members_table(rows, verbose=False) == (
        "\nGROUP           CONSUMER-ID     GROUP-INSTANCE-ID HOST            CLIENT-ID       "
        "#PARTITIONS     \n"
        "g               c-1             static-1          /10.0.0.1       app             "
        "0               \n")


def test_consumer_groups_state_list_and_reset_tables_pad_as_kafka():
    """ConsumerGroupCommand.printStates ("\\n%-Ks %-25s %-20s %-15s %s", K = max(25, the
    coordinator's length), GROUP in that first column), printGroupInfo ("%-(G+10)s" then " %-20s"
    per TYPE/STATE) and printOffsetsToReset ("%n%-30s %-30s %-10s %-15s")."""
    assert consumer_groups.state_table("g", "127.0.0.1:9092  (1)", "range", "Stable", 2) == (
        "\nGROUP                     COORDINATOR (ID)          ASSIGNMENT-STRATEGY  STATE           #MEMBERS"
        "\ng                         127.0.0.1:9092  (1)       range                Stable          2\n")
    assert consumer_groups.list_table([("billing", "Classic", "Stable")], True, True) == (
        "GROUP                     TYPE                 STATE               \n"
        "billing                   Classic              Stable              \n")
    assert consumer_groups.reset_table({"g": {("orders", 0): 5}}) == (
        "\nGROUP                          TOPIC                          PARTITION  NEW-OFFSET     "
        "\ng                              orders                         0          5              \n")
    assert consumer_groups.reset_table({}) == "\n"


# ---- kafka-transactions ------------------------------------------------------------------------

def test_transactions_tables_are_tools_utils_pretty_print_table():
    """TransactionsCommand's HEADERS of list, describe, describe-producers and find-hanging, printed
    by ToolsUtils.prettyPrintTable: each cell padded to its column's widest, then a tab."""
    assert LIST_HEADERS == ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]
    assert DESCRIBE_HEADERS == ["CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch",
                                "TransactionState", "TransactionTimeoutMs", "CurrentTransactionStartTimeMs",
                                "TransactionDurationMs", "TopicPartitions"]
    assert PRODUCERS_HEADERS == ["ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence",
                                 "LastTimestamp", "CurrentTransactionStartOffset"]
    assert HANGING_HEADERS == ["Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch",
                               "StartOffset", "LastTimestamp", "Duration(min)"]
    assert pretty_table(LIST_HEADERS, [["payments-transactional-id", "1", "4000", "Ongoing"]]) == (
        "TransactionalId          \tCoordinator\tProducerId\tTransactionState\t\n"
        "payments-transactional-id\t1          \t4000      \tOngoing         \t")


# ---- kafka-acls --------------------------------------------------------------------------------

def test_acls_blocks_are_acl_commands_with_resource_pattern_and_entry_to_string():
    """AclCommand.addAcls / printResourceAcls: s"<title> `$resource`: $Newline
    ${acls.map("\\t" + _).mkString(Newline)} $Newline" with ResourcePattern.toString and
    AccessControlEntryData.toString."""
    resource = (TOPIC, "orders", LITERAL)
    entry = ("User:alice", "*", READ, ALLOW)
    assert acls.block("Current ACLs for resource", resource, {entry}) == (
        "Current ACLs for resource "
        "`ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)`: \n"
        " \t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW) \n")


# ---- errors ------------------------------------------------------------------------------------

def test_an_errors_text_is_the_admin_clients_exception_class_and_message():
    """What ExecutionException.getMessage() gives for Errors.exception(): the cause's class name
    and Errors' default message (or the broker's message when it sent one)."""
    assert exception_text(Error.OFFSET_OUT_OF_RANGE) == (
        "org.apache.kafka.common.errors.OffsetOutOfRangeException: The requested offset is not within "
        "the range of offsets maintained by the server.")
    assert exception_text(Error.POLICY_VIOLATION, "no deletes here") == (
        "org.apache.kafka.common.errors.PolicyViolationException: no deletes here")


def test_topics_takes_kafka_topics_action_flags_and_refuses_two_actions(capsys):
    """TopicCommandOptions.checkArgs: exactly one of the actions (--list, --describe, --create,
    --delete), given as kafka-topics' flags or strom's word."""
    from strom.cli import main

    assert main(["topics", "list", "--describe", "--bootstrap-server", "127.0.0.1:1"]) == 1
    assert "Command must include exactly one action: --list, --describe, --create, --alter or --delete" in (
        capsys.readouterr().err)
    assert main(["topics", "--bootstrap-server", "127.0.0.1:1"]) == 1
    assert "Command must include exactly one action" in capsys.readouterr().err


def test_transactions_errors_are_print_error_and_exits():
    """TransactionsCommand.printErrorAndExit(message, cause): "<message>: <cause's message>. Enable
    debug logging for additional detail." (the cause's message: the broker's, else Errors', whose
    own full stop makes two), and
    FindHangingTransactionsCommand's usage messages."""
    from strom import transactions

    e = transactions.failure("Failed to describe transaction state of transactional-id `payments`",
                             Error.TRANSACTIONAL_ID_NOT_FOUND)
    assert str(e) == ("Failed to describe transaction state of transactional-id `payments`: The "
                      "transactionalId could not be found.. Enable debug logging for additional detail.")
    e = transactions.failure("Failed to list transactions", Error.COORDINATOR_LOAD_IN_PROGRESS)
    assert str(e) == ("Failed to list transactions: The coordinator is loading and hence can't process "
                      "requests.. Enable debug logging for additional detail.")
    usage = [(dict(broker_id=None, topic=None, partition=None),
              "The `find-hanging` command requires either --topic or --broker-id to limit the scope of "
              "the search"),
             (dict(broker_id=1, topic=None, partition=0),
              "The --partition argument requires --topic to be provided")]
    for fields, message in usage:
        with pytest.raises(transactions.UsageError) as raised:
            asyncio.run(transactions.find_hanging(None, argparse.Namespace(**fields), 0))  # type: ignore[arg-type]
        assert str(raised.value) == message


def test_topics_topic_option_is_an_include_list_as_topic_filter():
    """TopicFilter.IncludeList: --topic is a regular expression matching whole names, ',' read as
    '|', spaces and surrounding quotes dropped; a bad one is '<regex> is an invalid regex.'."""
    assert topics.include_list("orders").fullmatch("orders")
    assert not topics.include_list("orders").fullmatch("orders-dlq")
    assert topics.include_list("'orders, payments'").fullmatch("payments")
    assert topics.include_list("ord.*").fullmatch("orders")
    with pytest.raises(topics.TopicError) as e:
        topics.include_list("(")
    assert e.value.tool_message == "( is an invalid regex."


def test_an_errors_class_is_the_admin_clients_exception_class():
    """LogDirsCommand prints a log dir's error as error().getClass().getName(); LeaderElectionCommand
    a failed partition's as the Throwable's toString (class and message)."""
    from strom.kafka_errors import exception_class

    package = "org.apache.kafka.common.errors."
    assert exception_class(Error.KAFKA_STORAGE_ERROR) == package + "KafkaStorageException"
    assert exception_class(Error.LOG_DIR_NOT_FOUND) == package + "LogDirNotFoundException"
    assert exception_text(Error.PREFERRED_LEADER_NOT_AVAILABLE) == (
        "org.apache.kafka.common.errors.PreferredLeaderNotAvailableException: The preferred leader was not "
        "available.")


# ---- kafka-reassign-partitions and kafka-leader-election ----------------------------------------

class _Cluster:
    """The answers of a cluster of brokers 1-3 with one partition of topic t (Metadata and
    ListPartitionReassignments, as strom/reassign.py's Admin gives them)."""

    async def cluster(self):
        return [1, 2, 3], {("t", 0): [1, 2]}

    async def ongoing(self):
        return {("t", 0): ([1, 2, 3], [3], [])}


def _reassign_args(tmp_path, **options) -> NS:
    fields = dict(bootstrap_server="127.0.0.1:1", command_config=None, generate=False, execute=False,
                  verify=False, cancel=False, list=False, topics_to_move_json_file=None, broker_list=None,
                  reassignment_json_file=None, throttle=-1, replica_alter_log_dirs_throttle=-1,
                  timeout=10000, additional=False, preserve_throttles=False)
    for name, value in options.items():
        if name.endswith("_json_file"):
            path = tmp_path / f"{name}.json"
            path.write_text(value)
            value = str(path)
        fields[name] = value
    return NS(**fields)


def test_reassign_partitions_errors_are_printed_as_reassign_partitions_command(tmp_path, capsys):
    """ReassignPartitionsCommand.main: a TerseException's message alone, any other failure as
    'Error: ' and its message (an admin call's: ExecutionException's, the exception class and
    message), on stdout, exit 1; the duplicates as Java prints a set."""
    from strom import reassign

    topics_file = '{"version":1,"topics":[{"topic":"b"},{"topic":"a"},{"topic":"b"},{"topic":"a"}]}'
    args = _reassign_args(tmp_path, generate=True, topics_to_move_json_file=topics_file, broker_list="1,2")
    assert reassign.run_reassign(args, None) == 1
    assert capsys.readouterr().out == "Error: List of topics to reassign contains duplicate entries: [a, b]\n"
    args = _reassign_args(tmp_path, generate=True, topics_to_move_json_file='{"topics":[{"topic":"t"}]}',
                          broker_list="2,1,2,1")
    assert reassign.run_reassign(args, None) == 1
    assert capsys.readouterr().out == "Error: Broker list contains duplicate entries: [1, 2]\n"

    with pytest.raises(Exception) as missing:
        asyncio.run(reassign.generate(_Cluster(), ["u"], [1, 2], None))  # type: ignore[arg-type]
    assert reassign.failure_text(missing.value) == (
        "Error: org.apache.kafka.common.errors.UnknownTopicOrPartitionException: Topic u not found.")
    with pytest.raises(Exception) as existing:
        asyncio.run(reassign.execute(_Cluster(), {("t", 0): [2, 3]}, -1, False, print))  # type: ignore[arg-type]
    assert reassign.failure_text(existing.value) == (
        "Cannot execute because there is an existing partition assignment.  Use --additional to override "
        "this and create a new partition assignment in addition to the existing one.")


def test_leader_elections_failed_partition_is_the_exceptions_to_string():
    from strom import reassign

    failure = (Error.PREFERRED_LEADER_NOT_AVAILABLE, None)
    text, failed = reassign.election_text("PREFERRED", {("t", 0): failure})
    assert failed == 1
    assert text == ("Error completing leader election (PREFERRED) for partition: t-0: "
                    "org.apache.kafka.common.errors.PreferredLeaderNotAvailableException: The preferred "
                    "leader was not available.")


def test_log_dirs_error_is_the_exceptions_class_name():
    """LogDirsCommand: a log dir's error as error().getClass().getName()."""
    from strom import log_dirs

    result = NS(error_code=Error.LOG_DIR_NOT_FOUND, topics=[], log_dir="/gone")
    assert log_dirs.log_dir_json(result, set()) == {
        "partitions": [], "error": "org.apache.kafka.common.errors.LogDirNotFoundException",
        "logDir": "/gone"}


def test_acls_failure_is_printed_as_acl_command_on_stdout(capsys):
    """AclCommand.main: 'Error while executing ACL command: ' and the failure's message on stdout,
    exit 1; a refusal's message is the admin client's exception class and message."""
    from strom.cli import main

    assert main(["acls", "--bootstrap-server", "127.0.0.1:1", "--list"]) == 1
    printed = capsys.readouterr()
    assert printed.out.startswith("Error while executing ACL command: ") and printed.err == ""
    assert str(acls._failed(Error.SECURITY_DISABLED, None)) == (
        "org.apache.kafka.common.errors.SecurityDisabledException: Security features are disabled.")
