"""The __consumer_offsets records: byte-exact against hand-derived layouts, round trips,
partitioning as Java computes it, and loading after a restart."""
import struct

import pytest

from broker.groups import storage as S
from broker.groups.coordinator import GroupCoordinator
from engine.log import ORIGIN_COORDINATOR, Log
from ext.batch import decode_records
from protocol import messages as M
from protocol.java_hash import java_string_hash
from tests.groups.scenario import Scenario


def _str(s: str) -> bytes:
    return struct.pack(">h", len(s)) + s.encode()


# ---- partitioning --------------------------------------------------------------------------

def test_java_string_hash():
    assert java_string_hash("") == 0
    assert java_string_hash("a") == 97
    assert java_string_hash("abc") == 96354  # 97*31^2 + 98*31 + 99
    assert java_string_hash("polygenelubricants") == -(2**31)  # Integer.MIN_VALUE
    assert java_string_hash("\U0001F600") == 0xD83D * 31 + 0xDE00  # UTF-16 surrogates
    assert java_string_hash("my-group") == -1906497762


def test_partition_for_uses_kafkas_utils_abs():
    assert S.partition_for("abc", 50) == 96354 % 50
    assert S.partition_for("my-group", 50) == 1906497762 % 50  # abs, not & 0x7fffffff (which gives 36)
    assert S.partition_for("polygenelubricants", 50) == 0  # Utils.abs(MIN_VALUE) == 0


# ---- keys and values -----------------------------------------------------------------------

def test_offset_commit_key_bytes():
    assert S.offset_commit_key("g", "t", 3) == b"\x00\x01" + _str("g") + _str("t") + b"\x00\x00\x00\x03"


def test_offset_commit_value_v3_bytes():
    value = S.offset_commit_value(offset=42, leader_epoch=5, metadata="md", commit_timestamp=1000)
    assert value == (b"\x00\x03" + struct.pack(">q", 42) + struct.pack(">i", 5) + _str("md")
                     + struct.pack(">q", 1000))


def test_offset_commit_value_with_expire_timestamp_is_v1():
    value = S.offset_commit_value(offset=42, leader_epoch=5, metadata="", commit_timestamp=1000,
                                  expire_timestamp=2000)
    assert value == b"\x00\x01" + struct.pack(">q", 42) + _str("") + struct.pack(">qq", 1000, 2000)


def test_group_metadata_key_bytes():
    assert S.group_metadata_key("grp") == b"\x00\x02" + _str("grp")


def test_group_metadata_value_v3_bytes():
    V = M.GroupMetadataValue
    value = V(protocol_type="consumer", generation=7, protocol="range", leader="m1",
              current_state_timestamp=99, members=[V.MemberMetadata(
                  member_id="m1", group_instance_id=None, client_id="c", client_host="/h",
                  rebalance_timeout=300000, session_timeout=45000, subscription=b"SUB", assignment=b"AS")])
    expected = (b"\x00\x03" + _str("consumer") + struct.pack(">i", 7) + _str("range") + _str("m1")
                + struct.pack(">q", 99) + struct.pack(">i", 1)
                + _str("m1") + b"\xff\xff" + _str("c") + _str("/h") + struct.pack(">ii", 300000, 45000)
                + struct.pack(">i", 3) + b"SUB" + struct.pack(">i", 2) + b"AS")
    assert S.group_metadata_value(value) == expected
    version, key = S.parse_key(S.group_metadata_key("grp"))
    assert (version, key.group) == (2, "grp")
    assert S.parse_value(2, expected) == value


def test_empty_group_value_has_null_protocol_and_leader():
    value = M.GroupMetadataValue(protocol_type="consumer", generation=2, protocol=None, leader=None,
                                 current_state_timestamp=5, members=[])
    data = S.group_metadata_value(value)
    assert data == b"\x00\x03" + _str("consumer") + struct.pack(">i", 2) + b"\xff\xff\xff\xff" + \
        struct.pack(">q", 5) + struct.pack(">i", 0)


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_offset_commit_value_round_trips_in_every_version(version):
    codec = M.DATA["OffsetCommitValue"]
    v = M.OffsetCommitValue(offset=9, leader_epoch=3 if version >= 3 else -1, metadata="x",
                            commit_timestamp=8, expire_timestamp=7 if version == 1 else -1)
    data = struct.pack(">h", version) + codec.encode(version, v)
    assert S.parse_value(1, data) == v


