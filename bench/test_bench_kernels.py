"""Micro-benchmarks of the native kernels (ext/). Targets on a 2-core box (issue 2):
CRC32C >= 5 GB/s on 1 MiB; index lookup <= 2 us; build/decode in records/s."""
import os

import pytest

from ext.batch import assign_offsets, build_batch, decode_records, scan
from ext.crc import crc32c
from ext.index import OffsetIndex

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
