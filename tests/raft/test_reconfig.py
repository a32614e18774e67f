"""KIP-853 voter changes, each test named after the rule it checks (seeds/kip-853-dynamic-quorum.txt)."""
from dataclasses import replace

from raft import messages as m
from raft.log import LeaderChange
from raft.quorum_state import Follower, Leader, Resigned, Unattached
from raft.voters import Endpoint, KRaftVersion, VoterSet
from tests.raft.harness import Cluster, directory_id, voter


def started(voters=3, seed=1, **kwargs) -> Cluster:
    cluster = Cluster(voters, seed=seed, kraft_version=1, **kwargs)
    cluster.run(400)
    cluster.leader()
    return cluster


def answers(cluster, token="admin"):
    return [r for t, r in cluster.replies if t == token]


def add(cluster, node_id, incarnation=0, timeout_ms=1000, token="admin"):
    cluster.request(cluster.leader(), m.AddVoterRequest(voter(node_id, incarnation), timeout_ms), token)


def test_first_leader_writes_kraft_version_and_voters_from_the_bootstrap_snapshot():
    cluster = started()
    values = [e.value for e in cluster.logs[cluster.leader()].entries[:3]]
    assert isinstance(values[0], LeaderChange)
    assert values[1] == KRaftVersion(1)
    assert values[2] == VoterSet.of(voter(i) for i in (1, 2, 3))


def test_add_voter_waits_for_catch_up_probes_api_versions_and_answers_once_committed():
    cluster = started()
    cluster.append(["a", "b"])
    cluster.add_node(4)
    cluster.run(200)
    assert isinstance(cluster.cores[4].state, Follower) and not cluster.cores[4].quorum.is_voter
    add(cluster, 4)
    cluster.run(200)
    assert answers(cluster) == [m.VoterChangeResponse(m.NONE, None, cluster.leader(),
                                                       cluster.cores[cluster.leader()].state.epoch)]
    for i in (1, 2, 3, 4):
        assert cluster.cores[i].voter_set.ids() == {1, 2, 3, 4}
    assert cluster.cores[4].quorum.is_voter
    probes = [msg for _, dst, msg in cluster.sent if isinstance(msg, m.ApiVersionsProbe)]
    assert [p.replica_id for p in probes] == [4]


def test_new_voter_set_counts_for_the_high_watermark_as_soon_as_it_is_appended():
    cluster = started()
    cluster.add_node(4)
    cluster.run(200)
    add(cluster, 4)
    leader = cluster.leader()
    cluster.run(5)  # appended, not yet committed: the leader already uses the new set
    assert cluster.cores[leader].state.voters == {1, 2, 3, 4}
    # With 4 voters the majority is 3: two voters down (of the new set) stop commits.
    cluster.run(200)
    down = [i for i in (1, 2, 3, 4) if i != leader][:2]
    for i in down:
        cluster.stop(i)
    hw = cluster.logs[leader].high_watermark
    cluster.append(["x"])
    cluster.run(50)
    assert cluster.logs[leader].high_watermark == hw


def test_add_voter_refuses_a_replica_id_already_in_the_voter_set():
    cluster = started()
    cluster.add_node(3)  # wiped disk: same id, new directory id
    cluster.run(100)
    add(cluster, 3, incarnation=1)
    cluster.run(10)
    assert answers(cluster)[0].error_code == m.DUPLICATE_VOTER


def test_only_one_voter_change_at_a_time_a_second_is_refused():
    cluster = started()
    cluster.add_node(4)
    cluster.add_node(5)
    cluster.run(200)
    add(cluster, 4, token="first")
    add(cluster, 5, token="second")
    cluster.request(cluster.leader(), m.RemoveVoterRequest(2, directory_id(2)), "third")
    cluster.run(200)
    assert answers(cluster, "first")[0].error_code == m.NONE
    assert answers(cluster, "second")[0].error_code == m.REQUEST_TIMED_OUT
    assert answers(cluster, "third")[0].error_code == m.REQUEST_TIMED_OUT
    assert cluster.cores[cluster.leader()].voter_set.ids() == {1, 2, 3, 4}


