"""Socket buffer sizes on real loopback sockets, as Kafka's SocketServer and NetworkClient set them:
socket.receive.buffer.bytes (SO_RCVBUF) on a Server's listening socket before it listens, so
that accepted connections inherit it and announce a window scale that fits it;
socket.send.buffer.bytes (SO_SNDBUF) on each accepted connection; a KafkaConnection's receive
buffer (the replica fetcher's replica.socket.receive.buffer.bytes) before it connects. -1
leaves the OS default. Linux reports twice the size set (its bookkeeping overhead), and a
socket's window scale in TCP_INFO (tcpi_rcv_wscale, the high nibble of byte 6)."""
from __future__ import annotations

import asyncio
import socket

import pytest

from protocol.client import KafkaConnection
from protocol.net import Server

HOST = "127.0.0.1"
pytestmark = pytest.mark.skipif(not hasattr(socket, "TCP_INFO"), reason="TCP_INFO is Linux's")


def run(coro, timeout: float = 10.0):
    async def bounded():
        async with asyncio.timeout(timeout):
            return await coro
    return asyncio.run(bounded())


async def no_answer(frame):
    return []


def buffers(sock) -> tuple[int, int]:
    return (sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF),
            sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF))


def rcv_wscale(sock) -> int:
    """The window scale this side announced when the connection was made."""
    return sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 104)[6] >> 4


def os_default_accepted() -> tuple[tuple[int, int], int]:
    """(SO_RCVBUF, SO_SNDBUF) and window scale of a connection accepted by a listener no option
    was set on: what the OS gives."""
    with socket.socket() as listener:
        listener.bind((HOST, 0))
        listener.listen()
        with socket.create_connection(listener.getsockname()) as _client:
            accepted, _ = listener.accept()
            with accepted:
                return buffers(accepted), rcv_wscale(accepted)


async def accepted_socket(server: Server, port: int):
    """Connect to ``server``; its side of the connection once accepted (and the client's writer)."""
    _, writer = await asyncio.open_connection(HOST, port)
    while not server.connections:
        await asyncio.sleep(0.005)
    conn = next(iter(server.connections))
    return conn.transport.get_extra_info("socket"), writer


async def serve_and_accept(**buffer_bytes):
    """(listener, accepted) sockets' (SO_RCVBUF, SO_SNDBUF), and the accepted one's window scale."""
    server = Server(no_answer, 1 << 20, **buffer_bytes)
    port = server.bind(HOST, 0)
    server.start()
    try:
        accepted, writer = await accepted_socket(server, port)
        found = buffers(server.sockets[0]), buffers(accepted), rcv_wscale(accepted)
        writer.close()
        return found
    finally:
        await server.close()


def test_the_listener_gets_socket_receive_buffer_bytes_before_it_listens_and_connections_inherit_it():
    listener, accepted, wscale = run(serve_and_accept(receive_buffer_bytes=102400))
    assert listener[0] == accepted[0] == 2 * 102400
    # The window scale was chosen for the listener's buffer when the connection was made, which
    # is why Kafka sets it before bind: set on the accepted socket, it would come too late.
    _, default_wscale = os_default_accepted()
    assert wscale < default_wscale


def test_accepted_connections_get_socket_send_buffer_bytes():
    _, accepted, _ = run(serve_and_accept(send_buffer_bytes=102400))
    assert accepted[1] == 2 * 102400


def test_minus_one_leaves_the_os_defaults():
    listener, accepted, wscale = run(serve_and_accept(send_buffer_bytes=-1, receive_buffer_bytes=-1))
    with socket.socket() as fresh:
        assert listener == buffers(fresh)
    assert (accepted, wscale) == os_default_accepted()


async def client_side(receive_buffer_bytes: int):
    server = Server(no_answer, 1 << 20)
    port = server.bind(HOST, 0)
    server.start()
    conn = KafkaConnection(HOST, port, receive_buffer_bytes=receive_buffer_bytes)
    try:
        await conn.connect(2.0)
        sock = conn._transport.get_extra_info("socket")
        return buffers(sock)[0], rcv_wscale(sock)
    finally:
        await conn.close()
        await server.close()


def test_a_client_connection_gets_its_receive_buffer_before_it_connects():
    rcvbuf, wscale = run(client_side(65536))
    assert rcvbuf == 2 * 65536
    _, default_wscale = run(client_side(-1))
    assert wscale < default_wscale, "the window scale it announced fits the buffer"


def test_a_refused_client_connection_with_a_receive_buffer_is_still_connection_refused():
    with socket.socket() as s:
        s.bind((HOST, 0))
        port = s.getsockname()[1]  # bound, never listening: connecting is refused
        with pytest.raises(ConnectionRefusedError):
            run(KafkaConnection(HOST, port, receive_buffer_bytes=65536).connect(2.0))


async def accepted_options() -> tuple[int, int]:
    """(SO_KEEPALIVE, TCP_NODELAY) of a connection a Server accepted."""
    server = Server(no_answer, 1 << 20)
    port = server.bind(HOST, 0)
    server.start()
    try:
        accepted, writer = await accepted_socket(server, port)
        found = (accepted.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE),
                 accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
        writer.close()
        return found
    finally:
        await server.close()


def test_accepted_connections_keep_alive_and_send_at_once_as_in_kafka():
    """Kafka's Acceptor turns on SO_KEEPALIVE (a peer whose host vanished is found by TCP,
    not only by connections.max.idle.ms) and TCP_NODELAY on every accepted socket."""
    keepalive, nodelay = run(accepted_options())
    assert keepalive and nodelay
