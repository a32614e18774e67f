"""STYLE.md point 1: the KRaft core imports no IO, clock or randomness, and no other package."""
import ast
import os

import pytest

RAFT = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "raft")
CORE = ["core", "errors", "fetch", "log", "messages", "quorum_epoch", "quorum_state", "ready", "vote"]
FORBIDDEN = {"asyncio", "socket", "os", "time", "random", "threading", "select", "selectors",
             "engine", "protocol", "ext"}


@pytest.mark.parametrize("module", CORE)
def test_pure_core_imports_no_io_clock_or_randomness(module):
    with open(os.path.join(RAFT, module + ".py"), encoding="utf-8") as f:
        tree = ast.parse(f.read())
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            imported.add(node.module.split(".")[0])
    assert not imported & FORBIDDEN
