"""The seeded simulation (sim.py) of a static quorum (kraft.version 0) whose leader is asked, mid-run
and under the same faults, to upgrade to kraft.version 1; once that commits, voters are added and
removed as in the dynamic runs. Every fifth seed of the default run's voter-change range runs this
way (the slow run: 500 more).

Besides sim.py's invariants: every node's kraft.version and voter set are those of its own log
(read back from scratch), and once a node's high watermark passes the upgrade it stays a
kraft.version 1 node with the voters of the VotersRecord in force.
Replay one run: ``python3 -m tests.raft.test_kraft_upgrade_sim --seed 15 --voters 5``.
"""
from __future__ import annotations

import argparse
import random
import sys

import pytest

from raft.core import RaftCore
from raft.errors import NotLeaderError
from raft.kraft_upgrade import KRaftUpgradeError
from raft.quorum_state import Leader
from raft.voters import KRaftVersion, Voter, VoterSet
from tests.raft.harness import directory_id, voter
from tests.raft.sim import Simulation

SEEDS = 250  # as test_simulation.py's default voter-change runs: every fifth one upgrades here


class UpgradeSimulation(Simulation):
    def __init__(self, seed: int, voters: int = 3, observers: int = 1, **kwargs) -> None:
        super().__init__(seed, voters, observers, **kwargs)
        self.upgrade_rng = random.Random(seed * 7_000_003 + 11)
        self.upgrade = {"asked": 0, "refused": 0, "appended": 0, "committed": 0}
        self.replay = self.replay.replace("tests.raft.sim", "tests.raft.test_kraft_upgrade_sim")

    def _start(self, node) -> None:
        # controller.quorum.voters: ids and endpoints, no directory ids; each replica has one.
        node.incarnation += 1
        node.last_hw = node.log.high_watermark
        core_rng = random.Random(self.seed * 1_000_003 + node.node_id * 1009 + node.incarnation)
        static = VoterSet.of(Voter(i, None, voter(i).endpoints, 0, 1) for i in self.voter_ids)
        node.core = RaftCore(node.node_id, static, node.log, core_rng, node.durable, self.now, self.config,
                             directory_id=directory_id(node.node_id, node.disk),
                             endpoints=voter(node.node_id).endpoints)
        node.next_tick = None
        self._process(node, node.core.tick(self.now))

    def _run(self, duration_ms: int) -> None:
        self._at(self.upgrade_rng.randint(100, 900), "upgrade")
        super()._run(duration_ms)

    def _on_upgrade(self) -> None:
        """Ask whichever node leads; again later until the upgrade is committed somewhere."""
        if any(self._upgrade_committed(n) for n in self.nodes.values() if n.core is not None):
            self.upgrade["committed"] += 1
            self._at(self.now + self.upgrade_rng.randint(50, 150), "voter_change")
            return
        self._at(self.now + self.upgrade_rng.randint(20, 100), "upgrade")
        for node in self.nodes.values():
            if node.core is None or not isinstance(node.core.state, Leader):
                continue
            self.upgrade["asked"] += 1
            try:
                ready = node.core.upgrade_kraft_version(self.now, 1)
            except (KRaftUpgradeError, NotLeaderError):
                self.upgrade["refused"] += 1
                continue
            if ready.appended_offset is not None:
                self.upgrade["appended"] += 1
            self._process(node, ready)

    @staticmethod
    def _upgrade_committed(node) -> bool:
        core = node.core
        return core.kraft_version == 1 and core.kraft_history.latest_offset() < node.log.high_watermark

    def _check(self) -> None:
        super()._check()
        for node in self.nodes.values():
            core = node.core
            if core is None:
                continue
            if core.kraft_version == 0 and core.voter_set.ids() != self.voter_ids:
                self._fail(f"node {node.node_id} has kraft.version 0 and voters {core.voter_set.ids()}")
            if core.kraft_version == 1 and core.kraft_history.latest_offset() >= 0:
                entry = node.log.read(core.kraft_history.latest_offset(), 2)
                # A Fetch may end between the two: the VotersRecord then comes with the next one.
                if (not entry or entry[0].value != KRaftVersion(1) or (len(entry) == 2 and (
                        not isinstance(entry[1].value, VoterSet) or entry[1].value.ids() != self.voter_ids
                        or any(v.directory_id != directory_id(v.id) for v in entry[1].value.voters)))):
                    self._fail(f"node {node.node_id}: the upgrade is not KRaftVersion(1) then the static "
                               f"voters with their directory ids: {entry}")


def upgrade_runs(voters: int, seeds: range) -> None:
    runs = [UpgradeSimulation(seed, voters=voters, observers=1).run(2000) for seed in seeds]
    upgraded = sum(1 for sim in runs if sim.upgrade["committed"])
    changed = sum(sim.stats["voter changes"] for sim in runs)
    # Faults (kills, partitions) keep some runs from committing it in 2 s; most do.
    assert upgraded >= len(runs) * 0.6, [sim.upgrade for sim in runs]
    assert changed >= len(runs) // 2, changed


@pytest.mark.parametrize("voters", [3, 5])
def test_simulation_invariants_hold_when_a_static_quorum_upgrades_to_kraft_version_1_under_faults(voters):
    upgrade_runs(voters, range(0, SEEDS, 5))


@pytest.mark.slow
@pytest.mark.parametrize("voters", [3, 5])
def test_simulation_invariants_hold_when_a_static_quorum_upgrades_over_more_seeds(voters):
    upgrade_runs(voters, range(SEEDS, SEEDS + 2500, 5))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--seeds", type=int, default=1)
    parser.add_argument("--voters", type=int, default=3)
    args = parser.parse_args(argv)
    for seed in range(args.seed, args.seed + args.seeds):
        sim = UpgradeSimulation(seed, args.voters, 1).run(2000)
        print(sim.summary(), sim.upgrade, sim.stats)
    return 0


if __name__ == "__main__":
    sys.exit(main())
