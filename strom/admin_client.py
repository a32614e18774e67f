"""The admin commands' way to a cluster (strom log-dirs, delete-records, get-offsets,
transactions, features): one connection per broker over the project's client, each request at the
highest version both sides speak, Metadata to find brokers and partition leaders, as Kafka's
AdminClient does for these tools."""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from protocol import messages as M
from protocol.client import ClientSecurity, KafkaConnection
from protocol.errors import Error

API_VERSIONS, METADATA = 18, 3
REQUEST_TIMEOUT_S = 30.0


class AdminError(RuntimeError):
    """A request the cluster refused or could not answer: the command prints it and exits 1."""


def error_name(code: int) -> str:
    try:
        return Error(code).name
    except ValueError:
        return f"UNKNOWN_ERROR_CODE_{code}"


def parse_bootstrap(bootstrap: str) -> list[tuple[str, int]]:
    out = []
    for item in bootstrap.split(","):
        host, _, port = item.strip().rpartition(":")
        if not port.isdigit():
            raise ValueError(f"--bootstrap-server: {item.strip()!r} is not HOST:PORT")
        out.append((host or "127.0.0.1", int(port)))
    return out


class Admin:
    """Connections to a cluster's brokers, opened on first use; ``async with`` closes them."""

    def __init__(self, bootstrap: str, security: ClientSecurity | None = None,
                 client_id: str = "strom-admin"):
        self.bootstrap = parse_bootstrap(bootstrap)
        self.security = security
        self.client_id = client_id
        self.brokers: dict[int, tuple[str, int]] = {}
        self._conns: dict[tuple[str, int], tuple[KafkaConnection, dict[int, tuple[int, int]]]] = {}

    async def __aenter__(self) -> Admin:
        return self

    async def __aexit__(self, *exc: object) -> None:
        for conn, _ in self._conns.values():
            await conn.close()
        self._conns.clear()

    async def _open(self, address: tuple[str, int]):
        if address in self._conns:
            return self._conns[address]
        conn = KafkaConnection(*address, client_id=self.client_id, security=self.security)
        await conn.connect()
        try:
            answer = await conn.request(API_VERSIONS, 0, M.ApiVersionsRequest(), REQUEST_TIMEOUT_S)
        except BaseException:
            await conn.close()
            raise
        served = {a.api_key: (a.min_version, a.max_version) for a in answer.api_keys}
        self._conns[address] = (conn, served)
        return conn, served

    async def served(self, address: tuple[str, int] | None = None) -> dict[int, tuple[int, int]]:
        return (await self._any() if address is None else await self._open(address))[1]

    async def _any(self):
        last: Exception | None = None
        for address in self.bootstrap:
            try:
                return await self._open(address)
            except OSError as e:
                last = e
        raise AdminError(f"no broker of {self.bootstrap} answered: {last}")

    async def request(self, api_key: int, lo: int, hi: int, body: Any, node: int | None = None,
                      address: tuple[str, int] | None = None) -> Any:
        """``body`` to broker ``node`` (or ``address``, or any bootstrap broker) at the highest
        version both speak within lo..hi."""
        if node is not None:
            if node not in self.brokers:
                await self.metadata([])
            if node not in self.brokers:
                raise AdminError(f"broker {node} is not in the cluster")
            address = self.brokers[node]
        conn, served = await (self._any() if address is None else self._open(address))
        if api_key not in served or served[api_key][1] < lo or served[api_key][0] > hi:
            raise AdminError(f"the broker does not serve {M.API_NAMES[api_key]} v{lo}-{hi}")
        version = min(hi, served[api_key][1])
        return await conn.request(api_key, version, body, REQUEST_TIMEOUT_S)

    async def metadata(self, topics: Iterable[str] | None) -> Any:
        """A Metadata answer for ``topics`` (None: every topic); records the brokers' addresses."""
        names = None if topics is None else [M.MetadataRequest.MetadataRequestTopic(name=t) for t in topics]
        answer = await self.request(METADATA, 1, 12, M.MetadataRequest(topics=names,
                                                                       allow_auto_topic_creation=False))
        self.brokers = {b.node_id: (b.host, b.port) for b in answer.brokers}
        return answer

    async def leaders(self, topics: Iterable[str]) -> dict[tuple[str, int], int]:
        """Each partition of ``topics`` and its leader; AdminError for a topic that is not there."""
        answer = await self.metadata(sorted(set(topics)))
        out: dict[tuple[str, int], int] = {}
        for t in answer.topics:
            if t.error_code != Error.NONE:
                raise AdminError(f"topic {t.name}: {error_name(t.error_code)}")
            for p in t.partitions:
                out[(t.name, p.partition_index)] = p.leader_id
        return out


def pretty_table(headers: list[str], rows: list[list[str]]) -> str:
    """Kafka's ToolsUtils.prettyPrintTable: each cell padded to its column's width, then a tab."""
    widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(headers)]
    return "\n".join("".join(f"{cell:<{w}}\t" for cell, w in zip(line, widths)) for line in [headers, *rows])
