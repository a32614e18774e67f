"""`strom configs`: describe and alter the dynamic configs of topics, brokers, broker loggers,
groups, users, clients and ips through a broker (--bootstrap-server) or the controllers
(--bootstrap-controller), as kafka-configs.sh does, with its options and its output.

    strom configs --bootstrap-server HOST:PORT --entity-type topics --entity-name orders --describe
    strom configs --bootstrap-server HOST:PORT --entity-type topics --entity-name orders --alter \\
        --add-config retention.ms=60000,cleanup.policy=[compact,delete] --delete-config segment.ms
    strom configs --bootstrap-server HOST:PORT --entity-type brokers --entity-default --alter \\
        --add-config log.retention.ms=3600000
    strom configs --bootstrap-server HOST:PORT --entity-type users --entity-name alice \\
        --entity-type clients --entity-name app --alter --add-config producer_byte_rate=1048576
    strom configs --bootstrap-server HOST:PORT --entity-type users --entity-name alice --alter \\
        --add-config 'SCRAM-SHA-512=[iterations=8192,password=alice-secret]'

Topics, brokers and groups go through DescribeConfigs (with synonyms) and
IncrementalAlterConfigs: --describe prints the resource's dynamic configs (every config with
``--all``), one per line as ``  name=value sensitive=false synonyms={SOURCE:name=value, ...}``;
without --entity-name every topic, broker (then the cluster default) or group. Users and clients
go through DescribeClientQuotas and AlterClientQuotas (``--entity-default``: the default entity),
a user's SCRAM credentials through DescribeUserScramCredentials and AlterUserScramCredentials.
Deleting a config the entity does not have is refused before anything is sent
(``Invalid config(s): name``), as kafka-configs refuses it.

Broker loggers (``--entity-type broker-loggers --entity-name ID``) are the loggers of node ID's
process and their levels (KIP-412): --describe lists every one (``  name=LEVEL sensitive=false
synonyms={}``), --add-config 'strom.broker=DEBUG' sets a level (FATAL, ERROR, WARN, INFO, DEBUG,
TRACE), --delete-config unsets it; a logger the node does not have is refused
(``Invalid broker logger(s): name``). They are asked of node ID itself. Ips (``--entity-type ips``
with an address or --entity-default) take connection_creation_rate, a client quota. With
--bootstrap-controller, changes go to the active controller; the controllers describe their own
configs, their loggers and topics.
"""
from __future__ import annotations

import argparse
import asyncio
import ipaddress
import os
import re
import socket
from decimal import Decimal
from typing import Any

from metadata.scram import DEFAULT_ITERATIONS, SCRAM_SHA_256, SCRAM_SHA_512, salted_password
from protocol import messages as M
from protocol.client import ClientSecurity, KafkaConnection
from protocol.errors import Error

TOPICS, BROKERS, GROUPS, USERS, CLIENTS = "topics", "brokers", "groups", "users", "clients"
IPS, BROKER_LOGGERS = "ips", "broker-loggers"
ENTITY_TYPES = (TOPICS, CLIENTS, USERS, BROKERS, IPS, BROKER_LOGGERS, GROUPS)
QUOTA_TYPES = (USERS, CLIENTS, IPS)
# ConfigResource.Type ids.
RESOURCE_TYPES = {TOPICS: 2, BROKERS: 4, BROKER_LOGGERS: 8, GROUPS: 32}
IP_CONFIGS = ("connection_creation_rate",)  # DynamicConfig.Ip.names
# DescribeConfigs' config source ids and the names Kafka's admin client gives them
# (ConfigEntry.ConfigSource), as kafka-configs prints them in synonyms={...}.
SOURCE_NAMES = {0: "UNKNOWN", 1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG",
                3: "DYNAMIC_DEFAULT_BROKER_CONFIG", 4: "STATIC_BROKER_CONFIG", 5: "DEFAULT_CONFIG",
                6: "DYNAMIC_BROKER_LOGGER_CONFIG",
                7: "DYNAMIC_CLIENT_METRICS_CONFIG", 8: "DYNAMIC_GROUP_CONFIG"}
