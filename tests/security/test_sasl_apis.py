"""SaslHandshake and SaslAuthenticate through a Dispatcher, on a SASL_PLAINTEXT session: the
gating before authentication, failures, KIP-368's session lifetime and re-authentication, and
the node's own client side (security/sasl/client.py) against them."""
from __future__ import annotations

import asyncio
import contextvars

import pytest

from metadata.security import SCRAM_SHA_512
from protocol import messages as M
from protocol.context import SASL_PLAINTEXT, KafkaPrincipal, Session, current_session
from protocol.dispatch import Api, Dispatcher
from protocol.errors import Error
from protocol.headers import encode_request, read_response_header
from protocol.types import Reader
from security.sasl.apis import SaslApis
from security.sasl.client import authenticator
from security.sasl.config import ListenerSasl
from security.sasl.scram import make_credential

METADATA_KEY, HANDSHAKE, AUTHENTICATE = 3, 17, 36
CREDENTIALS = {"alice": {SCRAM_SHA_512: make_credential("SCRAM-SHA-512", "alice-secret")},
               "bob": {SCRAM_SHA_512: make_credential("SCRAM-SHA-512", "bob-secret")}}


class Connection:
    """One client connection's requests through the dispatcher, in the connection's own context
    (as protocol/net.py runs each connection's requests in its task)."""

    def __init__(self, dispatcher: Dispatcher):
        self.dispatcher = dispatcher
        self.session = Session("SASL_PLAINTEXT", SASL_PLAINTEXT, client_address="127.0.0.1")
        self.context = contextvars.copy_context()
        self.context.run(current_session.set, self.session)
        self.closed = False
        self.host, self.port = "127.0.0.1", 9094
        self._ids = 0

    async def request(self, api_key: int, version: int, body, timeout: float = 5.0):
        if self.closed:
            raise ConnectionError("closed")
        self._ids += 1
        frame = encode_request(api_key, version, self._ids, "test", body)[4:]
        task = asyncio.get_running_loop().create_task(self.dispatcher.handle(memoryview(frame)),
                                                      context=self.context)
        parts = await task
        if parts is None:
            self.closed = True
            raise ConnectionError("the server closed the connection")
        data = b"".join(bytes(p) for p in parts)[4:]
        r = Reader(memoryview(data))
        read_response_header(r, api_key, version)
        return M.RESPONSES[api_key].decode(version, r)


    async def raw(self, token: bytes) -> bytes:
        """A bare SASL token (after SaslHandshake v0) and the bare answer."""
        if self.closed:
            raise ConnectionError("closed")
        task = asyncio.get_running_loop().create_task(self.dispatcher.handle(memoryview(token)),
                                                      context=self.context)
        parts = await task
        if parts is None:
            self.closed = True
            raise ConnectionError("the server closed the connection")
        data = b"".join(bytes(p) for p in parts)
        assert int.from_bytes(data[:4], "big") == len(data) - 4
        return data[4:]


async def _metadata(ctx, request):
    return M.MetadataResponse(brokers=[], topics=[])


def make_dispatcher(reauth_ms: int = 0) -> Dispatcher:
    sasl = ListenerSasl("SASL_PLAINTEXT", ["PLAIN", "SCRAM-SHA-512"],
                        plain_users={"alice": "alice-secret", "bob": "bob-secret"},
                        reauth_ms={"PLAIN": reauth_ms, "SCRAM-SHA-512": reauth_ms})
    apis = SaslApis({"SASL_PLAINTEXT": sasl}.get,
                    lambda user, mech: CREDENTIALS.get(user, {}).get(SCRAM_SHA_512),
                    failed_authentication_delay_ms=0)
    return Dispatcher(apis.apis() + [Api(METADATA_KEY, 12, 12, _metadata)])


def run(coro):
    return asyncio.run(coro)


def test_an_unauthenticated_connection_may_send_nothing_but_api_versions_and_the_handshake():
    async def scenario():
        conn = Connection(make_dispatcher())
        versions = await conn.request(18, 3, M.ApiVersionsRequest(client_software_name="t",
                                                                  client_software_version="1"))
        served = {k.api_key: (k.min_version, k.max_version) for k in versions.api_keys}
        assert served[HANDSHAKE] == (0, 1) and served[AUTHENTICATE] == (0, 2)
        with pytest.raises(ConnectionError):
            await conn.request(METADATA_KEY, 12, M.MetadataRequest(topics=None))
        assert not conn.session.authenticated
    run(scenario())


def test_handshake_with_a_mechanism_not_enabled_answers_the_enabled_list_and_closes():
    async def scenario():
        conn = Connection(make_dispatcher())
        answer = await conn.request(HANDSHAKE, 1, M.SaslHandshakeRequest(mechanism="GSSAPI"))
        assert answer.error_code == Error.UNSUPPORTED_SASL_MECHANISM
        assert answer.mechanisms == ["PLAIN", "SCRAM-SHA-512"]
    run(scenario())


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
def test_a_node_authenticates_with_plain_and_scram_and_then_is_served(mechanism):
    async def scenario():
        conn = Connection(make_dispatcher())
        await authenticator(mechanism, "alice", "alice-secret")(conn)
        assert conn.session.authenticated and conn.session.principal == KafkaPrincipal("User", "alice")
        assert conn.session.sasl_mechanism == mechanism
        await conn.request(METADATA_KEY, 12, M.MetadataRequest(topics=None))
    run(scenario())


