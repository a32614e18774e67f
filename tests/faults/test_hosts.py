"""What the trial harness's hosts leave behind when its process is told to stop."""
from __future__ import annotations

import signal
import subprocess
import sys

import pytest

from tests.faults.hosts import available

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
