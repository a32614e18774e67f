"""`strom acls`: add, list and remove ACLs through a broker, as kafka-acls.sh does, with its
options and its output.

    strom acls --bootstrap-server HOST:PORT --add --allow-principal User:alice --operation Read --topic orders
    strom acls --bootstrap-server HOST:PORT --list [--topic orders] [--principal User:alice]
    strom acls --bootstrap-server HOST:PORT --remove --force --topic orders

Resources: ``--topic``, ``--group``, ``--transactional-id`` (each repeatable), ``--cluster``,
with ``--resource-pattern-type`` literal (the default) or prefixed, and for --list and --remove
also any or match. ACL entries: each ``--allow-principal`` with each ``--allow-host`` (``*``
when none is given) and each ``--operation`` (All when none is given), ALLOW; the same for
``--deny-*``, DENY. ``--producer`` stands for WRITE, DESCRIBE and CREATE on the topics (WRITE and
DESCRIBE on the transactional ids, IDEMPOTENT_WRITE on the cluster with ``--idempotent``),
``--consumer`` for READ and DESCRIBE on the topics and READ on the groups. An operation a
resource type does not support is refused before anything is sent. --remove asks before it
deletes, unless ``--force``; without a principal it removes every ACL of the resource.

``--command-config FILE`` names a file of client properties, as kafka-acls's: how to reach a
secured listener (``security.protocol`` PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL;
``sasl.mechanism`` PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 with ``sasl.jaas.config``'s username and
password; the PEM ``ssl.*`` stores, with ``ssl.endpoint.identification.algorithm`` https by
default, as Kafka's clients). A bad or missing one stops the command naming the property.
"""
from __future__ import annotations

import argparse
import asyncio
from typing import Any

from engine.checkpoint import read_properties
from metadata.acls import OPERATION_NAMES, PATTERN_TYPE_NAMES, PERMISSION_NAMES, RESOURCE_TYPE_NAMES
from metadata.security import (
    ALL,
    ALLOW,
    ANY_RESOURCE,
    CLUSTER,
    CLUSTER_NAME,
    CREATE,
    DENY,
    DESCRIBE,
    GROUP,
    IDEMPOTENT_WRITE,
    LITERAL,
    OP_ANY,
    PATTERN_ANY,
    PATTERN_MATCH,
    PERMISSION_ANY,
    PREFIXED,
    READ,
    TOPIC,
    TRANSACTIONAL_ID,
    WILDCARD,
    WRITE,
)
from protocol import messages as M
from protocol.client import ClientSecurity, KafkaConnection
from protocol.context import KafkaPrincipal
from protocol.errors import Error
from security.authorizer import SUPPORTED
from security.client_config import CommandConfigError, client_security
from strom.kafka_errors import exception_text

DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS = 29, 30, 31
VERSION = 3
# --resource-pattern-type: metadata/acls.py's names, in lower case as kafka-acls takes them.
PATTERN_TYPES = {PATTERN_TYPE_NAMES[code].lower(): code
                 for code in (LITERAL, PREFIXED, PATTERN_ANY, PATTERN_MATCH)}

Resource = tuple[int, str | None, int]  # resource type, name (None: any), pattern type
Entry = tuple[str, str, int, int]  # principal, host, operation, permission type


class UsageError(ValueError):
    """A command line kafka-acls refuses (its printUsageAndExit)."""


HELP = "add, list or remove ACLs (like kafka-acls)"
EXAMPLES = """examples:
  strom acls --bootstrap-server 127.0.0.1:9092 --add --allow-principal User:alice --operation Read \
--topic orders --group billing
  strom acls --bootstrap-server 127.0.0.1:9092 --list --topic orders
  strom acls --bootstrap-server 127.0.0.1:9092 --remove --deny-principal User:mallory --operation All \
--topic orders --command-config admin.properties"""


