"""read_committed over transactional data, from the files alone (no Spark needed): the last
stable offset (spark/transactions.py) checked against the broker's own (engine.log.Log's),
aborted batches dropped as Kafka's consumer drops them, and micro-batches ending at the LSO.
Logs are written with engine/ as a partition leader writes them: transactional batches from
producers, markers from the coordinator."""
from __future__ import annotations

import os
import pickle
import random

import pytest
from pyspark.sql.datasource import GreaterThanOrEqual

from engine.producer_state import SNAPSHOT_SUFFIX
from spark.errors import StromSparkError
from spark.layout import Layout
from spark.options import READ_COMMITTED, READ_UNCOMMITTED
from spark.planning import ReadSettings, plan_ranges
from spark.reader import READ_STATS, read_range
from spark.source import StromDataSource
from spark.stream import StromStreamReader
from spark.transactions import last_stable_offset, snapshot_offsets
from tests.spark.conftest import BASE_TS, varied_records


def records(n: int, tag: str):
    return [(f"{tag}-k{i}".encode(), f"{tag}-{i}".encode(), [], BASE_TS + i) for i in range(n)]


def rows(path, **options) -> list[tuple[int, int, bytes]]:
    """(partition, offset, value) of every row a batch read returns, each LogRange pickled as
    Spark ships it to an executor."""
    source = StromDataSource({"path": path, **options})
    reader = source.reader(source.schema())
    out = []
    for p in reader.partitions():
        for batch in reader.read(pickle.loads(pickle.dumps(p))):
            out.extend(zip(batch.column("partition").to_pylist(), batch.column("offset").to_pylist(),
                           batch.column("value").to_pylist()))
    return sorted(out)


def as_rows(written) -> list[tuple[int, int, bytes]]:
    return sorted((w.partition, w.offset, w.value) for w in written)


def test_read_committed_stops_at_the_first_open_transaction(broker):
    broker.create("t")
    plain = broker.append("t", 0, records(3, "plain"))
    committed = broker.append_txn("t", 0, 1, records(2, "c"))
    broker.end_txn("t", 0, 1, commit=True)
    open_ = broker.append_txn("t", 0, 2, records(2, "open"))
    after = broker.append("t", 0, records(2, "after"))  # not transactional: still past the LSO
    broker.commit()
    log = broker.log("t", 0)
    assert log.last_stable_offset == open_[0].offset
    state = Layout((broker.log_dir,)).state(("t", 0), READ_COMMITTED)
    assert state.last_stable_offset == state.latest == open_[0].offset
    assert state.high_watermark == log.high_watermark
    assert rows(broker.log_dir, subscribe="t") == as_rows(plain + committed)
    assert rows(broker.log_dir, subscribe="t", isolation="read_uncommitted") == \
        as_rows(plain + committed + open_ + after)
    broker.end_txn("t", 0, 2, commit=True)
    broker.commit()
    assert Layout((broker.log_dir,)).state(("t", 0), READ_COMMITTED).latest == log.log_end_offset
    assert rows(broker.log_dir, subscribe="t") == as_rows(plain + committed + open_ + after)


def test_a_marker_past_the_high_watermark_does_not_end_the_transaction(broker):
    broker.create("t")
    broker.append("t", 0, records(2, "plain"))
    open_ = broker.append_txn("t", 0, 5, records(3, "x"))
    broker.commit()  # the checkpointed high watermark is before the marker
    broker.end_txn("t", 0, 5, commit=True)
    state = Layout((broker.log_dir,)).state(("t", 0), READ_COMMITTED)
    assert state.latest == open_[0].offset
    assert Layout((broker.log_dir,)).state(("t", 0), READ_UNCOMMITTED).latest == open_[-1].offset + 1


def test_the_lso_comes_from_the_newest_snapshot_below_the_hw_and_the_batches_after_it(broker):
    """Small segments: every roll writes a producer snapshot, so the open transaction is known
    from a snapshot's CurrentTxnFirstOffset, not from its first batch; without snapshots the
    same LSO comes from a scan from the log start."""
    broker.create("t", segment_bytes=400)
    broker.append("t", 0, records(3, "plain"))
    opened = broker.append_txn("t", 0, 9, records(2, "long"))
    for i in range(12):
        pid = 100 + i
        broker.append_txn("t", 0, pid, records(2, f"p{i}"))
        broker.end_txn("t", 0, pid, commit=i % 2 == 0)
        broker.append_txn("t", 0, 9, records(1, f"l{i}"))
    broker.commit()
    log = broker.log("t", 0)
    snapshots = snapshot_offsets(log.dir)
    assert len(log.segments) >= 4 and any(opened[0].offset < s <= log.high_watermark for s in snapshots)
    reader = Layout((broker.log_dir,)).state(("t", 0), READ_COMMITTED).reader
    assert last_stable_offset(reader, log.log_start_offset, log.high_watermark) == \
        log.last_stable_offset == opened[0].offset
    for offset in snapshots:
        os.unlink(os.path.join(log.dir, f"{offset:020d}{SNAPSHOT_SUFFIX}"))
    assert last_stable_offset(reader, log.log_start_offset, log.high_watermark) == opened[0].offset


