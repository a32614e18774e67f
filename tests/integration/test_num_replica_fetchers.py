"""num.replica.fetchers=2 on real brokers (3 controllers + 3 brokers): the property reaches the
replica fetchers, each follower opens one connection per (leader, fetcher id) that has
partitions, as Kafka's rule places them, and acks=all writes reach every replica with the ISR
staying full. The fetcher itself is tested in tests/replication/test_num_replica_fetchers.py."""
from __future__ import annotations

import time

import psutil
import pytest

from replication.fetcher import fetcher_id
from tests.integration.replicated_cluster import AckedRecords, ReplicatedCluster

pytestmark = pytest.mark.timeout(120)
TOPIC = "fetched-twice-as-wide"
PARTITIONS = 12
BROKERS = {4, 5, 6}


def connections_to(cluster: ReplicatedCluster, follower: int, leader: int) -> int:
    """Established TCP connections from the follower's processes to the leader's listener."""
    port = cluster.brokers[leader].port
    root = psutil.Process(cluster.brokers[follower].proc.pid)
    count = 0
    for proc in [root, *root.children(recursive=True)]:
        try:
            conns = proc.net_connections(kind="tcp")
        except psutil.NoSuchProcess:
            continue
        count += sum(1 for c in conns if c.status == psutil.CONN_ESTABLISHED and c.raddr
                     and c.raddr.port == port)
    return count


def test_with_two_replica_fetchers_every_replica_gets_every_acknowledged_record_over_two_connections():
    from confluent_kafka import Producer

    with ReplicatedCluster(broker_extra={"num.replica.fetchers": "2"}) as cluster:
        cluster.create_topic(TOPIC, partitions=PARTITIONS, replication_factor=3)
        acks = AckedRecords()
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                             "enable.idempotence": True, "linger.ms": 5})
        for i in range(200):
            for p in range(PARTITIONS):
                producer.produce(TOPIC, f"{p}-{i:04d}".encode(), partition=p, on_delivery=acks)
        assert producer.flush(60) == 0
        assert acks.errors == [] and acks.count() == 200 * PARTITIONS

        leaders = {p: cluster.wait_for_isr(TOPIC, p, BROKERS).leader for p in range(PARTITIONS)}
        cluster.assert_all_acknowledged(acks, BROKERS)
        expected = {(f, lead): len({fetcher_id(TOPIC, p, 2) for p, led in leaders.items() if led == lead})
                    for f in BROKERS for lead in BROKERS if f != lead}
        assert max(expected.values()) == 2, "some leader leads partitions of both fetchers"
        deadline = time.monotonic() + 10
        while True:
            found = {pair: connections_to(cluster, *pair) for pair in expected}
            if found == expected or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert found == expected, "one connection per (leader, fetcher id) with partitions"
        for p in range(PARTITIONS):
            assert set(cluster.isr_of(TOPIC, p)) == BROKERS
