"""Seeded simulation runs (tests/raft/sim.py): invariants checked after every event.

The default run covers 500 seeds with 3 voters and 500 with 5 voters, each with an observer,
plus 250 of each with KIP-853 voter changes (kraft.version 1, see sim.py); the slow run 2,000
more of each from seed 1,000 (and 1,000 more with voter changes from 500),
over 2 s of simulated time with drops, delays, duplicates, partitions, hard kills (whose closed
connections followers hear, as they would from a crashed process) and connection resets. Set
STROM_RAFT_SIM_SEEDS to run more per configuration. A failure names the seed and the replay
command (``python3 -m tests.raft.sim --seed N --voters V``).
"""
import os
from dataclasses import replace

import pytest

from tests.raft.sim import PROFILES, SIM_CONFIG, Faults, Simulation

SEEDS = int(os.environ.get("STROM_RAFT_SIM_SEEDS", "500"))
RECONFIG_SEEDS = int(os.environ.get("STROM_RAFT_SIM_SEEDS", "250"))
CHUNK = 100
SLOW_CHUNK = 500


@pytest.mark.parametrize("voters", [3, 5])
@pytest.mark.parametrize("first", range(0, SEEDS, CHUNK))
def test_simulation_invariants_hold_under_faults(voters, first):
    for seed in range(first, min(first + CHUNK, SEEDS)):
        Simulation(seed, voters=voters, observers=1).run(2000)


@pytest.mark.parametrize("voters", [3, 5])
@pytest.mark.parametrize("first", range(0, RECONFIG_SEEDS, CHUNK))
def test_simulation_invariants_hold_under_voter_changes_wiped_disks_and_snapshots(voters, first):
    # kraft.version 1: voters added and removed (the leader too) during partitions and kills,
    # pairs of concurrent changes (at most one may succeed), disks wiped (new directory id),
    # snapshots taken and fetched by replicas behind the log start.
    for seed in range(first, min(first + CHUNK, RECONFIG_SEEDS)):
        Simulation(seed, voters=voters, observers=1, reconfig=True).run(2000)


@pytest.mark.slow
@pytest.mark.parametrize("voters", [3, 5])
@pytest.mark.parametrize("first", range(1000, 3000, SLOW_CHUNK))
def test_simulation_invariants_hold_under_faults_over_more_seeds(voters, first):
    for seed in range(first, first + SLOW_CHUNK):
        Simulation(seed, voters=voters, observers=1).run(2000)


@pytest.mark.slow
@pytest.mark.parametrize("voters", [3, 5])
@pytest.mark.parametrize("first", range(500, 1500, SLOW_CHUNK))
def test_simulation_invariants_hold_under_voter_changes_over_more_seeds(voters, first):
    for seed in range(first, first + SLOW_CHUNK):
        Simulation(seed, voters=voters, observers=1, reconfig=True).run(2000)


def test_simulation_with_voter_changes_does_change_voters_and_load_snapshots():
    runs = [Simulation(seed, voters=3, observers=1, reconfig=True).run(2000) for seed in range(60)]
    totals = {k: sum(sim.stats[k] for sim in runs) for k in runs[0].stats}
    assert totals["voter changes"] >= 20 and totals["refused"] >= 20, totals
    assert totals["snapshot loads"] >= 5 and totals["wipes"] >= 5, totals


def test_simulation_closes_connections_and_followers_canvass_on_them():
    runs = [Simulation(seed, voters=3, observers=1).run(2000) for seed in range(60)]
    totals = {k: sum(sim.closes[k] for sim in runs) for k in runs[0].closes}
    assert totals["closes"] >= 500 and totals["resets"] >= 200 and totals["canvasses"] >= 100, totals


# Runs that once found bugs, pinned with the fault profile and Fetch size they had then, and
# without closed connections (which the simulation did not have then), so they replay exactly.
# (1859, 3 voters, lossy profile, 5 entries per Fetch): a follower took the leader's high
# watermark from a diverging-epoch answer and committed an entry the leader did not have.
REGRESSIONS = [(1859, 3, 2, 5)]


@pytest.mark.parametrize("seed,voters,profile,fetch_max_entries", REGRESSIONS)
def test_simulation_regression_seeds(seed, voters, profile, fetch_max_entries):
    config = replace(SIM_CONFIG, fetch_max_entries=fetch_max_entries)
    faults = PROFILES[profile].without_closes()
    Simulation(seed, voters=voters, observers=1, faults=faults, config=config).run(2000)
    Simulation(seed, voters=voters, observers=1, faults=PROFILES[profile], config=config).run(2000)


@pytest.mark.parametrize("voters", [3, 5])
def test_simulation_without_faults_elects_once_and_commits_everything(voters):
    for seed in range(50):
        sim = Simulation(seed, voters=voters, observers=1, faults=Faults.none()).run(1000)
        assert len(sim.leader_of_epoch) == 1, sim.summary()
        # Appends of the last few ms may still be in flight.
        assert len(sim.committed) >= sim.appended - 2 > 20, sim.summary()


@pytest.mark.parametrize("voters", [3, 5])
def test_simulation_under_moderate_faults_still_makes_progress(voters):
    # 5% drops, 2% duplicates, a partition every ~300 ms and a hard kill every ~400 ms: about 100
    # appends are offered in 2 s, and the quorum keeps committing most of them.
    runs = [Simulation(seed, voters=voters, faults=Faults()).run(2000) for seed in range(40)]
    progress = [len(sim.committed) for sim in runs]
    assert min(progress) >= 30, sorted(progress)


def test_simulation_failure_names_seed_and_replay_command():
    sim = Simulation(7, voters=3)
    replay = r"seed 7, 3 voters.*\nreplay: python3 -m tests.raft.sim --seed 7 --voters 3 --observers 1$"
    with pytest.raises(AssertionError, match=replay):
        sim._fail("a planted failure")
