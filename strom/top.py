"""``strom top``: a live view of a running cluster, and the view ``strom cluster up`` shows.

    strom top --bootstrap-server HOST:PORT[,...] [--bootstrap-controller HOST:PORT[,...]]
              [--metrics ID=http://HOST:PORT ...] [--interval 1] [--once] [--command-config FILE]

Each refresh takes a ``Snapshot`` of the cluster from what its processes answer:

| section                      | from                                                               |
|------------------------------|--------------------------------------------------------------------|
| quorum                       | DescribeQuorum (the controllers', or a broker's where it forwards  |
|                              | it): leader, epoch, high watermark, each voter's and observer's    |
|                              | log end offset and its lag behind the high watermark               |
| brokers                      | Metadata and DescribeCluster v2 (fenced or not, partitions led);   |
|                              | bytes in/out per second from each broker's /metrics                |
|                              | (``kafka_server_brokertopicmetrics_bytesin_total`` and ``bytesout``|
|                              | over all topics) between refreshes, or, with no metrics, records   |
|                              | in per second from the log end offsets of the partitions it leads  |
| under-replicated / offline   | Metadata: an ISR smaller than the replicas; no leader              |
| consumer group lag           | ListGroups (each broker lists the groups it coordinates), their    |
|                              | OffsetFetch there and ListOffsets (latest) at each leader          |

The snapshot is made by a pure function (``build_snapshot``) from parsed answers and the previous
refresh's counters (``Sample``), so rates need two refreshes; the first shows none. It is shown by
``render_rich`` (a rich Table per section, in a ``rich.live.Live`` on a terminal) or by
``render_plain`` (lines, for ``--once`` and for output that is not a terminal, where ``watch``
prints only the lines that changed since the last refresh).
"""
from __future__ import annotations

import argparse
import asyncio
import sys
import time
import urllib.request
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from protocol import messages as M
from protocol.client import ClientSecurity
from protocol.errors import Error
from protocol.list_offsets import offsets_request
from strom import cluster_status as status
from strom.admin_client import parse_bootstrap

LIST_OFFSETS, OFFSET_FETCH, LIST_GROUPS = 2, 9, 16
BYTES_IN = "kafka_server_brokertopicmetrics_bytesin_total"
BYTES_OUT = "kafka_server_brokertopicmetrics_bytesout_total"
METRICS_TIMEOUT_S = 1.0

EXAMPLE = """example:
  strom top --bootstrap-server 127.0.0.1:9092 --bootstrap-controller 127.0.0.1:9095 --once
  strom top --bootstrap-server 127.0.0.1:9092 --metrics 4=http://127.0.0.1:9404"""


# ---- the model ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class ReplicaLag:
    replica_id: int
    log_end_offset: int
    lag: int  # behind the high watermark, never below 0


@dataclass(frozen=True)
class QuorumView:
    leader_id: int
    epoch: int
    high_watermark: int
    voters: tuple[ReplicaLag, ...]
    observers: tuple[ReplicaLag, ...]


@dataclass(frozen=True)
class BrokerRow:
    node_id: int
    state: str  # unfenced, fenced, fenced or not registered, not registered
    leader_of: int
    rate_in: float | None  # bytes/s with metrics, records/s without; None until two refreshes
    rate_out: float | None  # bytes/s with metrics only


@dataclass(frozen=True)
class GroupLag:
    group: str
    topic: str
    partition: int
    committed: int
    log_end: int

    @property
    def lag(self) -> int:
        return max(0, self.log_end - self.committed)


@dataclass(frozen=True)
class Sample:
    """What the next refresh's rates are measured from."""

    at: float
    counters: dict[int, tuple[int, int]] = field(default_factory=dict)  # broker -> (bytes in, bytes out)
    log_end: dict[tuple[str, int], int] = field(default_factory=dict)


@dataclass(frozen=True)
class Snapshot:
    quorum: QuorumView | None
    quorum_note: str  # why there is no quorum section, when there is none
    brokers: tuple[BrokerRow, ...]
    under_replicated: tuple[status.PartitionInfo, ...]
    offline: tuple[status.PartitionInfo, ...]
    groups: tuple[GroupLag, ...]
    rates_from_metrics: bool

    @property
    def rates_note(self) -> str:
        if self.rates_from_metrics:
            return "rates: bytes per second from the brokers' /metrics"
        return "rates: records in per second from the log end offsets (no metrics.listener); out unknown"


