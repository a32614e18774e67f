"""`strom topics`: create, alter, list, describe and delete topics through a broker, over the
Kafka protocol, as kafka-topics.sh --bootstrap-server (Kafka's TopicCommand) does, with its options
and output; ``--command-config FILE`` names the client properties to reach a secured listener with
(security/client_config.py).

``--alter --topic T --partitions N [--replica-assignment 1:2,2:3,...]`` adds partitions
(CreatePartitions; a decrease is refused by the controller with its message); the assignment
lists every partition, the existing ones first, and only the new ones' lists are sent.
``--exclude-internal`` leaves out the internal topics (list, describe). Describe's
``--under-replicated-partitions``, ``--under-min-isr-partitions``, ``--at-min-isr-partitions`` and
``--unavailable-partitions`` print only the partitions they name, without the topics' lines;
``--topics-with-overrides`` prints only the lines of topics with a config set, without their
partitions. ``--if-exists`` (alter, delete, describe) and ``--if-not-exists`` (create) make a
missing or existing topic no error.
"""
from __future__ import annotations

import argparse
import asyncio
import re
from dataclasses import dataclass
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


def parse_replica_assignment(text: str) -> list[list[int]]:
    """kafka-topics' --replica-assignment: partitions by commas, each one's brokers by colons;
    duplicates within a partition and a replication factor unlike the first partition's are
    refused with TopicCommand's messages."""
    out: list[list[int]] = []
    for i, part in enumerate(text.split(",")):
        try:
            brokers = [int(b.strip()) for b in part.split(":")]
        except ValueError:
            message = f'For input string: "{part}"'
            raise TopicError(message, message) from None
        duplicates = sorted({b for b in brokers if brokers.count(b) > 1})
        if duplicates:
            message = ("Partition replica lists may not contain duplicate entries: "
                       + ",".join(map(str, duplicates)))
            raise TopicError(message, message)
        out.append(brokers)
        if len(brokers) != len(out[0]):
            message = f"Partition {i} has different replication factor: [{', '.join(map(str, brokers))}]"
            raise TopicError(message, message)
    return out


def has_collision_chars(name: str) -> bool:
    return "." in name or "_" in name


COLLISION_WARNING = ("WARNING: Due to limitations in metric names, topics with a period ('.') or underscore "
                     "('_') could collide. To avoid issues it is best to use either, but not both.")


def create(bootstrap: str, name: str, partitions: int | None, replication_factor: int | None,
           configs: dict[str, str], security: ClientSecurity | None = None,
           replica_assignment: list[list[int]] | None = None, if_not_exists: bool = False) -> str:
    """TopicCommand.createTopic: what it prints after the collision warning ('Created topic T.';
    nothing for a topic that exists with ``if_not_exists``)."""
    if replication_factor is not None and not 1 <= replication_factor <= 32767:
        message = "The replication factor must be between 1 and 32767 inclusive"
        raise TopicError(message, message)
    if partitions is not None and partitions < 1:
        message = "The partitions must be greater than 0"
        raise TopicError(message, message)
    R = M.CreateTopicsRequest
    assignments = [R.CreatableTopic.CreatableReplicaAssignment(partition_index=i, broker_ids=brokers)
                   for i, brokers in enumerate(replica_assignment or [])]
    body = R(topics=[R.CreatableTopic(
        name=name, num_partitions=-1 if partitions is None or assignments else partitions,
        replication_factor=-1 if replication_factor is None or assignments else replication_factor,
        assignments=assignments,
        configs=[R.CreatableTopicConfig(name=k, value=v) for k, v in configs.items()])],
        timeout_ms=30000)
    result = asyncio.run(_request(bootstrap, 19, 7, body, security)).topics[0]
    if result.error_code == Error.TOPIC_ALREADY_EXISTS and if_not_exists:
        return ""
    _check(result.error_code, result.error_message, f"creating {name}")
    return f"Created topic {name}."


