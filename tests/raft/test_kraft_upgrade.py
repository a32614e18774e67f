"""kraft.version 0 -> 1 on the leader (KIP-853's upgrade of a static quorum), each test named after
the rule it checks, over the scenario harness with static voters that have directory ids."""
import random
from dataclasses import replace

import pytest

from raft import messages as m
from raft.core import RaftCore
from raft.errors import NotLeaderError
from raft.kraft_upgrade import KRaftUpgradeError
from raft.quorum_state import Leader
from raft.voters import Endpoint, KRaftVersion, Voter, VoterSet, static_voter_set
from tests.raft.harness import CONFIG, Cluster, directory_id, voter


class StaticCluster(Cluster):
    """kraft.version 0 (``controller.quorum.voters``), every replica with a directory id."""

    def __init__(self, voters=3, static: VoterSet | None = None, **kwargs):
        self.static = static
        super().__init__(voters, **kwargs)

    def start(self, node_id: int) -> None:
        self.down.discard(node_id)
        self.closed.discard(node_id)
        rng = random.Random(self.seed * 7919 + node_id + 1000 * len(self.persisted[node_id]))
        static = self.static if self.static is not None else VoterSet.of(
            Voter(i, None, voter(i).endpoints, 0, 1) for i in self.voters)
        self.cores[node_id] = RaftCore(node_id, static, self.logs[node_id], rng, self.durable[node_id],
                                       self.now, self.config,
                                       directory_id=directory_id(node_id, self.incarnations[node_id]),
                                       endpoints=voter(node_id).endpoints)
        self.process(node_id, self.cores[node_id].tick(self.now))


def started(**kwargs) -> StaticCluster:
    cluster = StaticCluster(seed=1, **kwargs)
    cluster.run(400)
    cluster.leader()
    return cluster


def upgrade(cluster, version=1, validate_only=False):
    leader = cluster.leader()
    ready = cluster.cores[leader].upgrade_kraft_version(cluster.now, version, validate_only)
    cluster.process(leader, ready)
    return ready


def update_voter(cluster, node_id, lo=0, hi=1, token="admin"):
    leader = cluster.leader()
    epoch = cluster.cores[leader].state.epoch
    told = Voter(node_id, directory_id(node_id), voter(node_id).endpoints, lo, hi)
    request = m.UpdateVoterRequest(epoch, told)
    cluster.request(leader, request, token)
    return [r for t, r in cluster.replies if t == token][-1]


def test_upgrade_appends_kraft_version_and_the_voters_with_their_directory_ids_as_one_batch():
    cluster = started()
    cluster.append(["a"])
    cluster.run(50)
    leader = cluster.leader()
    ready = upgrade(cluster)
    entries = cluster.logs[leader].entries
    assert ready.appended_offset == entries[-2].offset
    assert entries[-2].value == KRaftVersion(1)
    assert entries[-1].value == VoterSet.of(voter(i) for i in (1, 2, 3))
    assert len(ready.log_ops) == 1  # one append: one control batch
    cluster.run(100)
    for i in (1, 2, 3):
        assert cluster.cores[i].kraft_version == 1
        assert cluster.cores[i].voter_set == VoterSet.of(voter(j) for j in (1, 2, 3))
        assert cluster.cores[i].quorum.is_voter
    assert cluster.logs[leader].high_watermark > entries[-1].offset


def test_after_the_upgrade_commits_the_quorum_is_dynamic_add_and_remove_voter_work():
    cluster = started()
    leader = cluster.leader()
    cluster.request(leader, m.RemoveVoterRequest(3, directory_id(3)), "before")
    assert [r.error_code for t, r in cluster.replies if t == "before"] == [m.UNSUPPORTED_VERSION]
    upgrade(cluster)
    cluster.run(100)
    cluster.add_node(4)
    cluster.run(200)
    cluster.request(cluster.leader(), m.AddVoterRequest(voter(4), 1000), "add")
    cluster.run(300)
    assert [r.error_code for t, r in cluster.replies if t == "add"] == [m.NONE]
    cluster.request(cluster.leader(), m.RemoveVoterRequest(3, directory_id(3)), "remove")
    cluster.run(300)
    assert [r.error_code for t, r in cluster.replies if t == "remove"] == [m.NONE]
    for i in (1, 2, 4):
        assert cluster.cores[i].voter_set.ids() == {1, 2, 4}


def test_upgrade_is_refused_until_every_voter_is_known_to_support_kraft_version_1():
    # controller.quorum.voters says nothing of the voters' ranges: 0-0 until each one tells.
    static = static_voter_set({i: (f"node-{i}", 9093) for i in (1, 2, 3)})
    cluster = started(static=static)
    leader = cluster.leader()
    followers = sorted({1, 2, 3} - {leader})
    with pytest.raises(KRaftUpgradeError, match="because not all of the voters support it"):
        upgrade(cluster)
    assert update_voter(cluster, followers[0]).error_code == m.NONE
    with pytest.raises(KRaftUpgradeError, match="not all of the voters support it"):
        upgrade(cluster)
    assert update_voter(cluster, followers[1], hi=0).error_code == m.NONE
    with pytest.raises(KRaftUpgradeError, match="not all of the voters support it"):
        upgrade(cluster)
    assert update_voter(cluster, followers[1]).error_code == m.NONE
    assert cluster.cores[leader].kraft_version == 0  # the UpdateVoters wrote nothing
    upgrade(cluster)
    cluster.run(100)
    assert all(v.max_kraft_version == 1 for v in cluster.cores[leader].voter_set.voters)


