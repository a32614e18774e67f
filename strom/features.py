"""`strom features`: the cluster's feature flags, as kafka-features.sh (Kafka's FeatureCommand)
manages them, with its commands, options and output.

``describe``: the features a broker supports and the cluster's finalized levels, from
ApiVersions (KIP-584), one feature a line by name:

    Feature: metadata.version<TAB>SupportedMinVersion: 3.0-IV1<TAB>SupportedMaxVersion: 4.0-IV3<TAB>
    FinalizedVersionLevel: 4.0-IV3<TAB>Epoch: 12      (one line, tab-separated)

metadata.version's levels read as Kafka's release names (3.0-IV1 is level 1); a feature with no
finalized level shows 0; ``Epoch`` is the finalized features' epoch, ``-`` when the broker has none.

``upgrade`` / ``downgrade`` (``--feature name=level``, repeated; ``--release-version`` for
metadata.version and every feature's level at that release; the deprecated ``--metadata``;
``--dry-run``; ``--unsafe`` for a downgrade) and ``disable`` (``--feature name``: level 0) send
UpdateFeatures (through a broker, which forwards it, or with ``--bootstrap-controller`` to the
active controller) and print one line per feature, by name: ``transaction.version was upgraded to
2.``, ``... can be upgraded to 2.`` for a dry run, ``Could not upgrade transaction.version to 3.
<the controller's reason>``; then, if any failed, ``1 out of 2 operation(s) failed.`` on stderr
and exit 1. ``version-mapping`` prints the levels a release version sets, ``feature-dependencies``
what a feature level needs; both answer without asking the cluster.
"""
from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

from protocol import messages as M
from protocol.errors import Error
from strom.admin_client import API_VERSIONS, Admin, AdminError
from strom.kafka_errors import exception_message, exception_text

HELP = "describe and change the cluster's feature flags (like kafka-features)"
EXAMPLE = """examples:
  strom features --bootstrap-server 127.0.0.1:9092 describe
  strom features --bootstrap-server 127.0.0.1:9092 upgrade --feature transaction.version=2
  strom features --bootstrap-server 127.0.0.1:9092 upgrade --release-version 4.0-IV3 --dry-run
  strom features --bootstrap-controller 127.0.0.1:9093 downgrade --feature transaction.version=1
  strom features --bootstrap-server 127.0.0.1:9092 disable --feature transaction.version
  strom features --bootstrap-server 127.0.0.1:9092 version-mapping --release-version 3.9-IV0
  strom features --bootstrap-server 127.0.0.1:9092 feature-dependencies \
      --feature eligible.leader.replicas.version=1"""
METADATA_VERSION = "metadata.version"
# Kafka's MetadataVersion feature levels and their release names.
METADATA_VERSIONS = {
    1: "3.0-IV1", 2: "3.1-IV0", 3: "3.2-IV0", 4: "3.3-IV0", 5: "3.3-IV1", 6: "3.3-IV2", 7: "3.3-IV3",
    8: "3.4-IV0", 9: "3.5-IV0", 10: "3.5-IV1", 11: "3.5-IV2", 12: "3.6-IV0", 13: "3.6-IV1",
    14: "3.6-IV2", 15: "3.7-IV0", 16: "3.7-IV1", 17: "3.7-IV2", 18: "3.7-IV3", 19: "3.7-IV4",
    20: "3.8-IV0", 21: "3.9-IV0", 22: "4.0-IV0", 23: "4.0-IV1", 24: "4.0-IV2", 25: "4.0-IV3",
}
MINIMUM_BOOTSTRAP_LEVEL = 4  # 3.3-IV0: the first with FeatureLevelRecord
LATEST_PRODUCTION_LEVEL = 25  # what a new Strom cluster starts at
# The features besides metadata.version that Strom finalizes, each with the metadata.version level
# from which a release sets each of its levels (Kafka's FeatureVersion.bootstrapMetadataVersion)
# and what each level depends on (KIP-1022).
FEATURES: dict[str, dict[int, int]] = {
    "transaction.version": {1: 24, 2: 24},
    "group.version": {1: 22},
    "eligible.leader.replicas.version": {1: 23},
}
DEPENDENCIES: dict[tuple[str, int], dict[str, int]] = {
    ("eligible.leader.replicas.version", 1): {METADATA_VERSION: 23},
}
UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE = 1, 2, 3
UPDATE_FEATURES = 57
NOT_CONTROLLER_ERRORS = (Error.NOT_CONTROLLER,)


