"""Election rules (KIP-595, KIP-996 pre-vote), each test named after the rule it checks."""
import random

import pytest

from raft import messages as m
from raft.core import RaftCore, static_voters
from raft.log import LeaderChange, MemoryRaftLog
from raft.quorum_state import (
    Candidate,
    ElectionState,
    Follower,
    Leader,
    Prospective,
    QuorumState,
    Resigned,
    Unattached,
)
from tests.raft.harness import CONFIG, Cluster, make_log


def core(node_id=3, voters=(1, 2, 3), log=None, stored=None, seed=0, now=0):
    log = log or MemoryRaftLog()
    return RaftCore(node_id, frozenset(voters), log, random.Random(seed), stored, now, CONFIG)


def vote(replica_id, epoch, last_epoch, last_offset, pre_vote=False, voter_id=3):
    return m.VoteRequest(replica_id, epoch, last_epoch, last_offset, pre_vote, voter_id)


def answers(ready):
    return [msg for _, msg in ready.messages]


# ---- initialization ------------------------------------------------------------------------------
def test_single_voter_becomes_leader_at_once():
    log = MemoryRaftLog()
    c = RaftCore(1, frozenset({1}), log, random.Random(0), None, 0, CONFIG)
    ready = c.tick(0)
    assert isinstance(c.state, Leader) and c.state.epoch == 1
    assert ready.persist == ElectionState(1, 1, 1)
    assert log.entries[0].value == LeaderChange(1, (1,))
    assert ready.high_watermark == 1  # a quorum of one commits at once
    ready = c.append(1, ["x"])
    assert ready.high_watermark == 2


def test_single_voter_former_leader_leads_again_in_a_new_epoch():
    c = core(1, voters=(1,), log=make_log([4]), stored=ElectionState(4, 1, 1))
    assert isinstance(c.state, Leader) and c.state.epoch > 4


def test_former_leader_restarts_resigned():
    c = core(1, log=make_log([1, 2]), stored=ElectionState(2, 1, 1))
    ready = c.tick(0)
    assert isinstance(c.state, Resigned) and c.state.epoch == 2
    assert ready.persist is None  # Resigned is memory-only
    ends = {dst: msg for dst, msg in ready.messages if isinstance(msg, m.EndQuorumEpochRequest)}
    assert sorted(ends) == [2, 3] and all(e.leader_epoch == 2 for e in ends.values())
    # It never votes again in the epoch it led.
    ready = c.step(1, 2, vote(2, 2, 2, 5, pre_vote=True, voter_id=1))
    assert answers(ready)[0].vote_granted is False
    # After its election timeout it moves on to the next epoch, durably.
    ready = c.tick(c.state.election_deadline_ms)
    assert isinstance(c.state, Unattached) and c.state.epoch == 3 and ready.persist == ElectionState(3)


def test_stale_quorum_state_starts_unattached_at_log_epoch():
    c = core(3, log=make_log([1, 5]), stored=ElectionState(2, 1, 2))
    ready = c.tick(0)
    assert isinstance(c.state, Unattached) and c.state.epoch == 5 and c.state.voted_id == -1
    assert ready.persist == ElectionState(5)


def test_voted_for_self_restarts_candidate():
    c = core(3, log=make_log([1]), stored=ElectionState(2, -1, 3))
    ready = c.tick(0)
    assert isinstance(c.state, Candidate) and c.state.epoch == 2
    votes = [msg for _, msg in ready.messages if isinstance(msg, m.VoteRequest)]
    assert len(votes) == 2 and all(not v.pre_vote and v.replica_epoch == 2 for v in votes)


def test_leader_with_unknown_endpoint_starts_unattached():
    c = core(3, stored=ElectionState(2, 9, -1))  # 9 is not a voter: no endpoint known
    assert isinstance(c.state, Unattached) and c.state.leader_id == 9
    c = core(3, stored=ElectionState(2, 1, -1))
    assert isinstance(c.state, Follower) and c.state.leader_id == 1


def test_election_timeout_is_randomized_between_t_and_2t():
    q = QuorumState(1, static_voters({1, 2, 3}), CONFIG, random.Random(1))
    deadlines = {q.random_election_deadline(1000) for _ in range(200)}
    t = CONFIG.election_timeout_ms
    assert min(deadlines) >= 1000 + t and max(deadlines) < 1000 + 2 * t and len(deadlines) > 10