DYNAMIC_TOPIC, DYNAMIC_BROKER, DYNAMIC_DEFAULT_BROKER, DYNAMIC_GROUP = 1, 2, 3, 8
# QuotaConfig.isClientOrUserQuotaConfig.
QUOTA_CONFIGS = ("producer_byte_rate", "consumer_byte_rate", "request_percentage",
                 "controller_mutation_rate")
SCRAM_MECHANISMS = {"SCRAM-SHA-256": SCRAM_SHA_256, "SCRAM-SHA-512": SCRAM_SHA_512}
SCRAM_NAMES = {code: name for name, code in SCRAM_MECHANISMS.items()}
SCRAM_MIN_ITERATIONS = 4096  # ScramMechanism.minIterations
QUOTA_ENTITY = {USERS: "user", CLIENTS: "client-id", IPS: "ip"}
QUOTA_ENTITY_TEXT = {"user": "user-principal", "client-id": "client-id", "ip": "ip"}
MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2

HELP = "describe or alter configs of topics, brokers, groups, users and clients (like kafka-configs)"
EPILOG = """examples:
  strom configs --bootstrap-server 127.0.0.1:9092 --entity-type topics --entity-name orders --describe
  strom configs --bootstrap-server 127.0.0.1:9092 --entity-type topics --entity-name orders --alter \\
      --add-config retention.ms=60000,cleanup.policy=[compact,delete] --delete-config segment.ms
  strom configs --bootstrap-server 127.0.0.1:9092 --entity-type brokers --entity-default --alter \\
      --add-config log.retention.ms=3600000
  strom configs --bootstrap-server 127.0.0.1:9092 --entity-type users --entity-name alice --alter \\
      --add-config producer_byte_rate=1048576
  strom configs --bootstrap-server 127.0.0.1:9092 --entity-type broker-loggers --entity-name 1 --describe
  strom configs --bootstrap-controller 127.0.0.1:9093 --entity-type broker-loggers --entity-name 1 --alter \\
      --add-config strom.controller=DEBUG
  strom configs --bootstrap-server 127.0.0.1:9092 --entity-type ips --entity-default --alter \\
      --add-config connection_creation_rate=100
"""


class UsageError(ValueError):
    """A command line kafka-configs refuses (IllegalArgumentException)."""


class _Entity(argparse.Action):
    """--entity-name and --entity-default append to one list in command-line order (a default
    entity is ""), as ConfigCommandOptions.entityNames reads them."""

    def __call__(self, parser, namespace, values, option_string=None):
        names = list(getattr(namespace, self.dest) or [])
        names.append("" if option_string == "--entity-default" else values)
        setattr(namespace, self.dest, names)


def add_parser(sub: Any, listed: bool = False) -> None:
    """The ``configs`` command's options; ``listed``: named in ``strom --help`` with HELP."""
    extra = {"help": HELP} if listed else {}
    p = sub.add_parser("configs", **extra, epilog=EPILOG,
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       description="Describe or alter configs through a broker, as kafka-configs.sh does.")
    p.add_argument("--bootstrap-server", metavar="HOST:PORT", help="the brokers to connect to")
    p.add_argument("--bootstrap-controller", metavar="HOST:PORT", help="the controllers to connect to")
    p.add_argument("--command-config", metavar="FILE",
                   help="client properties to connect with (security.protocol, sasl.*, ssl.*)")
    action = p.add_mutually_exclusive_group()
    action.add_argument("--describe", action="store_true", help="list the configs of the entity")
    action.add_argument("--alter", action="store_true", help="alter the configs of the entity")
    p.add_argument("--entity-type", action="append", default=[], help=", ".join(ENTITY_TYPES))
    p.add_argument("--entity-name", dest="entity_names", action=_Entity, default=[],
                   help="topic name, broker id, group id, user principal, client id or ip")
    p.add_argument("--entity-default", dest="entity_names", action=_Entity, nargs=0,
                   help="the default entity: of brokers (the cluster's), users, clients or ips")
    p.add_argument("--all", action="store_true", help="with --describe: every config, not only dynamic ones")
    p.add_argument("--add-config", metavar="K=V,K2=[A,B]",
                   help="configs to set, comma-separated; a list value in square brackets")
    p.add_argument("--add-config-file", metavar="FILE", help="a properties file of configs to set")
    p.add_argument("--delete-config", action="append", default=[], metavar="K", help="a config to remove")


