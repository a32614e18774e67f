"""The listener limits in a real node (tests/integration/cluster.py's StromNode: a combined node whose
broker and controller are separate processes, each with its own protocol.net.Server), over real
sockets on loopback.

Memory under overload, stated: with queued.max.request.bytes = Q, the broker's resident memory
grows under load by at most Q + OVERHEAD, where OVERHEAD is one receive buffer per connection
(protocol.frames.BUFFER_BYTES, 256 KiB) plus MALLOC_SLACK for decoded requests, responses and the
allocator's fragmentation."""
from __future__ import annotations

import asyncio
import os
import re
import socket
import struct
import threading
import time

import pytest

from protocol import messages as M
from protocol.client import KafkaConnection
from protocol.errors import Error
from protocol.frames import BUFFER_BYTES
from protocol.headers import encode_request, read_response_header
from protocol.types import Reader
from tests.engine.batches import producer_batch
from tests.integration.cluster import StromNode

pytestmark = [pytest.mark.timeout(180)]

MiB = 1 << 20
QUEUED = 8 * MiB
REQUEST_MAX = 2 * MiB
CLIENTS, PER_CLIENT = 64, 3
MALLOC_SLACK = 24 * MiB
OVERHEAD = CLIENTS * BUFFER_BYTES + MALLOC_SLACK
CLIENT_IP = "127.0.0.2"  # per-IP limits are tested from here; the node's own connections use 127.0.0.1
IDLE_MS = 3000  # above broker.heartbeat.interval.ms: the broker's heartbeat connection is never idle


@pytest.fixture(scope="module")
def loaded_node(tmp_path_factory):
    node = StromNode(base_dir=str(tmp_path_factory.mktemp("limits-memory")), extra={
        "queued.max.request.bytes": QUEUED, "socket.request.max.bytes": REQUEST_MAX,
        "message.max.bytes": REQUEST_MAX})
    with node:
        yield node


@pytest.fixture(scope="module")
def limited_node(tmp_path_factory):
    node = StromNode(base_dir=str(tmp_path_factory.mktemp("limits-connections")), extra={
        "max.connections.per.ip.overrides": f"{CLIENT_IP}:2", "connections.max.idle.ms": IDLE_MS})
    with node:
        yield node


