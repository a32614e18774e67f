"""STYLE.md point 1: the replication core imports no IO, clock or randomness, and nothing below it."""
import pytest

from tests.purity import IO_CLOCK_RANDOMNESS, imports, top_level

CORE = ["errors", "follower", "isr", "log", "partition", "replica", "replica_selector"]
FORBIDDEN = IO_CLOCK_RANDOMNESS | {"engine", "protocol", "ext", "metadata", "broker", "controller", "raft"}


@pytest.mark.parametrize("module", CORE)
def test_pure_core_imports_no_io_clock_or_randomness(module):
    assert not top_level(imports("replication", module)) & FORBIDDEN


@pytest.mark.parametrize("module", CORE)
def test_pure_core_imports_only_its_own_modules_from_replication(module):
    for name in imports("replication", module):
        if name.startswith("replication."):
            assert name.split(".")[1] in CORE, name


def test_the_core_error_codes_are_the_protocol_s():
    from protocol.errors import Error
    from replication import errors

    names = [n for n in dir(errors) if n.isupper() and isinstance(getattr(errors, n), int)]
    assert len(names) >= 17
    for name in names:
        assert getattr(errors, name) == Error[name], name
