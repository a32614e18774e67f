"""kcat driver: Debian's ``kcat`` binary (1.7.1 on librdkafka 2.0.2), one process per
call, bounded by ``timeout``. Every codec (``-z``). Admin: describe only (``-L -J``);
kcat cannot create, delete or configure topics.

Produce: one ``kcat -P`` per run of messages sharing headers and partition (``-H``
applies to every message of a call); lines are ``key<US>value`` with US = 0x1f as the
``-K`` delimiter, so keys and values must be text without newlines or 0x1f. A line
without the delimiter has a NULL key. Consume: ``-C -J -e`` (assign) or ``-G`` (group),
JSON one record a line.

Group member: ``kcat -G group topic`` (verbosity 1) runs until SIGTERM, when it closes
the consumer (LeaveGroup) and exits 0. Its rebalance callback prints to stderr, for the
eager assignors it uses here:

    % Group G rebalanced (memberid M): assigned: T [0], T [1], T [2]
    % Group G rebalanced (memberid M): revoked: T [0], T [1], T [2]

(an empty list after "assigned: " when it gets nothing).
"""
from __future__ import annotations

import itertools
import json
import re
import shutil
import subprocess

from . import Deadline, ProcessMember, Record, acks_value, messages_of, placement, short
from .security import kcat_options

NAME = "kcat"
CODECS = frozenset({"none", "gzip", "snappy", "lz4", "zstd"})
ADMIN = frozenset({"describe_topic"})
ASSIGN_IS_REAL = True
BINARY = shutil.which("kcat") or shutil.which("kafkacat")
AVAILABLE = BINARY is not None
KEY_DELIMITER = "\x1f"
# kcat prints every error librdkafka reports as "% ERROR: ..."; this one says a connection to
# one broker failed (a stopped broker still in the bootstrap list), which librdkafka retries
# while it works through the others. Every other "% ERROR" line, a failed delivery and a
# non-zero exit code (all brokers down) still fail the call.
TRANSPORT_FAILURE = "Local: Broker transport failure"
BASE = ["-X", "broker.address.family=v4", "-X", "socket.timeout.ms=10000", "-X", "log_level=3"]


def _secured(security) -> list[str]:
    """The ``-X`` options of a secured listener's ``security`` (clients/security.py), or none."""
    return [] if security is None else kcat_options(security)


