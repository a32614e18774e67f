"""TLS: ssl.principal.mapping.rules as Kafka's SslPrincipalMapper reads them (its own test cases,
SslPrincipalMapperTest), a certificate's subject as Java's X500Principal writes it, the PEM
properties and their errors, listener.name.* overrides, and a TLS listener naming each
connection's principal from its client certificate."""
from __future__ import annotations

import asyncio
import ssl

import pytest

from engine.errors import ConfigError
from protocol import messages as M
from protocol.client import ClientSecurity, KafkaConnection
from protocol.context import ANONYMOUS, KafkaPrincipal, current_session
from protocol.net import Server
from security import tls
from security.ssl_principal import NoMatchingRule, SslPrincipalMapper
from strom.config import ServerConfig
from tests.security.certs import KEY_PASSWORD, make_pki

API_VERSIONS = 18
KAFKA_RULES = ", ".join([
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L",
    "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L",
    "RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U",
    "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U",
    "DEFAULT",
])


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return make_pki(tmp_path_factory.mktemp("pki"))


# ---- SslPrincipalMapper ---------------------------------------------------------------------------

@pytest.mark.parametrize("dn, name", [
    ("CN=Duke,OU=ServiceUsers,O=Org,C=US", "duke"),
    ("CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US", "duke@sme"),
    ("cn=duke,ou=sme,dc=mycp,dc=com", "DUKE@SME"),
    ("cN=duke,OU=JavaSoft,O=Sun Microsystems", "DUKE"),
    ("OU=JavaSoft,O=Sun Microsystems,C=US", "OU=JavaSoft,O=Sun Microsystems,C=US"),
])
def test_ssl_principal_mapper_maps_kafkas_examples(dn, name):
    assert SslPrincipalMapper(KAFKA_RULES).name(dn) == name


def test_a_comma_escaped_in_the_dn_stays_in_the_name():
    mapper = SslPrincipalMapper("RULE:^CN=((\\\\, *|\\w)+)(,.*|$)/$1/,DEFAULT")
    assert mapper.name("CN=Tkac\\, Adam,OU=ITZ,DC=geodis,DC=cz") == "Tkac\\, Adam"


@pytest.mark.parametrize("rules", [
    "DEFAULT", "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/", "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, DEFAULT",
    "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/",
    "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L", "RULE:^cn=(.?),ou=(.?),dc=(.?),dc=(.?)$/$1@$2/U",
    "RULE:^CN=([^,ADEFLTU,]+)(,.*|$)/$1/", "RULE:^CN=([^,DEFAULT,]+)(,.*|$)/$1/",
])
def test_valid_rules_are_accepted(rules):
    SslPrincipalMapper(rules)


@pytest.mark.parametrize("rules", [
    "default", "DEFAUL", "DEFAULT/L", "DEFAULT/U", "RULE:CN=(.*?),OU=ServiceUsers.*/$1",
    "rule:^CN=(.*?),OU=ServiceUsers.*$/$1/", "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L/U",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/L", "RULE:^CN=(.*?),OU=ServiceUsers.*$/U",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/LU",
])
def test_invalid_rules_are_refused(rules):
    with pytest.raises(ValueError):
        SslPrincipalMapper(rules)


@pytest.mark.parametrize("expected, rules", [
    ("[]", ""), ("[DEFAULT]", "DEFAULT"), ("[RULE:/]", "RULE://"), ("[RULE:/.*]", "RULE:/.*/"),
    ("[RULE:/.*/L]", "RULE:/.*/L"), ("[RULE:/, DEFAULT]", "RULE://,DEFAULT"),
    ("[RULE:/, DEFAULT]", "  RULE:// ,  DEFAULT  "),
    ("[RULE:   /     , DEFAULT]", "  RULE:   /     / ,  DEFAULT  "),
    ("[RULE:  /     /U, DEFAULT]", "  RULE:  /     /U   ,DEFAULT  "),
    ("[RULE:([A-Z]*)/$1/U, RULE:([a-z]+)/$1, DEFAULT]",
     "  RULE:([A-Z]*)/$1/U   ,RULE:([a-z]+)/$1/,   DEFAULT  "),
    ("[]", ",   , , ,      , , ,   "), ("[RULE:/, DEFAULT]", ",,RULE://,,,DEFAULT,,"),
    ("[RULE: /   , DEFAULT]", ",  , RULE: /   /    ,,,   DEFAULT, ,   "),
    ("[RULE:   /  /U, DEFAULT]", "     ,  , RULE:   /  /U    ,,  ,DEFAULT, ,"),
    ("[RULE:\\/\\\\\\(\\)\\n\\t/\\/\\/]", "RULE:\\/\\\\\\(\\)\\n\\t/\\/\\//"),
    ("[RULE:\\**\\/+/*/L, RULE:\\/*\\**/**]", "RULE:\\**\\/+/*/L,RULE:\\/*\\**/**/"),
    ("[RULE:,RULE:,/,RULE:,\\//U, RULE:,/RULE:,, RULE:,RULE:,/L,RULE:,/L, RULE:, DEFAULT, /DEFAULT, DEFAULT]",
     "RULE:,RULE:,/,RULE:,\\//U,RULE:,/RULE:,/,RULE:,RULE:,/L,RULE:,/L,RULE:, DEFAULT, /DEFAULT/,DEFAULT"),
])
def test_rules_are_split_as_kafka_splits_them(expected, rules):
    assert str(SslPrincipalMapper(rules)) == f"SslPrincipalMapper(rules = {expected})"


