"""`strom configs` against a real node, as kafka-configs.sh --bootstrap-server: describe and alter
round trips of a topic, a group, the brokers (a dynamic broker config in effect without a
restart), users and clients (client quotas) and a user's SCRAM credentials, with Kafka's output
lines; producing through confluent-kafka shows the broker applying message.max.bytes.
"""
import uuid

import pytest

from strom.cli import main

from .clients import confluent

pytestmark = [
    pytest.mark.skipif(not confluent.AVAILABLE, reason="confluent-kafka is not installed"),
    pytest.mark.timeout(120),
]


def configs(capsys, node, *args) -> tuple[int, str, str]:
    capsys.readouterr()
    rc = main(["configs", "--bootstrap-server", node.bootstrap, *args])
    out = capsys.readouterr()
    return rc, out.out, out.err


def new_topic(node) -> str:
    from confluent_kafka.admin import AdminClient, NewTopic

    name = "cfg-" + uuid.uuid4().hex[:8]
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(30)
    return name


def test_topic_configs_alter_and_describe_as_kafka_configs_prints_them(shared_node, capsys):
    topic = new_topic(shared_node)
    rc, out, _ = configs(capsys, shared_node, "--entity-type", "topics", "--entity-name", topic, "--alter",
                         "--add-config", "retention.ms=60000,cleanup.policy=[compact,delete]")
    assert (rc, out) == (0, f"Completed updating config for topic {topic}.\n")
    rc, out, _ = configs(capsys, shared_node, "--entity-type", "topics", "--entity-name", topic, "--describe")
    assert out == (
        f"Dynamic configs for topic {topic} are:\n"
        "  cleanup.policy=compact,delete sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:cleanup.policy="
        "compact,delete, DEFAULT_CONFIG:log.cleanup.policy=delete}\n"
        "  retention.ms=60000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=60000, "
        "DEFAULT_CONFIG:log.retention.ms=604800000}\n")
    rc, out, _ = configs(capsys, shared_node, "--entity-type", "topics", "--entity-name", topic, "--alter",
                         "--delete-config", "retention.ms")
    assert rc == 0
    rc, out, _ = configs(capsys, shared_node, "--entity-type", "topics", "--entity-name", topic, "--describe")
    assert "retention.ms" not in out and "cleanup.policy=compact,delete" in out
    rc, out, err = configs(capsys, shared_node, "--entity-type", "topics", "--entity-name", topic, "--alter",
                           "--delete-config", "segment.ms")
    assert rc != 0 and "Invalid config(s): segment.ms" in err
    rc, out, _ = configs(capsys, shared_node, "--entity-type", "topics", "--entity-name", topic,
                         "--describe", "--all")
    assert out.startswith(f"All configs for topic {topic} are:\n")
    assert "  segment.ms=604800000 sensitive=false synonyms={DEFAULT_CONFIG:log.roll.ms=604800000}\n" in out


def test_a_dynamic_broker_config_takes_effect_without_a_restart(shared_node, capsys):
    """message.max.bytes set as the cluster default: the broker refuses a bigger batch at once,
    and takes it again once the config is deleted."""
    from confluent_kafka import Producer

    topic = new_topic(shared_node)
    producer = Producer({"bootstrap.servers": shared_node.bootstrap, "linger.ms": 0,
                         "compression.type": "none", "message.timeout.ms": 10000})

    def produce(size: int):
        results = []
        producer.produce(topic, b"x" * size, on_delivery=lambda err, _msg: results.append(err))
        producer.flush(15)
        return results[0]

    assert produce(4000) is None
    rc, out, _ = configs(capsys, shared_node, "--entity-type", "brokers", "--entity-default", "--alter",
                         "--add-config", "message.max.bytes=2048")
    assert (rc, out) == (0, "Completed updating default config for brokers in the cluster.\n")
    try:
        rc, out, _ = configs(capsys, shared_node, "--entity-type", "brokers", "--entity-default",
                             "--describe")
        assert out == ("Default configs for brokers in the cluster are:\n"
                       "  message.max.bytes=2048 sensitive=false "
                       "synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:message.max.bytes=2048}\n")
        error = produce(4000)
        assert error is not None and error.name() == "MSG_SIZE_TOO_LARGE", error
        assert produce(100) is None
    finally:
        rc, _, _ = configs(capsys, shared_node, "--entity-type", "brokers", "--entity-default", "--alter",
                           "--delete-config", "message.max.bytes")
    assert rc == 0
    assert produce(4000) is None