def delete(bootstrap: str, name: str, security: ClientSecurity | None = None,
           if_exists: bool = False, exclude_internal: bool = False) -> str:
    """TopicCommand.deleteTopic: every topic --topic matches; none is an error unless ``if_exists``."""
    listed = _metadata(bootstrap, None, security)
    names = select_topics([t.name for t in listed.topics], name, exclude_internal)
    ensure_found(names, name, if_exists)
    if not names:
        return ""
    D = M.DeleteTopicsRequest
    body = D(topics=[D.DeleteTopicState(name=n) for n in names], timeout_ms=30000)
    for result in asyncio.run(_request(bootstrap, 20, 6, body, security)).responses:
        _check(result.error_code, result.error_message, f"deleting {result.name}")
    return ""


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


# Kafka's Topic.isInternal: the topics the brokers keep for themselves.
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})


def select_topics(names: list[str], topic: str | None, exclude_internal: bool = False) -> list[str]:
    """TopicCommand.doGetTopics: the names, sorted, that --topic matches (all without it),
    leaving out the internal ones with --exclude-internal."""
    pattern = include_list(topic) if topic is not None else None
    return [n for n in sorted(names) if (pattern is None or pattern.fullmatch(n))
            and not (exclude_internal and n in INTERNAL_TOPICS)]


def ensure_found(found: list[str], topic: str | None, if_exists: bool) -> None:
    """TopicCommand.ensureTopicExists: --topic named and nothing matched, unless --if-exists."""
    if topic and not found and not if_exists:
        message = f"Topic '{topic}' does not exist as expected"
        raise TopicError(message, message)


def list_topics(bootstrap: str, security: ClientSecurity | None = None, topic: str | None = None,
                exclude_internal: bool = False) -> str:
    """kafka-topics --list: the names, sorted, internal ones too unless --exclude-internal; with
    --topic those it matches."""
    return "\n".join(select_topics([t.name for t in _metadata(bootstrap, None, security).topics], topic,
                                   exclude_internal))


def new_partitions(current: int, count: int, assignment: list[list[int]] | None) -> Any:
    """TopicCommand.topicNewPartitions: the CreatePartitions entry raising a topic to ``count``,
    with the --replica-assignment lists past the ``current`` partitions."""
    R = M.CreatePartitionsRequest
    assignments = None
    if assignment:
        assignments = [R.CreatePartitionsTopic.CreatePartitionsAssignment(broker_ids=b)
                       for b in assignment[current:]]
    return assignments


def alter(bootstrap: str, topic: str, partitions: int, security: ClientSecurity | None = None,
          replica_assignment: list[list[int]] | None = None, if_exists: bool = False,
          exclude_internal: bool = False) -> None:
    """kafka-topics --alter --partitions: every topic --topic matches raised to ``partitions``
    (CreatePartitions); nothing matched is an error unless ``if_exists``."""
    async def go() -> None:
        conn = KafkaConnection(*_parse_bootstrap(bootstrap), client_id="strom-topics", security=security)
        await conn.connect()
        try:
            listed = await conn.request(3, 12, M.MetadataRequest(topics=None,
                                                                 allow_auto_topic_creation=False))
            names = select_topics([t.name for t in listed.topics], topic, exclude_internal)
            ensure_found(names, topic, if_exists)
            if not names:
                return
            sizes = {t.name: len(t.partitions) for t in listed.topics}
            R = M.CreatePartitionsRequest
            body = R(topics=[R.CreatePartitionsTopic(name=n, count=partitions,
                                                     assignments=new_partitions(sizes[n], partitions,
                                                                                replica_assignment))
                             for n in names], timeout_ms=30000, validate_only=False)
            answer = await conn.request(37, 3, body)
        finally:
            await conn.close()
        for result in answer.results:
            _check(result.error_code, result.error_message, f"altering {result.name}")
    asyncio.run(go())


DESCRIBE_TOPIC_PARTITIONS = 75
DESCRIBE_CONFIGS = 32
TOPIC_RESOURCE = 2
DEFAULT_CONFIG = 5  # DescribeConfigs' config_source of a value nobody set (ConfigEntry.isDefault)
ZERO_UUID = bytes(16)


