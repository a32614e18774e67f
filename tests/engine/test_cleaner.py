"""The log cleaner (engine/cleaner.py) over real Logs: Kafka's compaction rules, each test
named after the rule, and a model (the last value per key) driven by hypothesis."""
from __future__ import annotations

import dataclasses
import os
import tempfile

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.checkpoint import read_offset_checkpoint
from engine.cleaner import (
    CLEANER_CHECKPOINT,
    Cleaner,
    Throttler,
    clean_filthiest,
    describe,
    empty_batch,
    rebuild_batch,
)
from engine.cleaner_plan import log_to_clean
from engine.config import LogConfig
from engine.control import CONTROL_ABORT, CONTROL_COMMIT, build_end_txn_marker_batch
from engine.log import FETCH_LOG_END, ORIGIN_COORDINATOR, Log
from engine.reader import file_name
from engine.txn_index import TXN_INDEX_SUFFIX, AbortedTxn, TransactionIndex, read_aborted_txns
from ext.batch import (
    COMPRESSION_GZIP,
    COMPRESSION_LZ4,
    build_batch,
    build_batch_at,
    decode_records,
    iter_batches,
    validate,
)
from ext.offset_map import OffsetMap

NOW = 1_700_000_000_000
DAY = 86_400_000


# ---- helpers (also used by test_cleaner_crash.py) ------------------------------------------

def compacted_config(**overrides) -> LogConfig:
    settings_ = dict(cleanup_policy="compact", segment_bytes=600, message_timestamp_before_max_ms=2**62,
                     file_delete_delay_ms=0, index_interval_bytes=100,
                     # Any dirty byte makes a log cleanable (Kafka's default ratio is 0.5).
                     min_cleanable_dirty_ratio=0.0)
    settings_.update(overrides)
    return LogConfig(**settings_)


def produce(lg: Log, records, ts: int = NOW, compression: int = 0, origin: str | None = None,
            **producer) -> tuple[int, int]:
    """One batch of (key, value) records appended as leader; its first and last offset."""
    batch = bytearray(build_batch([(k, v, [("h", b"x")], ts + i) for i, (k, v) in enumerate(records)],
                                  compression=compression, **producer))
    extra = {} if origin is None else {"origin": origin}
    info = lg.append_as_leader(batch, 0, NOW, **extra)
    lg.update_high_watermark(lg.log_end_offset)
    return info.first_offset, info.last_offset


def produce_before_compacting(lg: Log, records) -> tuple[int, int]:
    """``produce`` while the log's topic did not compact yet: how keyless records reach a
    compacted log, whose leader refuses them from clients (Kafka's LogValidator.validateKey)."""
    compacted = lg.config
    lg.config = dataclasses.replace(compacted, cleanup_policy="delete")
    try:
        return produce(lg, records)
    finally:
        lg.config = compacted


def read_all(lg: Log) -> list[tuple[int, bytes | None, bytes | None]]:
    """Every data record through Log.read, in offset order: (offset, key, value)."""
    out: list[tuple[int, bytes | None, bytes | None]] = []
    offset = lg.log_start_offset
    while offset < lg.log_end_offset:
        info = lg.read(offset, 1 << 20, FETCH_LOG_END)
        if info.records is None:
            break
        data = info.records.read()
        last = offset
        for header in iter_batches(data):
            validate(data, header.position)
            if not header.is_control:
                out += [(r.offset, r.key, r.value) for r in decode_records(data, header.position)
                        if r.offset >= offset]
            last = header.next_offset
        offset = max(last, offset + 1)
    return out


def batches_of(lg: Log) -> list:
    out = []
    for segment in lg.segments:
        data = os.pread(segment.fd, segment.size, 0)
        out += [(h, bytes(data[h.position:h.position + h.size])) for h in iter_batches(data)]
    return out


def ensure_aborted(lg: Log, txn: AbortedTxn) -> list[AbortedTxn]:
    """The active segment's aborted-transaction entries, with ``txn`` written there unless the
    partition wrote it when its ABORT marker landed."""
    segment = lg.active_segment
    index = getattr(segment, "txn_index", None)
    if index is None:
        index = TransactionIndex(os.path.join(lg.dir, file_name(segment.base_offset, TXN_INDEX_SUFFIX)),
                                 segment.base_offset)
    if not index.all_aborted():
        index.append(txn)
    return index.all_aborted()


