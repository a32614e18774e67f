"""The aborted-transaction index (``.txnindex``), each rule as Kafka's TransactionIndex has it."""
import os
import struct

import pytest

from engine.errors import InvalidIndexError
from engine.reader import INDEX_SUFFIX, file_name
from engine.txn_index import (
    ENTRY_SIZE,
    AbortedTxn,
    TransactionIndex,
    collect_aborted,
    read_aborted_txns,
    txn_index_file_name,
)


def kafka_entry(producer_id, first_offset, last_offset, last_stable_offset, version=0):
    """One AbortedTxn written out field by field from Kafka's documented layout (version
    int16, producerId int64, firstOffset int64, lastOffset int64, lastStableOffset int64,
    all big-endian), independently of engine.txn_index's packing."""
    return (version.to_bytes(2, "big", signed=True)
            + producer_id.to_bytes(8, "big", signed=True)
            + first_offset.to_bytes(8, "big", signed=True)
            + last_offset.to_bytes(8, "big", signed=True)
            + last_stable_offset.to_bytes(8, "big", signed=True))


@pytest.fixture
def index(tmp_path):
    idx = TransactionIndex.for_segment(str(tmp_path), 0)
    yield idx
    idx.close()


def test_the_txnindex_file_is_named_by_the_20_digit_base_offset_as_the_other_indexes():
    assert txn_index_file_name(0) == "00000000000000000000.txnindex"
    assert txn_index_file_name(1234) == file_name(1234, INDEX_SUFFIX).replace(".index", ".txnindex")


def test_an_aborted_txn_entry_is_34_big_endian_bytes_in_kafkas_layout(tmp_path, index):
    txns = [AbortedTxn(7, 0, 10, 11), AbortedTxn(2**63 - 1, 12, 20, 12),
            AbortedTxn(-1, 2**40, 2**40 + 5, 2**40 + 6)]
    for txn in txns:
        index.append(txn)
    index.flush()
    with open(index.path, "rb") as f:
        written = f.read()
    assert ENTRY_SIZE == 34
    assert written == b"".join(kafka_entry(*t) for t in txns)


def test_a_hand_written_kafka_txnindex_reads_back_entry_for_entry(tmp_path):
    path = tmp_path / txn_index_file_name(100)
    path.write_bytes(kafka_entry(1000, 100, 150, 151) + kafka_entry(1001, 120, 160, 161))
    expected = [AbortedTxn(1000, 100, 150, 151), AbortedTxn(1001, 120, 160, 161)]
    assert read_aborted_txns(str(path)) == expected
    with TransactionIndex(str(path), 100) as idx:
        assert idx.all_aborted() == expected
        assert idx.last_offset == 160


def test_the_index_file_is_created_only_by_its_first_append_as_kafkas(tmp_path, index):
    assert not os.path.exists(index.path)
    assert index.all_aborted() == []
    index.truncate_to(0)
    index.reset()
    index.flush()
    index.sanity_check()
    assert not os.path.exists(index.path)
    assert read_aborted_txns(index.path) == []
    index.append(AbortedTxn(1, 0, 5, 6))
    assert os.path.getsize(index.path) == 34


def test_append_refuses_a_last_offset_not_above_the_previous_one_as_kafka_does(index):
    index.append(AbortedTxn(1, 0, 10, 11))
    for last in (10, 9):
        with pytest.raises(InvalidIndexError, match="must increase"):
            index.append(AbortedTxn(2, 5, last, 11))
    assert index.all_aborted() == [AbortedTxn(1, 0, 10, 11)]
    index.append(AbortedTxn(2, 5, 11, 12))
    assert [t.last_offset for t in index.all_aborted()] == [10, 11]


