"""`strom`: the command line.

    strom run [--port P] [--dir DIR]
        Format a one-node cluster (or reuse DIR) and run it on 127.0.0.1; prints the
        bootstrap address; Ctrl-C stops it.
    strom format --config FILE [--cluster-id ID] [--ignore-formatted]
                 [--standalone | --initial-controllers ID-UUID@HOST:PORT,... | --no-initial-controllers]
        Write meta.properties into the node's log dirs and, for a controller of a dynamic quorum
        (KIP-853), the metadata log's bootstrap checkpoint (see strom/quorum.py).
    strom cluster up [--controllers 3] [--brokers 3] [--dir DIR] [--port 9092] [--stop-timeout 30]
        Format (or reuse DIR) and run 3 controllers + 3 brokers as separate processes on
        127.0.0.1 under one supervisor (strom/cluster.py); prints bootstrap.servers and a status
        line per process as it changes; Ctrl-C stops the brokers, then the controllers.
    strom top --bootstrap-server HOST:PORT [--bootstrap-controller HOST:PORT] [--interval 1] [--once]
        A live view of a running cluster: quorum, brokers, partitions, consumer group lag (strom/top.py).
    strom start --config FILE
        Run the node's roles: a node with one role runs it in this process, a combined node
        (process.roles=broker,controller) runs each role as a process of its own.
    strom topics create|alter|list|describe|delete --bootstrap-server HOST:PORT [--topic T] ...
        Topic administration over the Kafka protocol.
    (topics, acls and quorum take --command-config FILE: the client properties, as Kafka's
    tools, to reach a secured listener: security.protocol, sasl.mechanism, sasl.jaas.config, ssl.*)
    strom acls --bootstrap-server HOST:PORT --add|--remove|--list [--topic T] [--group G] ...
        ACLs, with kafka-acls's options and output (strom/acls.py).
    strom configs --bootstrap-server HOST:PORT | --bootstrap-controller HOST:PORT --entity-type T
                  [--entity-name N | --entity-default]
                  --describe [--all] | --alter [--add-config K=V,...] [--delete-config K]
        Configs of topics, brokers, broker loggers, groups, users, clients and ips, as kafka-configs
        (strom/configs.py).
    strom quorum --bootstrap-controller HOST:PORT[,...] describe --status | --replication [--human-readable]
    strom quorum --bootstrap-controller HOST:PORT[,...] add-controller --config FILE [--dry-run]
    strom quorum --bootstrap-controller HOST:PORT[,...] remove-controller --controller-id N
                 --controller-uuid UUID [--dry-run]
        The KRaft quorum, like kafka-metadata-quorum (requests go to the quorum leader; with
        --bootstrap-server HOST:PORT a broker forwards them).
    strom cluster unregister --bootstrap-server HOST:PORT --id N
        Remove a stopped broker's registration, as kafka-cluster unregister (strom/cluster_tool.py).
    strom reassign-partitions --bootstrap-server HOST:PORT --generate|--execute|--verify|--cancel|--list ...
        Move partitions' replicas, with kafka-reassign-partitions's options and output (strom/reassign.py).
    strom leader-election --bootstrap-server HOST:PORT --election-type preferred|unclean ...
        Elect leaders, as kafka-leader-election.
    strom demo [--dir DIR] [--records N] [--record-size B]
        Write a partition log in Kafka's format, kill the writer with SIGKILL halfway
        through a second run, recover the log and read every record back.
    strom dump-log PATH... [--records] [--print-data-log] [--cluster-metadata-decoder]
        Print what a segment, metadata snapshot, index, producer snapshot or quorum-state file
        holds (or each such file of a directory), as kafka-dump-log (strom/dump_log.py).

Not in the help, not for users: ``strom controller|broker --config FILE`` runs one role in
this process; it is what ``strom start`` (for a combined node) and ``strom cluster up`` spawn.
The demo's killed writer is ``python -m strom.demo`` (strom/demo.py).
"""
from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
import tempfile
import time

from engine.errors import StorageError

# Kafka's smaller admin tools, each a module of strom/ with add_parser(sub) and run(args).
ADMIN_COMMANDS = {"log-dirs": "log_dirs", "delete-records": "delete_records", "get-offsets": "get_offsets",
                  "transactions": "transactions", "features": "features",
                  "consumer-groups": "consumer_groups"}
# What `strom --help` lists, in its order; WORKER_COMMANDS run too but are left out of it.
COMMANDS = ("run", "cluster", "top", "format", "start", "topics", "acls", "configs", "quorum",
            "reassign-partitions", "leader-election", *ADMIN_COMMANDS, "demo", "dump-log")
