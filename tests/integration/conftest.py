"""Fixtures for the integration tests: real `strom` nodes on 127.0.0.1.

``strom_node`` gives each test a fresh node (use it for kill -9 / restart tests);
``shared_node`` is one node per test module. Both are torn down in finalizers, and
``pytest_sessionfinish`` / atexit SIGKILL anything still alive, Ctrl-C included.
"""
import pytest

from .cluster import StromNode, kill_all


def _node(tmp_path_factory, name):
    return StromNode(base_dir=str(tmp_path_factory.mktemp(name)))


@pytest.fixture
def strom_node(tmp_path_factory):
    node = _node(tmp_path_factory, "node")
    try:
        node.start()
        yield node
    finally:
        node.close()


@pytest.fixture(scope="module")
def shared_node(tmp_path_factory):
    node = _node(tmp_path_factory, "shared-node")
    try:
        node.start()
        yield node
    finally:
        node.close()


def pytest_sessionfinish(session, exitstatus):
    kill_all()
