"""A controller applying the dynamic broker configs Kafka's ControllerServer applies to its own
listeners (controller/dynamic_config.py over security/connection_config.py and security/tls.py,
the broker's code): connection limits, per-listener limits and the ip entities' connection
quotas, and a rotated key store, from its node id's BROKER configs over the cluster default's,
replayed into its own image through the raft listener, against a real listener on 127.0.0.1; and
a change naming it checked against its own listeners before it is stored."""
from __future__ import annotations

import asyncio
import datetime
import ssl
import struct

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from controller.dynamic_config import ControllerDynamicConfig
from controller.quorum_controller import QuorumController
from metadata.configs import BROKER_RESOURCE, SET
from protocol import messages as M
from protocol.context import RequestContext
from protocol.dispatch import Api
from protocol.errors import Error
from protocol.headers import RequestHeader
from protocol.metadata_records import encode_record
from protocol.net import Server
from raft.log import Entry
from strom.config import ServerConfig
from tests.limits.echo import echo
from tests.security import certs

NODE = 3000
TIMEOUT_S = 15
REFUSED_WAIT_S = 0.5  # a connection over the limits is closed, or never accepted: waited for this long
LOCATION = "listener.name.controller.ssl.keystore.location"


def _config(**more: str) -> ServerConfig:
    return ServerConfig({
        "process.roles": "controller", "node.id": str(NODE), "listeners": "CONTROLLER://127.0.0.1:0",
        "controller.listener.names": "CONTROLLER", "controller.quorum.voters": f"{NODE}@127.0.0.1:9093",
        "log.dirs": "/tmp/unused", **more})


def _quorum_controller() -> QuorumController:
    return QuorumController(NODE, "cluster", {"num.partitions": 1, "default.replication.factor": 1})


class _Node:
    """A controller's quorum controller and its dynamic configs over a real listener: records
    committed through ``commit`` reach the image as the raft driver delivers them."""

    def __init__(self, config: ServerConfig):
        self.config = config
        self.controller = _quorum_controller()
        self.dynamic = ControllerDynamicConfig(config, NODE)
        self.raft_listener = self.dynamic.publishing(self.controller)
        self.server = Server(echo, 1 << 20, limits=config.listener_limits())
        self.port = self.server.bind("127.0.0.1", 0, "CONTROLLER", **config.listener_binding("CONTROLLER"))
        self.dynamic.attach(self.server)
        self.offset = 0

    def commit(self, *records) -> None:
        entries = []
        for record in records:
            entries.append(Entry(self.offset, 1, encode_record(record)))
            self.offset += 1
        self.raft_listener.handle_commit(entries)


def _broker_config(name: str, value: str | None, entity: str = str(NODE)) -> M.ConfigRecord:
    return M.ConfigRecord(resource_type=BROKER_RESOURCE, resource_name=entity, name=name, value=value)


def _ip_quota(ip: str | None, rate: float | None) -> M.ClientQuotaRecord:
    E = M.ClientQuotaRecord.EntityData
    return M.ClientQuotaRecord(entity=[E(entity_type="ip", entity_name=ip)], key="connection_creation_rate",
                               value=rate or 0.0, remove=rate is None)


async def _open(port: int, context: ssl.SSLContext | None = None):
    return await asyncio.open_connection("127.0.0.1", port, ssl=context,
                                         server_hostname="localhost" if context else None)


async def _served(reader, writer, tag: bytes = b"ping", timeout_s: float = 2.0) -> bool:
    try:
        frame = struct.pack(">i", len(tag)) + tag
        writer.write(frame)
        return await asyncio.wait_for(reader.readexactly(len(frame)), timeout_s) == frame
    except (TimeoutError, asyncio.IncompleteReadError, ConnectionError):
        return False


async def _served_new(port: int, timeout_s: float = 2.0) -> bool:
    reader, writer = await _open(port)
    try:
        return await _served(reader, writer, timeout_s=timeout_s)
    finally:
        writer.close()


def _run(scenario):
    async def main():
        node = _Node(_config())
        node.server.start()
        try:
            return await scenario(node)
        finally:
            await node.server.close()
    return asyncio.run(asyncio.wait_for(main(), TIMEOUT_S))