def test_voter_change_is_refused_until_the_leader_commits_its_epoch():
    cluster = Cluster(3, seed=2, kraft_version=1)
    while not cluster.leaders():
        cluster.run(1)
    leader = cluster.leader()
    state = cluster.cores[leader].state
    assert cluster.logs[leader].high_watermark <= state.epoch_start_offset
    other = next(i for i in (1, 2, 3) if i != leader)
    cluster.request(leader, m.RemoveVoterRequest(other, directory_id(other)))
    assert answers(cluster)[0].error_code == m.REQUEST_TIMED_OUT
    cluster.run(100)
    cluster.request(leader, m.RemoveVoterRequest(other, directory_id(other)), "later")
    cluster.run(100)
    assert answers(cluster, "later")[0].error_code == m.NONE


def test_remove_voter_commits_under_the_new_majority_and_the_removed_voter_becomes_an_observer():
    cluster = started()
    leader = cluster.leader()
    removed = next(i for i in (1, 2, 3) if i != leader)
    cluster.request(leader, m.RemoveVoterRequest(removed, directory_id(removed)))
    cluster.run(300)
    assert answers(cluster)[0].error_code == m.NONE
    assert cluster.cores[leader].voter_set.ids() == {1, 2, 3} - {removed}
    assert not cluster.cores[removed].quorum.is_voter
    cluster.append(["after"])
    cluster.run(100)
    assert cluster.logs[removed].entries[-1].value == "after"  # still replicates, as an observer
    assert not any(src == removed and isinstance(msg, m.VoteRequest)
                   for src, _, msg in cluster.sent[-500:])


def test_removed_leader_stays_leader_until_committed_without_counting_itself_then_resigns():
    cluster = started()
    leader = cluster.leader()
    epoch = cluster.cores[leader].state.epoch
    cluster.request(leader, m.RemoveVoterRequest(leader, directory_id(leader)))
    state = cluster.cores[leader].state
    assert isinstance(state, Leader) and leader not in state.voters
    cluster.run(100)
    assert answers(cluster)[0].error_code == m.NONE
    assert isinstance(cluster.cores[leader].state, Resigned | Unattached | Follower)
    cluster.run(400)
    new = cluster.leader()
    assert new != leader and cluster.cores[new].state.epoch > epoch
    assert cluster.cores[new].voter_set.ids() == {1, 2, 3} - {leader}


def test_replicas_use_an_uncommitted_voters_record_and_revert_when_it_is_truncated():
    cluster = started(voters=3, seed=4)
    leader = cluster.leader()
    cluster.add_node(4)
    cluster.run(200)
    followers = [i for i in (1, 2, 3) if i != leader]
    cluster.isolated = {leader, 4}  # the leader and the new voter are cut off from the rest
    add(cluster, 4)
    cluster.run(1)
    assert cluster.cores[leader].voter_set.ids() == {1, 2, 3, 4}  # uncommitted, yet in force
    cluster.run(1000)
    new = next(i for i in followers if isinstance(cluster.cores[i].state, Leader))
    cluster.isolated = set()
    cluster.run(400)
    # The old leader's VotersRecord never committed: truncated, the bootstrap set is back.
    assert cluster.cores[leader].voter_set.ids() == {1, 2, 3}
    assert cluster.cores[new].voter_set.ids() == {1, 2, 3}
    assert answers(cluster)[0].error_code in (m.REQUEST_TIMED_OUT, m.NOT_LEADER_OR_FOLLOWER)


def test_kraft_version_0_has_a_static_voter_set_and_refuses_voter_changes():
    cluster = Cluster(3, seed=1)
    cluster.run(400)
    cluster.request(cluster.leader(), m.RemoveVoterRequest(2, None))
    assert answers(cluster)[0].error_code == m.UNSUPPORTED_VERSION


