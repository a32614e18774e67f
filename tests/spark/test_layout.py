"""Finding partitions on disk and what is committed in each (no Spark needed), and the
read-only index lookups engine/reader.py gained for them, checked against the writer's
own (mmap'd) indexes and Log's answers."""
from __future__ import annotations

import os

import pytest

from engine.config import LogConfig
from engine.log import Log
from engine.reader import (
    PartitionReader,
    index_entries_pread,
    time_index_last_entry_pread,
    time_index_lookup_pread,
)
from ext.batch import build_batch
from ext.index import OffsetIndex, TimeIndex
from spark.errors import StromSparkError
from spark.layout import Layout, find_log_dirs
from spark.options import LOG_END, READ_COMMITTED, Subscription
from tests.spark.conftest import BASE_TS, Broker, varied_records


@pytest.fixture
def live_log(tmp_path):
    """Several sealed segments and an active one, CreateTime timestamps out of order."""
    log = Log(str(tmp_path / "events-0"), LogConfig(segment_bytes=2500, index_interval_bytes=300))
    for i in range(30):
        records = [(b"k", b"v" * 30, [], BASE_TS + 1000 * i + (7 - 3 * j) * 100) for j in range(5)]
        log.append_as_leader(bytearray(build_batch(records)), 0, BASE_TS + 100_000)
    yield log
    log.close()


def test_index_reads_match_the_writers_indexes(live_log):
    assert len(live_log.segments) >= 4
    for segment in live_log.segments:
        base = segment.base_offset
        with open(segment.offset_index.path, "rb") as f:
            entries = index_entries_pread(f.fileno(), base)
        assert entries == [segment.offset_index.entry(n) for n in range(segment.offset_index.entries)]
        with open(segment.time_index.path, "rb") as f:
            fd = f.fileno()
            n = segment.time_index.entries
            last = segment.time_index.entry(n - 1) if n else (-1, base)
            assert time_index_last_entry_pread(fd, base) == last
            for ts in range(BASE_TS - 1000, BASE_TS + 31_000, 250):
                assert time_index_lookup_pread(fd, base, ts) == segment.time_index.lookup(ts)


def test_index_reads_of_a_closed_segment_match_a_reopened_index(live_log):
    sealed = live_log.segments[0]
    index = OffsetIndex(sealed.offset_index.path, sealed.base_offset, writable=False)
    times = TimeIndex(sealed.time_index.path, sealed.base_offset, writable=False)
    try:
        with open(sealed.offset_index.path, "rb") as f:
            assert index_entries_pread(f.fileno(), sealed.base_offset) == [
                index.entry(n) for n in range(index.entries)]
        with open(sealed.time_index.path, "rb") as f:
            last = times.entry(times.entries - 1)
            assert time_index_last_entry_pread(f.fileno(), sealed.base_offset) == last
    finally:
        index.close()
        times.close()


def test_partition_reader_offsets_match_the_log(live_log):
    reader = PartitionReader(live_log.dir)
    assert reader.log_end_offset() == live_log.log_end_offset
    for i, segment in enumerate(live_log.segments[:-1]):
        assert reader.max_timestamp(i) == segment.max_timestamp_so_far
    assert reader.max_timestamp(len(live_log.segments) - 1) is None
    for ts in range(BASE_TS - 1000, BASE_TS + 31_000, 130):
        assert reader.offset_for_timestamp(ts) == live_log.fetch_offset_by_timestamp(ts), ts
    assert reader.offset_for_timestamp(BASE_TS + 5000, start_offset=100) == (100, BASE_TS + 20_700)


def test_log_dirs_at_or_below_the_paths(tmp_path):
    brokers = [Broker(str(tmp_path / "cluster" / f"broker-{n}" / "data"), node_id=n) for n in (1, 2)]
    try:
        (tmp_path / "cluster" / "notes").mkdir()
        found = find_log_dirs((str(tmp_path / "cluster"),))
        assert found == [b.log_dir for b in brokers]
        assert find_log_dirs((brokers[1].log_dir, str(tmp_path))) == [brokers[1].log_dir, brokers[0].log_dir]
    finally:
        for b in brokers:
            b.close()