def test_a_controller_applies_its_own_ids_connection_limits_over_the_cluster_defaults_to_its_listener():
    async def scenario(node):
        node.commit(_broker_config("max.connections.per.ip.overrides", "127.0.0.1:0", entity=""))
        node.commit(_broker_config("max.connections.per.ip", "0", entity=""))
        refused_by_default = not await _served_new(node.port)
        node.commit(_broker_config("max.connections.per.ip.overrides", "127.0.0.1:5"))
        allowed_by_own = await _served_new(node.port)
        node.commit(_broker_config("max.connections.per.ip.overrides", "127.0.0.1:5", entity="1"))
        node.commit(_broker_config("max.connections.per.ip.overrides", None))
        refused_again = not await _served_new(node.port)
        return refused_by_default, allowed_by_own, refused_again, node.server.quotas.max_per_ip

    refused_by_default, allowed_by_own, refused_again, per_ip = _run(scenario)
    assert refused_by_default, "the cluster default's limit reaches a controller"
    assert allowed_by_own, "its own id's value over the cluster default"
    assert refused_again, "another node's value is not its own; deleted, the default again"
    assert per_ip == 0


def test_a_controller_listeners_own_max_connections_is_applied_to_that_listener():
    async def scenario(node):
        node.commit(_broker_config("listener.name.controller.max.connections", "1"))
        held = await _open(node.port)
        first = await _served(*held)
        second = await _served_new(node.port, REFUSED_WAIT_S)
        held[1].close()
        quota = node.server.quotas.listeners["CONTROLLER"].max_connections
        return first, second, quota

    first, second, quota = _run(scenario)
    assert (first, second, quota) == (True, False, 1)


def test_an_ip_entitys_connection_creation_rate_quota_reaches_a_controllers_accept():
    async def scenario(node):
        node.commit(_ip_quota(None, 0.0))
        refused = not await _served_new(node.port, REFUSED_WAIT_S)
        node.commit(_ip_quota("127.0.0.1", 100.0))
        allowed = await _served_new(node.port)
        return refused, allowed

    assert _run(scenario) == (True, True)


def test_what_the_log_held_before_the_listener_was_bound_is_applied_when_it_is():
    config = _config()
    dynamic = ControllerDynamicConfig(config, NODE)
    record = encode_record(_broker_config("max.connections", "7"))
    dynamic.publishing(_quorum_controller()).handle_commit([Entry(0, 1, record)])
    server = Server(echo, 1 << 20, limits=config.listener_limits())
    server.bind("127.0.0.1", 0, "CONTROLLER")
    dynamic.attach(server)
    assert server.quotas.max_connections == 7


# ---- a controller listener's certificate, rotated ---------------------------------------------

@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    """A CA and three server identities of it: the first, its successor (the same subject and
    names, a new key), and one of another subject."""
    directory = str(tmp_path_factory.mktemp("controller-rotate"))
    now = datetime.datetime.now(datetime.UTC)
    ca_key, ca_cert = certs._ca("Rotation CA", certs.ORG, now)
    valid = {"not_before": now - datetime.timedelta(days=1), "not_after": now + datetime.timedelta(days=30)}

    def identity(name, cn):
        subject = certs._name(cn, "Controllers", certs.ORG)
        key, cert = certs._leaf(ca_key, ca_cert, subject, server=True, **valid)
        return certs._identity(directory, name, key, cert, ca_cert)

    return {"ca": certs._write(f"{directory}/ca.pem", certs._pem(ca_cert)),
            "first": identity("first", "localhost"), "second": identity("second", "localhost"),
            "renamed": identity("renamed", "controller-9")}


def _ssl_config(pki) -> ServerConfig:
    return _config(**{"listener.security.protocol.map": "CONTROLLER:SSL", "ssl.keystore.type": "PEM",
                      "ssl.keystore.location": pki["first"].keystore, "ssl.truststore.type": "PEM",
                      "ssl.truststore.location": pki["ca"]})