def test_no_rule_applying_is_an_error_and_no_certificate_is_anonymous():
    mapper = SslPrincipalMapper("RULE:^CN=(.*?),OU=Clients.*$/$1/")
    with pytest.raises(NoMatchingRule):
        mapper.name("CN=broker,OU=Brokers")
    assert mapper.principal(None) == ANONYMOUS
    assert mapper.principal("CN=alice,OU=Clients,O=Strom Test") == KafkaPrincipal("User", "alice")


# ---- the subject, as Java's X500Principal.getName() ----------------------------------------------

def test_a_certificates_subject_is_written_most_specific_first_as_rfc_2253(pki):
    der = ssl.PEM_cert_to_DER_cert(pki.alice.read().split("-----END CERTIFICATE-----")[0]
                                   + "-----END CERTIFICATE-----\n")
    assert tls.subject_dn(der) == "CN=alice,OU=Clients,O=Strom Test"


def test_special_characters_in_a_value_are_escaped():
    assert tls._escape('a,b+c"d\\e<f>g;h') == 'a\\,b\\+c\\"d\\\\e\\<f\\>g\\;h'
    assert tls._escape("#lead trail ") == "\\#lead trail\\ "


# ---- properties -------------------------------------------------------------------------------------

def _config(pki, **extra):
    props = {"process.roles": "broker,controller", "node.id": "1",
             "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
             "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,CONTROLLER:PLAINTEXT",
             "controller.listener.names": "CONTROLLER", "controller.quorum.voters": "1@127.0.0.1:9093",
             "ssl.keystore.type": "PEM", "ssl.keystore.location": pki.server.keystore,
             "ssl.truststore.type": "PEM", "ssl.truststore.location": pki.ca}
    props.update(extra)
    return ServerConfig({k: v for k, v in props.items() if v is not None})


def test_a_listener_named_after_a_protocol_speaks_it_and_others_are_mapped(pki):
    config = _config(pki)
    assert [config.security_protocol(n) for n in ("PLAINTEXT", "SSL", "CONTROLLER")] == [
        "PLAINTEXT", "SSL", "PLAINTEXT"]
    assert config.ssl_server_context("PLAINTEXT") is None
    assert isinstance(config.ssl_server_context("SSL"), ssl.SSLContext)


def test_an_explicit_map_must_name_every_listener(pki):
    with pytest.raises(ConfigError, match="^listener.security.protocol.map: no security protocol defined "
                                          "for listener SSL"):
        _config(pki, **{"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"})
    with pytest.raises(ConfigError, match="unknown security protocol TLS"):
        _config(pki, **{"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:TLS,CONTROLLER:PLAINTEXT"})


def test_a_listener_override_wins_over_the_property_and_a_typo_is_unknown(pki):
    config = _config(pki, **{"listener.name.ssl.ssl.client.auth": "required", "ssl.client.auth": "none"})
    assert config.listener_value("SSL", "ssl.client.auth") == "required"
    assert config.listener_value("PLAINTEXT", "ssl.client.auth") == "none"
    assert config.ssl_server_context("SSL").verify_mode == ssl.CERT_REQUIRED
    with pytest.raises(ConfigError, match=r"^listener\.name\.ssl\.ssl\.client\.auht: unknown property"):
        _config(pki, **{"listener.name.ssl.ssl.client.auht": "required"})
    with pytest.raises(ConfigError, match=r"^listener\.name\.ssl\.num\.partitions: unknown property"):
        _config(pki, **{"listener.name.ssl.num.partitions": "3"})


