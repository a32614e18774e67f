"""Hosts for fault trials: one network namespace per node, joined by a bridge, with faults cut
into the links by iptables inside the namespaces.

    with Network([1, 2, 3, 4, 5, 6]) as net:     # node ids
        net.address(4)                             # "10.a.b.14": node 4's only address
        net.prefix(4)                              # ["ip", "netns", "exec", "strom-…-4"]
        net.partition([{1, 2, 4}, {3, 5, 6}])      # no traffic between the groups
        net.heal()

    with Network([1, 2, 3, 4, 5, 6], clients=[7]) as net:   # and a namespace for clients
        net.count_from(7, 4, 9092)                 # count what node 4's port 9092 sends to 7
        net.enter(7)                               # this thread's new sockets are node 7's
        net.received(7)                            # {4: bytes}

Layout (all of it made by ``Network`` and removed by ``close``; nothing else is touched):

| piece            | name                         | address                                  |
|------------------|------------------------------|------------------------------------------|
| bridge (root ns) | ``sbr<tag>``                 | 10.a.b.1/24: the test process's own way in |
| namespace        | ``strom-<tag>-<node>``       | lo up; ``eth0`` 10.a.b.(10+node)/24      |
| veth pair        | ``sv<tag><node>`` on the bridge, its peer renamed ``eth0`` in the namespace |

Clients are namespaces like the nodes' but outside every fault: ``partition``, ``loss`` and
``heal`` touch the nodes only, so a client keeps every node (as the test process does), and the
counting rules in its INPUT chain outlive every heal. A thread that calls ``enter(client)``
(setns(2) on that thread alone) makes its sockets there, and so do the threads it starts after:
librdkafka's, if it builds its client after entering. What each node sent to the client is then
told apart from what it sent the test process.

The subnet 10.a.b.0/24 is picked at random among those no route of the machine covers, and a
namespace has no default route: its traffic reaches the other namespaces and the bridge address,
and nothing beyond this machine.

Faults are DROP rules in the INPUT chain of the receiving namespace's filter table, so a rule cuts
the link where a real network would: the process sees silence, not a refused connection.

| fault                         | rules                                                        |
|-------------------------------|--------------------------------------------------------------|
| partition(groups)             | each node drops packets to and from every node outside its   |
|                               | groups (a node in two groups is a bridge: it sees both sides)|
| drop(src, dst)                | one way: packets from src to dst are lost, dst to src pass    |
| loss(p, nodes)                | each packet to or from the nodes is lost with probability p  |
|                               | (iptables' statistic match)                                  |
| isolate_client(nodes)         | the test process (the bridge address) cannot reach the nodes |
| redirect(node, dst, port, p)  | the node's connections to dst:port go through the gateway's  |
|                               | port p (a delaying proxy, tests/faults/proxy.py)             |
| count_from(client, node, port)| (no fault) a rule counting the bytes the node's port sends   |
|                               | the client; ``received(client)`` reads them per node         |
| heal()                        | every rule removed                                           |

``available()`` says whether this machine can do it (root, ``ip netns``, iptables) and why not:
tests skip with that reason and never pass silently.
"""
from __future__ import annotations

import ctypes
import ipaddress
import os
import random
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterable

NS_PREFIX = "strom-"
CMD_TIMEOUT_S = 10.0
CLONE_NEWNET = 0x40000000  # setns(2)'s nstype for a network namespace


class NetworkError(RuntimeError):
    pass


def _run(*cmd: str, check: bool = True) -> subprocess.CompletedProcess:
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=CMD_TIMEOUT_S)
    if check and result.returncode != 0:
        raise NetworkError(f"{' '.join(cmd)}: exit {result.returncode}: {result.stderr.strip()}")
    return result


