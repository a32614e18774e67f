"""STYLE.md point 1: the transaction coordinator's core imports no IO, clock or randomness."""
import pytest

from tests.purity import IO_CLOCK_RANDOMNESS, imports, top_level

CORE = ["state", "storage", "coordinator"]
FORBIDDEN = IO_CLOCK_RANDOMNESS | {"engine", "replication", "controller", "raft", "metadata"}


@pytest.mark.parametrize("module", CORE)
def test_pure_core_imports_no_io_clock_or_randomness(module):
    assert not top_level(imports("broker/transactions", module)) & FORBIDDEN


@pytest.mark.parametrize("module", CORE)
def test_pure_core_imports_nothing_of_the_broker_but_its_own_modules_and_the_offsets_partitioning(module):
    for name in imports("broker/transactions", module):
        if name.startswith("broker."):
            assert name.startswith(("broker.transactions", "broker.groups.storage")), name