# ---- what the options mean (ConfigCommandOptions) -------------------------------------------------

def check_args(args: argparse.Namespace) -> tuple[list[str], list[str]]:
    """ConfigCommandOptions.checkArgs: the entity types and names (a default is "")."""
    if args.describe == args.alter:
        raise UsageError("Command must include exactly one action: --describe, --alter")
    if args.describe and (args.add_config or args.add_config_file or args.delete_config):
        raise UsageError("Option --describe can't be used with --add-config, --add-config-file or "
                         "--delete-config")
    connects = (args.bootstrap_server is not None) + (args.bootstrap_controller is not None)
    if connects == 0:
        raise UsageError("One of the required --bootstrap-server or --bootstrap-controller arguments must be "
                         "specified")
    if connects > 1:
        raise UsageError("Only one of --bootstrap-server and --bootstrap-controller can be specified")
    types, names = list(args.entity_type), list(args.entity_names)
    dupes = sorted({t for t in types if types.count(t) > 1})
    if dupes:
        raise UsageError(f"Duplicate entity type(s) specified: {','.join(dupes)}")
    for t in types:
        if t not in ENTITY_TYPES:
            raise UsageError(f"Invalid entity type {t}, the entity type must be one of "
                             f"{', '.join(ENTITY_TYPES)} with a --bootstrap-server or --bootstrap-controller "
                             "argument")
    if not types:
        raise UsageError("At least one entity type must be specified")
    if len(types) > 1 and set(types) != {USERS, CLIENTS}:
        raise UsageError(f"Only '{USERS}' and '{CLIENTS}' entity types may be specified together")
    has_name, has_default = any(names), "" in names
    if has_name and (BROKERS in types or BROKER_LOGGERS in types):
        for name in names:
            if name and not re.fullmatch(r"[+-]?\d+", name):
                raise UsageError(f"The entity name for {types[0]} must be a valid integer broker id, "
                                 f"but it is: {name}")
    if has_name and IPS in types:
        for name in names:
            if name and not valid_ip_entity(name):
                raise UsageError(f"The entity name for {types[0]} must be a valid IP or resolvable host, "
                                 f"but it is: {name}")
    if args.describe and has_default and not ({USERS, CLIENTS, BROKERS, IPS} & set(types)):
        raise UsageError(f"--entity-default must not be specified with --describe of {','.join(types)}")
    if args.describe and BROKER_LOGGERS in types and not has_name:
        raise UsageError(f"An entity name must be specified with --describe of {','.join(types)}")
    if args.alter:
        if {USERS, CLIENTS, BROKERS, IPS} & set(types):
            if not has_name and not has_default:
                raise UsageError("An entity-name or default entity must be specified with --alter of users, "
                                 "clients, brokers or ips")
        elif not has_name:
            raise UsageError(f"An entity name must be specified with --alter of {','.join(types)}")
        if args.add_config and args.add_config_file:
            raise UsageError("Only one of --add-config or --add-config-file must be specified")
        if not (args.add_config or args.add_config_file or args.delete_config):
            raise UsageError("At least one of --add-config, --add-config-file, or --delete-config must be "
                             "specified with --alter")
    return types, names


def valid_ip_entity(name: str) -> bool:
    """DynamicConfig.Ip.isValidIpEntity: an IP address, or a host name that resolves."""
    try:
        ipaddress.ip_address(name)
        return True
    except ValueError:
        pass
    try:
        socket.getaddrinfo(name, None)
        return True
    except (OSError, UnicodeError):
        return False


