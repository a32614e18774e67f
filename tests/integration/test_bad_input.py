"""Bad input against a real node: each bad connection gets its answer or is closed, and
the broker keeps serving everyone else."""
import socket
import struct

import pytest

from protocol import messages as M
from protocol.errors import Error
from protocol.headers import encode_request, read_response_header
from protocol.types import Reader

pytestmark = pytest.mark.timeout(120)


def connect(node) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", node.broker_port), timeout=10)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def read_frame(sock) -> bytes | None:
    head = b""
    while len(head) < 4:
        chunk = sock.recv(4 - len(head))
        if not chunk:
            return None
        head += chunk
    size = struct.unpack(">i", head)[0]
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def closed_by_broker(sock) -> bool:
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def metadata_works(node) -> bool:
    with connect(node) as sock:
        sock.sendall(encode_request(3, 12, 1, "probe", M.MetadataRequest(topics=None)))
        r = Reader(read_frame(sock))
        read_response_header(r, 3, 12)
        body = M.RESPONSES[3].decode(12, r)
        return [b.node_id for b in body.brokers] == [1]


@pytest.mark.parametrize("frame", [
    struct.pack(">i", 3) + b"\x00\x03\x00",  # a whole frame too short for a header
    struct.pack(">ihhih", 10, 3, 12, 7, 200) + b"ab",  # a client id longer than the frame
    encode_request(0, 9, 3, "x", M.ProduceRequest(acks=1, timeout_ms=1000))[:-2] + b"\xff\xff",
], ids=["short-header", "overlong-string", "garbled-body"])
def test_a_malformed_frame_closes_that_connection_only(shared_node, frame):
    bystander = connect(shared_node)
    with connect(shared_node) as sock:
        sock.sendall(frame[:4] + frame[4:])
        assert closed_by_broker(sock)
    bystander.sendall(encode_request(18, 3, 2, "b", M.ApiVersionsRequest()))
    assert read_frame(bystander) is not None
    bystander.close()
    assert metadata_works(shared_node)


def test_an_oversized_request_is_refused_before_it_is_read(shared_node):
    with connect(shared_node) as sock:
        sock.sendall(struct.pack(">i", 200 * 1024 * 1024))  # over socket.request.max.bytes (100 MiB)
        assert closed_by_broker(sock)
    assert metadata_works(shared_node)


def test_an_unknown_api_key_closes_the_connection(shared_node):
    with connect(shared_node) as sock:
        header = struct.pack(">hhih", 9999, 0, 5, 1) + b"x"
        sock.sendall(struct.pack(">i", len(header)) + header)
        assert closed_by_broker(sock)
    assert metadata_works(shared_node)


def test_an_unsupported_version_gets_unsupported_version(shared_node):
    with connect(shared_node) as sock:
        frame = bytearray(encode_request(18, 3, 11, "x", M.ApiVersionsRequest()))
        frame[6:8] = struct.pack(">h", 77)
        sock.sendall(frame)
        r = Reader(read_frame(sock))
        assert r.int32() == 11
        body = M.RESPONSES[18].decode(0, r)
        assert body.error_code == Error.UNSUPPORTED_VERSION
        assert {k.api_key for k in body.api_keys} >= {0, 1, 3, 18}
        # the connection stays usable: ask again at a version we both speak
        sock.sendall(encode_request(18, 3, 12, "x", M.ApiVersionsRequest()))
        r = Reader(read_frame(sock))
        assert read_response_header(r, 18, 3) == 12
        served = {k.api_key: (k.min_version, k.max_version) for k in M.RESPONSES[18].decode(3, r).api_keys}
        assert served[0] == (3, 12) and served[1][0] == 4


def test_pipelined_requests_are_answered_in_order(shared_node):
    with connect(shared_node) as sock:
        sock.sendall(b"".join(encode_request(18, 3, cid, "x", M.ApiVersionsRequest()) for cid in range(20)))
        ids = [struct.unpack(">i", read_frame(sock)[:4])[0] for _ in range(20)]
        assert ids == list(range(20))
