"""The controller's side of a listener's certificate rotated without a restart: a listener's
ssl.* configs are dynamic per broker only, as Kafka's DynamicBrokerConfig.validateConfigs
decides (the broker then reloads them from its image: tests/security/test_tls_reload.py)."""
import pytest

from metadata.configs import BROKER_RESOURCE, DELETE, SET
from protocol.errors import Error
from tests.controller.scenario import Scenario
from tests.controller.scenario import broker_configs as resource

OK = [(Error.NONE, None)]
LOCATION = "listener.name.ssl.ssl.keystore.location"




@pytest.fixture
def s():
    return Scenario(brokers=2)


@pytest.mark.parametrize("name,value", [
    (LOCATION, "/etc/strom/broker-1.pem"),
    ("listener.name.ssl.ssl.keystore.certificate.chain", "-----BEGIN CERTIFICATE-----"),
    ("listener.name.ssl.ssl.keystore.key", "-----BEGIN PRIVATE KEY-----"),
    ("listener.name.ssl.ssl.key.password", "secret"),
    ("listener.name.external.ssl.truststore.location", "/etc/strom/ca.pem"),
    ("listener.name.ssl.ssl.truststore.certificates", "-----BEGIN CERTIFICATE-----"),
    ("listener.name.ssl.ssl.client.auth", "required"),
])
def test_a_listeners_ssl_configs_are_updated_dynamically_per_broker(s, name, value):
    assert s.alter_configs(resource("1", (name, SET, value))) == OK
    assert s.image.configs[(BROKER_RESOURCE, "1")] == {name: value}
    assert s.alter_configs(resource("1", (name, DELETE, None))) == OK
    assert (BROKER_RESOURCE, "1") not in s.image.configs


def test_a_listeners_ssl_config_at_the_cluster_default_needs_a_broker_id(s):
    assert s.alter_configs(resource("", (LOCATION, SET, "/etc/strom/broker.pem"))) == [(
        Error.INVALID_REQUEST, "Cannot update these configs at default cluster level, broker id must be "
                               f"specified: Set({LOCATION})")]


def test_an_ssl_config_without_its_listener_prefix_is_refused(s):
    assert s.alter_configs(resource("1", ("ssl.keystore.location", SET, "/etc/strom/broker.pem"))) == [(
        Error.INVALID_REQUEST, "These security configs can be dynamically updated only per-listener using "
                               "the listener prefix: Set(ssl.keystore.location)")]


def test_a_listeners_ssl_config_kafka_does_not_reconfigure_stays_static(s):
    suites = "listener.name.ssl.ssl.cipher.suites"
    assert s.alter_configs(resource("1", (suites, SET, "TLS_AES_128_GCM_SHA256"))) == [(
        Error.INVALID_REQUEST, "Cannot update these configs dynamically: "
                               "Set(listener.name.ssl.ssl.cipher.suites)")]
