"""Benchmarks run with `make bench` (timed). In the default test run pytest-benchmark is
disabled and each benchmark body runs once, so the suites cannot rot.

Every size a benchmark measures over (records, rounds, seconds, kills) is written
``size(full, smoke)``: ``full`` when pytest-benchmark times (``--benchmark-enable``, as
``make bench`` runs), ``smoke`` when it is disabled (``--benchmark-disable``, the default run's
addopts, or under xdist, where pytest-benchmark disables itself). The smoke sizes keep each
body's code path and its asserts, on a workload small enough to cost a second or two of CPU.

``strom_broker(extra)``: the single Strom broker a module measures against. Timed, each module
starts its own with its ``extra`` settings, as before. Once-only, the modules share one started
for the session with every module's settings (SMOKE_BROKER_EXTRA): a broker costs about 4 CPU
seconds to start, more than the bodies it serves. The modules using it share an xdist group
(STROM_BROKER_GROUP), so that under xdist one worker starts it."""
from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pytest

T = TypeVar("T")


def benchmarks_enabled(config: pytest.Config) -> bool:
    """Whether pytest-benchmark times this run: its own decision where it made one (it also turns
    itself off under xdist), else the command line's."""
    session = getattr(config, "_benchmarksession", None)
    if session is not None:
        return not session.disabled
    option = config.getoption
    return bool(option("benchmark_enable", False)) or not option("benchmark_disable", False)


@pytest.fixture(scope="session")
def size(pytestconfig: pytest.Config) -> Callable[[T, T], T]:
    """``size(full, smoke)``: ``full`` when benchmarks are timed, ``smoke`` when each body runs once.
    Session-scoped, so module fixtures that load data or start nodes size themselves with it."""
    enabled = benchmarks_enabled(pytestconfig)

    def size(full: T, smoke: T) -> T:
        return full if enabled else smoke
    return size


STROM_BROKER_GROUP = "bench-strom-broker"
# Every module's settings for its broker, together (none of them changes what another measures).
SMOKE_BROKER_EXTRA: dict[str, object] = {
    "transaction.state.log.num.partitions": 5,  # test_bench_transactions
    "log.cleaner.backoff.ms": 100,  # test_bench_cleaner
}


@pytest.fixture(scope="session")
def strom_broker(request: pytest.FixtureRequest) -> Callable[[dict[str, object]], Any]:
    """``with strom_broker(extra) as broker``: a StromBroker (bench/e2e/brokers.py) of its own when
    benchmarks are timed, else the session's shared one, whose settings include ``extra``."""
    from bench.e2e.brokers import StromBroker

    enabled = benchmarks_enabled(request.config)
    shared: list[StromBroker] = []

    @contextlib.contextmanager
    def strom_broker(extra: dict[str, object]) -> Iterator[StromBroker]:
        if enabled:
            with StromBroker(extra) as own:
                yield own
            return
        missing = {k: v for k, v in extra.items() if SMOKE_BROKER_EXTRA.get(k) != v}
        assert not missing, f"SMOKE_BROKER_EXTRA lacks {missing}"
        if not shared:
            shared.append(StromBroker(SMOKE_BROKER_EXTRA).start())
            request.addfinalizer(shared[0].close)
        yield shared[0]
    return strom_broker
