"""KIP-595's raft-metrics and KIP-853's voter counts, read from real cores of a simulated quorum."""
from raft.metrics import PREFIX, RaftTimings, current_state, raft_values
from tests.raft.harness import Cluster


def test_raft_metrics_name_the_leader_epoch_and_high_watermark_on_every_voter():
    c = Cluster(voters=3, observers=1, kraft_version=1)
    c.run(500)
    leader = c.leader()
    c.append(["a", "b", "c"])
    c.run(200)
    for node in (1, 2, 3):
        core = c.cores[node]
        values = raft_values(core, core.log.end_offset().offset)
        assert values[PREFIX + "current_leader"] == leader
        assert values[PREFIX + "current_epoch"] == core.quorum.epoch
        assert values[PREFIX + "high_watermark"] == c.cores[leader].log.high_watermark > 0
        assert values[PREFIX + "number_of_voters"] == 3
        assert current_state(core) == ("leader" if node == leader else "follower")
    assert current_state(c.cores[100]) == "observer"


def test_number_of_observers_counts_the_observers_fetching_from_the_leader():
    c = Cluster(voters=3, observers=2, kraft_version=1)
    c.run(500)
    leader = c.cores[c.leader()]
    assert raft_values(leader, 0)[PREFIX + "number_of_observers"] == 2
    follower = next(c.cores[i] for i in (1, 2, 3) if i != c.leader())
    assert raft_values(follower, 0)[PREFIX + "number_of_observers"] == 0


def test_commit_latency_is_the_mean_and_max_of_the_latencies_counted():
    t = RaftTimings()
    for ms in (2, 4, 9):
        t.commit(ms)
    c = Cluster(voters=1)
    c.run(200)
    values = raft_values(c.cores[1], 0, t)
    assert values[PREFIX + "commit_latency_avg"] == 5
    assert values[PREFIX + "commit_latency_max"] == 9
