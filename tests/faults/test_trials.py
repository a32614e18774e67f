"""Fault trials in the default run: real processes in their own network namespaces, real faults,
an idempotent acks=all workload and the checker's verdict (tests/faults/trial.py). Three short
seeded schedules cover every fault kind; ``make soak`` runs a hundred long ones.

A failed trial prints its seed, schedule, the checker's findings and the replay command."""
from __future__ import annotations

import pytest

from tests.faults.hosts import available
from tests.faults.nemesis import KINDS, TXN_KINDS, schedule
from tests.faults.trial import run_trial, run_txn_trial

WHY_NOT = available()
pytestmark = pytest.mark.skipif(WHY_NOT is not None,
                                reason=f"fault trials need network namespaces: {WHY_NOT}")

# (seed, kinds, seconds of faults): together every kind of the nemesis. The first tears a broker's
# segment while a partition is being reassigned, the second kills a leader while a partition is on,
# the third the active controller while a link is slow; the third has racks (kill-read-replica):
# its consumers fetch from a follower in their rack (KIP-392), which is killed under them. Each
# length ends just after its schedule's last heal (a schedule is cut where its next fault would
# not fit, so a longer one only adds faults of kinds it already has: seed 8's second corrupt).
SHORT_TRIALS = [
    (8, ["kill", "kill-two", "pause", "torn-write", "corrupt", "wipe", "reassign"], 31.0),
    (6, ["partition", "isolate-leader", "isolate-controller", "bridge", "kill-leader"], 32.0),
    (3, ["one-way", "loss", "latency", "kill-controller", "disk-full", "kill-read-replica"], 36.0),
]
# Values a second of each of the two producers: about 3,000 acknowledged records a trial, what
# the cluster's processes (not the records) spend most of a trial's CPU on either way.
SHORT_RATE = 50.0
# The second runs on a cluster with SASL_SSL on every listener, the controllers' and the
# inter-broker one included.
SECURE = {6}
# In a trial with racks, the part of the bytes the brokers sent the consumers that came from the
# read replica must be more than this. Reading from leaders only, a broker of three serves the
# partitions it leads, about a third of them (and fewer once a kill has moved its leaderships).
MOST = 0.5


def test_the_short_trials_cover_every_fault_kind():
    covered = {f.kind for seed, kinds, length in SHORT_TRIALS for f in schedule(seed, kinds, length)}
    assert covered == set(KINDS)


def test_each_short_trial_ends_soon_after_its_last_heal():
    for seed, kinds, length in SHORT_TRIALS:
        faults = schedule(seed, kinds, length)
        assert {f.kind for f in faults} == set(kinds), seed
        assert length - max(f.at + f.duration for f in faults) < 2.0, seed


@pytest.mark.parametrize("seed,kinds,length", SHORT_TRIALS,
                         ids=[f"seed{s}" + ("-sasl_ssl" if s in SECURE else "") for s, _, _ in SHORT_TRIALS])
def test_a_fault_trial_loses_duplicates_and_reorders_nothing(seed, kinds, length):
    result = run_trial(seed, kinds, length, rate=SHORT_RATE, secure=seed in SECURE)
    assert result.acked > 1000, result.summary()
    assert result.ok, result.summary()
    if result.racks:  # the consumers read from the follower in their rack, as the leaders told them
        assert result.read_share > MOST, result.summary()


@pytest.mark.slow
@pytest.mark.parametrize("seed", [101, 102])
def test_a_long_trial_with_every_fault_kind_loses_nothing(seed):
    result = run_trial(seed, list(KINDS), 90.0)
    assert result.ok, result.summary()


# The transactional workload (transactional producers, read_committed consumers, deliberate
# zombies) under kills of partition leaders and of the producers' transaction coordinator, and
# partitions; checked for Jepsen's transactional anomalies by name (checker.check_transactions).
TXN_SHORT_TRIAL = (2, ["kill-leader", "kill-txn-coordinator", "partition", "kill"], 20.0)


def test_the_transactional_trial_kills_the_transaction_coordinator_and_partition_leaders():
    seed, kinds, length = TXN_SHORT_TRIAL
    hit = {f.kind for f in schedule(seed, kinds, length)}
    assert {"kill-leader", *TXN_KINDS} <= hit


def test_a_transactional_trial_shows_no_aborted_intermediate_or_torn_read_and_loses_nothing():
    seed, kinds, length = TXN_SHORT_TRIAL
    result = run_txn_trial(seed, kinds, length)
    # a workload that did something under the faults, however loaded the box (about 100 committed
    # transactions at a load average of 17, over 400 on a quiet one)
    assert result.transactions.get("committed", 0) > 30, result.summary()
    assert result.ok, result.summary()


@pytest.mark.slow
def test_a_long_transactional_trial_with_every_kind_shows_no_transactional_anomaly():
    kinds = [k for k in KINDS if k not in ("kill-read-replica", "disk-full")] + list(TXN_KINDS)
    result = run_txn_trial(201, kinds, 90.0)
    assert result.ok, result.summary()
