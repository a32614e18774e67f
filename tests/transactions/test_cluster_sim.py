"""The seeded simulation of tests/transactions/cluster_sim.py: transaction coordinators that
fail over, data partition leaders that move while markers are grouped, sent and answered
(answers lost, markers sent again), zombie producers and coordinators, with the invariants
checked after every step and once the faults healed. Each run is parametrized by its seed and
the clients' transaction version (0: EndTxn before v5, the server's aborts at version 1, as
Strom runs today; 2: KIP-890's epoch bump per transaction)."""
import functools
import random

import pytest

from broker.transactions.state import TxnState
from engine.producer_state import ProducerStateManager
from tests.transactions.cluster_sim import Sim, Violation

STEPS = 1500


def run(seed: int, tv: int, steps: int = STEPS) -> Sim:
    sim = Sim(random.Random(seed), tv=tv)
    for _ in range(steps):
        sim.step()
        sim.check()
    sim.heal()
    sim.check_end()
    return sim


@functools.cache
def default_run(seed: int, tv: int) -> Sim:
    """A default seed's run, made once for the tests that look at it."""
    return run(seed, tv)


@pytest.mark.parametrize("tv", [0, 2])
@pytest.mark.parametrize("seed", range(4))
def test_transactions_survive_coordinator_failover_and_leader_moves(seed, tv):
    default_run(seed, tv)


@pytest.mark.slow
@pytest.mark.parametrize("tv", [0, 2])
@pytest.mark.parametrize("seed", range(4, 300))
def test_transactions_survive_coordinator_failover_and_leader_moves_many_seeds(seed, tv):
    run(seed, tv)


def test_the_default_seeds_reach_every_fault():
    """The runs above are worth something only if their faults happen: coordinators move and
    resume markers, leaders move under markers in flight, answers are lost, a stale
    coordinator's markers are refused, zombies are refused, transactions commit, abort, time
    out and are fenced."""
    totals: dict[str, int] = {}
    kinds: set[str] = set()
    results: set[bool] = set()
    for tv in (0, 2):
        for seed in range(4):
            sim = default_run(seed, tv)
            for name, count in sim.stats.items():
                totals[name] = totals.get(name, 0) + count
            kinds |= {w.kind for w in sim.held_writes if w.target.state in
                      (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)}
            results |= {d[3] for d in sim.decisions}
    assert all(totals.values()), totals
    assert kinds == {"end", "fence", "timeout"}, kinds
    assert results == {True, False}


def test_the_simulation_catches_a_partition_taking_markers_unchecked(monkeypatch):
    """A leader that wrote every marker it is sent, without Kafka's epoch and coordinator
    epoch checks (appendEndTxnMarker), would let a stale coordinator's marker end a newer
    transaction: the simulation finds it at this seed."""
    monkeypatch.setattr(ProducerStateManager, "check_marker", lambda self, *args, **kwargs: None)
    with pytest.raises(Violation, match="out of order|ended by the marker|read_committed"):
        run(0, 0)
