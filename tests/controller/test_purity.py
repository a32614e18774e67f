"""STYLE.md point 1: the controller's managers import no IO, clock or randomness; time comes in as
now_ms and randomness as an injected random.Random. Only the shell (quorum_controller, process)
touches asyncio, sockets and clocks."""
import ast
import os

import pytest

CONTROLLER = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                          "controller")
MANAGERS = ["cluster_control", "partition_change", "placement", "replication_control", "result",
            "topic_control"]
FORBIDDEN = {"asyncio", "socket", "os", "time", "random", "threading", "select", "selectors", "raft"}


@pytest.mark.parametrize("module", MANAGERS)
def test_controller_managers_import_no_io_clock_or_randomness(module):
    with open(os.path.join(CONTROLLER, module + ".py"), encoding="utf-8") as f:
        tree = ast.parse(f.read())
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            imported.add(node.module)
            imported.update(f"{node.module}.{alias.name}" for alias in node.names)
    assert not {name.split(".")[0] for name in imported} & FORBIDDEN
    assert not [name for name in imported if name.startswith("protocol.net")], "sockets are the shell's"
