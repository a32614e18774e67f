"""`strom transactions`: list, describe and abort transactions, as kafka-transactions.sh does,
with its subcommands, options and tables (each cell padded to its column, then a tab).

    strom transactions --bootstrap-server HOST:PORT list
    strom transactions --bootstrap-server HOST:PORT describe --transactional-id T
    strom transactions --bootstrap-server HOST:PORT describe-producers --topic T --partition P
    strom transactions --bootstrap-server HOST:PORT find-hanging --broker-id B
    strom transactions --bootstrap-server HOST:PORT abort --topic T --partition P --start-offset O

``list`` asks every broker (each coordinates some transactional ids), ``describe`` the id's
coordinator (FindCoordinator), ``describe-producers`` the partition's leader (or ``--broker-id``).
``find-hanging`` looks at every partition a broker leads (or ``--topic``/``--partition``) for an
open transaction older than ``--max-transaction-timeout`` minutes (default 15) whose coordinator
does not know it as ongoing with that partition. ``abort`` finds the producer whose open
transaction starts at ``--start-offset`` (DescribeProducers) and writes its abort marker with
WriteTxnMarkers to the partition's leader, as Kafka's admin abortTransaction does.
"""
from __future__ import annotations

import argparse
import asyncio
import sys
import time
from typing import Any

from protocol import messages as M
from protocol.errors import Error
from strom.admin_client import Admin, AdminError, pretty_table
from strom.kafka_errors import exception_message

FIND_COORDINATOR, WRITE_TXN_MARKERS = 10, 27
DESCRIBE_PRODUCERS, DESCRIBE_TRANSACTIONS, LIST_TRANSACTIONS = 61, 65, 66
TRANSACTION_KEY = 1
HELP = "list, describe, find hanging and abort transactions (like kafka-transactions)"
EXAMPLE = """examples:
  strom transactions --bootstrap-server 127.0.0.1:9092 list
  strom transactions --bootstrap-server 127.0.0.1:9092 describe --transactional-id payments
  strom transactions --bootstrap-server 127.0.0.1:9092 abort --topic orders --partition 0 --start-offset 42"""
# Each action's own --help: an example of it.
ACTION_EXAMPLES = {
    "list": "list --duration-filter 60000",
    "describe": "describe --transactional-id payments",
    "describe-producers": "describe-producers --topic orders --partition 0",
    "find-hanging": "find-hanging --broker-id 1 --max-transaction-timeout 15",
    "abort": "abort --topic orders --partition 0 --start-offset 42",
}

LIST_HEADERS = ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]
DESCRIBE_HEADERS = ["CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState",
                    "TransactionTimeoutMs", "CurrentTransactionStartTimeMs", "TransactionDurationMs",
                    "TopicPartitions"]
PRODUCERS_HEADERS = ["ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence",
                     "LastTimestamp", "CurrentTransactionStartOffset"]
HANGING_HEADERS = ["Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch", "StartOffset",
                   "LastTimestamp", "Duration(min)"]
DEFAULT_MAX_TRANSACTION_TIMEOUT_MIN = 15


class UsageError(ValueError):
    pass


