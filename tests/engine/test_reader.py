"""The read-only seam: a partition directory read without any writer state."""
import os
import subprocess
import sys

import pytest

from engine.config import LogConfig
from engine.log import Log
from engine.reader import PartitionReader, parse_partition_dir
from ext.batch import decode_records
from ext.errors import CorruptRecordError
from tests.engine.batches import BASE_TS, producer_batch

NOW = BASE_TS + 1000


@pytest.fixture
def live_log(tmp_path):
    log = Log(str(tmp_path / "events-3"), LogConfig(segment_bytes=3000, index_interval_bytes=400))
    for i in range(25):
        log.append_as_leader(producer_batch(6, tag=i), 0, NOW)
    yield log
    log.close()


def read_offsets(reader, start=0, end=None):
    return [r.offset for h, data in reader.batches(start, end) for r in decode_records(data)
            if r.offset >= start and (end is None or r.offset < end)]


def test_reader_sees_every_batch_of_a_live_log(live_log):
    reader = PartitionReader(live_log.dir)
    assert (reader.topic, reader.partition) == ("events", 3)
    assert reader.base_offsets == [s.base_offset for s in live_log.segments]
    assert read_offsets(reader) == list(range(150))


@pytest.mark.parametrize("start,end", [(0, 1), (37, 99), (149, None), (60, 61), (0, 150)])
def test_reader_ranges_start_at_the_batch_holding_start(live_log, start, end):
    reader = PartitionReader(live_log.dir)
    batches = list(reader.batches(start, end))
    assert batches[0][0].base_offset <= start <= batches[0][0].last_offset
    assert read_offsets(reader, start, end) == list(range(start, 150 if end is None else end))


def test_reader_ignores_a_torn_tail_written_after_it_opened(live_log):
    reader = PartitionReader(live_log.dir)
    with open(live_log.active_segment.log_path, "ab") as f:
        f.write(producer_batch(3)[:50])
    assert read_offsets(PartitionReader(live_log.dir)) == list(range(150))
    assert read_offsets(reader) == list(range(150))


def test_reader_reports_the_file_and_position_of_a_corrupt_batch(live_log):
    path = live_log.segments[1].log_path
    with open(path, "r+b") as f:
        f.seek(80)
        f.write(b"\xff\xff")
    with pytest.raises(CorruptRecordError) as err:
        list(PartitionReader(live_log.dir).batches())
    assert path in str(err.value)


def test_partition_dir_names():
    assert parse_partition_dir("my.topic_1-12") == ("my.topic_1", 12)
    assert parse_partition_dir("t-0.5d6c4b-delete") is None
    assert parse_partition_dir("t-0-future") is None
    assert parse_partition_dir("meta.properties") is None


@pytest.mark.processes
def test_reader_imports_no_writer_module():
    code = (
        "import sys; import engine.reader; "
        "bad = [m for m in ('engine.log', 'engine.segment', 'engine.manager', 'engine.recovery') "
        "if m in sys.modules]; print(bad)"
    )
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    out = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_reader_index_lookup_matches_the_writers_index_including_a_preallocated_tail(live_log):
    """The reader reads the active segment's preallocated .index with pread (no mmap: a
    writer trimming it must not SIGBUS the reader) and finds the same floor entries."""
    reader = PartitionReader(live_log.dir)
    for i, segment in enumerate(live_log.segments):
        assert os.path.getsize(segment.offset_index.path) >= segment.offset_index.entries * 8
        for target in range(segment.base_offset, segment.base_offset + 40):
            assert reader.start_position(i, target) == segment.offset_index.lookup(target)[1]


def test_reader_of_an_empty_partition_yields_nothing(tmp_path):
    log = Log(str(tmp_path / "empty-0"))
    assert list(PartitionReader(log.dir).batches()) == []
    log.close()


