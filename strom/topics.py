"""`strom topics`: create, list, describe and delete topics through a broker, over the
Kafka protocol (like kafka-topics.sh --bootstrap-server); ``--command-config FILE`` names the
client properties to reach a secured listener with (security/client_config.py)."""
from __future__ import annotations

import asyncio

from protocol import messages as M
from protocol.client import ClientSecurity, KafkaConnection
from protocol.errors import Error


def _parse_bootstrap(bootstrap: str) -> tuple[str, int]:
    host, _, port = bootstrap.split(",")[0].rpartition(":")
    return host or "127.0.0.1", int(port)


async def _request(bootstrap: str, api_key: int, version: int, body, security: ClientSecurity | None = None):
    conn = KafkaConnection(*_parse_bootstrap(bootstrap), client_id="strom-topics", security=security)
    await conn.connect()
    try:
        return await conn.request(api_key, version, body)
    finally:
        await conn.close()


def _check(code: int, message: str | None, what: str) -> None:
    if code != Error.NONE:
        raise RuntimeError(f"{what}: {Error(code).name}{': ' + message if message else ''}")


def create(bootstrap: str, name: str, partitions: int, replication_factor: int,
           configs: dict[str, str], security: ClientSecurity | None = None) -> str:
    R = M.CreateTopicsRequest
    body = R(topics=[R.CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=replication_factor,
        configs=[R.CreatableTopicConfig(name=k, value=v) for k, v in configs.items()])],
        timeout_ms=30000)
    result = asyncio.run(_request(bootstrap, 19, 7, body, security)).topics[0]
    _check(result.error_code, result.error_message, f"creating {name}")
    return f"Created topic {name}."


def delete(bootstrap: str, name: str, security: ClientSecurity | None = None) -> str:
    body = M.DeleteTopicsRequest(topics=[M.DeleteTopicsRequest.DeleteTopicState(name=name)], timeout_ms=30000)
    result = asyncio.run(_request(bootstrap, 20, 6, body, security)).responses[0]
    _check(result.error_code, result.error_message, f"deleting {name}")
    return f"Deleted topic {name}."


def _metadata(bootstrap: str, names: list[str] | None, security: ClientSecurity | None = None):
    R = M.MetadataRequest
    topics = None if names is None else [R.MetadataRequestTopic(name=n) for n in names]
    body = R(topics=topics, allow_auto_topic_creation=False)
    return asyncio.run(_request(bootstrap, 3, 12, body, security))


def list_topics(bootstrap: str, security: ClientSecurity | None = None) -> str:
    return "\n".join(sorted(t.name for t in _metadata(bootstrap, None, security).topics))


def describe(bootstrap: str, name: str | None, security: ClientSecurity | None = None) -> str:
    lines = []
    for t in _metadata(bootstrap, None if name is None else [name], security).topics:
        _check(t.error_code, None, f"describing {t.name}")
        lines.append(f"Topic: {t.name}\tPartitionCount: {len(t.partitions)}\t"
                     f"ReplicationFactor: {len(t.partitions[0].replica_nodes) if t.partitions else 0}")
        for p in sorted(t.partitions, key=lambda p: p.partition_index):
            lines.append(f"\tTopic: {t.name}\tPartition: {p.partition_index}\tLeader: {p.leader_id}\t"
                         f"Replicas: {','.join(map(str, p.replica_nodes))}\t"
                         f"Isr: {','.join(map(str, p.isr_nodes))}")
    return "\n".join(lines)
