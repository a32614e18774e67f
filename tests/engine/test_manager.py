"""LogManager: log dirs, meta.properties, checkpoints, clean shutdown, kill -9."""
import os
import signal
import subprocess
import sys
import textwrap

import pytest

from engine.checkpoint import read_offset_checkpoint, read_properties
from engine.config import LogConfig
from engine.errors import LogDirError
from engine.manager import CLEAN_SHUTDOWN_FILE, LogManager, format_log_dir
from tests.engine.batches import BASE_TS, producer_batch

NOW = BASE_TS + 1000
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_format_writes_kafka_meta_properties(tmp_path):
    directory_id = format_log_dir(str(tmp_path / "d"), "MkU3OEVBNTcwNTJENDM2Qg", 3)
    props = read_properties(str(tmp_path / "d" / "meta.properties"))
    assert props == {"node.id": "3", "directory.id": directory_id, "version": "1",
                     "cluster.id": "MkU3OEVBNTcwNTJENDM2Qg"}
    assert len(directory_id) == 22
    with pytest.raises(LogDirError, match="already formatted"):
        format_log_dir(str(tmp_path / "d"), "x", 3)


def test_unformatted_dir_is_an_error_naming_it(tmp_path):
    with pytest.raises(LogDirError, match="not formatted"):
        LogManager([str(tmp_path / "d")]).startup()


def test_mismatched_cluster_ids_across_dirs_are_refused(tmp_path):
    format_log_dir(str(tmp_path / "a"), "cluster-a", 1)
    format_log_dir(str(tmp_path / "b"), "cluster-b", 1)
    with pytest.raises(LogDirError, match="cluster.id"):
        LogManager([str(tmp_path / "a"), str(tmp_path / "b")]).startup()


def test_a_log_dir_is_locked_by_one_manager(tmp_path):
    format_log_dir(str(tmp_path / "d"), "c", 1)
    first = LogManager([str(tmp_path / "d")])
    first.startup()
    with pytest.raises(LogDirError, match="in use"):
        LogManager([str(tmp_path / "d")]).startup()
    first.shutdown()


def started_on_two_dirs(tmp_path) -> tuple[LogManager, list[str]]:
    dirs = [str(tmp_path / "a"), str(tmp_path / "b")]
    for d in dirs:
        format_log_dir(d, "c", 1)
    manager = LogManager(dirs)
    manager.startup()
    return manager, dirs


def test_partitions_spread_over_dirs_and_survive_clean_restart(tmp_path):
    manager, dirs = started_on_two_dirs(tmp_path)
    for p in range(4):
        log = manager.get_or_create_log("orders", p, topic_id="AAAAAAAAAAAAAAAAAAAAAQ")
        log.append_as_leader(producer_batch(5 + p), 0, NOW)
        log.update_high_watermark(3)
    assert {len(os.listdir(d)) for d in dirs} == {len(os.listdir(dirs[0]))}
    manager.shutdown()
    for d in dirs:
        assert os.path.exists(os.path.join(d, CLEAN_SHUTDOWN_FILE))
        hws = read_offset_checkpoint(os.path.join(d, "replication-offset-checkpoint"))
        assert set(hws.values()) == {3}
        with open(os.path.join(d, "recovery-point-offset-checkpoint")) as f:
            lines = f.read().splitlines()
        assert lines[0] == "0" and int(lines[1]) == len(lines) - 2 == 2
    again = LogManager(dirs)
    again.startup()
    assert all(again.had_clean_shutdown.values())
    assert not any(os.path.exists(os.path.join(d, CLEAN_SHUTDOWN_FILE)) for d in dirs)
    for p in range(4):
        log = again.get_log("orders", p)
        assert (log.log_end_offset, log.high_watermark, log.topic_id) == (5 + p, 3, "AAAAAAAAAAAAAAAAAAAAAQ")
    again.shutdown()


def two_dirs_with_logs(tmp_path) -> tuple[LogManager, list[str]]:
    manager, dirs = started_on_two_dirs(tmp_path)
    for p in range(4):
        log = manager.get_or_create_log("orders", p)
        log.append_as_leader(producer_batch(5), 0, NOW)
        log.update_high_watermark(5)
    return manager, dirs


def test_shutdown_leaves_an_offline_log_dir_unmarked_and_finishes_the_others(tmp_path):
    """Kafka's LogManager.shutdown works on its live log dirs only: a dir that went offline
    while serving gets no flush, no checkpoint and no clean-shutdown marker (its logs must be
    recovered at the next start), and does not stop the others' clean shutdown."""
    manager, (a, b) = two_dirs_with_logs(tmp_path)
    offline_hw = os.path.join(b, "replication-offset-checkpoint")
    before = os.path.getmtime(offline_hw) if os.path.exists(offline_hw) else None
    manager.failure_channel.maybe_add_offline_log_dir(b, "a test", OSError(5, "Input/output error"))
    manager.shutdown()
    assert os.path.exists(os.path.join(a, CLEAN_SHUTDOWN_FILE))
    assert set(read_offset_checkpoint(os.path.join(a, "replication-offset-checkpoint")).values()) == {5}
    assert not os.path.exists(os.path.join(b, CLEAN_SHUTDOWN_FILE))
    assert (os.path.getmtime(offline_hw) if os.path.exists(offline_hw) else None) == before
    again = LogManager([a, b])  # the locks were released
    again.startup()
    assert again.had_clean_shutdown == {a: True, b: False}
    assert sorted(log.log_end_offset for log in again.logs.values()) == [5, 5, 5, 5]
    again.shutdown()


