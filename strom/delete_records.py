"""`strom delete-records`: delete the records of partitions below given offsets, as
kafka-delete-records.sh does, with its JSON file and its output.

    strom delete-records --bootstrap-server HOST:PORT --offset-json-file offsets.json

The file: ``{"partitions": [{"topic": "orders", "partition": 0, "offset": 100}], "version": 1}``
(offset -1: up to the high watermark). Each partition's DeleteRecords goes to its leader; the
answer is ``partition: orders-0\\tlow_watermark: 100`` or ``partition: orders-0\\terror: ...``.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

from protocol import messages as M
from protocol.errors import Error
from strom.admin_client import Admin, AdminError
from strom.kafka_errors import exception_text

DELETE_RECORDS = 21
TIMEOUT_MS = 30_000
HELP = "delete partitions' records below given offsets (like kafka-delete-records)"
EXAMPLE = """example:
  echo '{"partitions": [{"topic": "orders", "partition": 0, "offset": 100}], "version": 1}' > offsets.json
  strom delete-records --bootstrap-server 127.0.0.1:9092 --offset-json-file offsets.json
  Executing records delete operation
  Records delete operation completed:
  partition: orders-0	low_watermark: 100"""


class OffsetFileError(ValueError):
    pass


def add_parser(sub: Any) -> None:
    p = sub.add_parser("delete-records", help=HELP, epilog=EXAMPLE, description=HELP,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT[,...]")
    p.add_argument("--offset-json-file", required=True, metavar="FILE",
                   help='{"partitions": [{"topic": "foo", "partition": 1, "offset": 1}], "version": 1}')
    p.add_argument("--command-config", metavar="FILE",
                   help="client properties to connect with (security.protocol, sasl.*, ssl.*)")


def parse_offset_json(text: str) -> dict[tuple[str, int], int]:
    """Kafka's parseOffsetJsonStringWithoutDedup, then its check for duplicates."""
    try:
        js = json.loads(text)
    except ValueError:
        raise OffsetFileError("The input string is not a valid JSON") from None
    if not isinstance(js, dict):
        raise OffsetFileError("The input string is not a valid JSON")
    version = js.get("version", 1)
    if version != 1:
        raise OffsetFileError(f"Not supported version field value {version}")
    if "partitions" not in js:
        raise OffsetFileError("Missing partitions field")
    out: dict[tuple[str, int], int] = {}
    duplicates = []
    for entry in js["partitions"]:
        try:
            topic, partition, offset = entry["topic"], entry["partition"], entry["offset"]
        except (KeyError, TypeError) as e:
            raise OffsetFileError(f"Missing field {e} in {entry}") from None
        if not isinstance(topic, str) or not isinstance(partition, int) or not isinstance(offset, int):
            raise OffsetFileError(f"topic must be a string, partition and offset numbers: {entry}")
        if (topic, partition) in out:
            duplicates.append(f"{topic}-{partition}")
        out[(topic, partition)] = offset
    if duplicates:
        raise OffsetFileError("Offset json file contains duplicate topic partitions: " + ",".join(duplicates))
    return out


async def delete(admin: Admin, offsets: dict[tuple[str, int], int]) -> dict[tuple[str, int], str]:
    """Each partition's outcome: ``low_watermark: N`` or ``error: ...``."""
    leaders = await admin.leaders({t for t, _ in offsets})
    results: dict[tuple[str, int], str] = {}
    by_leader: dict[int, dict[str, list[tuple[int, int]]]] = {}
    for (topic, partition), offset in offsets.items():
        leader = leaders.get((topic, partition))
        if leader is None:
            results[(topic, partition)] = "error: " + exception_text(Error.UNKNOWN_TOPIC_OR_PARTITION)
        elif leader < 0:
            results[(topic, partition)] = "error: " + exception_text(Error.LEADER_NOT_AVAILABLE)
        else:
            by_leader.setdefault(leader, {}).setdefault(topic, []).append((partition, offset))
    T = M.DeleteRecordsRequest.DeleteRecordsTopic
    for leader, topics in by_leader.items():
        body = M.DeleteRecordsRequest(timeout_ms=TIMEOUT_MS, topics=[
            T(name=topic,
              partitions=[T.DeleteRecordsPartition(partition_index=p, offset=o) for p, o in parts])
            for topic, parts in topics.items()])
        response = await admin.request(DELETE_RECORDS, 0, 2, body, node=leader)
        for t in response.topics:
            for p in t.partitions:
                results[(t.name, p.partition_index)] = (
                    f"low_watermark: {p.low_watermark}" if p.error_code == Error.NONE
                    else "error: " + exception_text(p.error_code))
    return results


def format_results(offsets: dict[tuple[str, int], int], results: dict[tuple[str, int], str]) -> str:
    """DeleteRecordsCommand.execute's report: its two lines, then each partition's
    ``partition: <topic>-<partition>\tlow_watermark: N`` or ``...\terror: <exception message>``."""
    lines = ["Executing records delete operation", "Records delete operation completed:"]
    lines += [f"partition: {topic}-{partition}\t{results[(topic, partition)]}"
              for topic, partition in offsets]
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    from strom.acls import read_command_config

    try:
        with open(args.offset_json_file) as f:
            offsets = parse_offset_json(f.read())
    except (OSError, OffsetFileError) as e:
        print(e, file=sys.stderr)
        return 1
    security = read_command_config(args.command_config)
    print("Executing records delete operation")

    async def go() -> dict[tuple[str, int], str]:
        async with Admin(args.bootstrap_server, security, "delete-records") as admin:
            return await delete(admin, offsets)

    try:
        results = asyncio.run(go())
    except AdminError as e:
        print(e, file=sys.stderr)
        return 1
    print(format_results(offsets, results).split("\n", 1)[1])
    return 0