def test_a_corrupt_snapshot_is_passed_over(broker):
    broker.create("t", segment_bytes=300)
    opened = broker.append_txn("t", 0, 3, records(2, "o"))
    for i in range(8):
        broker.append("t", 0, records(2, f"x{i}"))
    broker.commit()
    log = broker.log("t", 0)
    snapshots = snapshot_offsets(log.dir)
    assert snapshots
    with open(os.path.join(log.dir, f"{snapshots[-1]:020d}{SNAPSHOT_SUFFIX}"), "r+b") as f:
        f.seek(8)
        f.write(b"\xff\xff")
    reader = Layout((broker.log_dir,)).state(("t", 0), READ_COMMITTED).reader
    assert last_stable_offset(reader, log.log_start_offset, log.high_watermark) == opened[0].offset


def test_aborted_batches_are_not_rows(broker):
    broker.create("t", 2, segment_bytes=700, index_interval_bytes=150)
    kept = []
    kept += broker.append("t", 0, records(2, "plain"))
    broker.append_txn("t", 0, 1, records(3, "a1"))  # aborted
    kept += broker.append_txn("t", 0, 2, records(2, "c2"))  # committed, interleaved
    broker.append_txn("t", 0, 1, records(2, "a1b"))
    broker.end_txn("t", 0, 1, commit=False)
    kept += broker.append_txn("t", 0, 2, records(1, "c2b"))
    broker.end_txn("t", 0, 2, commit=True)
    kept += broker.append_txn("t", 0, 1, records(2, "c1"))  # the same producer, committed after its abort
    broker.end_txn("t", 0, 1, commit=True)
    kept += broker.append("t", 1, records(2, "other"))
    broker.commit()
    everything = [w for w in broker.written]
    assert rows(broker.log_dir, subscribe="t") == as_rows(kept)
    assert rows(broker.log_dir, subscribe="t", isolation="read_uncommitted") == as_rows(everything)
    assert rows(broker.log_dir, subscribe="t", isolation="log_end") == as_rows(everything)


def test_aborted_data_is_dropped_in_every_split_whatever_offset_it_starts_at(broker):
    """Kafka's consumer rule from any fetch offset: a range that begins inside an aborted
    transaction still drops the rest of it (its .txnindex entry overlaps the range)."""
    broker.create("t", segment_bytes=1200, index_interval_bytes=100)
    rng = random.Random(29)
    kept, open_txns = [], {}
    for i in range(120):
        pid = rng.randrange(1, 5)
        if pid in open_txns and rng.random() < 0.3:
            broker.end_txn("t", 0, pid, commit=(commit := rng.random() < 0.5))
            if commit:
                kept += open_txns.pop(pid)
            else:
                del open_txns[pid]
        elif rng.random() < 0.2:
            kept += broker.append("t", 0, records(rng.randrange(1, 4), f"n{i}"))
        else:
            written = broker.append_txn("t", 0, pid, records(rng.randrange(1, 4), f"t{i}"))
            open_txns.setdefault(pid, []).extend(written)
    for pid in list(open_txns):
        broker.end_txn("t", 0, pid, commit=False)
    broker.commit()
    log = broker.log("t", 0)
    assert len(log.segments) >= 3 and log.last_stable_offset == log.log_end_offset
    assert 0 < len(kept) < len(broker.written), "some transactions aborted"
    expected = sorted(w.offset for w in kept)
    state = Layout((broker.log_dir,)).state(("t", 0), READ_COMMITTED)
    assert state.latest == log.log_end_offset
    for target in (200, 700, 50_000):
        for start in (0, 7, 33, 90):
            ranges = plan_ranges([(state, start, state.latest)], ReadSettings(target, read_committed=True))
            got = [o for r in ranges for b in read_range(pickle.loads(pickle.dumps(r)))
                   for o in b.column("offset").to_pylist()]
            assert got == [o for o in expected if o >= start], (target, start)


def test_aborted_batches_are_never_decoded(broker):
    broker.create("t")
    broker.append_txn("t", 0, 1, varied_records(50, tag="aborted", value_size=200))
    broker.end_txn("t", 0, 1, commit=False)
    kept = broker.append("t", 0, records(2, "kept"))
    broker.commit()
    READ_STATS.reset()
    assert rows(broker.log_dir, subscribe="t") == as_rows(kept)
    committed_bytes = READ_STATS.bytes_decoded
    READ_STATS.reset()
    rows(broker.log_dir, subscribe="t", isolation="read_uncommitted")
    assert committed_bytes < READ_STATS.bytes_decoded / 10