def test_a_reopened_index_still_refuses_an_append_below_its_last_entry(tmp_path, index):
    index.append(AbortedTxn(1, 0, 10, 11))
    index.close()
    with TransactionIndex.for_segment(str(tmp_path), 0) as reopened:
        with pytest.raises(InvalidIndexError):
            reopened.append(AbortedTxn(2, 3, 8, 11))
        reopened.append(AbortedTxn(2, 3, 12, 13))
        assert len(reopened.all_aborted()) == 2


def test_collect_aborted_takes_the_entries_overlapping_the_fetch_range_as_collect_aborted_txns(index):
    # (producer, first, last, LSO): lastOffset >= fetch offset and firstOffset < upper bound.
    for txn in [AbortedTxn(0, 0, 10, 11), AbortedTxn(1, 5, 20, 21), AbortedTxn(2, 25, 30, 31),
                AbortedTxn(3, 40, 50, 51)]:
        index.append(txn)
    result = index.collect_aborted(11, 26)
    assert [t.producer_id for t in result.aborted] == [1, 2]
    assert result.is_complete  # producer 2's LSO 31 >= 26: no later segment can matter
    # a fetch range whose first offset equals an entry's lastOffset still includes it
    assert [t.producer_id for t in index.collect_aborted(10, 11).aborted] == [0]
    # firstOffset == upper bound is outside the (exclusive) range
    assert [t.producer_id for t in index.collect_aborted(31, 40).aborted] == []


def test_collect_aborted_is_incomplete_until_an_entry_lso_reaches_the_upper_bound(index):
    index.append(AbortedTxn(0, 0, 10, 11))
    index.append(AbortedTxn(1, 5, 20, 21))
    result = index.collect_aborted(0, 100)
    assert [t.producer_id for t in result.aborted] == [0, 1]
    assert not result.is_complete
    # complete at the first entry whose LSO reaches the bound: later entries are not taken
    result = index.collect_aborted(0, 11)
    assert [t.producer_id for t in result.aborted] == [0]
    assert result.is_complete


def test_collect_aborted_is_the_same_over_the_file_and_over_its_read_only_entries(index):
    for txn in [AbortedTxn(0, 0, 10, 11), AbortedTxn(1, 5, 20, 21)]:
        index.append(txn)
    for fetch, upper in [(0, 5), (6, 15), (15, 30), (21, 40)]:
        assert collect_aborted(read_aborted_txns(index.path), fetch, upper) == \
            index.collect_aborted(fetch, upper)


def test_truncate_to_drops_entries_from_the_first_whose_last_offset_reaches_it_as_kafka(index):
    for txn in [AbortedTxn(0, 0, 10, 11), AbortedTxn(1, 5, 20, 21), AbortedTxn(2, 22, 30, 31)]:
        index.append(txn)
    index.truncate_to(21)
    assert [t.producer_id for t in index.all_aborted()] == [0, 1]
    assert os.path.getsize(index.path) == 2 * 34
    index.truncate_to(20)
    assert [t.producer_id for t in index.all_aborted()] == [0]
    # the last offset follows the truncation: 15 is now above the last entry
    index.append(AbortedTxn(3, 12, 15, 16))
    assert index.last_offset == 15
    index.truncate_to(100)  # nothing at or past 100
    assert len(index.all_aborted()) == 2
    index.truncate_to(0)
    assert index.all_aborted() == [] and index.last_offset is None
    index.append(AbortedTxn(4, 0, 1, 2))


def test_reset_empties_the_index_and_forgets_its_last_offset(index):
    index.append(AbortedTxn(0, 0, 10, 11))
    index.reset()
    assert index.all_aborted() == [] and os.path.getsize(index.path) == 0
    index.append(AbortedTxn(1, 0, 3, 4))


def test_sanity_check_refuses_an_entry_below_the_segment_base_offset_as_kafka(tmp_path):
    path = tmp_path / txn_index_file_name(100)
    path.write_bytes(kafka_entry(1, 90, 99, 100))
    with TransactionIndex(str(path), 100) as idx:
        with pytest.raises(InvalidIndexError, match="less than the start offset 100"):
            idx.sanity_check()
    path.write_bytes(kafka_entry(1, 90, 100, 101))
    with TransactionIndex(str(path), 100) as idx:
        idx.sanity_check()


