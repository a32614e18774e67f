"""STYLE.md point 1: the KRaft core imports no IO, clock or randomness, and no other package."""
import pytest

from tests.purity import IO_CLOCK_RANDOMNESS, imports, top_level

CORE = ["core", "errors", "fetch", "log", "messages", "quorum_epoch", "quorum_state", "ready", "vote"]
FORBIDDEN = IO_CLOCK_RANDOMNESS | {"engine", "protocol", "ext"}


@pytest.mark.parametrize("module", CORE)
def test_pure_core_imports_no_io_clock_or_randomness(module):
    assert not top_level(imports("raft", module)) & FORBIDDEN
