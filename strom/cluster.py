"""``strom cluster up``: a development cluster of separate controller and broker processes on
127.0.0.1 under one supervisor.

    strom cluster up [--controllers 3] [--brokers 3] [--dir DIR] [--port 9092] [--stop-timeout 30]

The first ``up`` on a directory formats it; a later ``up`` on the same directory reuses it as it
is (no format: logs, metadata and edited configuration files survive). Without --dir a new
temporary directory is used.

| path                                    | what                                                 |
|-----------------------------------------|------------------------------------------------------|
| DIR/cluster.properties                  | cluster.id, controller.ids, broker.ids               |
| DIR/controller-N/controller.properties  | controller N's configuration (edit between runs)     |
| DIR/controller-N/metadata/              | its metadata log dir (``__cluster_metadata-0``)      |
| DIR/broker-N/broker.properties          | broker N's configuration                             |
| DIR/broker-N/data/                      | its log dir                                          |
| DIR/controller-N.log, DIR/broker-N.log  | each process's output, appended across runs          |

Invariant: cluster.properties is written last, atomically, once every node is formatted; its
presence is what makes an ``up`` reuse the directory. A directory with node directories and no
cluster.properties (an interrupted first ``up``) is refused by the format, never half reused.

Node ids and ports: controllers are 1..C, brokers C+1..C+B. From the base port P, the brokers
listen on P, P+1, ... and the controllers on the ports after the brokers' (the defaults: brokers
4, 5, 6 on 9092-9094, controllers 1, 2, 3 on 9095-9097). ``--port 0`` picks free ports once; a
reused directory keeps the ports in its configuration files. The quorum is dynamic (KIP-853,
kraft.version 1): each controller is formatted with the same ``--initial-controllers`` list.
Metrics: every process serves /metrics (metrics.listener) at a port of a second block, from
P + METRICS_PORT_OFFSET (9404 for 9092, the JMX exporter's usual port) in the same order: the
brokers', the controllers', then the supervisor's own (each child up or not, the cluster ready);
``--port 0`` picks free ones. ``up`` prints every address and writes DIR/strom-targets.json,
Prometheus' file-SD targets (monitoring/prometheus.yml), one target group per role.
Topic defaults: default.replication.factor min(3, B), min.insync.replicas 2 when that is 3
(else 1), offsets.topic.replication.factor min(3, B).

The supervisor (``Supervisor.run``) is one asyncio loop in this process. It starts the
controllers, then the brokers, each ``python -m strom controller|broker --config FILE`` in its
own session (the terminal's Ctrl-C reaches the supervisor only, which decides the order) that
the kernel SIGKILLs if the supervisor dies. Every POLL_S it asks every process for its status
(strom.cluster_status) and prints a line for each process whose status changed, and prints
``bootstrap.servers=...`` once a controller leads the quorum and every broker answers Metadata
listing every broker (registered, unfenced). A process that exits is reported and left down:
this is a cluster to try failures on. On SIGINT or SIGTERM it stops the brokers (SIGTERM: a
broker's controlled shutdown), then the controllers, each group given --stop-timeout seconds
(STOP_TIMEOUT_S) before what is left is SIGKILLed, with a line saying so; a second signal kills
what is left at once.
"""
from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import TextIO

from engine.checkpoint import new_uuid, read_properties, write_atomically
from engine.errors import ConfigError
from strom import cluster_status as status
from strom.node import DIE_WITH_SUPERVISOR

CLUSTER_FILE = "cluster.properties"
TARGETS_FILE = "strom-targets.json"
METRICS_PORT_OFFSET = 312  # the metrics block: 9404 onwards for the default 9092
DEFAULT_PORT = 9092
POLL_S = 0.5
VIEW_S = 1.0
STOP_TIMEOUT_S = 30.0
READY_WARN_S = 60.0
HOST = "127.0.0.1"



# ---- the layout --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Node:
    role: str  # "controller" or "broker"
    node_id: int
    port: int
    base: str
    metrics_port: int = 0  # 0: no metrics.listener

    @property
    def metrics_url(self) -> str | None:
        return f"http://{HOST}:{self.metrics_port}/metrics" if self.metrics_port else None

    @property
    def name(self) -> str:
        return f"{self.role}-{self.node_id}"

    @property
    def dir(self) -> str:
        return os.path.join(self.base, self.name)

    @property
    def data_dir(self) -> str:
        return os.path.join(self.dir, "metadata" if self.role == "controller" else "data")

    @property
    def config_path(self) -> str:
        return os.path.join(self.dir, f"{self.role}.properties")

    @property
    def log_path(self) -> str:
        return os.path.join(self.base, f"{self.name}.log")

    @property
    def address(self) -> str:
        return f"{HOST}:{self.port}"


