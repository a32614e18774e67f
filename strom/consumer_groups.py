"""`strom consumer-groups`: list, describe, reset the offsets of and delete consumer groups, as
kafka-consumer-groups.sh does, with its options, messages and output layouts (Kafka's
ConsumerGroupCommand), for classic and consumer (KIP-848) groups.

    strom consumer-groups --bootstrap-server HOST:PORT --list [--state [STATES]] [--type [TYPES]]
    strom consumer-groups --bootstrap-server HOST:PORT --describe --group G [--members [--verbose] |
                          --state | --offsets]
    strom consumer-groups --bootstrap-server HOST:PORT --reset-offsets --group G --topic T[:0,1] |
                          --all-topics --to-earliest | --to-latest | --to-offset N | --shift-by N |
                          --to-datetime 2024-01-01T00:00:00.000 | --by-duration PT1H [--dry-run | --execute]
    strom consumer-groups --bootstrap-server HOST:PORT --delete --group G
    strom consumer-groups --bootstrap-server HOST:PORT --delete-offsets --group G --topic T[:0,1]

As Kafka's tool: exactly one action; a mistake in the options prints the reason and exits 1; what
the cluster refuses (a group that is not empty, one that does not exist) prints ``Error: ...``
and exits 0. ``--reset-offsets`` without ``--execute`` is a dry run. ``--command-config FILE``:
the client properties that reach a secured listener, as every strom command's.
"""
from __future__ import annotations

import argparse
import asyncio
import re
import sys
import time
from datetime import datetime, timedelta
from typing import Any

from strom.reset_plan import ResetPlanError, export_csv, parse_reset_plan

HELP = "list, describe, reset the offsets of or delete consumer groups (like kafka-consumer-groups)"
EXAMPLE = """example:
  strom consumer-groups --bootstrap-server 127.0.0.1:9092 --describe --group orders-app
  strom consumer-groups --bootstrap-server 127.0.0.1:9092 --reset-offsets --group orders-app \\
      --topic orders --to-earliest --execute"""
MISSING = "-"
TIMEOUT = 30.0
ACTIONS = ("list", "describe", "delete", "reset_offsets", "delete_offsets")

# Kafka's ConsumerGroupState names, by confluent-kafka's enum names
STATE_NAMES = {"UNKNOWN": "Unknown", "PREPARING_REBALANCING": "PreparingRebalance",
               "COMPLETING_REBALANCING": "CompletingRebalance", "STABLE": "Stable", "DEAD": "Dead",
               "EMPTY": "Empty", "ASSIGNING": "Assigning", "RECONCILING": "Reconciling"}
TYPE_NAMES = {"UNKNOWN": "Unknown", "CONSUMER": "Consumer", "CLASSIC": "Classic"}


class UsageError(ValueError):
    """A command line kafka-consumer-groups refuses (its printUsageAndExit): exit 1."""