WORKER_COMMANDS = ("controller", "broker")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="strom", description="Strom: a Kafka-compatible streaming platform",
        # Room for the longest command's name before its help, on one line.
        formatter_class=lambda prog: argparse.HelpFormatter(prog, max_help_position=30),
    )
    sub = parser.add_subparsers(dest="command", required=True, title="commands",
                                metavar="{" + ",".join(COMMANDS) + "}")
    run = sub.add_parser("run", help="run a one-node cluster on 127.0.0.1",
                         epilog="examples:\n  strom run\n  strom run --port 19092 --dir /var/tmp/strom",
                         formatter_class=argparse.RawDescriptionHelpFormatter)
    run.add_argument("--port", type=int, default=9092)
    run.add_argument("--dir", help="data directory (default: a new temporary one)")
    from strom import cluster_tool

    cluster = sub.add_parser("cluster", help="run a cluster on 127.0.0.1, or unregister a node",
                             epilog="examples:\n  strom cluster up --controllers 3 --brokers 3\n"
                                    "  strom cluster unregister --bootstrap-server 127.0.0.1:9092 --id 4",
                             formatter_class=argparse.RawDescriptionHelpFormatter)
    cluster.add_argument("action", choices=["up", "unregister"])
    cluster_tool.add_arguments(cluster)
    cluster.add_argument("--controllers", type=int, metavar="N", help="controller processes (default 3)")
    cluster.add_argument("--brokers", type=int, metavar="N", help="broker processes (default 3)")
    cluster.add_argument("--dir", help="cluster directory, reused if it holds one (default: a new "
                                       "temporary one)")
    cluster.add_argument("--port", type=int, metavar="P",
                         help="first port: brokers on it and up, then the controllers (default 9092; "
                              "0: any free ports)")
    cluster.add_argument("--stop-timeout", type=float, default=30.0, metavar="SECONDS",
                         help="on Ctrl-C, how long each group (brokers, then controllers) has to "
                              "stop before it is killed (default 30)")
    from strom import top

    top.add_parser(sub)
    fmt = sub.add_parser("format", help="format the node's log directories",
                         epilog="examples:\n  strom format --config controller.properties --cluster-id "
                                "MkU3OEVBNTcwNTJENDM2Qk --standalone\n"
                                "  strom format --config broker.properties "
                                "--cluster-id MkU3OEVBNTcwNTJENDM2Qk",
                         formatter_class=argparse.RawDescriptionHelpFormatter)
    fmt.add_argument("--config", required=True)
    fmt.add_argument("--cluster-id")
    fmt.add_argument("--standalone", action="store_true",
                     help="this controller is the only voter of a new dynamic quorum (kraft.version 1)")
    fmt.add_argument("--initial-controllers", "--controller-quorum-voters", metavar="ID-UUID@HOST:PORT,...",
                     help="every voter of a new dynamic quorum with its directory id (also "
                          "ID@HOST:PORT:UUID); format each controller with the same list")
    fmt.add_argument("--no-initial-controllers", action="store_true",
                     help="bootstrap no voters: a static quorum from controller.quorum.voters, or "
                          "(without it) a controller that waits for `strom quorum add-controller`")
    fmt.add_argument("--ignore-formatted", action="store_true")
    fmt.add_argument("--add-scram", action="append", default=[], metavar="'MECHANISM=[name=N,password=P]'",
                     help="a SCRAM user of the new cluster (also iterations=, salt=); repeatable")
    start = sub.add_parser("start", help="run the node's roles (process.roles in --config)",
                           epilog="example:\n  strom start --config server.properties",
                           formatter_class=argparse.RawDescriptionHelpFormatter)
    start.add_argument("--config", required=True)
    # The processes `start` and `cluster up` spawn, one role each: not in the help (no help=).
    for role in WORKER_COMMANDS:
        worker = sub.add_parser(role, description=f"Run the node's {role} role in this process (what "
                                                  "`strom start` and `strom cluster up` spawn).")
        worker.add_argument("--config", required=True)
    from strom import topics

    topics.add_parser(sub)
    from strom import acls

    acls.add_parser(sub, listed=True)
    from strom import configs

    configs.add_parser(sub, listed=True)
    _add_quorum_parser(sub)
    from strom import reassign

    reassign.add_parsers(sub)
    for module in ADMIN_COMMANDS.values():
        importlib.import_module(f"strom.{module}").add_parser(sub)
    demo = sub.add_parser("demo", help="write, crash, recover and read back a partition log",
                          epilog="examples:\n  strom demo\n  strom demo --records 100000 --record-size 1024",
                          formatter_class=argparse.RawDescriptionHelpFormatter)
    demo.add_argument("--dir", help="log directory (default: a new temporary one)")
    demo.add_argument("--records", type=int, default=1_000_000)
    demo.add_argument("--record-size", type=int, default=100)
    importlib.import_module("strom.dump_log").add_parser(sub)
    return parser


