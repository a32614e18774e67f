"""Real `strom controller` processes forming a KRaft quorum on loopback.

``ControllerQuorum(n)`` formats n controller directories with ``strom format
--initial-controllers id-uuid@127.0.0.1:port,...`` (KIP-853, kraft.version 1) and starts each
as ``python3 -m strom controller --config FILE`` in its own session. ``spare(node_id)`` adds a
controller formatted without a voter set (an observer until added). ``describe(node_id)``
asks one controller DescribeQuorum v2 over the wire; ``wait_for_leader`` polls the live ones.

Each controller prints to ``<dir>/controller-<id>.log``; failures carry its tail. Every
process dies with the test process (see cluster.py).

``ControllerQuorum(n, secure=True)`` secures every listener as a production cluster would
(``ClusterSecurity``): SASL_SSL everywhere, certificates from tests/security/certs.py.

| listener         | name       | served by   | mechanism     | who connects                         |
|------------------|------------|-------------|---------------|--------------------------------------|
| the controllers' | CONTROLLER | controllers | PLAIN         | raft peers, brokers                  |
| the brokers'     | SASL_SSL   | brokers     | SCRAM-SHA-512 | clients, replica fetchers, the       |
|                  |            |             |               | controllers' balanced recovery       |

Every node authenticates as ``ADMIN_USER``: on the controller listener against its JAAS user list
(PLAIN: controllers must authenticate each other before the metadata log holds any SCRAM
credential, as in Kafka's KRaft), on the brokers' with SCRAM-SHA-512 against the credential that
``strom format --add-scram`` writes into every controller's bootstrap metadata. The launchers' own
probes (DescribeQuorum, readiness, Metadata) connect the same way
(``ClusterSecurity.client_security``), and ``ClusterSecurity.client_config`` gives a
confluent-kafka client the matching properties. On loopback the clients check the host name
(the server certificate names 127.0.0.1 and localhost); elsewhere (a fault trial's network
namespaces, whose addresses the certificate does not name) they check the chain only
(``ssl.endpoint.identification.algorithm`` empty).
"""
from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import ssl
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from engine.checkpoint import new_uuid, uuid_to_str
from protocol import messages as M
from protocol.client import ClientSecurity, KafkaConnection
from security.sasl.client import authenticator
from strom import cluster_status as status
from tests.integration.cluster import (
    _LIVE,
    REPO_ROOT,
    NodeError,
    _die_with_parent,
    free_ports,
    render_properties,
    wait_ready,
)
from tests.security.certs import Pki, make_pki

DESCRIBE_QUORUM = 55
METADATA_TOPIC = "__cluster_metadata"
CLUSTER_ID = "c3Ryb20tcXVvcnVtLXRlc3Q"
STOP_TIMEOUT_S = 30.0
KEEP_DIR_ENV = "STROM_KEEP_CLUSTER_DIR"  # set: close() leaves the directory (logs, data) in place
READY_S = 60.0
SECURE_LISTENER = "SASL_SSL"  # the brokers' one listener in a secure cluster
MECHANISM = "SCRAM-SHA-512"  # the brokers' listener: clients and inter-broker connections
CONTROLLER_MECHANISM = "PLAIN"  # the controllers' listener (see ClusterSecurity.node_properties)
ADMIN_USER, ADMIN_PASSWORD = "admin", "admin-secret"
LOOPBACK = ("127.0.0.1", "localhost")