def parse_quorum(response) -> QuorumView:
    """DescribeQuorum answered by the quorum's leader (or a broker forwarding to it)."""
    if response.error_code != Error.NONE:
        raise status.ProbeFailed(f"DescribeQuorum: error {response.error_code}")
    for topic in response.topics:
        for p in topic.partitions:
            if topic.topic_name != status.METADATA_TOPIC or p.partition_index != 0:
                continue
            if p.error_code != Error.NONE:
                raise status.ProbeFailed(f"DescribeQuorum: error {p.error_code}")
            hw = p.high_watermark
            return QuorumView(p.leader_id, p.leader_epoch, hw, _lags(p.current_voters, hw),
                              _lags(p.observers, hw))
    raise status.ProbeFailed(f"DescribeQuorum: no {status.METADATA_TOPIC}-0 in the answer")


def _lags(replicas, hw: int) -> tuple[ReplicaLag, ...]:
    return tuple(sorted((ReplicaLag(r.replica_id, r.log_end_offset, max(0, hw - r.log_end_offset))
                         for r in replicas or ()), key=lambda r: r.replica_id))


def parse_counters(text: str) -> tuple[int, int]:
    """(bytes in, bytes out) over all topics from a /metrics page: the series without a topic."""
    from prometheus_client.parser import text_string_to_metric_families

    found = {BYTES_IN: 0, BYTES_OUT: 0}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name in found and "topic" not in sample.labels:
                found[sample.name] = int(sample.value)
    return found[BYTES_IN], found[BYTES_OUT]


def build_snapshot(quorum: QuorumView | None, view: status.BrokerAnswer | None, broker_ids: Iterable[int],
                   log_end: dict[tuple[str, int], int], committed: dict[str, dict[tuple[str, int], int]],
                   counters: dict[int, tuple[int, int]] | None, previous: Sample | None, now: float,
                   quorum_note: str = "") -> tuple[Snapshot, Sample]:
    """The snapshot and the sample the next one's rates start from. ``counters``: each broker's
    (bytes in, bytes out) from its /metrics, None when metrics are off."""
    dt = now - previous.at if previous is not None else 0.0
    partitions = view.partitions if view is not None else ()
    known = set(view.unfenced) | set(view.fenced or ()) if view is not None else set()
    ids = sorted(set(broker_ids) | known)
    rows = []
    for node_id in ids:
        led = [p for p in partitions if p.leader == node_id]
        state = status.registration(node_id, view) if view is not None else "unknown"
        rate_in = rate_out = None
        if counters is not None:
            now_c = counters.get(node_id)
            before = previous.counters.get(node_id) if previous is not None else None
            if now_c is not None and before is not None and dt > 0:
                rate_in = max(0, now_c[0] - before[0]) / dt
                rate_out = max(0, now_c[1] - before[1]) / dt
        elif previous is not None and dt > 0:
            keys = [(p.topic, p.partition) for p in led]
            if keys and all(k in log_end and k in previous.log_end for k in keys):
                rate_in = sum(max(0, log_end[k] - previous.log_end[k]) for k in keys) / dt
        rows.append(BrokerRow(node_id, state, len(led), rate_in, rate_out))
    under = tuple(p for p in partitions if p.leader != status.NO_LEADER and len(p.isr) < len(p.replicas))
    offline = tuple(status.offline_partitions(view)) if view is not None else ()
    groups = tuple(GroupLag(g, t, p, offset, log_end[(t, p)])
                   for g in sorted(committed) for (t, p), offset in sorted(committed[g].items())
                   if (t, p) in log_end and offset >= 0)
    snapshot = Snapshot(quorum, quorum_note, tuple(rows), under, offline, groups, counters is not None)
    return snapshot, Sample(now, dict(counters or {}), dict(log_end))


# ---- the renderers -----------------------------------------------------------------------------


def _rate(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:,.0f}" if value >= 10 else f"{value:.1f}"


def _replicas(replicas: tuple[ReplicaLag, ...]) -> str:
    return ",".join(f"{r.replica_id}(lag {r.lag})" for r in replicas) or "none"


