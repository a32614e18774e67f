"""Listener configs changed without a restart, as a KRaft Kafka broker takes them:

- listener.name.<l>.max.connections and .max.connection.creation.rate are dynamic at the cluster
  default and per broker (SocketServer.ListenerReconfigurableConfigs; ClusterLevelListenerConfigs),
  each checked as its base property's type, and a value of at most 0 for a listener of this broker
  refused as its ListenerConnectionQuota.validateReconfiguration refuses it; applied from the image
  to the running listeners (broker/dynamic_config.py);
- listeners, advertised.listeners and listener.security.protocol.map only per broker
  (DynamicBrokerConfig.PerBrokerConfigs), and a change of the endpoints the broker registered is
  refused: "Advertised listeners cannot be altered when using a Raft-based metadata quorum."
  (DynamicListenerConfig.validateReconfiguration), as is a new security protocol for a listener
  that exists; a listener the broker does not advertise (advertised.listeners set) may be added,
  bound and accepting from the image, and removed, its connections closed
  (DynamicListenerConfig.reconfigure)."""
from __future__ import annotations

import asyncio
import struct

from broker.dynamic_config import DynamicBrokerConfig
from metadata.configs import BROKER_RESOURCE, DELETE, SET
from metadata.image import MetadataImage
from protocol import messages as M
from protocol.errors import Error
from protocol.limits import ListenerQuota
from protocol.net import Server
from strom.config import ServerConfig
from tests.broker.test_config import BASE
from tests.broker.test_config_alter import broker_node, call, incremental
from tests.broker.test_dynamic_config import set_config
from tests.limits.echo import echo, served
from tests.security.certs import make_pki

BROKER = BROKER_RESOURCE
DYNAMIC_BROKER_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 2, 4, 5


def wrapped(inner: str) -> str:
    """Kafka's answer for a ConfigException of a reconfigurable's validation: processReconfiguration
    wraps it in ConfigException("Invalid dynamic configuration", e), whose two-argument form reads
    as a value, and the broker answers its message as INVALID_REQUEST."""
    return (f"Invalid value org.apache.kafka.common.config.ConfigException: {inner} "
            "for configuration Invalid dynamic configuration")


def test_listener_prefixed_connection_limits_are_dynamic_at_the_cluster_default_and_per_broker():
    broker = broker_node()
    rate = "listener.name.PLAINTEXT.max.connection.creation.rate"
    assert incremental(broker, (BROKER, "", [("listener.name.plaintext.max.connections", SET, "50")]),
                       (BROKER, "1", [(rate, SET, "10")])) == [
        (BROKER, "", Error.NONE, None), (BROKER, "1", Error.NONE, None)]
    assert broker.image.configs[(BROKER, "")] == {"listener.name.plaintext.max.connections": "50"}
    assert broker.image.configs[(BROKER, "1")] == {rate: "10"}


def test_a_listener_limit_of_zero_is_refused_as_kafkas_listener_connection_quota_refuses_it():
    broker = broker_node()
    assert incremental(broker, (BROKER, "1", [("listener.name.plaintext.max.connections", SET, "0")])) == [
        (BROKER, "1", Error.INVALID_REQUEST, wrapped("Invalid max.connections 0"))]
    assert incremental(broker, (BROKER, "", [("listener.name.plaintext.max.connection.creation.rate",
                                              SET, "0")])) == [
        (BROKER, "", Error.INVALID_REQUEST, wrapped("Invalid max.connection.creation.rate 0"))]
    assert broker.follower.forwarded == []


def test_a_listener_limit_that_is_no_int_is_refused_naming_its_base_property():
    broker = broker_node()
    [(_, _, code, message)] = incremental(
        broker, (BROKER, "", [("listener.name.other.max.connections", SET, "many")]))
    assert code == Error.INVALID_CONFIG
    assert message == "Invalid value many for configuration max.connections: Not a number of type INT"