def add_parser(sub: Any, listed: bool = False) -> None:
    """The ``acls`` command's options; ``listed``: named in ``strom --help`` with HELP."""
    extra = {"help": HELP} if listed else {}
    p = sub.add_parser("acls", **extra,
                       description="Add, list or remove ACLs through a broker, as kafka-acls.sh does.",
                       epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bootstrap-server", required=True)
    p.add_argument("--command-config", metavar="FILE",
                   help="client properties to connect with (security.protocol, sasl.*, ssl.*)")
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--add", action="store_true", help="add ACLs")
    action.add_argument("--remove", action="store_true", help="remove ACLs")
    action.add_argument("--list", action="store_true", help="list ACLs")
    p.add_argument("--topic", action="append", default=[])
    p.add_argument("--group", action="append", default=[])
    p.add_argument("--transactional-id", action="append", default=[])
    p.add_argument("--cluster", action="store_true")
    p.add_argument("--resource-pattern-type", default="literal", type=str.lower, choices=list(PATTERN_TYPES))
    p.add_argument("--allow-principal", action="append", default=[])
    p.add_argument("--deny-principal", action="append", default=[])
    p.add_argument("--allow-host", action="append", default=[])
    p.add_argument("--deny-host", action="append", default=[])
    p.add_argument("--operation", action="append", default=[],
                   help="Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs, "
                        "AlterConfigs, IdempotentWrite, CreateTokens, DescribeTokens, All (the default)")
    p.add_argument("--principal", action="append", default=[], help="with --list: that principal's ACLs")
    p.add_argument("--producer", action="store_true")
    p.add_argument("--consumer", action="store_true")
    p.add_argument("--idempotent", action="store_true")
    p.add_argument("--force", action="store_true", help="assume yes: do not ask before removing")


# ---- what the options mean (kafka-acls's AclCommand) ------------------------------------------

def operation_code(name: str) -> int:
    """``Read``, ``READ``, ``read``, ``IdempotentWrite``, ``idempotent_write``: the operation's code."""
    wanted = name.strip().replace("_", "").replace("-", "").lower()
    for code, known in OPERATION_NAMES.items():
        if code > OP_ANY and known.replace("_", "").lower() == wanted:
            return code
    raise UsageError(f"Unknown operation {name!r}")


def check_args(args: argparse.Namespace) -> None:
    """AclCommandOptions.checkArgs."""
    if args.list and (args.producer or args.consumer or args.allow_host or args.allow_principal
                      or args.deny_host or args.deny_principal):
        raise UsageError("--list cannot be combined with --producer, --consumer, --allow-*/--deny-* options")
    if (args.producer or args.consumer) and (args.operation or args.deny_principal or args.deny_host):
        raise UsageError("--producer and --consumer cannot be combined with --operation or --deny-* options")
    if args.principal and not args.list:
        raise UsageError("The --principal option is only available if --list is set")
    if args.producer and not args.topic:
        raise UsageError("With --producer you must specify a --topic")
    if args.idempotent and not args.producer:
        raise UsageError("The --idempotent option is only available if --producer is set")
    if args.consumer and (not args.topic or not args.group or args.cluster or args.transactional_id):
        raise UsageError("With --consumer you must specify a --topic and a --group and no --cluster or "
                         "--transactional-id option should be specified.")


def resources(args: argparse.Namespace, required: bool = True) -> list[Resource]:
    """The resource filters the options name (getResourceFilter)."""
    pattern = PATTERN_TYPES[args.resource_pattern_type]
    out: list[Resource] = [(TOPIC, t.strip(), pattern) for t in args.topic]
    if pattern == LITERAL and (args.cluster or args.idempotent):
        out.append((CLUSTER, CLUSTER_NAME, LITERAL))
    out += [(GROUP, g.strip(), pattern) for g in args.group]
    out += [(TRANSACTIONAL_ID, t, pattern) for t in args.transactional_id]
    if not out and required:
        raise UsageError("You must provide at least one resource: --topic <topic> or --cluster or "
                         "--group <group> or --transactional-id <id>")
    return list(dict.fromkeys(out))


def _principals(names: list[str]) -> list[str]:
    out = []
    for name in names:
        try:
            out.append(str(KafkaPrincipal.parse(name.strip())))
        except ValueError:
            raise UsageError("expected a string in format principalType:principalName but got "
                             f"{name}") from None
    return out


def entries(args: argparse.Namespace, operations: set[int]) -> set[Entry]:
    """Each principal with each host and operation (getAcl): ALLOW, then DENY."""
    out: set[Entry] = set()
    for principals, hosts, permission in ((args.allow_principal, args.allow_host, ALLOW),
                                          (args.deny_principal, args.deny_host, DENY)):
        names = _principals(principals)
        for principal in names:
            for host in [h.strip() for h in hosts] or [WILDCARD]:
                out.update((principal, host, op, permission) for op in operations)
    return out


def plan(args: argparse.Namespace) -> dict[Resource, set[Entry]]:
    """Each resource (filter) named and the ACL entries for it (getResourceFilterToAcls)."""
    out: dict[Resource, set[Entry]] = {}
    if not args.producer and not args.consumer:
        ops = {operation_code(o) for o in args.operation} or {ALL}
        out.update({r: entries(args, ops) for r in resources(args)})
    if args.producer:
        for r in resources(args):
            if r[0] == TOPIC:
                out[r] = entries(args, {WRITE, DESCRIBE, CREATE})
            elif r[0] == TRANSACTIONAL_ID:
                out[r] = entries(args, {WRITE, DESCRIBE})
        if args.idempotent:
            out[(CLUSTER, CLUSTER_NAME, LITERAL)] = entries(args, {IDEMPOTENT_WRITE})
    if args.consumer:
        for r in resources(args):
            if r[0] == TOPIC:
                out[r] = out.get(r, set()) | entries(args, {READ, DESCRIBE})
            elif r[0] == GROUP:
                out[r] = out.get(r, set()) | entries(args, {READ})
    for (resource_type, _, _), acls in out.items():  # validateOperation
        valid = SUPPORTED[resource_type] | {ALL}
        if any(op not in valid for _, _, op, _ in acls):
            names = ", ".join(OPERATION_NAMES[op] for op in sorted(valid))
            raise UsageError(f"ResourceType {RESOURCE_TYPE_NAMES[resource_type]} only supports "
                             f"operations {names}")
    return out


# ---- output, as kafka-acls prints it ----------------------------------------------------------------

def pattern_text(resource: Resource) -> str:
    resource_type, name, pattern = resource
    return (f"ResourcePattern(resourceType={RESOURCE_TYPE_NAMES.get(resource_type, 'UNKNOWN')}, "
            f"name={'<any>' if name is None else name}, "
            f"patternType={PATTERN_TYPE_NAMES.get(pattern, 'UNKNOWN')})")


def entry_text(entry: Entry) -> str:
    principal, host, operation, permission = entry
    return (f"(principal={principal}, host={host}, operation={OPERATION_NAMES.get(operation, 'UNKNOWN')}, "
            f"permissionType={PERMISSION_NAMES.get(permission, 'UNKNOWN')})")


def block(title: str, resource: Resource, acls: set[Entry]) -> str:
    """``<title> `<pattern>`: `` then the entries, a tab before each, as AclCommand prints."""
    listed = "\n".join("\t" + entry_text(e) for e in sorted(acls))
    return f"{title} `{pattern_text(resource)}`: \n {listed} \n"


# ---- the connection ----------------------------------------------------------------------------

def read_command_config(path: str | None) -> ClientSecurity | None:
    """The client security of a --command-config file (security/client_config.py); None without
    one. strom topics and strom quorum read theirs here too."""
    if path is None:
        return None
    try:
        props = read_properties(path)
    except OSError as e:
        raise CommandConfigError("file", f"cannot read {path}: {e.strerror or e}") from None
    return client_security(props)


# ---- the requests ------------------------------------------------------------------------------

def _address(bootstrap: str) -> tuple[str, int]:
    host, _, port = bootstrap.split(",")[0].strip().rpartition(":")
    return host or "127.0.0.1", int(port)


async def _request(bootstrap: str, api_key: int, body: Any, security: ClientSecurity | None = None) -> Any:
    conn = KafkaConnection(*_address(bootstrap), client_id="strom-acls", security=security)
    await conn.connect()
    try:
        return await conn.request(api_key, VERSION, body)
    finally:
        await conn.close()


def _failed(code: int, message: str | None) -> RuntimeError:
    """A refusal as ExecutionException.getMessage() reads: the exception class and message."""
    return RuntimeError(exception_text(code, message))


def describe(bootstrap: str, resource: Resource | None,
             security: ClientSecurity | None = None) -> dict[Resource, set[Entry]]:
    """The ACLs matching a resource filter (every ACL for None), by resource pattern."""
    resource_type, name, pattern = resource or (ANY_RESOURCE, None, PATTERN_ANY)
    response = asyncio.run(_request(bootstrap, DESCRIBE_ACLS, M.DescribeAclsRequest(
        resource_type_filter=resource_type, resource_name_filter=name, pattern_type_filter=pattern,
        principal_filter=None, host_filter=None, operation=OP_ANY, permission_type=PERMISSION_ANY), security))
    if response.error_code != Error.NONE:
        raise _failed(response.error_code, response.error_message)
    out: dict[Resource, set[Entry]] = {}
    for r in response.resources:
        out.setdefault((r.resource_type, r.resource_name, r.pattern_type), set()).update(
            (a.principal, a.host, a.operation, a.permission_type) for a in r.acls)
    return out


def add(bootstrap: str, resource: Resource, acls: set[Entry], security: ClientSecurity | None = None) -> None:
    C = M.CreateAclsRequest
    resource_type, name, pattern = resource
    ordered = sorted(acls)
    response = asyncio.run(_request(bootstrap, CREATE_ACLS, C(creations=[
        C.AclCreation(resource_type=resource_type, resource_name=name or "", resource_pattern_type=pattern,
                      principal=p, host=h, operation=op, permission_type=perm)
        for p, h, op, perm in ordered]), security))
    for result in response.results:
        if result.error_code != Error.NONE:
            raise _failed(result.error_code, result.error_message)


def remove(bootstrap: str, resource: Resource, acls: set[Entry],
           security: ClientSecurity | None = None) -> int:
    """Delete the resource's ACLs that are listed (every one when none is): how many went."""
    F = M.DeleteAclsRequest.DeleteAclsFilter
    resource_type, name, pattern = resource
    wanted: list[tuple[str | None, str | None, int, int]] = list(sorted(acls))
    if not wanted:
        wanted = [(None, None, OP_ANY, PERMISSION_ANY)]
    response = asyncio.run(_request(bootstrap, DELETE_ACLS, M.DeleteAclsRequest(filters=[
        F(resource_type_filter=resource_type, resource_name_filter=name, pattern_type_filter=pattern,
          principal_filter=p, host_filter=h, operation=op, permission_type=perm)
        for p, h, op, perm in wanted]), security))
    removed = 0
    for result in response.filter_results:
        if result.error_code != Error.NONE:
            raise _failed(result.error_code, result.error_message)
        removed += len(result.matching_acls)
    return removed


def list_text(bootstrap: str, args: argparse.Namespace, security: ClientSecurity | None = None) -> str:
    """--list: every ACL of the resources named (of all when none is), for each --principal."""
    found: dict[Resource, set[Entry]] = {}
    named: list[Resource | None] = list(resources(args, required=False))
    for resource in named or [None]:
        for pattern, acls in describe(bootstrap, resource, security).items():
            found.setdefault(pattern, set()).update(acls)
    chunks = []
    principals: list[str | None] = list(_principals(args.principal))
    for principal in principals or [None]:
        if principal is not None:
            chunks.append(f"ACLs for principal `{principal}`")
        for resource, acls in sorted(found.items(), key=lambda kv: pattern_text(kv[0])):
            shown = {e for e in acls if principal is None or e[0] == principal}
            if shown:
                chunks.append(block("Current ACLs for resource", resource, shown))
    return "".join(chunk + "\n" for chunk in chunks)  # each println'd


def run(args: argparse.Namespace, confirm=input) -> int:
    """AclCommand.main: a usage error refused as the command line (UsageError); a failure of
    the action printed on stdout as 'Error while executing ACL command: <message>', exit 1."""
    check_args(args)
    security = read_command_config(args.command_config)
    try:
        return _act(args, security, confirm)
    except UsageError:
        raise
    except (RuntimeError, OSError, ValueError) as e:
        print(f"Error while executing ACL command: {e}")
        return 1


def _act(args: argparse.Namespace, security: ClientSecurity | None, confirm) -> int:
    bootstrap = args.bootstrap_server
    if args.list:
        print(list_text(bootstrap, args, security), end="")
        return 0
    if args.add:
        if args.resource_pattern_type in ("any", "match"):
            raise UsageError(f"A '--resource-pattern-type' value of '{args.resource_pattern_type.upper()}' "
                             "is not valid when adding acls.")
        todo = plan(args)
        if any(not acls for acls in todo.values()):
            raise UsageError("You must specify one of: --allow-principal, --deny-principal when trying to "
                             "add ACLs.")
        for resource, acls in todo.items():
            print(block("Adding ACLs for resource", resource, acls))
            add(bootstrap, resource, acls, security)
        return 0
    for resource, acls in plan(args).items():
        if acls:
            listed = "\n".join("\t" + entry_text(e) for e in sorted(acls))
            question = (f"Are you sure you want to remove ACLs: \n {listed} \n from resource filter "
                        f"`{pattern_text(resource)}`? (y/n)")
        else:
            question = ("Are you sure you want to delete all ACLs for resource filter "
                        f"`{pattern_text(resource)}`? (y/n)")
        if not args.force:
            print(question)  # AclCommand.confirmAction: println(msg), then the answer on a line of its own
        if args.force or confirm("").strip().lower() == "y":
            remove(bootstrap, resource, acls, security)
    return 0
