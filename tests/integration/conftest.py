"""Fixtures for the integration tests: real `strom` nodes on 127.0.0.1.

``strom_node`` gives each test a fresh node (use it for kill -9 / restart tests);
``shared_node`` is one node per test module; ``replicated_node`` is one ReplicatedCluster
per test module (3 controllers + 3 brokers, default.replication.factor 3,
min.insync.replicas 2), whose ``.bootstrap`` lists every live broker, so the client
drivers run against it unchanged. All are torn down in finalizers, and
``pytest_sessionfinish`` / atexit SIGKILL anything still alive, Ctrl-C included.
"""
import pytest

from .cluster import NodeError, StromNode, kill_all


def _node(tmp_path_factory, name):
    return StromNode(base_dir=str(tmp_path_factory.mktemp(name)))


def _stop_cleanly(node):
    """The contract: SIGTERM stops the node with exit code 0. Anything else errors the
    test's teardown with the node's log tail (stop() SIGKILLs what is left)."""
    try:
        rc = node.stop()
        if rc not in (0, None):
            raise NodeError(node.failure_message(f"exited {rc} on SIGTERM"))
    finally:
        node.close()


@pytest.fixture
def strom_node(tmp_path_factory):
    node = _node(tmp_path_factory, "node")
    try:
        node.start()
        yield node
    except BaseException:
        node.close()
        raise
    _stop_cleanly(node)


@pytest.fixture(scope="module")
def shared_node(tmp_path_factory):
    node = _node(tmp_path_factory, "shared-node")
    try:
        node.start()
        yield node
    except BaseException:
        node.close()
        raise
    _stop_cleanly(node)


@pytest.fixture(scope="module")
def replicated_node():
    from .replicated_cluster import ReplicatedCluster  # imports the engine: only when used
    with ReplicatedCluster() as cluster:
        yield cluster
    # the contract of _stop_cleanly: every process exits 0 on SIGTERM
    nodes = {**cluster.controllers, **cluster.brokers}
    codes = {f"{n.role} {i}": n.proc.returncode for i, n in nodes.items()}
    if any(rc not in (0, None) for rc in codes.values()):
        raise NodeError(f"the replicated cluster did not stop cleanly on SIGTERM: exit codes {codes}")


def pytest_sessionfinish(session, exitstatus):
    kill_all()