def test_listeners_are_per_broker_configs():
    broker = broker_node()
    assert incremental(broker, (BROKER, "", [("listeners", SET, "PLAINTEXT://127.0.0.1:9092")])) == [
        (BROKER, "", Error.INVALID_REQUEST,
         "Cannot update these configs at default cluster level, broker id must be specified: Set(listeners)")]


def test_a_change_of_the_registered_endpoints_is_refused_as_a_kraft_broker_refuses_it():
    broker = broker_node()
    refused = wrapped("Advertised listeners cannot be altered when using a Raft-based metadata quorum.")
    for name, value in (("listeners", "PLAINTEXT://127.0.0.1:9092,EXTRA://127.0.0.1:9094,"
                                      "CONTROLLER://127.0.0.1:9093"),
                        ("advertised.listeners", "PLAINTEXT://broker1:9092")):
        extra = [("listener.security.protocol.map", SET,
                  "PLAINTEXT:PLAINTEXT,EXTRA:PLAINTEXT,CONTROLLER:PLAINTEXT")]
        assert incremental(broker, (BROKER, "1", [(name, SET, value)] + extra)) == [
            (BROKER, "1", Error.INVALID_REQUEST, refused)]
    assert broker.follower.forwarded == []


def test_the_security_protocol_of_an_existing_listener_cannot_change(tmp_path):
    keystore = make_pki(tmp_path).server.keystore  # so that the config with an SSL listener holds
    broker = broker_node({"ssl.keystore.location": keystore, "ssl.keystore.type": "PEM"})
    assert incremental(broker, (BROKER, "1", [("listener.security.protocol.map", SET,
                                               "PLAINTEXT:SSL,CONTROLLER:PLAINTEXT")])) == [
        (BROKER, "1", Error.INVALID_REQUEST,
         wrapped("Security protocol cannot be updated for existing listener PLAINTEXT"))]


def test_the_same_endpoints_written_again_go_through():
    broker = broker_node()
    assert incremental(broker, (BROKER, "1", [
        ("listeners", SET, "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093"),
        ("listener.security.protocol.map", SET, "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SPARE:SSL")])) == [
        (BROKER, "1", Error.NONE, None)]
    assert incremental(broker, (BROKER, "1", [("listeners", DELETE, None)])) == [
        (BROKER, "1", Error.NONE, None)]


def test_the_images_listener_limits_reach_the_running_listener():
    config = ServerConfig({**BASE, "max.connections": "100", "listener.name.plaintext.max.connections": "7"})
    server = Server(lambda frame: None, 1 << 20, limits=config.listener_limits())
    dynamic = DynamicBrokerConfig(config, 1)
    dynamic.attach(server=server)
    image = MetadataImage()
    assert server.quotas.listeners["PLAINTEXT"] == ListenerQuota(max_connections=7)
    set_config(image, "listener.name.PLAINTEXT.max.connection.creation.rate", "20")
    dynamic.apply(image)
    assert server.quotas.listeners["PLAINTEXT"] == ListenerQuota(7, max_connection_creation_rate=20)
    set_config(image, "listener.name.plaintext.max.connections", "9", broker="1")
    set_config(image, "max.connections", "30")
    dynamic.apply(image)
    assert server.quotas.listeners["PLAINTEXT"] == ListenerQuota(9, max_connection_creation_rate=20)
    assert server.quotas.listeners["CONTROLLER"].max_connections == 30, "no prefix: the broker-wide value"
    set_config(image, "listener.name.plaintext.max.connections", None, broker="1")
    dynamic.apply(image)
    assert server.quotas.listeners["PLAINTEXT"].max_connections == 7, "deleted: the static prefixed value"


ADVERTISED = {"advertised.listeners": "PLAINTEXT://127.0.0.1:9092"}
WITH_INTERNAL = [("listeners", SET,
                  "PLAINTEXT://127.0.0.1:9092,INTERNAL://127.0.0.1:0,CONTROLLER://127.0.0.1:9093"),
                 ("listener.security.protocol.map", SET,
                  "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT")]


