"""strom dump-log's metadata decoder and the JSON it writes, against kafka-dump-log's layout and
Kafka's generated JsonConverters."""
from __future__ import annotations

import json
import re
import uuid

from engine.control import CONTROL_COMMIT, build_end_txn_marker_batch
from ext.batch import build_batch
from protocol import messages
from protocol.json_writer import java_double, to_json, uuid_string
from protocol.metadata_records import encode_record
from raft.engine_log import write_bootstrap_snapshot
from raft.log import Entry, LeaderChange
from raft.records import build_batches
from raft.voters import Endpoint, Voter, VoterSet
from strom.dump_log import Options, dump_log, metadata_record_type_name

TOPIC_ID = uuid.UUID("12345678-1234-5678-1234-567812345678").bytes
DIRECTORY_ID = uuid.UUID("00000000-0000-0000-0000-0000000000aa").bytes
NOW = 1_700_000_000_000


def _metadata_segment(tmp_path) -> str:
    topic = messages.TopicRecord(name="orders", topic_id=TOPIC_ID)
    change = messages.PartitionChangeRecord(partition_id=0, topic_id=TOPIC_ID, isr=[1, 2])
    entries = [Entry(0, 1, LeaderChange(1, (1,))), Entry(1, 1, encode_record(topic)),
               Entry(2, 1, encode_record(change, 0))]
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(b"".join(build_batches(entries, NOW)))
    return str(path)


def _lines(capsys) -> list[str]:
    return capsys.readouterr().out.splitlines()


def test_metadata_record_json_names_fields_in_camel_case_in_schema_order():
    record = messages.PartitionRecord(partition_id=3, topic_id=TOPIC_ID, replicas=[1, 2], isr=[1],
                                      leader=1, leader_epoch=4, partition_epoch=5, directories=[])
    written = to_json(messages.DATA["PartitionRecord"], 1, record)
    assert written == ('{"partitionId":3,"topicId":"EjRWeBI0VngSNFZ4EjRWeA","replicas":[1,2],"isr":[1],'
                       '"removingReplicas":[],"addingReplicas":[],"leader":1,"leaderEpoch":4,'
                       '"partitionEpoch":5,"directories":[]}')


def test_tagged_fields_are_written_only_when_not_their_default():
    codec = messages.DATA["PartitionChangeRecord"]
    same = messages.PartitionChangeRecord(partition_id=0, topic_id=TOPIC_ID)
    unchanged = json.loads(to_json(codec, 0, same))
    assert unchanged == {"partitionId": 0, "topicId": "EjRWeBI0VngSNFZ4EjRWeA"}
    moved = json.loads(to_json(codec, 0, messages.PartitionChangeRecord(partition_id=0, topic_id=TOPIC_ID,
                                                                          leader=2, isr=[2])))
    assert list(moved) == ["partitionId", "topicId", "isr", "leader"]


def test_values_are_written_as_kafkas_json_nodes_write_them():
    assert uuid_string(TOPIC_ID) == "EjRWeBI0VngSNFZ4EjRWeA"  # Uuid.toString: URL-safe base64
    assert [java_double(v) for v in (1.0, 1048576.0, 1e7, 0.5, 1.5e-4, -2.5e10)] == \
        ["1.0", "1048576.0", "1.0E7", "0.5", "1.5E-4", "-2.5E10"]
    scram = messages.UserScramCredentialRecord(name="alice", mechanism=1, salt=b"\xff\xfe", stored_key=b"k",
                                               server_key=b"", iterations=4096)
    data = json.loads(to_json(messages.DATA["UserScramCredentialRecord"], 0, scram))
    assert data["salt"] == "//4=" and data["storedKey"] == "aw==" and data["serverKey"] == ""


def test_record_type_names_are_kafkas_metadata_record_type_constants():
    assert [metadata_record_type_name(n) for n in
            ("TopicRecord", "ZkMigrationStateRecord", "NoOpRecord", "RegisterBrokerRecord")] == \
        ["TOPIC_RECORD", "ZK_MIGRATION_STATE_RECORD", "NO_OP_RECORD", "REGISTER_BROKER_RECORD"]