def add_parser(sub: Any, listed: bool = True) -> None:
    extra = {"help": HELP} if listed else {}
    p = sub.add_parser("consumer-groups", **extra, epilog=EXAMPLE,
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       description="List, describe, reset the offsets of or delete consumer groups, as "
                                   "kafka-consumer-groups.sh does.")
    p.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT[,...]")
    p.add_argument("--command-config", metavar="FILE",
                   help="client properties to connect with (security.protocol, sasl.*, ssl.*)")
    p.add_argument("--list", action="store_true", help="list all consumer groups")
    p.add_argument("--describe", action="store_true", help="describe consumer groups: offsets and lag")
    p.add_argument("--delete", action="store_true", help="delete (empty) consumer groups")
    p.add_argument("--reset-offsets", action="store_true", help="reset a group's committed offsets")
    p.add_argument("--delete-offsets", action="store_true", help="delete a group's offsets of topics")
    p.add_argument("--group", action="append", default=[], metavar="G")
    p.add_argument("--all-groups", action="store_true")
    p.add_argument("--topic", action="append", default=[], metavar="T[:P,...]")
    p.add_argument("--all-topics", action="store_true")
    p.add_argument("--members", action="store_true", help="with --describe: the group's members")
    p.add_argument("--verbose", action="store_true", help="with --members: each member's assignment")
    p.add_argument("--offsets", action="store_true", help="with --describe: the offsets view (the default)")
    p.add_argument("--state", nargs="?", const="", default=None, metavar="STATES",
                   help="with --describe: the group's state; with --list: the STATE column, only groups "
                        "in these comma-separated states when given")
    p.add_argument("--type", nargs="?", const="", default=None, metavar="TYPES",
                   help="with --list: the TYPE column, only groups of these types (consumer, classic)")
    p.add_argument("--to-earliest", action="store_true")
    p.add_argument("--to-latest", action="store_true")
    p.add_argument("--to-current", action="store_true")
    p.add_argument("--to-offset", type=int, metavar="N")
    p.add_argument("--shift-by", type=int, metavar="N")
    p.add_argument("--to-datetime", metavar="YYYY-MM-DDTHH:mm:SS.sss")
    p.add_argument("--by-duration", metavar="PnDTnHnMnS")
    p.add_argument("--from-file", metavar="FILE",
                   help="reset offsets to values defined in CSV file (topic,partition,offset; with "
                        "several groups group,topic,partition,offset)")
    p.add_argument("--export", action="store_true",
                   help="with --reset-offsets: print the new offsets as CSV, for --from-file")
    p.add_argument("--dry-run", action="store_true", help="show the new offsets only (the default)")
    p.add_argument("--execute", action="store_true", help="commit the new offsets")
    p.add_argument("--timeout", type=int, default=5000, metavar="MS")


# ---- the options (ConsumerGroupCommandOptions.checkArgs) ----------------------------------------

def check_args(args: argparse.Namespace) -> str:
    actions = [a for a in ACTIONS if getattr(args, a)]
    if len(actions) != 1:
        raise UsageError("Command must include exactly one action: --list, --describe, --delete, "
                         "--reset-offsets, --delete-offsets")
    action = actions[0]
    if action == "describe":
        if not args.group and not args.all_groups:
            raise UsageError("Option --describe takes one of these options: --all-groups, --group")
        if sum((args.members, args.offsets, args.state is not None)) > 1:
            raise UsageError("Option --describe takes at most one of these options: --members, --offsets, "
                             "--state")
    if args.verbose and not (args.describe and args.members):
        raise UsageError("Option --verbose can be used only with --describe --members")
    if action in ("delete", "reset_offsets") and not args.group and not args.all_groups:
        raise UsageError(f"Option --{action.replace('_', '-')} takes one of these options: --all-groups, "
                         "--group")
    if action == "delete_offsets":
        if len(args.group) != 1 or not args.topic:
            raise UsageError("Option --delete-offsets takes the following options: --group, --topic")
    if action == "reset_offsets":
        scopes = [s for s in ("to_earliest", "to_latest", "to_current") if getattr(args, s)]
        scopes += [s for s in ("to_offset", "shift_by", "to_datetime", "by_duration")
                   if getattr(args, s) is not None]
        scopes += ["from_file"] if args.from_file is not None else []
        if len(scopes) != 1:
            raise UsageError("Option --reset-offsets takes exactly one of these options: --to-datetime, "
                             "--by-duration, --to-earliest, --to-latest, --shift-by, --from-file, "
                             "--to-current, --to-offset")
        if args.dry_run and args.execute:
            raise UsageError("Option --reset-offsets only accepts one of --execute and --dry-run")
        if not args.topic and not args.all_topics and args.from_file is None:
            raise UsageError("One of the reset scopes should be defined: --all-topics, --topic.")
        if args.topic and args.all_topics:
            raise UsageError("Option --reset-offsets takes only one of these options: --all-topics, --topic")
    if args.all_groups and args.group:
        raise UsageError("Option --all-groups cannot be used with --group")
    return action


def parse_topic_partitions(spec: str) -> tuple[str, list[int] | None]:
    """``orders`` (every partition) or ``orders:0,2``."""
    topic, colon, parts = spec.partition(":")
    if not colon:
        return topic, None
    try:
        return topic, [int(p) for p in parts.split(",") if p.strip()]
    except ValueError:
        raise UsageError(f"Invalid partitions in --topic {spec}") from None


