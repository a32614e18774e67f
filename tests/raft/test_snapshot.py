"""Snapshots (KIP-630) and FetchSnapshot, with the voter set they carry (KIP-853)."""
import pytest

import raft.snapshot
from raft import messages as m
from raft.log import MemoryRaftLog, OffsetAndEpoch
from raft.quorum_state import Follower
from tests.raft.harness import Cluster


def committed_values(cluster, node_id):
    log = cluster.logs[node_id]
    entries = log.entries[:log.high_watermark - log.log_start_offset]
    return [e.value for e in entries if isinstance(e.value, str)]


@pytest.fixture
def small_chunks(monkeypatch):
    monkeypatch.setattr(raft.snapshot, "FETCH_SNAPSHOT_MAX_BYTES", 64)


def test_create_snapshot_at_the_high_watermark_deletes_the_prefix_and_keeps_the_latest_snapshot():
    cluster = Cluster(3, seed=1, kraft_version=1)
    cluster.run(400)
    cluster.append([f"v{i}" for i in range(10)])
    cluster.run(100)
    leader = cluster.leader()
    log = cluster.logs[leader]
    hw = log.high_watermark
    first = cluster.cores[leader].create_snapshot(hw - 5, ["state@-5"])
    second = cluster.cores[leader].create_snapshot(hw, ["state"])
    assert second == OffsetAndEpoch(hw, cluster.cores[leader].state.epoch)
    assert list(log.snapshots) == [second] and first != second
    assert log.log_start_offset == hw and log.read(0, 10) == []
    assert log.end_offset_for_epoch(second.epoch) == OffsetAndEpoch(hw, second.epoch)
    snapshot = log.read_snapshot(second)
    assert snapshot.values == ["state"] and snapshot.voters.ids() == {1, 2, 3}
    with pytest.raises(ValueError):
        cluster.cores[leader].create_snapshot(hw + 1, [])


def test_a_replica_behind_the_log_start_fetches_the_snapshot_in_chunks_then_resumes_fetch(small_chunks):
    cluster = Cluster(3, seed=3, kraft_version=1)
    cluster.run(400)
    leader = cluster.leader()
    lagging = next(i for i in (1, 2, 3) if i != leader)
    cluster.stop(lagging)
    cluster.append([f"v{i}" for i in range(20)])
    cluster.run(100)
    hw = cluster.logs[leader].high_watermark
    snapshot_id = cluster.cores[leader].create_snapshot(hw, [f"state-{hw}"])
    cluster.logs[lagging] = MemoryRaftLog()  # lost its disk too: only the snapshot can help
    cluster.add_node(lagging)
    cluster.append(["after"])
    cluster.run(300)
    core = cluster.cores[lagging]
    log = cluster.logs[lagging]
    assert log.latest_snapshot_id() == snapshot_id
    assert log.read_snapshot(snapshot_id).values == [f"state-{hw}"]
    assert log.log_start_offset == hw and committed_values(cluster, lagging) == ["after"]
    assert core.voter_set.ids() == {1, 2, 3}  # learned from the snapshot's VotersRecord
    chunks = [msg for _, dst, msg in cluster.sent
              if dst == leader and isinstance(msg, m.FetchSnapshotRequest)]
    assert len(chunks) >= 2 and [c.position for c in chunks] == sorted(c.position for c in chunks)
    assert isinstance(core.state, Follower)


def test_fetch_snapshot_for_an_unknown_snapshot_answers_snapshot_not_found():
    cluster = Cluster(3, seed=1, kraft_version=1)
    cluster.run(400)
    leader = cluster.leader()
    epoch = cluster.cores[leader].state.epoch
    ready = cluster.cores[leader].step(cluster.now, 2, m.FetchSnapshotRequest(
        2, epoch, OffsetAndEpoch(99, epoch), 0, 1000))
    assert ready.messages[0][1].error_code == m.SNAPSHOT_NOT_FOUND


def test_a_loaded_snapshot_is_reported_to_the_listener_once():
    cluster = Cluster(3, seed=5, kraft_version=1)
    cluster.run(400)
    leader = cluster.leader()
    observer_log = MemoryRaftLog()
    cluster.append(["a", "b"])
    cluster.run(100)
    snapshot_id = cluster.cores[leader].create_snapshot(cluster.logs[leader].high_watermark, ["ab"])
    loaded = []
    process = cluster.process

    def spy(node_id, ready):
        if node_id == 100 and ready.snapshot_loaded is not None:
            loaded.append(ready.snapshot_loaded)
        process(node_id, ready)

    cluster.process = spy
    cluster.add_node(100, observer_log)
    cluster.run(200)
    assert loaded == [snapshot_id]
