"""raft/engine_log.py: one RaftLog contract run against MemoryRaftLog and EngineRaftLog, then what
only the segment log has (reopening, hard kills, snapshot files)."""
import os
import signal
import subprocess
import sys

import pytest

from engine.config import LogConfig
from ext.batch import read_header
from raft.engine_log import METADATA_LOG_CONFIG, EngineRaftLog, snapshot_file_name, write_bootstrap_snapshot
from raft.log import Entry, LeaderChange, MemoryRaftLog, OffsetAndEpoch, Snapshot
from raft.voters import Endpoint, KRaftVersion, Voter, VoterSet

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VOTERS = VoterSet.of([Voter(1, b"\x01" * 16, (Endpoint("CONTROLLER", "node-1", 9093),)),
                      Voter(2, b"\x02" * 16, (Endpoint("CONTROLLER", "node-2", 9093),))])
SMALL_SEGMENTS = LogConfig(segment_bytes=300, retention_ms=-1, max_message_bytes=1 << 20,
                           file_delete_delay_ms=0)


def entries(epochs, start=0, tag=b"v"):
    """One entry per element of ``epochs``, from offset ``start``; a LeaderChange opens each epoch."""
    out, last = [], None
    for i, epoch in enumerate(epochs, start):
        value = LeaderChange(1, (1, 2)) if epoch != last else tag + b"%d" % i
        out.append(Entry(i, epoch, value))
        last = epoch
    return out


@pytest.fixture(params=["memory", "engine"])
def new_log(request, tmp_path):
    """A factory of fresh logs of one kind."""
    count = iter(range(100))

    def make():
        if request.param == "memory":
            return MemoryRaftLog()
        log = EngineRaftLog(str(tmp_path / f"{next(count)}" / "__cluster_metadata-0"))
        request.addfinalizer(log.close)
        return log

    return make


# ---- the contract -------------------------------------------------------------------------------