def parse_datetime(text: str) -> int:
    """Utils.getDateTime: ``yyyy-MM-dd'T'HH:mm:ss.SSS`` with an optional zone (``Z``, ``+01:00``);
    without one, local time. Milliseconds since the epoch."""
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(f"Error parsing timestamp: {text}. It must be formatted as "
                         "yyyy-MM-dd'T'HH:mm:ss.SSS, optionally followed by a time zone") from None
    if when.tzinfo is None:
        when = when.astimezone()
    return int(when.timestamp() * 1000)


_DURATION = re.compile(r"^P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?$", re.IGNORECASE)


def parse_duration(text: str) -> timedelta:
    """java.time.Duration.parse: ``PnDTnHnMn.nS``."""
    m = _DURATION.match(text)
    if not m or text.upper() in ("P", "PT"):
        raise UsageError(f"Text cannot be parsed to a Duration: {text}")
    days, hours, minutes, seconds = (float(g) if g else 0.0 for g in m.groups())
    return timedelta(days=days, hours=hours, minutes=minutes, seconds=seconds)


def parse_states(text: str) -> set[str]:
    valid = [s for s in STATE_NAMES.values() if s != "Unknown"]
    out = set()
    for s in text.split(","):
        found = [v for v in valid if v.lower() == s.strip().lower()]
        if not found:
            raise UsageError(f"Invalid state list '{text}'. Valid states are: {', '.join(valid)}")
        out.add(found[0])
    return out


def parse_types(text: str) -> set[str]:
    valid = ["consumer", "classic"]
    out = {t.strip().lower() for t in text.split(",")}
    if out - set(valid):
        raise UsageError(f"Invalid types list '{text}'. Valid types are: {', '.join(valid)}")
    return out


# ---- output, as ConsumerGroupCommand prints it ------------------------------------------------------

def _f(value: Any) -> str:
    return MISSING if value is None else str(value)


def offsets_table(rows: list[tuple]) -> str:
    """printOffsets' table: rows of (group, topic, partition, offset, log end, lag, consumer id,
    host, client id), None shown as ``-``; a newline before each line."""
    wg = max([15] + [len(r[0]) for r in rows])
    wt = max([15] + [len(_f(r[1])) for r in rows])
    wc = max([15] + [len(_f(r[6])) for r in rows])
    wh = max([15] + [len(_f(r[7])) for r in rows])
    out = []
    for row in [("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID",
                 "HOST", "CLIENT-ID")] + rows:
        g, t, p, o, e, lag, c, h, cid = (_f(v) for v in row)
        out.append(f"\n{g:<{wg}} {t:<{wt}} {p:<10} {o:<15} {e:<15} {lag:<15} {c:<{wc}} {h:<{wh}} {cid}")
    return "".join(out) + "\n"


def members_table(rows: list[tuple], verbose: bool) -> str:
    """printMembers: rows of (group, consumer id, instance id, host, client id, #partitions,
    {topic: [partitions]}); GROUP-INSTANCE-ID only when a member has one."""
    with_instance = any(r[2] for r in rows)
    widths = [max([15] + [len(r[0]) for r in rows]), max([15] + [len(r[1]) for r in rows]),
              max([17] + [len(r[2]) for r in rows]), max([15] + [len(r[3]) for r in rows]),
              max([15] + [len(r[4]) for r in rows])]

    def line(cells: tuple) -> str:
        g, c, i, h, cid, n = cells
        shown = [(g, widths[0]), (c, widths[1])] + ([(i, widths[2])] if with_instance else [])
        shown += [(h, widths[3]), (cid, widths[4]), (n, 15)]
        return "".join(f"{str(v):<{w}} " for v, w in shown)

    out = "\n" + line(("GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID", "#PARTITIONS"))
    out += ("ASSIGNMENT" if verbose else "") + "\n"
    for r in rows:
        out += line(r[:6])
        if verbose:
            assignment = r[6]
            out += ", ".join(sorted("(" + ",".join(sorted(str(p) for p in ps)) + ")"
                                    for ps in assignment.values())) if assignment else MISSING
        out += "\n"
    return out


