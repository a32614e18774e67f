"""The server-side SASL mechanisms against the RFCs' vectors and other clients' implementations,
and Kafka's JAAS config syntax (security/sasl/)."""
from __future__ import annotations

import base64
import json
import time

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from kafka.net.sasl.scram import SaslMechanismScram

from security.sasl.config import SaslConfigError, listener_sasl
from security.sasl.jaas import JaasConfigError, login_entry, parse_jaas_config, plain_users
from security.sasl.mechanism import AuthenticationFailed, InvalidCredentials
from security.sasl.oauthbearer import (
    JwksKeys,
    JwtValidator,
    OAuthBearerServer,
    client_initial_response,
    parse_initial_response,
)
from security.sasl.plain import PlainServer, plain_client_token
from security.sasl.scram import ScramClient, ScramServer, make_credential, sasl_name, username_of

KAFKA_PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
                    'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";')


# ---- JAAS ------------------------------------------------------------------------------

def test_jaas_config_parses_kafkas_plain_example():
    entry = login_entry(KAFKA_PLAIN_JAAS, "org.apache.kafka.common.security.plain.PlainLoginModule")
    assert entry.control_flag == "required"
    assert entry.options["username"] == "admin" and entry.options["password"] == "admin-secret"
    assert plain_users(entry) == {"admin": "admin-secret", "alice": "alice-secret"}


def test_jaas_config_takes_comments_single_quotes_escapes_and_several_entries():
    entries = parse_jaas_config(
        "// a comment\n a.B REQUIRED k1=v1 /* another */ k2='two words' k3=\"q\\\"uote\";\n"
        "c.D optional;")
    assert [(e.login_module, e.control_flag) for e in entries] == [("a.B", "required"), ("c.D", "optional")]
    assert entries[0].options == {"k1": "v1", "k2": "two words", "k3": 'q"uote'}


@pytest.mark.parametrize("text, message", [
    ("", "Login module not specified"),
    ("a.B required k=v", "not terminated by semi-colon"),
    ("a.B always;", "Invalid login module control flag 'always'"),
    ("a.B required k=;", "Value not specified for key 'k'"),
    ("a.B", "control flag not specified"),
])
def test_jaas_config_refuses_what_kafka_refuses(text, message):
    with pytest.raises(JaasConfigError, match=message):
        parse_jaas_config(text)


def test_a_mechanisms_jaas_config_holds_one_entry_of_its_login_module():
    with pytest.raises(JaasConfigError, match="2 login modules"):
        login_entry("a.B required; c.D required;")
    with pytest.raises(JaasConfigError, match="ScramLoginModule"):
        login_entry(KAFKA_PLAIN_JAAS, "org.apache.kafka.common.security.scram.ScramLoginModule")


# ---- PLAIN -----------------------------------------------------------------------------

USERS = {"admin": "admin-secret", "alice": "alice-secret"}


def test_plain_authenticates_a_listed_user_with_its_password():
    server = PlainServer(USERS.get)
    assert server.evaluate(b"\x00alice\x00alice-secret") == b""  # RFC 4616: authzid NUL authcid NUL passwd
    assert server.complete and server.principal_name == "alice"
    server = PlainServer(USERS.get)
    server.evaluate(plain_client_token("alice", "alice-secret", authzid="alice"))
    assert server.principal_name == "alice"


def test_plain_wrong_password_and_unknown_user_fail_with_the_same_message():
    messages = []
    for token in (b"\x00alice\x00wrong", b"\x00mallory\x00alice-secret"):
        with pytest.raises(AuthenticationFailed) as e:
            PlainServer(USERS.get).evaluate(token)
        messages.append(str(e.value))
    assert messages == ["Authentication failed: Invalid username or password"] * 2


