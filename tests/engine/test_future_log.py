"""A replica's move between log dirs in the engine: the future log in the target dir, the copy,
the swap that replaces the current log, and what a crash at each point leaves (Kafka's
LogManager future logs and replaceCurrentWithFutureLog)."""
import os

from engine.manager import LogManager, format_log_dir
from replication.log_dir_mover import copy_chunk
from tests.engine.batches import producer_batch

CLUSTER = "MkU3OEVBNTcwNTJENDM2Qg"


def _dirs(tmp_path):
    dirs = [str(tmp_path / "a"), str(tmp_path / "b")]
    for d in dirs:
        format_log_dir(d, CLUSTER, 1)
    return dirs


def _open(dirs):
    logs = LogManager(dirs)
    logs.startup()
    return logs


def _abandon(logs):
    """A kill -9: nothing flushed, checkpointed or closed; only the dir locks let go."""
    for fd in logs._locks:
        os.close(fd)
    logs._locks.clear()


def _fill(log_, batches=5):
    for _ in range(batches):
        log_.append_as_leader(bytearray(producer_batch(10)), leader_epoch=3)
    log_.update_high_watermark(log_.log_end_offset)


def _contents(log_):
    found = log_.read(log_.log_start_offset, 1 << 30)
    return b"" if found.records is None else found.records.read()


def test_a_future_log_is_made_in_the_target_dir_with_the_future_suffix(tmp_path):
    a, b = _dirs(tmp_path)
    logs = _open([a, b])
    current = logs.get_or_create_log("t", 0, topic_id="AAAAAAAAAAAAAAAAAAAAAA")
    target = b if current.parent_dir == a else a
    future = logs.create_future_log("t", 0, target)
    assert future.parent_dir == target
    assert os.path.basename(future.dir).startswith("t-0.") and future.dir.endswith("-future")
    assert (future.topic, future.partition) == ("t", 0)
    assert logs.future_dir_of("t", 0) == target
    assert logs.create_future_log("t", 0, target) is future
    logs.shutdown()


def test_a_move_to_the_dir_the_replica_is_in_does_nothing(tmp_path):
    a, b = _dirs(tmp_path)
    logs = _open([a, b])
    current = logs.get_or_create_log("t", 0)
    assert logs.create_future_log("t", 0, current.parent_dir) is None
    assert logs.future_logs == {}
    logs.shutdown()


def test_the_future_replaces_the_current_once_it_holds_all_of_it(tmp_path):
    a, b = _dirs(tmp_path)
    logs = _open([a, b])
    current = logs.get_or_create_log("t", 0)
    _fill(current)
    before = _contents(current)
    source = current.parent_dir
    target = b if source == a else a
    future = logs.create_future_log("t", 0, target)
    while copy_chunk(current, future, 1000):
        pass
    under_way = current.read(0, 1 << 20).records  # a fetch's slice, not yet sent
    moved = logs.replace_current_with_future("t", 0)
    assert moved.dir == os.path.join(target, "t-0")
    assert logs.get_log("t", 0) is moved and logs.future_logs == {}
    assert _contents(moved) == before
    assert moved.high_watermark == moved.log_end_offset == 50
    assert moved.latest_epoch == 3
    assert not os.path.exists(os.path.join(source, "t-0"))
    assert under_way.read() == before, "the replaced log's files stay open for reads under way"
    assert logs.delete_replaced_logs() == 0  # file.delete.delay.ms has not passed
    assert logs.delete_replaced_logs(force=True) == 1
    assert not [n for n in os.listdir(source) if n.startswith("t-0")]
    moved.append_as_leader(bytearray(producer_batch(10)), leader_epoch=3)
    logs.shutdown()
    logs = _open([a, b])
    assert logs.get_log("t", 0).dir == os.path.join(target, "t-0")
    assert logs.get_log("t", 0).log_end_offset == 60
    logs.shutdown()


def test_a_crash_during_the_copy_leaves_the_current_log_whole_and_the_future_resumes(tmp_path):
    a, b = _dirs(tmp_path)
    logs = _open([a, b])
    current = logs.get_or_create_log("t", 0)
    _fill(current)
    before = _contents(current)
    target = b if current.parent_dir == a else a
    future = logs.create_future_log("t", 0, target)
    copy_chunk(current, future, 1)  # one batch copied
    current.flush()
    _abandon(logs)
    logs = _open([a, b])
    assert _contents(logs.get_log("t", 0)) == before
    future = logs.future_logs[("t", 0)]
    assert future.parent_dir == target and future.log_end_offset == 10
    while copy_chunk(logs.get_log("t", 0), future, 1 << 20):
        pass
    assert _contents(logs.replace_current_with_future("t", 0)) == before
    logs.shutdown()


def test_a_crash_between_the_swaps_renames_keeps_one_whole_log(tmp_path):
    a, b = _dirs(tmp_path)
    logs = _open([a, b])
    current = logs.get_or_create_log("t", 0)
    _fill(current)
    before = _contents(current)
    source = current.parent_dir
    target = b if source == a else a
    future = logs.create_future_log("t", 0, target)
    while copy_chunk(current, future, 1 << 20):
        pass
    current.flush()
    future.flush()
    _abandon(logs)
    # the current renamed aside, the future not yet renamed: the current comes back
    os.rename(current.dir, current.dir + ".0123456789abcdef0123456789abcdef-replaced")
    logs = _open([a, b])
    assert logs.get_log("t", 0).parent_dir == source
    assert _contents(logs.get_log("t", 0)) == before
    assert logs.future_logs[("t", 0)].parent_dir == target
    logs.future_logs[("t", 0)].flush()
    _abandon(logs)
    # both renamed: the replaced dir goes, the moved log stays
    replaced = current.dir + ".0123456789abcdef0123456789abcdef-replaced"
    os.rename(current.dir, replaced)
    os.rename(future.dir, os.path.join(target, "t-0"))
    logs = _open([a, b])
    assert logs.get_log("t", 0).parent_dir == target
    assert _contents(logs.get_log("t", 0)) == before
    assert not os.path.exists(replaced) and logs.future_logs == {}
    logs.shutdown()


def test_deleting_a_partition_deletes_its_future_log(tmp_path):
    a, b = _dirs(tmp_path)
    logs = _open([a, b])
    current = logs.get_or_create_log("t", 0)
    future = logs.create_future_log("t", 0, b if current.parent_dir == a else a)
    assert logs.delete_log("t", 0)
    assert logs.future_logs == {} and not os.path.exists(future.dir)
    logs.shutdown()


def test_a_future_log_removed_while_a_thread_copies_into_it_goes_once_the_copy_ends(tmp_path):
    a, b = _dirs(tmp_path)
    logs = _open([a, b])
    current = logs.get_or_create_log("t", 0)
    future = logs.create_future_log("t", 0, b if current.parent_dir == a else a)
    logs.begin_copy(future)
    assert logs.delete_log("t", 0)
    assert logs.future_logs == {} and os.path.isdir(future.dir), "its files stay while the copy writes"
    logs.end_copy(future)
    assert not os.path.exists(future.dir)
    logs.shutdown()