def _ids(nodes: list[int] | None) -> str:
    return "N/A" if nodes is None else ",".join(map(str, nodes))


@dataclass(frozen=True)
class DescribeOptions:
    """kafka-topics --describe's reports (TopicCommand.DescribeOptions)."""
    under_replicated: bool = False
    under_min_isr: bool = False
    at_min_isr: bool = False
    unavailable: bool = False
    with_overrides: bool = False
    if_exists: bool = False
    exclude_internal: bool = False

    @property
    def describe_configs(self) -> bool:
        """The topics' lines: unless a partition report is asked for."""
        return not (self.under_replicated or self.under_min_isr or self.at_min_isr or self.unavailable)


ALL = DescribeOptions()


def format_topic_line(name: str, topic_id: bytes, partitions: list[Any],
                      configs: list[tuple[str, str | None]]) -> str:
    ordered = sorted(partitions, key=lambda p: p.partition_index)
    head = f"Topic: {name}"
    if topic_id and bytes(topic_id) != ZERO_UUID:
        head += f"\tTopicId: {uuid_string(topic_id)}"
    replication_factor = len(ordered[0].replica_nodes) if ordered else 0
    return head + (f"\tPartitionCount: {len(ordered)}\tReplicationFactor: {replication_factor}"
                   f"\tConfigs: {','.join(f'{k}={v}' if v is not None else f'{k}=null' for k, v in configs)}")


def format_partition(name: str, p: Any) -> str:
    return (f"\tTopic: {name}\tPartition: {p.partition_index}"
            f"\tLeader: {p.leader_id if p.leader_id >= 0 else 'none'}"
            f"\tReplicas: {_ids(p.replica_nodes)}\tIsr: {_ids(p.isr_nodes)}"
            f"\tElr: {_ids(getattr(p, 'eligible_leader_replicas', None))}"
            f"\tLastKnownElr: {_ids(getattr(p, 'last_known_elr', None))}")


def partition_reported(p: Any, options: DescribeOptions, min_isr: int, live_brokers: set[int]) -> bool:
    """TopicCommand.DescribeOptions.shouldPrintTopicPartition: every partition when describing
    configs, else those a report names: under-replicated (fewer in sync than replicas), under min
    ISR (no leader, or fewer in sync than min.insync.replicas), at min ISR (exactly that many),
    unavailable (no leader, or a leader that is not a live broker)."""
    leader = p.leader_id >= 0
    isr = len(p.isr_nodes or [])
    return (options.describe_configs
            or (options.under_replicated and len(p.replica_nodes or []) - isr > 0)
            or (options.unavailable and (not leader or p.leader_id not in live_brokers))
            or (options.under_min_isr and (not leader or isr < min_isr))
            or (options.at_min_isr and isr == min_isr))


def format_topic(name: str, topic_id: bytes, partitions: list[Any],
                 configs: list[tuple[str, str | None]], options: DescribeOptions = ALL, min_isr: int = 1,
                 live_brokers: set[int] | None = None) -> str:
    """TopicCommand's TopicDescription and PartitionDescription.printDescription for one topic: its
    line (TopicId unless zero, PartitionCount, ReplicationFactor, Configs: the values not at their
    default as name=value joined by commas), then a line per partition by id, tab-led (Leader
    ``none`` without one; Elr and LastKnownElr ``N/A`` when the broker sent none). ``partitions``
    are DescribeTopicPartitions' (or Metadata's) partition entries. ``options``' reports leave
    out the topic's line (a partition report, or --topics-with-overrides and no config set) or
    its partitions (--topics-with-overrides; the others print only the partitions they name)."""
    lines = []
    if options.describe_configs and (not options.with_overrides or configs):
        lines.append(format_topic_line(name, topic_id, partitions, configs))
    if not options.with_overrides:
        live = live_brokers if live_brokers is not None else set()
        lines += [format_partition(name, p) for p in sorted(partitions, key=lambda p: p.partition_index)
                  if partition_reported(p, options, min_isr, live)]
    return "\n".join(lines)