@dataclass(frozen=True)
class ClusterLayout:
    dir: str
    cluster_id: str
    controllers: tuple[Node, ...]
    brokers: tuple[Node, ...]
    metrics_port: int = 0  # the supervisor's /metrics; 0: none

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(b.address for b in self.brokers)

    @property
    def controller_bootstrap(self) -> str:
        return ",".join(c.address for c in self.controllers)

    @property
    def nodes(self) -> tuple[Node, ...]:
        return self.controllers + self.brokers


def plan_layout(directory: str, controllers: int, brokers: int, ports: list[int],
                cluster_id: str, metrics_ports: list[int] | None = None) -> ClusterLayout:
    """``ports``: the brokers' first, then the controllers'; ``metrics_ports`` (each process's
    metrics.listener) in the same order, then the supervisor's."""
    if controllers < 1:
        raise ConfigError("--controllers", f"must be at least 1, got {controllers}")
    if brokers < 1:
        raise ConfigError("--brokers", f"must be at least 1, got {brokers}")
    metrics = metrics_ports or [0] * (controllers + brokers + 1)
    return ClusterLayout(
        directory, cluster_id,
        tuple(Node("controller", i + 1, ports[brokers + i], directory, metrics[brokers + i])
              for i in range(controllers)),
        tuple(Node("broker", controllers + i + 1, ports[i], directory, metrics[i]) for i in range(brokers)),
        metrics[controllers + brokers])


def metrics_property(node: Node) -> dict[str, str]:
    return {"metrics.listener": f"http://{HOST}:{node.metrics_port}"} if node.metrics_port else {}


def topic_defaults(brokers: int) -> dict[str, str]:
    replication_factor = min(3, brokers)
    return {
        "num.partitions": "3",
        "default.replication.factor": str(replication_factor),
        "min.insync.replicas": "2" if replication_factor >= 3 else "1",
    }


def controller_properties(layout: ClusterLayout, node: Node) -> dict[str, str]:
    return {
        "process.roles": "controller",
        "node.id": str(node.node_id),
        "listeners": f"CONTROLLER://{node.address}",
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT",
        "controller.quorum.bootstrap.servers": layout.controller_bootstrap,
        "metadata.log.dir": node.data_dir,
        "log.dirs": node.data_dir,
        **topic_defaults(len(layout.brokers)),
        **metrics_property(node),
    }


def broker_properties(layout: ClusterLayout, node: Node) -> dict[str, str]:
    return {
        "process.roles": "broker",
        "node.id": str(node.node_id),
        "listeners": f"PLAINTEXT://{node.address}",
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "controller.quorum.bootstrap.servers": layout.controller_bootstrap,
        "log.dirs": node.data_dir,
        **topic_defaults(len(layout.brokers)),
        "offsets.topic.replication.factor": str(min(3, len(layout.brokers))),
        "group.initial.rebalance.delay.ms": "0",
        **metrics_property(node),
    }


def render_properties(props: dict[str, str]) -> str:
    return "".join(f"{name}={value}\n" for name, value in props.items())


def initial_controllers(layout: ClusterLayout, directory_ids: dict[int, str]) -> str:
    """KIP-853's ``id-uuid@host:port,...`` for ``strom format --initial-controllers``."""
    return ",".join(f"{c.node_id}-{directory_ids[c.node_id]}@{c.address}" for c in layout.controllers)


