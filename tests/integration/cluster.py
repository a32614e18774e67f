"""Real `strom` processes on loopback for the integration tests.

A ``StromNode`` is one combined node (``process.roles=broker,controller``): it picks
free 127.0.0.1 ports, writes a server.properties file into its own directory, runs
``python3 -m strom format`` once and ``python3 -m strom start`` as a child process
(its own session, so the supervisor and its worker processes die together), and waits
until the broker answers on the wire. Everything the node prints goes to
``<dir>/node.log``; every failure raises with the tail of that log.

Readiness is judged by speaking the Kafka protocol by hand (struct, no Strom code, so
a broken ``protocol/`` cannot make the probe lie):

ApiVersions v0 request (api_key 18), after the int32 frame size:

    | field          | type          | value                      |
    |----------------|---------------|----------------------------|
    | api_key        | int16         | 18                         |
    | api_version    | int16         | 0                          |
    | correlation_id | int32         | chosen by the caller       |
    | client_id      | int16 + bytes | nullable string            |

ApiVersions v0 response: correlation_id int32, error_code int16, then an int32 count
of (api_key int16, min_version int16, max_version int16). A broker that does not know
the request version still answers in v0 form (KIP-511).

Metadata request v0-v8 (api_key 3) with an empty topic list: v0 reads that as "all
topics", v1+ as "no topics"; either way the response's broker list comes first
(after throttle_time_ms from v3 on): int32 count of (node_id int32, host string,
port int32, rack nullable string from v1 on).

Invariant: a node never outlives the test process. Live nodes sit in ``_LIVE``;
``kill_all`` (atexit, pytest's session finish, fixture finalizers) kills their
process groups, and each child asks the kernel for SIGKILL when its parent dies.
"""
from __future__ import annotations

import atexit
import contextlib
import os
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import weakref

from strom.cluster import free_ports as kernel_free_ports
from strom.node import DIE_WITH_SUPERVISOR

READY_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 30.0  # the broker dumps its stacks to the log if stopping takes over 10 s
FORMAT_TIMEOUT_S = 60.0
PROBE_IO_TIMEOUT_S = 2.0
LOG_TAIL_LINES = 60
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

API_VERSIONS = 18
METADATA = 3
METADATA_MAX_PROBE_VERSION = 8  # the last non-flexible version

_LIVE: weakref.WeakSet[StromNode] = weakref.WeakSet()


class NodeError(RuntimeError):
    """A node failed to format, start, become ready or stop; the message carries its log tail."""


# ---------------------------------------------------------------------------- ports + config

# Under pytest-xdist each worker (PYTEST_XDIST_WORKER gw0, gw1, ...) takes listener ports from its
# own slice of 10000-32767, below the kernel's ephemeral range (32768-60999 by default): a port
# picked here and bound by a node a moment later cannot meanwhile be taken by another worker's
# nodes, nor by a client's outgoing connection, which the kernel gives an ephemeral port.
PORT_SLICES_FROM, PORT_SLICES_TO, PORT_SLICES = 10000, 32768, 16
_next_port: dict[str, int] = {}
_kernel_picked: set[int] = set()  # outside xdist: every port handed out, for none to come twice


def _worker_slice() -> range | None:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if not worker.startswith("gw") or not worker[2:].isdigit():
        return None
    size = (PORT_SLICES_TO - PORT_SLICES_FROM) // PORT_SLICES
    start = PORT_SLICES_FROM + int(worker[2:]) % PORT_SLICES * size
    return range(start, start + size)


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_ports(count: int) -> list[int]:
    """``count`` distinct free TCP ports on 127.0.0.1, none returned twice in this process while
    its worker's slice lasts (outside xdist: ports the kernel picks, all held open while picking,
    none it picked before: it may hand a released port out again, and two brokers of a cluster
    asked for one port each would be given the same)."""
    ports = _worker_slice()
    if ports is not None:
        picked: list[int] = []
        at = _next_port.setdefault("at", int.from_bytes(os.urandom(2), "big") % len(ports))
        for _ in range(len(ports)):
            port = ports[at % len(ports)]
            at += 1
            if _bindable(port):
                picked.append(port)
                if len(picked) == count:
                    break
        _next_port["at"] = at
        if len(picked) == count:
            return picked
    for _ in range(100):
        picked = kernel_free_ports(count)
        if _kernel_picked.isdisjoint(picked):
            _kernel_picked.update(picked)
            return picked
    raise RuntimeError(f"the kernel picked no {count} ports not handed out before")


