"""ext.epoch: the leader-epoch cache, tests named after Kafka's LeaderEpochFileCache rules."""
import os

import pytest

import ext.epoch
from ext.epoch import UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET, LeaderEpochCache

UNDEFINED = (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)


def test_native_module_loaded():
    assert ext.epoch.__file__.endswith(".so")
    assert UNDEFINED_EPOCH == -1 and UNDEFINED_EPOCH_OFFSET == -1


def cache_with(*entries):
    cache = LeaderEpochCache()
    for epoch, start_offset in entries:
        cache.assign(epoch, start_offset)
    return cache


def read(path):
    with open(path, "rb") as f:
        return f.read()


# ---------------------------------------------------------------- assign


def test_assign_appends_increasing_entries():
    cache = cache_with((0, 0), (3, 150), (4, 200))
    assert cache.entries() == [(0, 0), (3, 150), (4, 200)]
    assert len(cache) == 3
    assert cache.latest_epoch == 4
    assert cache.earliest_entry == (0, 0)
    assert cache.latest_entry == (4, 200)


def test_empty_cache():
    cache = LeaderEpochCache()
    assert cache.entries() == []
    assert len(cache) == 0
    assert cache.latest_epoch == UNDEFINED_EPOCH
    assert cache.earliest_entry is None and cache.latest_entry is None
    assert cache.path is None


def test_assign_same_epoch_at_later_offset_is_ignored():
    cache = cache_with((2, 10), (2, 15), (2, 10))
    assert cache.entries() == [(2, 10)]


def test_assign_same_epoch_at_earlier_offset_moves_its_start_back():
    cache = cache_with((1, 0), (2, 10), (2, 5))
    assert cache.entries() == [(1, 0), (2, 5)]


def test_assign_negative_epoch_is_ignored():
    cache = cache_with((1, 0), (-1, 50))
    assert cache.entries() == [(1, 0)]


def test_assign_negative_start_offset_is_rejected():
    with pytest.raises(ValueError):
        cache_with((1, -1))


def test_assign_removes_non_monotonic_entries():
    # A new epoch starting at or before earlier epochs' starts means their records are gone.
    cache = cache_with((1, 0), (2, 10), (3, 20), (4, 30))
    cache.assign(5, 20)
    assert cache.entries() == [(1, 0), (2, 10), (5, 20)]


def test_assign_removes_entries_with_epoch_at_or_above_new_epoch():
    # An older epoch at a later offset (e.g. from a stale leader) replaces newer epochs.
    cache = cache_with((1, 0), (3, 10), (4, 20))
    cache.assign(2, 25)
    assert cache.entries() == [(1, 0), (2, 25)]


def test_assign_lower_epoch_at_lower_offset_replaces_everything_after():
    cache = cache_with((3, 100), (4, 200))
    cache.assign(2, 50)
    assert cache.entries() == [(2, 50)]


# ---------------------------------------------------------------- end_offset_for


def test_end_offset_for_latest_epoch_is_log_end_offset():
    cache = cache_with((0, 0), (3, 150))
    assert cache.end_offset_for(3, 175) == (3, 175)


def test_end_offset_for_known_earlier_epoch_is_next_epoch_start():
    cache = cache_with((0, 0), (3, 150), (4, 200))
    assert cache.end_offset_for(0, 999) == (0, 150)
    assert cache.end_offset_for(3, 999) == (3, 200)


def test_end_offset_for_epoch_between_entries_returns_floor_epoch_and_next_start():
    cache = cache_with((0, 0), (3, 150), (6, 300))
    assert cache.end_offset_for(1, 999) == (0, 150)
    assert cache.end_offset_for(2, 999) == (0, 150)
    assert cache.end_offset_for(5, 999) == (3, 300)


def test_end_offset_for_epoch_above_all_is_undefined():
    cache = cache_with((0, 0), (3, 150))
    assert cache.end_offset_for(4, 999) == UNDEFINED


def test_end_offset_for_epoch_below_all_returns_requested_and_first_start():
    cache = cache_with((3, 150), (5, 300))
    assert cache.end_offset_for(1, 999) == (1, 150)
    assert cache.end_offset_for(0, 999) == (0, 150)


def test_end_offset_for_undefined_epoch_is_undefined():
    cache = cache_with((0, 0), (3, 150))
    assert cache.end_offset_for(UNDEFINED_EPOCH, 999) == UNDEFINED