class ClusterSecurity:
    """SASL_SSL with SCRAM-SHA-512 on every listener (see the module doc): the nodes' properties,
    the format flags that create the user, and what a client connects with."""

    def __init__(self, directory: str, check_hostname: bool = True, user: str = ADMIN_USER,
                 password: str = ADMIN_PASSWORD, mechanism: str = MECHANISM) -> None:
        self.pki: Pki = make_pki(directory)
        self.check_hostname = check_hostname
        self.user, self.password, self.mechanism = user, password, mechanism

    def node_properties(self) -> dict[str, str]:
        """What every node's server.properties holds besides its listeners and their map: PLAIN on
        the controller listener (a JAAS user list: the controllers must authenticate each other
        before any SCRAM credential is committed, so Kafka's KRaft cannot use SCRAM there),
        SCRAM on the brokers' listener."""
        user, password = self.user, self.password
        scram = ("org.apache.kafka.common.security.scram.ScramLoginModule required "
                 f'username="{user}" password="{password}";')
        plain = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
                 f'username="{user}" password="{password}" user_{user}="{password}";')
        broker = SECURE_LISTENER.lower()
        return {
            "ssl.keystore.type": "PEM", "ssl.keystore.location": self.pki.server.keystore,
            "ssl.truststore.type": "PEM", "ssl.truststore.location": self.pki.ca,
            "ssl.endpoint.identification.algorithm": "https" if self.check_hostname else "",
            "listener.name.controller.sasl.enabled.mechanisms": CONTROLLER_MECHANISM,
            f"listener.name.controller.{CONTROLLER_MECHANISM.lower()}.sasl.jaas.config": plain,
            "sasl.mechanism.controller.protocol": CONTROLLER_MECHANISM,
            f"listener.name.{broker}.sasl.enabled.mechanisms": self.mechanism,
            f"listener.name.{broker}.{self.mechanism.lower()}.sasl.jaas.config": scram,
            "sasl.mechanism.inter.broker.protocol": self.mechanism,
        }

    def format_flags(self) -> list[str]:
        """``strom format``'s flags that put the user in a controller's bootstrap metadata."""
        return ["--add-scram", f"{self.mechanism}=[name={self.user},password={self.password}]"]

    def client_config(self) -> dict[str, Any]:
        """A confluent-kafka (librdkafka) client's security properties."""
        return {"security.protocol": "SASL_SSL", "sasl.mechanism": self.mechanism,
                "sasl.username": self.user, "sasl.password": self.password,
                "ssl.ca.location": self.pki.ca,
                "ssl.endpoint.identification.algorithm": "https" if self.check_hostname else "none"}

    def kafka_python_config(self) -> dict[str, Any]:
        """kafka-python's keyword arguments for the same."""
        return {"security_protocol": "SASL_SSL", "sasl_mechanism": self.mechanism,
                "sasl_plain_username": self.user, "sasl_plain_password": self.password,
                "ssl_cafile": self.pki.ca, "ssl_check_hostname": self.check_hostname}

    @cached_property
    def _ssl_context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=self.pki.ca)
        ctx.check_hostname = self.check_hostname
        return ctx

    def client_security(self, controller: bool = False) -> ClientSecurity:
        """The project's client (protocol/client.py): TLS trusting the test CA, then SASL (PLAIN
        to a ``controller``'s listener, else SCRAM)."""
        mechanism = CONTROLLER_MECHANISM if controller else self.mechanism
        return ClientSecurity(ssl_context=self._ssl_context,
                              authenticate=authenticator(mechanism, self.user, self.password))


def broker_metadata(host: str, port: int, timeout: float,
                    security: ClientSecurity | None = None) -> status.BrokerAnswer | None:
    """One broker's Metadata answer (every topic) as strom.cluster_status parses it; None if it
    does not answer."""
    async def ask():
        probe = status.NodeProbe(host, port, timeout, security)
        try:
            return await status.ask_broker(probe)
        finally:
            await probe.close()

    return asyncio.run(ask())


def wait_ready_secure(host: str, port: int, node_id: int, deadline: float, security: ClientSecurity,
                      alive=lambda: True) -> None:
    """cluster.wait_ready over a secured listener: until the broker's Metadata lists ``node_id``."""
    last = None
    while time.monotonic() < deadline:
        if not alive():
            raise NodeError("the node exited before it was ready")
        last = broker_metadata(host, port, 2.0, security)
        if last is not None and node_id in last.unfenced:
            return
        time.sleep(0.1)
    raise NodeError(f"not ready on {host}:{port} in time (last answer: {last!r})")


@dataclass(frozen=True)
class Replica:
    replica_id: int
    directory_id: str
    log_end_offset: int


