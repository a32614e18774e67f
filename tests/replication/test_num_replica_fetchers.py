"""num.replica.fetchers: how many fetchers (each its own connection and Fetch loop) a follower
runs per source broker, and which one fetches a partition: Kafka's AbstractFetcherManager rule
``Utils.abs(31 * topic.hashCode() + partition) % num.replica.fetchers``, so that a partition sits
in the fetcher Kafka would put it in. Against real Kafka-protocol leaders on 127.0.0.1
(leader_server.py) with real engine Logs, as test_fetcher.py."""
from __future__ import annotations

import asyncio

import pytest

from protocol.java_hash import java_string_hash
from replication.fetcher import (
    BrokerIdAndFetcherId,
    FetcherConfig,
    FollowerPartition,
    ReplicaFetcherManager,
    fetcher_id,
)

from .test_fetcher import (
    BROKER_EPOCH,
    LOCAL,
    OPEN,
    T_ID,
    batch,
    eventually,
    leader_server,
    new_log,
    run,
    segment_bytes,
)

A, B = 1, 3  # two source brokers


def config(num_fetchers: int, fetch_wait_max_ms: int = 200) -> FetcherConfig:
    return FetcherConfig(fetch_wait_max_ms=fetch_wait_max_ms, backoff_ms=100, request_timeout_ms=5000,
                         num_fetchers=num_fetchers)


class Follower:
    """A ReplicaFetcherManager pointed at several LeaderServers (broker id -> server; a broker
    not in ``servers`` has no known endpoint), recording on_appended calls."""

    def __init__(self, servers: dict, fetcher_config: FetcherConfig):
        self.servers = servers
        self.appended: list[tuple[str, int]] = []
        self.manager = ReplicaFetcherManager(LOCAL, lambda: BROKER_EPOCH, self.endpoint_of, fetcher_config,
                                             lambda t, p: self.appended.append((t, p)))
        OPEN.append(self.manager.close)

    def endpoint_of(self, broker_id: int):
        server = self.servers.get(broker_id)
        return server.endpoint if server is not None else None

    def follow(self, tp, log, leader: int, epoch: int) -> None:
        self.manager.add_partitions({tp: FollowerPartition(T_ID, leader, epoch, log)})


def fetched_by_client(server) -> dict[str, set]:
    """Which partitions each client id (each fetcher) asked the server for."""
    out: dict[str, set] = {}
    for client, (_, request) in zip(server.fetch_clients, server.fetches):
        for topic in request.topics:
            out.setdefault(client, set()).update(("t", p.partition) for p in topic.partitions)
    return out


# What Java answers (String.hashCode, then Kafka's Utils.abs(31 * hash + partition) % n), computed
# with a JDK: "polygenelubricants" hashes to Integer.MIN_VALUE, whose 31-fold plus 0 is MIN_VALUE
# again, which Kafka's Utils.abs maps to 0 (Math.abs would keep it negative).
JAVA_HASHES = {
    "t": 116,
    "orders": -1008770331,
    "__consumer_offsets": -970371369,
    "polygenelubricants": -2147483648,
    "Hello World": -862545276,
    "payments.eu-west-1_v2": 1917431532,
    "\u00e9v\u00e9nements": -1479837150,
    "emoji-\U0001F600": 1164511306,  # a surrogate pair in UTF-16, as Java hashes it
}
KAFKA_PICKS = [  # (topic, partition, num.replica.fetchers, fetcher id)
    ("t", 0, 3, 2), ("t", 1, 3, 0), ("t", 0, 8, 4), ("t", 7, 8, 3),
    ("orders", 0, 2, 1), ("orders", 7, 8, 6), ("orders", 2147483647, 3, 2),
    ("__consumer_offsets", 0, 8, 7), ("__consumer_offsets", 7, 8, 0),
    ("polygenelubricants", 0, 3, 0), ("polygenelubricants", 1, 8, 7), ("polygenelubricants", 7, 3, 1),
    ("Hello World", 1, 3, 2), ("payments.eu-west-1_v2", 2147483647, 3, 2),
    ("\u00e9v\u00e9nements", 1, 8, 7), ("emoji-\U0001F600", 7, 8, 5),
]


@pytest.mark.parametrize("topic,expected", list(JAVA_HASHES.items()))
def test_a_topic_name_hashes_as_a_java_string(topic, expected):
    assert java_string_hash(topic) == expected


@pytest.mark.parametrize("topic,partition,n,expected", KAFKA_PICKS)
def test_a_partition_goes_to_the_fetcher_kafka_would_pick(topic, partition, n, expected):
    assert fetcher_id(topic, partition, n) == expected
    assert fetcher_id(topic, partition, 1) == 0


