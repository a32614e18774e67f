"""The latency fault's delaying proxy: its start-up handshake (the port it prints) and what it
forwards, byte for byte, both ways."""
from __future__ import annotations

import socket
import subprocess
import sys
import threading

import pytest

from tests.faults.proxy import DelayProxy, _first_line

pytestmark = pytest.mark.processes


def _echo_server() -> tuple[socket.socket, int]:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()

    def serve() -> None:
        conn, _ = server.accept()
        with conn:
            while data := conn.recv(65536):
                conn.sendall(data)

    threading.Thread(target=serve, daemon=True).start()
    return server, server.getsockname()[1]


def test_the_proxy_forwards_every_byte_both_ways_in_order():
    server, port = _echo_server()
    proxy = DelayProxy("127.0.0.1", ("127.0.0.1", port), 0.01, 0.01, seed=1)
    try:
        payload = bytes(range(256)) * 1000
        with socket.create_connection(("127.0.0.1", proxy.port), timeout=30) as s:
            s.sendall(payload)
            got = b""
            while len(got) < len(payload) and (data := s.recv(65536)):
                got += data
        assert got == payload
    finally:
        proxy.stop()
        server.close()
    assert proxy.proc.returncode is not None


def test_the_first_line_is_read_whole_however_it_arrives():
    # the port in two writes, the newline last: the line is the port, not a part of it
    code = "import sys, time; sys.stdout.write('403'); sys.stdout.flush(); time.sleep(0.3); print('39')"
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    try:
        assert _first_line(proc, 30.0) == "40339\n"
    finally:
        proc.wait()
        assert proc.stdout is not None
        proc.stdout.close()


def test_a_proxy_that_prints_nothing_is_reported_with_what_it_printed():
    proc = subprocess.Popen([sys.executable, "-c", "print('no port', flush=True)"], stdout=subprocess.PIPE)
    try:
        line = _first_line(proc, 30.0)
        assert line == "no port\n" and not line.strip().isdigit()
    finally:
        proc.wait()
        assert proc.stdout is not None
        proc.stdout.close()
