"""Test tiers: what each test needs, as markers set here from where it lives and what it uses.

| marker    | the test needs                                                       | set by             |
|-----------|----------------------------------------------------------------------|--------------------|
| (none)    | nothing but this process: no child process, no socket to another one | -                  |
| processes | other OS processes: strom nodes or clusters, client tools (kcat,     | PROCESS_MODULES,   |
|           | node), Python children killed or crashed on purpose                  | fixtures, by hand  |
| netns     | root, ``ip netns`` and iptables (tests/faults: a namespace per node) | NETNS_MODULES      |
| spark     | a JVM (a local SparkSession)                                         | the spark fixture  |
| slow      | minutes; left out of the default run (``-m slow``)                   | by hand            |

``make check`` runs the in-process tier (``-m "not processes and not netns and not spark and not
slow"``), ``make test`` everything but ``slow``, both with pytest-xdist. A test that starts a
process and is not in a module below says so itself with ``@pytest.mark.processes``.

Under xdist (``--dist loadgroup``) the tests of a module that starts processes run on one worker,
so that its cluster fixture starts once; the tests that use the ``spark`` fixture run in two
groups (``SPARK_GROUPS``), each on one worker with one SparkSession: one group of ten minutes
would be the run's longest pole. (The wheel test keeps a group of its own: the wheel is built
and installed once, and its read through the Spark source needs no JVM.) The
groups are ordered first (the Spark group and the wheel test, then the fault trials, the other
netns and process modules, in-process tests last), so the long ones start at once and the short
in-process tests fill the workers at the end.
"""
from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

# Property tests are checked for what they find, not for their speed: on a loaded 2-core box an
# example runs late, and hypothesis's 200 ms deadline (or its too_slow check) would fail a
# correct test. A test's own @settings still sets its example count.
settings.register_profile("strom", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("strom")

TESTS = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(TESTS)

# Paths relative to the repository root; a directory covers everything below it.
NETNS_MODULES = (
    "tests/faults/test_trials.py",
    "tests/faults/test_hosts.py",
)
PROCESS_MODULES = NETNS_MODULES + (
    "tests/integration",
    "tests/package",
    "tests/corruption/test_corrupt_files_at_start.py",
    "tests/fuzz/test_live_fuzz.py",
    "tests/limits/test_node_limits.py",
    "tests/spark/test_spark_integration.py",
    "tests/spark/test_sink_integration.py",
    "tests/storage/test_disk_full.py",
    "tests/storage/test_disk_full_cluster.py",
    "tests/unit/test_malloc_tuning.py",
    "bench/test_bench_e2e.py",
    "bench/test_bench_raft.py",
    "bench/test_bench_replication.py",
    "bench/test_bench_transactions.py",
    "bench/test_bench_security.py",
    "bench/test_bench_metrics.py",
)
# Fixtures that start a node or a cluster (tests/integration/conftest.py).
PROCESS_FIXTURES = {"strom_node", "shared_node", "replicated_node"}
SPARK_FIXTURES = {"spark"}
# The Spark tests' two groups, each on one worker with its own SparkSession (a JVM, ~1 GiB): the
# modules that start nodes or streams here, the others in "spark". Each takes about five minutes.
SPARK_SECOND = (
    "tests/spark/test_sink_integration.py",
    "tests/spark/test_pushdown.py",
    "tests/spark/test_spark_integration.py",
)

# Scheduling order under xdist: the longest groups (minutes: the Spark tests, then the wheel built
# and installed and the fault trials) start at once, then the other namespace and process tests;
# in-process tests fill the workers in at the end.
FIRST = ("tests/package/test_wheel.py", "tests/faults/test_trials.py")
_ORDER = {"netns": 2, "spark": 0, "processes": 3}


def _relpath(item: pytest.Item) -> str:
    return os.path.relpath(str(item.path), ROOT).replace(os.sep, "/")


def _under(path: str, prefixes: tuple[str, ...]) -> bool:
    return any(path == p or path.startswith(p + "/") for p in prefixes)


def tiers_of(item: pytest.Item) -> set[str]:
    """The tier markers an item carries or is given by its path and fixtures."""
    path = _relpath(item)
    fixtures = set(getattr(item, "fixturenames", ()))
    tiers = {m.name for m in item.iter_markers() if m.name in _ORDER}
    if _under(path, NETNS_MODULES):
        tiers.add("netns")
    if _under(path, PROCESS_MODULES) or fixtures & PROCESS_FIXTURES:
        tiers.add("processes")
    if fixtures & SPARK_FIXTURES:
        tiers.add("spark")
    return tiers


# First among the plugins' hooks: pytest-xdist's worker turns each item's xdist_group marker into a
# suffix of its node id in its own pytest_collection_modifyitems, which --dist loadgroup schedules
# by; after it, the groups given here would be ignored (each test of a module could then start the
# module's cluster on a worker of its own).
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    rank = {}
    for index, item in enumerate(items):
        tiers = tiers_of(item)
        for name in sorted(tiers):
            if not item.get_closest_marker(name):
                item.add_marker(getattr(pytest.mark, name))
        if "spark" in tiers:  # one SparkSession (a JVM) for every Spark test of a group
            group = "spark-2" if _under(_relpath(item), SPARK_SECOND) else "spark"
        elif tiers:
            group = _relpath(item)  # a module's node or cluster fixture starts once
        else:
            group = None
        if group is not None and not item.get_closest_marker("xdist_group"):
            item.add_marker(pytest.mark.xdist_group(group))
        if "spark" in tiers:
            first = 0
        elif _under(_relpath(item), FIRST):
            first = 1
        else:
            first = min((_ORDER[t] for t in tiers), default=len(_ORDER) + 1)
        rank[item.nodeid] = (first, index)
    # A stable order every worker computes alike (xdist checks the collections match).
    items.sort(key=lambda item: rank[item.nodeid])


# Under xdist each worker lowers its CPU priority to what its test needs: in-process tests (they
# come last) the lowest, tests that start processes higher, and the Spark tests keep the
# priority they started with. Spark gives a Python worker it launches a fixed 10 s to connect
# back to the JVM, which a loaded box can exceed; the processes' own waits have wider bounds,
# and simulations run on simulated time. The CPU is no less busy for it.
NICE = {"spark": 0, "netns": 5, "processes": 5}
IN_PROCESS_NICE = 10
_BASE_NICE = os.nice(0)


def pytest_runtest_setup(item: pytest.Item) -> None:
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return
    tiers = [name for name in NICE if item.get_closest_marker(name)]
    wanted = _BASE_NICE + min((NICE[t] for t in tiers), default=IN_PROCESS_NICE)
    now = os.nice(0)
    if wanted > now:  # never back up: that takes privileges
        os.nice(wanted - now)
