"""raft-metrics move as the driver runs: the leader counts the records it appends and times
each batch from its append to its commit; a voter times its election until a leader is known
(KafkaRaftMetrics' append-records, commit-latency, election-latency)."""
from __future__ import annotations

from raft.metrics import PREFIX, raft_values
from tests.raft.test_driver import elected, run, start_voters


def test_the_leader_counts_appended_records_and_times_their_commit_and_the_election():
    async def scenario():
        nodes, _ = await start_voters()
        try:
            leader = await elected(nodes)
            timings = leader.driver.timings
            assert timings.election_count >= 1, "the elected leader's election was timed"
            before = timings.append_records_total
            last = leader.driver.append([b"a", b"b", b"c"])
            await leader.driver.wait_committed(last, 5)
            assert timings.append_records_total == before + 3
            assert timings.commit_count >= 1
            assert timings.commit_max_ms >= timings.commit_sum_ms / timings.commit_count
            values = raft_values(leader.driver.core, leader.driver.log.end_offset().offset, timings)
            assert values[PREFIX + "append_records_total"] == timings.append_records_total
            assert values[PREFIX + "commit_latency_max"] == timings.commit_max_ms
            assert values[PREFIX + "election_latency_max"] == timings.election_max_ms
            followers = [n for n in nodes if n is not leader]
            assert all(n.driver.timings.append_records_total == 0 for n in followers)
            assert all(n.driver.timings.commit_count == 0 for n in followers)
        finally:
            for n in nodes:
                await n.stop()
    run(scenario())
