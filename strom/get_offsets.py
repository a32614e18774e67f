"""`strom get-offsets`: each partition's offset for a time, as kafka-get-offsets.sh prints it
(``topic:partition:offset``, one line each, ordered by ``topic-partition`` as text).

    strom get-offsets --bootstrap-server HOST:PORT --topic orders --time -1

``--time``: -1 or latest (the high watermark), -2 or earliest (the log start offset), -3 or
max-timestamp (the record of the greatest timestamp), or a timestamp in ms (the first offset whose
timestamp is at or after it; a partition with none is left out, as Kafka's tool does). ``--topic``
is a regular expression (all topics without it), ``--partitions`` a comma-separated list of ids;
``--topic-partitions`` takes ``TOPIC:PARTITION`` patterns instead (a range ``2-5``, ``2-`` or
``-5`` as partition).
"""
from __future__ import annotations

import argparse
import asyncio
import re
import sys
from typing import Any

from protocol.errors import Error
from protocol.list_offsets import offsets_request
from strom.admin_client import Admin, AdminError
from strom.kafka_errors import exception_text

LIST_OFFSETS = 2
HELP = "print partitions' offsets for a time (like kafka-get-offsets)"
EXAMPLE = """example:
  strom get-offsets --bootstrap-server 127.0.0.1:9092 --topic orders --time -1
  orders:0:1200
  orders:1:1187"""
NAMED_TIMES = {"latest": -1, "earliest": -2, "max-timestamp": -3}
INTERNAL = ("__consumer_offsets", "__transaction_state")


class UsageError(ValueError):
    pass


def add_parser(sub: Any) -> None:
    p = sub.add_parser("get-offsets", help=HELP, epilog=EXAMPLE, description=HELP,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bootstrap-server", "--broker-list", required=True, metavar="HOST:PORT[,...]")
    p.add_argument("--topic", help="topic name or regular expression (default: every topic)")
    p.add_argument("--partitions", metavar="ID[,ID...]", help="partition ids (default: every partition)")
    p.add_argument("--topic-partitions", metavar="TOPIC:PARTITION[,...]",
                   help="topic-partition patterns, partition as N, N-M, N- or -M; not with --topic")
    p.add_argument("--time", default="-1",
                   help="-1 or latest / -2 or earliest / -3 or max-timestamp / a timestamp in ms "
                        "(default -1)")
    p.add_argument("--exclude-internal-topics", action="store_true")
    p.add_argument("--command-config", metavar="FILE",
                   help="client properties to connect with (security.protocol, sasl.*, ssl.*)")


def parse_time(text: str) -> int:
    if text in NAMED_TIMES:
        return NAMED_TIMES[text]
    try:
        value = int(text)
    except ValueError:
        raise UsageError(f"Malformed time argument {text}. Please use -1 or latest / -2 or earliest / "
                         "-3 or max-timestamp / -4 or earliest-local / -5 or latest-tiered, or a specified "
                         "long format timestamp") from None
    if value < -3:
        raise UsageError(f"--time {value} is not served (-4 earliest-local and -5 latest-tiered "
                         "need tiered storage)")
    return value


def _partition_filter(spec: str | None, rule: str = ""):
    """A predicate on partition ids for N, N-M, N-, -M or empty (any)."""
    if not spec:
        return lambda p: True
    m = re.fullmatch(r"(\d*)-(\d*)|(\d+)", spec)
    if m is None:
        raise UsageError(f"Invalid rule specification: {rule or spec}")
    if m.group(3) is not None:
        n = int(m.group(3))
        return lambda p: p == n
    lo = int(m.group(1)) if m.group(1) else 0
    hi = int(m.group(2)) if m.group(2) else 1 << 31
    return lambda p: lo <= p < hi


def filters(args: argparse.Namespace) -> list[tuple[re.Pattern[str], Any]]:
    if args.topic_partitions:
        if args.topic or args.partitions:
            raise UsageError("--topic-partitions cannot be used with --topic or --partitions")
        out = []
        for rule in args.topic_partitions.split(","):
            topic, _, parts = rule.strip().partition(":")
            out.append((re.compile(topic or ".*"), _partition_filter(parts, rule)))
        return out
    ids = None
    if args.partitions:
        try:
            ids = {int(x) for x in args.partitions.split(",")}
        except ValueError:
            raise UsageError("--partitions expects a comma separated list of numeric partition ids, but "
                             f"received: {args.partitions}") from None
    return [(re.compile(args.topic or ".*"), (lambda p: True) if ids is None else ids.__contains__)]


async def fetch_offsets(admin: Admin, args: argparse.Namespace) -> dict[tuple[str, int], int]:
    timestamp = parse_time(args.time)
    rules = filters(args)
    answer = await admin.metadata(None)
    wanted: dict[int, list[tuple[str, int]]] = {}
    for t in answer.topics:
        if args.exclude_internal_topics and (t.is_internal or t.name in INTERNAL):
            continue
        for p in t.partitions:
            if any(rx.fullmatch(t.name) and ok(p.partition_index) for rx, ok in rules):
                wanted.setdefault(p.leader_id, []).append((t.name, p.partition_index))
    if not wanted:
        raise UsageError("Could not match any topic-partitions with the specified filters")
    out: dict[tuple[str, int], int] = {}
    for leader, partitions in wanted.items():
        by_topic: dict[str, list[int]] = {}
        for topic, index in partitions:
            by_topic.setdefault(topic, []).append(index)
        body = offsets_request(by_topic, timestamp)
        if leader < 0:
            for tp in partitions:
                print(skip_text(tp[0], tp[1], Error.LEADER_NOT_AVAILABLE), file=sys.stderr)
            continue
        response = await admin.request(LIST_OFFSETS, 1 if timestamp != -3 else 7, 7, body, node=leader)
        for t in response.topics:
            for p in t.partitions:
                if p.error_code != Error.NONE:
                    print(skip_text(t.name, p.partition_index, p.error_code), file=sys.stderr)
                elif p.offset != -1:
                    out[(t.name, p.partition_index)] = p.offset
    return out


def skip_text(topic: str, partition: int, code: int) -> str:
    """GetOffsetShell's line on stderr for a partition whose ListOffsets failed."""
    return (f"Skip getting offsets for topic-partition {topic}-{partition} due to error: "
            f"{exception_text(code)}")


def format_offsets(offsets: dict[tuple[str, int], int]) -> str:
    ordered = sorted(offsets.items(), key=lambda kv: f"{kv[0][0]}-{kv[0][1]}")
    return "\n".join(f"{topic}:{partition}:{offset}" for (topic, partition), offset in ordered)


def run(args: argparse.Namespace) -> int:
    from strom.acls import read_command_config

    security = read_command_config(args.command_config)

    async def go() -> dict[tuple[str, int], int]:
        async with Admin(args.bootstrap_server, security, "GetOffsetShell") as admin:
            return await fetch_offsets(admin, args)

    try:
        offsets = asyncio.run(go())
    except (UsageError, AdminError) as e:
        print(f"Error occurred: {e}", file=sys.stderr)
        return 1
    text = format_offsets(offsets)
    if text:
        print(text)
    return 0