def available() -> str | None:
    """None if namespaces, veth pairs, bridges and iptables work here; otherwise why not."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    for tool in ("ip", "iptables"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (make setup installs Debian's iproute2 and iptables)"
    probe = f"{NS_PREFIX}probe-{os.getpid()}"
    try:
        _run("ip", "netns", "add", probe)
        try:
            _run("ip", "netns", "exec", probe, "iptables", "-A", "INPUT", "-s", "10.0.0.1", "-j", "DROP")
        finally:
            _run("ip", "netns", "del", probe, check=False)
    except (NetworkError, OSError, subprocess.SubprocessError) as e:
        return f"network namespaces with iptables do not work here: {e}"
    return None


def _routed_networks() -> list[ipaddress.IPv4Network]:
    out = _run("ip", "-4", "route", "show", "table", "all").stdout
    nets = []
    for line in out.splitlines():
        first = line.split()[0] if line.split() else ""
        if first in ("default", "broadcast", "local"):
            first = line.split()[1] if first != "default" else "0.0.0.0/0"
        try:
            nets.append(ipaddress.ip_network(first, strict=False))
        except ValueError:
            continue
    return [n for n in nets if n.prefixlen > 0]


def _free_subnet(rng: random.Random) -> ipaddress.IPv4Network:
    taken = _routed_networks()
    for _ in range(1000):
        net = ipaddress.ip_network(f"10.{rng.randrange(64, 250)}.{rng.randrange(1, 250)}.0/24")
        if not any(net.overlaps(t) for t in taken):
            return net
    raise NetworkError("no free 10.x.y.0/24 subnet")


def exit_on_sigterm() -> None:
    """Make SIGTERM (``kill``, a cancelled job) end the process through SystemExit, so that the
    ``finally`` blocks on the way out remove every Network, mount and process; by default the
    signal ends it at once and leaves namespaces, a bridge and tmpfs mounts behind."""
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))


class Network:
    """Namespaces for ``nodes`` and ``clients`` (small non-negative ints, none in both), created
    at construction."""

    def __init__(self, nodes: Iterable[int], rng: random.Random | None = None,
                 clients: Iterable[int] = ()) -> None:
        rng = rng or random.Random()
        self.tag = f"{os.getpid() % 4096:03x}{rng.randrange(16 ** 3):03x}"
        self.nodes = sorted(nodes)
        self.clients = sorted(clients)
        if set(self.nodes) & set(self.clients):
            raise ValueError(f"ids both nodes and clients: {sorted(set(self.nodes) & set(self.clients))}")
        self.subnet = _free_subnet(rng)
        hosts = list(self.subnet.hosts())
        self.gateway = str(hosts[0])  # the bridge's address: where the test process stands
        self._addresses = {n: str(hosts[9 + n]) for n in [*self.nodes, *self.clients]}
        self.bridge = f"sbr{self.tag}"
        self._made: list[tuple[str, str]] = []  # ("ns" | "link", name) to remove, newest last
        try:
            self._build()
        except BaseException:
            self.close()
            raise

    # ---- layout --------------------------------------------------------------------------------
    def namespace(self, node: int) -> str:
        return f"{NS_PREFIX}{self.tag}-{node}"

    def address(self, node: int) -> str:
        return self._addresses[node]

    def prefix(self, node: int) -> list[str]:
        """The command prefix that runs a program inside the node's namespace."""
        return ["ip", "netns", "exec", self.namespace(node)]

    def _build(self) -> None:
        bits = self.subnet.prefixlen
        _run("ip", "link", "add", self.bridge, "type", "bridge")
        self._made.append(("link", self.bridge))
        _run("ip", "addr", "add", f"{self.gateway}/{bits}", "dev", self.bridge)
        _run("ip", "link", "set", self.bridge, "up")
        for node in [*self.nodes, *self.clients]:
            ns, outer = self.namespace(node), f"sv{self.tag}{node}"
            _run("ip", "netns", "add", ns)
            self._made.append(("ns", ns))
            _run("ip", "link", "add", outer, "type", "veth", "peer", "name", f"{outer}p")
            self._made.append(("link", outer))
            _run("ip", "link", "set", f"{outer}p", "netns", ns)
            _run("ip", "link", "set", outer, "master", self.bridge)
            _run("ip", "link", "set", outer, "up")
            inside = ["ip", "netns", "exec", ns]
            _run(*inside, "ip", "link", "set", f"{outer}p", "name", "eth0")
            _run(*inside, "ip", "addr", "add", f"{self.address(node)}/{bits}", "dev", "eth0")
            _run(*inside, "ip", "link", "set", "eth0", "up")
            _run(*inside, "ip", "link", "set", "lo", "up")

    def close(self) -> None:
        for kind, name in reversed(self._made):
            if kind == "ns":
                _run("ip", "netns", "del", name, check=False)
            else:
                _run("ip", "link", "del", name, check=False)
        self._made.clear()

    def __enter__(self) -> Network:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ---- faults --------------------------------------------------------------------------------
    def _iptables(self, node: int, *rule: str) -> None:
        _run(*self.prefix(node), "iptables", "-w", "5", *rule)

    def _drop_between(self, node: int, peer_address: str, inbound: bool = True, outbound: bool = True,
                      extra: tuple[str, ...] = ()) -> None:
        if inbound:
            self._iptables(node, "-A", "INPUT", "-s", peer_address, *extra, "-j", "DROP")
        if outbound:
            self._iptables(node, "-A", "OUTPUT", "-d", peer_address, *extra, "-j", "DROP")

    def partition(self, groups: Iterable[Iterable[int]]) -> None:
        """Each node keeps the nodes that share a group with it and loses every other node.
        A node outside every group keeps everyone; the test process keeps everyone."""
        groups = [set(g) for g in groups]
        for node in self.nodes:
            mine = [g for g in groups if node in g]
            if not mine:
                continue
            keep = set().union(*mine)
            for other in self.nodes:
                if other != node and other not in keep:
                    self._drop_between(node, self.address(other), outbound=False)

    def drop(self, src: int, dst: int) -> None:
        """Packets from src to dst are lost; dst's packets to src still arrive."""
        self._drop_between(dst, self.address(src), outbound=False)

    def loss(self, probability: float, nodes: Iterable[int] | None = None) -> None:
        """Each packet a node receives from another node is lost with the given probability."""
        chance = ("-m", "statistic", "--mode", "random", "--probability", f"{probability:.3f}")
        for node in nodes if nodes is not None else self.nodes:
            for other in self.nodes:
                if other != node:
                    self._iptables(node, "-A", "INPUT", "-s", self.address(other), *chance, "-j", "DROP")

    def isolate_client(self, nodes: Iterable[int]) -> None:
        """The test process (the bridge address) loses the nodes, and they lose it."""
        for node in nodes:
            self._drop_between(node, self.gateway, outbound=False)

    def redirect(self, node: int, dst: str, port: int, proxy_port: int) -> None:
        """The node's new connections to dst:port go to the gateway's proxy_port instead (a
        delaying proxy there forwards them), and its connections to dst:port made before are
        reset at their next packet, so they come back through the proxy."""
        self._iptables(node, "-t", "nat", "-A", "OUTPUT", "-d", dst, "-p", "tcp", "--dport", str(port),
                       "-j", "DNAT", "--to-destination", f"{self.gateway}:{proxy_port}")
        self._iptables(node, "-A", "OUTPUT", "-d", dst, "-p", "tcp", "--dport", str(port),
                       "-j", "REJECT", "--reject-with", "tcp-reset")

    def heal(self) -> None:
        for node in self.nodes:
            self._iptables(node, "-F", "INPUT")
            self._iptables(node, "-F", "OUTPUT")
            self._iptables(node, "-t", "nat", "-F", "OUTPUT")

    def rules(self, node: int) -> str:
        return _run(*self.prefix(node), "iptables", "-S").stdout

    # ---- clients -------------------------------------------------------------------------------
    def enter(self, client: int) -> None:
        """Move the calling thread into the client's namespace: the sockets it opens from now on,
        and those of the threads it starts, are the client's. Other threads stay where they are."""
        if client not in self.clients:
            raise ValueError(f"{client} is not a client of this network")
        fd = os.open(f"/var/run/netns/{self.namespace(client)}", os.O_RDONLY)
        try:
            if ctypes.CDLL(None, use_errno=True).setns(fd, CLONE_NEWNET) != 0:
                raise NetworkError(f"setns into {self.namespace(client)}: {os.strerror(ctypes.get_errno())}")
        finally:
            os.close(fd)

    def count_from(self, client: int, node: int, port: int) -> None:
        """Count the TCP bytes (IP headers included) that the node's port sends the client."""
        _run(*self.prefix(client), "iptables", "-w", "5", "-A", "INPUT", "-s", self.address(node),
             "-p", "tcp", "--sport", str(port), "-m", "comment", "--comment", f"from-{node}")

    def received(self, client: int) -> dict[int, int]:
        """Per node that ``count_from`` counts for the client: the bytes it has sent it so far."""
        listing = _run(*self.prefix(client), "iptables", "-w", "5", "-L", "INPUT", "-v", "-x", "-n").stdout
        out: dict[int, int] = {}
        for line in listing.splitlines():
            found = re.search(r"/\* from-(\d+) \*/", line)
            if found is not None:
                out[int(found.group(1))] = out.get(int(found.group(1)), 0) + int(line.split()[1])
        return out
