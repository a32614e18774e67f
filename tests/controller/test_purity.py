"""STYLE.md point 1: the controller's managers import no IO, clock or randomness; time comes in as
now_ms and randomness as an injected random.Random. Only the shell (quorum_controller, process)
touches asyncio, sockets and clocks."""
import pytest

from tests.purity import IO_CLOCK_RANDOMNESS, imports, top_level

MANAGERS = ["acl_control", "balanced_recovery", "cluster_control", "config_control", "partition_change",
            "placement", "replication_control", "result", "scram_control", "topic_control"]
FORBIDDEN = IO_CLOCK_RANDOMNESS | {"raft"}


@pytest.mark.parametrize("module", MANAGERS)
def test_controller_managers_import_no_io_clock_or_randomness(module):
    imported = imports("controller", module)
    assert not top_level(imported) & FORBIDDEN
    assert not [name for name in imported if name.startswith("protocol.net")], "sockets are the shell's"
