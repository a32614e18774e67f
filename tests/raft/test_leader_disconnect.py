"""A follower whose leader's connection is closed starts its pre-vote at once (handle_leader_disconnect).

A crashed process closes its sockets: the follower's in-flight Fetch ends with end of stream or a
reset, so it fetches again at once, and connecting again is refused. Then it canvasses without
waiting out controller.quorum.fetch.timeout.ms. Each test is named after a rule that shortcut
must keep: it never changes the epoch by itself, it cannot depose a live leader, a partition
(which closes nothing) still waits for the timeout, and two followers that see the close
together elect one new leader within a few round trips.
"""
import random

import pytest

from raft import messages as m
from raft.core import RaftCore
from raft.log import MemoryRaftLog
from raft.quorum_state import Candidate, ElectionState, Follower, Leader, Prospective, Unattached
from tests.raft.harness import CONFIG, Cluster, make_log


def follower(leader=1, epoch=2, node_id=3) -> RaftCore:
    """A voter following ``leader`` in ``epoch`` that has fetched from it once (log: one entry)."""
    c = RaftCore(node_id, frozenset({1, 2, 3}), make_log([1]), random.Random(0),
                 ElectionState(epoch, leader, -1), 0, CONFIG)
    c.tick(0)
    c.step(1, leader, m.FetchResponse(m.NONE, leader, epoch, 1, None, (), 1, 1))
    assert isinstance(c.state, Follower) and c.state.has_fetched
    return c


def requests(ready, kind=m.Message):
    return [(dst, msg) for dst, msg in ready.messages if isinstance(msg, kind)]


def sent_since(cluster: Cluster, mark: int, kind, src=None):
    return [(s, d, msg) for s, d, msg in cluster.sent[mark:]
            if isinstance(msg, kind) and (src is None or s == src)]


def elected(voters: int, seed: int) -> tuple[Cluster, int, int]:
    cluster = Cluster(voters, seed=seed)
    cluster.run(300)
    leader = cluster.leader()
    return cluster, leader, cluster.cores[leader].state.epoch


def committed_own_epoch(cluster: Cluster, node_id: int) -> bool:
    s = cluster.cores[node_id].state
    return isinstance(s, Leader) and cluster.logs[node_id].high_watermark > s.epoch_start_offset


# ---- the core, one input at a time ----------------------------------------------------------------
def test_a_closed_connection_is_fetched_on_again_at_once():
    c = follower()
    ready = c.handle_leader_disconnect(10, 1)
    assert isinstance(c.state, Follower) and ready.persist is None and not requests(ready)
    assert c.next_deadline_ms() == 10  # not after retry.backoff.ms, not after the fetch timeout
    fetches = requests(c.tick(10), m.FetchRequest)
    assert [dst for dst, _ in fetches] == [1]


def test_closes_alone_never_start_a_pre_vote():
    # A live leader may drop connections (a reset on the way, a restarted listener): each time
    # the follower connects again, and a connection accepted is no sign of a dead leader.
    c = follower()
    for t in range(10, 100):
        ready = c.handle_leader_disconnect(t, 1)
        ready.messages += c.tick(t).messages
        assert isinstance(c.state, Follower) and not requests(ready, m.VoteRequest)


def test_a_closed_connection_never_bumps_the_epoch_by_itself():
    c = follower()
    c.handle_leader_disconnect(10, 1)
    c.tick(10)
    ready = c.handle_leader_disconnect(11, 1, refused=True)  # nothing listens there: it is gone
    assert isinstance(c.state, Prospective) and c.state.epoch == 2
    assert ready.persist is None  # Prospective is memory-only: no vote, no epoch
    votes = requests(ready, m.VoteRequest)
    assert votes == requests(ready) and sorted(dst for dst, _ in votes) == [1, 2]
    assert all(v.pre_vote and v.replica_epoch == 2 for _, v in votes)
    for t in range(12, 200):  # however many more closes come, only a pre-vote majority moves on
        ready = c.handle_leader_disconnect(t, 1, refused=t % 2 == 0)
        ready.messages += c.tick(t).messages
        assert ready.persist is None and c.state.epoch == 2
        assert all(v.pre_vote for _, v in requests(ready, m.VoteRequest))


def test_a_close_of_any_connection_but_our_leaders_in_our_epoch_is_an_ordinary_failed_fetch():
    c = follower(leader=1)
    for t in (10, 11, 12):
        ready = c.handle_leader_disconnect(t, 2, refused=True)
        ready.messages += c.tick(t).messages
        assert isinstance(c.state, Follower) and c.state.leader_id == 1 and not requests(ready)
    unattached = RaftCore(3, frozenset({1, 2, 3}), MemoryRaftLog(), random.Random(0), ElectionState(2),
                          0, CONFIG)
    candidate = RaftCore(3, frozenset({1, 2, 3}), MemoryRaftLog(), random.Random(0),
                         ElectionState(2, -1, 3), 0, CONFIG)
    for c, role in ((unattached, Unattached), (candidate, Candidate)):
        c.tick(0)  # what the constructor queued (a restarted candidate's vote requests)
        for t, refused in ((10, False), (11, True)):
            ready = c.handle_leader_disconnect(t, 1, refused)
            assert isinstance(c.state, role) and c.state.epoch == 2
            assert ready.persist is None and not requests(ready)