@dataclass(frozen=True)
class QuorumView:
    """One DescribeQuorum answer (from the leader)."""

    leader_id: int
    leader_epoch: int
    high_watermark: int
    voters: tuple[Replica, ...]
    observers: tuple[Replica, ...]

    def voter_ids(self) -> set[int]:
        return {v.replica_id for v in self.voters}

    def leader_end_offset(self) -> int:
        return next(v.log_end_offset for v in self.voters if v.replica_id == self.leader_id)

    def committed_own_epoch(self) -> bool:
        """The leader's high watermark covers its whole log, LeaderChange of its epoch included."""
        return self.high_watermark >= self.leader_end_offset() > 0


async def _describe(port: int, timeout: float, host: str = "127.0.0.1",
                    security: ClientSecurity | None = None) -> QuorumView | None:
    conn = KafkaConnection(host, port, client_id="quorum-test", security=security)
    try:
        await conn.connect(timeout)
        R = M.DescribeQuorumRequest
        request = R(topics=[R.TopicData(topic_name=METADATA_TOPIC,
                                        partitions=[R.TopicData.PartitionData(partition_index=0)])])
        response = await conn.request(DESCRIBE_QUORUM, 2, request, timeout=timeout)
    finally:
        await conn.close()
    if response.error_code or not response.topics or response.topics[0].partitions[0].error_code:
        return None
    p = response.topics[0].partitions[0]

    def replicas(states):
        return tuple(Replica(s.replica_id, uuid_to_str(s.replica_directory_id), s.log_end_offset)
                     for s in states)

    return QuorumView(p.leader_id, p.leader_epoch, p.high_watermark, replicas(p.current_voters),
                      replicas(p.observers))


def describe(port: int, timeout: float = 2.0, host: str = "127.0.0.1",
             security: ClientSecurity | None = None) -> QuorumView | None:
    """DescribeQuorum v2 at a controller: its view if it is the leader, else None."""
    try:
        return asyncio.run(_describe(port, timeout, host, security))
    except (OSError, TimeoutError, ConnectionError, EOFError):
        return None