class CommandError(Exception):
    """Printed as FeatureCommand prints a failure: the message alone, on stderr; exit 1."""


def add_parser(sub: Any) -> None:
    fmt = argparse.RawDescriptionHelpFormatter
    p = sub.add_parser("features", help=HELP, epilog=EXAMPLE, description=HELP, formatter_class=fmt)
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--bootstrap-server", metavar="HOST:PORT[,...]",
                       help="the brokers to connect to")
    where.add_argument("--bootstrap-controller", metavar="HOST:PORT[,...]",
                       help="the controllers to connect to (changes go to the active one)")
    p.add_argument("--command-config", metavar="FILE",
                   help="client properties to connect with (security.protocol, sasl.*, ssl.*)")
    actions = p.add_subparsers(dest="features_command", required=True)
    actions.add_parser("describe", help="describe the supported and finalized features",
                       epilog=EXAMPLE, formatter_class=fmt)
    for op, verb in (("upgrade", "upgrade"), ("downgrade", "downgrade")):
        a = actions.add_parser(op, help=f"{verb} one or more feature flags", epilog=EXAMPLE,
                               formatter_class=fmt)
        a.add_argument("--metadata", metavar="VERSION",
                       help=f"DEPRECATED -- the metadata.version to {verb} to, e.g. 3.3-IV3")
        a.add_argument("--release-version", metavar="VERSION",
                       help=f"the release version to {verb} every feature to, e.g. 3.9-IV0 "
                            "(see version-mapping)")
        a.add_argument("--feature", action="append", metavar="NAME=LEVEL",
                       help=f"a feature {verb}, e.g. metadata.version=5 (repeatable)")
        if op == "downgrade":
            a.add_argument("--unsafe", action="store_true",
                           help="downgrade even if it may irreversibly destroy metadata")
        a.add_argument("--dry-run", action="store_true", help=f"validate this {verb}, but do not perform it")
    d = actions.add_parser("disable", help="disable one or more feature flags (their level to 0)",
                           epilog=EXAMPLE, formatter_class=fmt)
    d.add_argument("--feature", action="append", metavar="NAME",
                   help="a feature flag to disable (repeatable)")
    d.add_argument("--unsafe", action="store_true",
                   help="disable it even if it may irreversibly destroy metadata")
    d.add_argument("--dry-run", action="store_true", help="perform a dry-run of this disable operation")
    v = actions.add_parser("version-mapping", help="the feature levels a release version sets",
                           epilog=EXAMPLE, formatter_class=fmt)
    v.add_argument("--release-version", metavar="VERSION",
                   help=f"the release version (the minimum is 3.0-IV1; the default is "
                        f"{METADATA_VERSIONS[LATEST_PRODUCTION_LEVEL]})")
    f = actions.add_parser("feature-dependencies", help="what a feature level depends on",
                           epilog=EXAMPLE, formatter_class=fmt)
    f.add_argument("--feature", action="append", required=True, metavar="NAME=LEVEL",
                   help="a feature and level, e.g. metadata.version=5 (repeatable)")


def level_text(feature: str, level: int) -> str:
    if feature == METADATA_VERSION:
        return METADATA_VERSIONS.get(level, f"UNKNOWN {level}")
    return str(level)


def format_features(answer: Any) -> str:
    finalized = {f.name: f.max_version_level for f in answer.finalized_features or []}
    epoch = answer.finalized_features_epoch
    lines = []
    for f in sorted(answer.supported_features or [], key=lambda f: f.name):
        lines.append(f"Feature: {f.name}\tSupportedMinVersion: {level_text(f.name, f.min_version)}\t"
                     f"SupportedMaxVersion: {level_text(f.name, f.max_version)}\t"
                     f"FinalizedVersionLevel: {level_text(f.name, finalized.get(f.name, 0))}\t"
                     f"Epoch: {epoch if epoch is not None and epoch >= 0 else '-'}")
    return "\n".join(lines)


# ---- release versions and feature levels (no cluster needed) -----------------------------------

def metadata_level(text: str) -> int:
    """MetadataVersion.fromVersionString: ``3.9-IV0``, or ``3.9`` for that release's last level;
    ValueError when no release has that name."""
    for level, name in sorted(METADATA_VERSIONS.items(), reverse=True):
        if text in (name, name.split("-")[0]):
            return level
    raise ValueError(text)


