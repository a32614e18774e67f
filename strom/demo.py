"""`strom demo`: write a partition log, kill a second writer with SIGKILL halfway through,
recover the log and read every record back.

``python -m strom.demo DIR RECORDS RECORD_SIZE`` is that second writer, the child process
the demo kills: it appends to DIR's partition, prints its log end offset and waits to be
killed. It is not a command of its own.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time


def _batches(count: int, record_size: int, per_batch: int = 1000):
    from ext.batch import build_batch

    value = b"v" * record_size
    template = None
    now = int(time.time() * 1000)
    for start in range(0, count, per_batch):
        n = min(per_batch, count - start)
        if template is None or n != per_batch:
            template = bytes(build_batch([(None, value, [], now)] * n))
        yield bytearray(template)


def demo_writer(directory: str, records: int, record_size: int) -> int:
    from engine.manager import LogManager

    manager = LogManager([directory])
    manager.startup()
    log = manager.get_or_create_log("demo", 0)
    for buf in _batches(records, record_size):
        log.append_as_leader(buf, 0)
        log.update_high_watermark(log.log_end_offset)
    print(log.log_end_offset, flush=True)
    time.sleep(3600)  # the parent kills us with SIGKILL
    return 0


def run_demo(directory: str | None, records: int, record_size: int) -> int:
    from engine.manager import LogManager, format_log_dir
    from ext.batch import iter_batches

    directory = directory or tempfile.mkdtemp(prefix="strom-demo-")
    if not os.path.exists(os.path.join(directory, "meta.properties")):
        format_log_dir(directory, "c3Ryb20tZGVtby1jbHVzdGVy", 1)
    half = records // 2
    print(f"log dir: {directory}")

    started = time.perf_counter()
    manager = LogManager([directory])
    manager.startup()
    log = manager.get_or_create_log("demo", 0)
    first_end = log.log_end_offset
    for buf in _batches(half, record_size):
        log.append_as_leader(buf, 0)
    log.update_high_watermark(log.log_end_offset)
    manager.shutdown()
    took = time.perf_counter() - started
    mb = half * record_size / 1e6
    print(f"appended {half:,} records of {record_size} B ({mb:.0f} MB) in {took:.2f} s: "
          f"{half / took:,.0f} records/s, {mb / took:,.0f} MB/s; clean shutdown")

    writer = subprocess.Popen(
        [sys.executable, "-m", "strom.demo", directory, str(records - half), str(record_size)],
        stdout=subprocess.PIPE, text=True,
    )
    written = int(writer.stdout.readline())
    writer.send_signal(signal.SIGKILL)
    writer.wait()
    print(f"a second writer appended up to offset {written:,} and was killed with SIGKILL")

    started = time.perf_counter()
    manager = LogManager([directory])
    manager.startup()
    log = manager.get_or_create_log("demo", 0)
    recovered = time.perf_counter() - started
    print(f"recovered {len(log.segments)} segment(s) after the unclean shutdown in {recovered:.2f} s; "
          f"log end offset {log.log_end_offset:,}")

    started = time.perf_counter()
    offset, seen = first_end, 0
    while offset < log.log_end_offset:
        data = log.read(offset, 8 << 20).records.read()
        for header in iter_batches(data, check_crc=True):
            seen += header.records_count
            offset = header.next_offset
    took = time.perf_counter() - started
    manager.shutdown()
    ok = seen == records and log.log_end_offset - first_end == records
    verdict = "all present" if ok else "MISSING DATA"
    print(f"read back {seen:,} records (CRC checked) in {took:.2f} s: {verdict}")
    return 0 if ok else 1


def main(argv: list[str]) -> int:
    """The second writer's entry point: DIR RECORDS RECORD_SIZE."""
    if len(argv) != 3 or not argv[1].isdigit() or not argv[2].isdigit():
        print("usage: python -m strom.demo DIR RECORDS RECORD_SIZE (the writer `strom demo` "
              "starts and kills)", file=sys.stderr)
        return 2
    return demo_writer(argv[0], int(argv[1]), int(argv[2]))


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
