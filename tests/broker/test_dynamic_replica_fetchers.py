"""num.replica.fetchers changed without a restart (Kafka's AbstractFetcherManager.resizeThreadPool):
each partition moves to the fetcher Kafka's rule picks for the new count and goes on replicating;
fetchers left without partitions stop. Against a real Kafka-protocol leader on 127.0.0.1 with real
engine Logs, as tests/replication/test_num_replica_fetchers.py."""
from __future__ import annotations

from replication.fetcher import BrokerIdAndFetcherId, fetcher_id
from tests.replication.test_fetcher import T_ID, batch, eventually, leader_server, new_log, run
from tests.replication.test_num_replica_fetchers import Follower, config

A = 1


def test_more_replica_fetchers_split_the_partitions_by_kafkas_rule_and_replication_goes_on(tmp_path):
    async def scenario():
        server = await leader_server()
        tps = [("t", p) for p in range(4)]
        follower = Follower({A: server}, config(1))
        mine = {}
        for tp in tps:
            leader = new_log(tmp_path, "leader", *tp)
            mine[tp] = new_log(tmp_path, "follower", *tp)
            server.lead(*tp, T_ID, leader, 1)
            server.append(*tp, batch(tp[1]))
            follower.follow(tp, mine[tp], A, 1)
        await eventually(lambda: all(mine[tp].log_end_offset == 10 for tp in mine), "replication")
        assert follower.manager.fetchers() == {BrokerIdAndFetcherId(A, 0): tps}

        follower.manager.resize(2)
        assert follower.manager.fetchers() == {
            BrokerIdAndFetcherId(A, f): [tp for tp in tps if fetcher_id(*tp, 2) == f] for f in (0, 1)}
        for tp in tps:
            server.append(*tp, batch(100 + tp[1]))
        await eventually(lambda: all(mine[tp].log_end_offset == 20 for tp in mine), "replication after")
        await eventually(lambda: len(server.connections) == 2, "a connection per fetcher")

        follower.manager.resize(1)
        assert {k: v for k, v in follower.manager.fetchers().items() if v} == {
            BrokerIdAndFetcherId(A, 0): sorted(tps)}
        for tp in tps:
            server.append(*tp, batch(200 + tp[1]))
        await eventually(lambda: all(mine[tp].log_end_offset == 30 for tp in mine), "replication with one")
        await eventually(lambda: len(follower.manager.fetchers()) == 1, "the idle fetcher stopped")
    run(scenario)
