"""Pull-based replication, the high watermark, BeginQuorumEpoch/EndQuorumEpoch and check-quorum."""
import random

import pytest

from raft import messages as m
from raft.core import RaftCore, RaftInvariantError, Truncate
from raft.log import Entry, LeaderChange, MemoryRaftLog
from raft.quorum_state import ElectionState, Follower, Leader, Prospective, Resigned
from tests.raft.harness import CONFIG, Cluster, make_log


def fetch(replica_id, epoch, offset, last_epoch, hw=0, max_wait=0):
    return m.FetchRequest(replica_id, epoch, offset, last_epoch, hw, max_wait)


def make_leader(log, epoch=2, node_id=1, voters=(1, 2, 3)):
    """Node 1 restarted as Candidate of ``epoch`` and granted votes by a majority."""
    stored = ElectionState(epoch, -1, node_id)
    c = RaftCore(node_id, frozenset(voters), log, random.Random(0), stored, 0, CONFIG)
    for voter in sorted(voters)[1:len(voters) // 2 + 1]:
        c.step(1, voter, m.VoteResponse(m.NONE, -1, epoch, True, False))
    assert isinstance(c.state, Leader)
    return c


def responses(ready, kind=m.FetchResponse):
    return [msg for _, msg in ready.messages if isinstance(msg, kind)]


def test_new_leader_appends_leader_change_at_epoch_start_offset():
    log = make_log([1, 1])
    c = make_leader(log)
    assert c.state.epoch_start_offset == 2
    assert log.entries[2] == Entry(2, 2, LeaderChange(1, (1, 2, 3)))


def test_high_watermark_does_not_advance_on_prior_epoch_records_until_new_leader_commits_its_own():
    log = make_log([1, 1, 1, 1, 1])  # five entries of epoch 1, none known committed
    c = make_leader(log)  # epoch 2 starts at offset 5 (its LeaderChange)
    # Follower 2 holds all of epoch 1: a majority has offsets 0..4, yet they are not committed.
    ready = c.step(2, 2, fetch(2, 2, 5, 1))
    assert log.high_watermark == 0 and ready.high_watermark is None
    assert responses(ready)[0].high_watermark == 0
    # Once the LeaderChange of epoch 2 is on a majority, everything before it commits with it.
    ready = c.step(3, 2, fetch(2, 2, 6, 2))
    assert log.high_watermark == 6 and ready.high_watermark == 6


def test_high_watermark_is_majority_end_offset_over_voters():
    log = make_log([1])
    c = make_leader(log, voters=(1, 2, 3, 4, 5))
    c.append(2, ["a", "b", "c"])  # log end offset 5
    c.step(3, 2, fetch(2, 2, 5, 2))
    assert log.high_watermark == 0  # two of five
    c.step(3, 100, fetch(100, 2, 5, 2))  # observers do not count
    assert log.high_watermark == 0
    c.step(4, 3, fetch(3, 2, 3, 2))
    assert log.high_watermark == 3  # offsets 5, 5, 3: the third highest


def test_high_watermark_never_decreases_on_the_leader():
    log = make_log([1])
    c = make_leader(log)
    c.append(2, ["a", "b"])
    c.step(3, 2, fetch(2, 2, 4, 2))
    assert log.high_watermark == 4
    c.step(4, 2, fetch(2, 2, 2, 2))  # the follower's fetch offset went back (it truncated)
    c.step(4, 3, fetch(3, 2, 2, 2))
    assert log.high_watermark == 4


def test_leader_answers_diverging_epoch():
    log = make_log([1, 1, 3, 3])
    c = make_leader(log, epoch=4)
    # The follower wrote offsets 2..5 in epoch 2, an epoch the leader never saw.
    resp = responses(c.step(2, 2, fetch(2, 4, 6, 2)))[0]
    assert resp.diverging_epoch == m.EpochEndOffset(1, 2) and resp.records == ()


def test_follower_truncates_to_diverging_epoch_then_refetches():
    log = make_log([1, 1, 2, 2, 2])
    c = RaftCore(2, frozenset({1, 2, 3}), log, random.Random(0), ElectionState(3, 1, -1), 0, CONFIG)
    ready = c.step(1, 1, m.FetchResponse(m.NONE, 1, 3, 0, m.EpochEndOffset(1, 2), (), 5, 2))
    assert Truncate(2) in ready.log_ops and log.end_offset().offset == 2
    assert responses(ready, m.FetchRequest)[0].fetch_offset == 2


def test_follower_never_truncates_below_high_watermark():
    log = make_log([1, 1, 2, 2, 2])
    c = RaftCore(2, frozenset({1, 2, 3}), log, random.Random(0), ElectionState(3, 1, -1), 0, CONFIG)
    c.step(1, 1, m.FetchResponse(m.NONE, 1, 3, 4, None, (), 5, 2))
    assert log.high_watermark == 4
    with pytest.raises(RaftInvariantError, match="below its high watermark"):
        c.step(2, 1, m.FetchResponse(m.NONE, 1, 3, 4, m.EpochEndOffset(1, 2), (), 5, 2))
    assert log.end_offset().offset == 5 and log.high_watermark == 4


def test_diverging_epoch_answer_does_not_move_follower_high_watermark():
    # Found by the simulation (seed 1859): after truncating to a diverging epoch the follower's
    # log may still differ below the truncation point, so min(LEO, leader HW) would commit
    # entries the leader does not have.
    log = make_log([1, 2, 2, 2, 4, 4])  # the leader of epoch 5 has [1, 3, 3, 3, 5, ...]
    c = RaftCore(2, frozenset({1, 2, 3}), log, random.Random(0), ElectionState(5, 1, -1), 0, CONFIG)
    ready = c.step(1, 1, m.FetchResponse(m.NONE, 1, 5, 5, m.EpochEndOffset(3, 4), (), 6, 4))
    assert Truncate(4) in ready.log_ops and log.high_watermark == 0 and ready.high_watermark is None
    ready = c.step(2, 1, m.FetchResponse(m.NONE, 1, 5, 5, m.EpochEndOffset(1, 1), (), 4, 2))
    assert Truncate(1) in ready.log_ops and log.high_watermark == 0


def test_follower_ignores_stale_answer_for_an_older_log():
    log = make_log([1, 2, 2])
    c = RaftCore(2, frozenset({1, 2, 3}), log, random.Random(0), ElectionState(3, 1, -1), 0, CONFIG)
    c.step(1, 1, m.FetchResponse(m.NONE, 1, 3, 0, None, (), 3, 1))  # its log ended in epoch 1 then
    assert not c.state.has_fetched and log.end_offset().offset == 3


def test_follower_high_watermark_is_min_of_log_end_offset_and_leader_high_watermark():
    log = MemoryRaftLog()
    c = RaftCore(2, frozenset({1, 2, 3}), log, random.Random(0), ElectionState(1, 1, -1), 0, CONFIG)
    records = (Entry(0, 1, "a"), Entry(1, 1, "b"))
    ready = c.step(1, 1, m.FetchResponse(m.NONE, 1, 1, 7, None, records, 0, 0))
    assert log.high_watermark == 2 and ready.high_watermark == 2
    c.step(2, 1, m.FetchResponse(m.NONE, 1, 1, 1, None, (Entry(2, 1, "c"),), 2, 1))
    assert log.high_watermark == 2  # a lower leader HW never moves it back


def test_follower_ignores_duplicate_fetch_response():
    log = MemoryRaftLog()
    c = RaftCore(2, frozenset({1, 2, 3}), log, random.Random(0), ElectionState(1, 1, -1), 0, CONFIG)
    resp = m.FetchResponse(m.NONE, 1, 1, 0, None, (Entry(0, 1, "a"),), 0, 0)
    c.step(1, 1, resp)
    c.step(2, 1, resp)
    assert len(log.entries) == 1


def test_leader_parks_fetch_until_new_entries():
    log = make_log([1])
    c = make_leader(log)
    c.step(2, 2, fetch(2, 2, 2, 2, hw=0, max_wait=20))
    assert log.high_watermark == 2
    ready = c.step(3, 2, fetch(2, 2, 2, 2, hw=2, max_wait=20))
    assert responses(ready) == []  # long poll: nothing new for it
    ready = c.append(4, ["x"])
    assert [r.records for r in responses(ready)] == [(Entry(2, 2, "x"),)]
    c.step(5, 3, fetch(3, 2, 3, 2, hw=3, max_wait=20))
    ready = c.tick(5 + 20)
    assert [r.records for r in responses(ready)] == [()]  # expired: an empty answer


def test_fetch_with_stale_epoch_is_fenced():
    c = make_leader(make_log([1]))
    resp = responses(c.step(2, 2, fetch(2, 1, 1, 1)))[0]
    assert resp.error_code == m.FENCED_LEADER_EPOCH and (resp.leader_id, resp.leader_epoch) == (1, 2)


def test_begin_quorum_epoch_resent_to_voters_that_have_not_fetched():
    c = make_leader(make_log([1]))
    c.step(2, 2, fetch(2, 2, 2, 2))
    ready = c.tick(c.state.begin_quorum_deadline_ms)
    assert [dst for dst, msg in ready.messages if isinstance(msg, m.BeginQuorumEpochRequest)] == [3]


def test_begin_quorum_epoch_makes_unattached_voter_follow():
    c = RaftCore(3, frozenset({1, 2, 3}), MemoryRaftLog(), random.Random(0), ElectionState(1), 0, CONFIG)
    ready = c.step(1, 2, m.BeginQuorumEpochRequest(2, 3, 3))
    assert isinstance(c.state, Follower) and (c.state.leader_id, c.state.epoch) == (2, 3)
    assert ready.persist == ElectionState(3, 2, -1)
    assert responses(c.tick(1), m.FetchRequest)[0].current_leader_epoch == 3


def test_check_quorum_leader_resigns_without_majority_fetches():
    cluster = Cluster(3, seed=3)
    cluster.run(300)
    leader = cluster.leader()
    cluster.isolated = {leader}
    timeout = int(CONFIG.fetch_timeout_ms * 1.5)
    cluster.run(timeout - 30)
    assert isinstance(cluster.cores[leader].state, Leader)
    cluster.run(30)
    assert isinstance(cluster.cores[leader].state, Resigned)
    ends = [(dst, msg) for src, dst, msg in cluster.sent
            if src == leader and isinstance(msg, m.EndQuorumEpochRequest)]
    assert sorted(dst for dst, _ in ends) == sorted(i for i in (1, 2, 3) if i != leader)


def test_leader_with_one_fetching_follower_keeps_quorum_in_three():
    cluster = Cluster(3, seed=3)
    cluster.run(300)
    leader = cluster.leader()
    cluster.stop(max(i for i in (1, 2, 3) if i != leader))
    cluster.run(1000)
    assert cluster.leader() == leader


def test_end_quorum_epoch_preferred_successor_becomes_prospective_first():
    cluster = Cluster(3, seed=6)
    cluster.run(300)
    leader = cluster.leader()
    cluster.append(["a"])
    cluster.run(50)
    cluster.process(leader, cluster.cores[leader].resign(cluster.now))
    successors = cluster.cores[leader].state.preferred_successors
    cluster.deliver()
    first = cluster.cores[successors[0]]
    assert first.state.fetch_deadline_ms == cluster.now  # position 0: no backoff at all
    cluster.run(1)
    assert isinstance(first.state, Prospective | Follower) and first.state.epoch >= 1
    cluster.run(1000)
    assert cluster.leader() != leader


def test_former_leader_crash_and_restart_keeps_committed_entries():
    cluster = Cluster(3, seed=8)
    cluster.run(300)
    leader = cluster.leader()
    cluster.append(["a", "b"])
    cluster.run(50)
    committed = [e.value for e in cluster.logs[leader].entries[:cluster.logs[leader].high_watermark]]
    cluster.stop(leader)
    cluster.run(500)
    new = cluster.leader()
    assert new != leader
    cluster.start(leader)
    assert isinstance(cluster.cores[leader].state, Resigned)
    cluster.run(500)
    assert cluster.leader() == new
    for i in (1, 2, 3):
        assert [e.value for e in cluster.logs[i].entries[:len(committed)]] == committed


def test_observer_replicates_but_never_campaigns():
    cluster = Cluster(3, observers=1, seed=9)
    cluster.run(300)
    cluster.append(["a"])
    cluster.run(100)
    assert isinstance(cluster.cores[100].state, Follower)
    assert cluster.logs[100].high_watermark == cluster.logs[cluster.leader()].high_watermark == 2
    assert not any(src == 100 and isinstance(msg, m.VoteRequest) for src, _, msg in cluster.sent)
    # A Vote meant for another replica is refused; KIP-853 lets a replica answer a Vote whether or
    # not it thinks it is a voter (its voter set may be stale): candidates count only their voters.
    ready = cluster.cores[100].step(cluster.now, 1, m.VoteRequest(1, 9, 8, 9, False, 2))
    assert ready.messages[0][1].error_code == m.INCONSISTENT_VOTER_SET


def test_follower_keeps_one_fetch_in_flight():
    stored = ElectionState(1, 1, -1)
    c = RaftCore(2, frozenset({1, 2, 3}), MemoryRaftLog(), random.Random(0), stored, 0, CONFIG)
    first = responses(c.tick(0), m.FetchRequest)
    assert len(first) == 1
    assert responses(c.tick(CONFIG.request_timeout_ms - 1), m.FetchRequest) == []
    assert len(responses(c.tick(CONFIG.request_timeout_ms), m.FetchRequest)) == 1  # timed out: resend


def test_resigned_leader_resends_end_quorum_epoch_until_acknowledged():
    c = RaftCore(1, frozenset({1, 2, 3}), make_log([2]), random.Random(0), ElectionState(2, 1, 1), 0, CONFIG)
    c.tick(0)
    c.step(1, 2, m.EndQuorumEpochResponse(m.NONE, 1, 2))
    ready = c.tick(CONFIG.request_timeout_ms)  # before its election timeout (at least 50 ms)
    assert isinstance(c.state, Resigned)
    assert [dst for dst, msg in ready.messages if isinstance(msg, m.EndQuorumEpochRequest)] == [3]


def test_prior_epoch_entry_on_a_majority_is_not_committed_until_the_leader_commits_its_own():
    """Raft's Figure 8 played out on a five-voter quorum.

    Node 1 led epoch 2 and wrote x at offset 1 only locally; node 5 led epoch 3 and wrote y at
    offset 1 only locally. Node 1 wins epoch 4 and replicates x to nodes 2 and 3 (a majority) but
    not its LeaderChange; it must not count x as committed, because node 5 can still win epoch 5
    with nodes 2 and 4 and replace x with y.
    """
    import dataclasses

    config = dataclasses.replace(CONFIG, fetch_max_entries=1)
    logs = {1: make_log([1, 2]), 2: make_log([1]), 3: make_log([1]), 4: make_log([1]), 5: make_log([1, 3])}
    stored = {1: ElectionState(4, -1, 1), 2: ElectionState(3), 3: ElectionState(3), 4: ElectionState(3),
              5: ElectionState(3, 5, 5)}
    cluster = Cluster(5, logs=logs, stored=stored, config=config, seed=1)
    cluster.isolated = {4, 5}

    def leader_change_of_epoch_4(src, dst, msg):
        return isinstance(msg, m.FetchResponse) and any(e.epoch == 4 for e in msg.records)

    cluster.drop = leader_change_of_epoch_4
    cluster.run(30)
    assert cluster.leaders() == [1] and cluster.cores[1].state.epoch == 4
    assert [cluster.logs[i].entries[1].value for i in (1, 2, 3)] == ["e2o1"] * 3  # x on a majority
    assert cluster.logs[1].high_watermark == 0  # ... and still not committed
    cluster.stop(1)
    cluster.stop(3)
    cluster.isolated = set()
    cluster.drop = None
    cluster.run(2000)
    assert cluster.leader() == 5
    assert cluster.logs[2].entries[1].value == "e3o1"  # x is gone: it never was committed


def test_a_failed_fetch_is_retried_after_the_retry_backoff_not_the_request_timeout():
    cluster = Cluster(3, seed=4)
    cluster.run(300)
    leader = cluster.leader()
    follower = next(i for i in (1, 2, 3) if i != leader)
    core = cluster.cores[follower]
    state = core.state
    state.fetch_in_flight_until_ms = cluster.now + CONFIG.request_timeout_ms
    request = m.FetchRequest(follower, state.epoch, 0, 0, 0, 0)
    core.request_failed(cluster.now, leader, request)
    assert state.fetch_in_flight_until_ms == cluster.now + CONFIG.retry_backoff_ms
    assert core.next_deadline_ms() <= cluster.now + CONFIG.retry_backoff_ms
