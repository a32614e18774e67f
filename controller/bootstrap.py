"""The bootstrap metadata: records ``strom format`` puts in a controller's metadata log dir for
the new cluster's first active controller to commit, as Kafka's BootstrapDirectory
(``<metadata.log.dir>/bootstrap.checkpoint``, a snapshot file: header, the metadata records,
footer). The active controller of a new cluster (no metadata.version finalized yet) commits
them in the batch with its bootstrap features, so they are in the log before any request is
decided; a cluster formatted without the file bootstraps the features alone.

What it holds today: the SCRAM credentials of ``--add-scram`` (kafka-storage format's option):

    --add-scram 'SCRAM-SHA-256=[name=alice,password=alice-secret]'
    --add-scram 'SCRAM-SHA-512=[name=bob,password=bob-secret,iterations=8192,salt="c2FsdA=="]'

name is required; password or saltedpassword (base64, with salt) one of them; salt (base64)
random by default; iterations 4096 by default, within the mechanism's 4096-16384. A value
may be double-quoted. Each argument makes one UserScramCredentialRecord: the users exist from
the cluster's first start, and the password itself is written nowhere.
"""
from __future__ import annotations

import base64
import binascii
import os
from typing import Any

from metadata.scram import (
    DEFAULT_ITERATIONS,
    MAX_ITERATIONS,
    MIN_ITERATIONS,
    salted_password,
    stored_and_server_key,
)
from metadata.security import SCRAM_MECHANISMS
from protocol import messages as M
from protocol.metadata_records import decode_record, encode_record
from raft.engine_log import build_snapshot, parse_snapshot
from raft.log import OffsetAndEpoch, Snapshot

BOOTSTRAP_FILE = "bootstrap.checkpoint"
SALT_BYTES = 32  # the size of the random salt Kafka's ScramFormatter draws (secureRandomBytes)
_MECHANISM_CODES = {name: code for code, name in SCRAM_MECHANISMS.items()}


class FormatError(ValueError):
    """An --add-scram argument kafka-storage would refuse; the message is its FormatterException's."""


def _unquoted(value: str) -> str:
    return value[1:-1] if len(value) >= 2 and value.startswith('"') and value.endswith('"') else value


def _base64(value: str, what: str) -> bytes:
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise FormatError(f"Failed to decode given {what}: {value}") from None


def scram_record(argument: str, random_bytes=os.urandom) -> Any:
    """One ``MECHANISM=[name=...,password=...]`` argument as a UserScramCredentialRecord."""
    argument = argument.strip()
    mechanism_name, sep, config = argument.partition("=")
    if not sep:
        raise FormatError(f"Failed to find equals sign in SCRAM argument '{argument}'")
    mechanism = _MECHANISM_CODES.get(mechanism_name)
    if mechanism is None:
        raise FormatError(f"The add-scram mechanism {mechanism_name} is not supported.")
    if not config.startswith("["):
        raise FormatError("Expected configuration string to start with [")
    if not config.endswith("]"):
        raise FormatError("Expected configuration string to end with ]")
    components: dict[str, str] = {}
    for component in config[1:-1].split(","):
        key, sep, value = component.partition("=")
        if not sep:
            raise FormatError(f"No equals sign found in SCRAM component: {component}")
        components[key] = _unquoted(value)
    name = components.pop("name", None)
    if name is None:
        raise FormatError("You must supply 'name' to add-scram")
    salt_text = components.pop("salt", None)
    salt = _base64(salt_text, "salt") if salt_text is not None else None
    iterations_text = components.pop("iterations", None)
    try:
        iterations = int(iterations_text) if iterations_text is not None else DEFAULT_ITERATIONS
    except ValueError:
        raise FormatError(f"Failed to parse iterations count: {iterations_text}") from None
    password = components.pop("password", None)
    salted_text = components.pop("saltedpassword", None)
    if password is None and salted_text is None:
        raise FormatError("You must supply one of 'password' or 'saltedpassword' to add-scram")
    if password is None and salt is None:
        raise FormatError("You must supply 'salt' with 'saltedpassword' to add-scram")
    if components:
        raise FormatError(f"Unknown SCRAM configurations: {', '.join(sorted(components))}")
    using = f"for add-scram using {mechanism_name.replace('-', '_')}"
    if iterations < MIN_ITERATIONS:
        raise FormatError(f"The 'iterations' value must be >= {MIN_ITERATIONS} {using}")
    if iterations > MAX_ITERATIONS:
        raise FormatError(f"The 'iterations' value must be <= {MAX_ITERATIONS} {using}")
    if salt is None:
        salt = random_bytes(SALT_BYTES)
    if password is not None:
        salted = salted_password(mechanism, password, salt, iterations)
    else:
        salted = _base64(salted_text or "", "saltedPassword")
    stored_key, server_key = stored_and_server_key(mechanism, salted)
    return M.UserScramCredentialRecord(name=name, mechanism=mechanism, salt=salt, stored_key=stored_key,
                                       server_key=server_key, iterations=iterations)


def write_bootstrap_records(metadata_dir: str, records: list[Any]) -> str:
    """Write ``bootstrap.checkpoint`` into the metadata log dir; returns its path."""
    path = os.path.join(metadata_dir, BOOTSTRAP_FILE)
    os.makedirs(metadata_dir, exist_ok=True)
    snapshot = Snapshot(OffsetAndEpoch(0, 0), 0, None, [encode_record(r) for r in records])
    part = path + ".part"
    with open(part, "wb") as f:
        f.write(build_snapshot(snapshot, 0, 0))
        f.flush()
        os.fsync(f.fileno())
    os.replace(part, path)
    return path


def read_bootstrap_records(metadata_dir: str) -> list[Any]:
    """The records of the metadata log dir's ``bootstrap.checkpoint``; none without one."""
    path = os.path.join(metadata_dir, BOOTSTRAP_FILE)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return []
    return [decode_record(v)[2] for v in parse_snapshot(OffsetAndEpoch(0, 0), data, path).values]