@pytest.mark.parametrize("extra, name, message", [
    ({"ssl.keystore.type": None}, "ssl.keystore.type", "PEM keystores only"),
    ({"ssl.keystore.password": "x"}, "ssl.keystore.password", "cannot be specified with PEM"),
    ({"ssl.truststore.password": "x"}, "ssl.truststore.password", "cannot be specified for PEM"),
    ({"ssl.keystore.location": "/nonexistent.pem"}, "ssl.keystore.location", "cannot read"),
    ({"ssl.keystore.location": None}, "ssl.keystore.location", "needs a key store"),
    ({"ssl.client.auth": "sometimes"}, "ssl.client.auth", "none, requested, required"),
    ({"ssl.enabled.protocols": "TLSv1.2,SSLv3"}, "ssl.enabled.protocols", "unknown protocol SSLv3"),
    ({"ssl.cipher.suites": "TLS_NOT_A_SUITE_WITH_NOTHING"}, "ssl.cipher.suites", "cipher suite"),
    ({"ssl.principal.mapping.rules": "DEFAUL"}, "ssl.principal.mapping.rules", "Invalid rule"),
    ({"listener.name.ssl.ssl.keystore.location": "/nonexistent.pem"},
     "listener.name.ssl.ssl.keystore.location", "cannot read"),
])
def test_a_bad_ssl_property_stops_startup_naming_it(pki, extra, name, message):
    with pytest.raises(ConfigError, match=message) as e:
        _config(pki, **extra)
    assert str(e.value).startswith(name + ":")


def test_an_encrypted_key_needs_its_password(pki):
    chain, key = pki.server.read("cert"), pki.server.read("encrypted_key")
    inline = {"ssl.keystore.location": None, "ssl.keystore.certificate.chain": chain, "ssl.keystore.key": key}
    assert _config(pki, **inline, **{"ssl.key.password": KEY_PASSWORD}).ssl_server_context("SSL") is not None
    with pytest.raises(ConfigError, match="^ssl.key.password"):
        _config(pki, **inline, **{"ssl.key.password": "wrong"})


def test_iana_cipher_names_are_read_as_openssl_names():
    assert tls.openssl_cipher_name("TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256") == "ECDHE-RSA-AES128-GCM-SHA256"
    assert (tls.openssl_cipher_name("TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256")
            == "ECDHE-ECDSA-CHACHA20-POLY1305")
    assert tls.openssl_cipher_name("TLS_RSA_WITH_AES_256_GCM_SHA384") == "AES256-GCM-SHA384"
    assert tls.openssl_cipher_name("ECDHE-RSA-AES128-GCM-SHA256") == "ECDHE-RSA-AES128-GCM-SHA256"


def test_protocols_bound_the_context(pki):
    context = _config(pki, **{"ssl.enabled.protocols": "TLSv1.3"}).ssl_server_context("SSL")
    assert context.minimum_version == context.maximum_version == ssl.TLSVersion.TLSv1_3


# ---- a TLS listener and the principal --------------------------------------------------------------

def _client_config(pki, who):
    class Client:
        def listener_value(self, listener, name, mechanism=None):
            return {"ssl.keystore.type": "PEM", "ssl.keystore.location": who.keystore if who else None,
                    "ssl.truststore.type": "PEM", "ssl.truststore.location": pki.ca,
                    "ssl.endpoint.identification.algorithm": "https"}.get(name)
    return Client()


async def _principals(pki, client_auth: str, clients) -> list:
    config = _config(pki, **{"listener.name.ssl.ssl.client.auth": client_auth,
                             "ssl.principal.mapping.rules": "RULE:^CN=(.*?),OU=Clients,.*$/$1/,DEFAULT"})
    seen = []

    async def handle(frame):
        seen.append(current_session.get().principal)
        return None  # close: the test needs nothing more of the connection

    server = Server(handle, 1 << 20)
    port = server.bind("127.0.0.1", 0, "SSL", **config.listener_binding("SSL"))
    server.start()
    outcomes = []
    try:
        for who in clients:
            context = tls.client_context(_client_config(pki, who), "SSL")
            conn = KafkaConnection("127.0.0.1", port, security=ClientSecurity(context))
            try:
                await conn.connect()
                await conn.request(API_VERSIONS, 0, M.ApiVersionsRequest(), 5)
            except ConnectionError as e:
                outcomes.append(str(e))
            finally:
                await conn.close()
    finally:
        await server.close()
    return [str(p) for p in seen], outcomes


def test_a_tls_connections_principal_is_its_certificates_mapped_subject(pki):
    seen, _ = asyncio.run(_principals(pki, "required", [pki.alice, pki.bob]))
    assert seen == ["User:alice", "User:bob"]


def test_without_a_client_certificate_the_principal_is_anonymous(pki):
    seen, _ = asyncio.run(_principals(pki, "requested", [None]))
    assert seen == ["User:ANONYMOUS"]


def test_a_refused_certificate_learns_why_from_the_alert(pki):
    seen, outcomes = asyncio.run(_principals(pki, "required", [pki.untrusted, pki.expired, None]))
    assert seen == []
    assert "unknown ca" in outcomes[0].lower()
    assert "certificate expired" in outcomes[1].lower()
    assert "certificate required" in outcomes[2].lower()