# ---- vote granting -------------------------------------------------------------------------------
def test_vote_granted_at_most_once_per_epoch():
    c = core(3, log=make_log([1]))
    ready = c.step(0, 1, vote(1, 2, 1, 1))
    assert answers(ready)[0].vote_granted and ready.persist == ElectionState(2, -1, 1)
    assert not answers(c.step(1, 2, vote(2, 2, 1, 1)))[0].vote_granted
    assert answers(c.step(2, 1, vote(1, 2, 1, 1)))[0].vote_granted  # the same candidate again: yes
    # The vote survives a restart: the quorum-state write preceded the answer.
    restarted = core(3, log=make_log([1]), stored=ElectionState(2, -1, 1))
    assert not answers(restarted.step(3, 2, vote(2, 2, 1, 1)))[0].vote_granted


def test_candidate_with_stale_log_loses():
    c = core(3, log=make_log([1, 1, 2, 2, 2]))  # last epoch 2, log end offset 5
    assert not answers(c.step(0, 1, vote(1, 3, 1, 10)))[0].vote_granted  # older last epoch
    assert not answers(c.step(0, 1, vote(1, 3, 2, 4)))[0].vote_granted  # same epoch, shorter
    assert answers(c.step(0, 1, vote(1, 3, 2, 5)))[0].vote_granted


def test_candidate_with_stale_log_loses_the_election_in_a_cluster():
    logs = {1: make_log([1]), 2: make_log([1, 1, 1]), 3: make_log([1, 1, 1])}
    cluster = Cluster(3, logs=logs, stored={i: ElectionState(1) for i in (1, 2, 3)}, seed=4)
    for _ in range(20):
        cluster.run(100)
        assert 1 not in cluster.leaders()
    assert cluster.leader() in (2, 3)


def test_vote_request_with_lower_epoch_is_rejected():
    c = core(3, stored=ElectionState(5))
    resp = answers(c.step(0, 1, vote(1, 4, 1, 1)))[0]
    assert not resp.vote_granted and resp.error_code == m.FENCED_LEADER_EPOCH and resp.leader_epoch == 5


def test_standard_vote_with_last_epoch_not_below_its_epoch_is_invalid():
    c = core(3)
    assert answers(c.step(0, 1, vote(1, 2, 2, 1)))[0].error_code == m.INVALID_REQUEST
    assert answers(c.step(0, 1, vote(1, 2, 2, 1, pre_vote=True)))[0].error_code == m.NONE


def test_standard_vote_with_higher_epoch_moves_voter_to_that_epoch():
    c = core(3, stored=ElectionState(1, 1, -1))
    assert isinstance(c.state, Follower)
    c.step(0, 2, vote(2, 2, 0, 0))
    assert isinstance(c.state, Unattached) and c.state.epoch == 2 and c.state.voted_id == 2


# ---- pre-vote (KIP-996) ----------------------------------------------------------------------------
def test_followers_grant_prevote_only_before_first_successful_fetch():
    c = core(3, stored=ElectionState(1, 1, -1))
    assert answers(c.step(0, 2, vote(2, 1, 0, 0, pre_vote=True)))[0].vote_granted
    c.step(1, 1, m.FetchResponse(m.NONE, 1, 1, 0, None, (), 0, 0))
    assert c.state.has_fetched
    assert not answers(c.step(2, 2, vote(2, 1, 0, 0, pre_vote=True)))[0].vote_granted


def test_prevote_does_not_persist_or_change_epoch():
    c = core(3, stored=ElectionState(1))
    ready = c.step(0, 2, vote(2, 1, 0, 0, pre_vote=True))
    assert answers(ready)[0].vote_granted and ready.persist is None and c.state.epoch == 1


def test_prevote_majority_makes_candidate_in_next_epoch():
    c = core(3, stored=ElectionState(4))
    c.tick(c.next_deadline_ms())
    assert isinstance(c.state, Prospective) and c.state.epoch == 4
    ready = c.step(200, 1, m.VoteResponse(m.NONE, -1, 4, True, True))
    assert isinstance(c.state, Candidate) and c.state.epoch == 5
    assert ready.persist == ElectionState(5, -1, 3)
    assert all(not v.pre_vote for v in answers(ready))


def test_prevote_does_not_bump_epoch_of_healthy_quorum():
    cluster = Cluster(3, seed=1)
    cluster.run(300)
    leader = cluster.leader()
    epoch = cluster.epochs()[leader]
    follower = next(i for i in (1, 2, 3) if i != leader)
    # The follower's fetch timer fires (say it was paused): it canvasses with a pre-vote.
    cluster.process(follower, cluster.cores[follower].tick(cluster.now + CONFIG.fetch_timeout_ms + 1))
    assert isinstance(cluster.cores[follower].state, Prospective)
    cluster.deliver()
    cluster.run(300)
    assert cluster.leader() == leader
    assert set(cluster.epochs().values()) == {epoch}
    assert all(s.epoch == epoch for i in (1, 2, 3) for s in cluster.persisted[i][-1:])