def clean(lg: Log, now_ms: int = NOW, slots: int = 4096, **kwargs):
    return clean_filthiest(Cleaner(OffsetMap(slots=slots), **kwargs), [lg], now_ms)


def last_per_key(records) -> dict:
    model: dict = {}
    for offset, key, value in records:
        model[key] = (offset, value)
    return model


def leftovers(lg: Log) -> list[str]:
    """The cleaner's files left once the replaced segments' file.delete.delay.ms has passed."""
    lg.delete_pending_segments()
    return [n for n in os.listdir(lg.dir) if n.endswith((".cleaned", ".swap", ".deleted"))]


@pytest.fixture
def lg(tmp_path):
    log = Log(str(tmp_path / "t-0"), compacted_config())
    yield log
    log.close()


# ---- the rules -----------------------------------------------------------------------------

def test_cleaning_keeps_the_last_record_of_each_key_and_offsets_keep_their_gaps(lg):
    for i in range(40):
        produce(lg, [(b"k%d" % (i % 5), b"v%d" % i)])
    lg.roll()
    before = read_all(lg)
    result = clean(lg)
    assert result is not None and result.end_offset == lg.active_segment.base_offset
    after = read_all(lg)
    expected = sorted((off, key, value) for key, (off, value) in last_per_key(before).items())
    assert after == expected
    assert [o for o, _, _ in after] == [35, 36, 37, 38, 39]
    assert lg.log_end_offset == 40 and lg.log_start_offset == 0
    assert leftovers(lg) == []


def test_a_second_clean_of_a_clean_log_changes_nothing(lg):
    for i in range(30):
        produce(lg, [(b"k%d" % (i % 4), b"v%d" % i)])
    lg.roll()
    clean(lg)
    files = sorted(os.listdir(lg.dir))
    data = [b for _, b in batches_of(lg)]
    assert clean(lg) is None  # nothing dirty: the ratio is 0
    assert sorted(os.listdir(lg.dir)) == files and [b for _, b in batches_of(lg)] == data


def test_the_checkpoint_records_where_the_next_clean_starts_in_kafkas_format(lg):
    for i in range(30):
        produce(lg, [(b"k%d" % (i % 4), b"v%d" % i)])
    lg.roll()
    result = clean(lg)
    path = os.path.join(lg.parent_dir, CLEANER_CHECKPOINT)
    assert read_offset_checkpoint(path) == {("t", 0): result.end_offset}
    with open(path) as f:
        assert f.read() == f"0\n1\nt 0 {result.end_offset}\n"
    assert describe(lg, result.end_offset).cleaner_checkpoint == result.end_offset


def test_an_untouched_batch_is_copied_byte_for_byte(lg):
    produce(lg, [(b"a", b"1"), (b"b", b"2")])
    produce(lg, [(b"c", b"3")], compression=COMPRESSION_GZIP)
    produce(lg, [(b"a", b"4")])
    lg.roll()
    before = dict((h.base_offset, b) for h, b in batches_of(lg))
    clean(lg)
    after = dict((h.base_offset, b) for h, b in batches_of(lg))
    assert after[2] == before[2] and after[3] == before[3]
    rebuilt = next(h for h, _ in batches_of(lg) if h.base_offset == 0)
    assert (rebuilt.base_offset, rebuilt.last_offset, rebuilt.records_count) == (0, 1, 1)


def test_a_rebuilt_batch_keeps_its_offsets_producer_fields_and_codec_as_kafkas_filter_to(lg):
    produce(lg, [(b"a", b"1"), (b"b", b"2"), (b"c", b"3")], compression=COMPRESSION_LZ4,
            producer_id=7, producer_epoch=2, base_sequence=0)
    produce(lg, [(b"b", b"5")], producer_id=7, producer_epoch=2, base_sequence=3)
    lg.roll()
    old = batches_of(lg)[0][0]
    clean(lg)
    header, raw = batches_of(lg)[0]
    validate(raw)
    assert (header.base_offset, header.last_offset) == (0, 2)  # the last offset is kept
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (7, 2, 0)
    assert header.compression == COMPRESSION_LZ4
    assert header.partition_leader_epoch == old.partition_leader_epoch
    assert [(r.offset, r.key, r.value, r.timestamp) for r in decode_records(raw)] == [
        (0, b"a", b"1", NOW), (2, b"c", b"3", NOW + 2)]


