"""`strom features describe`: the features a broker supports and the cluster's finalized levels,
from ApiVersions (KIP-584), as kafka-features.sh describe prints them, one feature a line by
name:

    Feature: metadata.version<TAB>SupportedMinVersion: 3.0-IV1<TAB>SupportedMaxVersion: 4.0-IV3<TAB>
    FinalizedVersionLevel: 4.0-IV3<TAB>Epoch: 12      (one line, tab-separated)

metadata.version's levels read as Kafka's release names (3.0-IV1 is level 1); a feature with no
finalized level shows 0; ``Epoch`` is the finalized features' epoch, ``-`` when the broker has none.
"""
from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

from protocol import messages as M
from protocol.errors import Error
from strom.admin_client import API_VERSIONS, Admin, AdminError
from strom.kafka_errors import exception_text

HELP = "describe the cluster's features (like kafka-features)"
EXAMPLE = """example:
  strom features --bootstrap-server 127.0.0.1:9092 describe"""
METADATA_VERSION = "metadata.version"
# Kafka's MetadataVersion feature levels and their release names.
METADATA_VERSIONS = {
    1: "3.0-IV1", 2: "3.1-IV0", 3: "3.2-IV0", 4: "3.3-IV0", 5: "3.3-IV1", 6: "3.3-IV2", 7: "3.3-IV3",
    8: "3.4-IV0", 9: "3.5-IV0", 10: "3.5-IV1", 11: "3.5-IV2", 12: "3.6-IV0", 13: "3.6-IV1",
    14: "3.6-IV2", 15: "3.7-IV0", 16: "3.7-IV1", 17: "3.7-IV2", 18: "3.7-IV3", 19: "3.7-IV4",
    20: "3.8-IV0", 21: "3.9-IV0", 22: "4.0-IV0", 23: "4.0-IV1", 24: "4.0-IV2", 25: "4.0-IV3",
}


def add_parser(sub: Any) -> None:
    p = sub.add_parser("features", help=HELP, epilog=EXAMPLE, description=HELP,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT[,...]")
    p.add_argument("--command-config", metavar="FILE",
                   help="client properties to connect with (security.protocol, sasl.*, ssl.*)")
    actions = p.add_subparsers(dest="features_command", required=True)
    actions.add_parser("describe", help="describe the supported and finalized features",
                       epilog=EXAMPLE, formatter_class=argparse.RawDescriptionHelpFormatter)


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


def run(args: argparse.Namespace) -> int:
    from strom.acls import read_command_config

    security = read_command_config(args.command_config)

    async def go() -> Any:
        async with Admin(args.bootstrap_server, security, "features") as admin:
            body = M.ApiVersionsRequest(client_software_name="strom-features", client_software_version="1")
            return await admin.request(API_VERSIONS, 3, 4, body)

    try:
        answer = asyncio.run(go())
        if answer.error_code != Error.NONE:
            raise AdminError(exception_text(answer.error_code))
    except AdminError as e:
        print(e, file=sys.stderr)  # FeatureCommand.mainNoExit: the exception's message alone
        return 1
    text = format_features(answer)
    if text:
        print(text)
    return 0