def metrics_port() -> int:
    """A free port whose next is free too, for a combined node's metrics.listener: its broker
    serves the port and its controller the next one. Under xdist both come from this worker's
    slice, taken together, so that no node of this worker is handed the second one later (the
    slice is handed out in order: a port taken alone would be followed by its next)."""
    for _ in range(50):
        first, second = free_ports(2)
        if second == first + 1:
            return first
        if _worker_slice() is None and first < 65535 and _bindable(first + 1):
            return first  # the kernel's pick: nothing here hands out first + 1 next
    raise RuntimeError("no two free ports in a row")


def node_properties(node_id: int, broker_port: int, controller_port: int, log_dir: str,
                    extra: dict[str, object] | None = None) -> dict[str, str]:
    """The server.properties of a combined node on loopback; ``extra`` overrides/adds."""
    props = {
        "process.roles": "broker,controller",
        "node.id": str(node_id),
        "listeners": f"PLAINTEXT://127.0.0.1:{broker_port},CONTROLLER://127.0.0.1:{controller_port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{broker_port}",
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "controller.quorum.voters": f"{node_id}@127.0.0.1:{controller_port}",
        "log.dirs": log_dir,
        "num.partitions": "1",
        "offsets.topic.num.partitions": "5",
        "offsets.topic.replication.factor": "1",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "group.initial.rebalance.delay.ms": "0",
    }
    for name, value in (extra or {}).items():
        props[name] = _property_value(value)
    return props


def _property_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def render_properties(props: dict[str, str]) -> str:
    """Kafka's server.properties text: one ``name=value`` a line, in insertion order."""
    for name, value in props.items():
        if "\n" in name or "\n" in value or "=" in name:
            raise ValueError(f"property {name!r} cannot be written as one line")
    return "".join(f"{name}={value}\n" for name, value in props.items())


# ---------------------------------------------------------------------------- the probe

def build_api_versions_v0_request(correlation_id: int, client_id: str = "strom-probe") -> bytes:
    body = _request_header(API_VERSIONS, 0, correlation_id, client_id)
    return struct.pack(">i", len(body)) + body


def parse_api_versions_v0_response(payload: bytes) -> tuple[int, int, dict[int, tuple[int, int]]]:
    """(correlation_id, error_code, {api_key: (min_version, max_version)}) of a frame's payload."""
    correlation_id, error_code, count = struct.unpack_from(">ihi", payload, 0)
    if count < 0 or 10 + 6 * count > len(payload):
        raise ValueError(f"bad ApiVersions response: {count} entries in {len(payload)} bytes")
    apis = {}
    for i in range(count):
        key, low, high = struct.unpack_from(">hhh", payload, 10 + 6 * i)
        apis[key] = (low, high)
    return correlation_id, error_code, apis


def build_metadata_request(version: int, correlation_id: int, client_id: str = "strom-probe") -> bytes:
    """A Metadata request (v0..v8) for no particular topic."""
    if not 0 <= version <= METADATA_MAX_PROBE_VERSION:
        raise ValueError(f"the probe writes Metadata v0-v{METADATA_MAX_PROBE_VERSION}, not v{version}")
    body = _request_header(METADATA, version, correlation_id, client_id)
    body += struct.pack(">i", 0)  # topics: empty array
    if version >= 4:
        body += b"\x00"  # allow_auto_topic_creation
    if version >= 8:
        body += b"\x00\x00"  # include cluster / topic authorized operations
    return struct.pack(">i", len(body)) + body


def parse_metadata_brokers(version: int, payload: bytes) -> tuple[int, list[tuple[int, str, int]]]:
    """(correlation_id, [(node_id, host, port)]) from a Metadata response payload."""
    (correlation_id,) = struct.unpack_from(">i", payload, 0)
    pos = 4 + (4 if version >= 3 else 0)  # throttle_time_ms
    (count,) = struct.unpack_from(">i", payload, pos)
    pos += 4
    brokers = []
    for _ in range(count):
        (node_id,) = struct.unpack_from(">i", payload, pos)
        host, pos = _read_string(payload, pos + 4)
        (port,) = struct.unpack_from(">i", payload, pos)
        pos += 4
        if version >= 1:
            _, pos = _read_string(payload, pos)  # rack
        brokers.append((node_id, host or "", port))
    return correlation_id, brokers


def _request_header(api_key: int, version: int, correlation_id: int, client_id: str) -> bytes:
    cid = client_id.encode()
    return struct.pack(">hhih", api_key, version, correlation_id, len(cid)) + cid


def _read_string(buf: bytes, pos: int) -> tuple[str | None, int]:
    (n,) = struct.unpack_from(">h", buf, pos)
    pos += 2
    if n < 0:
        return None, pos
    return bytes(buf[pos:pos + n]).decode(), pos + n