_OUTSIDE_BRACKETS = r"(?=[^\]]*(?:\[|$))"


def parse_add_config(text: str) -> dict[str, str]:
    """--add-config as ConfigCommand.parseConfigsToBeAdded reads it: split at commas outside
    square brackets, each part at its '=' outside brackets, the brackets then dropped (a list's
    values stay comma-separated)."""
    out: dict[str, str] = {}
    for part in re.split("," + _OUTSIDE_BRACKETS, text):
        pair = re.split(r"\s*=\s*" + _OUTSIDE_BRACKETS, part)
        if len(pair) != 2:
            raise UsageError('Invalid entity config: all configs to be added must be in the format '
                             '"key=val".')
        out[pair[0].strip()] = re.sub(r"\[?\]?", "", pair[1]).strip()
    for key in out:
        if not re.fullmatch(r"[a-zA-Z0-9._-]*", key):
            raise UsageError(f"Invalid character found for config key: {key}")
    return out


def configs_to_add(args: argparse.Namespace) -> dict[str, str]:
    out: dict[str, str] = {}
    if args.add_config_file:
        from engine.checkpoint import read_properties

        out.update(read_properties(args.add_config_file))
    if args.add_config:
        out.update(parse_add_config(args.add_config))
    return out


def java_double(value: float) -> str:
    """Double.toString: plain between 10^-3 and 10^7, else computerized scientific notation
    (``1.0E7``), each with the fewest digits that read back as the value."""
    if value == 0 or 1e-3 <= abs(value) < 1e7:
        return repr(float(value))
    sign, digits, exponent = Decimal(repr(float(value))).normalize().as_tuple()
    text = "".join(map(str, digits))
    mantissa = text[0] + "." + (text[1:] or "0")
    return f"{'-' if sign else ''}{mantissa}E{len(text) - 1 + int(exponent)}"


# ---- the requests ------------------------------------------------------------------------------

class Admin:
    """A connection to the broker or controller named, for the command's requests; with
    ``controllers`` (--bootstrap-controller) changes go to the active controller. A node's own
    resources (a broker's configs, its loggers) are asked of that node, as Kafka's admin client
    sends them."""

    def __init__(self, bootstrap: str, security: ClientSecurity | None = None, controllers: bool = False):
        host, _, port = bootstrap.split(",")[0].strip().rpartition(":")
        self.security = security
        self.controllers = controllers
        self.conn = self._connection(host or "127.0.0.1", int(port))
        self._nodes: dict[int, KafkaConnection] = {}

    def _connection(self, host: str, port: int) -> KafkaConnection:
        return KafkaConnection(host, port, client_id="strom-configs", security=self.security)

    async def __aenter__(self) -> Admin:
        await self.conn.connect()
        return self

    async def __aexit__(self, *exc) -> None:
        for conn in self._nodes.values():
            await conn.close()
        await self.conn.close()

    async def request(self, api_key: int, version: int, body: Any) -> Any:
        return await self.conn.request(api_key, version, body)

    async def cluster(self) -> Any:
        """DescribeCluster of the brokers, or of the controllers with --bootstrap-controller."""
        response = await self.request(60, 1, M.DescribeClusterRequest(
            include_cluster_authorized_operations=False, endpoint_type=2 if self.controllers else 1))
        if response.error_code != Error.NONE:
            raise _failed(response.error_code, response.error_message)
        return response

    async def node(self, node_id: int | None) -> KafkaConnection:
        """The connection to node ``node_id`` (the active controller with --bootstrap-controller
        when None; the bootstrap node when None otherwise)."""
        cluster = None
        if node_id is None:
            if not self.controllers:
                return self.conn
            cluster = await self.cluster()
            node_id = cluster.controller_id
        if node_id in self._nodes:
            return self._nodes[node_id]
        cluster = cluster or await self.cluster()
        found = next((b for b in cluster.brokers if b.broker_id == node_id), None)
        if found is None:
            return self.conn  # not listed: the bootstrap node answers for itself
        conn = self._connection(found.host, found.port)
        await conn.connect()
        self._nodes[node_id] = conn
        return conn

    async def request_to(self, node_id: int | None, api_key: int, version: int, body: Any) -> Any:
        return await (await self.node(node_id)).request(api_key, version, body)