class TestRaftLogContract:
    def test_an_empty_log(self, new_log):
        log = new_log()
        assert log.end_offset() == OffsetAndEpoch(0, 0)
        assert log.end_offset_for_epoch(0) == OffsetAndEpoch(0, 0)
        assert log.end_offset_for_epoch(7) == OffsetAndEpoch(0, 0)
        assert log.read(0, 10) == [] and log.high_watermark == 0 and log.log_start_offset == 0
        assert log.latest_snapshot_id() is None

    def test_append_and_read_across_epochs_and_batches(self, new_log):
        log = new_log()
        es = entries([1, 1, 1, 3, 3, 4, 4, 4, 4])
        log.append(es[:2])
        log.append(es[2:3])
        log.append(es[3:8])
        log.append(es[8:] + [Entry(9, 4, KRaftVersion(1)), Entry(10, 4, VOTERS), Entry(11, 4, b"")])
        es += [Entry(9, 4, KRaftVersion(1)), Entry(10, 4, VOTERS), Entry(11, 4, b"")]
        assert log.end_offset() == OffsetAndEpoch(12, 4)
        assert log.read(0, 100) == es
        for start in range(13):
            for n in (0, 1, 2, 5):
                assert log.read(start, n) == es[start:start + n], (start, n)
        assert log.read(50, 5) == []

    def test_end_offset_for_epoch_is_the_leader_epoch_cache(self, new_log):
        log = new_log()
        log.append(entries([1, 1, 3, 3, 3, 6]))
        expected = {0: (0, 0), 1: (2, 1), 2: (2, 1), 3: (5, 3), 4: (5, 3), 5: (5, 3), 6: (6, 6), 9: (6, 6)}
        for epoch, (offset, found) in expected.items():
            assert log.end_offset_for_epoch(epoch) == OffsetAndEpoch(offset, found), epoch

    def test_an_entry_of_epoch_0_is_in_the_cache(self, new_log):
        log = new_log()
        log.append([Entry(0, 0, b"a"), Entry(1, 2, b"b")])
        assert log.end_offset_for_epoch(0) == OffsetAndEpoch(1, 0)
        assert log.end_offset_for_epoch(1) == OffsetAndEpoch(1, 0)

    def test_append_checks_offsets_and_epochs(self, new_log):
        log = new_log()
        log.append(entries([2, 2]))
        with pytest.raises(ValueError):
            log.append([Entry(3, 2, b"gap")])
        with pytest.raises(ValueError):
            log.append([Entry(1, 2, b"overlap")])
        with pytest.raises(ValueError):
            log.append([Entry(2, 1, b"older epoch")])
        assert log.end_offset() == OffsetAndEpoch(2, 2)
        log.append([])
        assert log.read(0, 10) == entries([2, 2])

    def test_truncate_inside_a_batch_keeps_exactly_the_prefix(self, new_log):
        log = new_log()
        es = entries([1, 1, 1, 1, 1, 2, 2, 2])
        log.append(es[:5])
        log.append(es[5:])
        log.flush()
        log.truncate_to(3)
        assert log.end_offset() == OffsetAndEpoch(3, 1) and log.read(0, 10) == es[:3]
        assert log.end_offset_for_epoch(2) == OffsetAndEpoch(3, 1)
        log.append(entries([5, 5], start=3, tag=b"new"))
        assert log.read(0, 10) == es[:3] + entries([5, 5], start=3, tag=b"new")
        assert log.end_offset_for_epoch(1) == OffsetAndEpoch(3, 1)
        assert log.end_offset_for_epoch(4) == OffsetAndEpoch(3, 1)
        assert log.end_offset_for_epoch(5) == OffsetAndEpoch(5, 5)

    def test_truncate_at_an_epoch_boundary_and_past_the_end(self, new_log):
        log = new_log()
        log.append(entries([1, 1, 2, 2, 3]))
        log.truncate_to(9)
        assert log.end_offset() == OffsetAndEpoch(5, 3)
        log.truncate_to(2)
        assert log.end_offset() == OffsetAndEpoch(2, 1)
        assert log.end_offset_for_epoch(3) == OffsetAndEpoch(2, 1)
        log.truncate_to(0)
        assert log.end_offset() == OffsetAndEpoch(0, 0) and log.read(0, 5) == []
        log.append(entries([4]))
        assert log.end_offset() == OffsetAndEpoch(1, 4)

    def test_high_watermark_rules(self, new_log):
        log = new_log()
        log.append(entries([1, 1, 1, 1]))
        with pytest.raises(ValueError):
            log.update_high_watermark(5)  # above the log end offset
        log.update_high_watermark(3)
        log.update_high_watermark(3)
        assert log.high_watermark == 3
        with pytest.raises(ValueError):
            log.update_high_watermark(2)  # never back
        with pytest.raises(ValueError):
            log.truncate_to(2)  # never below the high watermark
        log.truncate_to(3)
        assert log.end_offset() == OffsetAndEpoch(3, 1) and log.high_watermark == 3

    def test_snapshot_create_read_and_delete_before(self, new_log):
        log = new_log()
        log.append(entries([1, 1, 1, 2, 2, 2, 2]))
        log.update_high_watermark(5)
        with pytest.raises(ValueError):
            log.create_snapshot(Snapshot(OffsetAndEpoch(6, 2), 1, VOTERS, []))  # above the HW
        first = Snapshot(OffsetAndEpoch(2, 1), 0, None, [b"s1"])
        second = Snapshot(OffsetAndEpoch(5, 2), 1, VOTERS, [b"s2", b"", b"s2'"])
        log.create_snapshot(first)
        log.create_snapshot(second)
        assert log.latest_snapshot_id() == second.snapshot_id
        assert log.read_snapshot(first.snapshot_id) == first
        assert log.read_snapshot(second.snapshot_id) == second
        log.delete_before_snapshot(second.snapshot_id)
        assert log.snapshot_size(first.snapshot_id) is None and log.snapshot_size(second.snapshot_id) > 0
        assert log.log_start_offset == 5 and log.read(4, 5) == [] and log.read(5, 5) == entries([2] * 7)[5:]
        assert log.end_offset_for_epoch(2) == OffsetAndEpoch(7, 2)
        assert log.end_offset_for_epoch(1) == OffsetAndEpoch(-1, -1)  # below the snapshot: nothing

    def test_a_snapshot_copied_in_chunks_replaces_the_log(self, new_log):
        leader, follower = new_log(), new_log()
        leader.append(entries([1, 1, 3, 3, 3, 3]))
        leader.update_high_watermark(5)
        snapshot = Snapshot(OffsetAndEpoch(5, 3), 1, VOTERS, [b"k%d" % i * 10 for i in range(40)])
        leader.create_snapshot(snapshot)
        follower.append(entries([1, 2, 2]))  # diverging and behind
        size = leader.snapshot_size(snapshot.snapshot_id)
        position = 0
        while position < size:
            chunk = leader.read_snapshot_chunk(snapshot.snapshot_id, position, 97)
            follower.write_snapshot_chunk(snapshot.snapshot_id, position, chunk)
            position += len(chunk)
        with pytest.raises(ValueError):
            follower.write_snapshot_chunk(snapshot.snapshot_id, 3, b"x")  # not at the end
        follower.complete_snapshot(snapshot.snapshot_id)
        assert follower.latest_snapshot_id() == snapshot.snapshot_id
        assert follower.read_snapshot(snapshot.snapshot_id) == snapshot
        assert follower.log_start_offset == 5 and follower.high_watermark == 5
        assert follower.end_offset() == OffsetAndEpoch(5, 3)
        assert follower.end_offset_for_epoch(3) == OffsetAndEpoch(5, 3)
        assert follower.read(0, 10) == [] and follower.read(5, 10) == []
        follower.append(entries([4, 4], start=5))
        assert follower.end_offset_for_epoch(3) == OffsetAndEpoch(5, 3)
        assert follower.end_offset_for_epoch(4) == OffsetAndEpoch(7, 4)
        follower.truncate_to(5)
        assert follower.end_offset() == OffsetAndEpoch(5, 3)