def role_pid(node: StromNode, role: str) -> int:
    """The pid of the node's worker process for ``role`` (python -m strom <role> --config ...)."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                args = f.read().split(b"\0")
        except OSError:
            continue
        if role.encode() in args and node.config_path.encode() in args and b"start" not in args:
            return int(pid)
    raise AssertionError(f"no {role} process for {node}")


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        return int(re.search(r"VmRSS:\s+(\d+) kB", f.read()).group(1)) * 1024


class PeakRss(threading.Thread):
    def __init__(self, pid: int):
        super().__init__(daemon=True)
        self.pid, self.peak, self.done = pid, 0, threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            self.peak = max(self.peak, rss_bytes(self.pid))
            time.sleep(0.005)


def connect(port: int, source: str = "127.0.0.1") -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=10, source_address=(source, 0))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def recv_exactly(sock: socket.socket, n: int) -> bytes | None:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def read_frame(sock: socket.socket) -> bytes | None:
    head = recv_exactly(sock, 4)
    return None if head is None else recv_exactly(sock, struct.unpack(">i", head)[0])


def closed_by_node(sock: socket.socket, timeout: float = 5.0) -> bool:
    sock.settimeout(timeout)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def api_versions_answered(port: int, source: str = "127.0.0.1") -> bool:
    with connect(port, source) as sock:
        sock.sendall(encode_request(18, 0, 9, "probe", M.ApiVersionsRequest()))
        frame = read_frame(sock)
        return frame is not None and struct.unpack(">i", frame[:4])[0] == 9


def log_lines(node: StromNode, text: str) -> list[str]:
    with open(node.log_path, errors="replace") as f:
        return [line for line in f if text in line]


async def create_topic(port: int, name: str, configs: dict[str, str]) -> None:
    conn = KafkaConnection("127.0.0.1", port)
    await conn.connect()
    R = M.CreateTopicsRequest
    try:
        resp = await conn.request(19, 7, R(topics=[R.CreatableTopic(
            name=name, num_partitions=4, replication_factor=1,
            configs=[R.CreatableTopicConfig(name=k, value=v) for k, v in configs.items()])],
            timeout_ms=10000))
        assert resp.topics[0].error_code == Error.NONE, resp
    finally:
        await conn.close()


def produce_frame(topic: str, partition: int, correlation_id: int, records: bytes) -> bytes:
    R = M.ProduceRequest
    return encode_request(0, 9, correlation_id, "load", R(acks=1, timeout_ms=30000, topic_data=[
        R.TopicProduceData(name=topic, partition_data=[R.PartitionProduceData(index=partition,
                                                                               records=records)])]))


def test_many_clients_sending_large_produce_requests_keep_broker_memory_within_the_budget(loaded_node):
    """Every client sends a produce request all but its last bytes and stalls, as a slow client
    does, then finishes it and pipelines more: unbounded, the broker would hold every stalled
    request in memory at once (CLIENTS x 1.5 MiB); within the budget, the requests it cannot admit
    wait in the kernel's socket buffers."""
    port = loaded_node.broker_port
    asyncio.run(create_topic(port, "load", {}))
    records = bytes(producer_batch(150, value_size=10_000))  # about 1.5 MiB a request
    assert QUEUED < CLIENTS * len(records) and len(records) < REQUEST_MAX
    frames = [[produce_frame("load", c % 4, i, records) for i in range(PER_CLIENT)] for c in range(CLIENTS)]
    broker = role_pid(loaded_node, "broker")
    assert api_versions_answered(port)
    baseline = rss_bytes(broker)
    sampler = PeakRss(broker)
    sampler.start()
    sockets = [connect(port) for _ in range(CLIENTS)]
    for sock, mine in zip(sockets, frames):
        sock.settimeout(60)  # sendall's whole send and each answer's wait
        sock.sendall(mine[0][:-100])
    time.sleep(1.0)  # every stalled request has reached the broker, or waits for memory
    stalled_peak = sampler.peak
    answers: dict[int, list[int]] = {}

    def client(c: int) -> None:
        sock = sockets[c]
        sender = threading.Thread(target=lambda: sock.sendall(frames[c][0][-100:] + b"".join(frames[c][1:])),
                                  daemon=True)
        sender.start()
        got = []
        for _ in range(PER_CLIENT):
            frame = read_frame(sock)
            assert frame is not None, f"client {c}: the broker closed the connection"
            r = Reader(memoryview(frame))
            read_response_header(r, 0, 9)
            got.append(M.RESPONSES[0].decode(9, r).responses[0].partition_responses[0].error_code)
        sender.join()
        answers[c] = got

    threads = [threading.Thread(target=client, args=(c,)) for c in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    sampler.done.set()
    sampler.join()
    for sock in sockets:
        sock.close()
    assert answers == {c: [Error.NONE] * PER_CLIENT for c in range(CLIENTS)}, "every request answered"
    grew = sampler.peak - baseline
    sent = CLIENTS * PER_CLIENT * len(records)
    print(f"broker RSS {baseline / MiB:.0f} MiB -> {stalled_peak / MiB:.0f} MiB with {CLIENTS} requests "
          f"stalled, peak {sampler.peak / MiB:.0f} MiB (+{grew / MiB:.1f} MiB); {sent / MiB:.0f} MiB sent")
    bound = QUEUED + OVERHEAD
    assert grew <= bound, f"RSS grew {grew / MiB:.1f} MiB, over {bound / MiB:.0f} MiB"


@pytest.mark.parametrize("listener", ["broker", "controller"])
def test_a_request_over_socket_request_max_bytes_closes_only_its_connection_with_one_log_line(
        loaded_node, listener):
    port = loaded_node.broker_port if listener == "broker" else loaded_node.controller_port
    before = len(log_lines(loaded_node, "exceeds socket.request.max.bytes"))
    bystander = connect(port)
    with connect(port) as sock:
        sock.sendall(struct.pack(">i", REQUEST_MAX + 1) + b"x" * 1000)
        assert closed_by_node(sock)
    bystander.sendall(encode_request(18, 0, 5, "b", M.ApiVersionsRequest()))
    assert read_frame(bystander) is not None, "the other connection is served"
    bystander.close()
    time.sleep(0.2)
    lines = log_lines(loaded_node, "exceeds socket.request.max.bytes")
    assert len(lines) == before + 1 and f"request of {REQUEST_MAX + 1} bytes" in lines[-1]


@pytest.mark.parametrize("listener", ["broker", "controller"])
def test_beyond_max_connections_per_ip_overrides_the_listener_closes_new_connections(limited_node, listener):
    port = limited_node.broker_port if listener == "broker" else limited_node.controller_port
    held = [connect(port, CLIENT_IP) for _ in range(2)]
    for sock in held:
        sock.sendall(encode_request(18, 0, 1, "held", M.ApiVersionsRequest()))
        assert read_frame(sock) is not None
    with connect(port, CLIENT_IP) as third:
        assert closed_by_node(third)
    assert api_versions_answered(port), "other addresses are not limited by that override"
    held.pop().close()
    time.sleep(0.3)
    assert api_versions_answered(port, CLIENT_IP), "a freed slot is given again"
    for sock in held:
        sock.close()


@pytest.mark.parametrize("listener", ["broker", "controller"])
def test_idle_and_half_sent_connections_are_closed_after_connections_max_idle_ms(limited_node, listener):
    port = limited_node.broker_port if listener == "broker" else limited_node.controller_port
    idle = connect(port)
    half = connect(port)
    half.sendall(struct.pack(">i", 1000) + b"a part of a request")
    active = connect(port)
    started = time.monotonic()
    while time.monotonic() - started < IDLE_MS / 1000 * 1.6:
        active.sendall(encode_request(18, 0, 2, "active", M.ApiVersionsRequest()))
        assert read_frame(active) is not None
        time.sleep(0.25)
    assert closed_by_node(idle, timeout=IDLE_MS / 1000) and closed_by_node(half, timeout=IDLE_MS / 1000)
    active.sendall(encode_request(18, 0, 3, "active", M.ApiVersionsRequest()))
    assert read_frame(active) is not None, "a connection that sends requests stays open"
    for sock in (idle, half, active):
        sock.close()
    assert log_lines(limited_node, "a request begun but not completed in connections.max.idle.ms")


async def _alter(port: int, api_key: int, version: int, request) -> list[int]:
    conn = KafkaConnection("127.0.0.1", port)
    await conn.connect()
    try:
        response = await conn.request(api_key, version, request)
    finally:
        await conn.close()
    return [r.error_code for r in (response.responses if api_key == 44 else response.entries)]


def _eventually(check, what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


def test_connection_limits_and_ip_quotas_change_on_the_running_broker_without_a_restart(limited_node):
    """max.connections.per.ip.overrides set as a dynamic broker config holds from the next
    connection and the static value again once it is deleted; an ip entity's
    connection_creation_rate (KIP-612) of 1 a second closes that address's new connections
    unanswered once its rate is over it (a new address's rate is measured over ten windows)."""
    port = limited_node.broker_port
    Inc = M.IncrementalAlterConfigsRequest

    def overrides(op: int, value: str | None) -> list[int]:
        return asyncio.run(_alter(port, 44, 1, Inc(resources=[Inc.AlterConfigsResource(
            resource_type=4, resource_name="", configs=[Inc.AlterConfigsResource.AlterableConfig(
                name="max.connections.per.ip.overrides", config_operation=op, value=value)])],
            validate_only=False)))

    def three_connections_served() -> bool:
        held = [connect(port, CLIENT_IP) for _ in range(3)]
        try:
            for sock in held:
                sock.sendall(encode_request(18, 0, 1, "held", M.ApiVersionsRequest()))
            return all(read_frame(sock) is not None for sock in held)
        except OSError:
            return False
        finally:
            for sock in held:
                sock.close()

    assert overrides(0, f"{CLIENT_IP}:3") == [Error.NONE]
    _eventually(three_connections_served, "a third connection from the address once its override is 3")
    assert overrides(1, None) == [Error.NONE]
    _eventually(lambda: not three_connections_served(), "the static override of 2 again once deleted")

    Q = M.AlterClientQuotasRequest

    def ip_quota(remove: bool) -> list[int]:
        return asyncio.run(_alter(port, 49, 1, Q(entries=[Q.EntryData(
            entity=[Q.EntryData.EntityData(entity_type="ip", entity_name=CLIENT_IP)],
            ops=[Q.EntryData.OpData(key="connection_creation_rate", value=1.0, remove=remove)])],
            validate_only=False)))

    def throttled() -> bool:
        try:
            return not api_versions_answered(port, CLIENT_IP)
        except ConnectionResetError:  # closed with the request unread
            return True

    assert ip_quota(False) == [Error.NONE]
    try:
        _eventually(throttled, "the address's connections throttled", timeout=30.0)
        assert api_versions_answered(port), "another address is not"
    finally:
        assert ip_quota(True) == [Error.NONE]
    _eventually(lambda: api_versions_answered(port, CLIENT_IP), "served again once the quota is removed")
