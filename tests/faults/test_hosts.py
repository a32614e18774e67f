"""What the trial harness's hosts leave behind when its process is told to stop."""
from __future__ import annotations

import signal
import socket
import subprocess
import sys
import threading

import pytest

from tests.faults.hosts import Network, available

WHY_NOT = available()
pytestmark = pytest.mark.skipif(WHY_NOT is not None, reason=f"no network namespaces here: {WHY_NOT}")

HOLDER = """
import time
from tests.faults.hosts import Network, exit_on_sigterm
exit_on_sigterm()
with Network([1, 2]) as net:
    print(net.namespace(1), net.namespace(2), net.bridge, flush=True)
    time.sleep(60)
"""


def namespaces() -> str:
    return subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout


def test_a_soak_or_trial_stopped_with_sigterm_removes_its_namespaces_and_bridge():
    proc = subprocess.Popen([sys.executable, "-c", HOLDER], stdout=subprocess.PIPE, text=True)
    try:
        one, two, bridge = proc.stdout.readline().split()
        assert one in namespaces() and two in namespaces()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 128 + signal.SIGTERM
    finally:
        proc.kill()
    left = namespaces()
    assert one not in left and two not in left
    links = subprocess.run(["ip", "link", "show", bridge], capture_output=True, text=True)
    assert links.returncode != 0, f"bridge {bridge} left behind"


SENDER = """
import socket, sys
server = socket.create_server((sys.argv[1], 0))
print(server.getsockname()[1], flush=True)
conn, _ = server.accept()
conn.sendall(b"x" * int(sys.argv[2]))
conn.close()
"""


def test_a_client_namespace_counts_what_each_node_sends_it_and_no_fault_touches_it():
    with Network([1, 2], clients=[3]) as net:
        senders, received = {}, {}
        for node, size in ((1, 300_000), (2, 20_000)):
            proc = subprocess.Popen([*net.prefix(node), sys.executable, "-c", SENDER, net.address(node),
                                     str(size)], stdout=subprocess.PIPE, text=True)
            senders[node] = (proc, int(proc.stdout.readline()))
            net.count_from(3, node, senders[node][1])
        net.partition([{1}, {2}])  # between the nodes: the client keeps both
        net.heal()  # and the counting rules outlive a heal

        def read_all() -> None:
            net.enter(3)  # this thread only
            for node, (_, port) in senders.items():
                with socket.create_connection((net.address(node), port), timeout=10) as s:
                    received[node] = sum(iter(lambda s=s: len(s.recv(65536)), 0))

        reader = threading.Thread(target=read_all)
        reader.start()
        reader.join(30)
        for proc, _ in senders.values():
            proc.wait(10)
        counted = net.received(3)
    assert received == {1: 300_000, 2: 20_000}
    # IP and TCP headers counted too: more than the payload, far less than twice it
    assert 300_000 < counted[1] < 400_000 and 20_000 < counted[2] < 40_000, counted
