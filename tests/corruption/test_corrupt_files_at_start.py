"""`strom broker` and `strom controller` started on a directory with a corrupt file either
recover (truncate, rebuild) and say so in one log line, or exit non-zero with one line naming
the file; never a traceback.

One node directory is formatted (`strom format`) and given a partition log per module; each
test damages a copy of it and starts one role as its own process (a second or two each).
"""
import glob
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from engine.log import Log
from engine.manager import CLEAN_SHUTDOWN_FILE, LogManager
from tests.engine.batches import BASE_TS, producer_batch
from tests.integration.cluster import REPO_ROOT, StromNode, free_ports, node_properties, render_properties

RUN_TIMEOUT_S = 20


@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> str:
    base = str(tmp_path_factory.mktemp("pristine"))
    node = StromNode(base_dir=base)
    node.format()
    manager = LogManager([node.log_dir])
    manager.startup()
    log = manager.get_or_create_log("t1", 0, topic_id="AAAAAAAAAAAAAAAAAAAAAQ")
    for i in range(5):
        log.append_as_leader(producer_batch(10, tag=i, compression=3), 1, BASE_TS + 1000)
    log.update_high_watermark(50)
    manager.shutdown()
    return base


@pytest.fixture
def node_dir(pristine, tmp_path) -> str:
    """A copy of the pristine node directory with its own server.properties."""
    d = str(tmp_path / "node")
    shutil.copytree(pristine, d, ignore=shutil.ignore_patterns(".lock", "*.log.txt"))
    props = node_properties(1, *free_ports(2), os.path.join(d, "data"))
    with open(os.path.join(d, "server.properties"), "w", encoding="utf-8") as f:
        f.write(render_properties(props))
    return d


def data(node_dir: str, *parts: str) -> str:
    return os.path.join(node_dir, "data", *parts)


def start(node_dir: str, role: str, until: str | None = None) -> tuple[int | None, str]:
    """Run ``strom <role>``: to its exit, or (with ``until``) until a line containing it is
    logged, then stop it. Returns (exit code, or None if stopped by us; output)."""
    cmd = [sys.executable, "-m", "strom", role, "--config", os.path.join(node_dir, "server.properties")]
    proc = subprocess.Popen(cmd, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, start_new_session=True, text=True)
    lines: list[str] = []
    deadline = time.monotonic() + RUN_TIMEOUT_S
    try:
        for line in proc.stdout:
            lines.append(line)
            if until is not None and until in line:
                break
            if time.monotonic() > deadline:
                break
        else:
            return proc.wait(RUN_TIMEOUT_S), "".join(lines)
        return None, "".join(lines)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(RUN_TIMEOUT_S)
        proc.stdout.close()


def assert_exits_naming(rc: int | None, output: str, path: str) -> None:
    assert rc not in (0, None), output
    assert "Traceback" not in output, output
    naming = [line for line in output.splitlines() if path in line]
    assert len(naming) == 1, output


def corrupt(path: str, content: bytes) -> None:
    with open(path, "wb") as f:
        f.write(content)


def test_broker_refuses_a_corrupt_high_watermark_checkpoint_naming_it(node_dir):
    path = data(node_dir, "replication-offset-checkpoint")
    corrupt(path, b"0\n2\nt1 0 50\n")
    rc, output = start(node_dir, "broker")
    assert_exits_naming(rc, output, path)
    assert "count 2 but 1 entries" in output


def test_broker_refuses_an_undecodable_partition_metadata_naming_it(node_dir):
    path = data(node_dir, "t1-0", "partition.metadata")
    corrupt(path, b"\xff\xfe\x00")
    rc, output = start(node_dir, "broker")
    assert_exits_naming(rc, output, path)


def test_controller_refuses_a_corrupt_quorum_state_naming_it(node_dir):
    path = data(node_dir, "__cluster_metadata-0", "quorum-state")
    corrupt(path, b'{"leaderId":1,"leaderEpoch":')
    rc, output = start(node_dir, "controller")
    assert_exits_naming(rc, output, path)


def test_controller_refuses_a_snapshot_with_a_flipped_bit_naming_it(node_dir):
    snapshots = [n for n in os.listdir(data(node_dir, "__cluster_metadata-0")) if n.endswith(".checkpoint")]
    path = data(node_dir, "__cluster_metadata-0", snapshots[0])
    with open(path, "r+b") as f:
        f.seek(70)
        byte = f.read(1)
        f.seek(70)
        f.write(bytes([byte[0] ^ 0x04]))
    rc, output = start(node_dir, "controller")
    assert_exits_naming(rc, output, path)
    assert "CRC32C" in output


def test_broker_truncates_a_torn_segment_tail_and_says_so_in_one_line(node_dir):
    """The logs load once the broker caught up with the metadata log (their topics' configs
    known): the node's controller runs beside it."""
    os.unlink(data(node_dir, CLEAN_SHUTDOWN_FILE))
    segment = data(node_dir, "t1-0", "00000000000000000000.log")
    size = os.path.getsize(segment)
    with open(segment, "r+b") as f:
        f.truncate(size - 7)  # the last batch torn
    config = os.path.join(node_dir, "server.properties")
    controller = subprocess.Popen([sys.executable, "-m", "strom", "controller", "--config", config],
                                  cwd=REPO_ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                  stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        rc, output = start(node_dir, "broker", until="truncated")
    finally:
        os.killpg(controller.pid, signal.SIGKILL)
        controller.wait(RUN_TIMEOUT_S)
    assert "Traceback" not in output, output
    said = [line for line in output.splitlines() if segment in line]
    assert len(said) == 1 and "truncated" in said[0], output
    # The node's metadata holds no topic t1: once the broker applies its image, the log is set
    # aside as stray (t1-0.<id>-stray), whole. The broker is stopped at the line above, before or
    # after that rename.
    [kept] = glob.glob(data(node_dir, "t1-0")) + glob.glob(data(node_dir, "t1-0.*-stray"))
    log = Log(kept)
    assert log.log_end_offset == 40
    log.close()