# What a node creates (log dirs, segments, checkpoints, the metadata log) is its user's alone: Spark
# reads segment files directly, past the authorizer, so only that user may (docs/security.md).
DATA_UMASK = 0o077


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    os.umask(DATA_UMASK)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        if args.command == "run":
            return run_local(args.port, args.dir)
        if args.command == "cluster":
            if args.action == "unregister":
                from strom import cluster_tool

                return cluster_tool.run(args)
            from strom.cluster import cluster_up

            return cluster_up(args.dir, args.controllers, args.brokers, args.port, args.stop_timeout)
        if args.command == "top":
            from strom import top

            return top.run(args)
        if args.command == "format":
            from strom.config import read_config_file
            from strom.node import format_node

            config = read_config_file(args.config)
            done = format_node(config, args.cluster_id, args.standalone, args.ignore_formatted,
                               initial_controllers=args.initial_controllers,
                               no_initial_controllers=args.no_initial_controllers,
                               add_scram=args.add_scram)
            if not done.directories:
                print("All of the log directories are already formatted.")
                return 0
            print(f"Formatted {', '.join(done.directories)} for cluster {done.cluster_id}")
            if done.metadata_directory_id is not None:
                print(f"Metadata log dir {config.metadata_log_dir}: directory.id "
                      f"{done.metadata_directory_id}; {done.plan.describe()}")
            return 0
        if args.command in ("start", "controller", "broker"):
            from strom.config import read_config_file
            from strom.node import run_role, supervise

            config = read_config_file(args.config)
            if args.command == "start":
                roles = config.roles
                if len(roles) == 1:
                    return run_role(roles[0], config)
                return supervise(args.config, config)
            return run_role(args.command, config)
        if args.command == "topics":
            return run_topics(args)
        if args.command == "acls":
            from strom import acls

            return acls.run(args)
        if args.command == "configs":
            from strom import configs

            return configs.run(args)
        if args.command == "quorum":
            return run_quorum(args)
        if args.command in ("reassign-partitions", "leader-election"):
            from strom import reassign
            from strom.acls import read_command_config

            run = reassign.run_reassign if args.command == "reassign-partitions" else reassign.run_election
            return run(args, read_command_config(args.command_config))
        if args.command in ADMIN_COMMANDS:
            return importlib.import_module(f"strom.{ADMIN_COMMANDS[args.command]}").run(args)
        if args.command == "demo":
            from strom.demo import run_demo

            return run_demo(args.dir, args.records, args.record_size)
        if args.command == "dump-log":
            from strom import dump_log

            return dump_log.run(args)
    except KeyboardInterrupt:
        return 130
    except (OSError, ValueError, StorageError, RuntimeError) as e:
        print(f"strom: {e}", file=sys.stderr)
        return 1
    return 2


METRICS_PORT_OFFSET = 312  # strom run's metrics.listener: 9404 for the default 9092


def run_local(port: int, directory: str | None) -> int:
    """The main job: a one-node cluster on 127.0.0.1 (controller and broker processes)."""
    from strom.config import read_config_file
    from strom.node import format_node, supervise

    directory = directory or tempfile.mkdtemp(prefix="strom-")
    os.makedirs(directory, exist_ok=True)
    config_path = os.path.join(directory, "server.properties")
    if not os.path.exists(config_path):
        with open(config_path, "w") as f:
            f.write(
                "process.roles=broker,controller\n"
                "node.id=1\n"
                f"listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{port + 1}\n"
                f"advertised.listeners=PLAINTEXT://127.0.0.1:{port}\n"
                "controller.listener.names=CONTROLLER\n"
                f"controller.quorum.voters=1@127.0.0.1:{port + 1}\n"
                f"log.dirs={os.path.join(directory, 'data')}\n"
                "num.partitions=3\n"
                "offsets.topic.replication.factor=1\n"
                "group.initial.rebalance.delay.ms=0\n"
                # /metrics: the broker's here (9404 for 9092, the JMX exporter's usual port),
                # the controller's on the next port
                f"metrics.listener=http://127.0.0.1:{port + METRICS_PORT_OFFSET}\n"
            )
    config = read_config_file(config_path)
    format_node(config, None, True, ignore_formatted=True)
    print(f"Strom is starting: config {config_path}")
    for role in ("broker", "controller"):
        address = config.metrics_address(role)
        if address is not None:
            print(f"{role} metrics: http://{address[0] or '0.0.0.0'}:{address[1]}/metrics")
    print(f"bootstrap.servers=127.0.0.1:{port}  (Ctrl-C stops it)", flush=True)
    return supervise(config_path, config)