def test_update_voter_at_kraft_version_0_from_a_replica_that_is_not_a_voter_is_voter_not_found():
    cluster = started()
    assert update_voter(cluster, 7).error_code == m.VOTER_NOT_FOUND


def test_upgrade_is_refused_while_a_voter_directory_id_is_unknown():
    cluster = started()
    leader = cluster.leader()
    follower = min({1, 2, 3} - {leader})
    cluster.cores[leader].state.replicas[follower].directory_id = None  # as if it never fetched
    with pytest.raises(KRaftUpgradeError, match="Directory id must be known for all of the voters"):
        upgrade(cluster)
    cluster.run(50)  # its next Fetch names its directory
    upgrade(cluster)
    assert cluster.cores[leader].kraft_version == 1


def test_validate_only_runs_every_check_and_appends_nothing():
    cluster = started()
    leader = cluster.leader()
    end = cluster.logs[leader].end_offset().offset
    ready = upgrade(cluster, validate_only=True)
    assert ready.appended_offset is None and not ready.log_ops
    assert cluster.logs[leader].end_offset().offset == end and cluster.cores[leader].kraft_version == 0
    cluster.cores[leader].state.replicas[min({1, 2, 3} - {leader})].directory_id = None
    with pytest.raises(KRaftUpgradeError):
        upgrade(cluster, validate_only=True)


def test_upgrade_to_the_version_in_force_or_already_appended_is_a_no_op():
    cluster = started()
    leader = cluster.leader()
    assert upgrade(cluster, version=0).appended_offset is None
    upgrade(cluster)
    end = cluster.logs[leader].end_offset().offset
    assert upgrade(cluster).appended_offset is None  # appended, not yet committed: the same version
    assert cluster.logs[leader].end_offset().offset == end


def test_downgrade_from_1_to_0_is_refused():
    cluster = started()
    upgrade(cluster)
    cluster.run(100)
    with pytest.raises(KRaftUpgradeError, match="from version 1 to 0 because the new version is a downgrade"):
        upgrade(cluster, version=0)


def test_upgrade_to_an_unknown_version_is_refused():
    cluster = started()
    with pytest.raises(KRaftUpgradeError, match="Invalid upgrade of kraft.version from version 0 to 2"):
        upgrade(cluster, version=2)


def test_upgrade_on_a_follower_or_with_a_stale_epoch_is_not_leader():
    cluster = started()
    leader = cluster.leader()
    follower = min({1, 2, 3} - {leader})
    with pytest.raises(NotLeaderError):
        cluster.cores[follower].upgrade_kraft_version(cluster.now, 1)
    epoch = cluster.cores[leader].state.epoch
    with pytest.raises(NotLeaderError, match="is stale"):
        cluster.cores[leader].upgrade_kraft_version(cluster.now, 1, epoch=epoch - 1)
    with pytest.raises(KRaftUpgradeError, match="larger than the current epoch"):
        cluster.cores[leader].upgrade_kraft_version(cluster.now, 1, epoch=epoch + 1)


def test_an_uncommitted_upgrade_truncated_by_a_new_leader_leaves_kraft_version_0():
    cluster = started()
    leader = cluster.leader()
    cluster.isolated = {leader}
    upgrade(cluster)  # appended on the isolated leader only
    assert cluster.cores[leader].kraft_version == 1
    cluster.run(600)
    new_leader = [i for i in cluster.leaders() if i != leader]
    assert new_leader and cluster.cores[new_leader[0]].kraft_version == 0
    cluster.isolated = set()
    cluster.run(400)
    assert all(cluster.cores[i].kraft_version == 0 for i in (1, 2, 3))
    assert cluster.cores[leader].voter_set.ids() == {1, 2, 3}


def test_the_upgraded_voters_carry_the_endpoints_the_voters_announced():
    static = static_voter_set({i: (f"old-{i}", 1) for i in (1, 2, 3)}, "CONTROLLER")
    cluster = started(static=static)
    leader = cluster.leader()
    for i in sorted({1, 2, 3} - {leader}):
        update_voter(cluster, i)
    upgrade(cluster)
    assert {v.id: v.endpoints for v in cluster.cores[leader].voter_set.voters} == {
        i: (Endpoint("CONTROLLER", f"node-{i}", 9093),) for i in (1, 2, 3)}
    assert isinstance(cluster.cores[leader].state, Leader)


def test_a_fetch_never_ends_between_the_kraft_version_record_and_its_voters_record():
    cluster = started(config=replace(CONFIG, fetch_max_entries=1))
    seen = []
    process = cluster.process

    def checked(node_id, ready):
        process(node_id, ready)
        core = cluster.cores[node_id]
        seen.append((core.kraft_version, core.voter_set))

    cluster.process = checked
    upgrade(cluster)
    cluster.run(100)
    upgraded = VoterSet.of(voter(j) for j in (1, 2, 3))
    assert all(voters == upgraded for version, voters in seen if version == 1)
    assert all(cluster.cores[i].kraft_version == 1 for i in (1, 2, 3))
