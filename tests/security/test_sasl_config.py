"""A node's SASL configuration as its server.properties gives it (strom.config.ServerConfig): a bad
SASL setting stops startup naming the property, as Kafka's KafkaConfig and its JAAS loading do, and
the node's own connections to a SASL listener authenticate as Kafka's inter-broker client does
(sasl.mechanism.inter.broker.protocol, sasl.mechanism.controller.protocol, the listener's
sasl.jaas.config username and password)."""
from __future__ import annotations

import asyncio

import pytest

from engine.errors import ConfigError
from protocol.context import KafkaPrincipal
from strom.config import ServerConfig
from tests.security.test_sasl_apis import Connection, make_dispatcher

SCRAM_JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
              'username="alice" password="alice-secret";')
OAUTH_JAAS = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required ;"
PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" '
              'password="alice-secret" user_alice="alice-secret";')


def config(roles: str = "broker", **props: str) -> ServerConfig:
    base = {"process.roles": roles, "node.id": "1", "controller.listener.names": "CONTROLLER",
            "controller.quorum.voters": "1@127.0.0.1:9093",
            "listeners": "INTERNAL://127.0.0.1:9092",
            "listener.security.protocol.map": "INTERNAL:SASL_PLAINTEXT,CONTROLLER:SASL_PLAINTEXT",
            "inter.broker.listener.name": "INTERNAL",
            "sasl.enabled.mechanisms": "SCRAM-SHA-512",
            "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
            "sasl.mechanism.controller.protocol": "SCRAM-SHA-512",
            "sasl.jaas.config": SCRAM_JAAS}
    if roles == "broker,controller":
        base["listeners"] += ",CONTROLLER://127.0.0.1:9093"
    base.update(props)
    return ServerConfig({k: v for k, v in base.items() if v is not None})


def refused(roles: str = "broker", **props) -> ConfigError:
    with pytest.raises(ConfigError) as e:
        config(roles, **props)
    return e.value


def test_gssapi_enabled_on_a_sasl_listener_stops_startup_naming_the_property():
    e = refused(**{"listener.name.internal.sasl.enabled.mechanisms": "GSSAPI,SCRAM-SHA-512"})
    assert e.name == "listener.name.internal.sasl.enabled.mechanisms" and "GSSAPI" in str(e)


def test_an_unknown_mechanism_stops_startup_naming_the_property():
    e = refused(**{"sasl.enabled.mechanisms": "SCRAM-SHA-1"})
    assert e.name == "listener.name.internal.sasl.enabled.mechanisms" and "SCRAM-SHA-1" in str(e)


def test_plain_without_a_jaas_user_list_stops_startup_naming_the_listener_property():
    e = refused(**{"sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512", "sasl.jaas.config": None,
                   "listener.name.internal.scram-sha-512.sasl.jaas.config": SCRAM_JAAS})
    assert e.name == "listener.name.internal.plain.sasl.jaas.config"


def test_a_malformed_jaas_config_stops_startup_naming_the_property():
    e = refused(**{"listener.name.internal.scram-sha-512.sasl.jaas.config": "ScramLoginModule required"})
    assert e.name == "listener.name.internal.scram-sha-512.sasl.jaas.config"


def test_inter_broker_mechanism_must_be_enabled_on_the_inter_broker_listener():
    e = refused(**{"sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256"})
    assert e.name == "sasl.mechanism.inter.broker.protocol"
    assert "must be included in sasl.enabled.mechanisms when SASL is used for inter-broker communication" \
        in str(e)


def test_inter_broker_mechanism_left_at_gssapi_stops_startup():
    e = refused(**{"sasl.mechanism.inter.broker.protocol": None})
    assert e.name == "sasl.mechanism.inter.broker.protocol"


def test_controller_mechanism_left_at_gssapi_stops_startup():
    e = refused(**{"sasl.mechanism.controller.protocol": None})
    assert e.name == "sasl.mechanism.controller.protocol"


def test_inter_broker_listener_without_credentials_stops_startup_naming_the_jaas_property():
    e = refused(**{"sasl.jaas.config": ('org.apache.kafka.common.security.scram.ScramLoginModule '
                                        'required username="alice";')})
    assert e.name == "listener.name.internal.scram-sha-512.sasl.jaas.config" and "password" in str(e)


def test_a_controller_reads_its_controller_listeners_sasl_settings():
    e = refused("broker,controller", **{"listener.name.controller.sasl.enabled.mechanisms": "GSSAPI"})
    assert e.name == "listener.name.controller.sasl.enabled.mechanisms"


def test_a_plaintext_node_needs_no_sasl_settings():
    c = config(**{"listener.security.protocol.map": "INTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT",
                  "sasl.enabled.mechanisms": None, "sasl.mechanism.inter.broker.protocol": None,
                  "sasl.mechanism.controller.protocol": None, "sasl.jaas.config": None})
    assert c.client_security("INTERNAL").authenticate is None
    assert c.client_security("CONTROLLER").authenticate is None