def test_cluster_metadata_decoder_prints_each_record_with_its_payload(tmp_path, capsys):
    path = _metadata_segment(tmp_path)
    assert dump_log([path], Options(cluster_metadata_decoder=True)) == 0
    lines = _lines(capsys)
    assert lines[:2] == [f"Dumping {path}", "Log starting offset: 0"]
    assert re.fullmatch(r"baseOffset: 0 lastOffset: 0 count: 1 baseSequence: -1 lastSequence: -1 "
                        r"producerId: -1 producerEpoch: -1 partitionLeaderEpoch: 1 isTransactional: false "
                        r"isControl: true "
                        r"deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: \d+ size: \d+ magic: 2 "
                        r"compresscodec: none crc: \d+ isvalid: true", lines[2])
    assert lines[3] == (f"| offset: 0 CreateTime: {NOW} keySize: 4 valueSize: 19 sequence: -1 headerKeys: [] "
                        "controlType: LEADER_CHANGE(2)")
    assert lines[5] == (f"| offset: 1 CreateTime: {NOW} keySize: -1 valueSize: 27 sequence: -1 "
                        'headerKeys: [] payload: {"type":"TOPIC_RECORD","version":0,"data":{"name":"orders",'
                        '"topicId":"EjRWeBI0VngSNFZ4EjRWeA"}}')
    assert lines[6].endswith('payload: {"type":"PARTITION_CHANGE_RECORD","version":0,"data":{"partitionId":0,'
                             '"topicId":"EjRWeBI0VngSNFZ4EjRWeA","isr":[1,2]}}')


def test_skip_record_metadata_leaves_only_the_payloads(tmp_path, capsys):
    path = _metadata_segment(tmp_path)
    dump_log([path], Options(cluster_metadata_decoder=True, skip_record_metadata=True))
    records = [line for line in _lines(capsys)[2:] if not line.startswith("baseOffset:")]
    assert records[0] == ""  # the control record: nothing of it without its metadata
    assert records[1].startswith(' payload: {"type":"TOPIC_RECORD"')


def test_a_record_that_is_no_metadata_record_is_reported_and_skipped(tmp_path, capsys):
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(build_batch([(None, b"\x07\x02\x00", (), NOW)]))
    dump_log([str(path)], Options(cluster_metadata_decoder=True))
    assert _lines(capsys)[-1].endswith(
        "payload: Error at 0, skipping. unknown metadata record frame version 7")


def test_a_snapshot_dumps_its_end_offset_and_control_records(tmp_path, capsys):
    voters = VoterSet.of([Voter(1, DIRECTORY_ID, (Endpoint("CONTROLLER", "localhost", 9093),), 0, 1)])
    path = write_bootstrap_snapshot(str(tmp_path), voters, 1)
    dump_log([path], Options(cluster_metadata_decoder=True))
    out = _lines(capsys)
    assert out[1] == "Snapshot end offset: 0, epoch: 0"
    records = [line for line in out if line.startswith("| ")]
    assert re.search(r' SnapshotHeader \{"version":0,"lastContainedLogTimestamp":\d+\}$', records[0])
    assert records[1].endswith(' KRaftVersion {"version":0,"kRaftVersion":1}')
    assert records[2].endswith(
        ' KRaftVoters {"version":0,"voters":[{"voterId":1,"voterDirectoryId":"AAAAAAAAAAAAAAAAAAAAqg",'
        '"endpoints":[{"name":"CONTROLLER","host":"localhost","port":9093}],'
        '"kRaftVersionFeature":{"minSupportedVersion":0,"maxSupportedVersion":1}}]}')
    assert records[3].endswith(' SnapshotFooter {"version":0}')


def test_without_a_decoder_a_segment_prints_keys_and_payloads_as_text(tmp_path, capsys):
    path = tmp_path / "00000000000000000005.log"
    records = [(b"k", b"hello", (("h", b"v"),), NOW), (None, b"x", (), NOW)]
    path.write_bytes(build_batch(records, base_offset=5, producer_id=7, producer_epoch=0, base_sequence=10)
                     + build_end_txn_marker_batch(CONTROL_COMMIT, 7, 0, 3, NOW, base_offset=7))
    dump_log([str(path)], Options(print_data_log=True))
    out = _lines(capsys)
    assert out[1] == "Log starting offset: 5"
    assert out[3] == (f"| offset: 5 CreateTime: {NOW} keySize: 1 valueSize: 5 sequence: 10 headerKeys: [h] "
                      "key: k payload: hello")
    assert out[4] == (f"| offset: 6 CreateTime: {NOW} keySize: -1 valueSize: 1 sequence: 11 headerKeys: [] "
                      "payload: x")
    assert out[6].endswith("sequence: -1 headerKeys: [] endTxnMarker: COMMIT coordinatorEpoch: 3")