def format_cluster(layout: ClusterLayout) -> None:
    """Write every node's configuration, format every node, then write cluster.properties."""
    from strom.config import read_config_file
    from strom.node import format_node

    directory_ids = {c.node_id: new_uuid() for c in layout.controllers}
    voters = initial_controllers(layout, directory_ids)
    for node in layout.nodes:
        os.makedirs(node.dir, exist_ok=True)
        props = (controller_properties if node.role == "controller" else broker_properties)(layout, node)
        with open(node.config_path, "w", encoding="utf-8") as f:
            f.write(render_properties(props))
        config = read_config_file(node.config_path)
        if node.role == "controller":
            format_node(config, layout.cluster_id, initial_controllers=voters)
        else:
            format_node(config, layout.cluster_id)
    text = (f"cluster.id={layout.cluster_id}\n"
            f"controller.ids={','.join(str(c.node_id) for c in layout.controllers)}\n"
            f"broker.ids={','.join(str(b.node_id) for b in layout.brokers)}\n"
            + (f"metrics.listener=http://{HOST}:{layout.metrics_port}\n" if layout.metrics_port else ""))
    write_atomically(os.path.join(layout.dir, CLUSTER_FILE), text.encode())


def load_layout(directory: str) -> ClusterLayout | None:
    """The layout of a formatted cluster directory (ports from the nodes' configuration files);
    None if ``directory`` holds no cluster.properties."""
    from strom.config import read_config_file

    path = os.path.join(directory, CLUSTER_FILE)
    if not os.path.exists(path):
        return None
    props = read_properties(path)
    try:
        cluster_id = props["cluster.id"]
        ids = {role: [int(i) for i in props[f"{role}.ids"].split(",") if i.strip()]
               for role in ("controller", "broker")}
    except (KeyError, ValueError) as e:
        raise ConfigError(path, f"not a cluster file written by `strom cluster up`: {e}") from None
    try:  # the supervisor's /metrics (absent in a directory from before metrics)
        supervisor_metrics = int(props.get("metrics.listener", ":0").rsplit(":", 1)[1])
    except ValueError:
        raise ConfigError(path, "metrics.listener: not http://host:port: "
                                f"{props['metrics.listener']}") from None
    nodes: dict[str, list[Node]] = {"controller": [], "broker": []}
    for role, node_ids in ids.items():
        for node_id in node_ids:
            config_path = Node(role, node_id, 0, directory).config_path
            config = read_config_file(config_path)
            listeners = config.controller_listeners() if role == "controller" else config.broker_listeners()
            if not listeners:
                raise ConfigError(config_path, f"no {role} listener")
            metrics = config.metrics_address(role)
            nodes[role].append(Node(role, node_id, listeners[0].port, directory,
                                    metrics[1] if metrics else 0))
    return ClusterLayout(directory, cluster_id, tuple(nodes["controller"]), tuple(nodes["broker"]),
                         supervisor_metrics)


def metrics_targets(layout: ClusterLayout) -> list[dict]:
    """Prometheus' file-SD target groups (strom-targets.json): one per role, supervisor included."""
    groups = [{"targets": [f"{HOST}:{n.metrics_port}" for n in nodes if n.metrics_port],
               "labels": {"role": role}}
              for role, nodes in (("broker", layout.brokers), ("controller", layout.controllers))]
    if layout.metrics_port:
        groups.append({"targets": [f"{HOST}:{layout.metrics_port}"], "labels": {"role": "supervisor"}})
    return [g for g in groups if g["targets"]]


def write_metrics_targets(layout: ClusterLayout) -> str:
    import json

    path = os.path.join(layout.dir, TARGETS_FILE)
    write_atomically(path, (json.dumps(metrics_targets(layout), indent=2) + "\n").encode())
    return path


def broker_metrics(layout: ClusterLayout) -> dict[int, str]:
    """Each broker's /metrics address, where its configuration sets metrics.listener (a fixed port)."""
    from strom.config import read_config_file

    out = {}
    for node in layout.brokers:
        try:
            address = read_config_file(node.config_path).metrics_address("broker")
        except ConfigError:
            continue
        if address is not None and address[1]:
            out[node.node_id] = f"http://{address[0] or HOST}:{address[1]}"
    return out