def state_table(group: str, coordinator: str, assignor: str, state: str, members: int) -> str:
    width = max(25, len(coordinator))
    out = ""
    for row in (("GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"),
                (group, coordinator, assignor, state, members)):
        out += f"\n{row[0]:<{width}} {row[1]:<25} {row[2]:<20} {row[3]:<15} {row[4]}"
    return out + "\n"


def reset_table(plan: dict[str, dict[tuple[str, int], int]]) -> str:
    """printOffsetsToReset."""
    out = ""
    if plan:
        out += f"\n{'GROUP':<30} {'TOPIC':<30} {'PARTITION':<10} {'NEW-OFFSET':<15}"
    for group, offsets in plan.items():
        for (topic, partition), offset in offsets.items():
            out += f"\n{group:<30} {topic:<30} {partition!s:<10} {offset!s:<15}"
    return out + "\n"


def list_table(groups: list[tuple[str, str, str]], with_type: bool, with_state: bool) -> str:
    """printGroupInfo: (group, type, state) rows."""
    width = max([15] + [len(g) for g, _, _ in groups]) + 10
    out = ""
    for g, t, s in [("GROUP", "TYPE", "STATE")] + groups:
        line = f"{g:<{width}}" + (f" {t:<20}" if with_type else "") + (f" {s:<20}" if with_state else "")
        out += line + "\n"
    return out


def error(message: str) -> None:
    print("\nError: " + message)


# ---- the cluster ----------------------------------------------------------------------------------

class Service:
    """The admin client of one command (confluent-kafka's AdminClient)."""

    def __init__(self, args: argparse.Namespace):
        from confluent_kafka.admin import AdminClient

        from security.client_config import librdkafka_config

        props: dict[str, str] = {}
        if args.command_config:
            from engine.checkpoint import read_properties

            try:
                props = read_properties(args.command_config)
            except OSError as e:
                raise ValueError(f"cannot read {args.command_config}: {e.strerror or e}") from None
        self.config = {"bootstrap.servers": args.bootstrap_server, **librdkafka_config(props)}
        self.admin = AdminClient(self.config)
        self.args = args
        self.timeout = max(args.timeout / 1000, TIMEOUT)

    def _wait(self, future: Any) -> Any:
        return future.result(timeout=self.timeout)

    def list_groups(self, states: set[str] | None = None, types: set[str] | None = None) -> list[Any]:
        from confluent_kafka import ConsumerGroupState, ConsumerGroupType

        kw: dict[str, Any] = {"request_timeout": self.timeout}
        if states:
            kw["states"] = {s for s in ConsumerGroupState if STATE_NAMES[s.name] in states}
        if types:
            kw["types"] = {t for t in ConsumerGroupType if t.name.lower() in types}
        result = self._wait(self.admin.list_consumer_groups(**kw))
        return sorted(result.valid, key=lambda g: g.group_id)

    def group_ids(self) -> list[str]:
        if self.args.all_groups:
            return [g.group_id for g in self.list_groups()]
        return list(dict.fromkeys(self.args.group))

    def describe(self, groups: list[str]) -> dict[str, Any]:
        futures = self.admin.describe_consumer_groups(groups, request_timeout=self.timeout)
        return {g: self._wait(f) for g, f in futures.items()}

    def committed(self, group: str) -> dict[tuple[str, int], int]:
        from confluent_kafka import ConsumerGroupTopicPartitions

        futures = self.admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)],
                                                         request_timeout=self.timeout)
        out = {}
        for tp in self._wait(futures[group]).topic_partitions:
            if tp.error is None and tp.offset >= 0:
                out[(tp.topic, tp.partition)] = tp.offset
        return out

    def log_offsets(self, partitions: list[tuple[str, int]], spec: Any) -> dict[tuple[str, int], int | None]:
        from confluent_kafka import TopicPartition

        if not partitions:
            return {}
        futures = self.admin.list_offsets({TopicPartition(t, p): spec for t, p in partitions},
                                          request_timeout=self.timeout)
        out: dict[tuple[str, int], int | None] = {}
        for tp, future in futures.items():
            try:
                out[(tp.topic, tp.partition)] = future.result(timeout=self.timeout).offset
            except Exception:
                out[(tp.topic, tp.partition)] = None
        return out

    def partitions_of(self, topics: list[str]) -> dict[str, list[int]]:
        metadata = self.admin.list_topics(timeout=self.timeout)
        out = {}
        for t in topics:
            topic = metadata.topics.get(t)
            if topic is None or topic.error is not None:
                raise UsageError(f"Topic {t} does not exist")  # kafka's: UnknownTopicOrPartitionException
            out[t] = sorted(topic.partitions)
        return out