def _ids(ids: Iterable[int]) -> str:
    return ",".join(str(i) for i in ids) or "none"


def render_plain(s: Snapshot) -> list[str]:
    """The snapshot as lines, one per fact, each naming its section."""
    lines = []
    if s.quorum is not None:
        q = s.quorum
        lines.append(f"quorum: leader {q.leader_id}, epoch {q.epoch}, high watermark {q.high_watermark}, "
                     f"voters {_replicas(q.voters)}, observers {_replicas(q.observers)}")
    else:
        lines.append(f"quorum: {s.quorum_note or 'unknown'}")
    unit_in, unit_out = ("bytes in/s", "bytes out/s") if s.rates_from_metrics else ("records in/s", "out/s")
    for b in s.brokers:
        lines.append(f"broker {b.node_id}: {b.state}, leader of {b.leader_of} partitions, "
                     f"{unit_in} {_rate(b.rate_in)}, {unit_out} {_rate(b.rate_out)}")
    lines.append(f"under-replicated partitions: {len(s.under_replicated)}"
                 + "".join(f"; {p.topic}-{p.partition} isr {_ids(p.isr)} of {_ids(p.replicas)}"
                           for p in s.under_replicated))
    lines.append(f"offline partitions: {len(s.offline)}"
                 + "".join(f"; {p.topic}-{p.partition}" for p in s.offline))
    if not s.groups:
        lines.append("consumer groups: none with committed offsets")
    for g in s.groups:
        lines.append(f"group {g.group} {g.topic}-{g.partition}: committed {g.committed}, "
                     f"log end {g.log_end}, lag {g.lag}")
    lines.append(s.rates_note)
    return lines


