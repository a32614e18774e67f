"""A wire-level consumer: Fetch requests written by hand, record bytes received and dropped.

A librdkafka consumer on a 2-core box spends more CPU per record than the broker does
(it parses every record into a message object), so it measures the client. This consumer
measures what the broker can serve: it sends one Fetch at a time (as librdkafka does per
broker), receives the response into one preallocated buffer, reads only each partition's
header and the base offset + last offset delta of its last whole batch (to know where the
next fetch starts), and never looks at a record. Written with struct, no Strom code, so
the same client drives both brokers.

Fetch v4 request (api_key 1), after the int32 frame size and the v1 request header
(api_key int16, api_version int16, correlation_id int32, client_id string):

    replica_id int32 (-1) | max_wait_ms int32 | min_bytes int32 | max_bytes int32 |
    isolation_level int8 | topics: int32 count of
        (topic string | partitions: int32 count of
            (partition int32 | fetch_offset int64 | partition_max_bytes int32))

Fetch v4 response: correlation_id int32 | throttle_time_ms int32 | topics: int32 count of
    (topic string | partitions: int32 count of
        (partition_index int32 | error_code int16 | high_watermark int64 |
         last_stable_offset int64 | aborted_transactions: int32 count (-1 = null) of
         (producer_id int64, first_offset int64) | records: int32 size + bytes))

A v2 record batch starts: base_offset int64 | batch_length int32 (bytes after this field) |
partition_leader_epoch int32 | magic int8 | crc uint32 | attributes int16 |
last_offset_delta int32 ...
"""
from __future__ import annotations

import socket
import struct
import time

FETCH = 1
FETCH_VERSION = 4
LAST_OFFSET_DELTA_AT = 23  # within a batch


def fetch_request(correlation_id: int, topic: str, offsets: dict[int, int], max_wait_ms: int,
                  max_bytes: int, partition_max_bytes: int) -> bytes:
    client = b"strom-bench-wire"
    name = topic.encode()
    body = bytearray(struct.pack(">hhih", FETCH, FETCH_VERSION, correlation_id, len(client)) + client)
    body += struct.pack(">iiiibi", -1, max_wait_ms, 1, max_bytes, 0, 1)
    body += struct.pack(">h", len(name)) + name + struct.pack(">i", len(offsets))
    for partition, offset in offsets.items():
        body += struct.pack(">iqi", partition, offset, partition_max_bytes)
    return struct.pack(">i", len(body)) + bytes(body)


def next_offsets(payload: memoryview, offsets: dict[int, int]) -> int:
    """Advance ``offsets`` past the whole batches of a Fetch v4 response; the record bytes
    it carried. Raises on a partition error."""
    pos = 8  # correlation_id, throttle_time_ms
    record_bytes = 0
    (topics,) = struct.unpack_from(">i", payload, pos)
    pos += 4
    for _ in range(topics):
        (n,) = struct.unpack_from(">h", payload, pos)
        pos += 2 + n
        (partitions,) = struct.unpack_from(">i", payload, pos)
        pos += 4
        for _ in range(partitions):
            partition, error = struct.unpack_from(">ih", payload, pos)
            pos += 4 + 2 + 8 + 8
            if error:
                raise RuntimeError(f"Fetch error {error} on partition {partition}")
            (aborted,) = struct.unpack_from(">i", payload, pos)
            pos += 4 + max(aborted, 0) * 16
            (size,) = struct.unpack_from(">i", payload, pos)
            pos += 4
            end = pos + max(size, 0)
            record_bytes += max(size, 0)
            last = None
            while pos + 12 <= end:
                base, length = struct.unpack_from(">qi", payload, pos)
                if pos + 12 + length > end:
                    break  # a partial batch at the end of the slice
                (delta,) = struct.unpack_from(">i", payload, pos + LAST_OFFSET_DELTA_AT)
                last = base + delta
                pos += 12 + length
            if last is not None:
                offsets[partition] = last + 1
            pos = end
    return record_bytes


def _recv_exact(sock: socket.socket, view: memoryview) -> None:
    while view:
        n = sock.recv_into(view)
        if n == 0:
            raise EOFError("the broker closed the connection")
        view = view[n:]


def consume(bootstrap: str, topic: str, partitions: int, end_offsets: dict[int, int],
            max_bytes: int = 52428800, partition_max_bytes: int = 1 << 20,
            timeout_s: float = 120.0) -> tuple[float, int, int]:
    """Fetch every partition from offset 0 until ``end_offsets``; (seconds, bytes received
    on the wire, fetches). Defaults are the Java consumer's fetch.max.bytes and
    max.partition.fetch.bytes."""
    host, port = bootstrap.rsplit(":", 1)
    offsets = {p: 0 for p in range(partitions)}
    buf = bytearray(max_bytes + (1 << 20))
    view = memoryview(buf)
    received = fetches = 0
    with socket.create_connection((host, int(port)), timeout=timeout_s) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        t0 = time.perf_counter()
        deadline = t0 + timeout_s
        while any(offsets[p] < end_offsets[p] for p in offsets):
            if time.perf_counter() > deadline:
                raise TimeoutError(f"fetched to {offsets} of {end_offsets} in {timeout_s} s")
            wanted = {p: o for p, o in offsets.items() if o < end_offsets[p]}
            fetches += 1
            sock.sendall(fetch_request(fetches, topic, wanted, 500, max_bytes, partition_max_bytes))
            _recv_exact(sock, view[:4])
            (size,) = struct.unpack_from(">i", buf, 0)
            if size > len(buf):
                buf = bytearray(size)
                view = memoryview(buf)
            _recv_exact(sock, view[:size])
            received += 4 + size
            next_offsets(view[:size], offsets)
        return time.perf_counter() - t0, received, fetches
