"""engine/cleaner_plan.py: which log Kafka's cleaner cleans, which range of it, and in which
groups of segments (LogCleanerManager, LogToClean, Cleaner.groupSegmentsBySize)."""
from __future__ import annotations

import math
import os

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.checkpoint import read_offset_checkpoint, write_offset_checkpoint
from engine.cleaner_plan import (
    DEFAULT_BACKOFF_MS,
    DEFAULT_DEDUPE_BUFFER_SIZE,
    DEFAULT_DELETE_RETENTION_MS,
    DEFAULT_IO_BUFFER_LOAD_FACTOR,
    DEFAULT_MAX_COMPACTION_LAG_MS,
    DEFAULT_MIN_CLEANABLE_DIRTY_RATIO,
    DEFAULT_MIN_COMPACTION_LAG_MS,
    DEFAULT_THREADS,
    MAX_INT,
    NO_TIMESTAMP,
    CleanerLog,
    CompactionSettings,
    SegmentInfo,
    cleanable_offsets,
    deletable_logs,
    filthiest,
    group_segments_by_size,
    log_to_clean,
    survey,
)
from engine.manager import CLEANER_CHECKPOINT
from tests.purity import IO_CLOCK_RANDOMNESS, imports, top_level

NOW = 1_700_000_000_000
HOUR = 3_600_000


def seg(base, next_offset, size=100, largest_ts=NO_TIMESTAMP, first_ts=None, oi=0, ti=0):
    return SegmentInfo(base, size, oi, ti, next_offset, largest_ts, first_ts)


def mklog(segments, *, topic="t", partition=0, log_start=None, hw=None, fuo=None, checkpoint=None,
          ratio=0.5, min_lag=0, max_lag=DEFAULT_MAX_COMPACTION_LAG_MS, compact=True):
    segments = tuple(segments)
    return CleanerLog(
        topic, partition, segments,
        log_start_offset=segments[0].base_offset if log_start is None else log_start,
        high_watermark=segments[-1].next_offset if hw is None else hw,
        first_unstable_offset=fuo, cleaner_checkpoint=checkpoint,
        settings=CompactionSettings(ratio, min_lag, max_lag), compact=compact)


# Three closed segments of 100 offsets and an active one.
def four(**kw):
    sizes = kw.pop("sizes", (100, 100, 100, 100))
    stamps = kw.pop("stamps", (NO_TIMESTAMP,) * 4)
    firsts = kw.pop("firsts", (None,) * 4)
    return mklog([seg(b, b + 100, size=sz, largest_ts=ts, first_ts=ft)
                  for b, sz, ts, ft in zip((0, 100, 200, 300), sizes, stamps, firsts)], **kw)


def test_defaults_are_kafkas_cleaner_defaults():
    assert DEFAULT_MIN_CLEANABLE_DIRTY_RATIO == 0.5
    assert DEFAULT_MIN_COMPACTION_LAG_MS == 0
    assert DEFAULT_MAX_COMPACTION_LAG_MS == 2**63 - 1
    assert DEFAULT_DELETE_RETENTION_MS == 86_400_000
    assert DEFAULT_BACKOFF_MS == 15_000
    assert DEFAULT_DEDUPE_BUFFER_SIZE == 128 * 1024 * 1024
    assert DEFAULT_THREADS == 1
    assert DEFAULT_IO_BUFFER_LOAD_FACTOR == 0.9


def test_cleaner_plan_is_a_pure_core():
    assert not top_level(imports("engine", "cleaner_plan")) & IO_CLOCK_RANDOMNESS


def test_a_log_without_segments_or_with_unordered_segments_is_refused():
    with pytest.raises(ValueError):
        CleanerLog("t", 0, (), log_start_offset=0, high_watermark=0)
    with pytest.raises(ValueError):
        mklog([seg(100, 200), seg(0, 100)])


# --- cleanableOffsets ---------------------------------------------------------------------

def test_without_a_checkpoint_cleaning_starts_at_the_log_start_offset():
    o = cleanable_offsets(four(log_start=150), NOW)
    assert (o.first_dirty_offset, o.force_update_checkpoint) == (150, False)


def test_a_valid_checkpoint_is_the_first_dirty_offset():
    o = cleanable_offsets(four(checkpoint=200), NOW)
    assert (o.first_dirty_offset, o.first_uncleanable_offset, o.force_update_checkpoint) == (200, 300, False)