def test_a_log_dir_failing_during_shutdown_goes_offline_unmarked_and_the_others_finish(tmp_path, monkeypatch):
    manager, (a, b) = two_dirs_with_logs(tmp_path)
    from engine.log import Log
    real_flush = Log.flush

    def flush(self, *args, **kwargs):
        if self.parent_dir == b:
            raise OSError(5, "Input/output error")
        return real_flush(self, *args, **kwargs)

    monkeypatch.setattr(Log, "flush", flush)
    manager.shutdown()
    assert manager.failure_channel.is_offline(b) and not manager.failure_channel.is_offline(a)
    assert os.path.exists(os.path.join(a, CLEAN_SHUTDOWN_FILE))
    assert not os.path.exists(os.path.join(b, CLEAN_SHUTDOWN_FILE))
    assert not manager.logs
    again = LogManager([a, b])
    again.startup()
    assert again.had_clean_shutdown == {a: True, b: False}
    again.shutdown()


def test_delete_log_removes_the_directory(tmp_path):
    format_log_dir(str(tmp_path / "d"), "c", 1)
    manager = LogManager([str(tmp_path / "d")])
    manager.startup()
    manager.get_or_create_log("gone", 0).append_as_leader(producer_batch(1), 0, NOW)
    assert manager.delete_log("gone", 0)
    assert not any(n.startswith("gone-0") for n in os.listdir(tmp_path / "d"))
    manager.shutdown()


def test_take_rolled_names_each_log_that_rolled_once_and_never_a_deleted_one(tmp_path):
    """The broker flushes up to a roll only the logs that rolled (broker/off_loop.py), so a
    broker of many partitions does not look at every log every second."""
    format_log_dir(str(tmp_path / "d"), "c", 1)
    manager = LogManager([str(tmp_path / "d")], LogConfig(segment_bytes=2000))
    manager.startup()
    rolling, quiet, gone = (manager.get_or_create_log(t, 0) for t in ("rolling", "quiet", "gone"))
    for _ in range(6):
        rolling.append_as_leader(producer_batch(3), 0, NOW)
        gone.append_as_leader(producer_batch(3), 0, NOW)
    quiet.append_as_leader(producer_batch(1), 0, NOW)
    assert len(rolling.segments) > 1 and len(gone.segments) > 1 and len(quiet.segments) == 1
    manager.delete_log("gone", 0)
    assert manager.take_rolled() == [rolling]
    assert manager.take_rolled() == [], "taken once"
    manager.rolled_again([rolling])
    assert manager.take_rolled() == [rolling], "handed back by a flush that did not finish"
    manager.shutdown()


def test_log_start_offsets_are_checkpointed(tmp_path):
    format_log_dir(str(tmp_path / "d"), "c", 1)
    manager = LogManager([str(tmp_path / "d")], LogConfig(segment_bytes=2000))
    manager.startup()
    log = manager.get_or_create_log("t", 0)
    for i in range(10):
        log.append_as_leader(producer_batch(5, tag=i), 0, NOW)
    log.update_high_watermark(log.log_end_offset)
    log.maybe_increment_log_start_offset(23)
    manager.shutdown()
    again = LogManager([str(tmp_path / "d")], LogConfig(segment_bytes=2000))
    again.startup()
    assert again.get_log("t", 0).log_start_offset == 23
    again.shutdown()


WRITER = textwrap.dedent("""
    import os, sys
    sys.path.insert(0, {root!r})
    from engine.manager import LogManager
    from tests.engine.batches import producer_batch, BASE_TS
    manager = LogManager([{d!r}])
    manager.startup()
    log = manager.get_or_create_log("durable", 0)
    for i in range(200):
        log.append_as_leader(producer_batch(10, tag=i), 0, BASE_TS + 1000)
        if i == 99:
            print("half", flush=True)
    print("done", log.log_end_offset, flush=True)
    sys.stdin.read()
""")


@pytest.mark.processes
def test_kill_9_loses_nothing_that_was_written(tmp_path):
    """A process killed with SIGKILL after its appends returned: every batch is there after
    recovery (the page cache survives the process), the indexes are rebuilt and appends go on."""
    d = str(tmp_path / "d")
    format_log_dir(d, "c", 1)
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER.format(root=ROOT, d=d)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    try:
        assert proc.stdout.readline().strip() == "half"
        assert proc.stdout.readline().split() == ["done", "2000"]
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        proc.kill()
    manager = LogManager([d], LogConfig())
    manager.startup()
    assert manager.had_clean_shutdown == {d: False}
    log = manager.get_log("durable", 0)
    assert log.log_end_offset == 2000
    data = log.read(1234, 1 << 20).records.read()
    from ext.batch import read_header
    assert read_header(data).base_offset == 1230
    assert log.append_as_leader(producer_batch(1), 1, NOW).first_offset == 2000
    manager.shutdown()