def _failed(code: int, message: str | None) -> RuntimeError:
    name = Error(code).name if code in Error._value2member_map_ else str(code)
    return RuntimeError(f"{name}{': ' + message if message else ''}")


def _owner(resource_type: int, name: str) -> int | None:
    """The node a resource is asked of: a broker's or broker logger's own id; else any (None)."""
    if resource_type in (RESOURCE_TYPES[BROKERS], RESOURCE_TYPES[BROKER_LOGGERS]) and name:
        return int(name)
    return None


async def describe_configs(admin: Admin, resource_type: int, name: str) -> list[Any]:
    D = M.DescribeConfigsRequest
    body = D(resources=[D.DescribeConfigsResource(resource_type=resource_type, resource_name=name,
                                                  configuration_keys=None)], include_synonyms=True)
    response = await admin.request_to(_owner(resource_type, name), 32, 4, body)
    result = response.results[0]
    if result.error_code != Error.NONE:
        raise _failed(result.error_code, result.error_message)
    return sorted(result.configs, key=lambda c: c.name)


def _dynamic_source(entity_type: str, name: str) -> int:
    if entity_type == TOPICS:
        return DYNAMIC_TOPIC
    if entity_type == GROUPS:
        return DYNAMIC_GROUP
    if entity_type == BROKER_LOGGERS:
        return -1  # every logger is shown, --all or not
    return DYNAMIC_DEFAULT_BROKER if name == "" else DYNAMIC_BROKER


async def resource_configs(admin: Admin, entity_type: str, name: str, describe_all: bool) -> list[Any]:
    """ConfigCommand.getResourceConfig: the entity's configs sorted by name, only its dynamic
    ones unless ``describe_all``."""
    entries = await describe_configs(admin, RESOURCE_TYPES[entity_type], name)
    if describe_all or entity_type == BROKER_LOGGERS:
        return entries
    source = _dynamic_source(entity_type, name)
    return [e for e in entries if e.config_source == source]


def entry_text(entry: Any) -> str:
    synonyms = ", ".join(f"{SOURCE_NAMES.get(s.source, 'UNKNOWN')}:{s.name}={_value(s.value)}"
                         for s in entry.synonyms or [])
    sensitive = str(entry.is_sensitive).lower()
    return f"  {entry.name}={_value(entry.value)} sensitive={sensitive} synonyms={{{synonyms}}}"


def _value(value: str | None) -> str:
    return "null" if value is None else value


async def entity_names(admin: Admin, entity_type: str) -> list[str]:
    """Every entity of a type, as kafka-configs lists them when no name is given: topics
    (internal ones too), the brokers then the cluster default, the groups."""
    if entity_type == TOPICS:
        response = await admin.request(3, 12, M.MetadataRequest(topics=None, allow_auto_topic_creation=False))
        return [t.name for t in response.topics]
    if entity_type in (BROKERS, BROKER_LOGGERS):
        response = await admin.cluster()
        return [str(b.broker_id) for b in response.brokers] + [""]
    response = await admin.request(16, 4, M.ListGroupsRequest(states_filter=[]))
    return [g.group_id for g in response.groups]


async def describe_resources(admin: Admin, entity_type: str, name: str | None, describe_all: bool) -> str:
    lines = []
    names = [name] if name is not None else await entity_names(admin, entity_type)
    for entity in names:
        if entity == "":
            lines.append(f"Default configs for {entity_type} in the cluster are:")
        else:
            shown = "All" if describe_all else "Dynamic"
            lines.append(f"{shown} configs for {entity_type[:-1]} {entity} are:")
        lines += [entry_text(e) for e in await resource_configs(admin, entity_type, entity, describe_all)]
    return "".join(line + "\n" for line in lines)


