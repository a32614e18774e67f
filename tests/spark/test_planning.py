"""Planning without Spark: offset ranges, splits at index entries, and the read path run
in this process (the DataSource and reader objects Spark would pickle), with the work the
reader did counted by READ_STATS."""
from __future__ import annotations

import os
import pickle

import pytest

from ext.batch import COMPRESSION_ZSTD
from spark.errors import StromSparkError
from spark.layout import Layout
from spark.options import READ_COMMITTED, parse_options
from spark.planning import LogRange, ReadSettings, plan_ranges
from spark.reader import READ_STATS, read_range
from spark.source import StromDataSource
from tests.spark.conftest import BASE_TS, varied_records


def plan(path, **options):
    source = StromDataSource({"path": path, **options})
    reader = source.reader(source.schema())
    return reader, reader.partitions()


def offsets_read(reader, partitions):
    out = []
    for p in partitions:
        for batch in reader.read(pickle.loads(pickle.dumps(p))):
            out.extend(zip(batch.column("partition").to_pylist(), batch.column("offset").to_pylist()))
    return sorted(out)


@pytest.fixture
def big(broker):
    """orders-0: 3 segments of ~6 KiB indexed every ~500 bytes (compressed batches);
    orders-1: small; everything committed."""
    broker.create("orders", 2, segment_bytes=6000, index_interval_bytes=500)
    for i in range(40):
        broker.append("orders", 0, varied_records(8, tag=f"a{i}", ts=BASE_TS + 1000 * i),
                      compression=COMPRESSION_ZSTD if i % 2 else 0)
    broker.append("orders", 1, varied_records(8, tag="b"))
    broker.commit()
    return broker


def test_splits_cover_each_range_exactly_once(big):
    state = Layout((big.log_dir,)).state(("orders", 0), READ_COMMITTED)
    assert len(state.reader.base_offsets) >= 3
    for target in (700, 2000, 5000, 50_000):
        for start, end in [(0, 320), (13, 301), (150, 151), (0, 1)]:
            ranges = plan_ranges([(state, start, end)], ReadSettings(target))
            assert ranges[0].start_offset == start and ranges[-1].end_offset == end
            assert all(a.end_offset == b.start_offset for a, b in zip(ranges, ranges[1:]))
            got = [o for r in ranges for b in read_range(r) for o in b.column("offset").to_pylist()]
            assert got == list(range(start, end)), (target, start, end)


def test_a_large_segment_is_cut_at_index_entries(big):
    state = Layout((big.log_dir,)).state(("orders", 0), READ_COMMITTED)
    cut_points = {(state.reader.segment_path(base), pos)
                  for i, base in enumerate(state.reader.base_offsets)
                  for _, pos in state.reader.index_entries(i)}
    ranges = plan_ranges([(state, 0, state.latest)], ReadSettings(1500))
    assert len(ranges) > 2 * len(state.reader.base_offsets)
    for r in ranges:
        for path, start, _ in r.regions:
            assert start == 0 or (path, start) in cut_points
        # At most one index interval over the target, unless a single run is larger.
        assert r.size <= 1500 + 1200 or len(r.regions) == 1


def test_small_segments_are_read_together(big):
    state = Layout((big.log_dir,)).state(("orders", 0), READ_COMMITTED)
    ranges = plan_ranges([(state, 0, state.latest)], ReadSettings(1 << 20))
    assert len(ranges) == 1
    assert [path for path, _, _ in ranges[0].regions] == [
        state.reader.segment_path(b) for b in state.reader.base_offsets]
    assert ranges[0].size == sum(state.reader.sizes)


def test_a_range_inside_a_segment_reads_only_the_bytes_around_it(big):
    state = Layout((big.log_dir,)).state(("orders", 0), READ_COMMITTED)
    (r,) = plan_ranges([(state, 60, 70)], ReadSettings(1 << 20))
    ((path, start, end),) = r.regions
    size = state.reader.sizes[state.reader.segment_for(60)]
    # From the floor index entry of 60 to the entry after the first one past 69: entries
    # come every ~800 bytes here, so at most three intervals of a 5.5 KB segment.
    assert 0 < start and end < size and end - start <= 3 * 800


def test_min_partitions_splits_further(big):
    reader, few = plan(big.log_dir, subscribe="orders")
    assert len(few) == 2
    reader, many = plan(big.log_dir, subscribe="orders", minPartitions="12")
    assert len(many) >= 12
    assert offsets_read(reader, many) == [(0, o) for o in range(320)] + [(1, o) for o in range(8)]


def test_partitions_are_small_and_picklable(big):
    _, partitions = plan(big.log_dir, subscribe="orders", includeHeaders="true")
    for p in partitions:
        assert isinstance(p, LogRange) and p.include_headers
        assert len(pickle.dumps(p)) < 2000
        assert pickle.loads(pickle.dumps(p)) == p