def test_a_listener_the_broker_does_not_advertise_may_be_added_and_removed():
    broker = broker_node(ADVERTISED)
    assert incremental(broker, (BROKER, "1", WITH_INTERNAL)) == [(BROKER, "1", Error.NONE, None)]
    assert incremental(broker, (BROKER, "1", [("listeners", DELETE, None)])) == [
        (BROKER, "1", Error.NONE, None)]


def test_a_sasl_listener_is_not_added_without_a_restart():
    broker = broker_node({**ADVERTISED, "listener.name.internal.sasl.enabled.mechanisms": "SCRAM-SHA-256"})
    assert incremental(broker, (BROKER, "1", [
        WITH_INTERNAL[0], ("listener.security.protocol.map", SET,
                           "PLAINTEXT:PLAINTEXT,INTERNAL:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT")])) == [(
        BROKER, "1", Error.INVALID_REQUEST,
        "Listener INTERNAL: a SASL listener is not added without a restart "
        "(its authenticators are made at startup)")]


def test_an_added_listener_accepts_from_the_image_and_a_removed_one_closes():
    async def scenario():
        config = ServerConfig({**BASE, **ADVERTISED, "listener.name.internal.max.connections": "3"})
        server = Server(echo, 1 << 20, limits=config.listener_limits())
        server.bind("127.0.0.1", 0, "PLAINTEXT")
        dynamic = DynamicBrokerConfig(config, 1)
        dynamic.attach(server=server)
        server.start()
        image = MetadataImage()
        try:
            for name, _, value in WITH_INTERNAL:
                set_config(image, name, value, broker="1")
            dynamic.apply(image)
            [internal] = [s for s, n in server.listener_names.items() if n == "INTERNAL"]
            port = internal.getsockname()[1]
            assert await served(port)
            assert server.quotas.listeners["INTERNAL"].max_connections == 3, "its file's prefixed limit"
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(struct.pack(">i", 1) + b"x")
            assert await reader.readexactly(5) == struct.pack(">i", 1) + b"x"
            set_config(image, "listeners", None, broker="1")
            dynamic.apply(image)
            assert await asyncio.wait_for(reader.read(1), 2) == b"", "its connections closed"
            writer.close()
            assert not await served(port)
            assert "INTERNAL" not in server.listener_names.values()
        finally:
            await server.close()

    asyncio.run(asyncio.wait_for(scenario(), 20))


def test_a_listeners_limits_describe_with_their_source_and_the_base_property_as_synonym():
    broker = broker_node({"listener.name.plaintext.max.connections": "7", "max.connections": "100"})
    rate = "listener.name.plaintext.max.connection.creation.rate"
    assert incremental(broker, (BROKER, "1", [(rate, SET, "10")])) == [(BROKER, "1", Error.NONE, None)]
    D = M.DescribeConfigsRequest
    request = D(resources=[D.DescribeConfigsResource(resource_type=BROKER, resource_name="1",
                                                     configuration_keys=None)],
                include_synonyms=True, include_documentation=False)
    entries = {c.name: c for c in call(broker, 32, 4, request).results[0].configs}
    limit = entries["listener.name.plaintext.max.connections"]
    assert (limit.value, limit.read_only, limit.config_source) == ("7", False, STATIC_BROKER_CONFIG)
    assert [(s.name, s.value, s.source) for s in limit.synonyms] == [
        ("listener.name.plaintext.max.connections", "7", STATIC_BROKER_CONFIG),
        ("max.connections", "100", STATIC_BROKER_CONFIG)]
    assert (entries[rate].value, entries[rate].config_source) == ("10", DYNAMIC_BROKER_CONFIG)
    assert [(s.name, s.source) for s in entries[rate].synonyms] == [
        (rate, DYNAMIC_BROKER_CONFIG), ("max.connection.creation.rate", DEFAULT_CONFIG)]
