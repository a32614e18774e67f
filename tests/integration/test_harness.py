"""The integration harness itself, without a broker: port picking, the properties
file, the hand-written readiness probe against a fake broker, and the node's failure
path (a command that exits at once). Runs on every CI build."""
import socket
import struct
import sys
import threading

import pytest

from .cluster import (
    NodeError,
    StromNode,
    build_api_versions_v0_request,
    build_metadata_request,
    free_ports,
    node_properties,
    parse_api_versions_v0_response,
    probe_api_versions,
    probe_ready,
    render_properties,
    wait_ready,
)

pytestmark = pytest.mark.timeout(60)


def test_free_ports_are_distinct_and_bindable():
    ports = free_ports(8)
    assert len(set(ports)) == 8
    for port in ports:
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))


def test_free_ports_outside_xdist_never_repeat_a_kernel_pick(monkeypatch):
    # The kernel hands a released port out again: a cluster's brokers, asked for one each,
    # were given the same one.
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    picked = [port for _ in range(500) for port in free_ports(1)]
    assert len(set(picked)) == len(picked)


def test_properties_file_of_a_combined_node(tmp_path):
    props = node_properties(1, 9092, 9093, str(tmp_path / "data"),
                            extra={"offsets.topic.num.partitions": 3, "auto.create.topics.enable": False})
    text = render_properties(props)
    lines = dict(line.split("=", 1) for line in text.splitlines())
    assert lines["process.roles"] == "broker,controller"
    assert lines["node.id"] == "1"
    assert lines["listeners"] == "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093"
    assert lines["advertised.listeners"] == "PLAINTEXT://127.0.0.1:9092"
    assert lines["controller.listener.names"] == "CONTROLLER"
    assert lines["listener.security.protocol.map"] == "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"
    assert lines["controller.quorum.voters"] == "1@127.0.0.1:9093"
    assert lines["log.dirs"] == str(tmp_path / "data")
    assert lines["num.partitions"] == "1"
    assert lines["offsets.topic.num.partitions"] == "3"
    assert lines["group.initial.rebalance.delay.ms"] == "0"
    assert lines["auto.create.topics.enable"] == "false"
    assert text.endswith("\n") and len(text.splitlines()) == len(props)
    with pytest.raises(ValueError):
        render_properties({"bad": "two\nlines"})


def test_node_writes_its_config_on_loopback_ports(tmp_path):
    node = StromNode(base_dir=str(tmp_path), extra={"log.segment.bytes": 1 << 20})
    with open(node.write_config()) as f:
        text = f.read()
    assert f"PLAINTEXT://127.0.0.1:{node.broker_port}" in text
    assert f"1@127.0.0.1:{node.controller_port}" in text
    assert "log.segment.bytes=1048576\n" in text
    assert node.bootstrap == f"127.0.0.1:{node.broker_port}"
    assert node.broker_port != node.controller_port


def test_api_versions_v0_request_bytes():
    frame = build_api_versions_v0_request(7, "ab")
    assert frame == struct.pack(">ihhih", 12, 18, 0, 7, 2) + b"ab"


# ---------------------------------------------------------------------------- a fake broker

def _api_versions_v0_response(correlation_id, apis, error_code=0):
    body = struct.pack(">ihi", correlation_id, error_code, len(apis))
    body += b"".join(struct.pack(">hhh", k, lo, hi) for k, (lo, hi) in apis.items())
    return struct.pack(">i", len(body)) + body


def _metadata_response(version, correlation_id, brokers):
    body = struct.pack(">i", correlation_id)
    if version >= 3:
        body += struct.pack(">i", 0)  # throttle_time_ms
    body += struct.pack(">i", len(brokers))
    for node_id, host, port in brokers:
        body += struct.pack(">ih", node_id, len(host)) + host.encode() + struct.pack(">i", port)
        if version >= 1:
            body += struct.pack(">h", -1)  # rack: null
    if version >= 2:
        body += struct.pack(">h", -1)  # cluster_id: null
    if version >= 1:
        body += struct.pack(">i", brokers[0][0] if brokers else -1)  # controller_id
    body += struct.pack(">i", 0)  # topics
    return struct.pack(">i", len(body)) + body


class FakeBroker:
    """Answers ApiVersions v0 and Metadata v0-v8 frames with hand-written responses;
    records every request header it saw."""

    def __init__(self, metadata_versions=(0, 12), brokers=((1, "127.0.0.1", 0),), api_error=0):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.metadata_versions = metadata_versions
        self.brokers = [(n, h, p or self.port) for n, h, p in brokers]
        self.api_error = api_error
        self.seen = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(5)
                try:
                    while True:
                        head = conn.recv(4, socket.MSG_WAITALL)
                        if len(head) < 4:
                            break
                        (size,) = struct.unpack(">i", head)
                        frame = conn.recv(size, socket.MSG_WAITALL)
                        api_key, version, correlation_id = struct.unpack_from(">hhi", frame)
                        self.seen.append((api_key, version))
                        if api_key == 18:
                            conn.sendall(_api_versions_v0_response(
                                correlation_id, {0: (0, 9), 1: (0, 13), 3: self.metadata_versions,
                                                 18: (0, 4)}, self.api_error))
                        elif api_key == 3:
                            conn.sendall(_metadata_response(version, correlation_id, self.brokers))
                        else:
                            break
                except OSError:
                    pass

    def close(self):
        self.sock.close()