@pytest.mark.parametrize("mechanism, user, password, message", [
    ("PLAIN", "alice", "wrong", "Authentication failed: Invalid username or password"),
    ("PLAIN", "mallory", "x", "Authentication failed: Invalid username or password"),
    ("SCRAM-SHA-512", "alice", "wrong", "Authentication failed during authentication due to invalid "
                                        "credentials with SASL mechanism SCRAM-SHA-512"),
    ("SCRAM-SHA-512", "mallory", "x", "Authentication failed during authentication due to invalid "
                                      "credentials with SASL mechanism SCRAM-SHA-512"),
])
def test_wrong_password_and_unknown_user_are_refused_with_kafkas_message(mechanism, user, password, message):
    async def scenario():
        conn = Connection(make_dispatcher())
        with pytest.raises(ConnectionError) as e:
            await authenticator(mechanism, user, password)(conn)
        assert str(e.value).endswith(message)
        assert not conn.session.authenticated
        # The exchange is over (the server closes the connection): another try is refused.
        retry = M.SaslAuthenticateRequest(auth_bytes=b"\x00alice\x00alice-secret")
        assert (await conn.request(AUTHENTICATE, 1, retry)).error_code == Error.ILLEGAL_SASL_STATE
        assert not conn.session.authenticated
    run(scenario())


def test_session_lifetime_is_connections_max_reauth_ms_and_reauthentication_keeps_the_connection():
    async def scenario():
        conn = Connection(make_dispatcher(reauth_ms=60_000))
        await conn.request(HANDSHAKE, 1, M.SaslHandshakeRequest(mechanism="PLAIN"))
        plain = M.SaslAuthenticateRequest(auth_bytes=b"\x00alice\x00alice-secret")
        answer = await conn.request(AUTHENTICATE, 1, plain)
        assert answer.error_code == Error.NONE and answer.session_lifetime_ms == 60_000
        first_deadline = conn.session.reauth_deadline_ms
        await asyncio.sleep(0.002)
        await authenticator("PLAIN", "alice", "alice-secret")(conn)  # the same principal again
        assert conn.session.authenticated and conn.session.reauth_deadline_ms > first_deadline
        with pytest.raises(ConnectionError, match="Cannot change principals during re-authentication "
                                                  "from User.alice: User.bob"):
            await authenticator("PLAIN", "bob", "bob-secret")(conn)
    run(scenario())


def test_a_connection_past_its_session_lifetime_is_closed_unless_it_reauthenticates():
    async def scenario():
        conn = Connection(make_dispatcher(reauth_ms=1))
        await authenticator("SCRAM-SHA-512", "alice", "alice-secret")(conn)
        await asyncio.sleep(0.01)  # past the 1 ms session
        # Re-authentication is let through past the deadline.
        await authenticator("SCRAM-SHA-512", "alice", "alice-secret")(conn)
        await asyncio.sleep(0.01)
        with pytest.raises(ConnectionError, match="closed"):
            await conn.request(METADATA_KEY, 12, M.MetadataRequest(topics=None))
    run(scenario())


def test_an_unauthenticated_request_over_sasl_server_max_receive_size_closes_the_connection():
    async def scenario():
        dispatcher = make_dispatcher()
        dispatcher.unauthenticated_max_bytes = 1000
        conn = Connection(dispatcher)
        with pytest.raises(ConnectionError, match="closed"):
            await conn.request(AUTHENTICATE, 1, M.SaslAuthenticateRequest(auth_bytes=b"x" * 2000))
    run(scenario())


def test_handshake_on_a_listener_without_sasl_answers_illegal_sasl_state():
    async def scenario():
        conn = Connection(make_dispatcher())
        conn.session = Session("PLAINTEXT", client_address="127.0.0.1")
        conn.context.run(current_session.set, conn.session)
        answer = await conn.request(HANDSHAKE, 1, M.SaslHandshakeRequest(mechanism="PLAIN"))
        assert answer.error_code == Error.ILLEGAL_SASL_STATE
    run(scenario())


def test_after_handshake_v0_plain_tokens_travel_bare_and_then_requests_are_served():
    async def scenario():
        conn = Connection(make_dispatcher())
        handshake = await conn.request(HANDSHAKE, 0, M.SaslHandshakeRequest(mechanism="PLAIN"))
        assert handshake.error_code == Error.NONE
        assert await conn.raw(b"\x00alice\x00alice-secret") == b""
        assert conn.session.authenticated and conn.session.principal == KafkaPrincipal("User", "alice")
        await conn.request(METADATA_KEY, 12, M.MetadataRequest(topics=None))
    run(scenario())


def test_after_handshake_v0_scram_completes_with_bare_tokens():
    from security.sasl.scram import ScramClient

    async def scenario():
        conn = Connection(make_dispatcher())
        await conn.request(HANDSHAKE, 0, M.SaslHandshakeRequest(mechanism="SCRAM-SHA-512"))
        client = ScramClient("SCRAM-SHA-512", "bob", "bob-secret")
        server_first = await conn.raw(client.first())
        client.verify(await conn.raw(client.final(server_first)))
        assert conn.session.authenticated and conn.session.principal == KafkaPrincipal("User", "bob")
    run(scenario())


def test_after_handshake_v0_a_wrong_password_closes_the_connection_unanswered():
    async def scenario():
        conn = Connection(make_dispatcher())
        await conn.request(HANDSHAKE, 0, M.SaslHandshakeRequest(mechanism="PLAIN"))
        with pytest.raises(ConnectionError):
            await conn.raw(b"\x00alice\x00wrong")
        assert not conn.session.authenticated
    run(scenario())