def _state(description: Any) -> str:
    state = description.state
    return STATE_NAMES.get(getattr(state, "name", str(state)), str(state))


def _assignment(member: Any) -> list[tuple[str, int]]:
    assignment = member.assignment
    return [(tp.topic, tp.partition) for tp in (assignment.topic_partitions if assignment else [])]


def should_print(group: str, state: str | None, rows: int | None) -> bool:
    """shouldPrintMemberState."""
    if rows is None or state is None:
        error(f"The consumer group '{group}' does not exist.")
        return False
    if state == "Dead":
        error(f"Consumer group '{group}' does not exist.")
    elif state == "Empty":
        print(f"\nConsumer group '{group}' has no active members.", file=sys.stderr)
    elif state in ("PreparingRebalance", "CompletingRebalance", "Assigning", "Reconciling"):
        print(f"\nWarning: Consumer group '{group}' is rebalancing.", file=sys.stderr)
    return state != "Dead" and rows > 0


def describe_offsets(service: Service, group: str, description: Any) -> str | None:
    """collectGroupsOffsets then printOffsets: the rows of each member's partitions, biggest
    assignment first, then the committed partitions no member holds."""
    from confluent_kafka.admin import OffsetSpec

    state = _state(description)
    committed = service.committed(group)
    assigned: set[tuple[str, int]] = set()
    rows: list[tuple] = []
    members = sorted((m for m in description.members if _assignment(m)), key=lambda m: -len(_assignment(m)))
    owners = []
    for m in members:
        parts = sorted(_assignment(m), key=lambda tp: tp[1])
        assigned.update(parts)
        owners.append((parts, m.member_id, m.host, m.client_id))
    unassigned = sorted((tp for tp in committed if tp not in assigned), key=lambda tp: tp[1])
    if unassigned:
        owners.append((unassigned, None, None, None))
    ends = service.log_offsets([tp for parts, *_ in owners for tp in parts], OffsetSpec.latest())
    for parts, member, host, client in owners:
        for tp in parts:
            offset, end = committed.get(tp), ends.get(tp)
            lag = end - offset if offset is not None and end is not None else None
            rows.append((group, tp[0], tp[1], offset, end, lag, member, host, client))
    if not should_print(group, state, len(rows)):
        return None
    return offsets_table(rows)


def describe_members(group: str, description: Any, verbose: bool) -> str | None:
    rows = []
    for m in description.members:
        parts = _assignment(m)
        by_topic: dict[str, list[int]] = {}
        for t, p in parts:
            by_topic.setdefault(t, []).append(p)
        rows.append((group, m.member_id, m.group_instance_id or "", m.host, m.client_id, len(parts),
                     by_topic))
    if not should_print(group, _state(description), len(rows)):
        return None
    return members_table(rows, verbose)


def describe_state(group: str, description: Any) -> str | None:
    state = _state(description)
    if not should_print(group, state, 1):
        return None
    c = description.coordinator
    coordinator = f"{c.host}:{c.port}  ({c.id_string})"
    return state_table(group, coordinator, description.partition_assignor or "", state,
                       len(description.members))


def _described(service: Service, groups: list[str]) -> dict[str, Any]:
    """Each group's description; a group the coordinator does not know is Dead, as Kafka's
    admin client answers it (describe of an unknown group)."""
    out = {}
    futures = service.admin.describe_consumer_groups(groups, request_timeout=service.timeout)
    for group, future in futures.items():
        try:
            out[group] = service._wait(future)
        except Exception as e:
            code = getattr(getattr(e, "args", [None])[0], "name", lambda: "")
            if callable(code) and code() == "GROUP_ID_NOT_FOUND":
                out[group] = None
            else:
                raise
    return out


