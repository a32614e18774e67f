"""The LogManager's cleaning pass (Kafka's CleanerThread over LogCleanerManager): the
filthiest compacted log is cleaned, the checkpoint kept per log dir, a deleted partition
dropped from it, a log whose batches do not parse marked uncleanable."""
import os
import threading

import pytest

from engine.checkpoint import read_offset_checkpoint
from engine.cleaner import Cleaner, read_cleaner_checkpoint
from engine.manager import CLEANER_CHECKPOINT, LogManager, format_log_dir
from ext.offset_map import OffsetMap
from tests.engine.test_cleaner import NOW, compacted_config, produce, read_all


def _manager(tmp_path) -> LogManager:
    d = str(tmp_path / "d")
    format_log_dir(d, "c", 1)
    manager = LogManager([d])
    manager.startup()
    return manager


def _fill(lg, keys: int, rounds: int) -> None:
    for r in range(rounds):
        for k in range(keys):
            produce(lg, [(b"k%d" % k, b"v%d" % r)])
    lg.roll()


def test_clean_once_cleans_the_filthiest_compacted_log_and_checkpoints_it(tmp_path):
    manager = _manager(tmp_path)
    try:
        dirty = manager.get_or_create_log("dirty", 0, compacted_config())
        cleanish = manager.get_or_create_log("cleanish", 0, compacted_config())
        deleted = manager.get_or_create_log("retained", 0, compacted_config(cleanup_policy="delete"))
        _fill(dirty, 3, 10)
        _fill(cleanish, 10, 2)
        _fill(deleted, 1, 10)
        cleaner = Cleaner(OffsetMap(slots=1024))
        result = manager.clean_once(cleaner, NOW)
        assert result is not None and result.end_offset == 30
        assert [v for _, _, v in read_all(dirty)] == [b"v9"] * 3
        path = os.path.join(manager.log_dirs[0], CLEANER_CHECKPOINT)
        assert read_offset_checkpoint(path) == {("dirty", 0): 30}
        manager.clean_once(cleaner, NOW)
        assert read_offset_checkpoint(path) == {("dirty", 0): 30, ("cleanish", 0): 20}
        assert len(read_all(deleted)) == 10  # cleanup.policy=delete: never compacted
        assert manager.clean_once(cleaner, NOW) is None
        assert manager.cleaning == set()
        manager.delete_log("dirty", 0)
        assert read_offset_checkpoint(path) == {("cleanish", 0): 20}
    finally:
        manager.shutdown()


def test_a_log_whose_batches_do_not_parse_is_marked_uncleanable_and_left_alone(tmp_path):
    manager = _manager(tmp_path)
    try:
        lg = manager.get_or_create_log("bad", 0, compacted_config())
        _fill(lg, 2, 5)
        segment = lg.segments[0]
        fd = os.open(segment.log_path, os.O_WRONLY)  # the segment's own fd appends
        os.pwrite(fd, b"\x07", 16)  # the first batch's magic
        os.close(fd)
        assert manager.clean_once(Cleaner(OffsetMap(slots=64)), NOW) is None
        assert manager.uncleanable == {("bad", 0)}
        assert manager.clean_once(Cleaner(OffsetMap(slots=64)), NOW) is None
    finally:
        manager.shutdown()


def test_the_swap_runs_where_on_log_thread_runs_it(tmp_path):
    manager = _manager(tmp_path)
    try:
        lg = manager.get_or_create_log("t", 0, compacted_config())
        _fill(lg, 2, 5)
        ran_on: list[str] = []

        def on_log_thread(fn):
            ran_on.append(threading.current_thread().name)
            worker = threading.Thread(target=fn, name="log-thread")
            worker.start()
            worker.join()

        manager.clean_once(Cleaner(OffsetMap(slots=64), on_log_thread=on_log_thread), NOW)
        assert ran_on and [v for _, _, v in read_all(lg)] == [b"v4", b"v4"]
    finally:
        manager.shutdown()


def _all_cleaner_files(d: str) -> list[str]:
    return [n for _, _, names in os.walk(d) for n in names if n.endswith((".cleaned", ".swap"))]


@pytest.mark.parametrize("step", ["snapshot", "cleaned"])
@pytest.mark.parametrize("change", ["truncate_to", "truncate_fully_and_start_at", "delete_log"])
def test_a_truncation_or_deletion_during_a_clean_aborts_it_as_kafkas_abort_and_pause(tmp_path, step, change):
    manager = _manager(tmp_path)
    try:
        lg = manager.get_or_create_log("t", 0, compacted_config())
        _fill(lg, 2, 5)
        before = read_all(lg)

        def hook(at: str) -> None:
            if at != step:
                return
            if change == "truncate_to":
                lg.truncate_to(3)
            elif change == "truncate_fully_and_start_at":
                lg.truncate_fully_and_start_at(100)
            else:
                manager.delete_log("t", 0)

        assert manager.clean_once(Cleaner(OffsetMap(slots=64), hook=hook), NOW) is None
        d = manager.log_dirs[0]
        assert not manager.failure_channel.is_offline(d)
        assert manager.cleaning == set() and manager.uncleanable == set()
        assert _all_cleaner_files(d) == []
        assert read_cleaner_checkpoint(d) == {}  # nothing recorded of an aborted clean
        if change == "truncate_to":
            assert read_all(lg) == before[:3]
        elif change == "truncate_fully_and_start_at":
            assert read_all(lg) == [] and lg.log_start_offset == 100
        else:
            assert manager.get_log("t", 0) is None
        # The next pass cleans what is there (nothing when the log went).
        manager.clean_once(Cleaner(OffsetMap(slots=64)), NOW)
        assert not manager.failure_channel.is_offline(d)
    finally:
        manager.shutdown()
