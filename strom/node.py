"""Formatting a node's directories and running its roles as processes.

``strom format`` writes meta.properties (cluster.id, node.id, directory.id) into each log dir
and, for a controller bootstrapping a dynamic quorum, the metadata log's bootstrap checkpoint
(strom.quorum has the table of choices).

A combined node (process.roles=broker,controller) is a supervisor that starts each role as
its own worker process (`strom controller`, `strom broker`), forwards SIGTERM/SIGINT to
them (the broker first: its controlled shutdown needs the controller; the controller once the
broker has stopped), and stops the other role if one dies.
"""
from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass

from engine.checkpoint import new_uuid
from engine.errors import LogDirError
from engine.manager import format_log_dir, read_meta_properties
from strom.config import ServerConfig
from strom.quorum import METADATA_PARTITION_DIR, BootstrapPlan, plan_bootstrap

log = logging.getLogger("strom")
KILL_AFTER_S = 30


@dataclass(frozen=True)
class Formatted:
    """What ``format_node`` did: the directories it formatted (already formatted ones skipped
    under --ignore-formatted), and the metadata dir's directory.id if it formatted that one."""

    cluster_id: str
    directories: list[str]
    metadata_directory_id: str | None
    plan: BootstrapPlan


def format_node(config: ServerConfig, cluster_id: str | None, standalone: bool = False,
                ignore_formatted: bool = False, *, initial_controllers: str | None = None,
                no_initial_controllers: bool = False, add_scram: list[str] | None = None) -> Formatted:
    """Write meta.properties into every log dir, the metadata log's bootstrap checkpoint
    (strom.quorum explains the choices) and, on a controller, the bootstrap metadata of
    ``add_scram`` (kafka-storage's --add-scram arguments: controller/bootstrap.py). Every
    argument and directory is checked before any is written."""
    from controller.bootstrap import scram_record, write_bootstrap_records

    bootstrap_records = [scram_record(a) for a in add_scram or []]
    cluster_id = cluster_id or new_uuid()
    plan = plan_bootstrap(config, new_uuid(), standalone=standalone,
                          initial_controllers=initial_controllers,
                          no_initial_controllers=no_initial_controllers)
    metadata_dir = os.path.normpath(config.metadata_log_dir)
    todo = []
    for d in dict.fromkeys(os.path.normpath(d) for d in [*config.log_dirs, metadata_dir]):
        existing = read_meta_properties(d) if os.path.isdir(d) else None
        if existing is not None:
            if ignore_formatted:
                continue
            raise LogDirError(f"{d} is already formatted (cluster.id {existing['cluster.id']})")
        todo.append(d)
    directory_id = None
    for d in todo:
        if d != metadata_dir:
            format_log_dir(d, cluster_id, config.node_id)
            continue
        if plan.voters is not None:  # before meta.properties, the commit point of a format
            write_bootstrap_checkpoint(d, plan)
        if bootstrap_records and "controller" in config.roles:
            write_bootstrap_records(d, bootstrap_records)
        directory_id = format_log_dir(d, cluster_id, config.node_id, plan.directory_id)
    return Formatted(cluster_id, todo, directory_id, plan)


def write_bootstrap_checkpoint(metadata_dir: str, plan: BootstrapPlan) -> str:
    try:
        from raft.engine_log import write_bootstrap_snapshot
    except ImportError as e:
        raise LogDirError(f"cannot write the bootstrap checkpoint of {metadata_dir}: {e}") from None
    partition_dir = os.path.join(metadata_dir, METADATA_PARTITION_DIR)
    os.makedirs(partition_dir, exist_ok=True)
    return write_bootstrap_snapshot(partition_dir, plan.voters, plan.kraft_version)


def cluster_id_of(config: ServerConfig) -> str:
    props = read_meta_properties(config.metadata_log_dir)
    if props is None:
        raise LogDirError(f"{config.metadata_log_dir} is not formatted: run `strom format` first")
    return props["cluster.id"]