def test_a_batch_that_loses_every_record_is_kept_empty_when_it_holds_its_producers_last_sequence(lg):
    produce(lg, [(b"a", b"1")], producer_id=9, producer_epoch=0, base_sequence=0)
    produce(lg, [(b"b", b"1")])
    produce(lg, [(b"a", b"2")], producer_id=9, producer_epoch=0, base_sequence=1)
    produce(lg, [(b"a", b"3")])  # supersedes the producer's last batch
    lg.roll()
    clean(lg)
    headers = [h for h, _ in batches_of(lg)]
    assert [(h.base_offset, h.records_count) for h in headers] == [(1, 1), (2, 0), (3, 1)]
    empty = headers[1]
    assert (empty.producer_id, empty.base_sequence, empty.last_offset) == (9, 1, 2)
    reopened = Log(lg.dir, lg.config)
    try:
        entry = reopened.producer_state.producers[9]
        assert entry.last_seq == 1  # the producer's state survives the clean and a reload
    finally:
        reopened.close()


def test_a_record_without_a_key_is_removed_by_the_cleaner(lg):
    produce_before_compacting(lg, [(None, b"no key"), (b"a", b"1")])
    produce(lg, [(b"b", b"2")])
    lg.roll()
    clean(lg)
    assert read_all(lg) == [(1, b"a", b"1"), (2, b"b", b"2")]


def test_tombstones_stay_until_delete_retention_ms_has_passed_then_vanish(tmp_path):
    lg = Log(str(tmp_path / "t-0"), compacted_config(delete_retention_ms=DAY))
    produce(lg, [(b"a", b"1"), (b"b", b"1")])
    produce(lg, [(b"a", None)])
    lg.roll()
    clean(lg, NOW)
    assert read_all(lg) == [(1, b"b", b"1"), (2, b"a", None)]
    tomb = next(h for h, _ in batches_of(lg) if h.base_offset == 2)
    assert tomb.attributes & 0x40 and tomb.base_timestamp == NOW + DAY  # KIP-534's horizon
    produce(lg, [(b"c", b"1")])
    lg.roll()
    clean(lg, NOW + DAY - 1)
    assert (2, b"a", None) in read_all(lg)  # not yet
    produce(lg, [(b"d", b"1")])
    lg.roll()
    clean(lg, NOW + DAY)
    assert read_all(lg) == [(1, b"b", b"1"), (3, b"c", b"1"), (4, b"d", b"1")]
    lg.close()


def test_a_segment_at_the_min_compaction_lag_is_not_cleaned(tmp_path):
    lg = Log(str(tmp_path / "t-0"), compacted_config(min_compaction_lag_ms=1000))
    produce(lg, [(b"a", b"1")], ts=NOW)
    lg.roll()
    produce(lg, [(b"a", b"2")], ts=NOW + 5000)
    lg.roll()
    clean(lg, NOW + 5500)  # the second segment is within the lag: only the first is cleanable
    assert read_all(lg) == [(0, b"a", b"1"), (1, b"a", b"2")]
    clean(lg, NOW + 6000)
    assert read_all(lg) == [(1, b"a", b"2")]
    lg.close()


