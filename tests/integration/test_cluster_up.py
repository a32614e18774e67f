"""`strom cluster up`, the real command in a subprocess: 3 controllers + 3 brokers on loopback
under one supervisor. Clients work through the bootstrap.servers it prints; SIGINT stops the
brokers, then the controllers, and leaves no process behind; a second `up` on the same --dir
reuses it; a process that does not stop in time is killed, and the supervisor says so. On a
terminal (a pseudo-terminal of a fixed size), cluster up shows strom top's live view of the
cluster under its status lines: the quorum's leader and epoch, each broker, a group's lag."""
from __future__ import annotations

import codecs
import contextlib
import fcntl
import os
import pty
import queue
import re
import signal
import struct
import subprocess
import sys
import termios
import threading
import time
import urllib.request

import psutil
import pytest

from tests.integration.cluster import REPO_ROOT, StromNode, _die_with_parent

pytestmark = pytest.mark.timeout(120)
UP_TIMEOUT_S = 60.0
EXIT_TIMEOUT_S = 45.0
STARTED = re.compile(r"started (controller|broker) (\d+) \(pid (\d+)\)")
# A terminal's control sequences (CSI, OSC, and two-character escapes), left out of what it shows.
ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07|\x1b[@-Z\\-_]")
TTY_COLUMNS, TTY_LINES = 120, 60


def alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