def test_paths_that_hold_no_log_dir(tmp_path):
    with pytest.raises(StromSparkError, match=r"path .*missing does not exist"):
        find_log_dirs((str(tmp_path / "missing"),))
    (tmp_path / "empty").mkdir()
    with pytest.raises(StromSparkError, match="holds no Strom or Kafka log dir"):
        find_log_dirs((str(tmp_path / "empty"),))
    (tmp_path / "file").write_text("x")
    with pytest.raises(StromSparkError, match="is not a directory"):
        find_log_dirs((str(tmp_path / "file"),))


def test_a_kafka_style_log_dir_without_meta_properties(tmp_path):
    log = Log(str(tmp_path / "logs" / "t-0"))
    log.close()
    assert Layout((str(tmp_path),)).topics == ["t"]


def test_the_metadata_log_is_not_a_topic(tmp_path, broker):
    os.makedirs(os.path.join(broker.log_dir, "__cluster_metadata-0"))
    with open(os.path.join(broker.log_dir, "__cluster_metadata-0", "00000000000000000000.log"), "wb"):
        pass
    broker.create("orders")
    layout = Layout((broker.log_dir,))
    assert layout.topics == ["orders"]
    assert layout.select(Subscription("subscribePattern", pattern=".*")) == [("orders", 0)]


def test_select_names_missing_topics_and_partitions(broker):
    broker.create("orders", 2)
    broker.create("__consumer_offsets", 1)
    layout = Layout((broker.log_dir,))
    assert layout.select(Subscription("subscribe", topics=("orders",))) == [("orders", 0), ("orders", 1)]
    assert layout.select(Subscription("subscribePattern", pattern="ord.*")) == [("orders", 0), ("orders", 1)]
    assert layout.select(Subscription("subscribePattern", pattern=".*")) == [("orders", 0), ("orders", 1)]
    internal = Subscription("subscribe", topics=("__consumer_offsets",))
    assert layout.select(internal) == [("__consumer_offsets", 0)]
    with pytest.raises(StromSparkError, match=r"topic 'nope' does not exist under .* \(topics there: "
                                              r"__consumer_offsets, orders\)"):
        layout.select(Subscription("subscribe", topics=("orders", "nope")))
    with pytest.raises(StromSparkError, match="assign: partition orders-5 does not exist"):
        layout.select(Subscription("assign", assigned=(("orders", 1), ("orders", 5))))
    assert layout.select(Subscription("subscribe", topics=("nope",)), strict=False) == []


def test_partition_state_offsets(broker):
    broker.create("t", 1, segment_bytes=1500)
    for i in range(10):
        broker.append("t", 0, varied_records(6, tag=f"s{i}"))
    broker.commit(hw=40)
    broker.append("t", 0, varied_records(4, tag="tail"))
    broker.delete_records("t", 0, 13)
    state = Layout((broker.log_dir,)).state(("t", 0), READ_COMMITTED)
    offsets = (state.log_start_offset, state.high_watermark, state.log_end_offset, state.latest)
    assert offsets == (13, 40, 64, 40)
    assert Layout((broker.log_dir,)).state(("t", 0), LOG_END).latest == 64


def test_a_partition_missing_from_the_checkpoint_has_nothing_committed(broker):
    broker.create("t")
    broker.append("t", 0, varied_records(5))
    state = Layout((broker.log_dir,)).state(("t", 0), READ_COMMITTED)
    assert (state.high_watermark, state.latest, state.log_end_offset) == (0, 0, 5)


def test_the_replica_with_the_highest_checkpointed_hw_is_read(tmp_path):
    """Three brokers hold t-0: the leader's checkpoint says 30, a follower's 20, and a
    follower that lags holds only 25 records. read_committed reads the leader's copy;
    log_end reads the copy with the most data."""
    brokers = [Broker(str(tmp_path / "data" / f"b{n}"), node_id=n) for n in (1, 2, 3)]
    try:
        for b, (records, hw) in zip(brokers, [(40, 20), (40, 30), (25, 25)]):
            b.create("t")
            for i in range(records // 5):
                b.append("t", 0, varied_records(5, tag=f"x{i}"))
            b.commit(hw=hw)
        layout = Layout((str(tmp_path / "data"),))
        assert [r.high_watermark for r in layout.replicas[("t", 0)]] == [20, 30, 25]
        chosen = layout.state(("t", 0), READ_COMMITTED)
        assert chosen.replica.log_dir == brokers[1].log_dir and chosen.latest == 30
        assert layout.state(("t", 0), LOG_END).log_end_offset == 40
    finally:
        for b in brokers:
            b.close()