async def _describe(bootstrap: str, name: str | None, security: ClientSecurity | None,
                    options: DescribeOptions) -> str:
    conn = KafkaConnection(*_parse_bootstrap(bootstrap), client_id="strom-topics", security=security)
    await conn.connect()
    try:
        R = M.MetadataRequest
        listed = await conn.request(3, 12, R(topics=None, allow_auto_topic_creation=False))
        live_brokers = {b.node_id for b in listed.brokers}
        names = select_topics([t.name for t in listed.topics], name, options.exclude_internal)
        ensure_found(names, name, options.if_exists)
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
        min_isr: dict[str, int] = {}
        for result in described.results:
            _check(result.error_code, result.error_message,
                   f"describing the configs of {result.resource_name}")
            configs[result.resource_name] = [(c.name, c.value) for c in result.configs
                                             if c.config_source != DEFAULT_CONFIG]
            min_isr[result.resource_name] = next((int(c.value) for c in result.configs
                                                  if c.name == "min.insync.replicas" and c.value), 1)
    finally:
        await conn.close()
    texts = [format_topic(n, topics[n].topic_id, topics[n].partitions, configs.get(n, []), options,
                          min_isr.get(n, 1), live_brokers) for n in sorted(topics)]
    return "\n".join(t for t in texts if t)


def describe(bootstrap: str, name: str | None, security: ClientSecurity | None = None,
             options: DescribeOptions = ALL) -> str:
    """kafka-topics --describe: each topic's line and its partitions' (TopicCommand.describeTopic),
    from DescribeTopicPartitions and the topics' DescribeConfigs, as Kafka's admin client asks."""
    return asyncio.run(_describe(bootstrap, name, security, options))


# ---- the command -------------------------------------------------------------------------------

ACTIONS = ("create", "list", "describe", "delete", "alter")
EXAMPLE = """examples:
  strom topics create --bootstrap-server 127.0.0.1:9092 --topic orders --partitions 3 \\
      --replication-factor 3 --config retention.ms=86400000
  strom topics describe --bootstrap-server 127.0.0.1:9092 --topic orders
  strom topics --alter --bootstrap-server 127.0.0.1:9092 --topic orders --partitions 6
  strom topics --describe --bootstrap-server 127.0.0.1:9092 --under-replicated-partitions
  strom topics list --bootstrap-server 127.0.0.1:9092 --command-config client.properties"""
REPORTS = ("under-replicated-partitions", "under-min-isr-partitions", "at-min-isr-partitions",
           "unavailable-partitions")