# glibc malloc serves a request above its mmap threshold (128 KiB, raised only to the largest
# block freed so far) with a fresh mmap, and returns heap tops above its trim threshold to
# the kernel: a broker receiving a megabyte frame per produce request and per replica fetch
# then pays page faults and zeroing for every one (about a fifth of an RF=3 broker's CPU,
# measured with perf). Fixed thresholds keep those blocks in the heap for reuse.
MALLOC_MMAP_THRESHOLD = 64 << 20
MALLOC_TRIM_THRESHOLD = 256 << 20
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # mallopt(3) parameters


def tune_malloc() -> bool:
    """Set the thresholds above where glibc is the allocator; True if set."""
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc: its own policy stands
        return False
    return bool(mallopt(_M_MMAP_THRESHOLD, MALLOC_MMAP_THRESHOLD)) and \
        bool(mallopt(_M_TRIM_THRESHOLD, MALLOC_TRIM_THRESHOLD))


def run_role(role: str, config: ServerConfig) -> int:
    cluster_id = cluster_id_of(config)
    for name, why in config.without_effect().items():
        log.info("%s is accepted but has no effect: %s", name, why)
    if role == "controller":
        from controller.process import run
    else:
        from broker.server import run

        tune_malloc()
    return run(config, cluster_id)


# Runs in each worker before it execs the node: ask the kernel to SIGKILL it when its supervisor
# dies (Linux PR_SET_PDEATHSIG survives execve), so a supervisor killed with kill -9 leaves no
# orphaned controller or broker holding its ports and log dirs; give up if the supervisor is
# already gone. (strom run and start's combined node, and strom cluster up.)
DIE_WITH_SUPERVISOR = (
    "import ctypes, os, signal, sys\n"
    "try:\n"
    "    ctypes.CDLL(None).prctl(1, signal.SIGKILL)\n"
    "except Exception:\n"
    "    pass\n"
    "if os.getppid() != int(sys.argv[1]):\n"
    "    sys.exit(1)\n"
    "os.execvp(sys.argv[2], sys.argv[2:])\n"
)


def supervise(config_path: str, config: ServerConfig) -> int:
    """Start each role as a worker process; return when they have all stopped."""
    cluster_id_of(config)  # fail early, in the supervisor, if unformatted
    roles = [r for r in ("controller", "broker") if r in config.roles]
    children: dict[str, subprocess.Popen] = {}
    stopping = False

    signalled: set[str] = set()

    def stop(signum=None, frame=None):
        """Brokers go first (a controlled shutdown needs the controller to grant it), then
        the controller once no broker runs."""
        nonlocal stopping
        stopping = True
        order = ["broker"] if "broker" in children else []
        if "broker" not in children or children["broker"].poll() is not None:
            order = list(children)
        for role in order:
            child = children[role]
            if role not in signalled and child.poll() is None:
                child.send_signal(signal.SIGTERM)
                signalled.add(role)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    for role in roles:
        children[role] = subprocess.Popen([sys.executable, "-c", DIE_WITH_SUPERVISOR, str(os.getpid()),
                                           sys.executable, "-m", "strom", role, "--config", config_path])
    failed = 0
    stop_started = None
    while children:
        if stopping and stop_started is None:
            stop_started = time.monotonic()
        if stop_started is not None and time.monotonic() - stop_started > KILL_AFTER_S:
            for role, child in children.items():
                log.error("the %s process did not stop within %d s; killing it", role, KILL_AFTER_S)
                child.kill()
            stop_started = float("inf")
        for role, child in list(children.items()):
            code = child.poll()
            if code is None:
                continue
            del children[role]
            if not stopping:
                log.error("the %s process exited with code %s; stopping the node", role, code)
                failed = code or 1
            stop()  # the next role in the stopping order
        time.sleep(0.05)
    return failed