def run_describe(service: Service, args: argparse.Namespace) -> None:
    for group, description in sorted(_described(service, service.group_ids()).items()):
        if description is None:
            error(f"Consumer group '{group}' does not exist.")
            continue
        if args.members:
            text = describe_members(group, description, args.verbose)
        elif args.state is not None:
            text = describe_state(group, description)
        else:
            text = describe_offsets(service, group, description)
        if text is not None:
            print(text, end="")


def run_list(service: Service, args: argparse.Namespace) -> None:
    with_state, with_type = args.state is not None, args.type is not None
    states = parse_states(args.state) if args.state else None
    types = parse_types(args.type) if args.type else None
    groups = service.list_groups(states, types)
    if not with_state and not with_type:
        for g in groups:
            print(g.group_id)
        return
    rows = [(g.group_id, TYPE_NAMES.get(getattr(g.type, "name", ""), "Unknown"),
             STATE_NAMES.get(getattr(g.state, "name", ""), "Unknown")) for g in groups]
    print(list_table(rows, with_type, with_state), end="")


def _partitions_to_reset(service: Service, args: argparse.Namespace, group: str) -> list[tuple[str, int]]:
    if args.all_topics:
        return sorted(service.committed(group))
    specs = [parse_topic_partitions(t) for t in args.topic]
    whole = service.partitions_of([t for t, parts in specs if parts is None])
    out: list[tuple[str, int]] = []
    for topic, parts in specs:
        out += [(topic, p) for p in (whole[topic] if parts is None else parts)]
    return list(dict.fromkeys(out))


def _check_range(service: Service, wanted: dict[tuple[str, int], int]) -> dict[tuple[str, int], int]:
    """checkOffsetsRange: an offset past the log end becomes the log end, one before the log start
    the log start, each with Kafka's warning."""
    from confluent_kafka.admin import OffsetSpec

    ends = service.log_offsets(list(wanted), OffsetSpec.latest())
    starts = service.log_offsets(list(wanted), OffsetSpec.earliest())
    out = {}
    for tp, offset in wanted.items():
        end, start = ends.get(tp), starts.get(tp)
        if end is not None and offset > end:
            print(f"\nWarn: New offset ({offset}) is higher than latest offset for topic partition "
                  f"{tp[0]}-{tp[1]}. Value will be set to {end}", file=sys.stderr)
            offset = end
        elif start is not None and offset < start:
            print(f"\nWarn: New offset ({offset}) is lower than earliest offset for topic partition "
                  f"{tp[0]}-{tp[1]}. Value will be set to {start}", file=sys.stderr)
            offset = start
        out[tp] = offset
    return out


