"""ext.batch against kafka-python's independent, pure-Python record batch v2 code.

Both directions: every batch we build reads back identically through kafka-python's
DefaultRecordBatch / MemoryRecords, and every batch kafka-python's
DefaultRecordBatchBuilder writes passes our validate/scan and decodes identically.
"""
import os
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ext import batch

kafka_record = pytest.importorskip("kafka.record.default_records")
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder  # noqa: E402
from kafka.record.memory_records import MemoryRecords  # noqa: E402

pytestmark = [pytest.mark.usefixtures("kafka_python_snappy"), pytest.mark.timeout(120)]

CODECS = [0, 1, 2, 3, 4]

CASES = {
    "plain": [(b"key", b"value", [], 1_600_000_000_000)],
    "nulls": [(None, b"v", [], 1), (b"k", None, [], 2), (None, None, [], 3), (b"", b"", [], 4)],
    "headers": [(b"k", b"v", [("a", b"1"), ("empty", b""), ("null", None), ("ü", b"\x00")], 9)],
    "many": [(b"%d" % i, os.urandom(i % 200), [("i", b"%d" % i)] if i % 2 else [], 10 * i)
             for i in range(1000)],
    "big": [(b"big", os.urandom(2 << 20), [], 7)],
    "repetitive": [(b"key", b"the same value " * 20, [("h", b"x")], 1_000 + i)
                   for i in range(200)],
    "timestamps": [(b"a", b"", [], 500), (b"b", b"", [], -1), (b"c", b"", [], 2**41)],
}


def kp_records(data):
    kb = DefaultRecordBatch(bytes(data))
    assert kb.validate_crc()
    return kb, [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in kb]


def expected(records, base_offset):
    return [(base_offset + i, ts, k, v, list(hs)) for i, (k, v, hs, ts) in enumerate(records)]


def ours(data, pos=0):
    return [(r.offset, r.timestamp, r.key, r.value, r.headers)
            for r in batch.decode_records(data, pos)]


# ---- ours -> kafka-python ----