class ClusterUp:
    """``python -m strom cluster up --dir DIR --port 0 ...`` with its output read line by line;
    with ``tty``, on a pseudo-terminal of TTY_COLUMNS x TTY_LINES, whose raw output (the live
    view's redraws included) is kept in ``screen``, and each line read with its control
    sequences left out."""

    def __init__(self, directory: str, *args: str, tty: bool = False) -> None:
        cmd = [sys.executable, "-m", "strom", "cluster", "up", "--dir", directory, "--port", "0", *args]
        self.lines: list[str] = []
        self.screen = ""
        self._master: int | None = None
        self._queue: queue.Queue[str | None] = queue.Queue()
        if tty:
            self._master, terminal = pty.openpty()
            fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", TTY_LINES, TTY_COLUMNS, 0, 0))
            env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": str(TTY_COLUMNS),
                   "LINES": str(TTY_LINES)}
            for name in ("NO_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "FORCE_COLOR"):
                env.pop(name, None)
            self.proc = subprocess.Popen(_die_with_parent(cmd), cwd=REPO_ROOT, stdout=terminal,
                                         stderr=terminal, stdin=subprocess.DEVNULL, env=env,
                                         start_new_session=True)
            os.close(terminal)
            threading.Thread(target=self._read_terminal, daemon=True).start()
        else:
            self.proc = subprocess.Popen(_die_with_parent(cmd), cwd=REPO_ROOT, stdout=subprocess.PIPE,
                                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True,
                                         start_new_session=True)
            threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self._queue.put(line.rstrip("\n"))
        self._queue.put(None)

    def _read_terminal(self) -> None:
        """The terminal's bytes as they come: all of them into ``screen``; each line (a redraw's
        carriage returns end lines too) without its control sequences into the queue."""
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        pending = ""
        while True:
            try:
                chunk = os.read(self._master, 65536)
            except OSError:  # EIO: every end of the terminal closed
                break
            if not chunk:
                break
            text = decoder.decode(chunk)
            self.screen += text
            pending += text
            *complete, pending = pending.split("\n")
            for raw in complete:
                for piece in ANSI.sub("", raw).split("\r"):
                    if piece.strip():
                        self._queue.put(piece.rstrip())
        self._queue.put(None)

    def wait_for(self, pattern: str, timeout: float = UP_TIMEOUT_S) -> re.Match:
        """The first line from now on matching ``pattern``."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                break
            if line is None:
                break
            self.lines.append(line)
            m = re.search(pattern, line)
            if m is not None:
                return m
        raise AssertionError(f"no line matching {pattern!r} within {timeout} s:\n" + "\n".join(self.lines))

    def pids(self) -> dict[tuple[str, int], int]:
        return {(m.group(1), int(m.group(2))): int(m.group(3))
                for m in (STARTED.search(line) for line in self.lines) if m}

    def interrupt(self) -> int:
        """SIGINT, as Ctrl-C sends it; the exit code; every remaining line is in ``lines``."""
        self.proc.send_signal(signal.SIGINT)
        code = self.proc.wait(EXIT_TIMEOUT_S)
        self.drain()
        return code

    def drain(self, timeout: float = 5.0) -> None:
        """Read the rest of the output (the process has exited)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                return
            if line is None:
                return
            self.lines.append(line)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        if self._master is not None:
            with contextlib.suppress(OSError):
                os.close(self._master)
        for pid in self.pids().values():
            with contextlib.suppress(ProcessLookupError):
                if alive(pid):
                    os.kill(pid, signal.SIGKILL)


@contextlib.contextmanager
def cluster_up(directory: str, *args: str, tty: bool = False):
    up = ClusterUp(directory, *args, tty=tty)
    try:
        yield up
    finally:
        up.close()


def scrape(url: str) -> dict[tuple[str, tuple], float]:
    """A /metrics answer, parsed by prometheus_client: (sample name, sorted labels) -> value."""
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(url, timeout=10) as answer:
        text = answer.read().decode()
    return {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(text) for sample in family.samples}


def metrics_urls(up: ClusterUp) -> dict[tuple[str, int], str]:
    """Each process's /metrics address as cluster up printed it: (role, node id) -> URL."""
    found = (re.match(r"(broker|controller) (\d+) metrics: (http\S+)$", line) for line in up.lines)
    return {(m.group(1), int(m.group(2))): m.group(3) for m in found if m}


def over_brokers(up: ClusterUp, name: str, alive: set[int] | None = None, **labels: str) -> float:
    """A metric summed over the (live) brokers' /metrics, its series filtered by ``labels``."""
    total = 0.0
    for (role, node_id), url in metrics_urls(up).items():
        if role != "broker" or (alive is not None and node_id not in alive):
            continue
        for (sample, sample_labels), value in scrape(url).items():
            if sample == name and set(labels.items()) <= set(sample_labels):
                total += value
    return total


def eventually(what: str, condition, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"not within {timeout} s: {what}"
        time.sleep(0.5)


def bootstrap_of(up: ClusterUp) -> str:
    return up.wait_for(r"bootstrap\.servers=(\S+)").group(1)


def produce(bootstrap: str, topic: str, value: bytes) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    producer.produce(topic, value, partition=0)
    assert producer.flush(30) == 0


def consume_first(bootstrap: str, topic: str):
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "cluster-up",
                         "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            message = consumer.poll(1)
            if message is not None and message.error() is None:
                return message.value()
        return None
    finally:
        consumer.close()


def create_topic(bootstrap: str, topic: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=3)])[topic].result(30)


def delete_topic(bootstrap: str, topic: str) -> None:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.delete_topics([topic])[topic].result(30)


def stop_order(lines: list[str]) -> list[str]:
    found = (re.search(r"stopping the (brokers|controllers)", line) for line in lines)
    return [m.group(1) for m in found if m]


def commit(bootstrap: str, group: str, topic: str, offset: int) -> None:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)
    finally:
        consumer.close()