def prepare_reset(service: Service, args: argparse.Namespace, group: str,
                  partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
    """prepareOffsetsToReset."""
    from confluent_kafka.admin import OffsetSpec

    if args.to_offset is not None:
        return _check_range(service, {tp: args.to_offset for tp in partitions})
    if args.shift_by is not None:
        current = service.committed(group)
        for tp in partitions:
            if tp not in current:
                raise UsageError(f"Cannot shift offset for partition {tp[0]}-{tp[1]} since there is no "
                                 "current committed offset")
        return _check_range(service, {tp: current[tp] + args.shift_by for tp in partitions})
    if args.to_current:
        current = service.committed(group)
        latest = service.log_offsets([tp for tp in partitions if tp not in current], OffsetSpec.latest())
        return {tp: current[tp] if tp in current else latest[tp] for tp in partitions}  # type: ignore[misc]
    if args.to_earliest:
        spec, what = OffsetSpec.earliest(), "starting offset"
    elif args.to_latest:
        spec, what = OffsetSpec.latest(), "ending offset"
    else:
        if args.to_datetime is not None:
            timestamp = parse_datetime(args.to_datetime)
        else:
            timestamp = int((time.time() - parse_duration(args.by_duration).total_seconds()) * 1000)
        spec, what = OffsetSpec.for_timestamp(timestamp), "offset by timestamp"
    found = service.log_offsets(partitions, spec)
    out = {}
    for tp in partitions:
        offset = found.get(tp)
        if offset is None:
            raise UsageError(f"Error getting {what} of topic partition: {tp[0]}-{tp[1]}")
        if offset < 0 and not (args.to_earliest or args.to_latest):  # no record at or after it: the end
            offset = service.log_offsets([tp], OffsetSpec.latest())[tp] or 0
        out[tp] = offset
    return out


def run_reset(service: Service, args: argparse.Namespace) -> None:
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

    plan: dict[str, dict[tuple[str, int], int]] = {}
    from_file = None
    if args.from_file is not None:
        try:
            with open(args.from_file) as f:
                from_file = parse_reset_plan(f.read(), args.group)
        except (OSError, ResetPlanError) as e:
            raise UsageError(str(e)) from None
    for group, description in _described(service, service.group_ids()).items():
        state = "Dead" if description is None else _state(description)
        if state not in ("Empty", "Dead"):
            error(f"Assignments can only be reset if the group '{group}' is inactive, but the current "
                  f"state is {state}.")
            plan[group] = {}
            continue
        if from_file is not None:
            if group not in from_file:
                error(f"No reset plan for group {group} found")
            offsets = _check_range(service, from_file.get(group, {}))
        else:
            offsets = prepare_reset(service, args, group, _partitions_to_reset(service, args, group))
        if args.execute and offsets:
            future = service.admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(
                group, [TopicPartition(t, p, o) for (t, p), o in offsets.items()])],
                request_timeout=service.timeout)[group]
            service._wait(future)
        plan[group] = offsets
    if args.export:
        print(export_csv(plan, single_group=len(args.group) == 1))
    else:
        print(reset_table(plan), end="")


def run_delete(service: Service) -> None:
    groups = service.group_ids()
    succeeded, failed = [], {}
    futures = service.admin.delete_consumer_groups(groups, request_timeout=service.timeout)
    for group, future in futures.items():
        try:
            service._wait(future)
            succeeded.append(group)
        except Exception as e:
            failed[group] = _exception_text(e)
    if not failed:
        print(f"Deletion of requested consumer groups ('{', '.join(succeeded)}') was successful.")
        return
    error("Deletion of some consumer groups failed:")
    for group, reason in failed.items():
        print(f"* Group '{group}' could not be deleted due to: {reason}")
    if succeeded:
        print(f"\nThese consumer groups were deleted successfully: '{', '.join(succeeded)}'")


# Kafka's exception class for the errors a group command meets, as its messages name them
_EXCEPTIONS = {
    "NON_EMPTY_GROUP": "org.apache.kafka.common.errors.GroupNotEmptyException: The group is not empty.",
    "GROUP_ID_NOT_FOUND": "org.apache.kafka.common.errors.GroupIdNotFoundException: "
                          "The group id does not exist.",
    "GROUP_AUTHORIZATION_FAILED": "org.apache.kafka.common.errors.GroupAuthorizationException: "
                                  "Group authorization failed.",
    "GROUP_SUBSCRIBED_TO_TOPIC": "org.apache.kafka.common.errors.GroupSubscribedToTopicException: "
                                 "The consumer group is actively subscribed to the topic",
    "UNKNOWN_TOPIC_OR_PARTITION": "org.apache.kafka.common.errors.UnknownTopicOrPartitionException: "
                                  "This server does not host this topic-partition.",
}


def _exception_text(e: Exception) -> str:
    err = e.args[0] if e.args else None
    name = err.name() if hasattr(err, "name") else ""
    return _EXCEPTIONS.get(name, str(err if err is not None else e))


