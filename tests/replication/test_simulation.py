"""Seeded simulation runs (tests/replication/sim.py): invariants checked after every event.

The default run covers 500 seeds with 3 replicas and 500 with 5, each 2 s of simulated time
under the seed's fault profile (drops, duplicates, delays, partitions, follower stalls, lossy
kills, clean and controlled shutdowns) and then healed until the partition converges; the slow
run covers 10,000 more of each (seeds from 1,000, past what the default once ran). Set
STROM_REPLICATION_SIM_SEEDS to change the default count per replica count. A failure names the
seed and the replay command (``python3 -m tests.replication.sim --seed N --replicas R``).

With spare brokers (``--spares``), an operator also reassigns the partition about every 300 ms
of simulated time (one replica swapped for a broker outside the replica set, partly moving
back), amid the same faults: removed replicas delete their logs, re-added ones start empty, and
every invariant holds, convergence included (the reassignment completes, removed replicas hold
nothing). The default run covers 200 seeds of 3 replicas and a spare, 100 of 5 and two spares; the
slow run the 400 and 200 the default once ran.
"""
import os
from dataclasses import replace

import pytest

from tests.replication.sim import Faults, SimConfig, Simulation

SEEDS = int(os.environ.get("STROM_REPLICATION_SIM_SEEDS", "500"))
CHUNK = 100
SLOW_SEEDS = 10_000
SLOW_CHUNK = 1000


def totals(runs, *keys):
    out = {}
    for sim in runs:
        for key, value in {**sim.stats, **sim.controller.changes, **sim.controller.alter_errors}.items():
            out[key] = out.get(key, 0) + value
    return {key: out.get(key, 0) for key in keys}


@pytest.mark.parametrize("replicas", [3, 5])
@pytest.mark.parametrize("first", range(0, SEEDS, CHUNK))
def test_simulation_invariants_hold_under_faults(replicas, first):
    for seed in range(first, min(first + CHUNK, SEEDS)):
        Simulation(seed, replicas).run(2000)


@pytest.mark.slow
@pytest.mark.parametrize("replicas", [3, 5])
@pytest.mark.parametrize("first", range(1000, 1000 + SLOW_SEEDS, SLOW_CHUNK))
def test_simulation_invariants_hold_over_many_more_seeds(replicas, first):
    for seed in range(first, first + SLOW_CHUNK):
        Simulation(seed, replicas).run(2000)


REASSIGN_RUNS = [(3, 1, 200), (5, 2, 100)]  # (replicas, spares, seeds): 2,000 of each clean by hand
SLOW_REASSIGN_RUNS = [(3, 1, 400), (5, 2, 200)]


@pytest.mark.parametrize("replicas,spares,seeds", REASSIGN_RUNS + [
    pytest.param(*run, marks=pytest.mark.slow) for run in SLOW_REASSIGN_RUNS])
def test_simulation_invariants_hold_while_reassignments_move_replicas(replicas, spares, seeds):
    runs = [Simulation(seed, replicas, spares=spares).run(2000) for seed in range(seeds)]
    moved = totals(runs, "reassignments", "reassignments completed", "logs deleted")
    assert all(moved.values()), moved  # the runs did move replicas, complete and delete


# Runs that once found bugs. (2059, 3), (2352, 3), (2427, 3) and (34, 5): the leader replayed the
# registration of the partition epoch an AlterPartition answer had taught it, dropped its pending
# ISR expansion, and moved the HW past a replica the controller put in the ISR (F1 in
# test_sim_findings.py).
REGRESSIONS = [(2059, 3), (2352, 3), (2427, 3), (34, 5)]


@pytest.mark.parametrize("seed,replicas", REGRESSIONS)
def test_simulation_regression_seeds(seed, replicas):
    Simulation(seed, replicas).run(2000)


@pytest.mark.parametrize("replicas", [3, 5])
def test_without_faults_one_leader_keeps_the_full_isr_and_acknowledges_every_acks_all_produce(replicas):
    for seed in range(20):
        sim = Simulation(seed, replicas, faults=Faults.none()).run(2000)
        reg = sim.controller.registration
        assert (reg.leader_epoch, reg.partition_epoch) == (0, 0), sim.summary()
        produced = sum(n for name, n in sim.produced.items() if name != "a1")
        assert sim.checker.acked_count == produced > 40, sim.summary()