@pytest.fixture
def fake_broker():
    brokers = []

    def make(**kwargs):
        broker = FakeBroker(**kwargs)
        brokers.append(broker)
        return broker
    yield make
    for broker in brokers:
        broker.close()


def test_probe_reads_api_versions(fake_broker):
    broker = fake_broker()
    apis = probe_api_versions("127.0.0.1", broker.port)
    assert apis[18] == (0, 4) and apis[3] == (0, 12)
    assert broker.seen == [(18, 0)]


@pytest.mark.parametrize("versions,expect", [((0, 12), 0), ((1, 12), 1), ((4, 9), 4), ((8, 13), 8)])
def test_probe_picks_a_metadata_version_and_finds_the_node(fake_broker, versions, expect):
    broker = fake_broker(metadata_versions=versions, brokers=((1, "127.0.0.1", 0),))
    brokers = probe_ready("127.0.0.1", broker.port, node_id=1)
    assert brokers == [(1, "127.0.0.1", broker.port)]
    assert broker.seen == [(18, 0), (3, expect)]


def test_probe_refuses_a_metadata_without_the_node(fake_broker):
    broker = fake_broker(brokers=((2, "127.0.0.1", 0),))
    with pytest.raises(ValueError, match="not node 1"):
        probe_ready("127.0.0.1", broker.port, node_id=1)


def test_probe_refuses_an_api_versions_error(fake_broker):
    broker = fake_broker(api_error=35)
    with pytest.raises(ValueError, match="error 35"):
        probe_ready("127.0.0.1", broker.port)


def test_probe_refuses_metadata_versions_it_cannot_write(fake_broker):
    broker = fake_broker(metadata_versions=(9, 13))
    with pytest.raises(ValueError, match="start past"):
        probe_ready("127.0.0.1", broker.port)


@pytest.mark.timeout(60)  # a wait_ready that ignored its deadline would hang here until this
def test_wait_ready_is_bounded_when_nothing_listens():
    (port,) = free_ports(1)
    import time
    with pytest.raises(NodeError, match="not ready"):
        wait_ready("127.0.0.1", port, 1, time.monotonic() + 0.5)


def test_wait_ready_succeeds_against_the_fake_broker(fake_broker):
    import time
    broker = fake_broker()
    assert wait_ready("127.0.0.1", broker.port, 1, time.monotonic() + 5) == [(1, "127.0.0.1", broker.port)]


def test_metadata_request_bytes():
    frame = build_metadata_request(0, 2, "p")
    assert frame == struct.pack(">ihhihci", 15, 3, 0, 2, 1, b"p", 0)
    assert build_metadata_request(4, 2, "p").endswith(b"\x00\x00\x00\x00\x00")
    assert parse_api_versions_v0_response(
        _api_versions_v0_response(5, {18: (0, 3)})[4:]) == (5, 0, {18: (0, 3)})


def test_a_node_that_exits_at_once_fails_fast_with_its_log(tmp_path):
    # python -c stands in for `python -m strom ...`: the fake "python" prints and exits 3.
    fake = tmp_path / "fake-python"
    fake.write_text(f"#!{sys.executable}\nimport sys\nprint('fake strom', sys.argv[1:])\n"
                    "sys.exit(0 if 'format' in sys.argv else 3)\n")
    fake.chmod(0o755)
    node = StromNode(base_dir=str(tmp_path / "node"), python=str(fake), ready_timeout=10)
    with pytest.raises(NodeError) as info:
        node.start()
    message = str(info.value)
    assert "exited before it was ready" in message
    assert "fake strom ['-m', 'strom', 'start'" in message
    assert not node.running
    node.close()


def test_a_node_that_never_answers_is_killed_with_its_group(tmp_path):
    fake = tmp_path / "fake-python"
    fake.write_text(f"#!{sys.executable}\nimport subprocess, sys, time\n"
                    "if 'format' in sys.argv: sys.exit(0)\n"
                    f"subprocess.Popen([{sys.executable!r}, '-c', 'import time; time.sleep(600)'])\n"
                    "print('worker started', flush=True)\ntime.sleep(600)\n")
    fake.chmod(0o755)
    node = StromNode(base_dir=str(tmp_path / "node"), python=str(fake), ready_timeout=1.5)
    with pytest.raises(NodeError, match="not ready"):
        node.start()
    import os
    import time
    deadline = time.monotonic() + 5  # an orphaned worker's zombie waits for init to reap it
    while time.monotonic() < deadline:
        try:
            os.killpg(node.proc.pid, 0)
        except ProcessLookupError:
            break  # supervisor and worker are both gone
        time.sleep(0.05)
    else:
        pytest.fail("a process of the node's group outlived the node")
    node.close()


def test_stop_sends_sigterm_and_returns_the_exit_code(fake_broker, tmp_path):
    # A fake node that serves the probe from a fake broker port is overkill; drive the
    # stop path directly on a process that exits 0 on SIGTERM.
    import subprocess
    node = StromNode(base_dir=str(tmp_path / "node"))
    node.proc = subprocess.Popen(
        [sys.executable, "-c", "import signal, sys, time\n"
         "signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))\nprint('up', flush=True)\ntime.sleep(60)"],
        stdout=subprocess.PIPE, start_new_session=True)
    node.proc.stdout.readline()
    assert node.stop(timeout=5) == 0
    assert not node.running
