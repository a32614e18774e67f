"""Corrupt files are never trusted. An index whose last entries do not fit its log is rebuilt
from the log; a checkpoint, partition.metadata, meta.properties or leader-epoch-checkpoint
that does not parse stops the log dir from loading with an error naming the file (Kafka's
CheckpointFile raises and fails the log dir: it rebuilds none of them), so that start-up can
say which file to look at instead of running on offsets it made up.

Flipped bits in segments are recovery's (tests/engine/test_recovery.py): from the recovery
point on after an unclean shutdown, truncated at the last good batch.
"""
import os
import struct

import pytest

from engine.checkpoint import read_offset_checkpoint, read_partition_metadata, read_properties
from engine.config import LogConfig
from engine.errors import LogDirError
from engine.log import Log
from engine.manager import (
    LOG_START_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_CHECKPOINT,
    LogManager,
    format_log_dir,
)
from ext.batch import decode_records, iter_batches
from tests.engine.batches import BASE_TS, producer_batch

NOW = BASE_TS + 1000
CONFIG = LogConfig(segment_bytes=6000, index_interval_bytes=500)


def build(path: str, batches: int = 20) -> Log:
    log = Log(path, CONFIG)
    for i in range(batches):
        log.append_as_leader(producer_batch(8, tag=i), 1, NOW)
    return log


def every_offset(log: Log) -> list[int]:
    out, offset = [], log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 30).records.read()
        found = [r.offset for h in iter_batches(data, check_crc=True)
                 for r in decode_records(data, h.position)]
        out += found
        offset = found[-1] + 1
    return out


def patch(path: str, position: int, data: bytes) -> None:
    with open(path, "r+b") as f:
        f.seek(position)
        f.write(data)


def last_offset_entry(path: str) -> tuple[int, int, int]:
    """(file position, relative offset, position) of the last 8-byte offset index entry."""
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        f.seek(size - 8)
        relative, position = struct.unpack(">ii", f.read(8))
    return size - 8, relative, position


# ---- indexes ------------------------------------------------------------------------------

@pytest.mark.parametrize("segment", [0, -1], ids=["closed-segment", "active-segment"])
@pytest.mark.parametrize("damage", ["position-past-the-log", "position-inside-a-batch",
                                    "offset-past-the-segment"])
def test_index_whose_last_entry_does_not_fit_the_log_is_rebuilt_after_clean_shutdown(
        tmp_path, segment, damage, caplog):
    path = str(tmp_path / "t-0")
    log = build(path)
    log.close()
    victim = log.segments[segment]
    at, relative, position = last_offset_entry(victim.offset_index.path)
    if damage == "position-past-the-log":
        patch(victim.offset_index.path, at + 4, struct.pack(">i", position + (1 << 20)))
    elif damage == "position-inside-a-batch":
        patch(victim.offset_index.path, at + 4, struct.pack(">i", position + 3))
    else:
        patch(victim.offset_index.path, at, struct.pack(">i", relative + 1000))
    again = Log(path, CONFIG, had_clean_shutdown=True)
    assert "rebuilding indexes" in caplog.text and victim.offset_index.path in caplog.text
    assert again.log_end_offset == 160
    assert every_offset(again) == list(range(160))
    for target in range(0, 160, 9):
        first = next(iter_batches(again.read(target, 1).records.read()))
        assert first.base_offset <= target <= first.last_offset
    again.close()


def test_time_index_naming_an_offset_past_its_segment_is_rebuilt(tmp_path, caplog):
    path = str(tmp_path / "t-0")
    log = build(path)
    log.close()
    victim = log.segments[0]
    size = os.path.getsize(victim.time_index.path)
    next_base = log.segments[1].base_offset
    patch(victim.time_index.path, size - 4, struct.pack(">i", next_base + 5 - victim.base_offset))
    again = Log(path, CONFIG, had_clean_shutdown=True)
    assert "rebuilding indexes" in caplog.text and victim.time_index.path in caplog.text
    assert again.segments[0].time_index.last_entry[1] < next_base
    # producer_batch(8) stamps record i of every batch BASE_TS + i: the first at or after
    # BASE_TS + 7 is offset 7, in the damaged segment.
    assert again.fetch_offset_by_timestamp(BASE_TS + 7) == (7, BASE_TS + 7)
    again.close()