def test_key_version_0_is_an_offset_commit_too():
    data = b"\x00\x00" + _str("g") + _str("t") + b"\x00\x00\x00\x01"
    version, key = S.parse_key(data)
    assert (version, key.group, key.topic, key.partition) == (0, "g", "t", 1)
    with pytest.raises(ValueError):
        S.parse_key(b"\x00\x05" + _str("g"))


# ---- replay --------------------------------------------------------------------------------

def test_replay_latest_value_wins_and_tombstones_delete():
    state = S.GroupState()
    state.replay(S.offset_commit_key("g", "t", 0), S.offset_commit_value(1, -1, "", 0), -1, 0)
    state.replay(S.offset_commit_key("g", "t", 0), S.offset_commit_value(2, -1, "", 0), -1, 1)
    state.replay(S.offset_commit_key("g", "t", 1), S.offset_commit_value(3, -1, "", 0), -1, 2)
    state.replay(S.offset_commit_key("g", "t", 1), None, -1, 3)
    state.replay(S.offset_commit_key("h", "t", 0), S.offset_commit_value(4, -1, "", 0), -1, 4)
    state.replay(S.offset_commit_key("h", "t", 0), None, -1, 5)
    offsets = {g: {tp: om.offset for tp, om in o.items()} for g, o in state.offsets.items()}
    assert offsets == {"g": {("t", 0): 2}}


def _append_all(log, scenario):
    for _, records in scenario.appended:
        log.append_as_leader(S.build_records_batch(records, 1), 0, origin=ORIGIN_COORDINATOR)


def test_coordinator_records_load_after_restart(tmp_path):
    """A group and offsets written by the coordinator, the log closed and reopened, then
    replayed: the offsets, the Stable group, its members and assignments come back."""
    s = Scenario()
    leader, follower = s.stable_group(2)
    assert s.commit([("t", 0, 10), ("t", 1, 20)], generation=1, member_id=leader) == [0, 0]
    assert s.commit([("t", 0, 15)], generation=1, member_id=leader) == [0]
    s.commit([("x", 0, 1)], group="gone")
    s.run(s.core.delete_groups(["gone"], s.now)[1])
    s.commit([("t", 0, 3)], group="simple")
    directory = str(tmp_path / "__consumer_offsets-0")
    log = Log(directory)
    _append_all(log, s)
    first = bytes(log.read(0, 1 << 20).records.read())
    assert decode_records(first)[0].key == s.appended[0][1][0][0]  # stored as appended
    log.close()

    log = Log(directory)  # the restart
    state = S.load_partition(log, chunk_bytes=100)  # small chunks: several reads
    core = GroupCoordinator()
    core.num_partitions = 1
    core.complete_load(0, state, now_ms=1000)
    assert {tp: om.offset for tp, om in core.offsets["g"].items()} == {("t", 0): 15, ("t", 1): 20}
    assert "gone" not in core.offsets and "gone" not in core.groups
    group = core.groups["g"]
    assert (group.state, group.generation_id, group.leader_id, group.protocol_name) == \
        ("Stable", 1, leader, "range")
    assert {m: x.assignment for m, x in group.members.items()} == {leader: leader.encode(),
                                                                   follower: follower.encode()}
    assert core.groups["simple"].state == "Empty"
    assert core.list_groups([]) == [("g", "consumer", "Stable"), ("simple", "", "Empty")]
    log.close()


def test_loaded_members_heartbeat_with_their_generation_and_expire_without():
    s = Scenario()
    leader, follower = s.stable_group(2)
    state = s.replayed()
    t = Scenario()
    t.core.complete_load(0, state, now_ms=0)
    assert t.heartbeat(leader, 1) == 0
    t.advance(5000)
    assert t.heartbeat(leader, 1) == 0
    t.advance(5000)  # the follower never came back
    assert list(t.core.groups["g"].members) == [leader] and t.state() == "PreparingRebalance"
