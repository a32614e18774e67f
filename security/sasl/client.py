"""SASL on a node's own connections (inter-broker and controller listeners): PLAIN and SCRAM,
as a Kafka client authenticates (SaslHandshake v1, then the mechanism's tokens in
SaslAuthenticate v1 requests). ``authenticator(...)`` makes the ``authenticate`` step of
protocol.client.ClientSecurity; a refusal raises ConnectionError with the broker's message.

The node does not re-authenticate a connection (KIP-368's client side): past its session's
lifetime the peer closes it, and the node connects anew as after any lost connection.
"""
from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from protocol import messages as M
from protocol.errors import Error
from security.sasl.config import ListenerConfig, SaslConfigError, client_credentials
from security.sasl.mechanism import PLAIN
from security.sasl.plain import plain_client_token
from security.sasl.scram import HASHES, ScramClient

SASL_HANDSHAKE_KEY, SASL_AUTHENTICATE_KEY = 17, 36
CLIENT_MECHANISMS = (PLAIN, *HASHES)


def authenticator(mechanism: str, username: str, password: str) -> Callable[[Any], Awaitable[None]]:
    """The step that authenticates a new KafkaConnection as ``username`` with ``mechanism``."""
    if mechanism not in CLIENT_MECHANISMS:
        raise ValueError(f"a node authenticates its own connections with {', '.join(CLIENT_MECHANISMS)}, "
                         f"not {mechanism}")

    async def authenticate(conn) -> None:
        where = f"{conn.host}:{conn.port}"
        handshake = await conn.request(SASL_HANDSHAKE_KEY, 1, M.SaslHandshakeRequest(mechanism=mechanism))
        if handshake.error_code != Error.NONE:
            raise ConnectionError(f"SASL handshake with {where} failed: {Error(handshake.error_code).name} "
                                  f"(enabled mechanisms: {', '.join(handshake.mechanisms)})")

        async def exchange(token: bytes) -> bytes:
            request = M.SaslAuthenticateRequest(auth_bytes=token)
            response = await conn.request(SASL_AUTHENTICATE_KEY, 1, request)
            if response.error_code != Error.NONE:
                raise ConnectionError(f"SASL {mechanism} authentication with {where} failed: "
                                      f"{response.error_message or Error(response.error_code).name}")
            return bytes(response.auth_bytes)

        if mechanism == PLAIN:
            await exchange(plain_client_token(username, password))
            return
        client = ScramClient(mechanism, username, password)
        server_first = await exchange(client.first())
        try:
            final = client.final(server_first)
        except ValueError as e:
            raise ConnectionError(f"SASL {mechanism} authentication with {where} failed: {e}") from None
        server_final = await exchange(final)
        try:
            client.verify(server_final)
        except ValueError as e:
            raise ConnectionError(f"SASL {mechanism} authentication with {where} failed: {e}") from None

    return authenticate


def listener_authenticator(config: ListenerConfig, listener_name: str,
                           mechanism_property: str) -> Callable[[Any], Awaitable[None]]:
    """How this node authenticates its connections to ``listener_name`` (a SASL listener of
    another node), as Kafka's inter-broker client: with the mechanism ``mechanism_property``
    names (sasl.mechanism.inter.broker.protocol or sasl.mechanism.controller.protocol) and the
    username and password of the listener's sasl.jaas.config for it. SaslConfigError names the
    property that is wrong."""
    mechanism = config.listener_value(None, mechanism_property)
    if mechanism not in CLIENT_MECHANISMS:
        raise SaslConfigError(mechanism_property, f"a node authenticates its own connections with "
                              f"{', '.join(CLIENT_MECHANISMS)}, not {mechanism}")
    username, password = client_credentials(config, listener_name, mechanism)
    return authenticator(mechanism, username, password)