def test_a_checkpoint_at_the_log_end_is_valid():
    o = cleanable_offsets(four(checkpoint=400), NOW)
    assert (o.first_dirty_offset, o.first_uncleanable_offset, o.force_update_checkpoint) == (400, 400, False)


def test_a_checkpoint_below_the_log_start_resets_to_the_log_start_and_forces_a_checkpoint_update():
    o = cleanable_offsets(four(log_start=120, checkpoint=50), NOW)
    assert (o.first_dirty_offset, o.force_update_checkpoint) == (120, True)


def test_a_checkpoint_past_the_log_end_resets_to_the_log_start_and_forces_a_checkpoint_update():
    o = cleanable_offsets(four(log_start=10, checkpoint=401), NOW)
    assert (o.first_dirty_offset, o.force_update_checkpoint) == (10, True)


def test_the_active_segment_is_never_cleaned():
    assert cleanable_offsets(four(), NOW).first_uncleanable_offset == 300


def test_cleaning_stops_at_the_first_unstable_offset_of_an_open_transaction():
    assert cleanable_offsets(four(fuo=150), NOW).first_uncleanable_offset == 150


def test_cleaning_stops_at_the_high_watermark():
    assert cleanable_offsets(four(hw=250), NOW).first_uncleanable_offset == 250


def test_a_first_unstable_offset_above_the_high_watermark_stops_cleaning_at_the_high_watermark():
    # UnifiedLog.lastStableOffset: the first unstable offset only counts below the high watermark.
    assert cleanable_offsets(four(hw=220, fuo=260), NOW).first_uncleanable_offset == 220


def test_the_uncleanable_offset_is_never_below_the_first_dirty_offset():
    o = cleanable_offsets(four(checkpoint=350, hw=380), NOW)
    assert (o.first_dirty_offset, o.first_uncleanable_offset) == (350, 350)


def test_min_compaction_lag_stops_at_the_first_segment_with_a_record_newer_than_the_lag():
    old, recent = NOW - 2 * HOUR, NOW - HOUR // 2
    log = four(stamps=(old, recent, old, NOW), min_lag=HOUR)
    assert cleanable_offsets(log, NOW).first_uncleanable_offset == 100


def test_a_segment_exactly_min_compaction_lag_old_is_cleanable():
    # Kafka: uncleanable when largestTimestamp > now - minCompactionLagMs.
    log = four(stamps=(NOW - HOUR, NOW - HOUR, NOW - HOUR, NOW), min_lag=HOUR)
    assert cleanable_offsets(log, NOW).first_uncleanable_offset == 300


def test_min_compaction_lag_looks_only_at_dirty_segments():
    recent = NOW - 1000
    log = four(stamps=(recent, NOW - 2 * HOUR, NOW - 2 * HOUR, NOW), min_lag=HOUR, checkpoint=100)
    assert cleanable_offsets(log, NOW).first_uncleanable_offset == 300


def test_a_segment_without_timestamps_is_cleanable_under_min_compaction_lag():
    log = four(stamps=(NO_TIMESTAMP, NO_TIMESTAMP, NO_TIMESTAMP, NOW), min_lag=HOUR)
    assert cleanable_offsets(log, NOW).first_uncleanable_offset == 300


def test_a_zero_min_compaction_lag_ignores_timestamps():
    log = four(stamps=(NOW, NOW, NOW, NOW), min_lag=0)
    assert cleanable_offsets(log, NOW).first_uncleanable_offset == 300


# --- max.compaction.lag.ms (maxCompactionDelay) ----------------------------------------------

def test_a_dirty_segment_older_than_max_compaction_lag_forces_a_clean_by_its_delay():
    firsts = (NOW - 5 * HOUR, NOW - 3 * HOUR, NOW - HOUR, NOW)
    o = cleanable_offsets(four(firsts=firsts, max_lag=2 * HOUR), NOW)
    assert o.needs_compaction_now
    assert o.compaction_delay_ms == 3 * HOUR  # (now - 2h) - (now - 5h), the earliest dirty one


def test_max_compaction_lag_not_reached_forces_nothing():
    firsts = (NOW - HOUR, NOW - HOUR, NOW - HOUR, NOW)
    o = cleanable_offsets(four(firsts=firsts, max_lag=2 * HOUR), NOW)
    assert (o.needs_compaction_now, o.compaction_delay_ms) == (False, 0)


