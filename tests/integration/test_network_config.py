"""Server properties in real `strom` processes (1 controller, 2 brokers), where only the processes
show them working together:

- inter.broker.listener.name: each broker listens on EXTERNAL first and INTERNAL second and
  names INTERNAL; a follower's replica fetcher connects to its leader's INTERNAL listener;
- a client is answered with the endpoints of the listener it connected to: bootstrapped on
  EXTERNAL, confluent-kafka's Metadata lists EXTERNAL ports only, and it produces, consumes and
  commits through them alone; bootstrapped on INTERNAL, it is told INTERNAL ports;
- socket.receive.buffer.bytes (set to Kafka's default, 102400) is on the broker's and the
  controller's listening sockets before they listen: the window scale they announce to a
  client fits it, smaller than the OS default's;
- delete.topic.enable=false on the controller: DeleteTopics through a broker (forwarded to the
  controller) is refused with TOPIC_DELETION_DISABLED, and the topic stays.
"""
from __future__ import annotations

import socket
import time

import psutil
import pytest

from strom import topics as topic_admin
from tests.integration.cluster import free_ports
from tests.integration.replicated_cluster import REPLICATED_DEFAULTS, ReplicatedCluster

pytestmark = [pytest.mark.timeout(120),
              pytest.mark.skipif(not hasattr(socket, "TCP_INFO"), reason="TCP_INFO is Linux's")]
HOST = "127.0.0.1"
WAIT_S = 30.0


def announced_wscale(host: str, port: int) -> int:
    """The window scale the listener at host:port announced to a new connection (the client's
    tcpi_snd_wscale, the low nibble of TCP_INFO's byte 6)."""
    with socket.create_connection((host, port), timeout=5) as s:
        return s.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 104)[6] & 0x0F


def os_default_wscale() -> int:
    with socket.socket() as listener:
        listener.bind((HOST, 0))
        listener.listen()
        return announced_wscale(*listener.getsockname())


def connected_ports(pid: int) -> set[int]:
    """Remote ports of the established TCP connections of a process and its children."""
    proc = psutil.Process(pid)
    ports = set()
    for p in [proc, *proc.children(recursive=True)]:
        for c in p.net_connections(kind="tcp"):
            if c.status == psutil.CONN_ESTABLISHED and c.raddr:
                ports.add(c.raddr.port)
    return ports


@pytest.fixture(scope="module")
def two_listener_cluster():
    """(cluster, {node id: INTERNAL port}): each broker listens on EXTERNAL at its ``port`` and
    on INTERNAL, inter.broker.listener.name=INTERNAL; the controller has delete.topic.enable=false."""
    cluster = ReplicatedCluster(controllers=1, brokers=2, controller_extra={
        "delete.topic.enable": "false", "socket.receive.buffer.bytes": "102400"})
    internal = {}
    try:
        for b in cluster.brokers.values():
            (internal[b.node_id],) = free_ports(1)
            b.write_config(cluster.quorum.bootstrap, {
                **REPLICATED_DEFAULTS, "default.replication.factor": "2",
                "offsets.topic.replication.factor": "2",
                "listeners": f"EXTERNAL://{HOST}:{b.port},INTERNAL://{HOST}:{internal[b.node_id]}",
                "listener.security.protocol.map":
                    "EXTERNAL:PLAINTEXT,INTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT",
                "inter.broker.listener.name": "INTERNAL", "socket.receive.buffer.bytes": "102400"})
        cluster.start()
        yield cluster, internal
    finally:
        cluster.close()


def test_replication_on_the_inter_broker_listener_buffers_on_listeners_and_no_topic_deletion(
        two_listener_cluster):
    cluster, internal = two_listener_cluster
    cluster.create_topic("t", partitions=1, replication_factor=2)
    leader = cluster.leader_of("t", 0)
    (follower,) = set(cluster.brokers) - {leader}

    deadline = time.monotonic() + WAIT_S
    while internal[leader] not in (ports := connected_ports(cluster.brokers[follower].proc.pid)):
        assert time.monotonic() < deadline, f"broker {follower} never fetched from {leader}'s INTERNAL"
        time.sleep(0.1)
    assert cluster.brokers[leader].port not in ports, "no replica fetch on the EXTERNAL listener"

    default = os_default_wscale()
    for node in [*cluster.brokers.values(), *cluster.controllers.values()]:
        assert announced_wscale(node.host, node.port) < default, f"{node.log_path}: the OS's buffer"

    with pytest.raises(RuntimeError, match="deleting t: TOPIC_DELETION_DISABLED"):
        topic_admin.delete(cluster.brokers[leader].bootstrap, "t")
    assert cluster.partition("t", 0) is not None, "the topic is still there"


def listed_brokers(ports: dict[int, int]) -> dict[int, tuple[str, int]]:
    """The brokers confluent-kafka learns from Metadata when bootstrapped on ``ports``."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": ",".join(f"{HOST}:{p}" for p in ports.values())})
    return {i: (b.host, b.port) for i, b in admin.list_topics(timeout=10).brokers.items()}


def test_a_client_is_answered_with_the_endpoints_of_the_listener_it_connected_to(two_listener_cluster):
    from confluent_kafka import Consumer, Producer, TopicPartition

    cluster, internal = two_listener_cluster
    external = {i: b.port for i, b in cluster.brokers.items()}
    assert listed_brokers(external) == {i: (HOST, p) for i, p in external.items()}

    cluster.create_topic("by-listener", partitions=2, replication_factor=2)
    bootstrap = ",".join(f"{HOST}:{p}" for p in external.values())
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    for i in range(20):
        producer.produce("by-listener", b"%d" % i, partition=i % 2)
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "by-listener",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        consumer.subscribe(["by-listener"])
        values: set[bytes] = set()
        deadline = time.monotonic() + WAIT_S
        while len(values) < 20 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.add(message.value())
        assert values == {b"%d" % i for i in range(20)}
        consumer.commit(asynchronous=False)  # at the coordinator FindCoordinator named
        committed = consumer.committed([TopicPartition("by-listener", p) for p in (0, 1)], timeout=10)
        assert sorted(tp.offset for tp in committed) == [10, 10]
        # Every connection the clients opened (to leaders, to the coordinator) is on EXTERNAL;
        # this process's own, not its children's (the brokers replicate on INTERNAL).
        talked_to = {c.raddr.port for c in psutil.Process().net_connections(kind="tcp")
                     if c.status == psutil.CONN_ESTABLISHED and c.raddr}
        assert talked_to & set(external.values()), "the clients hold no connection at all"
        assert not talked_to & set(internal.values()), "a client was sent to an INTERNAL endpoint"
    finally:
        consumer.close()

    assert listed_brokers(internal) == {i: (HOST, p) for i, p in internal.items()}
