"""Producer state snapshots: Kafka's ``<20-digit offset>.snapshot`` files in the partition dir.

A snapshot at offset X holds the idempotent producer state of the batches below X, in Kafka's
ProducerSnapshot v1 layout (int16 version, uint32 CRC32C of what follows, then the entries).
A log writes one at each roll (at the new segment's base) and one at its log end when it
closes; it loads the newest one at or below its log end and replays only the batches after
it. A truncation drops the snapshots above the cut and reloads from the newest one below.
Retention drops those below the first segment. A corrupt snapshot is deleted and an older
one (or the whole log) used.

Kafka keeps one batch per producer in a snapshot and the last entry of a producer id wins
when it reads one; a Strom snapshot lists a producer's last five batches oldest first, so
Kafka reads the newest and Strom keeps all five (a retry of any of them after a restart is
still a duplicate).
"""
from __future__ import annotations

import os
import random
import struct

import engine.log as engine_log
from engine.config import LogConfig
from engine.log import Log
from ext.crc import crc32c
from tests.engine.test_producer_state_rebuild import follower_batch, history_log, state, write_history
from tests.engine.test_recovery import abandon

ENTRY = struct.Struct(">qhiqiqiq")  # Kafka's ProducerSnapshot v1 ProducerEntry


def snapshots(log_dir: str) -> list[int]:
    return sorted(int(n[:20]) for n in os.listdir(log_dir) if n.endswith(".snapshot"))


def read_kafka_snapshot(path: str) -> list[tuple]:
    """Parsed as Kafka's ProducerStateManager.readSnapshot does."""
    data = open(path, "rb").read()
    version, crc = struct.unpack_from(">hI", data, 0)
    assert version == 1
    assert crc == crc32c(data[6:]), "CRC32C of everything after the CRC field"
    (count,) = struct.unpack_from(">i", data, 6)
    assert len(data) == 10 + count * ENTRY.size
    return [ENTRY.unpack_from(data, 10 + i * ENTRY.size) for i in range(count)]


class ScanCounter:
    """Counts the chunks the log's producer-state replay reads (the real scanner runs)."""

    def __init__(self, monkeypatch):
        self.chunks = 0
        real = engine_log.iter_file_chunks

        def counting(*args, **kwargs):
            for item in real(*args, **kwargs):
                self.chunks += 1
                yield item

        monkeypatch.setattr(engine_log, "iter_file_chunks", counting)


def test_a_closed_log_leaves_a_kafka_snapshot_at_its_log_end(tmp_path):
    path = str(tmp_path / "t-0")
    log = Log(path, LogConfig())
    for i in range(7):
        log.append_as_follower(follower_batch(log.log_end_offset, 3, pid=42, epoch=2, seq=3 * i,
                                              ts=1000 + i), 0)
    log.append_as_follower(follower_batch(log.log_end_offset, 1, pid=7, epoch=0, seq=0, ts=5000), 0)
    log.close()
    assert snapshots(path) == [22]
    rows = read_kafka_snapshot(os.path.join(path, f"{22:020d}.snapshot"))
    # (producer id, epoch, last sequence, last offset, offset delta, timestamp,
    #  coordinator epoch, current transaction's first offset)
    assert [r for r in rows if r[0] == 42] == [
        (42, 2, 3 * i + 2, 3 * i + 2, 2, 1006 + 2, -1, -1) for i in range(2, 7)]
    assert [r for r in rows if r[0] == 7] == [(7, 0, 0, 21, 0, 5000, -1, -1)]
    last = {r[0]: r for r in rows}  # Kafka keeps the last entry of each producer id
    assert last[42][2:4] == (20, 20)


def test_a_clean_reopen_loads_the_snapshot_and_scans_nothing(tmp_path, monkeypatch):
    path = str(tmp_path / "t-0")
    log = history_log(path, 1, 300)
    live = state(log)
    log.close()
    counter = ScanCounter(monkeypatch)
    reopened = Log(path, LogConfig(segment_bytes=4096), recovery_point=reopened_end(path))
    assert counter.chunks == 0
    assert state(reopened) == live, "all five batches of each producer come back"
    reopened.close()


def reopened_end(path: str) -> int:
    return snapshots(path)[-1]


