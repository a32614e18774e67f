"""Crash recovery: a torn or corrupt tail is truncated at the last good batch; everything
before it survives and nothing after it is read."""
import os
import shutil

import pytest

from engine.config import LogConfig
from engine.log import Log
from ext.batch import decode_records, iter_batches
from tests.engine.batches import BASE_TS, producer_batch

NOW = BASE_TS + 1000
CONFIG = LogConfig(segment_bytes=6000, index_interval_bytes=500)


def all_offsets(log: Log) -> list[int]:
    out, offset = [], log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 30).records.read()
        batch_offsets = [
            r.offset for h in iter_batches(data, check_crc=True) for r in decode_records(data, h.position)
        ]
        out += batch_offsets
        offset = batch_offsets[-1] + 1
    return out


def build(path: str, batches: int = 12) -> Log:
    log = Log(path, CONFIG)
    for i in range(batches):
        log.append_as_leader(producer_batch(8, tag=i), i // 4, NOW)
    return log


def abandon(log: Log) -> None:
    """Drop the log as a killed process would: no trim, no checkpoint, no clean marker."""
    for s in log.segments:
        os.close(s.fd)


TORN_PARTS = 8  # the byte boundaries dealt out to this many tests, so that workers share them


@pytest.mark.parametrize("part", range(TORN_PARTS))
def test_torn_last_batch_is_truncated_at_every_byte_boundary(tmp_path, part):
    src = str(tmp_path / "src" / "t-0")
    log = build(src, batches=6)
    last_size = len(producer_batch(8, tag=5))
    full_size = log.active_segment.size
    active_name = os.path.basename(log.active_segment.log_path)
    abandon(log)
    for keep in range(part, last_size, TORN_PARTS):
        work = str(tmp_path / f"cut{keep}" / "t-0")
        shutil.copytree(src, work)
        with open(os.path.join(work, active_name), "r+b") as f:
            f.truncate(full_size - last_size + keep)
        recovered = Log(work, CONFIG, had_clean_shutdown=False)
        assert recovered.log_end_offset == 40, keep
        assert all_offsets(recovered) == list(range(40)), keep
        assert recovered.active_segment.size == full_size - last_size
        assert recovered.append_as_leader(producer_batch(2), 9, NOW).first_offset == 40
        recovered.close()
        shutil.rmtree(os.path.dirname(work))


def test_corrupt_batch_in_an_old_segment_truncates_there_and_drops_later_segments(tmp_path):
    path = str(tmp_path / "t-0")
    log = build(path, batches=20)
    assert len(log.segments) >= 3
    victim = log.segments[1]
    victim_path, victim_base = victim.log_path, victim.base_offset
    abandon(log)
    with open(victim_path, "r+b") as f:
        batch_size = len(producer_batch(8))
        f.seek(batch_size + 70)  # inside the second batch's records: CRC no longer matches
        byte = f.read(1)
        f.seek(batch_size + 70)
        f.write(bytes([byte[0] ^ 0x55]))
    recovered = Log(path, CONFIG, had_clean_shutdown=False)
    assert recovered.log_end_offset == victim_base + 8
    assert all_offsets(recovered) == list(range(victim_base + 8))
    assert [s.base_offset for s in recovered.segments][-1] == victim_base
    assert len([n for n in os.listdir(path) if n.endswith(".log")]) == 2
    assert recovered.leader_epoch_cache.latest_epoch == (victim_base + 7) // 32


def test_zero_filled_tail_is_truncated(tmp_path):
    path = str(tmp_path / "t-0")
    log = build(path, batches=3)
    active = log.active_segment.log_path
    abandon(log)
    with open(active, "ab") as f:
        f.write(b"\x00" * 4096)
    recovered = Log(path, CONFIG, had_clean_shutdown=False)
    assert all_offsets(recovered) == list(range(24))


@pytest.mark.parametrize("garbage", [
    b"\xff" * 64,  # negative length
    (2**31 - 1).to_bytes(4, "big").rjust(12, b"\x00") + b"\x00" * 60,  # huge length
    (100).to_bytes(4, "big").rjust(12, b"\x00") + b"\x00\x00\x00\x00\x07" + b"\x00" * 95,  # wrong magic
])
def test_garbage_tail_is_truncated(tmp_path, garbage):
    path = str(tmp_path / "t-0")
    log = build(path, batches=2)
    active = log.active_segment.log_path
    abandon(log)
    with open(active, "ab") as f:
        f.write(garbage)
    recovered = Log(path, CONFIG, had_clean_shutdown=False)
    assert all_offsets(recovered) == list(range(16))


def test_unclean_open_rebuilds_indexes_left_preallocated(tmp_path):
    path = str(tmp_path / "t-0")
    log = build(path, batches=12)
    entries = [(s.base_offset, s.offset_index.entries) for s in log.segments]
    abandon(log)  # the active .index/.timeindex stay preallocated with zero tails
    recovered = Log(path, CONFIG, had_clean_shutdown=False)
    assert [(s.base_offset, s.offset_index.entries) for s in recovered.segments] == entries
    for target in range(0, 96, 7):
        data = recovered.read(target, 1).records.read()
        first = next(iter_batches(data))
        assert first.base_offset <= target <= first.last_offset


def test_missing_index_files_are_rebuilt_even_after_clean_shutdown(tmp_path):
    path = str(tmp_path / "t-0")
    log = build(path, batches=12)
    log.close()
    first = log.segments[0]
    os.unlink(first.offset_index.path)
    os.unlink(first.time_index.path)
    again = Log(path, CONFIG, had_clean_shutdown=True)
    assert all_offsets(again) == list(range(96))
    assert os.path.exists(first.offset_index.path)


def test_recovery_point_limits_which_segments_are_scanned(tmp_path):
    """Segments wholly below the recovery point are trusted (Kafka's rule)."""
    path = str(tmp_path / "t-0")
    log = build(path, batches=20)
    first_path = log.segments[0].log_path
    second_base = log.segments[1].base_offset
    abandon(log)
    with open(first_path, "r+b") as f:  # damage below the recovery point goes unnoticed
        f.seek(100)
        f.write(b"\x00")
    recovered = Log(path, CONFIG, recovery_point=second_base, had_clean_shutdown=False)
    assert recovered.log_end_offset == 160
    assert recovered.recovery_point == second_base


def test_leftover_files_from_interrupted_operations_are_removed(tmp_path):
    path = str(tmp_path / "t-0")
    build(path, batches=2).close()
    for name in ("00000000000000000000.log.deleted", "00000000000000000099.index",
                 "00000000000000000000.log.cleaned", "leader-epoch-checkpoint.tmp"):
        open(os.path.join(path, name), "wb").close()
    Log(path, CONFIG).close()
    names = set(os.listdir(path))
    assert "00000000000000000000.log.deleted" not in names
    assert "00000000000000000099.index" not in names
    assert "leader-epoch-checkpoint.tmp" not in names


# ---- header fields the CRC does not cover --------------------------------------------------
# baseOffset, batchLength and partitionLeaderEpoch precede the CRC (the leader rewrites them on
# append). A flipped bit in batchLength breaks the framing or the CRC; in the other two it went
# unnoticed: the log then claimed a later epoch or a larger log end offset than it holds, and
# the controller's balanced recovery elected it as the most complete replica (soak seed 1013).

def flip_header(path: str, batch_index: int, field_offset: int, width: int, bit: int) -> None:
    """Flip one bit of a header field of the batch_index-th batch of a segment file."""
    with open(path, "r+b") as f:
        data = bytearray(f.read())
        position = 0
        for _ in range(batch_index):
            position += 12 + int.from_bytes(data[position + 8:position + 12], "big")
        at = position + field_offset + width - 1 - bit // 8
        data[at] ^= 1 << (bit % 8)
        f.seek(0)
        f.write(data)


def epochs_log(tmp_path, config: LogConfig = CONFIG) -> tuple[str, str]:
    """Five batches of 8 records, epochs 0 0 1 1 2 (offsets 0..39), abandoned uncleanly."""
    path = str(tmp_path / "t-0")
    log = Log(path, config)
    for i, epoch in enumerate((0, 0, 1, 1, 2)):
        log.append_as_leader(producer_batch(8, tag=i), epoch, NOW)
    segment = log.active_segment.log_path
    abandon(log)
    return path, segment


@pytest.mark.parametrize("batch, bit", [(4, 0), (4, 20), (2, 3), (0, 30)])
def test_a_flipped_leader_epoch_in_the_recovered_tail_is_corruption_and_truncated_there(tmp_path, batch, bit):
    path, segment = epochs_log(tmp_path)
    flip_header(segment, batch, 12, 4, bit)
    recovered = Log(path, CONFIG, had_clean_shutdown=False)
    assert recovered.log_end_offset == batch * 8
    assert all_offsets(recovered) == list(range(batch * 8))
    assert recovered.latest_epoch == (-1, 0, 0, 1, 1)[batch], "no epoch the log does not hold"


@pytest.mark.parametrize("batch, bit", [(4, 0), (4, 40), (1, 2), (0, 9)])
def test_a_flipped_base_offset_in_the_recovered_tail_is_corruption_and_truncated_there(tmp_path, batch, bit):
    path, segment = epochs_log(tmp_path)
    flip_header(segment, batch, 0, 8, bit)
    recovered = Log(path, CONFIG, had_clean_shutdown=False)
    assert recovered.log_end_offset == batch * 8, "no log end past what the log holds"
    assert all_offsets(recovered) == list(range(batch * 8))


def test_without_a_leader_epoch_checkpoint_recovery_takes_the_epochs_from_the_batches(tmp_path):
    path, _ = epochs_log(tmp_path)
    os.unlink(os.path.join(path, "leader-epoch-checkpoint"))
    recovered = Log(path, CONFIG, had_clean_shutdown=False)
    assert recovered.log_end_offset == 40
    assert recovered.leader_epoch_cache.entries() == [(0, 0), (1, 16), (2, 32)]


def test_a_compacted_log_may_skip_offsets_a_log_of_cleanup_policy_delete_may_not(tmp_path):
    """Offsets run on without gaps in a log nobody compacts; a compacted one keeps its gaps."""
    for policy, end in (("compact", 28), ("delete", 8)):
        config = LogConfig(segment_bytes=6000, index_interval_bytes=500, cleanup_policy=policy)
        path = str(tmp_path / policy / "t-0")
        log = Log(path, config)
        for base in (0, 20):  # what a follower copies from a compacted leader: 0..7, 20..27
            batch = bytearray(producer_batch(8))
            batch[0:8] = base.to_bytes(8, "big")
            batch[12:16] = (0).to_bytes(4, "big")
            log.append_as_follower(batch, NOW)
        abandon(log)
        assert Log(path, config, had_clean_shutdown=False).log_end_offset == end, policy