def test_a_wiped_voter_is_an_observer_until_added_and_refuses_votes_meant_for_its_old_disk():
    cluster = started()
    leader = cluster.leader()
    wiped = next(i for i in (1, 2, 3) if i != leader)
    cluster.stop(wiped)
    cluster.add_node(wiped)  # new directory id, empty log
    cluster.run(300)
    core = cluster.cores[wiped]
    assert not core.quorum.is_voter and isinstance(core.state, Follower)
    vote = m.VoteRequest(leader, core.state.epoch + 1, 9, 9, False, wiped, directory_id(leader),
                         directory_id(wiped, 0))
    ready = core.step(cluster.now, leader, vote)
    assert ready.messages[0][1].error_code == m.INVALID_VOTER_KEY
    description = cluster.cores[leader].describe()
    assert (wiped, directory_id(wiped, 1)) in [(o.replica_id, o.directory_id) for o in description.observers]
    # Replace the old disk: remove (id, old uuid), then add (id, new uuid).
    cluster.request(leader, m.RemoveVoterRequest(wiped, directory_id(wiped, 0)), "remove")
    cluster.run(200)
    cluster.request(leader, m.AddVoterRequest(voter(wiped, 1), 1000), "add")
    cluster.run(300)
    assert answers(cluster, "remove")[0].error_code == m.NONE
    assert answers(cluster, "add")[0].error_code == m.NONE
    assert cluster.cores[wiped].quorum.is_voter
    # The leader tracks the new disk's progress, never the old one's (a new ReplicaState).
    assert cluster.cores[leader].state.replicas[wiped].directory_id == directory_id(wiped, 1)


def test_add_voter_times_out_when_the_replica_does_not_catch_up():
    cluster = started()
    add(cluster, 9, timeout_ms=100)  # no such replica fetching
    cluster.run(150)
    assert answers(cluster)[0].error_code == m.REQUEST_TIMED_OUT
    add(cluster, 9, timeout_ms=100, token="again")  # the slot is free again
    cluster.run(150)
    assert answers(cluster, "again")[0].error_code == m.REQUEST_TIMED_OUT


def test_update_voter_replaces_endpoints_keeping_the_directory_id():
    cluster = started()
    leader = cluster.leader()
    target = next(i for i in (1, 2, 3) if i != leader)
    moved = replace(voter(target), endpoints=(Endpoint("CONTROLLER", "elsewhere", 19093),))
    epoch = cluster.cores[leader].state.epoch
    cluster.request(leader, m.UpdateVoterRequest(epoch, moved))
    cluster.run(100)
    assert answers(cluster)[0].error_code == m.NONE
    for i in (1, 2, 3):
        assert cluster.cores[i].voter_set.endpoint(target) == Endpoint("CONTROLLER", "elsewhere", 19093)
    cluster.request(leader, m.UpdateVoterRequest(epoch - 1, moved), "stale")
    assert answers(cluster, "stale")[0].error_code == m.FENCED_LEADER_EPOCH


def test_describe_quorum_reports_voters_and_observers_with_their_offsets():
    cluster = started(observers=1)
    cluster.append(["a"])
    cluster.run(100)
    leader = cluster.leader()
    d = cluster.cores[leader].describe()
    leo = cluster.logs[leader].end_offset().offset
    assert (d.leader_id, d.high_watermark) == (leader, leo)
    assert [v.replica_id for v in d.voters] == [1, 2, 3]
    assert all(v.log_end_offset == leo for v in d.voters)
    assert [o.replica_id for o in d.observers] == [100]
    assert cluster.cores[next(i for i in (1, 2, 3) if i != leader)].describe() is None


def test_a_standard_vote_is_for_a_replica_key_and_persisted_with_its_directory_id():
    cluster = Cluster(3, seed=1, kraft_version=1)
    core = cluster.cores[1]
    vote = m.VoteRequest(2, 1, 0, 0, False, 1, directory_id(2), directory_id(1))
    ready = core.step(cluster.now, 2, vote)
    assert ready.messages[0][1].vote_granted
    assert (ready.persist.voted_id, ready.persist.voted_directory_id) == (2, directory_id(2))
    other_disk = m.VoteRequest(2, 1, 0, 0, False, 1, directory_id(2, 1), directory_id(1))
    assert not core.step(cluster.now, 2, other_disk).messages[0][1].vote_granted


def test_a_new_leader_records_its_current_endpoints_in_the_voter_set():
    import random

    from raft.core import RaftCore
    from tests.raft.harness import CONFIG, bootstrap_log
    log = bootstrap_log({1})  # voter 1 at node-1:9093
    moved = (Endpoint("CONTROLLER", "moved", 19093),)
    core = RaftCore(1, VoterSet(()), log, random.Random(1), None, 0, CONFIG, directory_id=directory_id(1),
                    endpoints=moved)
    core.tick(0)
    assert isinstance(core.state, Leader)
    assert log.entries[-1].value == VoterSet.of([replace(voter(1), endpoints=moved)])
    assert core.voter_set.endpoint(1) == moved[0]