def test_with_two_fetchers_each_source_broker_gets_two_connections_and_partitions_split_between_them(
        tmp_path):
    async def scenario():
        servers = {A: await leader_server(), B: await leader_server()}
        led = {A: [("t", p) for p in range(4)], B: [("t", p) for p in range(4, 8)]}
        leaders, mine = {}, {}
        follower = Follower(servers, config(2))
        for source, tps in led.items():
            for tp in tps:
                leaders[tp], mine[tp] = new_log(tmp_path, "leader", *tp), new_log(tmp_path, "follower", *tp)
                servers[source].lead(*tp, T_ID, leaders[tp], 1)
                servers[source].append(*tp, batch(tp[1]))
                follower.follow(tp, mine[tp], source, 1)
        expected = {BrokerIdAndFetcherId(source, f): [tp for tp in tps if fetcher_id(*tp, 2) == f]
                    for source, tps in led.items() for f in (0, 1)}
        assert all(expected.values()), "every fetcher of both sources has partitions"
        assert follower.manager.fetchers() == expected
        assert follower.manager.sources() == led

        await eventually(lambda: all(mine[tp].log_end_offset == 10 for tp in mine), "replication")
        for tp in mine:
            servers[A if tp in led[A] else B].append(*tp, batch(100 + tp[1]))
        await eventually(lambda: all(mine[tp].log_end_offset == 20 for tp in mine), "more replication")
        for tp in mine:
            assert segment_bytes(mine[tp]) == segment_bytes(leaders[tp])
        for source, server in servers.items():
            assert len(server.connections) == 2, "one connection per fetcher"
            asked = fetched_by_client(server)
            assert asked == {f"broker-{LOCAL}-fetcher-{f}": set(expected[BrokerIdAndFetcherId(source, f)])
                             for f in (0, 1)}, "each fetcher asks for its own partitions only"
    run(scenario)


def test_an_idle_fetcher_is_shut_down(tmp_path):
    async def scenario():
        server = await leader_server()
        tps = [("t", 0), ("t", 1)]  # fetcher 0 and fetcher 1 of two
        assert [fetcher_id(*tp, 2) for tp in tps] == [0, 1]
        leaders = {tp: new_log(tmp_path, "leader", *tp) for tp in tps}
        mine = {tp: new_log(tmp_path, "follower", *tp) for tp in tps}
        follower = Follower({A: server}, config(2))
        for tp in tps:
            server.lead(*tp, T_ID, leaders[tp], 1)
            server.append(*tp, batch(tp[1]))
            follower.follow(tp, mine[tp], A, 1)
        await eventually(lambda: all(mine[tp].log_end_offset == 10 for tp in tps), "replication")
        assert len(server.connections) == 2

        follower.manager.remove_partitions([("t", 1)])
        await eventually(lambda: len(server.connections) == 1, "the idle fetcher's connection to close")
        assert follower.manager.fetchers() == {BrokerIdAndFetcherId(A, 0): [("t", 0)]}
        fetches_before = len(server.fetches)
        server.append("t", 0, batch(20))
        server.append("t", 1, batch(21))
        await eventually(lambda: mine[("t", 0)].log_end_offset == 20, "t-0 to replicate on")
        await asyncio.sleep(0.3)
        assert mine[("t", 1)].log_end_offset == 10
        assert all(p.partition == 0 for _, r in server.fetches[fetches_before:] for t in r.topics
                   for p in t.partitions)

        follower.manager.remove_partitions([("t", 0)])
        await eventually(lambda: not server.connections, "the last fetcher's connection to close")
        assert follower.manager.fetchers() == {} and follower.manager.sources() == {}
    run(scenario)


def test_a_partition_removed_and_re_added_in_one_metadata_change_keeps_its_fetcher_and_connection(tmp_path):
    """Kafka shuts idle fetchers down once a metadata change is applied (ReplicaManager calls
    shutdownIdleFetcherThreads last): a partition that the change stops and starts again, here in
    a new leader epoch of the same leader, does not cost its fetcher a new connection."""
    async def scenario():
        server = await leader_server()
        leader, mine = new_log(tmp_path, "leader", "t", 0), new_log(tmp_path, "follower", "t", 0)
        server.lead("t", 0, T_ID, leader, 1)
        server.append("t", 0, batch(0))
        follower = Follower({A: server}, config(2))
        follower.follow(("t", 0), mine, A, 1)
        await eventually(lambda: mine.log_end_offset == 10, "replication")
        connections = server.connections
        assert len(connections) == 1

        server.partitions[("t", 0)].leader_epoch = 2
        follower.manager.remove_partitions([("t", 0)])  # as ReplicaManager's make_follower does
        follower.follow(("t", 0), mine, A, 2)
        server.append("t", 0, batch(1))
        await eventually(lambda: mine.log_end_offset == 20, "replication in epoch 2")
        assert follower.manager.fetch_state("t", 0).current_leader_epoch == 2
        assert server.connections == connections
    run(scenario)