def test_max_compaction_lag_ignores_unknown_and_non_positive_first_batch_timestamps():
    firsts = (None, 0, -1, NOW - 10 * HOUR)  # the active segment's never counts either
    o = cleanable_offsets(four(firsts=firsts, max_lag=HOUR), NOW)
    assert o.compaction_delay_ms == 0


def test_max_compaction_lag_looks_only_at_dirty_segments():
    firsts = (NOW - 10 * HOUR, NOW - HOUR // 2, None, NOW)
    assert cleanable_offsets(four(firsts=firsts, max_lag=HOUR, checkpoint=100), NOW).compaction_delay_ms == 0
    assert cleanable_offsets(four(firsts=firsts, max_lag=HOUR), NOW).compaction_delay_ms == 9 * HOUR


# --- LogToClean ----------------------------------------------------------------------------

def test_cleanable_ratio_is_dirty_bytes_over_clean_plus_dirty_bytes():
    ltc = log_to_clean(four(sizes=(300, 100, 100, 50), checkpoint=100), NOW)
    assert (ltc.clean_bytes, ltc.cleanable_bytes, ltc.total_bytes) == (300, 200, 500)
    assert ltc.cleanable_ratio == pytest.approx(0.4)
    assert ltc.first_uncleanable_offset == 300


def test_a_segment_holding_the_first_dirty_offset_counts_as_clean_and_as_cleanable():
    # LogToClean: cleanBytes = logSegments(-1, firstDirty), cleanableBytes from the segment
    # holding firstDirty: a checkpoint inside a segment counts that segment on both sides.
    ltc = log_to_clean(four(sizes=(100, 200, 100, 50), checkpoint=150), NOW)
    assert (ltc.clean_bytes, ltc.cleanable_bytes) == (300, 300)


def test_the_first_uncleanable_offset_is_rounded_down_to_its_segment_base():
    ltc = log_to_clean(four(sizes=(100, 200, 400, 50), fuo=250), NOW)
    assert ltc.first_uncleanable_offset == 200
    assert ltc.cleanable_bytes == 300  # the segment holding the open transaction is not cleanable


def test_an_empty_log_has_no_ratio():
    ltc = log_to_clean(mklog([seg(0, 0, size=0)]), NOW)
    assert ltc.total_bytes == 0 and math.isnan(ltc.cleanable_ratio)


# --- grabFilthiestCompactedLog ---------------------------------------------------------------

def test_the_filthiest_log_is_the_one_with_the_highest_cleanable_ratio():
    a = four(topic="a", checkpoint=100)  # 200 / 300
    b = four(topic="b")                  # 300 / 300
    c = four(topic="c", checkpoint=200)  # 100 / 300
    chosen = filthiest([a, b, c], NOW)
    assert chosen is not None and chosen.topic_partition == ("b", 0)


def test_a_ratio_equal_to_min_cleanable_dirty_ratio_is_not_cleaned():
    # Kafka cleans when cleanableRatio > minCleanableRatio, strictly.
    log = four(sizes=(100, 100, 100, 10), checkpoint=100, ratio=2 / 3)
    assert log_to_clean(log, NOW).cleanable_ratio == pytest.approx(2 / 3)
    assert filthiest([log], NOW) is None
    assert filthiest([four(checkpoint=100, ratio=0.66)], NOW) is not None


def test_each_topic_is_held_to_its_own_min_cleanable_dirty_ratio():
    dirtier = four(topic="strict", ratio=0.99)            # ratio 1.0 > 0.99
    cleaner = four(topic="lax", checkpoint=200, ratio=0.2)  # ratio 1/3 > 0.2
    s = survey([dirtier, cleaner], NOW)
    assert s.cleanable_count == 2 and s.filthiest.topic_partition == ("strict", 0)
    s = survey([four(topic="strict", checkpoint=100, ratio=0.9), cleaner], NOW)
    assert s.filthiest.topic_partition == ("lax", 0)


def test_partitions_in_progress_or_marked_uncleanable_are_skipped():
    a, b = four(topic="a"), four(topic="a", partition=1, checkpoint=100)
    assert filthiest([a, b], NOW).topic_partition == ("a", 0)
    assert filthiest([a, b], NOW, in_progress={("a", 0)}).topic_partition == ("a", 1)
    assert filthiest([a, b], NOW, uncleanable={("a", 0)}).topic_partition == ("a", 1)
    assert filthiest([a, b], NOW, in_progress={("a", 0)}, uncleanable={("a", 1)}) is None


def test_logs_that_are_not_compacted_are_never_cleaned():
    assert filthiest([four(compact=False)], NOW) is None


def test_logs_without_bytes_are_not_candidates():
    s = survey([mklog([seg(0, 0, size=0)])], NOW)
    assert s.candidates == () and s.filthiest is None and s.max_dirty_ratio == 0.0


def test_a_passed_max_compaction_lag_cleans_a_log_below_its_dirty_ratio():
    firsts = (NOW - 10 * HOUR, NOW - 10 * HOUR, NOW - 10 * HOUR, NOW)
    log = four(firsts=firsts, sizes=(1000, 1000, 10, 10), checkpoint=200, max_lag=HOUR)
    assert log_to_clean(log, NOW).cleanable_ratio < 0.5
    chosen = filthiest([log], NOW)
    assert chosen is not None and chosen.needs_compaction_now


def test_a_passed_max_compaction_lag_without_cleanable_bytes_cleans_nothing():
    # Everything dirty is in an open transaction: nothing cleanable, though the lag has passed.
    firsts = (NOW - 10 * HOUR, NOW - 10 * HOUR, NOW - 10 * HOUR, NOW)
    log = four(firsts=firsts, sizes=(1000, 1000, 10, 10), checkpoint=200, fuo=200, max_lag=HOUR, ratio=0.9)
    ltc = log_to_clean(log, NOW)
    assert ltc.needs_compaction_now and ltc.cleanable_bytes == 0
    assert filthiest([log], NOW) is None


def test_invalid_checkpoints_are_reported_for_reset():
    s = survey([four(topic="a", log_start=100, checkpoint=20), four(topic="b", checkpoint=200)], NOW)
    assert s.checkpoint_resets == {("a", 0): 100}


def test_the_survey_reports_the_dirtiest_ratio_and_longest_delay_even_when_nothing_is_cleaned():
    firsts = (NOW - 3 * HOUR, None, None, NOW)
    log = four(firsts=firsts, checkpoint=200, ratio=0.9, fuo=200, max_lag=HOUR)
    s = survey([log, four(topic="b", checkpoint=100, ratio=0.9)], NOW)
    assert s.filthiest is None and s.cleanable_count == 0
    assert s.max_dirty_ratio == pytest.approx(2 / 3)
    assert s.max_compaction_delay_ms == 0  # log "t" dirty from 200: its old segment is clean
    s = survey([four(firsts=firsts, ratio=0.9, fuo=0, max_lag=HOUR)], NOW)
    assert s.max_compaction_delay_ms == 2 * HOUR


def test_equal_ratios_choose_the_first_log_given():
    logs = [four(topic="x"), four(topic="y")]
    assert filthiest(logs, NOW).topic_partition == ("x", 0)
    assert filthiest(logs[::-1], NOW).topic_partition == ("y", 0)


def test_deletable_logs_are_the_compacted_ones_not_in_progress_nor_uncleanable():
    logs = [four(topic="a"), four(topic="b", compact=False), four(topic="c"), four(topic="d")]
    got = deletable_logs(logs, in_progress={("c", 0)}, uncleanable={("d", 0)})
    assert [lg.topic for lg in got] == ["a"]


# --- groupSegmentsBySize ---------------------------------------------------------------------

def sized(*sizes, step=100, oi=0, ti=0):
    return [SegmentInfo(i * step, sz, oi, ti, (i + 1) * step) for i, sz in enumerate(sizes)]


def bases(groups):
    return [[s.base_offset for s in g] for g in groups]


def test_groups_fill_up_to_the_segment_size():
    segments = sized(300, 300, 400, 500, 100, 100)
    assert bases(group_segments_by_size(segments, 1000, 10**6, 600)) == [[0, 100, 200], [300, 400, 500]]


def test_a_segment_larger_than_the_segment_size_makes_a_group_of_its_own():
    segments = sized(50, 2000, 50)
    assert bases(group_segments_by_size(segments, 1000, 10**6, 300)) == [[0], [100], [200]]


def test_the_offset_index_size_limits_a_group():
    segments = sized(1, 1, 1, 1, oi=40)
    assert bases(group_segments_by_size(segments, 10**6, 80, 400)) == [[0, 100], [200, 300]]


def test_the_time_index_size_limits_a_group():
    segments = sized(1, 1, 1, ti=60)
    assert bases(group_segments_by_size(segments, 10**6, 120, 300)) == [[0, 100], [200]]


def test_a_group_spans_at_most_int32_offsets_from_its_base():
    # The next segment's base - 1 bounds each candidate's last offset; the last one is bounded
    # by the first uncleanable offset.
    segments = [SegmentInfo(0, 10, 0, 0, 5), SegmentInfo(MAX_INT - 10, 10, 0, 0, MAX_INT - 5),
                SegmentInfo(MAX_INT + 1, 10, 0, 0, MAX_INT + 2)]
    assert bases(group_segments_by_size(segments, 10**6, 10**6, MAX_INT + 2)) == [
        [0, MAX_INT - 10], [MAX_INT + 1]]
    assert bases(group_segments_by_size(segments[:2], 10**6, 10**6, MAX_INT + 1)) == [[0, MAX_INT - 10]]
    assert bases(group_segments_by_size(segments[:2], 10**6, 10**6, MAX_INT + 2)) == [[0], [MAX_INT - 10]]


def test_an_empty_segment_joins_a_group_whatever_its_offset_range():
    segments = [SegmentInfo(0, 10, 0, 0, 5), SegmentInfo(10, 0, 0, 0, 10),
                SegmentInfo(3 * MAX_INT, 10, 0, 0, 3 * MAX_INT + 1)]
    assert bases(group_segments_by_size(segments, 10**6, 10**6, 3 * MAX_INT + 1)) == [[0, 10], [3 * MAX_INT]]


def test_no_segments_make_no_groups():
    assert group_segments_by_size([], 1000, 1000, 0) == []


@st.composite
def segment_runs(draw):
    n = draw(st.integers(0, 25))
    base, out = 0, []
    for _ in range(n):
        span = draw(st.sampled_from([1, 100, 2**20, MAX_INT // 3, MAX_INT]))
        out.append(SegmentInfo(base, draw(st.integers(0, 1500)), draw(st.integers(0, 300)),
                               draw(st.integers(0, 300)), base + span))
        base += span + draw(st.sampled_from([0, 0, 7, MAX_INT // 2]))
    return out, base + draw(st.integers(0, 5))


@given(segment_runs(), st.integers(1, 3000), st.integers(1, 600))
def test_groups_are_contiguous_runs_in_order_none_too_large_and_each_as_long_as_allowed(
        run, max_size, max_index):
    segments, uncleanable = run
    groups = group_segments_by_size(segments, max_size, max_index, uncleanable)
    assert [s for g in groups for s in g] == segments
    assert all(groups)

    def last_offset(s):
        i = segments.index(s)
        return segments[i + 1].base_offset - 1 if i + 1 < len(segments) else uncleanable - 1

    def fits(group, s):
        return (sum(x.size for x in group) + s.size <= max_size
                and sum(x.offset_index_bytes for x in group) + s.offset_index_bytes <= max_index
                and sum(x.time_index_bytes for x in group) + s.time_index_bytes <= max_index
                and (s.size == 0 or last_offset(s) - group[0].base_offset <= MAX_INT))

    for g in groups:
        for k in range(1, len(g)):
            assert fits(g[:k], g[k])
    for g, nxt in zip(groups, groups[1:]):
        assert not fits(g, nxt[0])


# --- cleaner-offset-checkpoint -----------------------------------------------------------------

def test_the_cleaner_checkpoint_is_kafkas_offset_checkpoint_file(tmp_path):
    assert CLEANER_CHECKPOINT == "cleaner-offset-checkpoint"
    path = os.path.join(tmp_path, CLEANER_CHECKPOINT)
    assert read_offset_checkpoint(path) == {}
    offsets = {("__consumer_offsets", 7): 52_341, ("orders", 0): 300}
    write_offset_checkpoint(path, offsets)
    with open(path, "rb") as f:
        assert f.read() == b"0\n2\n__consumer_offsets 7 52341\norders 0 300\n"
    assert read_offset_checkpoint(path) == offsets
    # What the cleaner reads back is the first dirty offset it resumes from.
    log = four(topic="orders", checkpoint=read_offset_checkpoint(path).get(("orders", 0)))
    resumed = cleanable_offsets(log, NOW)
    assert (resumed.first_dirty_offset, resumed.force_update_checkpoint) == (300, False)