def test_end_offset_for_on_empty_cache_is_undefined():
    assert LeaderEpochCache().end_offset_for(0, 10) == UNDEFINED
    assert LeaderEpochCache().end_offset_for(7, 10) == UNDEFINED


def test_replication_chapter_returning_follower_truncates_at_next_epoch_start():
    # Leader: epoch 5 -> 100, epoch 7 -> 130. A follower that wrote ahead in epoch 5 up to
    # offset 142 asks for the end of epoch 5 and truncates 130..142.
    leader = cache_with((5, 100), (7, 130))
    assert leader.end_offset_for(5, 160) == (5, 130)
    follower = cache_with((5, 100))
    follower_log_end = 143
    epoch, end_offset = leader.end_offset_for(follower.latest_epoch, 160)
    truncate_to = min(end_offset, follower_log_end)
    assert (epoch, truncate_to) == (5, 130)
    follower.truncate_from_end(truncate_to)
    follower.assign(7, 130)
    assert follower.entries() == leader.entries()


# ---------------------------------------------------------------- other queries


def test_epoch_for_offset():
    cache = cache_with((2, 10), (4, 20), (7, 35))
    assert cache.epoch_for_offset(9) == UNDEFINED_EPOCH
    assert cache.epoch_for_offset(10) == 2
    assert cache.epoch_for_offset(19) == 2
    assert cache.epoch_for_offset(20) == 4
    assert cache.epoch_for_offset(35) == 7
    assert cache.epoch_for_offset(10**12) == 7
    assert LeaderEpochCache().epoch_for_offset(0) == UNDEFINED_EPOCH


def test_previous_epoch_is_largest_epoch_below():
    cache = cache_with((2, 10), (4, 20), (7, 35))
    assert cache.previous_epoch(7) == 4
    assert cache.previous_epoch(6) == 4
    assert cache.previous_epoch(100) == 7
    assert cache.previous_epoch(3) == 2
    assert cache.previous_epoch(2) == UNDEFINED_EPOCH
    assert cache.previous_epoch(0) == UNDEFINED_EPOCH


# ---------------------------------------------------------------- truncation


def test_truncate_from_end_drops_entries_starting_at_or_after_end_offset():
    cache = cache_with((1, 0), (2, 10), (3, 20), (4, 30))
    cache.truncate_from_end(20)
    assert cache.entries() == [(1, 0), (2, 10)]


def test_truncate_from_end_inside_latest_epoch_keeps_it():
    cache = cache_with((1, 0), (2, 10))
    cache.truncate_from_end(15)
    assert cache.entries() == [(1, 0), (2, 10)]


def test_truncate_from_end_to_zero_empties_and_negative_is_ignored():
    cache = cache_with((1, 0), (2, 10))
    cache.truncate_from_end(-1)
    assert len(cache) == 2
    cache.truncate_from_end(0)
    assert cache.entries() == []


def test_truncate_from_start_keeps_covering_entry_and_moves_its_start():
    cache = cache_with((1, 0), (2, 10), (3, 20), (4, 30))
    cache.truncate_from_start(25)
    assert cache.entries() == [(3, 25), (4, 30)]


def test_truncate_from_start_at_an_epoch_start_drops_earlier_epochs():
    cache = cache_with((1, 0), (2, 10), (3, 20))
    cache.truncate_from_start(20)
    assert cache.entries() == [(3, 20)]


def test_truncate_from_start_before_first_entry_changes_nothing():
    cache = cache_with((2, 10), (3, 20))
    cache.truncate_from_start(5)
    assert cache.entries() == [(2, 10), (3, 20)]


def test_truncate_from_start_past_latest_start_keeps_latest_epoch():
    cache = cache_with((2, 10), (3, 20))
    cache.truncate_from_start(500)
    assert cache.entries() == [(3, 500)]


def test_clear():
    cache = cache_with((2, 10), (3, 20))
    cache.clear()
    assert len(cache) == 0


# ---------------------------------------------------------------- checkpoint file


def test_checkpoint_file_format_is_kafkas(tmp_path):
    path = str(tmp_path / "leader-epoch-checkpoint")
    cache = LeaderEpochCache(path)
    assert not os.path.exists(path)
    cache.assign(0, 0)
    assert read(path) == b"0\n1\n0 0\n"
    cache.assign(3, 150)
    assert read(path) == b"0\n2\n0 0\n3 150\n"
    assert not os.path.exists(path + ".tmp")