async def alter_resource(admin: Admin, entity_type: str, name: str, to_add: dict[str, str],
                         to_delete: list[str]) -> None:
    """ConfigCommand.alterResourceConfig: each config to delete must be a dynamic config of the
    entity (a broker logger's, each logger named must exist); then SETs and DELETEs in one
    IncrementalAlterConfigs, to the node itself for its loggers and a broker's own configs, else
    to the active controller with --bootstrap-controller."""
    current = {e.name for e in await resource_configs(admin, entity_type, name, False)}
    if entity_type == BROKER_LOGGERS:
        invalid = [k for k in to_delete if k not in current] + [k for k in to_add if k not in current]
        if invalid:
            raise RuntimeError(f"Invalid broker logger(s): {','.join(invalid)}")
    invalid = [k for k in to_delete if k not in current]
    if invalid:
        raise RuntimeError(f"Invalid config(s): {','.join(invalid)}")
    Inc = M.IncrementalAlterConfigsRequest
    ops = [Inc.AlterableConfig(name=k, config_operation=0, value=v) for k, v in to_add.items()]
    ops += [Inc.AlterableConfig(name=k, config_operation=1, value=None) for k in to_delete]
    # a broker's own resources to that broker, as Kafka's admin client sends them; through the
    # controllers, a broker's configs to the active controller
    owner = _owner(RESOURCE_TYPES[entity_type], name)
    if admin.controllers and entity_type != BROKER_LOGGERS:
        owner = None
    response = await admin.request_to(owner, 44, 1, Inc(resources=[Inc.AlterConfigsResource(
        resource_type=RESOURCE_TYPES[entity_type], resource_name=name, configs=ops)], validate_only=False))
    result = response.responses[0]
    if result.error_code != Error.NONE:
        raise _failed(result.error_code, result.error_message)


# ---- client quotas and SCRAM credentials ------------------------------------------------------------

async def quota_entries(admin: Admin, types: list[str], names: list[str]) -> list[tuple[dict[str, str | None],
                                                                                       dict[str, float]]]:
    """getAllClientQuotasConfigs: the quota entities matching exactly these components (a name,
    the default "", or any entity of a type given without a name)."""
    if len(names) > len(types):
        raise UsageError("More entity names specified than entity types")
    D = M.DescribeClientQuotasRequest
    components = []
    for i, entity_type in enumerate(types):
        kind = QUOTA_ENTITY[entity_type]
        if i >= len(names):
            components.append(D.ComponentData(entity_type=kind, match_type=MATCH_SPECIFIED, match=None))
        elif names[i] == "":
            components.append(D.ComponentData(entity_type=kind, match_type=MATCH_DEFAULT, match=None))
        else:
            components.append(D.ComponentData(entity_type=kind, match_type=MATCH_EXACT, match=names[i]))
    response = await admin.request(48, 1, D(components=components, strict=True))
    if response.error_code != Error.NONE:
        raise _failed(response.error_code, response.error_message)
    return [({e.entity_type: e.entity_name for e in entry.entity}, {v.key: v.value for v in entry.values})
            for entry in response.entries or []]


def quota_text(entity: dict[str, str | None], values: dict[str, float]) -> str:
    parts = []
    for kind in ("user", "client-id", "ip"):
        if kind in entity:
            name = entity[kind]
            parts.append(f"{QUOTA_ENTITY_TEXT[kind]} '{name}'" if name is not None
                         else f"the default {QUOTA_ENTITY_TEXT[kind]}")
    shown = ", ".join(f"{k}={java_double(v)}" for k, v in values.items())
    return f"Quota configs for {', '.join(parts)} are {shown}"


