"""`strom log-dirs --describe`: each broker's log directories and the partitions in them, as
kafka-log-dirs.sh prints them (two lines, then one line of JSON):

    Querying brokers for log directories information
    Received log directory information from brokers 1,2
    {"brokers":[{"broker":1,"logDirs":[{"partitions":[{"partition":"orders-0","size":1024,
    "offsetLag":0,"isFuture":false}],"error":null,"logDir":"/data/1"}]}],"version":1}

The keys are in the order Kafka's tool prints them (its HashMaps'), partitions by topic and id.
``--broker-list`` limits the brokers asked (a broker not in the cluster stops the command naming
it), ``--topic-list`` the topics shown.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

from protocol import messages as M
from protocol.errors import Error
from strom.admin_client import Admin, AdminError, error_name
from strom.kafka_errors import exception_class

DESCRIBE_LOG_DIRS = 35
HELP = "describe the brokers' log directories (like kafka-log-dirs)"
EXAMPLE = """example:
  strom log-dirs --describe --bootstrap-server 127.0.0.1:9092 --broker-list 1 --topic-list orders"""


class UsageError(ValueError):
    pass


def add_parser(sub: Any) -> None:
    p = sub.add_parser("log-dirs", help=HELP, epilog=EXAMPLE, description=HELP,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--describe", action="store_true", required=True, help="describe the log directories")
    p.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT[,...]")
    p.add_argument("--broker-list", metavar="ID[,ID...]", help="the brokers to ask (default: all)")
    p.add_argument("--topic-list", metavar="TOPIC[,TOPIC...]", help="the topics to show (default: all)")
    p.add_argument("--command-config", metavar="FILE",
                   help="client properties to connect with (security.protocol, sasl.*, ssl.*)")


def _ids(text: str | None) -> list[int]:
    if not text:
        return []
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UsageError(f"--broker-list: {text!r} is not a list of broker ids") from None


def log_dir_json(result: Any, topics: set[str]) -> dict[str, Any]:
    partitions = [
        {"partition": f"{t.name}-{p.partition_index}", "size": p.partition_size, "offsetLag": p.offset_lag,
         "isFuture": p.is_future_key}
        for t in sorted(result.topics, key=lambda t: t.name) if not topics or t.name in topics
        for p in sorted(t.partitions, key=lambda p: p.partition_index)]
    error = None
    if result.error_code != Error.NONE:
        error = exception_class(result.error_code)
    return {"partitions": partitions, "error": error, "logDir": result.log_dir}


def format_json(by_broker: dict[int, list[Any]], topics: set[str]) -> str:
    doc = {"brokers": [{"broker": b, "logDirs": [log_dir_json(r, topics) for r in results]}
                       for b, results in by_broker.items()],
           "version": 1}
    return json.dumps(doc, separators=(",", ":"))


async def describe(admin: Admin, wanted: list[int]) -> dict[int, list[Any]]:
    await admin.metadata([])
    cluster = sorted(admin.brokers)
    missing = [b for b in wanted if b not in admin.brokers]
    if missing:
        raise UsageError("ERROR: The given brokers do not exist from --broker-list: "
                         f"{','.join(map(str, missing))}. Current existent brokers: "
                         f"{','.join(map(str, cluster))}")
    brokers = sorted(set(wanted)) if wanted else cluster
    print("Querying brokers for log directories information")
    out = {}
    for broker in brokers:
        body = M.DescribeLogDirsRequest(topics=None)
        answer = await admin.request(DESCRIBE_LOG_DIRS, 1, 4, body, node=broker)
        if answer.error_code != Error.NONE:
            raise AdminError(f"broker {broker}: {error_name(answer.error_code)}")
        out[broker] = sorted(answer.results, key=lambda r: r.log_dir)
    print(f"Received log directory information from brokers {','.join(map(str, brokers))}")
    return out


def run(args: argparse.Namespace) -> int:
    from strom.acls import read_command_config

    security = read_command_config(args.command_config)
    topics = {t.strip() for t in (args.topic_list or "").split(",") if t.strip()}

    async def go() -> dict[int, list[Any]]:
        async with Admin(args.bootstrap_server, security, "log-dirs-tool") as admin:
            return await describe(admin, _ids(args.broker_list))

    try:
        by_broker = asyncio.run(go())
    except (UsageError, AdminError) as e:
        print(e, file=sys.stderr)
        return 1
    print(format_json(by_broker, topics))
    return 0