def _read_exact(sock: socket.socket, n: int) -> bytes:
    chunks, left = [], n
    while left:
        chunk = sock.recv(left)
        if not chunk:
            raise EOFError(f"connection closed with {left} of {n} bytes unread")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _round_trip(sock: socket.socket, frame: bytes) -> bytes:
    sock.sendall(frame)
    (size,) = struct.unpack(">i", _read_exact(sock, 4))
    if not 0 <= size <= 64 << 20:
        raise ValueError(f"bad response frame size {size}")
    return _read_exact(sock, size)


def probe_api_versions(host: str, port: int,
                       timeout: float = PROBE_IO_TIMEOUT_S) -> dict[int, tuple[int, int]]:
    """The broker's ApiVersions v0 answer; raises OSError/ValueError/EOFError if there is none."""
    with socket.create_connection((host, port), timeout=timeout) as sock:
        correlation_id, error_code, apis = parse_api_versions_v0_response(
            _round_trip(sock, build_api_versions_v0_request(7)))
    if correlation_id != 7 or error_code != 0:
        raise ValueError(f"ApiVersions answered correlation id {correlation_id}, error {error_code}")
    return apis


def probe_ready(host: str, port: int, node_id: int | None = None,
                timeout: float = PROBE_IO_TIMEOUT_S) -> list[tuple[int, str, int]]:
    """ApiVersions, then Metadata at a version both sides know; the brokers it lists.
    Raises unless the answer lists ``node_id`` (when given) or at least one broker."""
    with socket.create_connection((host, port), timeout=timeout) as sock:
        correlation_id, error_code, apis = parse_api_versions_v0_response(
            _round_trip(sock, build_api_versions_v0_request(1)))
        if correlation_id != 1 or error_code != 0:
            raise ValueError(f"ApiVersions answered correlation id {correlation_id}, error {error_code}")
        if METADATA not in apis:
            raise ValueError("ApiVersions does not list Metadata")
        low, high = apis[METADATA]
        version = min(max(low, 0), high, METADATA_MAX_PROBE_VERSION)
        if version < low:
            raise ValueError(f"broker's Metadata versions {low}-{high} start past the probe's")
        correlation_id, brokers = parse_metadata_brokers(
            version, _round_trip(sock, build_metadata_request(version, 2)))
    if correlation_id != 2:
        raise ValueError(f"Metadata answered correlation id {correlation_id}")
    if not brokers or (node_id is not None and node_id not in {b[0] for b in brokers}):
        raise ValueError(f"Metadata lists brokers {brokers}, not node {node_id}")
    return brokers


def wait_ready(host: str, port: int, node_id: int | None, deadline: float,
               alive=lambda: True) -> list[tuple[int, str, int]]:
    """Probe every 100 ms until ready, ``alive()`` turns false or the deadline passes."""
    last: Exception | None = None
    while time.monotonic() < deadline:
        if not alive():
            raise NodeError("the node exited before it was ready")
        try:
            return probe_ready(host, port, node_id)
        except (OSError, ValueError, EOFError, struct.error) as e:
            last = e
        time.sleep(0.1)
    raise NodeError(f"not ready on {host}:{port} in time (last probe: {last!r})")


# ---------------------------------------------------------------------------- the node

# The child runs the product's own prologue before it execs the real command: SIGKILL it if the
# test process dies (Linux PR_SET_PDEATHSIG survives execve). A `python -c` prologue rather than a
# preexec_fn, which may deadlock when the test process has client threads.
def _die_with_parent(cmd: list[str]) -> list[str]:
    return [sys.executable, "-c", DIE_WITH_SUPERVISOR, str(os.getpid()), *cmd]


