"""Fetch from the closest replica (KIP-392) on a 3-broker cluster, each broker in its own rack
(broker.rack) with replica.selector.class set to Kafka's RackAwareReplicaSelector, read by a
confluent-kafka (librdkafka) consumer that sets client.rack.

Where the bytes came from is measured, not taken from Strom's word: each broker has a second
listener, EXTERNAL, advertised at a byte-counting TCP proxy in front of it, so every client
connection to broker N goes through proxy N (replication stays on the direct PLAINTEXT listener).
The consumer bootstraps through the proxies; the producer writes on PLAINTEXT, past them.
"""
from __future__ import annotations

import asyncio
import threading
import time
import uuid

import pytest

from tests.integration.cluster import free_ports
from tests.integration.replicated_cluster import REPLICATED_DEFAULTS, ReplicatedCluster

confluent_kafka = pytest.importorskip("confluent_kafka")

RACK_AWARE = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
TOPIC = "nearby"
RECORDS = 3000
VALUE_BYTES = 1000  # about 3 MB in all
METADATA_MAX_AGE_MS = 3000
WAIT_S = 60.0


class CountingProxy:
    """TCP proxies on 127.0.0.1, one per target, counting the bytes each carries from its target
    to the clients (what a broker sent). They run on one event loop in a thread."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.downstream: dict[int, int] = {}
        self.lock = threading.Lock()
        self.servers: list = []

    def add(self, key: int, port: int, to_port: int) -> None:
        asyncio.run_coroutine_threadsafe(self._serve(key, port, to_port), self.loop).result(10)

    async def _serve(self, key: int, port: int, to_port: int) -> None:
        self.downstream[key] = 0

        async def pump(reader, writer, count: bool) -> None:
            try:
                while data := await reader.read(65536):
                    if count:
                        with self.lock:
                            self.downstream[key] += len(data)
                    writer.write(data)
                    await writer.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                writer.close()

        async def accepted(client_r, client_w) -> None:
            try:
                server_r, server_w = await asyncio.open_connection("127.0.0.1", to_port)
            except OSError:
                client_w.close()
                return
            await asyncio.gather(pump(client_r, server_w, False), pump(server_r, client_w, True))

        self.servers.append(await asyncio.start_server(accepted, "127.0.0.1", port))

    def carried(self) -> dict[int, int]:
        with self.lock:
            return dict(self.downstream)

    def close(self) -> None:
        async def stop():
            for server in self.servers:
                server.close()
        asyncio.run_coroutine_threadsafe(stop(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


def rack(broker_id: int) -> str:
    return f"zone-{broker_id}"


@pytest.fixture(scope="module")
def racked():
    """The cluster, its proxies ({broker: proxy port}) and the consumer's bootstrap."""
    cluster = ReplicatedCluster()
    proxies = CountingProxy()
    try:
        external = {}
        for broker_id, b in cluster.brokers.items():
            direct, proxy = free_ports(2)
            external[broker_id] = proxy
            proxies.add(broker_id, proxy, direct)
            b.write_config(cluster.quorum.bootstrap, {
                **REPLICATED_DEFAULTS, "offsets.topic.replication.factor": "3",
                "listeners": f"PLAINTEXT://127.0.0.1:{b.port},EXTERNAL://127.0.0.1:{direct}",
                "advertised.listeners": f"PLAINTEXT://127.0.0.1:{b.port},EXTERNAL://127.0.0.1:{proxy}",
                "listener.security.protocol.map":
                    "PLAINTEXT:PLAINTEXT,EXTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT",
                "inter.broker.listener.name": "PLAINTEXT",
                "broker.rack": rack(broker_id),
                "replica.selector.class": RACK_AWARE,
            })
        cluster.start()
        yield cluster, proxies, ",".join(f"127.0.0.1:{p}" for p in external.values())
    finally:
        cluster.close()
        proxies.close()


def produce(cluster: ReplicatedCluster, start: int, count: int) -> list[bytes]:
    """``count`` unique values acknowledged by every in-sync replica, written past the proxies."""
    producer = confluent_kafka.Producer({
        "bootstrap.servers": cluster.bootstrap, "acks": "all", "enable.idempotence": True,
        "linger.ms": 5, "broker.address.family": "v4", "log_level": 3})
    values = [b"%08d:" % i + b"x" * (VALUE_BYTES - 9) for i in range(start, start + count)]
    failed = []
    for value in values:
        while True:
            try:
                producer.produce(TOPIC, value, partition=0,
                                 on_delivery=lambda err, _m: failed.append(err) if err else None)
                break
            except BufferError:
                producer.poll(0.1)
    assert producer.flush(30) == 0 and not failed, failed[:3]
    return values


def consume(consumer, want: int, deadline: float) -> list[bytes]:
    got = []
    while len(got) < want and time.monotonic() < deadline:
        for msg in consumer.consume(500, 0.5):
            assert msg.error() is None, msg.error()
            got.append(msg.value())
    return got


def test_a_consumer_with_client_rack_reads_from_the_follower_in_its_rack_as_kafka_does(racked):
    """KIP-392: the same-rack follower served at least 95 % of the record bytes (its proxy carried
    them); the leader's proxy carried no record data. Stopped (kill -9), the follower is left
    within metadata.max.age.ms and the consumer carries on from the leader, losing and repeating
    nothing."""
    cluster, proxies, bootstrap = racked
    cluster.create_topic(TOPIC, partitions=1)
    cluster.wait_for_isr(TOPIC, 0, set(cluster.brokers))
    leader = cluster.leader_of(TOPIC, 0)
    near = min(b for b in cluster.brokers if b != leader)
    first = produce(cluster, 0, RECORDS)
    cluster.wait_for_isr(TOPIC, 0, set(cluster.brokers))

    before = proxies.carried()
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"nearby-{uuid.uuid4()}", "client.rack": rack(near),
        "enable.auto.commit": False, "metadata.max.age.ms": METADATA_MAX_AGE_MS,
        "broker.address.family": "v4", "log_level": 3, "fetch.wait.max.ms": 100})
    try:
        consumer.assign([confluent_kafka.TopicPartition(TOPIC, 0, 0)])
        got = consume(consumer, RECORDS, time.monotonic() + WAIT_S)
        assert got == first, f"read {len(got)} of {RECORDS} in order"
        after = proxies.carried()
        sent = {b: after[b] - before[b] for b in after}
        record_bytes = sum(len(v) for v in got)
        assert sent[near] >= 0.95 * record_bytes, (near, leader, sent, record_bytes)
        assert sent[leader] < 0.02 * record_bytes, (near, leader, sent, record_bytes)
        print(f"record bytes {record_bytes}; carried from the follower {sent[near]}, from the leader "
              f"{sent[leader]}, from the third broker {sum(sent.values()) - sent[near] - sent[leader]}")

        cluster.kill9(near)
        stopped = time.monotonic()
        rest = produce(cluster, RECORDS, 200)
        more = consume(consumer, len(rest), stopped + WAIT_S)
        resumed = time.monotonic() - stopped
        assert more == rest, f"after the follower stopped: read {len(more)} of {len(rest)}"
        # The third broker is in another rack: the leader served them.
        assert proxies.carried()[leader] - after[leader] >= sum(len(v) for v in rest)
        print(f"resumed from the leader {resumed:.1f} s after the follower was killed")
        # Nothing more arrives: nothing was repeated.
        assert consume(consumer, 1, time.monotonic() + 1.0) == []
    finally:
        consumer.close()