def test_a_segment_deleted_while_the_reader_opens_is_left_out(tmp_path, monkeypatch):
    import engine.reader as reader
    d = tmp_path / "t-0"
    d.mkdir()
    for base in (0, 10, 20):
        (d / f"{base:020d}.log").write_bytes(b"")
    listing = reader.segment_base_offsets(str(d))
    (d / f"{0:020d}.log").unlink()  # retention, between the listing and the sizes
    monkeypatch.setattr(reader, "segment_base_offsets", lambda path: listing)
    opened = reader.PartitionReader(str(d))
    assert opened.base_offsets == [10, 20] and opened.sizes == [0, 0]


def _mixed_segment(tmp_path):
    """A segment of small batches (a few hundred bytes) and batches larger than a read chunk."""
    log = Log(str(tmp_path / "mixed-0"))
    for i in range(40):
        big = i % 7 == 3
        batch = producer_batch(300, value_size=1000, tag=i) if big else producer_batch(3, tag=i)
        log.append_as_leader(batch, 0, NOW)
    segment = log.segments[0]
    sizes = [p.size for p in _batches(segment)]
    return log, segment, sizes


def _batches(segment):
    from engine.reader import search_for_offset
    out, pos = [], 0
    while (b := search_for_offset(segment.fd, 0, pos, segment.size)) is not None:
        out.append(b)
        pos = b.position + b.size
    return out


def test_whole_batches_size_is_the_longest_run_of_whole_batches_that_fits(tmp_path):
    from engine.reader import whole_batches_size
    log, segment, sizes = _mixed_segment(tmp_path)
    assert max(sizes) > 256 * 1024 > min(sizes)
    starts = [sum(sizes[:i]) for i in range(len(sizes))]
    for first in (0, 1, 3, 4, 17):
        for max_size in (0, 1, sizes[first] - 1, sizes[first], sizes[first] + 1, 300_000, 1 << 20, 5 << 20):
            fit = 0
            for size in sizes[first:]:
                if fit + size > max_size:
                    break
                fit += size
            assert whole_batches_size(segment.fd, starts[first], max_size) == fit, (first, max_size)
    log.close()


def test_whole_batches_size_does_not_read_the_records_of_large_batches(tmp_path, monkeypatch):
    """A replica fetch of a megabyte of large batches used to read the whole megabyte into memory
    just to find where its last whole batch ends."""
    import engine.reader as reader
    log, segment, sizes = _mixed_segment(tmp_path)
    read = []
    real = os.pread
    monkeypatch.setattr(reader.os, "pread", lambda fd, n, pos: read.append(n) or real(fd, n, pos))
    start = sum(sizes[:3])  # a large batch first
    assert reader.whole_batches_size(segment.fd, start, 1 << 20) > 256 * 1024
    assert sum(read) < 128 * 1024
    log.close()


def test_a_batch_corrupted_after_recovery_is_served_not_skipped(tmp_path):
    """Kafka's read path takes a batch's offsets and size from its header without checking the
    rest: the corrupt batch reaches the client, whose CRC check refuses it, and the batches
    after it stay reachable. Were it skipped, a fetch at its offsets would silently get the
    next batch's records."""
    from engine.reader import search_for_offset
    log = Log(str(tmp_path / "rot-0"))
    for i in range(3):
        log.append_as_leader(producer_batch(3, tag=i), 0, NOW)
    segment = log.segments[0]
    before = _batches(segment)
    middle = before[1]
    rot = os.open(segment.log_path, os.O_WRONLY)  # the segment's own fd appends
    try:
        os.pwrite(rot, b"\x07", middle.position + 16)  # magic: bit rot after recovery
    finally:
        os.close(rot)
    found = search_for_offset(segment.fd, middle.base_offset, 0, segment.size)
    assert found == middle, "the corrupt batch is where its offsets are"
    after = search_for_offset(segment.fd, before[2].base_offset, 0, segment.size)
    assert after == before[2], "the batch after it is still found"
    log.close()