# ---- a live leader --------------------------------------------------------------------------------
def test_a_follower_whose_connection_was_reset_reconnects_and_keeps_following():
    cluster, leader, epoch = elected(3, seed=1)
    a = next(i for i in (1, 2, 3) if i != leader)
    mark = len(cluster.sent)
    cluster.disconnect(a, leader)
    cluster.run(50)
    s = cluster.cores[a].state
    assert isinstance(s, Follower) and s.leader_id == leader and s.epoch == epoch and s.has_fetched
    assert not sent_since(cluster, mark, m.VoteRequest)
    assert cluster.persisted[a][-1].epoch == epoch


def test_a_voter_still_fetching_from_a_live_leader_keeps_refusing_pre_votes():
    for seed in range(10):
        cluster, leader, epoch = elected(3, seed)
        a, b = sorted(i for i in (1, 2, 3) if i != leader)
        mark = len(cluster.sent)
        # Say a's connection is refused (a firewall's reset): a is sure the leader is gone.
        cluster.disconnect(a, leader, refused=True)
        assert isinstance(cluster.cores[a].state, Prospective)
        cluster.run(300)
        answers = sent_since(cluster, mark, m.VoteResponse)
        assert {src for src, _, _ in answers} == {leader, b}
        assert not any(r.vote_granted for _, _, r in answers)
        assert cluster.leader() == leader and set(cluster.epochs().values()) == {epoch}
        assert isinstance(cluster.cores[a].state, Follower) and cluster.cores[a].state.has_fetched
        assert all(s.epoch == epoch for i in (1, 2, 3) for s in cluster.persisted[i])


def test_a_partition_without_closed_connections_still_waits_for_the_fetch_timeout():
    for seed in range(10):
        cluster, leader, epoch = elected(3, seed)
        followers = [i for i in (1, 2, 3) if i != leader]
        cut = cluster.now
        deadlines = {i: cluster.cores[i].state.fetch_deadline_ms for i in followers}
        assert all(d > cut + CONFIG.fetch_timeout_ms // 2 for d in deadlines.values())
        cluster.isolated = {leader}
        cluster.run(5)
        cluster.kill(leader)  # behind the partition: its closes never reach the followers
        canvassed: dict[int, int] = {}
        for _ in range(300):
            cluster.run(1)
            for i in followers:
                s = cluster.cores[i].state
                if not (isinstance(s, Follower) and s.leader_id == leader):
                    canvassed.setdefault(i, cluster.now)
        assert all(canvassed[i] >= deadlines[i] for i in followers), (canvassed, deadlines)
        new = cluster.leader()
        assert new in followers and cluster.cores[new].state.epoch == epoch + 1


# ---- a dead leader --------------------------------------------------------------------------------
@pytest.mark.parametrize("voters", [3, 5])
def test_followers_seeing_the_close_elect_a_new_leader_within_a_few_round_trips(voters):
    for seed in range(20):
        cluster, old, epoch = elected(voters, seed)
        mark = len(cluster.sent)
        cluster.kill(old)
        cluster.run(5)  # each millisecond is a round of delivery: a handful of round trips
        new = cluster.leader()
        # Elected in the very next epoch: no split vote, so no election backoff either.
        assert new != old and cluster.cores[new].state.epoch == epoch + 1
        assert committed_own_epoch(cluster, new)
        if voters == 3:  # equal logs: the lower id goes first (the tie-break of vote.py), alone
            votes = sent_since(cluster, mark, m.VoteRequest)
            candidacies = {src for src, _, msg in votes if not msg.pre_vote}
            assert candidacies == {new} == {min(i for i in (1, 2, 3) if i != old)}


def test_a_prospective_refused_by_a_voter_asks_it_again_when_that_voter_canvasses():
    for seed in range(10):
        cluster, old, epoch = elected(3, seed)
        low, high = sorted(i for i in (1, 2, 3) if i != old)
        # low holds an entry high lacks, so high can never win and low needs high's pre-vote.
        cluster.drop = lambda src, dst, msg, high=high: dst == high and isinstance(msg, m.FetchResponse)
        cluster.append(["x"])
        cluster.run(5)
        cluster.drop = None
        assert cluster.logs[low].end_offset().offset > cluster.logs[high].end_offset().offset
        cluster.stop(old)
        cluster.closed.add(old)
        cluster.disconnect(low, old)  # only low hears of it at first
        cluster.run(1)
        assert isinstance(cluster.cores[low].state, Prospective)
        assert high in cluster.cores[low].state.election.rejected  # high still followed
        cluster.disconnect(high, old)
        cluster.run(5)
        assert cluster.leader() == low and cluster.cores[low].state.epoch == epoch + 1


def test_an_observer_whose_leader_died_looks_for_the_new_one_at_once():
    for seed in range(10):
        cluster = Cluster(3, observers=1, seed=seed)
        cluster.run(300)
        old = cluster.leader()
        cluster.kill(old)
        cluster.run(CONFIG.fetch_timeout_ms // 2)
        new = cluster.leader()
        s = cluster.cores[100].state
        assert isinstance(s, Follower) and (s.leader_id, s.epoch) == (new, cluster.cores[new].state.epoch)