def _add_quorum_parser(sub) -> None:
    quorum = sub.add_parser(
        "quorum", help="describe the KRaft quorum, add or remove controllers",
        description="The KRaft metadata quorum (KIP-853), like kafka-metadata-quorum.",
        epilog="examples:\n  strom quorum --bootstrap-server 127.0.0.1:9092 describe --status\n"
               "  strom quorum --bootstrap-controller 127.0.0.1:9093 describe --replication",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    where = quorum.add_mutually_exclusive_group(required=True)
    where.add_argument("--bootstrap-controller", metavar="HOST:PORT[,...]",
                       help="controller addresses; requests go to the quorum leader")
    where.add_argument("--bootstrap-server", metavar="HOST:PORT[,...]",
                       help="broker addresses; a broker forwards the requests to the active controller")
    quorum.add_argument("--command-config", metavar="FILE",
                        help="client properties to connect with (security.protocol, sasl.*, ssl.*); "
                             "for add-controller also the new controller's configuration (as its --config)")
    actions = quorum.add_subparsers(dest="quorum_command", required=True)
    describe = actions.add_parser(
        "describe", help="describe the quorum",
        epilog="examples:\n  strom quorum --bootstrap-server 127.0.0.1:9092 describe --status\n"
               "  strom quorum --bootstrap-controller 127.0.0.1:9093 describe --replication --human-readable",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    what = describe.add_mutually_exclusive_group(required=True)
    what.add_argument("--status", action="store_true", help="a summary of the quorum")
    what.add_argument("--replication", action="store_true", help="the replication state of every replica")
    describe.add_argument("--human-readable", action="store_true",
                          help="with --replication: timestamps as 'N ms ago'")
    add = actions.add_parser(
        "add-controller", help="add a started, formatted controller to the voters",
        epilog="example:\n  strom quorum --bootstrap-controller 127.0.0.1:9093 add-controller "
               "--config controller-4.properties",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    add.add_argument("--config", metavar="FILE", help="the new controller's configuration file")
    add.add_argument("--dry-run", action="store_true", help="print what would be done, do nothing")
    remove = actions.add_parser(
        "remove-controller", help="remove a voter",
        epilog="example:\n  strom quorum --bootstrap-controller 127.0.0.1:9093 remove-controller "
               "--controller-id 4 --controller-uuid rpBYQu9KRhq8cnBrQvwaeQ",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    remove.add_argument("--controller-id", "-i", type=int, required=True)
    remove.add_argument("--controller-uuid", "--controller-directory-id", "-d", dest="controller_uuid",
                        metavar="UUID", required=True, help="the voter's directory id")
    remove.add_argument("--dry-run", action="store_true", help="print what would be done, do nothing")


def run_quorum(args) -> int:
    import asyncio

    from engine.errors import ConfigError
    from strom import quorum
    from strom.acls import read_command_config

    if args.bootstrap_controller is not None:
        addresses = quorum.parse_addresses("--bootstrap-controller", args.bootstrap_controller)
    else:
        addresses = quorum.parse_addresses("--bootstrap-server", args.bootstrap_server)
    security = read_command_config(args.command_config)
    if args.quorum_command == "describe":
        if args.human_readable and not args.replication:
            raise ConfigError("--human-readable", "only with describe --replication")
        now_ms = int(time.time() * 1000) if args.human_readable else None
        print(asyncio.run(quorum.describe(addresses, args.replication, now_ms, security)))
    elif args.quorum_command == "add-controller":
        path = args.config or args.command_config
        if path is None:
            raise ConfigError("--config", "add-controller needs the new controller's configuration file")
        controller = quorum.read_new_controller(path)
        if not args.dry_run:
            asyncio.run(quorum.add_controller(addresses, controller, security))
        print(quorum.format_added(controller, args.dry_run))
    else:
        if args.controller_id < 0:
            raise ConfigError("--controller-id", f"must be >= 0, got {args.controller_id}")
        directory_id = quorum.parse_directory_id("--controller-uuid", args.controller_uuid)
        if not args.dry_run:
            asyncio.run(quorum.remove_controller(addresses, args.controller_id, directory_id, security))
        print(quorum.format_removed(args.controller_id, directory_id, args.dry_run))
    return 0


def run_topics(args) -> int:
    from strom import topics

    return topics.run(args)