def test_checkpoint_reload(tmp_path):
    path = str(tmp_path / "leader-epoch-checkpoint")
    cache = LeaderEpochCache(path)
    cache.assign(0, 0)
    cache.assign(3, 150)
    cache.assign(4, 2**40)
    reloaded = LeaderEpochCache(path)
    assert reloaded.entries() == [(0, 0), (3, 150), (4, 2**40)]
    assert reloaded.path == path


def test_checkpoint_of_empty_cache(tmp_path):
    path = str(tmp_path / "leader-epoch-checkpoint")
    cache_with((1, 5)).flush()          # in memory: no file anywhere
    assert os.listdir(tmp_path) == []
    cache = LeaderEpochCache(path)
    cache.assign(1, 5)
    cache.clear()
    assert read(path) == b"0\n0\n"
    assert LeaderEpochCache(path).entries() == []


def test_flush_false_defers_the_write(tmp_path):
    path = str(tmp_path / "leader-epoch-checkpoint")
    cache = LeaderEpochCache(path)
    cache.assign(1, 0)
    cache.assign(2, 10)
    cache.truncate_from_end(10, flush=False)
    cache.assign(3, 5, flush=False)
    cache.truncate_from_start(7, flush=False)
    assert read(path) == b"0\n2\n1 0\n2 10\n"
    cache.flush()
    assert read(path) == b"0\n1\n3 7\n"


def test_unchanged_assign_does_not_rewrite(tmp_path):
    path = str(tmp_path / "leader-epoch-checkpoint")
    cache = LeaderEpochCache(path)
    cache.assign(1, 0)
    os.remove(path)
    cache.assign(1, 10)
    assert not os.path.exists(path)


def test_empty_file_and_version_only_file_load_as_empty(tmp_path):
    # Kafka's CheckpointFile reads both as no entries.
    for content in (b"", b"0\n"):
        path = tmp_path / "leader-epoch-checkpoint"
        path.write_bytes(content)
        assert LeaderEpochCache(str(path)).entries() == []


def test_load_accepts_kafka_whitespace_and_crlf(tmp_path):
    path = tmp_path / "leader-epoch-checkpoint"
    path.write_bytes(b"0\r\n2\r\n0\t0 \r\n3   150")
    assert LeaderEpochCache(str(path)).entries() == [(0, 0), (3, 150)]


def test_load_repairs_non_monotonic_file_as_kafka_does(tmp_path):
    path = tmp_path / "leader-epoch-checkpoint"
    path.write_bytes(b"0\n3\n1 0\n2 50\n3 40\n")
    assert LeaderEpochCache(str(path)).entries() == [(1, 0), (3, 40)]


@pytest.mark.parametrize("content, line", [
    (b"1\n0\n", 1),                       # unknown version
    (b"x\n0\n", 1),
    (b" 0\n0\n", 1),
    (b"0\ntwo\n", 2),
    (b"0\n-1\n", 2),
    (b"0\n2\n0 0\n", 2),                  # fewer entries than announced
    (b"0\n1\n0 0\n3 150\n", 4),           # more entries than announced
    (b"0\n2\n0 0\n3\n", 4),               # one field
    (b"0\n2\n0 0\n3 150 7\n", 4),         # three fields
    (b"0\n2\n0 0\n 3 150\n", 4),          # leading whitespace
    (b"0\n2\n0 0\n3 1_50\n", 4),
    (b"0\n2\n0 0\n\n", 4),                # blank line
    (b"0\n1\n-1 0\n", 3),                 # negative epoch
    (b"0\n1\n0 -5\n", 3),                 # negative offset
    (b"0\n1\n2147483648 0\n", 3),         # epoch beyond int32
    (b"0\n1\n0 9223372036854775808\n", 3),
    (b"0\n1\n\xff 0\n", 3),
])
def test_malformed_checkpoint_names_file_and_line(tmp_path, content, line):
    path = tmp_path / "leader-epoch-checkpoint"
    path.write_bytes(content)
    with pytest.raises(ValueError) as info:
        LeaderEpochCache(str(path))
    message = str(info.value)
    assert str(path) in message
    assert f"line {line}" in message


def test_missing_file_is_an_empty_cache(tmp_path):
    cache = LeaderEpochCache(str(tmp_path / "leader-epoch-checkpoint"))
    assert cache.entries() == []


def test_entries_returns_a_copy():
    cache = cache_with((1, 0))
    cache.entries().append((9, 9))
    assert cache.entries() == [(1, 0)]