def add_parser(sub: Any) -> None:
    topics = sub.add_parser("topics", help="create, alter, list, describe or delete topics", epilog=EXAMPLE,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    topics.add_argument("action", nargs="?", choices=ACTIONS)
    for flag in ACTIONS:  # kafka-topics' spelling of the action
        topics.add_argument(f"--{flag}", dest="flag_actions", action="append_const", const=flag,
                            help=argparse.SUPPRESS)
    topics.add_argument("--bootstrap-server", default="127.0.0.1:9092")
    topics.add_argument("--topic")
    topics.add_argument("--partitions", type=int)
    topics.add_argument("--replication-factor", type=int)
    topics.add_argument("--replica-assignment", metavar="B1:B2,B1:B2,...",
                        help="each partition's brokers (create, alter: every partition, the existing first)")
    topics.add_argument("--config", action="append", default=[], metavar="NAME=VALUE")
    for report in REPORTS:
        topics.add_argument(f"--{report}", action="store_true", help=f"describe: only the {report}")
    topics.add_argument("--topics-with-overrides", action="store_true",
                        help="describe: only the topics with a config set, without their partitions")
    topics.add_argument("--if-exists", action="store_true",
                        help="alter, delete, describe: no error when no topic matches")
    topics.add_argument("--if-not-exists", action="store_true", help="create: no error when the topic exists")
    topics.add_argument("--exclude-internal", action="store_true",
                        help="list, describe: leave out internal topics")
    topics.add_argument("--command-config", metavar="FILE",
                        help="client properties to connect with (security.protocol, sasl.*, ssl.*)")


def check_options(args: argparse.Namespace) -> str:
    """TopicCommandOptions.checkArgs: exactly one action, the options each action takes; the action."""
    actions = [a for a in [args.action, *(args.flag_actions or [])] if a]
    if len(actions) != 1:
        raise ValueError("Command must include exactly one action: "
                         "--list, --describe, --create, --alter or --delete")
    action = actions[0]
    if action in ("create", "delete", "alter") and not args.topic:
        raise ValueError(f"topics {action} needs --topic")
    used = {"--partitions": args.partitions is not None, "--config": bool(args.config),
            "--replica-assignment": args.replica_assignment is not None,
            "--replication-factor": args.replication_factor is not None,
            "--if-exists": args.if_exists, "--if-not-exists": args.if_not_exists,
            "--exclude-internal": args.exclude_internal,
            "--topics-with-overrides": args.topics_with_overrides,
            **{f"--{r}": getattr(args, r.replace("-", "_")) for r in REPORTS}}
    allowed = {"--partitions": ("alter", "create"), "--config": ("create",),
               "--replica-assignment": ("alter", "create"), "--replication-factor": ("create",),
               "--if-exists": ("alter", "delete", "describe"), "--if-not-exists": ("create",),
               "--exclude-internal": ("list", "describe"), "--topics-with-overrides": ("describe",),
               **{f"--{r}": ("describe",) for r in REPORTS}}
    for option, given in used.items():
        if given and action not in allowed[option]:
            raise ValueError(f'Option "[{option[2:]}]" can\'t be used with option "[{action}]"')
    if action == "alter" and args.partitions is None:
        raise ValueError('Missing required argument "[partitions]"')
    if action == "create" and args.replica_assignment is not None:
        for option in ("--partitions", "--replication-factor"):
            if used[option]:
                raise ValueError(f'Option "[replica-assignment]" can\'t be used with option "[{option[2:]}]"')
    if args.topics_with_overrides and any(getattr(args, r.replace("-", "_")) for r in REPORTS):
        raise ValueError('Option "[topics-with-overrides]" can\'t be used with option "[{}]"'.format(
            next(r for r in REPORTS if getattr(args, r.replace("-", "_")))))
    return action


def run(args: argparse.Namespace) -> int:
    from strom.acls import read_command_config

    action = check_options(args)
    security = read_command_config(args.command_config)
    try:  # TopicCommand.execute: the error on stdout after its prefix, exit 1; a delete prints nothing
        assignment = parse_replica_assignment(args.replica_assignment) if args.replica_assignment else None
        if action == "create":
            if has_collision_chars(args.topic):
                print(COLLISION_WARNING)
            configs = dict(c.split("=", 1) for c in args.config)
            text = create(args.bootstrap_server, args.topic, args.partitions, args.replication_factor,
                          configs, security, assignment, args.if_not_exists)
            if text:
                print(text)
        elif action == "delete":
            delete(args.bootstrap_server, args.topic, security, args.if_exists)
        elif action == "alter":
            alter(args.bootstrap_server, args.topic, args.partitions, security, assignment, args.if_exists)
        elif action == "list":
            print(list_topics(args.bootstrap_server, security, args.topic, args.exclude_internal))
        else:
            options = DescribeOptions(args.under_replicated_partitions, args.under_min_isr_partitions,
                                      args.at_min_isr_partitions, args.unavailable_partitions,
                                      args.topics_with_overrides, args.if_exists, args.exclude_internal)
            text = describe(args.bootstrap_server, args.topic, security, options)
            if text:
                print(text)
    except TopicError as e:
        print(f"Error while executing topic command : {e.tool_message}")
        return 1
    return 0