def run_delete_offsets(service: Service, args: argparse.Namespace) -> None:
    """OffsetDelete to the group's coordinator (kafka-python's and confluent-kafka's admin
    clients have no call for it), then Kafka's table of each partition's result."""
    from protocol import messages as M
    from protocol.client import KafkaConnection
    from protocol.errors import Error
    from strom.acls import read_command_config

    group = args.group[0]
    topics = list(dict.fromkeys(args.topic))
    specs = [parse_topic_partitions(t) for t in topics]
    results: dict[tuple[str, int], str | None] = {}
    partitions: list[tuple[str, int]] = []
    whole_topics = [t for t, parts in specs if parts is None]
    metadata = service.admin.list_topics(timeout=service.timeout).topics
    for t in whole_topics:
        if t not in metadata or metadata[t].error is not None:
            results[(t, -1)] = _EXCEPTIONS["UNKNOWN_TOPIC_OR_PARTITION"]
        else:
            partitions += [(t, p) for p in sorted(metadata[t].partitions)]
    partitions += [(t, p) for t, parts in specs if parts is not None for p in parts]
    description = _described(service, [group])[group]
    if description is None:
        top = Error.GROUP_ID_NOT_FOUND
    else:
        c = description.coordinator
        R = M.OffsetDeleteRequest
        by_topic: dict[str, list[int]] = {}
        for t, p in partitions:
            by_topic.setdefault(t, []).append(p)
        request = R(group_id=group, topics=[R.OffsetDeleteRequestTopic(name=t, partitions=[
            R.OffsetDeleteRequestTopic.OffsetDeleteRequestPartition(partition_index=p) for p in ps])
            for t, ps in by_topic.items()])

        async def send() -> Any:
            conn = KafkaConnection(c.host, c.port, client_id="strom-consumer-groups",
                                   security=read_command_config(args.command_config))
            await conn.connect()
            try:
                return await conn.request(47, 0, request)
            finally:
                await conn.close()

        response = asyncio.run(send())
        top = Error(response.error_code)
        for t in response.topics:
            for p in t.partitions:
                code = Error(p.error_code)
                results[(t.name, p.partition_index)] = None if code == Error.NONE else _EXCEPTIONS.get(
                    code.name, code.name)
        if top == Error.NONE and any(v is not None for v in results.values()):
            top = next(Error[k] for k, v in _EXCEPTIONS.items() if v in results.values())
    if top == Error.NONE:
        print(f"Request succeed for deleting offsets with topic {', '.join(topics)} group {group}")
    elif top == Error.GROUP_ID_NOT_FOUND:
        error(f"'{group}' does not exist.")
    elif top == Error.INVALID_GROUP_ID:
        error(f"'{group}' is not valid.")
    elif top == Error.GROUP_AUTHORIZATION_FAILED:
        error(f"Access to '{group}' is not authorized.")
    elif top == Error.NON_EMPTY_GROUP:
        error(f"Deleting offsets of a consumer group '{group}' is forbidden if the group is not empty.")
    elif top in (Error.GROUP_SUBSCRIBED_TO_TOPIC, Error.TOPIC_AUTHORIZATION_FAILED,
                 Error.UNKNOWN_TOPIC_OR_PARTITION):
        error("Encounter some partition level error, see the follow-up details:")
    else:
        error(f"Encounter some unknown error: {top.name}")
    if top in (Error.GROUP_ID_NOT_FOUND, Error.NON_EMPTY_GROUP, Error.GROUP_AUTHORIZATION_FAILED):
        failure = _EXCEPTIONS.get(top.name, top.name)
        results.update({tp: failure for tp in partitions})
    out = f"\n{'TOPIC':<30} {'PARTITION':<15} {'STATUS':<15}"
    for (t, p), failure in sorted(results.items(), key=lambda kv: kv[0][0] + str(kv[0][1])):
        shown = str(p) if p >= 0 else "Not Provided"
        out += f"\n{t:<30} {shown:<15} {'Successful' if failure is None else 'Error: :' + failure:<15}"
    print(out)


def run(args: argparse.Namespace) -> int:
    try:
        action = check_args(args)
        service = Service(args)
        if action == "list":
            run_list(service, args)
        elif action == "describe":
            run_describe(service, args)
        elif action == "reset_offsets":
            run_reset(service, args)
        elif action == "delete":
            run_delete(service)
        else:
            run_delete_offsets(service, args)
    except UsageError as e:
        print(f"{e}", file=sys.stderr)
        print("Try 'strom consumer-groups --help' for the options.", file=sys.stderr)
        return 1
    return 0