def test_aborted_transactional_data_is_dropped_and_its_marker_kept_while_its_data_was_met(lg):
    pid = 42
    produce(lg, [(b"a", b"committed")])
    first, _ = produce(lg, [(b"a", b"aborted"), (b"b", b"aborted")], producer_id=pid, producer_epoch=0,
                       base_sequence=0, is_transactional=True)
    marker = bytearray(build_end_txn_marker_batch(CONTROL_ABORT, pid, 0, 1, NOW))
    info = lg.append_as_leader(marker, 0, NOW, origin=ORIGIN_COORDINATOR)
    lg.update_high_watermark(lg.log_end_offset)
    abort_offset = info.first_offset
    entries = ensure_aborted(lg, AbortedTxn(pid, first, abort_offset, abort_offset + 1))
    # The producer writes on: its aborted batch no longer holds its last sequence.
    produce(lg, [(b"z", b"1")], producer_id=pid, producer_epoch=0, base_sequence=2)
    produce(lg, [(b"c", b"1")])
    lg.roll()
    clean(lg, NOW)
    assert read_all(lg) == [(0, b"a", b"committed"), (abort_offset + 1, b"z", b"1"),
                            (abort_offset + 2, b"c", b"1")]
    assert not any(h.base_offset == first for h, _ in batches_of(lg))
    control = [h for h, _ in batches_of(lg) if h.is_control]
    assert [h.base_offset for h in control] == [abort_offset]  # kept: its data was met in this clean
    cleaned_index = os.path.join(lg.dir, file_name(lg.segments[0].base_offset, TXN_INDEX_SUFFIX))
    assert read_aborted_txns(cleaned_index) == entries
    # The next clean meets no data of it: the marker may go, once its delete horizon has passed.
    produce(lg, [(b"d", b"1")])
    lg.roll()
    clean(lg, NOW)
    marker_header = next(h for h, _ in batches_of(lg) if h.is_control)
    assert marker_header.attributes & 0x40 and marker_header.base_timestamp == NOW + DAY
    produce(lg, [(b"e", b"1")])
    lg.roll()
    clean(lg, NOW + DAY)
    assert not any(h.is_control for h, _ in batches_of(lg))


def test_a_commit_marker_stays_while_its_transactions_data_does(lg):
    pid = 5
    produce(lg, [(b"a", b"1")], producer_id=pid, producer_epoch=0, base_sequence=0, is_transactional=True)
    marker = bytearray(build_end_txn_marker_batch(CONTROL_COMMIT, pid, 0, 1, NOW))
    lg.append_as_leader(marker, 0, NOW, origin=ORIGIN_COORDINATOR)
    produce(lg, [(b"b", b"1")])
    lg.roll()
    lg.update_high_watermark(lg.log_end_offset)
    clean(lg, NOW)
    assert read_all(lg) == [(0, b"a", b"1"), (2, b"b", b"1")]
    assert [h.base_offset for h, _ in batches_of(lg) if h.is_control] == [1]


def test_the_cleaner_stops_at_the_last_stable_offset_and_the_active_segment(lg):
    for i in range(20):
        produce(lg, [(b"k", b"v%d" % i)])
    lg.update_high_watermark(10)
    to_clean = log_to_clean(describe(lg), NOW)
    assert to_clean.first_uncleanable_offset <= 10
    clean(lg)
    offsets = [o for o, _, _ in read_all(lg)]
    assert all(o >= to_clean.first_uncleanable_offset - 1 for o in offsets)
    assert offsets[-10:] == list(range(10, 20))


def test_a_full_offset_map_cleans_up_to_the_last_offset_it_took(lg):
    for i in range(30):
        produce(lg, [(b"k%d" % i, b"v")])
    for i in range(30):
        produce(lg, [(b"k%d" % i, b"w")])
    lg.roll()
    before = read_all(lg)
    result = clean(lg, slots=20)  # 18 keys at the 0.9 load factor
    assert result.end_offset == 18
    assert read_all(lg) == before  # the first 18 records are the latest of what the map took
    result = clean(lg, slots=4096)
    assert result.first_dirty_offset == 18
    assert [(o, v) for o, _, v in read_all(lg)] == [(o, b"w") for o in range(30, 60)]


def test_small_segments_are_grouped_into_one(tmp_path):
    lg = Log(str(tmp_path / "t-0"), compacted_config(segment_bytes=300))
    for i in range(12):
        produce(lg, [(b"k%d" % (i % 3), b"v%d" % i)])
    lg.roll()
    clean(lg)
    emptied = len(lg.segments)
    produce(lg, [(b"k0", b"last")])
    lg.roll()
    clean(lg)  # the emptied segments, now small, are cleaned together into one
    try:
        assert len(lg.segments) < emptied
        assert [(o, v) for o, _, v in read_all(lg)] == [(10, b"v10"), (11, b"v11"), (12, b"last")]
    finally:
        lg.close()


def test_a_reader_holding_the_old_segment_reads_it_whole_after_the_swap(lg):
    for i in range(20):
        produce(lg, [(b"k%d" % (i % 2), b"v%d" % i)])
    lg.roll()
    held = lg.read(0, 1 << 20, FETCH_LOG_END).records
    before = held.read()
    lg.config = compacted_config(file_delete_delay_ms=60_000)
    clean(lg)
    assert held.read() == before  # the old file, renamed .deleted, still open
    assert lg.delete_pending_segments(force=True) > 0
    assert leftovers(lg) == []


