"""The broker's side of a listener's certificate rotated without a restart: its preprocessing of
IncrementalAlterConfigs checks a listener's new key store before the change goes to the
controller (Kafka's ConfigAdminManager: INVALID_REQUEST with SslFactory's reason), reloads the
files of one set again unchanged, and DescribeConfigs of the broker lists the listener's dynamic
ssl.* configs, its passwords and inline PEM sensitive with a null value."""
import asyncio

import pytest

from broker.handlers.admin import AdminApis
from metadata.configs import BROKER_RESOURCE, SET
from protocol import messages as M
from protocol.context import RequestContext
from protocol.errors import Error
from protocol.headers import RequestHeader
from security import tls
from strom.config import ServerConfig
from tests.broker.replica_nodes import Cluster
from tests.broker.test_config import BASE
from tests.security.certs import make_pki

LOCATION = "listener.name.ssl.ssl.keystore.location"
DYNAMIC_BROKER_CONFIG, STRING, PASSWORD = 2, 2, 9


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return make_pki(tmp_path_factory.mktemp("pki"))


def _ssl_config(pki):
    return ServerConfig({
        "process.roles": "broker,controller", "node.id": "1",
        "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,CONTROLLER:PLAINTEXT",
        "controller.listener.names": "CONTROLLER", "controller.quorum.voters": "1@127.0.0.1:9093",
        "ssl.keystore.type": "PEM", "ssl.keystore.location": pki.server.keystore,
        "ssl.truststore.type": "PEM", "ssl.truststore.location": pki.ca})


def _handlers(cluster, reloader=None) -> AdminApis:
    return AdminApis(node_id=1, config=ServerConfig(dict(BASE)), image=lambda: cluster.image, controller=None,
                     topic_log_config=None, replicas=None, tls=lambda: reloader)


def _preprocessed(handlers, name, *ops, validate_only=False) -> dict:
    R = M.IncrementalAlterConfigsRequest
    A = R.AlterConfigsResource.AlterableConfig
    configs = [A(name=n, config_operation=op, value=v) for n, op, v in ops]
    req = R(validate_only=validate_only, resources=[R.AlterConfigsResource(
        resource_type=BROKER_RESOURCE, resource_name=name, configs=configs)])
    return handlers._broker_resources(req)


def test_a_listeners_keystore_change_passes_to_the_controller_once_it_loads(pki):
    swapped = []
    reloader = tls.TlsReloader([tls.ListenerTls(_ssl_config(pki), "SSL")], lambda n, c: swapped.append(n))
    handlers = _handlers(Cluster(brokers=(1,)), reloader)
    assert _preprocessed(handlers, "1", (LOCATION, SET, pki.server.keystore)) == {}
    assert swapped == []  # a new value: the image's record reloads it


def test_a_keystore_of_another_subject_is_refused_before_it_is_forwarded(pki):
    reloader = tls.TlsReloader([tls.ListenerTls(_ssl_config(pki), "SSL")], lambda n, c: None)
    ((code, message),) = _preprocessed(_handlers(Cluster(brokers=(1,)), reloader), "1",
                                       (LOCATION, SET, pki.alice.keystore)).values()
    assert code == Error.INVALID_REQUEST
    assert message.startswith(f"{LOCATION}: Validation of dynamic config update of SSLFactory failed: "
                              "Keystore DistinguishedName does not match:  "
                              "existing={alias=kafka, DN=CN=localhost")


def test_the_same_keystore_set_again_is_reloaded_at_once(pki):
    swapped = []
    reloader = tls.TlsReloader([tls.ListenerTls(_ssl_config(pki), "SSL")], lambda n, c: swapped.append(n))
    cluster = Cluster(brokers=(1,))
    reloader.apply({LOCATION: pki.server.keystore})
    cluster.image.configs[(BROKER_RESOURCE, "1")] = {LOCATION: pki.server.keystore}
    swapped.clear()
    assert _preprocessed(_handlers(cluster, reloader), "1", (LOCATION, SET, pki.server.keystore),
                         validate_only=True) == {}
    assert swapped == []
    assert _preprocessed(_handlers(cluster, reloader), "1", (LOCATION, SET, pki.server.keystore)) == {}
    assert swapped == ["SSL"]


def test_at_the_cluster_default_or_unprefixed_a_listeners_ssl_config_is_refused():
    handlers = _handlers(Cluster(brokers=(1,)))
    assert _preprocessed(handlers, "", (LOCATION, SET, "/k.pem")) == {0: (
        Error.INVALID_REQUEST, f"Cannot update these configs at default cluster level, broker id must be "
                               f"specified: Set({LOCATION})")}
    assert _preprocessed(handlers, "1", ("ssl.keystore.location", SET, "/k.pem")) == {0: (
        Error.INVALID_REQUEST, "These security configs can be dynamically updated only per-listener "
                               "using the listener prefix: Set(ssl.keystore.location)")}


def test_describe_configs_gives_a_listeners_dynamic_ssl_configs_and_hides_its_passwords():
    cluster = Cluster(brokers=(1,))
    cluster.image.configs[(BROKER_RESOURCE, "1")] = {LOCATION: "/etc/strom/k.pem",
                                                     "listener.name.ssl.ssl.key.password": "secret"}
    api = {a.key: a for a in _handlers(cluster).apis()}[32]
    R = M.DescribeConfigsRequest
    request = R(resources=[R.DescribeConfigsResource(resource_type=BROKER_RESOURCE, resource_name="1",
                                                     configuration_keys=None)],
                include_synonyms=True, include_documentation=False)
    (result,) = asyncio.run(api.fn(RequestContext(RequestHeader(32, 4, 1, "test", 2)), request)).results
    configs = {c.name: c for c in result.configs}
    location, password = configs[LOCATION], configs["listener.name.ssl.ssl.key.password"]
    assert (location.value, location.config_source, location.is_sensitive, location.config_type,
            location.read_only) == ("/etc/strom/k.pem", DYNAMIC_BROKER_CONFIG, False, STRING, False)
    assert (password.value, password.config_source, password.is_sensitive, password.config_type) == (
        None, DYNAMIC_BROKER_CONFIG, True, PASSWORD)
    assert [s.value for s in password.synonyms] == [None]