def test_a_transaction_open_at_a_micro_batch_end_is_read_whole_in_a_later_one(broker):
    broker.create("t")
    first = broker.append("t", 0, records(2, "plain"))
    txn = broker.append_txn("t", 0, 4, records(2, "t1"))
    broker.commit()
    source = StromDataSource({"path": broker.log_dir, "subscribe": "t", "startingOffsets": "earliest"})
    reader: StromStreamReader = source.streamReader(source.schema())
    start = reader.initialOffset()
    end = reader.latestOffset(start, None)
    assert end == {"t": {"0": txn[0].offset}}

    def read(a, b):
        return sorted(w for p in reader.partitions(a, b) for batch in reader.read(p)
                      for w in batch.column("value").to_pylist())

    assert read(start, end) == sorted(w.value for w in first)
    txn += broker.append_txn("t", 0, 4, records(2, "t2"))
    broker.commit()
    assert reader.latestOffset(end, None) == end, "still open: the micro-batch waits"
    broker.end_txn("t", 0, 4, commit=True)
    broker.commit()
    later = reader.latestOffset(end, None)
    assert later == {"t": {"0": broker.log("t", 0).log_end_offset}}
    assert read(end, later) == sorted(w.value for w in txn)


@pytest.mark.parametrize("isolation", ["read_committed", "read_uncommitted"])
def test_control_batches_are_never_rows(broker, isolation):
    broker.create("t")
    broker.append_txn("t", 0, 1, records(1, "a"))
    marker = broker.end_txn("t", 0, 1, commit=True)
    broker.commit()
    offsets = [o for _, o, _ in rows(broker.log_dir, subscribe="t", isolation=isolation)]
    assert offsets == [0] and marker == 1


def test_pushed_offset_filters_keep_dropping_aborted_batches(broker):
    """pushFilters=true narrows each range by offset; a range that starts inside an aborted
    transaction still drops it."""
    broker.create("t")
    kept = broker.append("t", 0, records(2, "plain"))
    aborted = broker.append_txn("t", 0, 1, records(2, "a"))
    aborted += broker.append_txn("t", 0, 1, records(2, "a2"))
    broker.end_txn("t", 0, 1, commit=False)
    kept += broker.append("t", 0, records(2, "after"))
    broker.commit()
    source = StromDataSource({"path": broker.log_dir, "subscribe": "t", "pushFilters": "true"})
    reader = source.reader(source.schema())
    lo = aborted[1].offset
    assert list(reader.pushFilters([GreaterThanOrEqual(("offset",), lo)])) == []
    got = sorted(o for p in reader.partitions() for b in reader.read(p)
                 for o in b.column("offset").to_pylist())
    assert got == [w.offset for w in kept if w.offset >= lo]


def test_a_transaction_open_below_the_log_start_holds_the_lso_at_the_log_start(broker):
    """DeleteRecords is bounded by the high watermark, not the LSO: a transaction that began
    below the new log start still holds read_committed there, as the broker's LSO does."""
    broker.create("t", segment_bytes=400)
    broker.append_txn("t", 0, 6, records(2, "open"))
    for i in range(10):
        broker.append("t", 0, records(2, f"x{i}"))
    broker.commit()
    log = broker.log("t", 0)
    broker.delete_records("t", 0, 5)
    assert log.log_start_offset == 5 and log.segments[0].base_offset < 5
    assert log.last_stable_offset == 5
    assert Layout((broker.log_dir,)).state(("t", 0), READ_COMMITTED).latest == 5
    for offset in snapshot_offsets(log.dir):  # and found by a scan from the first segment
        os.unlink(os.path.join(log.dir, f"{offset:020d}{SNAPSHOT_SUFFIX}"))
    assert Layout((broker.log_dir,)).state(("t", 0), READ_COMMITTED).latest == 5
    assert rows(broker.log_dir, subscribe="t") == []


def test_a_corrupt_batch_below_the_high_watermark_names_its_segment(broker):
    broker.create("t", segment_bytes=300)
    broker.append_txn("t", 0, 1, records(2, "a"))
    second = broker.append("t", 0, records(2, "b"))
    for i in range(6):
        broker.append("t", 0, records(2, f"c{i}"))
    broker.commit()
    log = broker.log("t", 0)
    assert len(log.segments) >= 3 and snapshot_offsets(log.dir)
    for offset in snapshot_offsets(log.dir):  # the scan starts at the first segment
        os.unlink(os.path.join(log.dir, f"{offset:020d}{SNAPSHOT_SUFFIX}"))
    position = log.segments[0].translate_offset(second[0].offset).position
    with open(os.path.join(log.dir, f"{0:020d}.log"), "r+b") as f:
        f.seek(position + 16)  # the magic byte
        f.write(b"\x09")
    with pytest.raises(StromSparkError, match=r"corrupt segment .*00000000000000000000\.log"):
        Layout((broker.log_dir,)).state(("t", 0), READ_COMMITTED)
