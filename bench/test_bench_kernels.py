"""Micro-benchmarks of the native kernels (ext/). Targets on a 2-core box (issue 2):
CRC32C >= 5 GB/s on 1 MiB; index lookup <= 2 us; build/decode in records/s; the cleaner's
offset map in records/s and as a ratio to memcpy of the same bytes."""
import os
import time

import numpy as np
import pytest

from ext.batch import assign_offsets, build_batch, decode_records, scan
from ext.crc import crc32c
from ext.index import OffsetIndex
from ext.offset_map import OffsetMap

MIB = 1 << 20


def records_of(size: int, count: int):
    return [
        (None, os.urandom(size // 2).hex().encode()[:size], [], 1_700_000_000_000 + i)
        for i in range(count)
    ]


def one_mib_of_batches(record_size: int = 100) -> bytearray:
    """About 1 MiB of producer batches of 1000 records each."""
    batch = build_batch(records_of(record_size, 1000))
    return bytearray(batch * max(1, MIB // len(batch)))


def test_crc32c_1mib(benchmark):
    data = os.urandom(MIB)
    benchmark.extra_info["bytes"] = MIB
    result = benchmark(crc32c, data)
    assert result == crc32c(data)


def test_scan_validate_1mib(benchmark):
    buf = one_mib_of_batches()
    assign_offsets(buf, 0, 1)  # a log's view: offsets increase from batch to batch
    benchmark.extra_info["bytes"] = len(buf)
    summary = benchmark(scan, buf, 0, True, False)
    assert summary.valid_bytes == len(buf)


def test_assign_offsets_1mib(benchmark):
    buf = one_mib_of_batches()
    benchmark.extra_info["bytes"] = len(buf)
    summary = benchmark(assign_offsets, buf, 1000, 5, -1)
    assert summary.first_offset == 1000


@pytest.mark.parametrize("codec", [0, 3], ids=["none", "lz4"])
def test_build_batch_1000_records(benchmark, codec):
    recs = records_of(100, 1000)
    benchmark.extra_info["records"] = 1000
    out = benchmark(build_batch, recs, 0, codec)
    assert len(decode_records(out)) == 1000


@pytest.mark.parametrize("codec", [0, 3], ids=["none", "lz4"])
def test_decode_records_1000(benchmark, codec):
    batch = build_batch(records_of(100, 1000), compression=codec)
    benchmark.extra_info["records"] = 1000
    records = benchmark(decode_records, batch, 0, False)
    assert len(records) == 1000


def test_offset_index_lookup(benchmark, tmp_path):
    index = OffsetIndex(str(tmp_path / "00000000000000000000.index"), 0, 10 * MIB)
    for i in range(1, index.max_entries):
        index.append(i * 10, i * 100)
    targets = [(i * 7919) % (index.max_entries * 10) for i in range(1000)]

    def lookups():
        lookup = index.lookup
        for t in targets:
            lookup(t)

    benchmark.extra_info["lookups_per_round"] = len(targets)
    benchmark(lookups)
    assert index.lookup(15) == (10, 100)
    index.close()


def compacted_topic_log(records: int) -> bytearray:
    """``records`` keyed 50-byte records in batches of 1000, offsets increasing, over
    records // 100 distinct keys: a changelog where each key is written 100 times."""
    distinct = max(1, records // 100)
    batches = [
        build_batch([(b"user-%08d" % ((b * 1000 + i) * 7919 % distinct), os.urandom(25).hex().encode(),
                      [], 1_700_000_000_000 + i) for i in range(1000)])
        for b in range(10)
    ]
    buf = bytearray(b"".join(batches[b % 10] for b in range(max(1, records // 1000))))
    assign_offsets(buf, 0, 1)
    return buf


def test_offset_map_add_batches_1m_records(benchmark, size):
    """The cleaner's offset map over the dirty section: OffsetMap.add_batches of 1 M records
    (~73 MB, 10,000 keys), reported against memcpy of the same bytes in the same run."""
    records = size(1_000_000, 10_000)
    buf = compacted_topic_log(records)
    offset_map = OffsetMap(slots=1 << 20)

    def clean_map():
        offset_map.clear()
        return (), {}

    def add():
        return offset_map.add_batches(buf)

    def best(fn, rounds):
        times = []
        for _ in range(rounds):
            clean_map()
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
        return min(times)

    src = np.frombuffer(buf, dtype=np.uint8)
    dst = np.empty_like(src)
    rounds = size(10, 1)
    memcpy_s = best(lambda: np.copyto(dst, src), rounds)
    add_s = best(add, rounds)
    benchmark.extra_info.update({
        "records": records,
        "bytes": len(buf),
        "records_per_s": records / add_s,
        "mb_per_s": len(buf) / add_s / 1e6,
        "memcpy_mb_per_s": len(buf) / memcpy_s / 1e6,
        "ratio_to_memcpy": memcpy_s / add_s,
    })
    fill = benchmark.pedantic(add, setup=clean_map, rounds=rounds, iterations=1)
    assert not fill.full and fill.records == records
    assert offset_map.size == max(1, records // 100)
