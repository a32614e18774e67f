"""raft/records.py: log entries <-> record batches, checked against kafka-python's reader."""
import struct

import pytest

from ext.batch import build_batch, iter_batches
from protocol.metadata_records import CONTROL_KRAFT_VERSION, CONTROL_LEADER_CHANGE, CONTROL_VOTERS
from raft.log import Entry, LeaderChange
from raft.records import (
    SnapshotFooter,
    SnapshotHeader,
    build_batches,
    build_control_record,
    decode_entries,
    parse_control_record,
)
from raft.voters import Endpoint, KRaftVersion, Voter, VoterSet, static_voter_set

VOTERS = VoterSet.of([
    Voter(1, bytes(range(16)), (Endpoint("CONTROLLER", "node-1", 9093), Endpoint("EXTERNAL", "h", 19093))),
    Voter(2, None, (Endpoint("CONTROLLER", "node-2", 9094),), 0, 0),
    Voter(3, b"\xff" * 16, (), 1, 1),
])

ENTRIES = [
    Entry(10, 3, LeaderChange(1, (1, 2, 3))),
    Entry(11, 3, b"first"),
    Entry(12, 3, b""),
    Entry(13, 3, b"\x01\x00" * 100),
    Entry(14, 3, KRaftVersion(1)),
    Entry(15, 3, VOTERS),
    Entry(16, 3, b"after"),
    Entry(17, 5, LeaderChange(2, (1, 2, 3))),
    Entry(18, 5, VOTERS.removing(3)),
    Entry(19, 5, KRaftVersion(0)),
    Entry(20, 6, b"x"),
]


@pytest.mark.parametrize("value", [
    LeaderChange(7, (1, 2, 7)), LeaderChange(1, ()), KRaftVersion(0), KRaftVersion(1), VOTERS,
    VoterSet(()), static_voter_set({1: ("a", 1), 2: ("b", 2)}), SnapshotHeader(1_700_000_000_000),
    SnapshotHeader(0), SnapshotFooter(),
], ids=repr)
def test_every_control_value_round_trips(value):
    assert parse_control_record(*build_control_record(value)) == value


def test_entries_round_trip_through_batches_with_their_offsets_and_epochs():
    batches = build_batches(ENTRIES, 1234)
    assert decode_entries(b"".join(batches)) == ENTRIES
    headers = [h for b in batches for h in iter_batches(b)]
    # [LC] [3 data] [KRaftVersion + Voters] [data] | [LC] [Voters] [KRaftVersion] | [data]
    assert [(h.base_offset, h.records_count, h.is_control) for h in headers] == [
        (10, 1, True), (11, 3, False), (14, 2, True), (16, 1, False),
        (17, 1, True), (18, 1, True), (19, 1, True), (20, 1, False)]
    assert [h.partition_leader_epoch for h in headers] == [3, 3, 3, 3, 5, 5, 5, 6]
    assert {h.max_timestamp for h in headers} == {1234}


def test_a_gap_in_offsets_starts_a_new_batch():
    entries = [Entry(0, 1, b"a"), Entry(1, 1, b"b"), Entry(5, 1, b"c")]
    assert [h.base_offset for b in build_batches(entries, 0) for h in iter_batches(b)] == [0, 5]
    assert decode_entries(b"".join(build_batches(entries, 0))) == entries


def test_data_batches_split_at_max_batch_bytes():
    entries = [Entry(i, 1, bytes(100)) for i in range(10)]
    batches = build_batches(entries, 0, max_batch_bytes=250)
    assert [h.records_count for b in batches for h in iter_batches(b)] == [2, 2, 2, 2, 2]
    assert decode_entries(b"".join(batches)) == entries


def test_a_truncated_trailing_batch_is_skipped():
    data = b"".join(build_batches(ENTRIES, 0))
    last = len(build_batches(ENTRIES[-1:], 0)[0])
    for cut in (1, 11, 12, 40, last - 1):
        assert decode_entries(data[:-cut]) == ENTRIES[:-1]
    assert decode_entries(memoryview(data)[:5]) == []


def test_a_corrupt_batch_and_foreign_control_records_raise():
    data = bytearray(b"".join(build_batches(ENTRIES[:2], 0)))
    data[-1] ^= 0xFF
    with pytest.raises(ValueError):
        decode_entries(bytes(data))
    with pytest.raises(ValueError, match="SnapshotHeader"):
        decode_entries(build_batch([(*build_control_record(SnapshotHeader(0)), (), 0)], is_control=True))
    with pytest.raises(TypeError):
        build_batches([Entry(0, 1, "a str")], 0)