@pytest.mark.parametrize("token, message", [
    (b"alice\x00alice-secret", "expected 3 tokens, got 2"),
    (b"\x00alice\x00alice-secret\x00x", "expected 3 tokens, got 4"),
    (b"\x00\x00pw", "username not specified"),
    (b"\x00alice\x00", "password not specified"),
    (b"bob\x00alice\x00alice-secret", "authorization id that is different from username"),
])
def test_plain_refuses_malformed_responses_as_kafka(token, message):
    with pytest.raises(AuthenticationFailed, match=message):
        PlainServer(USERS.get).evaluate(token)


# ---- SCRAM -----------------------------------------------------------------------------

RFC7677_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")


def test_scram_sha_256_server_answers_rfc_7677s_example():
    credential = make_credential("SCRAM-SHA-256", "pencil", salt=RFC7677_SALT, iterations=4096)
    server = ScramServer("SCRAM-SHA-256", {"user": credential}.get,
                         nonce=lambda: "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0")
    first = server.evaluate(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO")
    assert first == b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    final = server.evaluate(b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                            b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    assert final == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    assert server.complete and server.principal_name == "user"


def test_scram_client_makes_rfc_7677s_proof():
    client = ScramClient("SCRAM-SHA-256", "user", "pencil", nonce="rOprNGfwEbeRWgbNEkqO")
    assert client.first() == b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
    assert client.final(b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,"
                        b"i=4096").endswith(b",p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    client.verify(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")
    with pytest.raises(ValueError, match="server signature"):
        client.verify(b"v=" + base64.b64encode(b"x" * 32))


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_server_authenticates_kafka_pythons_client(mechanism):
    credential = make_credential(mechanism, "alice-secret", iterations=8192)
    server = ScramServer(mechanism, {"alice": credential}.get)
    client = SaslMechanismScram(sasl_plain_username="alice", sasl_plain_password="alice-secret",
                                sasl_mechanism=mechanism)
    client.receive(server.evaluate(client.auth_bytes()))
    client.receive(server.evaluate(client.auth_bytes()))  # raises unless the server's signature is right
    assert client.is_done() and server.complete and server.principal_name == "alice"


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_wrong_password_and_unknown_user_fail_alike_at_the_proof(mechanism):
    credential = make_credential(mechanism, "alice-secret")
    for user, password in (("alice", "wrong"), ("mallory", "alice-secret")):
        server = ScramServer(mechanism, {"alice": credential}.get)
        client = ScramClient(mechanism, user, password)
        server_first = server.evaluate(client.first())  # an unknown user gets a server-first message too
        assert b",i=4096" in server_first
        with pytest.raises(InvalidCredentials, match="Invalid client credentials"):
            server.evaluate(client.final(server_first))
        assert not server.complete


def test_scram_refuses_tokenauth_a_short_iteration_count_and_a_foreign_nonce():
    credential = make_credential("SCRAM-SHA-512", "pw")
    with pytest.raises(InvalidCredentials, match="Token Authentication failed"):
        ScramServer("SCRAM-SHA-512", {"u": credential}.get).evaluate(b"n,,n=u,r=abc,tokenauth=true")
    weak = make_credential("SCRAM-SHA-512", "pw", iterations=1000)
    with pytest.raises(InvalidCredentials, match="less than the minimum 4096"):
        ScramServer("SCRAM-SHA-512", {"u": weak}.get).evaluate(b"n,,n=u,r=abc")
    server = ScramServer("SCRAM-SHA-512", {"u": credential}.get)
    client = ScramClient("SCRAM-SHA-512", "u", "pw")
    final = client.final(server.evaluate(client.first()))
    with pytest.raises(InvalidCredentials, match="nonce"):
        server.evaluate(final.replace(b",p=", b"x,p=", 1))


def test_scram_final_nonce_need_only_end_with_the_server_first_nonce_as_kafkas():
    """Kafka's ScramSaslServer checks endsWith: librdkafka before 2.1 sends its own nonce again in
    front of the server-first one, its proof made over what it sent."""
    import hashlib
    import hmac

    from security.sasl.scram import client_key, salted_password, stored_key

    mechanism = "SCRAM-SHA-512"
    server = ScramServer(mechanism, {"u": make_credential(mechanism, "pw")}.get)
    first = server.evaluate(b"n,,n=u,r=abc").decode()
    fields = dict(item.split("=", 1) for item in first.split(","))
    without_proof = f"c=biws,r=abc{fields['r']}"
    auth_message = f"n=u,r=abc,{first},{without_proof}".encode()
    salted = salted_password(mechanism, "pw", base64.b64decode(fields["s"]), int(fields["i"]))
    key = client_key(mechanism, salted)
    signature = hmac.new(stored_key(mechanism, key), auth_message, hashlib.sha512).digest()
    proof = base64.b64encode(bytes(a ^ b for a, b in zip(key, signature))).decode()
    assert server.evaluate(f"{without_proof},p={proof}".encode()).startswith(b"v=")
    assert server.complete and server.principal_name == "u"


def test_scram_refuses_channel_binding_and_malformed_messages():
    server = ScramServer("SCRAM-SHA-256", {}.get)
    with pytest.raises(InvalidCredentials, match="client first message format"):
        server.evaluate(b"p=tls-unique,,n=u,r=abc")
    with pytest.raises(AuthenticationFailed, match="Unexpected challenge"):
        server.evaluate(b"n,,n=u,r=abc")  # failed: nothing more


def test_scram_user_names_escape_comma_and_equals():
    assert sasl_name("a,b=c") == "a=2Cb=3Dc"
    assert username_of("a=2Cb=3Dc") == "a,b=c"
    with pytest.raises(ValueError):
        username_of("a=b")


# ---- OAUTHBEARER -----------------------------------------------------------------------

@pytest.fixture(scope="module")
def signer():
    key = ec.generate_private_key(ec.SECP256R1())
    jwk = json.loads(jwt.algorithms.ECAlgorithm.to_jwk(key.public_key()))
    jwk.update(kid="k1", use="sig")
    return key, json.dumps({"keys": [jwk]}).encode()


def _validator(jwks: bytes, **kwargs) -> JwtValidator:
    return JwtValidator(JwksKeys("file:/jwks.json", fetch=lambda url: jwks), **kwargs)


def _token(key, claims=None, kid="k1", algorithm="ES256", **overrides) -> str:
    now = int(time.time())
    body = {"sub": "alice", "iat": now, "exp": now + 300, "aud": "kafka", "iss": "https://issuer",
            "scope": "produce consume"}
    body.update(claims or {})
    for name, value in overrides.items():
        if value is None:
            body.pop(name, None)
        else:
            body[name] = value
    return jwt.encode(body, key, algorithm=algorithm, headers={"kid": kid} if kid else None)


def test_oauthbearer_takes_a_valid_jwt_and_names_its_subject(signer):
    key, jwks = signer
    validator = _validator(jwks, expected_audience=["kafka"], expected_issuer="https://issuer")
    server = OAuthBearerServer(validator.validate)
    assert server.evaluate(client_initial_response(_token(key))) == b""
    assert server.complete and server.principal_name == "alice"
    assert server.token.scopes == {"produce", "consume"}
    assert server.credential_expiry_ms > time.time() * 1000


def test_oauthbearer_reads_the_configured_sub_claim(signer):
    key, jwks = signer
    server = OAuthBearerServer(_validator(jwks, sub_claim_name="client_id").validate)
    server.evaluate(client_initial_response(_token(key, {"client_id": "svc-1"})))
    assert server.principal_name == "svc-1"


@pytest.mark.parametrize("overrides", [
    {"exp": int(time.time()) - 3600},  # expired beyond the clock skew
    {"aud": "elsewhere"},
    {"iss": "https://other"},
    {"exp": None},  # exp and iat are required
    {"iat": None},
    {"sub": None},
    {"kid": "unknown"},
])
def test_oauthbearer_answers_an_invalid_token_with_rfc_7628s_error_then_fails(signer, overrides):
    key, jwks = signer
    validator = _validator(jwks, expected_audience=["kafka"], expected_issuer="https://issuer")
    server = OAuthBearerServer(validator.validate)
    kid = overrides.pop("kid", "k1")
    answer = server.evaluate(client_initial_response(_token(key, kid=kid, **overrides)))
    assert json.loads(answer) == {"status": "invalid_token"}
    assert not server.complete
    with pytest.raises(AuthenticationFailed, match="invalid_token"):
        server.evaluate(b"\x01")


def test_oauthbearer_refuses_unsigned_and_foreign_keys_tokens(signer):
    key, jwks = signer
    validator = _validator(jwks)
    unsigned = jwt.encode({"sub": "alice", "iat": int(time.time()), "exp": int(time.time()) + 60}, None,
                          algorithm="none", headers={"kid": "k1"})
    other = ec.generate_private_key(ec.SECP256R1())
    rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    for token in (unsigned, _token(other), _token(rsa_key, algorithm="RS256")):
        server = OAuthBearerServer(validator.validate)
        assert json.loads(server.evaluate(client_initial_response(token))) == {"status": "invalid_token"}


def test_oauthbearer_initial_response_framing():
    assert client_initial_response("a.b.c") == b"n,,\x01auth=Bearer a.b.c\x01\x01"
    assert parse_initial_response(b"n,a=alice,\x01auth=Bearer a.b.c\x01ext=1\x01\x01") == (
        "a.b.c", "alice", {"ext": "1"})
    for bad in (b"n,,\x01\x01", b"n,,\x01auth=Basic a.b.c\x01\x01", b"y,,\x01auth=Bearer a.b.c\x01\x01"):
        with pytest.raises(InvalidCredentials):
            parse_initial_response(bad)


# ---- listener configuration ------------------------------------------------------------

class Props:
    """A node's per-listener lookup over a dict, as strom.config's listener_value."""

    def __init__(self, values: dict):
        self.values = values

    def listener_value(self, listener, name, mechanism=None):
        prefix = f"listener.name.{listener.lower()}."
        for key in ([f"{prefix}{mechanism.lower()}.{name}"] if mechanism else []) + [prefix + name, name]:
            if key in self.values:
                return self.values[key]
        return None


def test_a_sasl_listener_reads_kafkas_listener_and_mechanism_prefixed_properties():
    sasl = listener_sasl(Props({
        "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": KAFKA_PLAIN_JAAS,
        "listener.name.sasl_plaintext.scram-sha-512.connections.max.reauth.ms": "60000",
    }), "SASL_PLAINTEXT")
    assert sasl.mechanisms == ["PLAIN", "SCRAM-SHA-512"]
    assert sasl.plain_users == {"admin": "admin-secret", "alice": "alice-secret"}
    assert sasl.reauth_ms == {"PLAIN": 0, "SCRAM-SHA-512": 60000}


@pytest.mark.parametrize("values, name", [
    ({}, "listener.name.sasl_ssl.sasl.enabled.mechanisms"),  # Kafka's default is GSSAPI
    ({"sasl.enabled.mechanisms": "PLAIN"}, "listener.name.sasl_ssl.plain.sasl.jaas.config"),
    ({"sasl.enabled.mechanisms": "PLAIN", "sasl.jaas.config": "x required"},
     "listener.name.sasl_ssl.plain.sasl.jaas.config"),
    ({"sasl.enabled.mechanisms": "DIGEST-MD5"}, "listener.name.sasl_ssl.sasl.enabled.mechanisms"),
    ({"sasl.enabled.mechanisms": "OAUTHBEARER"}, "listener.name.sasl_ssl.oauthbearer.sasl.oauthbearer.jwks"),
])
def test_a_bad_sasl_listener_config_names_the_property(values, name):
    with pytest.raises(SaslConfigError) as e:
        listener_sasl(Props(values), "SASL_SSL")
    assert e.value.name.startswith(name)