def render_rich(s: Snapshot, title: str = "Strom cluster"):
    """The snapshot as rich renderables: a Table per section."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    parts: list[Any] = [Text(title, style="bold")]
    quorum = Table(title="Quorum", title_justify="left")
    for column in ("replica", "role", "log end offset", "lag"):
        quorum.add_column(column)
    if s.quorum is not None:
        q = s.quorum
        quorum.caption = f"leader {q.leader_id}, epoch {q.epoch}, high watermark {q.high_watermark}"
        for role, replicas in (("voter", q.voters), ("observer", q.observers)):
            for r in replicas:
                name = "leader" if r.replica_id == q.leader_id else role
                quorum.add_row(str(r.replica_id), name, str(r.log_end_offset), str(r.lag))
    else:
        quorum.caption = s.quorum_note or "unknown"
    parts.append(quorum)
    brokers = Table(title="Brokers", title_justify="left", caption=s.rates_note)
    unit_in, unit_out = ("bytes in/s", "bytes out/s") if s.rates_from_metrics else ("records in/s", "out/s")
    for column in ("broker", "state", "leader of", unit_in, unit_out):
        brokers.add_column(column)
    for b in s.brokers:
        brokers.add_row(str(b.node_id), b.state, str(b.leader_of), _rate(b.rate_in), _rate(b.rate_out))
    parts.append(brokers)
    heading = f"Partitions: {len(s.under_replicated)} under-replicated, {len(s.offline)} offline"
    partitions = Table(title=heading, title_justify="left")
    for column in ("partition", "problem", "leader", "replicas", "isr"):
        partitions.add_column(column)
    for p in s.offline:
        partitions.add_row(f"{p.topic}-{p.partition}", "offline", "none", _ids(p.replicas), _ids(p.isr))
    for p in s.under_replicated:
        partitions.add_row(f"{p.topic}-{p.partition}", "under-replicated", str(p.leader), _ids(p.replicas),
                           _ids(p.isr))
    parts.append(partitions)
    groups = Table(title="Consumer group lag", title_justify="left")
    for column in ("group", "partition", "committed", "log end", "lag"):
        groups.add_column(column)
    for g in s.groups:
        groups.add_row(g.group, f"{g.topic}-{g.partition}", str(g.committed), str(g.log_end), str(g.lag))
    parts.append(groups)
    return Group(*parts)


# ---- asking the cluster ------------------------------------------------------------------------


class Collector:
    """The connections one view keeps: a probe per broker (found through Metadata), one per
    controller given, and the brokers' metrics addresses; ``refresh`` takes the next snapshot."""

    def __init__(self, bootstrap: list[tuple[str, int]], controllers: list[tuple[str, int]] = (),
                 metrics: dict[int, str] | None = None, security: ClientSecurity | None = None) -> None:
        self.security = security
        self.bootstrap = [status.NodeProbe(h, p, security=security) for h, p in bootstrap]
        self.controllers = [status.NodeProbe(h, p, security=security) for h, p in controllers]
        self.brokers: dict[int, status.NodeProbe] = {}
        self.metrics = dict(metrics or {})
        self.previous: Sample | None = None

    def _broker(self, node_id: int, host: str, port: int) -> status.NodeProbe:
        probe = self.brokers.get(node_id)
        if probe is None or (probe.host, probe.port) != (host, port):
            probe = self.brokers[node_id] = status.NodeProbe(host, port, security=self.security)
        return probe

    async def _view(self) -> tuple[status.BrokerAnswer | None, status.NodeProbe | None]:
        for probe in [*self.brokers.values(), *self.bootstrap]:
            try:
                metadata = await probe.request(status.METADATA, 1, 12, lambda v: M.MetadataRequest(
                    topics=None, allow_auto_topic_creation=False))
            except status.ProbeFailed:
                continue
            for b in metadata.brokers:
                self._broker(b.node_id, b.host, b.port)
            fenced = None
            try:
                if probe.serves(status.DESCRIBE_CLUSTER, 2, 2) is not None:
                    fenced = status.parse_fenced(await probe.request(
                        status.DESCRIBE_CLUSTER, 2, 2, status.describe_cluster_request))
            except status.ProbeFailed:
                pass
            return status.parse_metadata(metadata, fenced), probe
        return None, None

    async def _quorum(self, via: status.NodeProbe | None) -> tuple[QuorumView | None, str]:
        probes = self.controllers or ([via] if via is not None else [])
        last = "no broker"
        for probe in probes:
            try:
                return parse_quorum(await probe.request(status.DESCRIBE_QUORUM, 0, 2,
                                                        status.describe_quorum_request)), ""
            except status.ProbeFailed as e:
                last = str(e)
        if not self.controllers:
            return None, f"not known through the brokers ({last}); give --bootstrap-controller"
        return None, "no controller answers as the quorum's leader"

    async def _log_end(self, view: status.BrokerAnswer) -> dict[tuple[str, int], int]:
        by_leader: dict[int, dict[str, list[int]]] = {}
        for p in view.partitions:
            if p.leader != status.NO_LEADER:
                by_leader.setdefault(p.leader, {}).setdefault(p.topic, []).append(p.partition)
        out: dict[tuple[str, int], int] = {}

        async def ask(leader: int, topics: dict[str, list[int]]) -> None:
            probe = self.brokers.get(leader)
            if probe is None:
                return
            body = offsets_request(topics)
            try:
                answer = await probe.request(LIST_OFFSETS, 1, 7, lambda v: body)
            except status.ProbeFailed:
                return
            for t in answer.topics:
                for p in t.partitions:
                    if p.error_code == Error.NONE and p.offset >= 0:
                        out[(t.name, p.partition_index)] = p.offset
        await asyncio.gather(*(ask(leader, topics) for leader, topics in by_leader.items()))
        return out

    async def _committed(self) -> dict[str, dict[tuple[str, int], int]]:
        out: dict[str, dict[tuple[str, int], int]] = {}

        async def of_broker(probe: status.NodeProbe) -> None:
            try:
                listed = await probe.request(LIST_GROUPS, 0, 4, lambda v: M.ListGroupsRequest())
            except status.ProbeFailed:
                return
            for g in listed.groups:
                try:
                    answer = await probe.request(OFFSET_FETCH, 2, 7, lambda v, gid=g.group_id:
                                                 M.OffsetFetchRequest(group_id=gid, topics=None))
                except status.ProbeFailed:
                    continue
                if answer.error_code != Error.NONE:
                    continue
                out[g.group_id] = {(t.name, p.partition_index): p.committed_offset
                                   for t in answer.topics for p in t.partitions if p.error_code == Error.NONE}
        await asyncio.gather(*(of_broker(p) for p in self.brokers.values()))
        return out

    async def _counters(self) -> dict[int, tuple[int, int]] | None:
        if not self.metrics:
            return None

        def scrape(url: str) -> tuple[int, int] | None:
            try:
                with urllib.request.urlopen(url.rstrip("/") + "/metrics", timeout=METRICS_TIMEOUT_S) as r:
                    return parse_counters(r.read().decode())
            except (OSError, ValueError):
                return None
        found = await asyncio.gather(*(asyncio.to_thread(scrape, url) for url in self.metrics.values()))
        return {node_id: c for node_id, c in zip(self.metrics, found) if c is not None}

    async def refresh(self, extra_brokers: Iterable[int] = ()) -> Snapshot:
        view, via = await self._view()
        (quorum, note), log_end, committed, counters = await asyncio.gather(
            self._quorum(via), self._log_end(view) if view is not None else _nothing(),
            self._committed(), self._counters())
        snapshot, self.previous = build_snapshot(quorum, view, [*self.brokers, *extra_brokers], log_end,
                                                 committed, counters, self.previous, time.monotonic(), note)
        return snapshot

    async def close(self) -> None:
        for probe in [*self.bootstrap, *self.controllers, *self.brokers.values()]:
            await probe.close()


