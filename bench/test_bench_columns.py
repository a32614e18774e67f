"""The Spark reader's decode path: ext.columns.decode_columns then ext.arrow_columns.to_arrow,
one call over 1 M records of 100 bytes (a 10-byte key, a 90-byte value) in batches of 1000
(100 k when benchmarks are disabled).
Target on a 2-core box: >= 10 M records/s uncompressed, end to end to an Arrow RecordBatch.
extra_info["records_per_s_median"] is the figure (report.py shows it as M records/s too)."""
import os

import pytest

from ext.arrow_columns import to_arrow
from ext.batch import assign_offsets, build_batch
from ext.columns import decode_columns

RECORDS = 1_000_000
PER_BATCH = 1000
TOPIC = "bench-topic"


def log_of(codec: int, headers: bool, count: int) -> bytes:
    """``count`` records as a log holds them: consecutive batches, offsets 0 on. Values are
    hex text, which compresses about 2:1, as text payloads do."""
    records = [(b"key-%06d" % i, os.urandom(45).hex().encode(),
                [("trace", b"%016x" % i), ("source", b"bench")] if headers else [],
                1_700_000_000_000 + i) for i in range(PER_BATCH)]
    buf = bytearray(build_batch(records, compression=codec) * (count // PER_BATCH))
    assign_offsets(buf, 0, 1)
    return bytes(buf)


@pytest.mark.parametrize("codec,headers", [(0, False), (3, False), (4, False), (0, True)],
                         ids=["none", "lz4", "zstd", "none-headers"])
def test_decode_columns_to_arrow_1m(benchmark, size, codec, headers):
    records = size(RECORDS, 100_000)
    data = log_of(codec, headers, records)

    def decode():
        return to_arrow(decode_columns(data, 0, records, headers), TOPIC, 0, headers)

    benchmark.extra_info["records"] = records
    benchmark.extra_info["bytes_in"] = len(data)
    rounds, warmup = size((10, 1), (1, 0))
    rb = benchmark.pedantic(decode, rounds=rounds, iterations=1, warmup_rounds=warmup)
    assert rb.num_rows == records and rb.column("offset")[-1].as_py() == records - 1
    if benchmark.enabled:
        benchmark.extra_info["records_per_s_median"] = round(records / benchmark.stats.stats.median)
