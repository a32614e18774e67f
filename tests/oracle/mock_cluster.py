"""librdkafka's real bytes, without a Strom broker.

The mock cluster built into confluent-kafka (``test.mock.num.brokers``) stores the
producer's record batches as they came; ``fetch_raw`` reads them back with a Fetch v4
over a loopback socket (kafka-python's protocol classes encode the request and decode
the response), so the tests see librdkafka's exact batches.
"""
import socket
import struct

IO_TIMEOUT_S = 10.0


def _read_exact(sock: socket.socket, n: int) -> bytes:
    chunks, left = [], n
    while left:
        chunk = sock.recv(left)
        if not chunk:
            raise EOFError(f"connection closed with {left} of {n} bytes unread")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _fetch_once(host, port, topic, partition, offset, isolation_level):
    from kafka.protocol.old.fetch import FetchRequest, FetchResponse

    request = FetchRequest[4](
        replica_id=-1, max_wait_ms=100, min_bytes=1, max_bytes=64 << 20,
        isolation_level=isolation_level,
        topics=[(topic, [(partition, offset, 64 << 20)])])
    request.with_header(correlation_id=1, client_id="strom-oracle")
    with socket.create_connection((host, port), timeout=IO_TIMEOUT_S) as sock:
        sock.sendall(request.encode(header=True, framed=True))
        (size,) = struct.unpack(">i", _read_exact(sock, 4))
        response = FetchResponse[4].decode(_read_exact(sock, size), header=True)
    ((_, partitions),) = response.responses
    ((_, error_code, high_watermark, _, _, records),) = partitions
    assert error_code == 0, f"fetch error {error_code}"
    return high_watermark, records or b""


def fetch_raw(host: str, port: int, topic: str, partition: int = 0,
              isolation_level: int = 0) -> bytes:
    """All record-batch bytes of one partition, as the broker stores them. The mock
    broker answers a Fetch with one batch, so this fetches until the high watermark.
    isolation_level 0 (read_uncommitted) includes aborted data and control batches."""
    out, offset = [], 0
    for _ in range(10_000):
        high_watermark, records = _fetch_once(host, port, topic, partition, offset,
                                              isolation_level)
        if offset >= high_watermark:
            return b"".join(out)
        assert records, f"no records at {offset} below the high watermark {high_watermark}"
        out.append(records)
        pos = 0  # walk the batches by hand (struct, not ext.batch) for the next offset
        while pos + 27 <= len(records):
            (base_offset,) = struct.unpack_from(">q", records, pos)
            (length,) = struct.unpack_from(">i", records, pos + 8)
            (last_delta,) = struct.unpack_from(">i", records, pos + 23)
            offset = base_offset + last_delta + 1
            pos += 12 + length
    raise AssertionError("fetch_raw did not reach the high watermark")


def mock_broker(producer) -> tuple[str, int]:
    """host, port of the (single) broker of a producer's librdkafka mock cluster."""
    (broker,) = producer.list_topics(timeout=IO_TIMEOUT_S).brokers.values()
    return broker.host, broker.port