def test_a_broker_config_kafka_does_not_change_dynamically_is_refused(shared_node, capsys):
    rc, out, err = configs(capsys, shared_node, "--entity-type", "brokers", "--entity-name", "1", "--alter",
                           "--add-config", "auto.create.topics.enable=false")
    assert rc != 0 and "Cannot update these configs dynamically: Set(auto.create.topics.enable)" in err
    rc, out, _ = configs(capsys, shared_node, "--entity-type", "brokers", "--entity-name", "1", "--describe",
                         "--all")
    assert out.startswith("All configs for broker 1 are:\n")
    assert "  num.io.threads=" in out and "log.retention.ms=" in out


def test_group_configs_round_trip(shared_node, capsys):
    group = "g-" + uuid.uuid4().hex[:8]
    rc, out, _ = configs(capsys, shared_node, "--entity-type", "groups", "--entity-name", group, "--alter",
                         "--add-config", "consumer.session.timeout.ms=50000")
    assert (rc, out) == (0, f"Completed updating config for group {group}.\n")
    rc, out, _ = configs(capsys, shared_node, "--entity-type", "groups", "--entity-name", group, "--describe")
    assert out == (f"Dynamic configs for group {group} are:\n"
                   "  consumer.session.timeout.ms=50000 sensitive=false synonyms={DYNAMIC_GROUP_CONFIG:"
                   "consumer.session.timeout.ms=50000, "
                   "DEFAULT_CONFIG:group.consumer.session.timeout.ms=45000}\n")


def test_user_and_client_quotas_and_scram_credentials(shared_node, capsys):
    user, client = "u" + uuid.uuid4().hex[:6], "c" + uuid.uuid4().hex[:6]
    rc, out, _ = configs(capsys, shared_node, "--entity-type", "users", "--entity-name", user,
                         "--entity-type", "clients", "--entity-name", client, "--alter",
                         "--add-config", "producer_byte_rate=1024,consumer_byte_rate=20000000")
    assert (rc, out) == (0, f"Completed updating config for user {user}.\n")
    rc, out, _ = configs(capsys, shared_node, "--entity-type", "users", "--entity-name", user,
                         "--entity-type", "clients", "--entity-name", client, "--describe")
    line = out.strip()
    assert line.startswith(f"Quota configs for user-principal '{user}', client-id '{client}' are ")
    assert sorted(line.split(" are ", 1)[1].split(", ")) == ["consumer_byte_rate=2.0E7",
                                                              "producer_byte_rate=1024.0"]
    rc, out, _ = configs(capsys, shared_node, "--entity-type", "clients", "--entity-default", "--alter",
                         "--add-config", "request_percentage=50")
    assert (rc, out) == (0, "Completed updating default config for clients in the cluster.\n")
    rc, out, _ = configs(capsys, shared_node, "--entity-type", "clients", "--entity-default", "--describe")
    assert out == "Quota configs for the default client-id are request_percentage=50.0\n"
    configs(capsys, shared_node, "--entity-type", "clients", "--entity-default", "--alter",
            "--delete-config", "request_percentage")
    rc, out, _ = configs(capsys, shared_node, "--entity-type", "users", "--entity-name", user, "--alter",
                         "--add-config", "SCRAM-SHA-512=[iterations=8192,password=secret]")
    assert rc == 0
    rc, out, _ = configs(capsys, shared_node, "--entity-type", "users", "--entity-name", user, "--describe")
    assert out == f"SCRAM credential configs for user-principal '{user}' are SCRAM-SHA-512=iterations=8192\n"
    rc, out, err = configs(capsys, shared_node, "--entity-type", "users", "--entity-name", user, "--alter",
                           "--add-config", "SCRAM-SHA-256=[password=x],producer_byte_rate=10")
    assert rc != 0 and "Cannot alter both quota and SCRAM credential configs simultaneously" in err