class StromNode:
    """One combined broker+controller node on loopback. Ports and directories stay the
    same across ``restart()``; ``format`` runs only before the first start."""

    def __init__(self, base_dir: str | None = None, node_id: int = 1,
                 extra: dict[str, object] | None = None, cluster_id: str = "c3Ryb20tdGVzdC1jbHVzdGVy",
                 ready_timeout: float = READY_TIMEOUT_S, python: str = sys.executable,
                 format_args: list[str] | None = None):
        """``format_args``: more arguments for ``strom format`` (``--add-scram ...``)."""
        self._own_dir = base_dir is None
        self.format_args = list(format_args or [])
        self.dir = base_dir or tempfile.mkdtemp(prefix="strom-node-")
        self.node_id = node_id
        self.cluster_id = cluster_id
        self.ready_timeout = ready_timeout
        self.python = python
        self.broker_port, self.controller_port = free_ports(2)
        self.log_dir = os.path.join(self.dir, "data")
        self.config_path = os.path.join(self.dir, "server.properties")
        self.log_path = os.path.join(self.dir, "node.log")
        self.properties = node_properties(node_id, self.broker_port, self.controller_port,
                                          self.log_dir, extra)
        self.proc: subprocess.Popen | None = None
        self.formatted = False

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.broker_port}"

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def write_config(self) -> str:
        os.makedirs(self.dir, exist_ok=True)
        with open(self.config_path, "w", encoding="utf-8") as f:
            f.write(render_properties(self.properties))
        return self.config_path

    def format(self) -> None:
        self.write_config()
        cmd = [self.python, "-m", "strom", "format", "--config", self.config_path,
               "--cluster-id", self.cluster_id, "--standalone", *self.format_args]
        with open(self.log_path, "ab") as log:
            log.write(f"$ {' '.join(cmd)}\n".encode())
            log.flush()
            try:
                rc = subprocess.run(cmd, cwd=REPO_ROOT, stdout=log, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, timeout=FORMAT_TIMEOUT_S).returncode
            except subprocess.TimeoutExpired:
                rc = "timeout"
        if rc != 0:
            raise NodeError(self.failure_message(f"strom format failed ({rc})"))
        self.formatted = True

    def start(self) -> StromNode:
        """Format (first time only), start and wait until ready."""
        if self.running:
            raise NodeError(f"node {self.node_id} is already running")
        if not self.formatted:
            self.format()
        cmd = [self.python, "-m", "strom", "start", "--config", self.config_path]
        with open(self.log_path, "ab") as log:
            log.write(f"$ {' '.join(cmd)}\n".encode())
            log.flush()
            self.proc = subprocess.Popen(_die_with_parent(cmd), cwd=REPO_ROOT, stdout=log,
                                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         start_new_session=True)
        _LIVE.add(self)
        try:
            wait_ready("127.0.0.1", self.broker_port, self.node_id,
                       time.monotonic() + self.ready_timeout, alive=lambda: self.running)
        except BaseException as e:  # KeyboardInterrupt too: never leave it behind
            detail = str(e) if isinstance(e, NodeError) else repr(e)
            self._kill_group(signal.SIGKILL)
            if isinstance(e, Exception):
                raise NodeError(self.failure_message(detail)) from e
            raise
        return self

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> int | None:
        """SIGTERM, wait up to ``timeout``, then SIGKILL the whole group. The exit code of
        the node (None if it was not running); a node that needed SIGKILL raises."""
        if self.proc is None:
            return None
        if self.proc.poll() is not None:
            self._kill_group(signal.SIGKILL)  # stray workers, if any
            return self.proc.returncode
        self._signal_leader(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self._kill_group(signal.SIGKILL)
            raise NodeError(self.failure_message(f"did not stop within {timeout} s of SIGTERM")) from None
        self._kill_group(signal.SIGKILL)  # workers the supervisor failed to reap
        return rc

    def kill9(self) -> None:
        """SIGKILL the supervisor and its workers at once: a crash, no clean shutdown."""
        self._kill_group(signal.SIGKILL)

    def restart(self, kill: bool = False) -> StromNode:
        """Stop (SIGTERM, or SIGKILL if ``kill``) if running, then start on the same
        directories and ports."""
        if self.running:
            if kill:
                self.kill9()
            else:
                self.stop()
        return self.start()

    def close(self) -> None:
        """Stop, forgiving a node that had to be killed; remove the directory if ours."""
        try:
            self.stop()
        except NodeError:
            pass
        finally:
            self._kill_group(signal.SIGKILL)
            _LIVE.discard(self)

    def cleanup(self) -> None:
        self.close()
        if self._own_dir:
            import shutil
            shutil.rmtree(self.dir, ignore_errors=True)

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        try:
            with open(self.log_path, "rb") as f:
                f.seek(0, os.SEEK_END)
                f.seek(max(0, f.tell() - 256 * lines))
                text = f.read().decode("utf-8", "replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    def failure_message(self, what: str) -> str:
        return (f"strom node {self.node_id} ({self.bootstrap}, {self.dir}): {what}\n"
                f"--- last lines of {self.log_path} ---\n{self.log_tail()}")

    def _signal_leader(self, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.proc.pid, sig)

    def _kill_group(self, sig: int) -> None:
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, sig)
        if sig == signal.SIGKILL:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(STOP_TIMEOUT_S)

    def __enter__(self) -> StromNode:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.cleanup()

    def __repr__(self) -> str:
        return f"StromNode(node_id={self.node_id}, bootstrap={self.bootstrap}, dir={self.dir!r})"


def kill_all() -> None:
    """SIGKILL every node still alive in this process (atexit / interrupted sessions)."""
    for node in list(_LIVE):
        node._kill_group(signal.SIGKILL)
        _LIVE.discard(node)


atexit.register(kill_all)
