"""The seeded simulation of tests/transactions/cluster_sim.py: transaction coordinators that
fail over, data partition leaders that move while markers are grouped, sent and answered
(answers lost, markers sent again), zombie producers and coordinators, with the invariants
checked after every step and once the faults healed."""
import random

import pytest

from tests.transactions.cluster_sim import Sim

STEPS = 400


def run(seed: int, tv: int, steps: int = STEPS) -> Sim:
    sim = Sim(random.Random(seed), tv=tv)
    for _ in range(steps):
        sim.step()
        sim.check()
    sim.heal()
    sim.check_end()
    return sim


@pytest.mark.parametrize("tv", [0, 2])
@pytest.mark.parametrize("seed", range(3))
def test_transactions_survive_coordinator_failover_and_leader_moves(seed, tv):
    run(seed, tv)


@pytest.mark.slow
@pytest.mark.parametrize("tv", [0, 2])
@pytest.mark.parametrize("seed", range(3, 200))
def test_transactions_survive_coordinator_failover_and_leader_moves_many_seeds(seed, tv):
    run(seed, tv, 1500)