def _run(args, timeout, stdin=b""):
    if BINARY is None:
        raise RuntimeError("kcat is not installed (make setup installs it)")
    try:
        proc = subprocess.run([BINARY, *args], input=stdin, capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        raise TimeoutError(f"kcat {' '.join(args)} ran over {timeout} s; "
                           f"stderr: {(e.stderr or b'').decode(errors='replace')[-2000:]}") from None
    stderr = proc.stderr.decode(errors="replace")
    errors = [line for line in stderr.splitlines() if "% ERROR" in line and TRANSPORT_FAILURE not in line]
    if proc.returncode != 0 or "Delivery failed" in stderr or errors:
        raise RuntimeError(f"kcat {' '.join(args)} exited {proc.returncode}: {stderr[-2000:]}")
    return proc.stdout


def _line(key: bytes | None, value: bytes | None) -> bytes:
    value = value or b""
    if b"\n" in value or b"\x1f" in value or (key and (b"\n" in key or b"\x1f" in key)):
        raise ValueError("kcat carries one message a line: no newlines or 0x1f in keys/values")
    if key is None:
        return value + b"\n"
    return key + KEY_DELIMITER.encode() + value + b"\n"


def produce(bootstrap, topic, messages, acks="all", compression="none", idempotent=False,
            timeout=30.0, security=None):
    deadline = Deadline(timeout)
    props = [*_secured(security), "-X", f"acks={acks_value(acks)}",
             "-X", f"message.timeout.ms={int(timeout * 1000)}", "-X", "linger.ms=5"]
    if idempotent:
        props += ["-X", "enable.idempotence=true"]
    groups = itertools.groupby(messages_of(messages), key=lambda m: (tuple(m.headers), m.partition))
    for (headers, partition), run in groups:
        args = ["-P", "-b", bootstrap, "-t", topic, "-K", KEY_DELIMITER, "-z", compression, *BASE, *props]
        for name, value in headers:
            args += ["-H", f"{name}={value.decode()}"]
        if partition is not None:
            args += ["-p", str(partition)]
        _run(args, max(1.0, deadline.left()), b"".join(_line(m.key, m.value) for m in run))


def _text(value):
    return None if value is None else value.encode()


def _records(stdout: bytes) -> list[Record]:
    records = []
    for line in stdout.splitlines():
        if not line.strip():
            continue
        j = json.loads(line)
        flat = j.get("headers") or []
        headers = [(flat[i], _text(flat[i + 1]) or b"") for i in range(0, len(flat), 2)]
        records.append(Record(j["partition"], j["offset"], _text(j.get("key")),
                              _text(j.get("payload")), headers))
    return records


def consume_assign(bootstrap, topic, partitions, count, timeout=30.0, security=None):
    deadline, records = Deadline(timeout), []
    while True:
        records = []
        for p in partitions:
            records += _records(_run(["-C", "-b", bootstrap, "-t", topic, "-p", str(p), "-o", "beginning",
                                      "-e", "-J", "-q", *BASE, *_secured(security)],
                                     max(1.0, deadline.left())))
        if len(records) >= count or deadline.left() < 1.0:
            break
    if len(records) < count:
        raise short(records, count)
    return records


def consume_group(bootstrap, topic, group, count, timeout=30.0, commit=True):
    args = ["-b", bootstrap, "-G", group, "-J", "-q", "-c", str(count), *BASE,
            "-X", "auto.offset.reset=earliest", "-X", f"enable.auto.commit={str(commit).lower()}",
            "-X", "session.timeout.ms=6000", "-X", "heartbeat.interval.ms=500", topic]
    records = _records(_run(args, timeout))
    if len(records) < count:
        raise short(records, count)
    return records


def _metadata(bootstrap, topic, timeout):
    md = json.loads(_run(["-L", "-J", "-b", bootstrap, "-t", topic, *BASE], timeout))
    (t,) = [t for t in md["topics"] if t["topic"] == topic]
    if t.get("error"):
        raise RuntimeError(f"describe {topic}: {t['error']}")
    return t["partitions"]


def describe_topic(bootstrap, topic, timeout=30.0):
    return {"partitions": {p["partition"]: p["leader"] for p in _metadata(bootstrap, topic, timeout)}}


def describe_replicas(bootstrap, topic, timeout=30.0):
    """``-L -J`` lists ``replicas`` and ``isrs`` as ``[{"id": n}, ...]``."""
    return {p["partition"]: placement(p["leader"], [r["id"] for r in p["replicas"]],
                                      [i["id"] for i in p["isrs"]])
            for p in _metadata(bootstrap, topic, timeout)}


_REBALANCED = re.compile(r"^% Group .* rebalanced \(memberid [^)]*\): (assigned|revoked): ?(.*)$")
_PARTITION = re.compile(r"(\S+) \[(\d+)\]")


class GroupMember(ProcessMember):
    """``kcat -G`` as a child process; its stderr rebalance lines keep the assignment."""

    def start(self, bootstrap, topic, group):
        if BINARY is None:
            raise RuntimeError("kcat is not installed (make setup installs it)")
        self.topic = topic
        args = ["-b", bootstrap, "-G", group, *BASE, "-X", "log_level=0",
                "-X", "auto.offset.reset=earliest", "-X", "enable.auto.commit=false",
                "-X", "session.timeout.ms=6000", "-X", "heartbeat.interval.ms=500", topic]
        self._spawn([BINARY, *args], "stderr", stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        return self

    def _line(self, line):
        match = _REBALANCED.match(line)
        if match is None:
            if "ERROR" in line or "FAIL" in line:
                self._note(line)
            return
        kind, listed = match.groups()
        partitions = {int(p) for t, p in _PARTITION.findall(listed) if t == self.topic}
        if kind == "assigned":
            self._assigned(partitions)
        else:
            self._revoked()