def test_a_roll_snapshots_at_the_new_segment_and_a_crash_replays_only_what_follows(tmp_path, monkeypatch):
    path = str(tmp_path / "t-0")
    log = history_log(path, 2, 300)
    bases = [s.base_offset for s in log.segments]
    assert len(bases) > 4
    assert snapshots(path) == bases[1:], "one at each roll"
    live = state(log)
    abandon(log)
    counter = ScanCounter(monkeypatch)
    reopened = Log(path, LogConfig(segment_bytes=4096), recovery_point=bases[-1], had_clean_shutdown=False)
    assert counter.chunks <= 1, "the active segment only"
    assert state(reopened) == live
    reopened.close()


def test_a_truncation_reloads_from_the_snapshot_below_the_cut_and_drops_those_above(tmp_path, monkeypatch):
    path = str(tmp_path / "t-0")
    log = Log(path, LogConfig(segment_bytes=4096))
    rng = random.Random(3)
    write_history(log, rng, 150)
    cut = log.log_end_offset
    below = state(log)
    write_history(log, rng, 150)
    above = [o for o in snapshots(path) if o > cut]
    assert above
    counter = ScanCounter(monkeypatch)
    log.truncate_to(cut)
    assert state(log) == below
    assert counter.chunks <= 2, "from the last snapshot below the cut, not the whole log"
    assert all(o <= cut for o in snapshots(path))
    log.close()


def test_a_corrupt_snapshot_is_deleted_and_an_older_one_used(tmp_path):
    path = str(tmp_path / "t-0")
    log = history_log(path, 4, 300)
    live = state(log)
    abandon(log)
    newest = os.path.join(path, f"{snapshots(path)[-1]:020d}.snapshot")
    with open(newest, "r+b") as f:  # flip a bit in an entry: the CRC no longer matches
        f.seek(20)
        byte = f.read(1)
        f.seek(20)
        f.write(bytes([byte[0] ^ 0x10]))
    count = len(snapshots(path))
    reopened = Log(path, LogConfig(segment_bytes=4096), recovery_point=0, had_clean_shutdown=False)
    assert state(reopened) == live
    assert len(snapshots(path)) == count - 1 and not os.path.exists(newest)
    reopened.close()


def test_a_torn_snapshot_is_not_trusted(tmp_path):
    path = str(tmp_path / "t-0")
    log = history_log(path, 5, 100, LogConfig())
    live = state(log)
    log.close()
    only = os.path.join(path, f"{snapshots(path)[-1]:020d}.snapshot")
    os.truncate(only, os.path.getsize(only) - 3)
    reopened = Log(path, LogConfig(), recovery_point=0, had_clean_shutdown=False)
    assert state(reopened) == live
    assert snapshots(path) == []
    reopened.close()


def test_snapshots_above_the_recovered_log_end_are_dropped(tmp_path):
    path = str(tmp_path / "t-0")
    log = history_log(path, 6, 300)
    bases = [s.base_offset for s in log.segments]
    abandon(log)
    # The last segment is lost; the one before it is cut to nothing.
    os.unlink(os.path.join(path, f"{bases[-1]:020d}.log"))
    os.truncate(os.path.join(path, f"{bases[-2]:020d}.log"), 0)
    reopened = Log(path, LogConfig(segment_bytes=4096), recovery_point=0, had_clean_shutdown=False)
    assert reopened.log_end_offset == bases[-2]
    assert all(o <= reopened.log_end_offset for o in snapshots(path))
    loaded = state(reopened)
    reopened._rebuild_producer_state()  # the whole log, no snapshot: the reference
    assert loaded == state(reopened)
    reopened.close()


def test_retention_drops_the_snapshots_below_the_first_segment(tmp_path):
    path = str(tmp_path / "t-0")
    config = LogConfig(segment_bytes=4096, retention_bytes=8192, file_delete_delay_ms=0)
    log = history_log(path, 7, 300, config)
    log.update_high_watermark(log.log_end_offset)
    assert log.delete_old_segments() > 0
    first = log.segments[0].base_offset
    assert snapshots(path) and min(snapshots(path)) >= first
    log.close()


def test_a_log_restarted_at_a_new_start_drops_every_snapshot(tmp_path):
    path = str(tmp_path / "t-0")
    log = history_log(path, 8, 200)
    assert snapshots(path)
    log.truncate_fully_and_start_at(log.log_end_offset + 100)
    assert snapshots(path) == []
    assert log.producer_state.producers == {}
    log.close()