@pytest.mark.parametrize("listener, mechanism_property", [
    ("INTERNAL", "sasl.mechanism.inter.broker.protocol"),
    ("CONTROLLER", "sasl.mechanism.controller.protocol"),
])
@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
def test_the_nodes_own_connections_authenticate_with_the_listeners_mechanism_and_credentials(
        listener, mechanism_property, mechanism):
    c = config(**{"sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
                  "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
                  "sasl.mechanism.controller.protocol": "SCRAM-SHA-512",
                  mechanism_property: mechanism,
                  "sasl.jaas.config": None,
                  "listener.name.controller.plain.sasl.jaas.config": PLAIN_JAAS,
                  "listener.name.controller.scram-sha-512.sasl.jaas.config": SCRAM_JAAS,
                  "listener.name.internal.plain.sasl.jaas.config": PLAIN_JAAS,
                  "listener.name.internal.scram-sha-512.sasl.jaas.config": SCRAM_JAAS})
    authenticate = c.client_security(listener).authenticate
    assert authenticate is not None

    async def scenario():
        conn = Connection(make_dispatcher())
        await authenticate(conn)
        return conn.session

    session = asyncio.run(scenario())
    assert session.authenticated and session.sasl_mechanism == mechanism
    assert session.principal == KafkaPrincipal("User", "alice")


# ---- OAUTHBEARER's JWKS: read when the listener starts, not when the configuration is read ------------

class JwksEndpoint:
    """An http JWKS endpoint on loopback that counts its requests (a real server: urllib fetches)."""

    def __init__(self, body: bytes):
        import http.server
        import threading

        endpoint = self
        self.requests = 0

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                endpoint.requests += 1
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/jwks"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def _jwks_and_token():
    import json
    import time

    import jwt
    from cryptography.hazmat.primitives.asymmetric import ec

    key = ec.generate_private_key(ec.SECP256R1())
    jwk = json.loads(jwt.algorithms.ECAlgorithm.to_jwk(key.public_key()))
    jwk.update(kid="k1", use="sig")
    now = int(time.time())
    token = jwt.encode({"sub": "svc-orders", "iat": now, "exp": now + 300, "aud": "kafka"}, key,
                       algorithm="ES256", headers={"kid": "k1"})
    return json.dumps({"keys": [jwk]}).encode(), token


def _closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def oauth_config(url: str) -> ServerConfig:
    return config(**{"sasl.enabled.mechanisms": "SCRAM-SHA-512,OAUTHBEARER",
                     "listener.name.internal.oauthbearer.sasl.jaas.config": OAUTH_JAAS,
                     "sasl.oauthbearer.jwks.endpoint.url": url,
                     "sasl.oauthbearer.expected.audience": "kafka"})


def test_reading_the_config_fetches_no_jwks_and_the_listeners_start_fetches_it_once():
    from security.sasl.apis import node_sasl_apis

    jwks, token = _jwks_and_token()
    endpoint = JwksEndpoint(jwks)
    try:
        c = oauth_config(endpoint.url)
        assert endpoint.requests == 0  # strom format reads this config too
        node_sasl_apis(c, ["INTERNAL"], lambda user, mechanism: None)
        assert endpoint.requests == 1
        assert c.listener_sasl("INTERNAL").oauth.validate(token).principal_name == "svc-orders"
        assert endpoint.requests == 1  # the keys are held until the refresh is due
    finally:
        endpoint.close()


def test_an_unreachable_jwks_endpoint_is_accepted_in_the_config_and_stops_the_listeners_start():
    from security.sasl.apis import node_sasl_apis
    from security.sasl.config import SaslConfigError

    url = f"http://127.0.0.1:{_closed_port()}/jwks"
    c = oauth_config(url)  # no fetch: a config whose identity provider is not up yet is valid
    with pytest.raises(SaslConfigError) as e:
        node_sasl_apis(c, ["INTERNAL"], lambda user, mechanism: None)
    assert e.value.name == "listener.name.internal.oauthbearer.sasl.oauthbearer.jwks.endpoint.url"
    assert url in str(e.value)


def test_a_jwks_file_that_is_not_a_jwks_stops_the_listeners_start_naming_the_property(tmp_path):
    from security.sasl.apis import node_sasl_apis
    from security.sasl.config import SaslConfigError

    path = tmp_path / "jwks.json"
    path.write_text('["not", "a", "jwks"]')
    c = oauth_config(path.as_uri())
    with pytest.raises(SaslConfigError, match="not a JWKS") as e:
        node_sasl_apis(c, ["INTERNAL"], lambda user, mechanism: None)
    assert e.value.name.endswith("sasl.oauthbearer.jwks.endpoint.url")


def test_a_non_positive_jwks_refresh_interval_stops_startup_naming_the_property():
    e = refused(**{"sasl.enabled.mechanisms": "SCRAM-SHA-512,OAUTHBEARER",
                   "listener.name.internal.oauthbearer.sasl.jaas.config": OAUTH_JAAS,
                   "sasl.oauthbearer.jwks.endpoint.url": "https://idp.example/jwks",
                   "sasl.oauthbearer.jwks.endpoint.refresh.ms": "0"})
    assert e.name == "listener.name.internal.oauthbearer.sasl.oauthbearer.jwks.endpoint.refresh.ms"