def levels(out: str) -> dict[str, str]:
    """logger -> level of a broker-loggers describe, each line checked for Kafka's layout."""
    found = {}
    for line in out.splitlines()[1:]:
        assert line.startswith("  ") and line.endswith(" sensitive=false synonyms={}"), line
        name, _, level = line.strip().split(" ")[0].partition("=")
        found[name] = level
    return found


def test_broker_loggers_describe_and_alter_on_the_broker_and_through_the_controllers(shared_node, capsys):
    """A broker's loggers as kafka-configs --entity-type broker-loggers prints them, one level
    set and unset at run time; the controller's own loggers through --bootstrap-controller."""
    rc, out, _ = configs(capsys, shared_node, "--entity-type", "broker-loggers", "--entity-name", "1",
                         "--describe")
    assert rc == 0 and out.startswith("Dynamic configs for broker-logger 1 are:\n")
    assert {"root", "strom.broker"} <= set(levels(out))
    rc, out, _ = configs(capsys, shared_node, "--entity-type", "broker-loggers", "--entity-name", "1",
                         "--alter", "--add-config", "strom.broker=TRACE")
    assert (rc, out) == (0, "Completed updating config for broker-logger 1.\n")
    rc, out, _ = configs(capsys, shared_node, "--entity-type", "broker-loggers", "--entity-name", "1",
                         "--describe")
    assert levels(out)["strom.broker"] == "TRACE"
    rc, out, _ = configs(capsys, shared_node, "--entity-type", "broker-loggers", "--entity-name", "1",
                         "--alter", "--delete-config", "strom.broker")
    assert rc == 0
    rc, out, _ = configs(capsys, shared_node, "--entity-type", "broker-loggers", "--entity-name", "1",
                         "--describe")
    assert levels(out)["strom.broker"] == levels(out)["strom"]
    rc, _, err = configs(capsys, shared_node, "--entity-type", "broker-loggers", "--entity-name", "1",
                         "--alter", "--add-config", "no.such.logger=DEBUG")
    assert rc != 0 and "Invalid broker logger(s): no.such.logger" in err

    controller = f"127.0.0.1:{shared_node.controller_port}"
    capsys.readouterr()
    assert main(["configs", "--bootstrap-controller", controller, "--entity-type", "broker-loggers",
                 "--entity-name", "1", "--alter", "--add-config", "strom.controller=DEBUG"]) == 0
    assert main(["configs", "--bootstrap-controller", controller, "--entity-type", "broker-loggers",
                 "--entity-name", "1", "--describe"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Completed updating config for broker-logger 1.\n"
                          "Dynamic configs for broker-logger 1 are:\n")
    assert levels(out.split("\n", 1)[1])["strom.controller"] == "DEBUG"
    assert main(["configs", "--bootstrap-controller", controller, "--entity-type", "broker-loggers",
                 "--entity-name", "1", "--alter", "--delete-config", "strom.controller"]) == 0


def test_a_topic_config_altered_through_the_controllers(shared_node, capsys):
    topic = new_topic(shared_node)
    capsys.readouterr()
    assert main(["configs", "--bootstrap-controller", f"127.0.0.1:{shared_node.controller_port}",
                 "--entity-type", "topics", "--entity-name", topic, "--alter",
                 "--add-config", "retention.ms=120000"]) == 0
    assert capsys.readouterr().out == f"Completed updating config for topic {topic}.\n"
    rc, out, _ = configs(capsys, shared_node, "--entity-type", "topics", "--entity-name", topic, "--describe")
    assert "  retention.ms=120000 sensitive=false" in out


def test_ip_connection_quotas_of_an_ip_and_the_default_ip(shared_node, capsys):
    rc, out, _ = configs(capsys, shared_node, "--entity-type", "ips", "--entity-name", "10.9.8.7", "--alter",
                         "--add-config", "connection_creation_rate=10")
    assert (rc, out) == (0, "Completed updating config for ip 10.9.8.7.\n")
    rc, out, _ = configs(capsys, shared_node, "--entity-type", "ips", "--entity-name", "10.9.8.7",
                         "--describe")
    assert out == "Quota configs for ip '10.9.8.7' are connection_creation_rate=10.0\n"
    rc, out, _ = configs(capsys, shared_node, "--entity-type", "ips", "--entity-default", "--alter",
                         "--add-config", "connection_creation_rate=1000")
    assert (rc, out) == (0, "Completed updating default config for ips in the cluster.\n")
    rc, out, _ = configs(capsys, shared_node, "--entity-type", "ips", "--entity-default", "--describe")
    assert out == "Quota configs for the default ip are connection_creation_rate=1000.0\n"
    for entity in (["--entity-name", "10.9.8.7"], ["--entity-default"]):
        rc, _, _ = configs(capsys, shared_node, "--entity-type", "ips", *entity, "--alter",
                           "--delete-config", "connection_creation_rate")
        assert rc == 0
    rc, out, _ = configs(capsys, shared_node, "--entity-type", "ips", "--describe")
    assert "10.9.8.7" not in out and "default ip" not in out
    rc, _, err = configs(capsys, shared_node, "--entity-type", "ips", "--entity-name", "10.9.8.7", "--alter",
                         "--add-config", "producer_byte_rate=10")
    assert rc != 0 and "Only connection quota configs can be added for 'ips'" in err


def test_a_retention_set_in_hours_as_the_cluster_default_applies_to_every_topic(shared_node, capsys):
    """log.retention.hours as a dynamic broker default: a topic's retention.ms becomes an hour,
    described with the hours form as its synonym; deleted, the static default again."""
    topic = new_topic(shared_node)
    rc, out, _ = configs(capsys, shared_node, "--entity-type", "brokers", "--entity-default", "--alter",
                         "--add-config", "log.retention.hours=1")
    assert (rc, out) == (0, "Completed updating default config for brokers in the cluster.\n")
    try:
        rc, out, _ = configs(capsys, shared_node, "--entity-type", "topics", "--entity-name", topic,
                             "--describe", "--all")
        assert ("  retention.ms=3600000 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:"
                "log.retention.hours=1, DEFAULT_CONFIG:log.retention.ms=604800000}\n") in out
    finally:
        rc, _, _ = configs(capsys, shared_node, "--entity-type", "brokers", "--entity-default", "--alter",
                           "--delete-config", "log.retention.hours")
    assert rc == 0
    rc, out, _ = configs(capsys, shared_node, "--entity-type", "topics", "--entity-name", topic,
                         "--describe", "--all")
    assert "  retention.ms=604800000 sensitive=false" in out


def _answered_from(source: str, port: int) -> bool:
    """An ApiVersions v0 sent to 127.0.0.1:``port`` from the loopback address ``source`` gets
    an answer (a connection over the listener's limits is closed unanswered)."""
    import socket
    import struct

    body = struct.pack(">hhih", 18, 0, 7, -1)
    with socket.create_connection(("127.0.0.1", port), timeout=5, source_address=(source, 0)) as sock:
        try:
            sock.sendall(struct.pack(">i", len(body)) + body)
            return len(sock.recv(8)) > 0
        except OSError:
            return False


def test_a_controller_applies_its_own_ids_connection_limits_without_a_restart(shared_node, capsys):
    """max.connections.per.ip.overrides stored for the controller's node id through
    --bootstrap-controller: the controller's running listener refuses the address named, and
    serves it again once the config is deleted; a listener limit not above 0 for its own listener
    is refused before it is stored."""
    import time

    controller = ["configs", "--bootstrap-controller", f"127.0.0.1:{shared_node.controller_port}",
                  "--entity-type", "brokers", "--entity-name", "1", "--alter"]

    def answered_within(expected: bool, deadline_s: float = 10.0) -> bool:
        deadline = time.monotonic() + deadline_s
        while _answered_from("127.0.0.2", shared_node.controller_port) != expected:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.1)
        return True

    assert _answered_from("127.0.0.2", shared_node.controller_port)
    assert main([*controller, "--add-config", "max.connections.per.ip.overrides=127.0.0.2:0"]) == 0
    try:
        assert answered_within(False), "127.0.0.2 is still served by the controller"
        assert _answered_from("127.0.0.1", shared_node.controller_port)
    finally:
        assert main([*controller, "--delete-config", "max.connections.per.ip.overrides"]) == 0
    assert answered_within(True), "127.0.0.2 is not served again"
    capsys.readouterr()
    assert main([*controller, "--add-config", "listener.name.controller.max.connections=0"]) != 0
    assert "Invalid max.connections 0" in capsys.readouterr().err