async def describe_quotas(admin: Admin, types: list[str], names: list[str]) -> str:
    """describeClientQuotaAndUserScramCredentialConfigs."""
    lines = [quota_text(entity, values) for entity, values in await quota_entries(admin, types, names)]
    if CLIENTS not in types and "" not in names:
        S = M.DescribeUserScramCredentialsRequest
        users = [S.UserName(name=n) for n in names] if names else None
        response = await admin.request(50, 0, S(users=users))
        if response.error_code != Error.NONE:
            raise _failed(response.error_code, response.error_message)
        for result in response.results:
            if result.error_code == Error.RESOURCE_NOT_FOUND:
                continue  # no credential: nothing to describe
            if result.error_code != Error.NONE:
                lines.append(f"Error retrieving SCRAM credential configs for user-principal '{result.user}': "
                             f"{_failed(result.error_code, result.error_message)}")
                continue
            text = ", ".join(f"{SCRAM_NAMES.get(i.mechanism, i.mechanism)}=iterations={i.iterations}"
                             for i in result.credential_infos)
            lines.append(f"SCRAM credential configs for user-principal '{result.user}' are {text}")
    return "".join(line + "\n" for line in lines)


def _quota_number(key: str, value: str) -> float:
    try:
        return float(value)
    except ValueError:
        raise UsageError(f"Cannot parse quota configuration value for {key}: {value}") from None


async def alter_quotas(admin: Admin, types: list[str], names: list[str], to_add: dict[str, str],
                       to_delete: list[str]) -> None:
    """alterQuotaConfigs: each config to delete must be set on the entity."""
    if len(types) != len(names):
        raise UsageError("Exactly one entity name must be specified for every entity type")
    found = await quota_entries(admin, types, names)
    current = found[0][1] if found else {}
    invalid = [k for k in to_delete if k not in current]
    if invalid:
        raise RuntimeError(f"Invalid config(s): {','.join(invalid)}")
    A = M.AlterClientQuotasRequest
    ops = [A.OpData(key=k, value=_quota_number(k, v), remove=False) for k, v in to_add.items()]
    ops += [A.OpData(key=k, value=0.0, remove=True) for k in to_delete]
    entity = [A.EntityData(entity_type=QUOTA_ENTITY[t], entity_name=n or None) for t, n in zip(types, names)]
    body = A(entries=[A.EntryData(entity=entity, ops=ops)], validate_only=False)
    response = await admin.request_to(None, 49, 1, body)
    for entry in response.entries:
        if entry.error_code != Error.NONE:
            raise _failed(entry.error_code, entry.error_message)


def scram_upsertion(user: str, mechanism: str, text: str) -> Any:
    """``[iterations=N,]password=P`` of one mechanism (alterUserScramCredentialConfigs): a new
    random salt, the password salted with it."""
    fields = dict(part.split("=", 1) for part in text.split(",") if "=" in part)
    if "password" not in fields:
        raise UsageError(f"Invalid credential property {mechanism}={text}")
    try:
        iterations = int(fields.get("iterations", DEFAULT_ITERATIONS))
    except ValueError:
        raise UsageError(f"Invalid credential property {mechanism}={text}") from None
    if iterations < SCRAM_MIN_ITERATIONS:
        raise UsageError(f"Iterations {iterations} is less than the minimum {SCRAM_MIN_ITERATIONS} required "
                         f"for {mechanism}")
    code = SCRAM_MECHANISMS[mechanism]
    salt = os.urandom(32)
    U = M.AlterUserScramCredentialsRequest.ScramCredentialUpsertion
    return U(name=user, mechanism=code, iterations=iterations, salt=salt,
             salted_password=salted_password(code, fields["password"], salt, iterations))


async def alter_scram(admin: Admin, user: str, to_add: dict[str, str], to_delete: list[str]) -> None:
    A = M.AlterUserScramCredentialsRequest
    response = await admin.request(51, 0, A(
        upsertions=[scram_upsertion(user, m, text) for m, text in to_add.items()],
        deletions=[A.ScramCredentialDeletion(name=user, mechanism=SCRAM_MECHANISMS[m]) for m in to_delete]))
    for result in response.results:
        if result.error_code != Error.NONE:
            raise _failed(result.error_code, result.error_message)