@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("case", list(CASES))
def test_kafka_python_reads_our_batches(case, codec):
    records = CASES[case]
    data = batch.build_batch(records, base_offset=77, compression=codec,
                             partition_leader_epoch=4, producer_id=1234, producer_epoch=2,
                             base_sequence=10, is_transactional=True)
    kb, read = kp_records(data)
    assert read == expected(records, 77)
    assert (kb.base_offset, kb.compression_type, kb.producer_id, kb.producer_epoch,
            kb.base_sequence, kb.is_transactional, kb.is_control_batch, kb.leader_epoch) == (
        77, codec, 1234, 2, 10, True, False, 4)
    assert kb.last_offset_delta == len(records) - 1
    assert kb.first_timestamp == records[0][3]
    assert kb.max_timestamp == max(r[3] for r in records)
    assert kb.timestamp_type == 0


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_reads_our_control_batch(codec):
    commit = (b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x05", [], 1000)
    data = batch.build_batch([commit], base_offset=9, compression=codec, producer_id=3,
                             producer_epoch=0, is_transactional=True, is_control=True)
    kb = DefaultRecordBatch(data)
    assert kb.validate_crc() and kb.is_control_batch and kb.is_transactional
    (r,) = list(kb)
    assert (r.offset, r.version, r.commit) == (9, 0, True)


def test_kafka_python_reads_log_append_time():
    records = [(b"a", b"1", [], 10), (b"b", b"2", [], 30)]
    buf = bytearray(batch.build_batch(records, compression=3))
    batch.assign_offsets(buf, 50, 1, log_append_time=12345)
    kb, read = kp_records(buf)
    assert kb.timestamp_type == 1
    assert [(o, t) for o, t, *_ in read] == [(50, 12345), (51, 12345)]


def test_kafka_python_walks_our_assigned_log():
    buf = bytearray()
    for codec in CODECS:
        buf += batch.build_batch(CASES["nulls"], compression=codec)
    summary = batch.assign_offsets(buf, 1000, 2)
    mr = MemoryRecords(bytes(buf))
    offsets, seen = [], 0
    while mr.has_next():
        kb = mr.next_batch()
        assert kb.validate_crc() and kb.leader_epoch == 2
        assert kb.base_offset == summary.last_offsets[seen] - 3
        offsets += [r.offset for r in kb]
        seen += 1
    assert seen == 5 and offsets == list(range(1000, 1020))


# ---- kafka-python -> ours ----

def kp_build(records, codec, base_offset=0, transactional=False, pid=-1, epoch=-1, seq=-1):
    """kafka-python writes producer batches: baseOffset 0 and offset deltas 0..n-1;
    base_offset is then patched in (it is outside the CRC), as a broker would."""
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=codec, is_transactional=transactional, producer_id=pid,
        producer_epoch=epoch, base_sequence=seq, batch_size=64 << 20)
    for i, (k, v, hs, ts) in enumerate(records):
        assert builder.append(i, timestamp=ts, key=k, value=v, headers=hs)
    data = bytearray(builder.build())
    struct.pack_into(">q", data, 0, base_offset)
    return bytes(data)


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("case", list(CASES))
def test_we_read_kafka_python_batches(case, codec):
    records = CASES[case]
    data = kp_build(records, codec, transactional=True, pid=55, epoch=3, seq=2**31 - 2)
    h = batch.validate(data)
    # kafka-python keeps a batch plain when compressing would not shrink it
    assert h.compression in (0, codec)
    if case == "repetitive":
        assert h.compression == codec
    assert (h.records_count, h.last_offset_delta) == (len(records), len(records) - 1)
    assert (h.producer_id, h.producer_epoch, h.base_sequence, h.is_transactional) == (
        55, 3, 2**31 - 2, True)
    assert h.last_sequence == (2**31 - 2 + len(records) - 1) % 2**31
    assert h.base_timestamp == records[0][3] and h.max_timestamp == max(r[3] for r in records)
    assert ours(data) == expected(records, 0)
    s = batch.scan(data)
    assert (s.count, s.valid_bytes, s.records_count) == (1, len(data), len(records))


def test_we_scan_and_reassign_a_kafka_python_log():
    log = b"".join(kp_build(CASES["nulls"], codec, base_offset=4 * i)
                   for i, codec in enumerate(CODECS))
    s = batch.scan(log)
    assert s.count == 5 and s.last_offsets == [3, 7, 11, 15, 19]
    buf = bytearray(log)
    batch.assign_offsets(buf, 100, 0, log_append_time=5)
    mr = MemoryRecords(bytes(buf))
    got = []
    while mr.has_next():
        kb = mr.next_batch()
        assert kb.validate_crc()
        got += [(r.offset, r.timestamp) for r in kb]
    assert got == [(100 + i, 5) for i in range(20)]


# ---- both ways, random records ----

RECORDS = st.lists(
    st.tuples(st.one_of(st.none(), st.binary(max_size=40)),
              st.one_of(st.none(), st.binary(max_size=400)),
              st.lists(st.tuples(st.text(max_size=10),
                                 st.one_of(st.none(), st.binary(max_size=10))),
                       max_size=4),
              st.integers(-1, 2**45)),
    min_size=1, max_size=30)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(RECORDS, st.sampled_from(CODECS), st.integers(0, 2**40))
def test_random_records_agree_both_ways(records, codec, base_offset):
    ours_built = batch.build_batch(records, base_offset=base_offset, compression=codec)
    assert kp_records(ours_built)[1] == expected(records, base_offset)
    theirs = kp_build(records, codec, base_offset=base_offset)
    assert ours(theirs) == expected(records, base_offset)
    if codec == 0:
        assert ours_built[21:] == theirs[21:]  # same encoder decisions byte for byte