def test_a_new_leader_takes_the_partition_into_its_fetcher_and_nothing_is_lost_or_fetched_twice(tmp_path):
    """t-1 moves from broker A (epoch 1) to broker B (epoch 2). Its fetcher on A, (A, 1), goes on
    with t-3, and its answer carrying A's later write to t-1 is dropped. Our t-1 holds an
    uncommitted tail from A (30..39 in epoch 1) that B never had: the fetcher (B, 1) truncates it
    as a single fetcher does, fetches from 30 once, and ends byte for byte B's log. When t-3
    follows, (A, 1) has nothing left and is shut down; t-0 goes on from A all along."""
    async def scenario():
        servers = {A: await leader_server()}
        b_server = await leader_server()  # its endpoint becomes known once A's answer is dropped
        tps = [("t", 0), ("t", 1), ("t", 3)]
        assert [fetcher_id(*tp, 2) for tp in tps] == [0, 1, 1]
        on_a = {tp: new_log(tmp_path, "a", *tp) for tp in tps}
        on_b = {tp: new_log(tmp_path, "b", *tp) for tp in tps[1:]}
        mine = {tp: new_log(tmp_path, "follower", *tp) for tp in tps}
        for tp in tps:
            servers[A].lead(*tp, T_ID, on_a[tp], 1)
            for i in range(3):
                servers[A].append(*tp, batch(10 * tp[1] + i))  # 0..29 in epoch 1
        for tp, log in on_b.items():
            for i in range(3):
                log.append_as_leader(batch(10 * tp[1] + i), 1)  # B was in sync up to 30
            log.assign_epoch_start_offset(2, 30)
            b_server.lead(*tp, T_ID, log, 2)
        follower = Follower(servers, config(2, fetch_wait_max_ms=3000))
        for tp in tps:
            follower.follow(tp, mine[tp], A, 1)
        await eventually(lambda: all(mine[tp].log_end_offset == 30 for tp in tps), "replication")
        servers[A].append("t", 1, batch(99))  # 30..39: A's alone, never committed
        await eventually(lambda: mine[("t", 1)].log_end_offset == 40 and servers[A].parked == 2,
                         "the uncommitted tail fetched, both fetchers parked on A")
        assert mine[("t", 1)].high_watermark == 30

        follower.manager.remove_partitions([("t", 1)])  # one metadata change, as ReplicaManager does it
        follower.follow(("t", 1), mine[("t", 1)], B, 2)
        assert follower.manager.sources() == {A: [("t", 0), ("t", 3)], B: [("t", 1)]}
        sent = len(servers[A].fetches)
        appended = len(follower.appended)
        servers[A].append("t", 1, batch(98))  # 40..49 on A: answers the parked Fetch of (A, 1)

        def fetched_again():
            return [[p.partition for t in r.topics for p in t.partitions]
                    for c, (_, r) in zip(servers[A].fetch_clients[sent:], servers[A].fetches[sent:])
                    if c == f"broker-{LOCAL}-fetcher-1"]
        await eventually(lambda: fetched_again(), "(A, 1) to take its answer and fetch again")
        assert fetched_again()[0] == [3]
        assert mine[("t", 1)].log_end_offset == 40 and ("t", 1) not in follower.appended[appended:]

        servers[B] = b_server
        b_server.append("t", 1, batch(50))  # 30..39 in epoch 2
        b_server.append("t", 1, batch(51))  # 40..49
        servers[A].append("t", 0, batch(5))
        await eventually(lambda: mine[("t", 1)].log_end_offset == 50 and mine[("t", 0)].log_end_offset == 40,
                         "t-1 to follow B and t-0 to follow A")
        assert segment_bytes(mine[("t", 1)]) == segment_bytes(on_b[("t", 1)])
        assert mine[("t", 1)].leader_epoch_cache.entries() == [(1, 0), (2, 30)]
        assert segment_bytes(mine[("t", 0)]) == segment_bytes(on_a[("t", 0)])
        from_b = b_server.fetched_offsets("t", 1)
        assert from_b[:2] == [(40, 1), (30, 1)], "diverging epoch: truncated to 30, fetched from there"
        assert all(offset > 30 and epoch == 2 for offset, epoch in from_b[2:]), "nothing fetched twice"

        follower.manager.remove_partitions([("t", 3)])
        follower.follow(("t", 3), mine[("t", 3)], B, 2)
        b_server.append("t", 3, batch(60))
        await eventually(lambda: mine[("t", 3)].log_end_offset == 40, "t-3 to follow B")
        await eventually(lambda: len(servers[A].connections) == 1, "the fetcher (A, 1) to shut down")
        assert follower.manager.fetchers() == {BrokerIdAndFetcherId(A, 0): [("t", 0)],
                                               BrokerIdAndFetcherId(B, 1): [("t", 1), ("t", 3)]}
        assert segment_bytes(mine[("t", 3)]) == segment_bytes(on_b[("t", 3)])
        assert set(b_server.fetch_clients) == {f"broker-{LOCAL}-fetcher-1"}, "each keeps its fetcher id"
        assert len(b_server.connections) == 1
    run(scenario)