async def alter_users_or_clients(admin: Admin, types: list[str], names: list[str], to_add: dict[str, str],
                                 to_delete: list[str]) -> None:
    """The USER and CLIENT cases of ConfigCommand.alterConfig."""
    unknown_add = [k for k in to_add if k not in QUOTA_CONFIGS and k not in SCRAM_MECHANISMS]
    unknown_delete = [k for k in to_delete if k not in QUOTA_CONFIGS and k not in SCRAM_MECHANISMS]
    scram_add = [k for k in to_add if k in SCRAM_MECHANISMS]
    scram_delete = [k for k in to_delete if k in SCRAM_MECHANISMS]
    quotas = any(k in QUOTA_CONFIGS for k in list(to_add) + to_delete)
    if types[0] == CLIENTS or len(types) == 2:
        if unknown_add or scram_add:
            raise UsageError(f"Only quota configs can be added for '{CLIENTS}' using --bootstrap-server. "
                             f"Unexpected config names: {_scala_list(unknown_add + scram_add)}")
        if unknown_delete or scram_delete:
            raise UsageError(f"Only quota configs can be deleted for '{CLIENTS}' using --bootstrap-server. "
                             f"Unexpected config names: {_scala_list(unknown_delete + scram_delete)}")
    else:
        if unknown_add:
            raise UsageError(f"Only quota and SCRAM credential configs can be added for '{USERS}' using "
                             f"--bootstrap-server. Unexpected config names: {_scala_list(unknown_add)}")
        if unknown_delete:
            raise UsageError(f"Only quota and SCRAM credential configs can be deleted for '{USERS}' using "
                             f"--bootstrap-server. Unexpected config names: {_scala_list(unknown_delete)}")
        if scram_add or scram_delete:
            if "" in names:
                raise UsageError("The use of --entity-default or --user-defaults is not allowed with User "
                                 "SCRAM Credentials using --bootstrap-server.")
            if quotas:
                raise UsageError(f"Cannot alter both quota and SCRAM credential configs simultaneously for "
                                 f"'{USERS}' using --bootstrap-server.")
    if quotas:
        await alter_quotas(admin, types, names, to_add, to_delete)
    else:
        await alter_scram(admin, names[0], to_add, to_delete)


def _scala_list(names: list[str]) -> str:
    return f"List({', '.join(names)})"


# ---- the command -------------------------------------------------------------------------------

async def execute(args: argparse.Namespace, types: list[str], names: list[str],
                  security: ClientSecurity | None) -> str:
    controllers = args.bootstrap_controller is not None
    async with Admin(args.bootstrap_controller if controllers else args.bootstrap_server, security,
                     controllers=controllers) as admin:
        if args.describe:
            if types[0] in (USERS, CLIENTS):
                return await describe_quotas(admin, types, names)
            if types[0] == IPS:
                return "".join(quota_text(entity, values) + "\n"
                               for entity, values in await quota_entries(admin, types, names))
            return await describe_resources(admin, types[0], names[0] if names else None, args.all)
        to_add, to_delete = configs_to_add(args), [k.strip() for k in args.delete_config]
        if types[0] in (USERS, CLIENTS):
            await alter_users_or_clients(admin, types, names, to_add, to_delete)
        elif types[0] == IPS:
            unknown = [k for k in list(to_add) + to_delete if k not in IP_CONFIGS]
            if unknown:
                raise UsageError(f"Only connection quota configs can be added for '{IPS}' using "
                                 f"--bootstrap-server. Unexpected config names: {','.join(unknown)}")
            await alter_quotas(admin, types, names, to_add, to_delete)
        else:
            await alter_resource(admin, types[0], names[0], to_add, to_delete)
        if names[0]:
            return f"Completed updating config for {types[0][:-1]} {names[0]}.\n"
        return f"Completed updating default config for {types[0]} in the cluster.\n"


def run(args: argparse.Namespace) -> int:
    from strom.acls import read_command_config

    types, names = check_args(args)
    security = read_command_config(args.command_config)
    print(asyncio.run(execute(args, types, names, security)), end="")
    return 0