def test_offsets_and_timestamps_resolve_per_partition(big):
    reader, parts = plan(big.log_dir, subscribe="orders", startingOffsets='{"orders":{"0":100,"1":-2}}',
                         endingOffsets='{"orders":{"0":110}}')
    assert offsets_read(reader, parts) == [(0, o) for o in range(100, 110)] + [(1, o) for o in range(8)]
    # Batch i of orders-0 holds offsets 8i.. with timestamps BASE_TS + 1000 i + 10 j (-5).
    reader, parts = plan(big.log_dir, assign='{"orders":[0]}', startingTimestamp=str(BASE_TS + 30_000),
                         endingTimestamp=str(BASE_TS + 32_000))
    assert offsets_read(reader, parts) == [(0, o) for o in range(240, 256)]
    reader, parts = plan(big.log_dir, subscribe="orders",
                         startingOffsetsByTimestamp=f'{{"orders":{{"0":{BASE_TS + 39_065}}}}}')
    assert offsets_read(reader, parts) == [(0, o) for o in range(319, 320)] + [(1, o) for o in range(8)]


def test_a_starting_timestamp_newer_than_every_record(big):
    late = str(BASE_TS + 10**9)
    with pytest.raises(StromSparkError, match="startingTimestamp: no committed record of orders-0 has a "
                                              "timestamp >= .*startingOffsetsByTimestampStrategy=latest"):
        plan(big.log_dir, subscribe="orders", startingTimestamp=late)
    reader, parts = plan(big.log_dir, subscribe="orders", startingTimestamp=late,
                         startingOffsetsByTimestampStrategy="latest")
    assert parts == []


def test_data_loss_below_the_log_start(big):
    big.delete_records("orders", 0, 100)
    with pytest.raises(StromSparkError, match="startingOffsets: offset 50 of orders-0 is gone: the log "
                                              "starts at 100 .*failOnDataLoss=false"):
        plan(big.log_dir, assign='{"orders":[0]}', startingOffsets='{"orders":{"0":50}}')
    reader, parts = plan(big.log_dir, assign='{"orders":[0]}', startingOffsets='{"orders":{"0":50}}',
                         failOnDataLoss="false")
    assert offsets_read(reader, parts) == [(0, o) for o in range(100, 320)]
    with pytest.raises(StromSparkError, match="offset 500 of orders-0 is past its log end offset 320"):
        plan(big.log_dir, assign='{"orders":[0]}', startingOffsets='{"orders":{"0":500}}')
    reader, parts = plan(big.log_dir, assign='{"orders":[0]}', startingOffsets='{"orders":{"0":320}}')
    assert parts == []


def test_a_corrupt_batch_names_the_file_and_position(big):
    reader, parts = plan(big.log_dir, assign='{"orders":[0]}')
    path = os.path.join(big.log_dir, "orders-0", "00000000000000000000.log")
    with open(path, "r+b") as f:
        f.seek(1000)
        f.write(b"\x00\x01\x02\x03\x04\x05")
    with pytest.raises(StromSparkError) as err:
        offsets_read(reader, parts)
    message = str(err.value)
    assert message.startswith(f"strom: corrupt segment {path}: batch at ")
    assert "reading orders-0 offsets [0, " in message


def test_a_segment_shorter_than_planned(big):
    reader, parts = plan(big.log_dir, assign='{"orders":[1]}')
    path = os.path.join(big.log_dir, "orders-1", "00000000000000000000.log")
    os.truncate(path, os.path.getsize(path) - 10)
    with pytest.raises(StromSparkError, match="before the .* bytes it had when the query was planned"):
        offsets_read(reader, parts)


def test_read_stats_count_the_bytes_decoded(big):
    reader, parts = plan(big.log_dir, assign='{"orders":[0]}')
    READ_STATS.reset()
    assert len(offsets_read(reader, parts)) == 320
    whole = READ_STATS.bytes_decoded
    state = Layout((big.log_dir,)).state(("orders", 0), READ_COMMITTED)
    assert whole == sum(state.reader.sizes)
    reader, parts = plan(big.log_dir, assign='{"orders":[0]}', startingOffsets='{"orders":{"0":300}}')
    READ_STATS.reset()
    assert len(offsets_read(reader, parts)) == 20
    assert READ_STATS.bytes_decoded < whole / 5  # the last 6% of the offsets


def test_options_are_checked_when_the_source_is_created(tmp_path, broker):
    with pytest.raises(StromSparkError, match="does not exist"):
        StromDataSource(parse_options_dict(tmp_path / "nowhere"))
    broker.create("orders")
    with pytest.raises(StromSparkError, match="topic 'other' does not exist"):
        StromDataSource({"path": broker.log_dir, "subscribe": "other"})


def parse_options_dict(path):
    options = {"path": str(path), "subscribe": "orders"}
    parse_options(options)
    return options
