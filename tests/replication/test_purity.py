"""STYLE.md point 1: the replication core imports no IO, clock or randomness, and nothing below it."""
import ast
import os

import pytest

REPLICATION = os.path.join(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "replication")
CORE = ["errors", "follower", "isr", "log", "partition", "replica"]
FORBIDDEN = {"asyncio", "socket", "os", "time", "random", "threading", "select", "selectors",
             "engine", "protocol", "ext", "metadata", "broker", "controller", "raft"}


@pytest.mark.parametrize("module", CORE)
def test_pure_core_imports_no_io_clock_or_randomness(module):
    with open(os.path.join(REPLICATION, module + ".py"), encoding="utf-8") as f:
        tree = ast.parse(f.read())
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            imported.add(node.module.split(".")[0])
    assert not imported & FORBIDDEN


@pytest.mark.parametrize("module", CORE)
def test_pure_core_imports_only_its_own_modules_from_replication(module):
    with open(os.path.join(REPLICATION, module + ".py"), encoding="utf-8") as f:
        tree = ast.parse(f.read())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("replication."):
            assert node.module.split(".")[1] in CORE, node.module


def test_the_core_error_codes_are_the_protocol_s():
    from protocol.errors import Error
    from replication import errors

    names = [n for n in dir(errors) if n.isupper() and isinstance(getattr(errors, n), int)]
    assert len(names) >= 17
    for name in names:
        assert getattr(errors, name) == Error[name], name