def test_the_cleaned_segment_loads_after_a_restart_with_its_indexes_intact(tmp_path):
    path = str(tmp_path / "t-0")
    lg = Log(path, compacted_config())
    for i in range(200):
        produce(lg, [(b"k%d" % (i % 50), b"value-%d" % i * 3)])
    lg.roll()
    clean(lg)
    expected = read_all(lg)
    lg.close()
    lg = Log(path, compacted_config(), had_clean_shutdown=False)
    try:
        assert read_all(lg) == expected and lg.truncated_on_load == 0
        for segment in lg.segments:
            segment.offset_index.sanity_check()
            segment.time_index.sanity_check()
        assert all(lg.read(o, 1, FETCH_LOG_END).first_batch_offset == o for o, _, _ in expected)
    finally:
        lg.close()


def test_the_io_throttle_sleeps_to_hold_the_byte_rate():
    t = [0.0]
    slept = []

    def sleep(s):
        slept.append(s)
        t[0] += s

    throttler = Throttler(1000.0, sleep, lambda: t[0], check_ms=0)
    throttler.maybe_throttle(500)
    assert slept == [pytest.approx(0.5)]


def test_the_cleaners_batches_are_built_by_ext_batch_in_kafkas_layout():
    reference = build_batch([(b"k", b"v", [("h", b"x")], NOW)], base_offset=5, producer_id=3,
                            producer_epoch=1, base_sequence=7)
    header = next(iter_batches(reference))
    records = decode_records(reference)
    assert rebuild_batch(header, records, None) == reference
    # Offsets keep their gaps; the delete horizon is the base timestamp, bit 6 set.
    wide = build_batch([(b"a", b"1", [], NOW), (b"b", None, [], NOW + 1), (b"c", b"3", [], NOW + 2)],
                       base_offset=10, compression=COMPRESSION_GZIP)
    wide_header = next(iter_batches(wide))
    kept = [r for r in decode_records(wide) if r.key != b"b"]
    rebuilt = rebuild_batch(wide_header, kept, NOW + DAY)
    h = validate(rebuilt)
    assert (h.base_offset, h.last_offset, h.records_count, h.attributes & 0x47) == (10, 12, 2, 0x40 | 1)
    assert (h.base_timestamp, h.max_timestamp) == (NOW + DAY, NOW + 2)
    assert [(r.offset, r.key, r.timestamp) for r in decode_records(rebuilt)] == \
        [(10, b"a", NOW), (12, b"c", NOW + 2)]
    empty = empty_batch(header)
    e = validate(empty)
    assert len(empty) == 61 and e.records_count == 0 and e.last_offset == 5
    assert (e.base_timestamp, e.max_timestamp, e.producer_id, e.base_sequence) == (-1, NOW, 3, 7)
    with pytest.raises(ValueError):
        build_batch_at([(4, b"k", b"v", [], NOW)], 0, 3, NOW, NOW, 0)


# ---- transactions across groups, fencing, the round's last batch, empty batches -----------

def _reopen_without_snapshots(lg: Log) -> Log:
    lg.close(snapshot=False)
    for name in os.listdir(lg.dir):
        if name.endswith(".snapshot"):
            os.unlink(os.path.join(lg.dir, name))
    return Log(lg.dir, lg.config, high_watermark=lg.high_watermark)