class Controller:
    """``host``: the address it listens on; ``prefix``: a command that runs it there (a network
    namespace's ``ip netns exec``, tests/faults/hosts.py); ``security``: SASL_SSL everywhere."""

    def __init__(self, base: str, node_id: int, port: int, directory_id: str, python: str,
                 host: str = "127.0.0.1", prefix: Sequence[str] = (),
                 security: ClusterSecurity | None = None) -> None:
        self.node_id = node_id
        self.security = security
        self.port = port
        self.host = host
        self.prefix = list(prefix)
        self.directory_id = directory_id
        self.python = python
        self.dir = os.path.join(base, f"controller-{node_id}")
        self.metadata_dir = os.path.join(self.dir, "metadata")
        self.config_path = os.path.join(self.dir, "controller.properties")
        self.log_path = os.path.join(base, f"controller-{node_id}.log")
        self.proc: subprocess.Popen | None = None
        self.metrics_port = 0  # metrics.listener's port when set (ControllerQuorum's metrics=True)

    @property
    def metrics_url(self) -> str:
        return f"http://{self.host}:{self.metrics_port}/metrics"

    def metrics_property(self) -> dict[str, str]:
        return {"metrics.listener": f"http://{self.host}:{self.metrics_port}"} if self.metrics_port else {}

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def write_config(self, bootstrap: str, extra: dict[str, str] | None = None) -> None:
        os.makedirs(self.dir, exist_ok=True)
        props = {
            "process.roles": "controller",
            "node.id": str(self.node_id),
            "listeners": f"CONTROLLER://{self.host}:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT",
            "controller.quorum.bootstrap.servers": bootstrap,
            "metadata.log.dir": self.metadata_dir,
            "log.dirs": self.metadata_dir,
        }
        if self.security is not None:  # and the brokers' listener, which balanced recovery asks
            props["listener.security.protocol.map"] = f"CONTROLLER:SASL_SSL,{SECURE_LISTENER}:SASL_SSL"
            props.update(self.security.node_properties())
        props.update(self.metrics_property())
        props.update(extra or {})
        with open(self.config_path, "w") as f:
            f.write(render_properties(props))

    def run_cli(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
        cmd = [self.python, "-m", "strom", *args]
        result = subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True, timeout=timeout)
        with open(self.log_path, "a") as log:
            log.write(f"$ {' '.join(cmd)}\n{result.stdout}{result.stderr}")
        return result

    def format_argv(self, *flags: str) -> list[str]:
        """``strom format``'s arguments for this node."""
        if self.security is not None and self.role == "controller":
            flags = (*flags, *self.security.format_flags())
        return ["format", "--config", self.config_path, "--cluster-id", CLUSTER_ID, *flags]

    def format(self, *flags: str) -> None:
        format_nodes([(self, flags)])

    role = "controller"

    def start(self) -> Controller:
        cmd = [*self.prefix, self.python, "-m", "strom", self.role, "--config", self.config_path]
        with open(self.log_path, "ab") as log:
            log.write(f"$ {' '.join(cmd)}\n".encode())
            log.flush()
            self.proc = subprocess.Popen(_die_with_parent(cmd), cwd=REPO_ROOT, stdout=log,
                                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         start_new_session=True)
        _LIVE.add(self)
        return self

    def kill9(self) -> None:
        self._kill_group(signal.SIGKILL)

    def stop(self) -> int | None:
        if not self.running:
            self._kill_group(signal.SIGKILL)
            return None if self.proc is None else self.proc.returncode
        os.kill(self.proc.pid, signal.SIGTERM)
        try:
            return self.proc.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self._kill_group(signal.SIGKILL)
            raise NodeError(self.failure(f"controller {self.node_id} did not stop on SIGTERM")) from None

    def wipe(self) -> None:
        """The disk is replaced: nothing of the metadata directory survives."""
        shutil.rmtree(self.metadata_dir, ignore_errors=True)

    def _kill_group(self, sig: int) -> None:
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass
        if sig == signal.SIGKILL:
            try:
                self.proc.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                pass

    def log_tail(self, lines: int = 40) -> str:
        try:
            with open(self.log_path, errors="replace") as f:
                return "".join(f.readlines()[-lines:])
        except OSError:
            return "(no log)"

    def failure(self, what: str) -> str:
        return f"{what}\n--- {self.log_path} ---\n{self.log_tail()}"


class Broker(Controller):
    """A broker-only node (``strom broker``) whose controllers are the quorum's."""

    def __init__(self, base: str, node_id: int, port: int, python: str, host: str = "127.0.0.1",
                 prefix: Sequence[str] = (), security: ClusterSecurity | None = None) -> None:
        super().__init__(base, node_id, port, "", python, host, prefix, security)
        self.dir = os.path.join(base, f"broker-{node_id}")
        self.metadata_dir = os.path.join(self.dir, "data")
        self.config_path = os.path.join(self.dir, "broker.properties")
        self.log_path = os.path.join(base, f"broker-{node_id}.log")

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def write_config(self, bootstrap: str, extra: dict[str, str] | None = None) -> None:
        os.makedirs(self.dir, exist_ok=True)
        props = {
            "process.roles": "broker",
            "node.id": str(self.node_id),
            "listeners": f"PLAINTEXT://{self.host}:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "controller.quorum.bootstrap.servers": bootstrap,
            "log.dirs": self.metadata_dir,
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "3",
            "group.initial.rebalance.delay.ms": "0",
        }
        if self.security is not None:
            props.update({"listeners": f"{SECURE_LISTENER}://{self.host}:{self.port}",
                          "listener.security.protocol.map": f"{SECURE_LISTENER}:SASL_SSL,CONTROLLER:SASL_SSL",
                          "inter.broker.listener.name": SECURE_LISTENER,
                          **self.security.node_properties()})
        props.update(self.metrics_property())
        props.update(extra or {})
        with open(self.config_path, "w") as f:
            f.write(render_properties(props))

    role = "broker"

    def start(self) -> Broker:
        super().start()
        self.wait_ready()
        return self

    def wait_ready(self) -> None:
        """Until the broker's Metadata lists itself (over its listener's security)."""
        deadline = time.monotonic() + READY_S
        try:
            if self.security is None:
                wait_ready(self.host, self.port, self.node_id, deadline, alive=lambda: self.running)
            else:
                wait_ready_secure(self.host, self.port, self.node_id, deadline,
                                  self.security.client_security(), alive=lambda: self.running)
        except NodeError as e:
            raise NodeError(self.failure(str(e))) from None

    def metadata(self, timeout: float) -> status.BrokerAnswer | None:
        """Its Metadata answer (every topic), None if it does not answer."""
        security = None if self.security is None else self.security.client_security()
        return broker_metadata(self.host, self.port, timeout, security)