def test_leader_change_v1_from_kafka_decodes_without_directory_ids():
    # LeaderChangeMessage v1 (kraft.version 1 leaders in Kafka 4): voters carry directory ids.
    from protocol import messages
    msg = messages.LeaderChangeMessage
    v1 = msg(version=1, leader_id=2, voters=[msg.Voter(voter_id=2, voter_directory_id=b"\x01" * 16)],
             granting_voters=[])
    key = build_control_record(LeaderChange(0, ()))[0]
    value = messages.DATA["LeaderChangeMessage"].encode(1, v1)
    assert parse_control_record(key, value) == LeaderChange(2, (2,))


# ---- kafka-python: an independent reader of record batches -------------------------------------

def _uvarint(buf, pos):
    value = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7


def _parse_voters_record(buf):
    """VotersRecord v0 by hand from the KIP-853 schema (flexible: compact arrays and strings,
    tagged fields after every struct)."""
    pos = 0
    (version,) = struct.unpack_from(">h", buf, pos)
    pos += 2
    n, pos = _uvarint(buf, pos)
    voters = []
    for _ in range(n - 1):
        voter_id, = struct.unpack_from(">i", buf, pos)
        directory_id = bytes(buf[pos + 4:pos + 20])
        pos += 20
        m, pos = _uvarint(buf, pos)
        endpoints = []
        for _ in range(m - 1):
            strings = []
            for _ in range(2):
                length, pos = _uvarint(buf, pos)
                strings.append(bytes(buf[pos:pos + length - 1]).decode())
                pos += length - 1
            port, = struct.unpack_from(">H", buf, pos)
            pos += 2
            tags, pos = _uvarint(buf, pos)
            assert tags == 0
            endpoints.append((*strings, port))
        lo, hi = struct.unpack_from(">hh", buf, pos)
        pos += 4
        for _ in range(2):  # kraft_version_feature's tagged fields, then the voter's
            tags, pos = _uvarint(buf, pos)
            assert tags == 0
        voters.append((voter_id, directory_id, endpoints, lo, hi))
    tags, pos = _uvarint(buf, pos)
    assert tags == 0 and pos == len(buf)
    return version, voters


def test_kafka_python_reads_our_control_batches_as_control_records():
    default_records = pytest.importorskip("kafka.record.default_records")
    batches = build_batches(ENTRIES[:7], 99)
    control = [default_records.DefaultRecordBatch(b) for b in batches]
    control = [kb for kb in control if kb.is_control_batch]
    assert len(control) == 2
    leader_change, = list(control[0])
    assert (leader_change.offset, leader_change.type, leader_change.version) == (10, CONTROL_LEADER_CHANGE, 0)
    # LeaderChangeMessage v0 (flexible): version, leader_id, then voters and granting_voters as
    # compact arrays of (voter_id, no tagged fields), then no tagged fields.
    voters_array = bytes([4]) + b"".join(struct.pack(">i", i) + b"\x00" for i in (1, 2, 3))
    assert leader_change.value == struct.pack(">hi", 0, 1) + voters_array + voters_array + b"\x00"
    assert control[1].validate_crc()
    kraft_version, voters = list(control[1])
    assert (kraft_version.offset, kraft_version.type) == (14, CONTROL_KRAFT_VERSION)
    assert kraft_version.value == struct.pack(">hh", 0, 1) + b"\x00"
    assert (voters.offset, voters.type, control[1].leader_epoch) == (15, CONTROL_VOTERS, 3)
    version, parsed = _parse_voters_record(voters.value)
    assert version == 0
    assert parsed == [
        (1, bytes(range(16)), [("CONTROLLER", "node-1", 9093), ("EXTERNAL", "h", 19093)], 0, 1),
        (2, bytes(16), [("CONTROLLER", "node-2", 9094)], 0, 0),
        (3, b"\xff" * 16, [], 1, 1),
    ]


def test_kafka_python_reads_our_data_batches():
    default_records = pytest.importorskip("kafka.record.default_records")
    batch, = build_batches(ENTRIES[1:4], 5)
    kb = default_records.DefaultRecordBatch(batch)
    assert not kb.is_control_batch and kb.validate_crc() and kb.leader_epoch == 3
    assert [(r.offset, r.key, r.value, r.timestamp) for r in kb] == [
        (e.offset, None, e.value, 5) for e in ENTRIES[1:4]]
