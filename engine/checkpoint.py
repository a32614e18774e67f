"""Kafka's small text files, byte-compatible with Apache Kafka.

Offset checkpoints (``replication-offset-checkpoint``, ``recovery-point-offset-checkpoint``,
``log-start-offset-checkpoint`` in each log dir root)::

    0                  version
    2                  number of entries
    orders 0 1042      "topic partition offset"
    orders 1 998

``meta.properties`` (Java properties; KRaft version 1)::

    node.id=1
    directory.id=<uuid>
    version=1
    cluster.id=<uuid>

``partition.metadata`` (in each partition directory)::

    version: 0
    topic_id: <uuid>

Uuids are Kafka's: 16 random bytes shown as URL-safe base64 without padding (22 chars).

Every write goes to ``<file>.tmp``, is fsynced, renamed over the file, and the directory
is fsynced, so a crash leaves either the old or the new file, never a torn one.

Reading trusts nothing: a file that is not valid UTF-8, has a bad version, a wrong entry
count or an unparsable line raises ValueError naming the file (and the line), as Kafka's
CheckpointFile raises; integers are Java's (ASCII digits with an optional sign, no "_").
None of these files carries a checksum (Kafka's do not either), so a flipped bit that still
parses is read as written.
"""
from __future__ import annotations

import base64
import os
import re
import uuid as _uuid

OFFSET_CHECKPOINT_VERSION = 0

_JAVA_INT = re.compile(r"[+-]?[0-9]+")


def java_int(text: str) -> int:
    """Integer.parseInt / Long.parseLong's syntax: Python's int() would also take "1_0",
    surrounding blanks and non-ASCII digits."""
    if not _JAVA_INT.fullmatch(text):
        raise ValueError(f"not an integer: {text!r}")
    return int(text)


def _read_text(path: str) -> str:
    """The file as UTF-8; FileNotFoundError passes through, undecodable bytes raise ValueError
    naming the file."""
    with open(path, "rb") as f:
        data = f.read()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(f"{path}: not UTF-8 text (byte {e.start})") from None


def write_atomically(path: str, data: bytes) -> None:
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_dir(os.path.dirname(path) or ".")


def fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_offset_checkpoint(path: str, offsets: dict[tuple[str, int], int]) -> None:
    lines = [str(OFFSET_CHECKPOINT_VERSION), str(len(offsets))]
    for (topic, partition), offset in sorted(offsets.items()):
        lines.append(f"{topic} {partition} {offset}")
    write_atomically(path, ("\n".join(lines) + "\n").encode())


def read_offset_checkpoint(path: str) -> dict[tuple[str, int], int]:
    """An absent file reads as empty; a malformed one raises ValueError naming file and line."""
    try:
        lines = _read_text(path).splitlines()
    except FileNotFoundError:
        return {}

    def bad(lineno: int, why: str) -> ValueError:
        return ValueError(f"{path}:{lineno}: malformed offset checkpoint: {why}")

    if len(lines) < 2:
        raise bad(len(lines) + 1, "missing version or count line")
    if lines[0].strip() != str(OFFSET_CHECKPOINT_VERSION):
        raise bad(1, f"unsupported version {lines[0]!r}")
    try:
        count = java_int(lines[1])
    except ValueError:
        raise bad(2, f"count is not an integer: {lines[1]!r}") from None
    entries = [line for line in lines[2:] if line.strip()]
    if count != len(entries):
        raise bad(2, f"count {count} but {len(entries)} entries")
    offsets: dict[tuple[str, int], int] = {}
    for lineno, line in enumerate(entries, start=3):
        parts = line.split()
        if len(parts) != 3:
            raise bad(lineno, f"expected 'topic partition offset', got {line!r}")
        try:
            offsets[(parts[0], java_int(parts[1]))] = java_int(parts[2])
        except ValueError:
            raise bad(lineno, f"partition and offset must be integers: {line!r}") from None
    return offsets


def new_uuid() -> str:
    """A random Kafka Uuid string, never one of Kafka's reserved values nor starting with '-'."""
    while True:
        raw = _uuid.uuid4().bytes
        if int.from_bytes(raw, "big") < 100:
            continue
        text = uuid_to_str(raw)
        if not text.startswith("-"):
            return text


def uuid_to_str(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def uuid_from_str(text: str) -> bytes:
    raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    if len(raw) != 16:
        raise ValueError(f"not a Kafka uuid: {text!r}")
    return raw


def read_properties(path: str) -> dict[str, str]:
    """Java .properties subset: key=value or key:value lines, '#'/'!' comments."""
    props: dict[str, str] = {}
    for line in _read_text(path).splitlines():
        line = line.strip()
        if not line or line[0] in "#!":
            continue
        sep = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
        if sep < 0:
            props[line] = ""
        else:
            props[line[:sep].strip()] = line[sep + 1:].strip()
    return props


def write_meta_properties(path: str, cluster_id: str, node_id: int, directory_id: str) -> None:
    text = (
        "#\n"
        f"node.id={node_id}\n"
        f"directory.id={directory_id}\n"
        "version=1\n"
        f"cluster.id={cluster_id}\n"
    )
    write_atomically(path, text.encode())


def write_partition_metadata(path: str, topic_id: str) -> None:
    write_atomically(path, f"version: 0\ntopic_id: {topic_id}\n".encode())


def read_partition_metadata(path: str) -> str | None:
    """The topic id, or None if the file is absent."""
    try:
        text = _read_text(path)
    except FileNotFoundError:
        return None
    lines = dict(
        (k.strip(), v.strip()) for k, _, v in (line.partition(":") for line in text.splitlines())
        if k.strip()
    )
    if lines.get("version") != "0":
        raise ValueError(f"{path}: malformed partition.metadata: version {lines.get('version')!r}, "
                         "expected 0")
    try:
        uuid_from_str(lines.get("topic_id", ""))
    except ValueError:
        raise ValueError(f"{path}: malformed partition.metadata: topic_id "
                         f"{lines.get('topic_id')!r} is not a Kafka uuid") from None
    return lines["topic_id"]
