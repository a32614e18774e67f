"""Engine benchmarks: the produce append path and the fetch sendfile path.
Targets on a 2-core box (issue 2): validate + assign + append >= 1 GB/s to page cache;
sendfile of a segment range to a socket well above 1 GB/s; no Python work per record."""
import os
import socket
import threading

import pytest

from bench.test_bench_kernels import one_mib_of_batches, records_of
from engine.config import LogConfig
from engine.log import Log
from ext import segment as native
from ext.batch import build_batch

MIB = 1 << 20


def test_append_1mib_validate_assign_write(benchmark, size, tmp_path):
    """Log.append_as_leader of ~1 MiB of 100-byte records: CRC validate, offset assignment,
    one write to the active segment, index maintenance. Rolls at 256 MiB segments."""
    log = Log(str(tmp_path / "bench-0"), LogConfig(segment_bytes=256 * MIB))
    template = one_mib_of_batches()
    buf = bytearray(template)
    benchmark.extra_info["bytes"] = len(buf)

    def append():
        log.append_as_leader(buf, 1, 1_700_000_000_500)

    rounds, warmup = size((200, 5), (1, 0))
    benchmark.pedantic(append, rounds=rounds, iterations=1, warmup_rounds=warmup)
    assert log.log_end_offset % 1000 == 0
    log.close()


@pytest.mark.parametrize("source,target", [
    (0, "lz4"), (0, "zstd"), (3, "zstd"), (1, "lz4"), (3, "lz4"),
], ids=["none-to-lz4", "none-to-zstd", "lz4-to-zstd", "gzip-to-lz4", "lz4-kept"])
def test_append_1mib_in_the_topics_codec(benchmark, size, tmp_path, source, target):
    """Log.append_as_leader of ~1 MiB of 100-byte records (before compression), 1000 to a
    batch, under a topic's compression.type: a batch in another codec is decompressed and
    compressed again (ext.batch.recompress); lz4-kept is a batch already in the topic's
    codec, validated and stored as it came."""
    log = Log(str(tmp_path / "bench-0"), LogConfig(segment_bytes=256 * MIB, compression_type=target))
    batch = build_batch(records_of(100, 1000), compression=source)
    buf = bytearray(batch * 9)
    benchmark.extra_info["bytes"] = 9 * 1000 * 100

    def append():
        log.append_as_leader(buf, 1, 1_700_000_000_500)

    rounds, warmup = size((50, 2), (1, 0))
    benchmark.pedantic(append, rounds=rounds, iterations=1, warmup_rounds=warmup)
    assert log.log_end_offset % 9000 == 0
    log.close()


def tcp_pair() -> tuple[socket.socket, socket.socket]:
    server = socket.create_server(("127.0.0.1", 0))
    client = socket.create_connection(server.getsockname())
    accepted, _ = server.accept()
    server.close()
    return accepted, client


@pytest.mark.parametrize("pair", [socket.socketpair, tcp_pair], ids=["socketpair", "tcp-loopback"])
def test_sendfile_segment_to_socket(benchmark, size, tmp_path, pair):
    """ext.segment.sendfile of a 64 MiB segment range (page cache) into a socket drained by
    a thread: a Unix socket pair, and TCP over loopback (what a fetch really uses)."""
    segment = size(64 * MIB, 8 * MIB)
    path = tmp_path / "00000000000000000000.log"
    with open(path, "wb") as f:
        for _ in range(segment // MIB):
            f.write(os.urandom(MIB))
    fd = os.open(path, os.O_RDONLY)
    left, right = pair()
    left.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 * MIB)
    right.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 * MIB)
    stop = threading.Event()

    def drain():
        buf = bytearray(4 * MIB)
        while not stop.is_set():
            if right.recv_into(buf) == 0:
                return

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()

    def send():
        offset, sent = 0, 0
        while sent < segment:
            n = native.sendfile(left.fileno(), fd, offset, segment - sent)
            offset += n
            sent += n
        return sent

    benchmark.extra_info["bytes"] = segment
    assert benchmark.pedantic(send, rounds=size(10, 1), iterations=1) == segment
    stop.set()
    left.close()
    reader.join(timeout=5)
    right.close()
    os.close(fd)