def test_one_transaction_metadata_spans_every_group_of_a_clean_as_kafkas_do_clean(tmp_path):
    lg = Log(str(tmp_path / "t-0"), compacted_config(delete_retention_ms=DAY))
    pid = 5
    big = b"x" * 350
    produce(lg, [(b"a", big)], producer_id=pid, producer_epoch=0, base_sequence=0, is_transactional=True)
    lg.roll()  # the transaction's data alone in segment 0
    produce(lg, [(b"b", big)])
    marker = bytearray(build_end_txn_marker_batch(CONTROL_COMMIT, pid, 0, 1, NOW))
    assert lg.append_as_leader(marker, 0, NOW, origin=ORIGIN_COORDINATOR).first_offset == 2
    produce(lg, [(b"c", b"1")])
    produce(lg, [(b"d", b"1")])
    lg.roll()
    lg.update_high_watermark(lg.log_end_offset)
    result = clean(lg, NOW)
    assert result is not None and result.stats.groups >= 2
    produce(lg, [(b"e", b"1")])
    lg.roll()
    lg.update_high_watermark(lg.log_end_offset)
    assert clean(lg, NOW + DAY) is not None
    # The transaction's data stays, so its COMMIT marker must stay with it.
    assert [h.base_offset for h, _ in batches_of(lg) if h.is_control] == [2]
    hw = lg.high_watermark
    reopened = _reopen_without_snapshots(lg)
    try:
        assert reopened.high_watermark == hw == 6
        assert reopened.last_stable_offset == 6
    finally:
        reopened.close()


def test_an_abort_markers_txnindex_entry_follows_its_transaction_across_groups(tmp_path):
    lg = Log(str(tmp_path / "t-0"), compacted_config(delete_retention_ms=DAY))
    pid = 6
    big = b"x" * 350
    first, _ = produce(lg, [(b"a", big)], producer_id=pid, producer_epoch=0, base_sequence=0,
                       is_transactional=True)
    produce(lg, [(b"k", b"1")], producer_id=pid, producer_epoch=0, base_sequence=1,
            is_transactional=True)
    lg.roll()
    produce(lg, [(b"b", big)])
    marker = bytearray(build_end_txn_marker_batch(CONTROL_ABORT, pid, 0, 1, NOW))
    abort_offset = lg.append_as_leader(marker, 0, NOW, origin=ORIGIN_COORDINATOR).first_offset
    lg.update_high_watermark(lg.log_end_offset)
    entries = ensure_aborted(lg, AbortedTxn(pid, first, abort_offset, abort_offset + 1))
    produce(lg, [(b"c", b"1")])
    lg.roll()
    lg.update_high_watermark(lg.log_end_offset)
    clean(lg, NOW)
    # The producer's last batch (offset 1) keeps an empty batch: its transaction's data was met,
    # so the ABORT marker and its .txnindex entry stay in the group that holds the marker.
    holder = next(s for s in lg.segments if s.base_offset <= abort_offset < (
        lg.segments[lg.segments.index(s) + 1].base_offset if s is not lg.active_segment else 1 << 62))
    assert [h.base_offset for h, _ in batches_of(lg) if h.is_control] == [abort_offset]
    path = os.path.join(lg.dir, file_name(holder.base_offset, TXN_INDEX_SUFFIX))
    assert read_aborted_txns(path) == entries
    lg.close()


def test_an_active_producers_current_epoch_marker_is_kept_empty_when_it_has_no_data_batch_left(lg):
    pid = 7
    produce(lg, [(b"a", b"1")], producer_id=pid, producer_epoch=0, base_sequence=0, is_transactional=True)
    # KIP-890: the marker ends the transaction at the next epoch, clearing the producer's batches.
    marker = bytearray(build_end_txn_marker_batch(CONTROL_COMMIT, pid, 1, 1, NOW))
    lg.append_as_leader(marker, 0, NOW, origin=ORIGIN_COORDINATOR, transaction_version=2)
    produce(lg, [(b"a", b"2")])
    lg.roll()
    lg.update_high_watermark(lg.log_end_offset)
    entry = lg.producer_state.producers[pid]
    assert entry.epoch == 1 and not entry.batches
    clean(lg, NOW)
    for later, key in ((NOW, b"y"), (NOW + 2 * DAY, b"z")):
        produce(lg, [(key, b"1")])
        lg.roll()
        lg.update_high_watermark(lg.log_end_offset)
        assert clean(lg, later) is not None
    control = [h for h, _ in batches_of(lg) if h.is_control]
    # Kafka's isBatchLastRecordOfProducer: kept, emptied, "needed to ensure fencing".
    assert [(h.base_offset, h.producer_id, h.producer_epoch) for h in control] == [(1, pid, 1)]


def test_the_last_batch_of_a_cleaning_round_is_kept_empty_so_its_last_offset_is_not_lost(lg):
    produce(lg, [(b"a", b"1")])
    produce_before_compacting(lg, [(None, b"no key")])  # the round's last batch: every record goes
    lg.roll()
    clean(lg)
    headers = [h for h, _ in batches_of(lg)]
    assert [(h.base_offset, h.records_count) for h in headers] == [(0, 1), (1, 0)]
    assert lg.segments[0].read_next_offset() == lg.segments[1].base_offset == 2