def release_level(text: str) -> int:
    """The metadata.version level a release name (``4.0-IV3``) stands for, one a cluster can run
    (at least 3.3-IV0); CommandError with FeatureCommand's message otherwise."""
    try:
        level = metadata_level(text)
        if level < MINIMUM_BOOTSTRAP_LEVEL:
            raise ValueError(text)
    except ValueError:
        raise CommandError(f"Unknown metadata.version {text}. Supported metadata.version are "
                           f"{supported_releases()}") from None
    return level


def supported_releases() -> str:
    levels = range(MINIMUM_BOOTSTRAP_LEVEL, LATEST_PRODUCTION_LEVEL + 1)
    return ", ".join(METADATA_VERSIONS[v] for v in levels)


def default_level(feature: str, mv: int) -> int:
    """The feature's level a release at metadata.version ``mv`` sets (Features.defaultValue)."""
    return max((level for level, since in FEATURES[feature].items() if mv >= since), default=0)


def version_mapping(release: str | None) -> list[str]:
    release = release or METADATA_VERSIONS[LATEST_PRODUCTION_LEVEL]
    try:
        mv = metadata_level(release)
    except ValueError:
        raise CommandError(f"Unknown release version '{release}'. Supported versions are: "
                           f"{METADATA_VERSIONS[MINIMUM_BOOTSTRAP_LEVEL]} to "
                           f"{METADATA_VERSIONS[LATEST_PRODUCTION_LEVEL]}") from None
    return [f"{METADATA_VERSION}={mv} ({release})"] + [f"{name}={default_level(name, mv)}"
                                                        for name in FEATURES]


def parse_name_and_level(text: str) -> tuple[str, int]:
    name, sep, level = text.partition("=")
    if not sep:
        raise CommandError(f"Can't parse feature=level string {text}: equals sign not found.")
    level = level.strip()
    try:
        value = int(level)
        if not -32768 <= value <= 32767:
            raise ValueError(level)
    except ValueError:
        raise CommandError(f"Can't parse feature=level string {text}: unable to parse {level} as a short.") \
            from None
    return name.strip(), value


def feature_dependencies(specs: list[str]) -> list[str]:
    lines = []
    for spec in specs:
        name, level = parse_name_and_level(spec)
        if name == METADATA_VERSION:
            if level not in METADATA_VERSIONS:
                raise CommandError(f"Unknown metadata.version {level}")
            lines.append(f"{name}={level} ({METADATA_VERSIONS[level]}) has no dependencies.")
            continue
        if name not in FEATURES:
            raise CommandError(f"Unknown feature: {name}")
        if level != 0 and level not in FEATURES[name]:
            raise CommandError(f"No feature:{name} with feature level {level}")
        needs = DEPENDENCIES.get((name, level), {})
        if not needs:
            lines.append(f"{name}={level} has no dependencies.")
            continue
        lines.append(f"{name}={level} requires:")
        for dep, dep_level in needs.items():
            shown = f" ({METADATA_VERSIONS[dep_level]})" if dep == METADATA_VERSION else ""
            lines.append(f"    {dep}={dep_level}{shown}")
    return lines


def planned_updates(args: argparse.Namespace, op: str) -> tuple[dict[str, tuple[int, int]], list[str]]:
    """The updates an upgrade, downgrade or disable asks for, {feature: (level, upgrade type)},
    and the lines printed before it is sent (FeatureCommand.handleUpgradeOrDowngrade)."""
    kind = UPGRADE if op == "upgrade" else (UNSAFE_DOWNGRADE if args.unsafe else SAFE_DOWNGRADE)
    updates: dict[str, tuple[int, int]] = {}
    notes: list[str] = []
    if op == "disable":
        for name in args.feature or []:
            if name in updates:
                raise CommandError(f"Feature {name} was specified more than once.")
            updates[name] = (0, kind)
        return updates, notes
    if args.release_version is not None and (args.metadata is not None or args.feature):
        raise CommandError("Can not specify `release-version` with other feature flags.")
    if args.release_version is not None:
        mv = release_level(args.release_version)
        updates[METADATA_VERSION] = (mv, kind)
        for name in FEATURES:
            level = default_level(name, mv)
            if kind != UPGRADE or level > 0:  # an upgrade never asks for level 0
                updates[name] = (level, kind)
        return updates, notes
    if args.metadata is not None:
        notes.append(" `metadata` flag is deprecated and may be removed in a future release.")
        updates[METADATA_VERSION] = (release_level(args.metadata), kind)
    for spec in args.feature or []:
        name, level = parse_name_and_level(spec)
        if name in updates:
            raise CommandError(f"Feature {name} was specified more than once.")
        updates[name] = (level, kind)
    return updates, notes