async def _nothing() -> dict:
    return {}


# ---- the command -------------------------------------------------------------------------------


def add_parser(sub) -> None:
    top = sub.add_parser("top", help="a live view of a running cluster", epilog=EXAMPLE,
                         formatter_class=argparse.RawDescriptionHelpFormatter,
                         description="The quorum, brokers, under-replicated and offline partitions and "
                                     "consumer group lag, refreshed each interval.")
    top.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT[,...]")
    top.add_argument("--bootstrap-controller", metavar="HOST:PORT[,...]",
                     help="controller addresses for the quorum section (else asked through a broker)")
    top.add_argument("--metrics", action="append", default=[], metavar="ID=http://HOST:PORT",
                     help="a broker's metrics.listener, for bytes in/out per second; repeatable")
    top.add_argument("--interval", type=float, default=1.0, metavar="SECONDS",
                     help="refresh period (default 1)")
    top.add_argument("--once", action="store_true", help="print one snapshot as plain lines and exit")
    top.add_argument("--command-config", metavar="FILE",
                     help="client properties to connect with (security.protocol, sasl.*, ssl.*)")


def parse_metrics(items: list[str]) -> dict[int, str]:
    out = {}
    for item in items:
        node, _, url = item.partition("=")
        if not node.strip().isdigit() or not url.startswith("http://"):
            raise ValueError(f"--metrics: expected ID=http://HOST:PORT, got {item!r}")
        out[int(node)] = url
    return out


async def watch(collector: Collector, interval: float, out=None, once: bool = False) -> None:
    """Plain lines: every line of the first snapshot, then those that changed."""
    out = out or sys.stdout
    shown: list[str] = []
    try:
        while True:
            lines = render_plain(await collector.refresh())
            for line in lines:
                if once or line not in shown:
                    print(line, file=out, flush=True)
            shown = lines
            if once:
                return
            await asyncio.sleep(interval)
    finally:
        await collector.close()


async def live(collector: Collector, interval: float) -> None:
    from rich.live import Live

    try:
        with Live(render_rich(await collector.refresh()), auto_refresh=False) as display:
            while True:
                await asyncio.sleep(interval)
                display.update(render_rich(await collector.refresh()), refresh=True)
    finally:
        await collector.close()


def run(args) -> int:
    from strom.acls import read_command_config

    if args.interval <= 0:
        raise ValueError(f"--interval: must be above 0, got {args.interval}")
    controllers = parse_bootstrap(args.bootstrap_controller) if args.bootstrap_controller else []
    collector = Collector(parse_bootstrap(args.bootstrap_server), controllers, parse_metrics(args.metrics),
                          read_command_config(args.command_config))
    if args.once:
        # Rates need two refreshes: take one, wait the interval, print the second.
        async def twice() -> None:
            await collector.refresh()
            await asyncio.sleep(args.interval)
            await watch(collector, args.interval, once=True)
        asyncio.run(twice())
    elif sys.stdout.isatty():
        asyncio.run(live(collector, args.interval))
    else:
        asyncio.run(watch(collector, args.interval))
    return 0