def test_an_emptied_batch_has_kafkas_empty_header_no_first_timestamp(lg):
    produce(lg, [(b"a", b"1")], ts=NOW + 5, producer_id=9, producer_epoch=0, base_sequence=0)
    produce(lg, [(b"a", b"2")])
    produce(lg, [(b"b", b"1")])
    lg.roll()
    clean(lg)
    empty = next(h for h, _ in batches_of(lg) if h.records_count == 0)
    assert (empty.base_timestamp, empty.max_timestamp) == (-1, NOW + 5)
    assert empty.attributes & 0x47 == 0


# ---- the model -----------------------------------------------------------------------------

ops = st.lists(
    st.tuples(st.lists(st.tuples(st.integers(0, 7), st.one_of(st.none(), st.binary(min_size=0, max_size=20))),
                       min_size=1, max_size=4),
              st.sampled_from([0, COMPRESSION_GZIP, COMPRESSION_LZ4])),
    min_size=1, max_size=40)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops, st.integers(300, 900))
def test_after_cleaning_a_full_read_returns_the_model_in_offset_order(batches, segment_bytes):
    with tempfile.TemporaryDirectory() as d:
        lg = Log(os.path.join(d, "t-0"), compacted_config(segment_bytes=segment_bytes))
        model: dict[bytes, tuple[int, bytes | None]] = {}
        try:
            for records, codec in batches:
                keyed = [(b"key-%d" % k, v) for k, v in records]
                first, _ = produce(lg, keyed, compression=codec)
                for i, (k, v) in enumerate(keyed):
                    model[k] = (first + i, v)
            lg.roll()
            clean(lg, NOW)
            expected = sorted((off, k, v) for k, (off, v) in model.items())
            assert read_all(lg) == expected
            # Past the delete horizon, a second clean drops the tombstones.
            produce(lg, [(b"other", b"x")])
            lg.roll()
            clean(lg, NOW + DAY)
            expected = sorted((off, k, v) for k, (off, v) in model.items() if v is not None)
            assert read_all(lg)[:len(expected)] == expected
            assert leftovers(lg) == []
        finally:
            lg.close()


def test_aborted_data_whose_marker_lies_past_the_cleaning_round_never_shadows_committed_data(lg):
    """Kafka's collectAbortedTransactions walks the .txnindex of every segment from the round's
    first on, the active one included (TransactionIndex.collectAbortedTxns stops at the first
    entry ending at or past the upper bound): an aborted transaction whose data lies below the
    round's upper bound but whose ABORT marker (and .txnindex entry) lies in the active segment
    is known aborted, so its data never takes a key's place in the offset map. Otherwise the
    committed record it shadows would go in this round and the aborted one in the next: the
    key lost, and a replica that cleaned in one round would keep what this one dropped."""
    pid = 11
    produce(lg, [(b"a", b"committed")])
    first, _ = produce(lg, [(b"a", b"aborted")], producer_id=pid, producer_epoch=0, base_sequence=0,
                       is_transactional=True)
    lg.roll()  # the round ends here: the marker lands in the active segment
    produce(lg, [(b"b", b"1")])
    marker = bytearray(build_end_txn_marker_batch(CONTROL_ABORT, pid, 0, 1, NOW))
    abort_offset = lg.append_as_leader(marker, 0, NOW, origin=ORIGIN_COORDINATOR).first_offset
    lg.update_high_watermark(lg.log_end_offset)
    ensure_aborted(lg, AbortedTxn(pid, first, abort_offset, abort_offset + 1))
    result = clean(lg, NOW)
    assert result is not None and result.end_offset == 2
    assert [(o, k, v) for o, k, v in read_all(lg) if k == b"a"][0] == (0, b"a", b"committed")
    produce(lg, [(b"c", b"1")])
    lg.roll()
    lg.update_high_watermark(lg.log_end_offset)
    assert clean(lg, NOW) is not None
    committed = [(o, k, v) for o, k, v in read_all(lg) if not (first <= o <= abort_offset)]
    assert (0, b"a", b"committed") in committed