def top_once(up: ClusterUp, bootstrap: str) -> list[str]:
    """`strom top --once` against the cluster: its plain lines."""
    controllers = re.findall(r"\d+ on (127\.0\.0\.1:\d+)", up.lines[0].split("; brokers")[0])
    done = subprocess.run([sys.executable, "-m", "strom", "top", "--bootstrap-server", bootstrap,
                           "--bootstrap-controller", ",".join(controllers), "--once", "--interval", "0.2"],
                          cwd=REPO_ROOT, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def view_frames(up: ClusterUp) -> list[str]:
    """The live view's frames as the terminal was sent them, control sequences left out: each
    from its title to the next (the last may be partly written)."""
    text = ANSI.sub("", up.screen).replace("\r", "\n")
    return [frame for frame in re.split(r"^Strom cluster \S+$", text, flags=re.M)[1:]]


def table_rows(frame: str) -> list[list[str]]:
    """The cells of every table row in a frame (rich's box lines, split on its verticals)."""
    return [[cell.strip() for cell in line.strip().strip("│").split("│")]
            for line in frame.splitlines() if line.strip().startswith("│")]


def shows_the_cluster(frame: str, leader: str, epoch: str) -> bool:
    """The quorum's leader and epoch, every replica, each broker unfenced, the group's lag."""
    rows = table_rows(frame)
    replicas = {r[0] for r in rows if len(r) == 4 and r[1] in ("leader", "voter", "observer")}
    brokers = {r[0] for r in rows if len(r) == 5 and r[1] == "unfenced"}
    return (re.search(rf"leader {leader}, epoch {epoch}, high watermark \d+", frame) is not None
            and replicas == {"1", "2", "3", "4", "5", "6"}
            and [leader] == [r[0] for r in rows if r[1:2] == ["leader"]]
            and brokers == {"4", "5", "6"}
            and ["top-view", "hello-0", "0", "1", "1"] in rows)


def test_cluster_up_serves_a_client_sigint_stops_it_and_a_second_up_reuses_its_dir(tmp_path):
    """Brokers stop before controllers; a second `cluster up` on the same directory reuses the
    cluster (same id, no formatting, meta.properties unchanged) and still holds its records."""
    directory = str(tmp_path)
    with cluster_up(directory, tty=True) as up:
        first = up.wait_for(r"Strom cluster (\S+): formatted")
        bootstrap = bootstrap_of(up)
        assert len(bootstrap.split(",")) == 3
        pids = up.pids()
        assert sorted(pids) == [("broker", 4), ("broker", 5), ("broker", 6),
                                ("controller", 1), ("controller", 2), ("controller", 3)]
        create_topic(bootstrap, "hello")
        produce(bootstrap, "hello", b"world")
        assert consume_first(bootstrap, "hello") == b"world"
        commit(bootstrap, "top-view", "hello", 0)

        # Every process serves /metrics at the address cluster up printed, under Kafka's names.
        scraped = {node: scrape(url) for node, url in metrics_urls(up).items()}
        assert sorted(scraped) == sorted(pids), up.lines
        assert sum(samples.get(("kafka_server_brokertopicmetrics_messagesin_total", (("topic", "hello"),)), 0)
                   for samples in scraped.values()) == 1
        assert sum(samples.get(("kafka_controller_kafkacontroller_activecontrollercount", ()), 0)
                   for samples in scraped.values()) == 1
        supervisor = re.search(r"^supervisor metrics: (http\S+)$", "\n".join(up.lines), re.M)
        assert supervisor and scrape(supervisor.group(1))[("strom_cluster_ready", ())] == 1, up.lines
        # The group's lag (kafka-lag-exporter's series, on its coordinator): 1 behind the log end.
        def lag() -> float:
            return over_brokers(up, "kafka_consumergroup_group_lag", group="top-view", topic="hello")
        eventually("the group's lag of 1", lambda: lag() == 1)

        # strom top shows the quorum, every broker, the partitions and the group's lag.
        lines = top_once(up, bootstrap)
        assert re.match(r"quorum: leader [123], epoch \d+, high watermark \d+, voters 1\(lag \d+\),"
                        r"2\(lag \d+\),3\(lag \d+\), observers 4\(lag \d+\),5\(lag \d+\),6\(lag \d+\)$",
                        lines[0]), lines
        for broker in (4, 5, 6):
            assert any(re.match(rf"broker {broker}: unfenced, leader of \d+ partitions, ", line)
                       for line in lines), lines
        assert "under-replicated partitions: 0" in lines and "offline partitions: 0" in lines
        assert "group top-view hello-0: committed 0, log end 1, lag 1" in lines

        # On its terminal, cluster up shows the same view live: the quorum's leader and epoch,
        # each broker, the group's lag.
        leader, epoch = re.match(r"quorum: leader (\d+), epoch (\d+)", lines[0]).groups()
        deadline = time.monotonic() + 15
        while not any(shows_the_cluster(f, leader, epoch) for f in view_frames(up)[-5:]):
            assert time.monotonic() < deadline, (view_frames(up) or [up.screen[-4000:]])[-1]
            time.sleep(0.5)

        # Once the group has caught up, its lag is 0.
        commit(bootstrap, "top-view", "hello", 1)
        eventually("no lag once caught up", lambda: lag() == 0)

        code = up.interrupt()
        assert code == 0, "\n".join(up.lines)
        assert stop_order(up.lines) == ["brokers", "controllers"]
        for (role, node_id), pid in pids.items():
            assert any(f"{role} {node_id} (pid {pid}): stopped, exit code 0" in line for line in up.lines)
            assert not alive(pid), f"{role} {node_id} (pid {pid}) outlived the supervisor"
    with open(os.path.join(directory, "controller-1", "metadata", "meta.properties")) as f:
        meta_before = f.read()

    with cluster_up(directory) as up:
        again = up.wait_for(r"Strom cluster (\S+): reusing")
        assert again.group(1) == first.group(1)
        bootstrap = bootstrap_of(up)
        assert consume_first(bootstrap, "hello") == b"world"
        assert up.interrupt() == 0, "\n".join(up.lines)
    with open(os.path.join(directory, "controller-1", "metadata", "meta.properties")) as f:
        assert f.read() == meta_before


def test_a_killed_broker_is_reported_and_a_broker_that_does_not_stop_is_killed(tmp_path):
    with cluster_up(str(tmp_path), "--stop-timeout", "2") as up:
        bootstrap = bootstrap_of(up)
        pids = up.pids()
        create_topic(bootstrap, "replicated")  # 3 partitions on all three brokers
        urp = "kafka_server_replicamanager_underreplicatedpartitions"
        eventually("every replica in sync", lambda: over_brokers(up, urp) == 0)
        os.kill(pids[("broker", 5)], signal.SIGKILL)
        up.wait_for(rf"broker 5 \(pid {pids[('broker', 5)]}\): exited, killed by SIGKILL", timeout=10)
        up.wait_for(r"broker 5 \(pid \d+\): not running", timeout=10)
        # Its partitions' leaders on the live brokers count them under-replicated.
        eventually("under-replicated partitions on the live brokers",
                   lambda: over_brokers(up, urp, alive={4, 6}) > 0)
        delete_topic(bootstrap, "replicated")  # so that broker 4's controlled shutdown moves nothing
        os.kill(pids[("broker", 6)], signal.SIGSTOP)  # a hung broker: SIGTERM cannot stop it

        code = up.interrupt()
        assert code == 1, "\n".join(up.lines)
        assert any(f"broker 6 (pid {pids[('broker', 6)]}): not stopped within 2 s: killing it (SIGKILL)"
                   in line for line in up.lines), "\n".join(up.lines)
        assert any(f"broker 4 (pid {pids[('broker', 4)]}): stopped, exit code 0" in line for line in up.lines)
        assert stop_order(up.lines) == ["brokers", "controllers"]
        for pid in pids.values():
            assert not alive(pid)


def test_a_combined_nodes_workers_die_with_its_supervisor_killed_with_kill9(tmp_path):
    """kill -9 of `strom start`'s supervisor leaves no orphaned controller or broker holding the
    node's ports and log dirs: the kernel kills each worker with it (PR_SET_PDEATHSIG)."""
    node = StromNode(str(tmp_path / "node")).start()
    try:
        workers = psutil.Process(node.proc.pid).children(recursive=True)
        assert len(workers) == 2, workers
        os.kill(node.proc.pid, signal.SIGKILL)
        deadline = time.monotonic() + EXIT_TIMEOUT_S
        while any(alive(w.pid) for w in workers) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not [w.pid for w in workers if alive(w.pid)], "workers outlived their supervisor"
    finally:
        node.close()