def on_loopback(node_id: int) -> tuple[str, list[str]]:
    return "127.0.0.1", []


# Run by one Python for a cluster's nodes: `strom format` of each through the command's own entry
# (strom.cli.main: its umask, its checks, its output), one interpreter start for all of them.
FORMAT_MANY = """\
import json
import sys

from strom.cli import main

codes = []
for argv in json.loads(sys.argv[1]):
    print("$ strom " + " ".join(argv), flush=True)
    try:
        codes.append(main(argv))
    except SystemExit as e:
        codes.append(e.code)
    sys.stdout.flush()
print(json.dumps(codes))
"""


def format_nodes(nodes: Sequence[tuple[Controller, Sequence[str]]], timeout: float = 120) -> None:
    """``strom format`` of each (node, flags), all in one Python process; NodeError naming the
    first node whose format failed, with the command's output (also in each node's log)."""
    if not nodes:
        return
    python = nodes[0][0].python
    argvs = [node.format_argv(*flags) for node, flags in nodes]
    result = subprocess.run([python, "-c", FORMAT_MANY, json.dumps(argvs)], cwd=REPO_ROOT,
                            capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    output = result.stdout + result.stderr
    for node, _ in nodes:
        with open(node.log_path, "a") as log:
            log.write(output)
    lines = result.stdout.strip().splitlines()
    try:
        codes = json.loads(lines[-1]) if lines else None
    except ValueError:
        codes = None
    if result.returncode != 0 or not isinstance(codes, list) or len(codes) != len(nodes):
        raise NodeError(f"strom format exited {result.returncode}:\n{output}")
    for (node, _), code in zip(nodes, codes):
        if code not in (0, None):
            raise NodeError(f"format of {node.role} {node.node_id} failed ({code}):\n{output}")


class ControllerQuorum:
    """``hosts(node_id)`` gives a node's address and command prefix (loopback by default)."""

    def __init__(self, voters: int = 3, python: str = sys.executable, extra: dict[str, str] | None = None,
                 hosts: Callable[[int], tuple[str, list[str]]] = on_loopback, secure: bool = False,
                 metrics: bool = False, static: bool = False):
        """``secure``: SASL_SSL with SCRAM-SHA-512 on every listener (ClusterSecurity);
        ``metrics``: every node serves /metrics at a metrics.listener port of its own; ``static``:
        the voters are ``controller.quorum.voters`` (kraft.version 0), not formatted with
        ``--initial-controllers`` (brokers made by ``broker()`` are given them too)."""
        self.base = tempfile.mkdtemp(prefix="strom-quorum-")
        self.python = python
        self.extra = extra or {}
        self.hosts = hosts
        self.metrics = metrics
        self.security = None
        if secure:  # the certificate names loopback only: elsewhere the chain alone is checked
            self.security = ClusterSecurity(os.path.join(self.base, "pki"),
                                            check_hostname=hosts(1)[0] in LOOPBACK)
        ports = free_ports(voters)
        self.controllers: dict[int, Controller] = {}
        for i, port in enumerate(ports, start=1):
            self.controllers[i] = Controller(self.base, i, port, new_uuid(), python, *hosts(i),
                                             security=self.security)
        self.bootstrap = ",".join(f"{c.host}:{c.port}" for c in self.controllers.values())
        initial = ",".join(f"{c.node_id}-{c.directory_id}@{c.host}:{c.port}"
                           for c in self.controllers.values())
        if static:
            self.extra = {"controller.quorum.voters": ",".join(
                f"{c.node_id}@{c.host}:{c.port}" for c in self.controllers.values()), **self.extra}
        for c in self.controllers.values():
            self._metrics_port(c)
            c.write_config(self.bootstrap, self.extra)
        format_nodes([(c, () if static else ("--initial-controllers", initial))
                      for c in self.controllers.values()])
        if static:  # the directory id is the one format wrote
            for c in self.controllers.values():
                c.directory_id = _meta_directory_id(c.metadata_dir)

    def _metrics_port(self, node: Controller) -> None:
        if self.metrics:
            (node.metrics_port,) = free_ports(1)

    def start(self) -> ControllerQuorum:
        for c in self.controllers.values():
            c.start()
        return self

    def spare(self, node_id: int, extra: dict[str, str] | None = None) -> Controller:
        """A new controller formatted without a voter set: it joins as an observer."""
        (port,) = free_ports(1)
        c = Controller(self.base, node_id, port, "", self.python, *self.hosts(node_id),
                       security=self.security)
        self._metrics_port(c)
        c.write_config(self.bootstrap, {**self.extra, **(extra or {})})
        c.format()
        c.directory_id = _meta_directory_id(c.metadata_dir)
        self.controllers[node_id] = c
        return c

    def broker(self, node_id: int, extra: dict[str, str] | None = None, formatted: bool = True) -> Broker:
        """A broker node of this cluster (not started), formatted unless ``formatted`` is False
        (then the caller formats it, with others: ``format_nodes``)."""
        (port,) = free_ports(1)
        b = Broker(self.base, node_id, port, self.python, *self.hosts(node_id), security=self.security)
        self._metrics_port(b)
        voters = {k: v for k, v in self.extra.items() if k == "controller.quorum.voters"}
        b.write_config(self.bootstrap, {**voters, **(extra or {})})
        if formatted:
            b.format()
        self.controllers[node_id] = b
        return b

    def client_security(self, controller: bool = False) -> ClientSecurity | None:
        """What the project's client connects to this cluster's brokers' (or a ``controller``'s)
        listener with; None: plaintext."""
        return None if self.security is None else self.security.client_security(controller)

    def describe(self, node_id: int) -> QuorumView | None:
        c = self.controllers[node_id]
        return describe(c.port, host=c.host, security=self.client_security(isinstance(c, Controller)
                                                                           and not isinstance(c, Broker)))

    def leader_view(self) -> QuorumView | None:
        for c in self.controllers.values():
            if c.running and not isinstance(c, Broker):
                view = describe(c.port, timeout=1.0, host=c.host, security=self.client_security(True))
                if view is not None and view.leader_id == c.node_id:
                    return view
        return None

    def wait_for(self, predicate, timeout: float, what: str) -> QuorumView:
        deadline = time.monotonic() + timeout
        view = None
        while time.monotonic() < deadline:
            view = self.leader_view()
            if view is not None and predicate(view):
                return view
            time.sleep(0.02)
        tails = "\n".join(c.failure(f"controller {c.node_id}") for c in self.controllers.values())
        raise AssertionError(f"{what} within {timeout} s; last view {view}\n{tails}")

    def wait_for_leader(self, timeout: float = 30.0) -> QuorumView:
        return self.wait_for(QuorumView.committed_own_epoch, timeout, "no leader committed its epoch")

    def close(self) -> None:
        for c in self.controllers.values():
            try:
                c.stop()
            except NodeError:
                pass
            c._kill_group(signal.SIGKILL)
            _LIVE.discard(c)
        if os.environ.get(KEEP_DIR_ENV):  # a replay keeps every node's log and data to read
            print(f"kept {self.base} ({KEEP_DIR_ENV})", file=sys.stderr)
            return
        shutil.rmtree(self.base, ignore_errors=True)

    def __enter__(self) -> ControllerQuorum:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()


def _meta_directory_id(path: str) -> str:
    with open(os.path.join(path, "meta.properties")) as f:
        for line in f:
            if line.startswith("directory.id="):
                return line.split("=", 1)[1].strip()
    raise NodeError(f"{path}/meta.properties has no directory.id")