def report(op: str, updates: dict[str, tuple[int, int]], errors: dict[str, str | None],
           dry_run: bool) -> tuple[list[str], int]:
    """FeatureCommand.update's lines, by feature name, and the number that failed."""
    lines, failed = [], 0
    for name in sorted(updates):
        level = updates[name][0]
        error = errors.get(name)
        if error is not None:
            suffix = f"disable {name}" if op == "disable" else f"{op} {name} to {level}"
            lines.append(f"{'Can not ' if dry_run else 'Could not '}{suffix}. {error}")
            failed += 1
        else:
            done = "disabled." if op == "disable" else f"{op}d to {level}."
            lines.append(f"{name}{' can be ' if dry_run else ' was '}{done}")
    return lines, failed


def feature_errors(answer: Any, updates: dict[str, tuple[int, int]]) -> dict[str, str | None]:
    """Each feature's failure as Kafka's admin client reports it: the top-level error for
    every feature, else each result's; None for success."""
    if answer.error_code != Error.NONE:
        message = exception_message(answer.error_code, answer.error_message)
        return {name: message for name in updates}
    out: dict[str, str | None] = {name: None for name in updates}
    for r in answer.results or []:
        if r.error_code != Error.NONE:
            out[r.feature] = exception_message(r.error_code, r.error_message)
    return out


# ---- talking to the cluster --------------------------------------------------------------------

async def _send_update(admin: Admin, body: Any, controllers: bool) -> Any:
    """UpdateFeatures to any broker, or with --bootstrap-controller to the active controller
    (found with DescribeCluster when the first controller asked is not it)."""
    answer = await admin.request(UPDATE_FEATURES, 0, 2, body)
    if controllers and answer.error_code in NOT_CONTROLLER_ERRORS:
        cluster = await admin.request(60, 1, 1, M.DescribeClusterRequest(
            include_cluster_authorized_operations=False, endpoint_type=2))
        active = next((b for b in cluster.brokers if b.broker_id == cluster.controller_id), None)
        if active is not None:
            answer = await admin.request(UPDATE_FEATURES, 0, 2, body, address=(active.host, active.port))
    return answer


def run(args: argparse.Namespace) -> int:
    from strom.acls import read_command_config

    command = args.features_command
    try:
        if command == "version-mapping":
            print("\n".join(version_mapping(args.release_version)))
            return 0
        if command == "feature-dependencies":
            print("\n".join(feature_dependencies(args.feature)))
            return 0
        updates: dict[str, tuple[int, int]] = {}
        if command != "describe":
            updates, notes = planned_updates(args, command)
            for line in notes:
                print(line)
            if not updates:
                raise CommandError(f"You must specify at least one feature to {command}")
    except CommandError as e:
        print(e, file=sys.stderr)
        return 1
    security = read_command_config(args.command_config)
    controllers = args.bootstrap_controller is not None
    bootstrap = args.bootstrap_controller if controllers else args.bootstrap_server

    async def go() -> Any:
        async with Admin(bootstrap, security, "features") as admin:
            if command == "describe":
                return await admin.request(API_VERSIONS, 3, 4, M.ApiVersionsRequest(
                    client_software_name="strom-features", client_software_version="1"))
            R = M.UpdateFeaturesRequest
            body = R(feature_updates=[R.FeatureUpdateKey(feature=name, max_version_level=level,
                                                         upgrade_type=kind, allow_downgrade=kind != UPGRADE)
                                      for name, (level, kind) in updates.items()],
                     validate_only=bool(args.dry_run))
            return await _send_update(admin, body, controllers)

    try:
        answer = asyncio.run(go())
        if command == "describe" and answer.error_code != Error.NONE:
            raise AdminError(exception_text(answer.error_code))
    except (AdminError, OSError) as e:
        print(e, file=sys.stderr)  # FeatureCommand.mainNoExit: the exception's message alone
        return 1
    if command == "describe":
        text = format_features(answer)
        if text:
            print(text)
        return 0
    lines, failed = report(command, updates, feature_errors(answer, updates), bool(args.dry_run))
    print("\n".join(lines))
    if failed:
        print(f"{failed} out of {len(updates)} operation(s) failed.", file=sys.stderr)
        return 1
    return 0