def _der(identity) -> bytes:
    cert = x509.load_pem_x509_certificate(open(identity.cert, "rb").read())
    return cert.public_bytes(serialization.Encoding.DER)


async def _certificate(port: int, ca: str) -> bytes:
    reader, writer = await _open(port, ssl.create_default_context(cafile=ca))
    try:
        assert await _served(reader, writer)
        return writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
    finally:
        writer.close()


def test_a_keystore_rotated_for_the_controllers_id_is_served_to_new_connections(pki):
    async def main():
        node = _Node(_ssl_config(pki))
        node.server.start()
        try:
            before = await _certificate(node.port, pki["ca"])
            node.commit(_broker_config(LOCATION, pki["second"].keystore))
            after = await _certificate(node.port, pki["ca"])
            node.commit(_broker_config(LOCATION, pki["renamed"].keystore))
            kept = await _certificate(node.port, pki["ca"])
            return before, after, kept
        finally:
            await node.server.close()

    before, after, kept = asyncio.run(asyncio.wait_for(main(), TIMEOUT_S))
    assert before == _der(pki["first"])
    assert after == _der(pki["second"])
    assert kept == _der(pki["second"]), "another subject: the reload fails and the old context serves"


def _alter(dynamic: ControllerDynamicConfig, name: str, *configs, validate_only=False):
    """IncrementalAlterConfigs of BROKER ``name`` through the controller's preprocessing, the
    quorum controller's part standing in as one that stores whatever reaches it."""
    stored = []

    async def store(_header, req):
        stored.extend(req.resources)
        R = M.IncrementalAlterConfigsResponse
        return R(responses=[R.AlterConfigsResourceResponse(error_code=0, error_message=None,
                                                           resource_type=r.resource_type,
                                                           resource_name=r.resource_name)
                            for r in req.resources])

    (api,) = dynamic.preprocess([Api(44, 0, 1, store)])
    R = M.IncrementalAlterConfigsRequest
    A = R.AlterConfigsResource.AlterableConfig
    req = R(validate_only=validate_only, resources=[R.AlterConfigsResource(
        resource_type=BROKER_RESOURCE, resource_name=name,
        configs=[A(name=n, config_operation=SET, value=v) for n, v in configs])])
    response = asyncio.run(api.fn(RequestContext(RequestHeader(44, 1, 1, "test", 2)), req))
    return [(r.error_code, r.error_message) for r in response.responses], stored


def test_a_keystore_of_another_subject_for_the_controllers_own_id_is_refused_before_it_is_stored(pki):
    config = _ssl_config(pki)
    dynamic = ControllerDynamicConfig(config, NODE)
    server = Server(echo, 1 << 20, limits=config.listener_limits())
    server.bind("127.0.0.1", 0, "CONTROLLER", **config.listener_binding("CONTROLLER"))
    dynamic.attach(server)
    ((code, message),), stored = _alter(dynamic, str(NODE), (LOCATION, pki["renamed"].keystore))
    assert code == Error.INVALID_REQUEST and stored == []
    assert message.startswith(f"{LOCATION}: Validation of dynamic config update of SSLFactory failed: "
                              "Keystore DistinguishedName does not match:  "
                              "existing={alias=kafka, DN=CN=localhost")
    assert _alter(dynamic, str(NODE), (LOCATION, pki["second"].keystore))[0] == [(Error.NONE, None)]
    assert _alter(dynamic, "1", (LOCATION, pki["renamed"].keystore))[0] == [(Error.NONE, None)], \
        "another node's stores are that node's to check"


def test_a_connection_limit_of_zero_for_a_controllers_own_listener_is_refused():
    dynamic = ControllerDynamicConfig(_config(), NODE)
    answers, stored = _alter(dynamic, str(NODE), ("listener.name.controller.max.connections", "0"))
    assert answers == [(Error.INVALID_REQUEST,
                        "Invalid value org.apache.kafka.common.config.ConfigException: Invalid "
                        "max.connections 0 for configuration Invalid dynamic configuration")]
    assert stored == []
    assert _alter(dynamic, str(NODE), ("listener.name.controller.max.connections", "10"))[0] == [
        (Error.NONE, None)]