def test_sanity_check_refuses_a_size_that_is_not_a_multiple_of_34(tmp_path):
    path = tmp_path / txn_index_file_name(0)
    path.write_bytes(kafka_entry(1, 0, 5, 6) + b"\x00" * 10)
    with TransactionIndex(str(path), 0) as idx:
        with pytest.raises(InvalidIndexError, match="not a multiple of 34"):
            idx.sanity_check()
        # reads skip the torn tail, as Kafka's iterator does
        assert idx.all_aborted() == [AbortedTxn(1, 0, 5, 6)]
    assert read_aborted_txns(str(path)) == [AbortedTxn(1, 0, 5, 6)]


def test_an_append_after_a_torn_entry_cuts_it_off_so_entries_stay_aligned(tmp_path):
    path = tmp_path / txn_index_file_name(0)
    path.write_bytes(kafka_entry(1, 0, 5, 6) + kafka_entry(2, 6, 9, 10)[:20])
    with TransactionIndex(str(path), 0) as idx:
        idx.append(AbortedTxn(3, 6, 12, 13))
        idx.sanity_check()
    assert path.read_bytes() == kafka_entry(1, 0, 5, 6) + kafka_entry(3, 6, 12, 13)


def test_an_entry_of_an_unknown_version_is_refused_as_kafka_refuses_it(tmp_path):
    path = tmp_path / txn_index_file_name(0)
    path.write_bytes(kafka_entry(1, 0, 5, 6) + kafka_entry(2, 6, 9, 10, version=1))
    with pytest.raises(InvalidIndexError, match="version 1"):
        read_aborted_txns(str(path))
    # The writable index still opens, as Kafka's lazily opened one does: sanity_check names the
    # corruption and recovery resets the index (no descriptor is left behind either way).
    index = TransactionIndex(str(path), 0)
    with pytest.raises(InvalidIndexError, match="version 1"):
        index.sanity_check()
    index.reset()
    index.sanity_check()
    assert index.all_aborted() == []
    index.close()


def test_rename_follows_the_file_and_a_missing_file_alike(tmp_path, index):
    index.rename(index.path + ".deleted")  # no file yet: the path changes all the same
    assert index.path.endswith(".txnindex.deleted") and not os.path.exists(index.path)
    index.append(AbortedTxn(1, 0, 5, 6))
    target = str(tmp_path / "00000000000000000000.txnindex.swap")
    index.rename(target)
    assert index.path == target and os.path.exists(target)
    index.append(AbortedTxn(2, 6, 8, 9))  # the fd follows the file
    assert read_aborted_txns(target) == [AbortedTxn(1, 0, 5, 6), AbortedTxn(2, 6, 8, 9)]


def test_delete_if_exists_says_whether_there_was_a_file(tmp_path):
    idx = TransactionIndex.for_segment(str(tmp_path), 0)
    assert idx.delete_if_exists() is False
    idx = TransactionIndex.for_segment(str(tmp_path), 0)
    idx.append(AbortedTxn(1, 0, 5, 6))
    assert idx.delete_if_exists() is True
    assert not os.listdir(tmp_path)


def test_a_closed_index_refuses_appends_and_reads(index):
    index.append(AbortedTxn(1, 0, 5, 6))
    index.close()
    index.close()
    with pytest.raises(ValueError, match="closed"):
        index.append(AbortedTxn(2, 6, 8, 9))
    with pytest.raises(ValueError, match="closed"):
        index.all_aborted()


def test_entries_are_the_struct_kafka_documents():
    # The layout once more, through struct, against AbortedTxn.to_bytes directly.
    txn = AbortedTxn(-5, 3, 4, 5)
    assert struct.unpack(">hqqqq", txn.to_bytes()) == (0, -5, 3, 4, 5)