def free_ports(count: int) -> list[int]:
    socks = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((HOST, 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def check_ports_free(layout: ClusterLayout) -> None:
    wanted = [(node.name, node.port) for node in layout.nodes]
    wanted += [(f"{node.name}'s metrics.listener", node.metrics_port)
               for node in layout.nodes if node.metrics_port]
    if layout.metrics_port:
        wanted.append(("the supervisor's metrics.listener", layout.metrics_port))
    for name, port in wanted:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind((HOST, port))
            except OSError as e:
                raise ConfigError("--port", f"{name} cannot listen on {HOST}:{port} ({e.strerror}): "
                                            f"is a cluster already running on {layout.dir}?") from None


def prepare(directory: str | None, controllers: int | None, brokers: int | None,
            port: int | None) -> tuple[ClusterLayout, bool]:
    """(the layout, whether it was formatted now): reuse ``directory`` if it holds a cluster,
    else format a new one there (or in a new temporary directory)."""
    if directory is not None:
        directory = os.path.abspath(directory)
        layout = load_layout(directory)
        if layout is not None:
            given = {"--controllers": (controllers, len(layout.controllers)),
                     "--brokers": (brokers, len(layout.brokers)),
                     "--port": (port, layout.brokers[0].port)}
            for flag, (wanted, actual) in given.items():
                if wanted is not None and wanted != actual and not (flag == "--port" and wanted == 0):
                    raise ConfigError(flag, f"{directory} holds a cluster with {flag} {actual}; "
                                            "leave it out, or use another --dir")
            return layout, False
    directory = directory or tempfile.mkdtemp(prefix="strom-cluster-")
    os.makedirs(directory, exist_ok=True)
    controllers = 3 if controllers is None else controllers
    brokers = 3 if brokers is None else brokers
    port = DEFAULT_PORT if port is None else port
    count = controllers + brokers
    if port == 0:
        ports = free_ports(2 * count + 1)
        ports, metrics_ports = ports[:count], ports[count:]
    else:
        ports = list(range(port, port + count))
        start = port + METRICS_PORT_OFFSET
        metrics_ports = list(range(start, start + count + 1))
    if metrics_ports[-1] > 65535:
        raise ConfigError("--port", f"{port} leaves no room for {count} ports and their metrics")
    layout = plan_layout(directory, controllers, brokers, ports, new_uuid(), metrics_ports)
    check_ports_free(layout)
    format_cluster(layout)
    return layout, True


# ---- the supervisor ----------------------------------------------------------------------------


def describe_exit(code: int) -> str:
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


def last_line(path: str, window: int = 4096) -> str | None:
    """The last non-empty line of a process's output file, if any."""
    try:
        with open(path, "rb") as f:
            f.seek(max(0, os.path.getsize(path) - window))
            lines = [line for line in f.read().decode("utf-8", "replace").splitlines() if line.strip()]
    except OSError:
        return None
    return lines[-1].strip() if lines else None


@dataclass
class Child:
    node: Node
    proc: subprocess.Popen
    probe: status.NodeProbe
    exit_reported: bool = False
    answered: bool = False  # has answered a status poll since it started
    line: str | None = None

    @property
    def label(self) -> str:
        return f"{self.node.role} {self.node.node_id} (pid {self.proc.pid})"

    @property
    def running(self) -> bool:
        return self.proc.poll() is None


@dataclass
class Supervisor:
    layout: ClusterLayout
    out: TextIO = field(default_factory=lambda: sys.stdout)
    python: str = sys.executable
    poll_s: float = POLL_S
    stop_timeout_s: float = STOP_TIMEOUT_S

    def __post_init__(self) -> None:
        self.children: list[Child] = []
        self.stop_requested = asyncio.Event()
        self.hurry = False
        self.ready = False
        self.started_at = time.monotonic()
        self.live = None  # strom top's view (rich.live.Live) while it shows, on a terminal
        self.metrics_server: asyncio.Server | None = None

    # ---- /metrics ------------------------------------------------------------------------------
    def metrics_registry(self):
        """The supervisor's own families: each child up (1) or not (0), how many times it was
        started, and whether the cluster became ready (bootstrap.servers printed)."""
        from protocol.metrics import Registry

        registry = Registry()
        labels = ("role", "node_id")

        def key(child: Child) -> tuple[str, str]:
            return child.node.role, str(child.node.node_id)

        def up() -> dict[tuple[str, ...], int]:
            return {key(c): int(c.running) for c in self.children}

        def starts() -> dict[tuple[str, ...], int]:
            out: dict[tuple[str, ...], int] = {}
            for c in self.children:
                out[key(c)] = out.get(key(c), 0) + 1
            return out

        registry.gauge("strom_cluster_process_up", "1 while the process runs, 0 once it exited", up, labels)
        registry.counter_fn("strom_cluster_process_starts_total", "Times the supervisor started the process",
                            starts, labels)
        registry.gauge("strom_cluster_ready", "1 once a controller leads and every broker is unfenced",
                       lambda: int(self.ready))
        return registry

    async def serve_metrics(self) -> None:
        if not self.layout.metrics_port:
            return
        from protocol.metrics import serve

        self.metrics_server = await serve(self.metrics_registry(), HOST, self.layout.metrics_port)

    def say(self, text: str) -> None:
        now = time.time()
        stamp = time.strftime("%H:%M:%S", time.localtime(now)) + f".{int(now * 1000) % 1000:03d}"
        if self.live is not None:  # above the live view
            self.live.console.print(f"{stamp} {text}", markup=False, highlight=False)
        else:
            print(f"{stamp} {text}", file=self.out, flush=True)

    # ---- processes -----------------------------------------------------------------------------
    def spawn(self, node: Node) -> Child:
        cmd = [self.python, "-m", "strom", node.role, "--config", node.config_path]
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
        with open(node.log_path, "ab") as log:
            log.write(f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} {' '.join(cmd)}\n".encode())
            log.flush()
            proc = subprocess.Popen(
                [self.python, "-c", DIE_WITH_SUPERVISOR, str(os.getpid()), *cmd],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env,
                start_new_session=True)
        child = Child(node, proc, status.NodeProbe(HOST, node.port))
        self.children.append(child)
        self.say(f"started {child.label}, output in {node.log_path}")
        return child

    def report_exits(self) -> None:
        for child in self.children:
            if not child.exit_reported and not child.running:
                child.exit_reported = True
                if self.stop_requested.is_set():
                    self.say(f"{child.label}: stopped, {describe_exit(child.proc.returncode)}")
                    continue
                last = last_line(child.node.log_path) if child.proc.returncode > 0 else None
                self.say(f"{child.label}: exited, {describe_exit(child.proc.returncode)}"
                         + (f"; its last output: {last}" if last else ""))

    def request_stop(self) -> None:
        if self.stop_requested.is_set():
            self.hurry = True
        self.stop_requested.set()

    # ---- status --------------------------------------------------------------------------------
    async def poll_status(self) -> None:
        controllers = [c for c in self.children if c.node.role == "controller"]
        brokers = [c for c in self.children if c.node.role == "broker"]

        async def ask(child: Child, how):
            if not child.running:
                await child.probe.close()
                return None
            return await how(child.probe)

        answers = await asyncio.gather(*(ask(c, status.ask_controller) for c in controllers),
                                       *(ask(c, status.ask_broker) for c in brokers))
        quorum = dict(zip((c.node.node_id for c in controllers), answers[:len(controllers)]))
        views = dict(zip((b.node.node_id for b in brokers), answers[len(controllers):]))
        reference = status.reference_view(views)
        for child, answer in [*zip(controllers, quorum.values()), *zip(brokers, views.values())]:
            child.answered = child.answered or answer is not None
        for child in controllers:
            answer = quorum[child.node.node_id]
            if not child.running:
                line = "not running"
            elif answer is None and not child.answered:
                line = "starting"
            else:
                line = status.controller_line(child.node.node_id, answer)
            self.show(child, line)
        for child in brokers:
            down = "not running" if not child.running else (
                "not answering" if child.answered else "starting")
            self.show(child, status.broker_line(child.node.node_id, views[child.node.node_id],
                                                reference, down))
        has_leader = any(a is not None and a.is_leader for a in quorum.values())
        everyone = {b.node.node_id for b in brokers}
        if not self.ready and has_leader and all(
                view is not None and everyone <= view.unfenced for view in views.values()):
            self.ready = True
            self.say(f"bootstrap.servers={self.layout.bootstrap_servers}  (Ctrl-C stops the cluster)")

    def show(self, child: Child, line: str) -> None:
        if line != child.line:
            child.line = line
            self.say(f"{child.label}: {line}")

    async def status_loop(self) -> None:
        warned = False
        while True:
            await self.poll_status()
            if not self.ready and not warned and time.monotonic() - self.started_at > READY_WARN_S:
                warned = True
                self.say(f"not ready after {READY_WARN_S:.0f} s: see the logs in {self.layout.dir}")
            await asyncio.sleep(self.poll_s)

    async def live_view(self) -> None:
        """On a terminal: strom top's view of this cluster (strom/top.py), refreshed each
        VIEW_S under the status lines."""
        from rich.live import Live

        from strom import top

        collector = top.Collector([(HOST, b.port) for b in self.layout.brokers],
                                  [(HOST, c.port) for c in self.layout.controllers],
                                  broker_metrics(self.layout))
        title = f"Strom cluster {self.layout.cluster_id}"
        try:
            with Live(auto_refresh=False, redirect_stdout=False, redirect_stderr=False) as display:
                self.live = display
                while True:
                    snapshot = await collector.refresh([b.node_id for b in self.layout.brokers])
                    display.update(top.render_rich(snapshot, title), refresh=True)
                    await asyncio.sleep(VIEW_S)
        finally:
            self.live = None
            await collector.close()

    # ---- stopping ------------------------------------------------------------------------------
    async def stop_group(self, children: list[Child], what: str) -> bool:
        """SIGTERM, wait, SIGKILL what is left; True if every one stopped by itself with code 0."""
        live = [c for c in children if c.running]
        clean = True
        if not live:
            return clean
        ids = ", ".join(str(c.node.node_id) for c in live)
        if not self.hurry:
            self.say(f"stopping the {what} {ids} (SIGTERM)")
            for child in live:
                child.proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + self.stop_timeout_s
        while any(c.running for c in live) and time.monotonic() < deadline and not self.hurry:
            await asyncio.sleep(0.05)
            self.report_exits()
        for child in live:
            if child.running:
                clean = False
                why = "a second signal" if self.hurry else f"not stopped within {self.stop_timeout_s:g} s"
                self.say(f"{child.label}: {why}: killing it (SIGKILL)")
                child.proc.kill()
        for child in live:
            while child.running:
                await asyncio.sleep(0.01)
            clean = clean and child.proc.returncode == 0
        self.report_exits()
        return clean

    async def run(self) -> int:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, self.request_stop)
        try:
            await self.serve_metrics()
            for node in self.layout.nodes:  # controllers first
                self.spawn(node)
            poller = loop.create_task(self.status_loop())
            viewer = loop.create_task(self.live_view()) if self.out.isatty() else None
            failed = False
            while not self.stop_requested.is_set():
                self.report_exits()
                if not any(c.running for c in self.children):
                    self.say("every process has exited; stopping")
                    failed = True
                    break
                try:
                    async with asyncio.timeout(0.1):
                        await self.stop_requested.wait()
                except TimeoutError:
                    pass
            for task in (poller, viewer):
                if task is not None:
                    task.cancel()
            await asyncio.gather(poller, *([viewer] if viewer else []), return_exceptions=True)
            brokers = [c for c in self.children if c.node.role == "broker"]
            controllers = [c for c in self.children if c.node.role == "controller"]
            clean = await self.stop_group(brokers, "brokers")
            clean = await self.stop_group(controllers, "controllers") and clean
            self.say("stopped" + ("" if clean else " (not cleanly)"))
            return 1 if failed or not clean else 0
        finally:
            if self.metrics_server is not None:
                self.metrics_server.close()
            for child in self.children:
                await child.probe.close()
                if child.running:
                    child.proc.kill()
                    child.proc.wait()
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(sig)


def cluster_up(directory: str | None, controllers: int | None, brokers: int | None,
               port: int | None, stop_timeout_s: float = STOP_TIMEOUT_S) -> int:
    layout, formatted = prepare(directory, controllers, brokers, port)
    if not formatted:
        check_ports_free(layout)
    verb = "formatted" if formatted else "reusing"
    print(f"Strom cluster {layout.cluster_id}: {verb} {layout.dir}: controllers "
          f"{', '.join(f'{c.node_id} on {c.address}' for c in layout.controllers)}; brokers "
          f"{', '.join(f'{b.node_id} on {b.address}' for b in layout.brokers)}", flush=True)
    for node in layout.nodes:
        if node.metrics_url:
            print(f"{node.role} {node.node_id} metrics: {node.metrics_url}", flush=True)
    if layout.metrics_port:
        print(f"supervisor metrics: http://{HOST}:{layout.metrics_port}/metrics", flush=True)
    if metrics_targets(layout):
        print(f"Prometheus targets: {write_metrics_targets(layout)} (monitoring/prometheus.yml)", flush=True)
    return asyncio.run(Supervisor(layout, stop_timeout_s=stop_timeout_s).run())