def add_parser(sub: Any) -> None:
    p = sub.add_parser("transactions", help=HELP, epilog=EXAMPLE, description=HELP,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT[,...]")
    p.add_argument("--command-config", metavar="FILE",
                   help="client properties to connect with (security.protocol, sasl.*, ssl.*)")
    actions = p.add_subparsers(dest="transactions_command", required=True)

    def action(name: str, help: str) -> Any:
        return actions.add_parser(name, help=help, formatter_class=argparse.RawDescriptionHelpFormatter,
                                  epilog="example:\n  strom transactions --bootstrap-server 127.0.0.1:9092 "
                                         + ACTION_EXAMPLES[name])

    ls = action("list", help="list transactions")
    ls.add_argument("--duration-filter", type=int, metavar="MS",
                    help="only transactions running longer than this (ms); < 0: all")
    d = action("describe", help="describe the state of an active transactional-id")
    d.add_argument("--transactional-id", required=True)
    dp = action("describe-producers", help="describe the states of active producers for a topic partition")
    dp.add_argument("--broker-id", type=int, help="the broker to ask (default: the partition's leader)")
    dp.add_argument("--topic", required=True)
    dp.add_argument("--partition", type=int, required=True)
    fh = action("find-hanging", help="find hanging transactions")
    fh.add_argument("--broker-id", type=int, help="the broker whose partitions to look at")
    fh.add_argument("--max-transaction-timeout", type=int, default=DEFAULT_MAX_TRANSACTION_TIMEOUT_MIN,
                    metavar="MINUTES", help="the largest transaction.max.timeout.ms, in minutes (default 15)")
    fh.add_argument("--topic")
    fh.add_argument("--partition", type=int)
    ab = action("abort", help="abort a hanging transaction (requires administrative privileges)")
    ab.add_argument("--topic", required=True)
    ab.add_argument("--partition", type=int, required=True)
    ab.add_argument("--start-offset", type=int, required=True,
                    help="the offset of the first message of the transaction to abort")


# ---- the requests ----------------------------------------------------------------------------

async def list_transactions(admin: Admin, duration_ms: int | None) -> list[list[str]]:
    await admin.metadata([])
    rows = []
    for broker in sorted(admin.brokers):
        body = M.ListTransactionsRequest(state_filters=[], producer_id_filters=[],
                                         duration_filter=-1 if duration_ms is None else duration_ms)
        answer = await admin.request(LIST_TRANSACTIONS, 0 if duration_ms is None else 1, 1, body, node=broker)
        if answer.error_code != Error.NONE:
            raise failure("Failed to list transactions", answer.error_code)
        for t in answer.transaction_states:
            rows.append([t.transactional_id, str(broker), str(t.producer_id),
                         _state_name(t.transaction_state)])
    return rows


async def find_coordinator(admin: Admin, transactional_id: str) -> int:
    body = M.FindCoordinatorRequest(key=transactional_id, key_type=TRANSACTION_KEY,
                                    coordinator_keys=[transactional_id])
    answer = await admin.request(FIND_COORDINATOR, 1, 4, body)
    if answer.coordinators:
        c = answer.coordinators[0]
        code, node = c.error_code, c.node_id
    else:
        code, node = answer.error_code, answer.node_id
    if code != Error.NONE:
        raise failure(f"Failed to describe transaction state of transactional-id `{transactional_id}`", code)
    return node


async def describe_transaction(admin: Admin, transactional_id: str, now_ms: int) -> list[str]:
    coordinator = await find_coordinator(admin, transactional_id)
    answer = await admin.request(DESCRIBE_TRANSACTIONS, 0, 0,
                                 M.DescribeTransactionsRequest(transactional_ids=[transactional_id]),
                                 node=coordinator)
    s = answer.transaction_states[0]
    if s.error_code != Error.NONE:
        raise failure(f"Failed to describe transaction state of transactional-id `{transactional_id}`",
                      s.error_code)
    started = s.transaction_start_time_ms
    partitions = ",".join(f"{t.topic}-{p}" for t in s.topics for p in t.partitions)
    return [str(coordinator), transactional_id, str(s.producer_id), str(s.producer_epoch),
            _state_name(s.transaction_state), str(s.transaction_timeout_ms),
            str(started) if started >= 0 else "None", str(now_ms - started) if started >= 0 else "None",
            partitions]


def failure(what: str, code: int, message: str | None = None) -> AdminError:
    """TransactionsCommand.printErrorAndExit(message, cause): what failed, the cause's message,
    and Kafka's note on debug logging."""
    return AdminError(f"{what}: {exception_message(code, message)}. "
                      "Enable debug logging for additional detail.")


def _state_name(state: str) -> str:
    """Kafka's admin TransactionState.toString: the protocol's name, Unknown for another."""
    known = ("Ongoing", "PrepareAbort", "PrepareCommit", "CompleteAbort", "CompleteCommit", "Empty",
             "PrepareEpochFence")
    return state if state in known else "Unknown"


async def describe_producers(admin: Admin, topic: str, partition: int, broker: int | None,
                             what: str | None = None) -> list[Any]:
    """The partition's active producers; ``what`` heads the error (DescribeProducersCommand's
    'Failed to describe producers for partition T-P on broker N|leader' by default)."""
    what = what or (f"Failed to describe producers for partition {topic}-{partition} on "
                    f"{'leader' if broker is None else f'broker {broker}'}")
    if broker is None:
        leaders = await admin.leaders([topic])
        if (topic, partition) not in leaders:
            raise failure(what, Error.UNKNOWN_TOPIC_OR_PARTITION)
        broker = leaders[(topic, partition)]
    body = M.DescribeProducersRequest(topics=[M.DescribeProducersRequest.TopicRequest(
        name=topic, partition_indexes=[partition])])
    answer = await admin.request(DESCRIBE_PRODUCERS, 0, 0, body, node=broker)
    p = answer.topics[0].partitions[0]
    if p.error_code != Error.NONE:
        raise failure(what, p.error_code)
    return list(p.active_producers)


def producer_rows(producers: list[Any]) -> list[list[str]]:
    return [[str(s.producer_id), str(s.producer_epoch), str(s.coordinator_epoch), str(s.last_sequence),
             str(s.last_timestamp),
             str(s.current_txn_start_offset) if s.current_txn_start_offset >= 0 else "None"]
            for s in producers]


async def abort(admin: Admin, topic: str, partition: int, start_offset: int) -> None:
    what = f"Failed to validate producer state for partition {topic}-{partition}"
    producers = await describe_producers(admin, topic, partition, None, what)
    match = [s for s in producers if s.current_txn_start_offset == start_offset]
    if not match:
        raise AdminError(f"Could not find any open transactions starting at offset {start_offset} on "
                         f"partition {topic}-{partition}")
    s = match[0]
    leader = (await admin.leaders([topic]))[(topic, partition)]
    T = M.WriteTxnMarkersRequest.WritableTxnMarker
    body = M.WriteTxnMarkersRequest(markers=[T(
        producer_id=s.producer_id, producer_epoch=s.producer_epoch, transaction_result=False,
        coordinator_epoch=s.coordinator_epoch,
        topics=[T.WritableTxnMarkerTopic(name=topic, partition_indexes=[partition])])])
    answer = await admin.request(WRITE_TXN_MARKERS, 0, 1, body, node=leader)
    for m in answer.markers:
        for t in m.topics:
            for p in t.partitions:
                if p.error_code != Error.NONE:
                    spec = (f"AbortTransactionSpec(topicPartition={topic}-{partition}, producerId="
                            f"{s.producer_id}, producerEpoch={s.producer_epoch}, coordinatorEpoch="
                            f"{max(s.coordinator_epoch, 0)})")
                    raise failure(f"Failed to abort transaction {spec}", p.error_code)


async def find_hanging(admin: Admin, args: argparse.Namespace, now_ms: int) -> list[list[str]]:
    if args.broker_id is None and args.topic is None:
        raise UsageError("The `find-hanging` command requires either --topic or --broker-id to limit the "
                         "scope of the search")
    if args.partition is not None and args.topic is None:
        raise UsageError("The --partition argument requires --topic to be provided")
    answer = await admin.metadata(None if args.topic is None else [args.topic])
    partitions = []
    for t in answer.topics:
        if t.error_code != Error.NONE:
            raise failure("Failed to describe 1 topics", t.error_code)
        for p in t.partitions:
            if args.partition is not None and p.partition_index != args.partition:
                continue
            if args.broker_id is not None and args.broker_id not in p.replica_nodes:
                continue
            partitions.append((t.name, p.partition_index, p.leader_id))
    limit_ms = args.max_transaction_timeout * 60_000
    rows = []
    for topic, partition, leader in sorted(partitions):
        broker = args.broker_id if args.broker_id is not None else leader
        for s in await describe_producers(admin, topic, partition, broker):
            if s.current_txn_start_offset < 0 or now_ms - s.last_timestamp <= limit_ms:
                continue
            if await _coordinator_knows(admin, s.producer_id, s.producer_epoch, topic, partition):
                continue
            rows.append([topic, str(partition), str(s.producer_id), str(s.producer_epoch),
                         str(s.coordinator_epoch), str(s.current_txn_start_offset), str(s.last_timestamp),
                         str((now_ms - s.last_timestamp) // 60_000)])
    return rows


async def _coordinator_knows(admin: Admin, producer_id: int, epoch: int, topic: str, partition: int) -> bool:
    """Whether some coordinator has the producer's transaction ongoing with the partition: if so
    it is not hanging (Kafka's tool asks the same)."""
    await admin.metadata([])
    for broker in sorted(admin.brokers):
        body = M.ListTransactionsRequest(state_filters=[], producer_id_filters=[producer_id],
                                         duration_filter=-1)
        listed = await admin.request(LIST_TRANSACTIONS, 0, 1, body, node=broker)
        for t in listed.transaction_states:
            answer = await admin.request(DESCRIBE_TRANSACTIONS, 0, 0,
                                         M.DescribeTransactionsRequest(transactional_ids=[t.transactional_id]),
                                         node=broker)
            for s in answer.transaction_states:
                if (s.error_code == Error.NONE and s.producer_id == producer_id and s.producer_epoch == epoch
                        and s.transaction_state == "Ongoing"
                        and any(d.topic == topic and partition in d.partitions for d in s.topics)):
                    return True
    return False


def run(args: argparse.Namespace) -> int:
    from strom.acls import read_command_config

    security = read_command_config(args.command_config)
    command = args.transactions_command

    async def go() -> str | None:
        now_ms = int(time.time() * 1000)
        async with Admin(args.bootstrap_server, security, "transactions") as admin:
            if command == "list":
                return pretty_table(LIST_HEADERS, await list_transactions(admin, args.duration_filter))
            if command == "describe":
                row = await describe_transaction(admin, args.transactional_id, now_ms)
                return pretty_table(DESCRIBE_HEADERS, [row])
            if command == "describe-producers":
                producers = await describe_producers(admin, args.topic, args.partition, args.broker_id)
                return pretty_table(PRODUCERS_HEADERS, producer_rows(producers))
            if command == "find-hanging":
                return pretty_table(HANGING_HEADERS, await find_hanging(admin, args, now_ms))
            await abort(admin, args.topic, args.partition, args.start_offset)
            return None

    try:
        text = asyncio.run(go())
    except (UsageError, AdminError) as e:
        print(e, file=sys.stderr)
        return 1
    if text is not None:
        print(text)
    return 0
