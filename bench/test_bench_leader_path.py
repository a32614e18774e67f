"""The leader's acks=all path in one process (bench/leader_path.py): a produce, its two
followers' fetches and its answer, over loopback through the broker's own Server, Dispatcher,
handlers and ReplicaManager. extra_info["us_per_produce"] is the figure; the instruction count
that the box's noise does not move comes from callgrind (the module's docstring says how)."""
from __future__ import annotations

import asyncio

from bench.leader_path import WARM_UP, run

PRODUCES = 2000


def test_acks_all_produces_through_the_leader_path(benchmark, size, tmp_path):
    produces = size(PRODUCES, 200)
    result = benchmark.pedantic(lambda: asyncio.run(run(produces, str(tmp_path))), rounds=1, iterations=1)
    answers = result["answers"]
    # Every produce is acknowledged once both followers fetched past it, at the next 2 offsets.
    assert answers == [(0, 2 * (WARM_UP + i)) for i in range(produces)]
    benchmark.extra_info["us_per_produce"] = round(result["wall_s"] / produces * 1e6, 1)
    benchmark.extra_info["cpu_us_per_produce"] = round(result["cpu_s"] / produces * 1e6, 1)