def test_partitioned_voter_rejoining_does_not_disrupt_leader():
    cluster = Cluster(3, seed=2)
    cluster.run(300)
    leader = cluster.leader()
    epoch = cluster.epochs()[leader]
    loner = max(i for i in (1, 2, 3) if i != leader)
    cluster.isolated = {loner}
    cluster.run(2000)  # many election timeouts: the loner spins in Prospective at the same epoch
    assert cluster.epochs()[loner] == epoch
    assert cluster.leader() == leader
    cluster.append(["during-partition"])
    cluster.isolated = set()
    cluster.run(300)
    assert cluster.leader() == leader and set(cluster.epochs().values()) == {epoch}
    assert isinstance(cluster.cores[loner].state, Follower)
    assert cluster.logs[loner].high_watermark == cluster.logs[leader].high_watermark == 2


def test_candidate_election_backoff_grows_exponentially():
    c = core(3, seed=5)
    draws = []
    for retries in (1, 2, 3, 4, 5, 6):
        draws.append(max(c._binary_exponential_backoff_ms(retries) for _ in range(200)))
    base = CONFIG.election_backoff_base_ms
    # retries r draws base * [0, 2^r): the ceiling doubles with every lost election
    assert draws[:4] == [base * 1, base * 3, base * 7, min(base * 15, CONFIG.election_backoff_max_ms)]
    assert max(draws) == CONFIG.election_backoff_max_ms


def test_candidate_that_loses_backs_off_then_prevotes_again():
    c = core(3, stored=ElectionState(2, -1, 3))
    assert isinstance(c.state, Candidate)
    c.step(1, 1, m.VoteResponse(m.NONE, -1, 2, False, False))
    c.step(1, 2, m.VoteResponse(m.NONE, -1, 2, False, False))
    assert c.state.backoff_until_ms is not None
    ready = c.tick(c.next_deadline_ms())
    assert isinstance(c.state, Prospective) and c.state.epoch == 2
    assert all(v.pre_vote for v in answers(ready))


@pytest.mark.parametrize("voters", [3, 5])
def test_cluster_elects_exactly_one_leader(voters):
    for seed in range(10):
        cluster = Cluster(voters, observers=1, seed=seed)
        cluster.run(500)
        leader = cluster.leader()
        assert all(isinstance(cluster.cores[i].state, Follower) for i in cluster.ids if i != leader)


def test_prevote_unsupported_version_falls_back_to_candidacy():
    c = core(3, stored=ElectionState(4))
    c.tick(c.next_deadline_ms())
    assert isinstance(c.state, Prospective)
    ready = c.step(200, 1, m.VoteResponse(m.UNSUPPORTED_VERSION, -1, -1, False, True))
    assert isinstance(c.state, Candidate) and c.state.epoch == 5 and ready.persist == ElectionState(5, -1, 3)


def leader_killed(seed: int) -> tuple[Cluster, int, list[int]]:
    """Three voters, the leader stopped: (cluster, its epoch, the two followers by id)."""
    cluster = Cluster(3, seed=seed)
    cluster.run(300)
    old = cluster.leader()
    epoch = cluster.cores[old].state.epoch
    cluster.stop(old)
    return cluster, epoch, sorted(i for i in (1, 2, 3) if i != old)


def test_two_voters_canvassing_at_once_with_equal_logs_do_not_split_the_vote():
    for seed in range(20):
        cluster, epoch, followers = leader_killed(seed)
        for i in followers:  # their fetch timers expire in the same millisecond
            cluster.cores[i].state.fetch_deadline_ms = cluster.now + 1
        sent = len(cluster.sent)
        cluster.run(20)
        new = cluster.leader()
        assert new == min(followers) and cluster.cores[new].state.epoch == epoch + 1
        candidacies = {src for src, _, msg in cluster.sent[sent:]
                       if isinstance(msg, m.VoteRequest) and not msg.pre_vote}
        assert candidacies == {new}


def test_a_prospective_refused_by_a_voter_grants_that_voter_its_pre_vote():
    # The lower id canvasses first but the other, still fetching, refuses it; when the other
    # canvasses in turn it must get the pre-vote, or the two would take turns refusing.
    for seed in range(20):
        cluster, epoch, (low, high) = leader_killed(seed)
        cluster.cores[low].state.fetch_deadline_ms = cluster.now + 1
        cluster.cores[high].state.fetch_deadline_ms = cluster.now + 30
        cluster.run(60)
        assert cluster.leader() == high and cluster.cores[high].state.epoch == epoch + 1
