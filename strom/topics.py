"""`strom topics`: create, list, describe and delete topics through a broker, over the
Kafka protocol (like kafka-topics.sh --bootstrap-server); ``--command-config FILE`` names the
client properties to reach a secured listener with (security/client_config.py)."""
from __future__ import annotations

import asyncio
import re
from typing import Any

from protocol import messages as M
from protocol.client import ClientSecurity, KafkaConnection
from protocol.errors import Error
from protocol.json_writer import uuid_string


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


class TopicError(RuntimeError):
    """A topic request's error: ``str()`` names what failed and the code; ``tool_message`` is what
    kafka-topics prints after its prefix (the exception's message: the broker's, else the code)."""

    def __init__(self, text: str, tool_message: str):
        super().__init__(text)
        self.tool_message = tool_message


def _check(code: int, message: str | None, what: str) -> None:
    if code != Error.NONE:
        raise TopicError(f"{what}: {Error(code).name}{': ' + message if message else ''}",
                         message or Error(code).name)


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


def include_list(raw: str) -> re.Pattern[str]:
    """kafka-topics' --topic as TopicFilter.IncludeList reads it: a regular expression matching
    whole names, commas meaning '|', spaces and surrounding quotes dropped."""
    regex = re.sub(r"[\"']+$", "", re.sub(r"^[\"']+", "", raw.strip().replace(",", "|").replace(" ", "")))
    try:
        return re.compile(regex)
    except re.error:
        message = f"{regex} is an invalid regex."
        raise TopicError(message, message) from None


def list_topics(bootstrap: str, security: ClientSecurity | None = None, topic: str | None = None) -> str:
    """kafka-topics --list: the names, sorted, internal ones too; with --topic those it matches."""
    names = sorted(t.name for t in _metadata(bootstrap, None, security).topics)
    if topic is not None:
        pattern = include_list(topic)
        names = [n for n in names if pattern.fullmatch(n)]
    return "\n".join(names)


DESCRIBE_TOPIC_PARTITIONS = 75
DESCRIBE_CONFIGS = 32
TOPIC_RESOURCE = 2
DEFAULT_CONFIG = 5  # DescribeConfigs' config_source of a value nobody set (ConfigEntry.isDefault)
ZERO_UUID = bytes(16)


def _ids(nodes: list[int] | None) -> str:
    return "N/A" if nodes is None else ",".join(map(str, nodes))


def format_topic(name: str, topic_id: bytes, partitions: list[Any],
                 configs: list[tuple[str, str | None]]) -> str:
    """TopicCommand's TopicDescription and PartitionDescription.printDescription for one topic: its
    line (TopicId unless zero, PartitionCount, ReplicationFactor, Configs: the values not at their
    default as name=value joined by commas), then a line per partition by id, tab-led (Leader
    ``none`` without one; Elr and LastKnownElr ``N/A`` when the broker sent none). ``partitions``
    are DescribeTopicPartitions' (or Metadata's) partition entries."""
    ordered = sorted(partitions, key=lambda p: p.partition_index)
    head = f"Topic: {name}"
    if topic_id and bytes(topic_id) != ZERO_UUID:
        head += f"\tTopicId: {uuid_string(topic_id)}"
    replication_factor = len(ordered[0].replica_nodes) if ordered else 0
    head += (f"\tPartitionCount: {len(ordered)}\tReplicationFactor: {replication_factor}"
             f"\tConfigs: {','.join(f'{k}={v}' if v is not None else f'{k}=null' for k, v in configs)}")
    lines = [head]
    for p in ordered:
        lines.append(f"\tTopic: {name}\tPartition: {p.partition_index}"
                     f"\tLeader: {p.leader_id if p.leader_id >= 0 else 'none'}"
                     f"\tReplicas: {_ids(p.replica_nodes)}\tIsr: {_ids(p.isr_nodes)}"
                     f"\tElr: {_ids(getattr(p, 'eligible_leader_replicas', None))}"
                     f"\tLastKnownElr: {_ids(getattr(p, 'last_known_elr', None))}")
    return "\n".join(lines)


async def _describe(bootstrap: str, name: str | None, security: ClientSecurity | None) -> str:
    conn = KafkaConnection(*_parse_bootstrap(bootstrap), client_id="strom-topics", security=security)
    await conn.connect()
    try:
        R = M.MetadataRequest
        listed = await conn.request(3, 12, R(topics=None, allow_auto_topic_creation=False))
        names = sorted(t.name for t in listed.topics)
        if name is not None:
            pattern = include_list(name)
            names = [n for n in names if pattern.fullmatch(n)]
            if not names:
                missing = f"Topic '{name}' does not exist as expected"
                raise TopicError(missing, missing)
        if not names:
            return ""
        D = M.DescribeTopicPartitionsRequest
        topics: dict[str, Any] = {}
        cursor = None
        while True:
            answer = await conn.request(DESCRIBE_TOPIC_PARTITIONS, 0, D(
                topics=[D.TopicRequest(name=n) for n in names], response_partition_limit=2000, cursor=cursor))
            for t in answer.topics:
                _check(t.error_code, None, f"describing {t.name}")
                if t.name in topics:
                    topics[t.name].partitions.extend(t.partitions)
                else:
                    topics[t.name] = t
            if answer.next_cursor is None:
                break
            cursor = D.Cursor(topic_name=answer.next_cursor.topic_name,
                              partition_index=answer.next_cursor.partition_index)
        C = M.DescribeConfigsRequest
        described = await conn.request(DESCRIBE_CONFIGS, 4, C(resources=[
            C.DescribeConfigsResource(resource_type=TOPIC_RESOURCE, resource_name=n, configuration_keys=None)
            for n in topics], include_synonyms=False, include_documentation=False))
        configs: dict[str, list[tuple[str, str | None]]] = {}
        for result in described.results:
            _check(result.error_code, result.error_message,
                   f"describing the configs of {result.resource_name}")
            configs[result.resource_name] = [(c.name, c.value) for c in result.configs
                                             if c.config_source != DEFAULT_CONFIG]
    finally:
        await conn.close()
    return "\n".join(format_topic(n, topics[n].topic_id, topics[n].partitions, configs.get(n, []))
                     for n in sorted(topics))


def describe(bootstrap: str, name: str | None, security: ClientSecurity | None = None) -> str:
    """kafka-topics --describe: each topic's line and its partitions' (TopicCommand.describeTopic),
    from DescribeTopicPartitions and the topics' DescribeConfigs, as Kafka's admin client asks."""
    return asyncio.run(_describe(bootstrap, name, security))