# ---- EngineRaftLog only ---------------------------------------------------------------------------

def first_batch(data):
    """The first batch of a file, read by kafka-python."""
    default_records = pytest.importorskip("kafka.record.default_records")
    return default_records.DefaultRecordBatch(data[:read_header(data).size])


@pytest.fixture
def partition_dir(tmp_path):
    return str(tmp_path / "__cluster_metadata-0")


def test_reopen_keeps_entries_epochs_and_the_log_start(partition_dir):
    log = EngineRaftLog(partition_dir, SMALL_SEGMENTS)
    es = entries([1, 1, 2, 2, 2, 5, 5, 5, 5, 5] * 3)
    es = [Entry(i, e.epoch if i < 10 else 5 + i // 10, e.value) for i, e in enumerate(es)]
    for i in range(0, 30, 3):
        log.append(es[i:i + 3])
    log.update_high_watermark(20)
    log.create_snapshot(Snapshot(OffsetAndEpoch(12, 6), 1, VOTERS, [b"state"]))
    log.delete_before_snapshot(OffsetAndEpoch(12, 6))
    assert len(log.log.segments) > 1 and log.log.segments[0].base_offset > 0  # whole segments went
    answers = [log.end_offset_for_epoch(e) for e in range(10)]
    log.close()
    log = EngineRaftLog(partition_dir, SMALL_SEGMENTS)
    assert log.read(0, 100) == [] and log.read(12, 100) == es[12:]
    assert log.end_offset() == OffsetAndEpoch(30, 7) and log.log_start_offset == 12
    assert [log.end_offset_for_epoch(e) for e in range(10)] == answers
    assert log.high_watermark == 12  # a snapshot is committed; the rest waits for the leader
    log.close()


CHILD = """
import sys
from raft.engine_log import EngineRaftLog
from raft.log import Entry
log = EngineRaftLog(sys.argv[1])
for i in range(0, 200, 4):
    log.append([Entry(j, 1 + j // 50, b"value %d" % j) for j in range(i, i + 4)])
log.flush()
print("flushed", flush=True)
i = 200
while True:
    log.append([Entry(i, 9, b"value %d" % i)])
    i += 1
"""


@pytest.mark.processes
def test_a_hard_kill_keeps_every_flushed_entry(partition_dir):
    child = subprocess.Popen([sys.executable, "-c", CHILD, partition_dir], cwd=REPO, stdout=subprocess.PIPE)
    try:
        assert child.stdout.readline() == b"flushed\n"
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    log = EngineRaftLog(partition_dir)
    read = log.read(0, 1_000_000)
    assert len(read) >= 200
    assert read[:200] == [Entry(j, 1 + j // 50, b"value %d" % j) for j in range(200)]
    assert read[200:] == [Entry(j, 9, b"value %d" % j) for j in range(200, len(read))]
    assert log.end_offset_for_epoch(2) == OffsetAndEpoch(100, 2)
    log.close()


def test_snapshot_files_and_their_names(partition_dir):
    log = EngineRaftLog(partition_dir)
    log.append(entries([1, 1, 1]))
    log.update_high_watermark(3)
    snapshot = Snapshot(OffsetAndEpoch(3, 1), 0, None, [b"a"])
    log.create_snapshot(snapshot)
    log.close()
    name = "00000000000000000003-0000000001.checkpoint"
    assert snapshot_file_name(snapshot.snapshot_id) == name
    assert os.path.exists(os.path.join(partition_dir, name))
    with open(os.path.join(partition_dir, name), "rb") as f:
        data = f.read()
    first = first_batch(data)
    assert first.is_control_batch and first.leader_epoch == 1 and first.base_offset == 0
    assert first.validate_crc() and [r.type for r in first] == [3]  # kraft.version 0: header alone


def test_stray_partial_snapshots_go_and_a_snapshot_ahead_of_the_log_replaces_it(partition_dir, tmp_path):
    source = EngineRaftLog(str(tmp_path / "source" / "__cluster_metadata-0"))
    source.append(entries([1] * 5 + [4] * 15))
    source.update_high_watermark(20)
    snapshot_id = OffsetAndEpoch(20, 4)
    source.create_snapshot(Snapshot(snapshot_id, 1, VOTERS, [b"x"]))
    data = source.read_snapshot_chunk(snapshot_id, 0, 1 << 20)
    source.close()
    log = EngineRaftLog(partition_dir)
    log.append(entries([1, 1, 1]))
    log.flush()
    log.write_snapshot_chunk(OffsetAndEpoch(9, 9), 0, b"half a download")
    log.close()
    # A download completed (renamed) but the process died before it emptied the log.
    with open(os.path.join(partition_dir, snapshot_file_name(snapshot_id)), "wb") as f:
        f.write(data)
    log = EngineRaftLog(partition_dir)
    assert not [n for n in os.listdir(partition_dir) if n.endswith(".part")]
    assert log.latest_snapshot_id() == snapshot_id and log.log_start_offset == 20
    assert log.end_offset() == OffsetAndEpoch(20, 4) and log.high_watermark == 20
    assert log.end_offset_for_epoch(4) == OffsetAndEpoch(20, 4)
    log.close()


def test_a_corrupt_snapshot_is_named_and_never_completed(partition_dir):
    log = EngineRaftLog(partition_dir)
    log.append(entries([1, 1]))
    log.update_high_watermark(2)
    snapshot_id = OffsetAndEpoch(2, 1)
    log.create_snapshot(Snapshot(snapshot_id, 1, VOTERS, [b"a" * 50]))
    path = os.path.join(partition_dir, snapshot_file_name(snapshot_id))
    with open(path, "r+b") as f:
        f.seek(80)
        f.write(b"\xff\xff")
    with pytest.raises(ValueError, match=snapshot_file_name(snapshot_id)):
        log.read_snapshot(snapshot_id)
    with open(path, "rb") as f:
        good_size = len(f.read())
    other = OffsetAndEpoch(7, 3)
    log.write_snapshot_chunk(other, 0, b"\x00" * good_size)
    with pytest.raises(ValueError, match="corrupt snapshot"):
        log.complete_snapshot(other)
    assert log.latest_snapshot_id() == snapshot_id and log.end_offset() == OffsetAndEpoch(2, 1)
    log.close()


def test_delete_before_snapshot_keeps_the_latest_and_drops_whole_segments(partition_dir):
    log = EngineRaftLog(partition_dir, SMALL_SEGMENTS)
    write_bootstrap_snapshot(partition_dir, VOTERS, 1)
    log.close()
    log = EngineRaftLog(partition_dir, SMALL_SEGMENTS)
    for i in range(40):
        log.append([Entry(i, 1, b"%030d" % i)])
    log.update_high_watermark(40)
    ids = [OffsetAndEpoch(o, 1) for o in (10, 25, 33)]
    for snapshot_id in ids:
        log.create_snapshot(Snapshot(snapshot_id, 1, VOTERS, []))
    log.delete_before_snapshot(ids[1])
    names = sorted(n for n in os.listdir(partition_dir) if n.endswith(".checkpoint"))
    assert names == [snapshot_file_name(ids[1]), snapshot_file_name(ids[2])]
    assert log.log_start_offset == 25 and log.log.segments[0].base_offset <= 25
    assert all(s.base_offset > 10 for s in log.log.segments)
    log.delete_before_snapshot(OffsetAndEpoch(38, 1))  # not a snapshot: the latest stays anyway
    assert log.latest_snapshot_id() == ids[2]
    log.close()


def test_truncating_a_batch_cut_by_the_log_start(partition_dir):
    log = EngineRaftLog(partition_dir)
    es = entries([2] * 10)
    log.append(es)
    log.update_high_watermark(5)
    log.create_snapshot(Snapshot(OffsetAndEpoch(5, 2), 1, VOTERS, []))
    log.delete_before_snapshot(OffsetAndEpoch(5, 2))
    log.truncate_to(7)
    assert log.read(0, 10) == [] and log.read(5, 10) == es[5:7]
    assert log.end_offset_for_epoch(2) == OffsetAndEpoch(7, 2) and log.log_start_offset == 5
    log.close()
    log = EngineRaftLog(partition_dir)
    assert log.read(5, 10) == es[5:7] and log.log_start_offset == 5
    log.close()


def test_the_bootstrap_checkpoint(partition_dir):
    path = write_bootstrap_snapshot(partition_dir, VOTERS, 1)
    assert os.path.basename(path) == "00000000000000000000-0000000000.checkpoint"
    log = EngineRaftLog(partition_dir)
    assert log.latest_snapshot_id() == OffsetAndEpoch(0, 0)
    assert log.read_snapshot(OffsetAndEpoch(0, 0)) == Snapshot(OffsetAndEpoch(0, 0), 1, VOTERS, [])
    assert log.end_offset() == OffsetAndEpoch(0, 0) and log.log_start_offset == 0
    log.append(entries([1, 1]))
    assert log.end_offset_for_epoch(0) == OffsetAndEpoch(0, 0)
    log.close()
    with open(path, "rb") as f:
        batch = first_batch(f.read())
    assert batch.validate_crc() and [r.type for r in batch] == [3, 5, 6]  # header, kraft.version, voters


def test_the_default_config_is_kafkas_metadata_log():
    assert METADATA_LOG_CONFIG.segment_bytes == 1 << 30 and METADATA_LOG_CONFIG.retention_ms == -1


def test_reading_a_large_batch_in_small_chunks_decodes_it_once(tmp_path, monkeypatch):
    import raft.engine_log as engine_log
    log = EngineRaftLog(str(tmp_path / "p"))
    log.append([Entry(i, 1, b"v%d" % i) for i in range(5000)])  # one batch
    calls = []
    decode = engine_log.decode_entries
    monkeypatch.setattr(engine_log, "decode_entries", lambda data: calls.append(1) or decode(data))
    read = [e for start in range(0, 5000, 100) for e in log.read(start, 100)]
    assert [e.value for e in read] == [b"v%d" % i for i in range(5000)]
    assert len(calls) == 1
    log.truncate_to(2500)
    assert [e.offset for e in log.read(2400, 200)] == list(range(2400, 2500))
    log.close()