def test_stalled_followers_leave_the_isr_while_the_hw_moves_on_and_rejoin():
    # A stall is longer than replica.lag.time.max.ms: the leader shrinks the ISR, acks=all goes on
    # with the smaller ISR (min.insync.replicas 2 of 3), and the follower comes back in.
    stalls = Faults(drop=0.0, duplicate=0.0, max_delay_ms=3, crash_every_ms=0, partition_every_ms=0,
                    stall_every_ms=250, lossy=0.0)
    runs = [Simulation(seed, 3, faults=stalls).run(2000) for seed in range(30)]
    seen = totals(runs, "stalls", "shrink proposals", "isr changes", "elections",
                  "acks=all acknowledged by a shrunk ISR")
    assert seen["elections"] == 0, seen
    assert seen["shrink proposals"] >= seen["stalls"] // 2 > 20, seen
    assert seen["isr changes"] >= 2 * seen["stalls"] // 2, seen  # out, then back in
    assert seen["acks=all acknowledged by a shrunk ISR"] > 50, seen


def test_partitions_fence_cut_off_brokers_and_elect_clean_leaders():
    partitions = Faults(drop=0.0, duplicate=0.0, max_delay_ms=3, crash_every_ms=0, partition_every_ms=200,
                        stall_every_ms=0, lossy=0.0)
    runs = [Simulation(seed, replicas, faults=partitions).run(2000)
            for seed in range(20) for replicas in (3, 5)]
    seen = totals(runs, "partitions", "fenced", "unfenced", "elections", "FENCED_LEADER_EPOCH",
                  "INVALID_UPDATE_VERSION", "diverging truncations")
    assert seen["partitions"] > 100 and seen["fenced"] > 20 and seen["elections"] > 10, seen
    # Deposed leaders keep proposing ISR changes the controller refuses, and their
    # uncommitted tails are truncated by the epoch check.
    assert seen["FENCED_LEADER_EPOCH"] + seen["INVALID_UPDATE_VERSION"] > 0, seen
    assert seen["diverging truncations"] > 0, seen


def test_kills_that_lose_unflushed_records_lose_no_acknowledged_record():
    kills = Faults(drop=0.0, duplicate=0.0, max_delay_ms=3, crash_every_ms=120, partition_every_ms=0,
                   stall_every_ms=0, lossy=1.0)
    runs = [Simulation(seed, replicas, faults=kills).run(2000) for seed in range(20) for replicas in (3, 5)]
    seen = totals(runs, "lossy kills", "records lost by kills", "unclean registrations", "elections")
    assert seen["lossy kills"] > 100 and seen["records lost by kills"] > 50, seen
    assert seen["unclean registrations"] >= seen["lossy kills"] > 0 and seen["elections"] > 20, seen
    assert sum(sim.checker.acked_count for sim in runs) > 2000


def test_a_lossy_network_exercises_retried_and_stale_alter_partition_answers():
    lossy = Faults(drop=0.2, duplicate=0.1, max_delay_ms=20, crash_every_ms=0, partition_every_ms=0,
                   stall_every_ms=300, lossy=0.0)
    runs = [Simulation(seed, 3, faults=lossy).run(2000) for seed in range(20)]
    seen = totals(runs, "INVALID_UPDATE_VERSION", "NONE", "shrink proposals")
    assert seen["NONE"] > 40 and seen["INVALID_UPDATE_VERSION"] > 0, seen


def test_under_min_isr_acks_all_is_refused_and_acks_1_still_appends():
    config = replace(SimConfig(), min_insync_replicas=3)
    stalls = Faults(drop=0.0, duplicate=0.0, max_delay_ms=3, crash_every_ms=0, partition_every_ms=0,
                    stall_every_ms=200, lossy=0.0)
    runs = [Simulation(seed, 3, faults=stalls, config=config).run(2000) for seed in range(20)]
    seen = totals(runs, "produce NOT_ENOUGH_REPLICAS", "acks=1 acknowledged")
    assert seen["produce NOT_ENOUGH_REPLICAS"] > 20 and seen["acks=1 acknowledged"] > 500, seen


def test_simulation_failure_names_seed_and_replay_command():
    sim = Simulation(7, 5)
    replay = r"seed 7, 5 replicas.*\nreplay: python3 -m tests.replication.sim --seed 7 --replicas 5$"
    with pytest.raises(AssertionError, match=replay):
        sim.fail("a planted failure")