@pytest.mark.parametrize("garbage", [
    b"\xff" * 13,  # not whole entries
    struct.pack(">iiii", 5, 5, 1, 2),  # one entry in order, pointing inside the first batch
])
def test_garbage_index_file_is_rebuilt_and_never_used(tmp_path, garbage):
    path = str(tmp_path / "t-0")
    log = build(path)
    log.close()
    victim = log.segments[0]
    with open(victim.offset_index.path, "wb") as f:
        f.write(garbage)
    again = Log(path, CONFIG, had_clean_shutdown=True)
    assert every_offset(again) == list(range(160))
    assert again.segments[0].offset_index.entries == victim.offset_index.entries
    again.close()


# ---- checkpoints and small files ------------------------------------------------------------

@pytest.mark.parametrize("text, why", [
    (b"0\n1\norders 0 \xff\xfe\n", "not UTF-8"),
    (b"0\n1_0\n", "count is not an integer"),
    (b"0\n1\norders \xd9\xa1 5\n", "must be integers"),  # an Arabic-Indic digit: Java refuses it
    (b"0\n1\norders 0 5 extra\n", "expected 'topic partition offset'"),
    (b"0\n2\norders 0 5\n", "count 2 but 1 entries"),
    (b"1\n0\n", "unsupported version"),
    (b"", "missing version or count line"),
])
def test_unparsable_offset_checkpoint_names_the_file(tmp_path, text, why):
    path = str(tmp_path / "replication-offset-checkpoint")
    with open(path, "wb") as f:
        f.write(text)
    with pytest.raises(ValueError, match=why) as e:
        read_offset_checkpoint(path)
    assert path in str(e.value)


@pytest.mark.parametrize("text, why", [
    (b"\xff\xfe", "not UTF-8"),
    (b"version: 1\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ\n", "version '1'"),
    (b"version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAA\n", "not a Kafka uuid"),
    (b"version: 0\n", "not a Kafka uuid"),
])
def test_unparsable_partition_metadata_names_the_file(tmp_path, text, why):
    path = str(tmp_path / "partition.metadata")
    with open(path, "wb") as f:
        f.write(text)
    with pytest.raises(ValueError, match=why) as e:
        read_partition_metadata(path)
    assert path in str(e.value)


def test_binary_meta_properties_names_the_file(tmp_path):
    path = str(tmp_path / "meta.properties")
    with open(path, "wb") as f:
        f.write(b"node.id=1\n\xff\xfe\n")
    with pytest.raises(ValueError, match="not UTF-8") as e:
        read_properties(path)
    assert path in str(e.value)


def formatted_dir_with_a_log(tmp_path) -> str:
    d = str(tmp_path / "d")
    format_log_dir(d, "c", 1)
    manager = LogManager([d])
    manager.startup()
    log = manager.get_or_create_log("orders", 0, topic_id="AAAAAAAAAAAAAAAAAAAAAQ")
    log.append_as_leader(producer_batch(5), 0, NOW)
    log.update_high_watermark(5)
    manager.shutdown()
    return d


@pytest.mark.parametrize("name", [REPLICATION_CHECKPOINT, RECOVERY_POINT_CHECKPOINT, LOG_START_CHECKPOINT,
                                  "orders-0/leader-epoch-checkpoint", "orders-0/partition.metadata",
                                  "meta.properties"])
def test_a_corrupt_file_stops_the_log_dir_from_loading_and_is_named(tmp_path, name):
    d = formatted_dir_with_a_log(tmp_path)
    path = os.path.join(d, name)
    with open(path, "r+b") as f:
        f.seek(0)
        f.write(b"\xff")  # the first byte of the version: now neither a number nor UTF-8
    with pytest.raises((ValueError, LogDirError)) as e:
        LogManager([d]).startup()
    assert path in str(e.value) or name.split("/")[-1] in str(e.value)
