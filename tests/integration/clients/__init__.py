"""One thin driver per real Kafka client, all with the same operations, so one test
body runs against every client.

Every driver module exposes:

    NAME, CODECS (subset of {"none", "gzip", "snappy", "lz4", "zstd"}), ADMIN (the admin
    operations below it supports), ASSIGN_IS_REAL (False where "assign" is emulated)

    produce(bootstrap, topic, messages, acks="all", compression="none",
            idempotent=False, timeout=30.0) -> None
    consume_assign(bootstrap, topic, partitions, count, timeout=30.0, isolation=None,
                   partition_fetch_bytes=None) -> [Record]
        from the beginning of each partition, no group, nothing committed; ``isolation``
        "read_committed" or "read_uncommitted" (None: the client's own default, which is
        read_committed for confluent and kafkajs, read_uncommitted for the others);
        ``partition_fetch_bytes`` the client's max.partition.fetch.bytes (None: its
        default); kcat takes neither
    consume_group(bootstrap, topic, group, count, timeout=30.0, commit=True) -> [Record]
        subscribe from the committed offsets (else earliest); commit exactly the
        records returned (offset + 1) when ``commit``
    create_topic(bootstrap, topic, partitions=1, replication_factor=1, config=None)
    describe_topic(bootstrap, topic) -> {"partitions": {id: leader}}
    describe_replicas(bootstrap, topic) -> {id: Placement}
        each partition's leader, replicas and ISR as the client's Metadata tells them
    describe_topic_config(bootstrap, topic) -> {name: value}
    alter_topic_config(bootstrap, topic, {name: value})
    delete_topic(bootstrap, topic)

``produce``, ``consume_assign`` (partition 0 only for kafkajs) and ``roundtrip`` take
``security=``, how the client connects to a secured listener (clients/security.py);
clients/refusals.py holds what each client shows when the listener refuses it.

A message is ``(key, value, headers)`` or ``(key, value, headers, partition)``; keys
and values are bytes or None, headers a list of (str, bytes). A record is the tuple
``(partition, offset, key, value, headers)``. kcat and kafkajs carry text through
their command lines and JSON, so tests keep keys, values and headers UTF-8.
A driver that cannot finish in ``timeout`` raises ``TimeoutError``.

Every driver also has ``GroupMember``: one long-lived member of a consumer group (eager
rebalance protocol, session timeout 6 s, heartbeats every 0.5 s, from the earliest offset,
nothing committed) that the test watches and tells to leave:

    member = GroupMember().start(bootstrap, topic, group)
    member.assignment() -> set[int]   the partitions of ``topic`` it owns right now, as the
                                      client reported them at its latest rebalance (empty
                                      between a revocation and the next assignment); raises
                                      ``MemberFailed`` once the member has died
    member.rebalances -> int          assignments reported so far
    member.close(timeout=15.0)        leave the group (LeaveGroup) and stop; bounded, and
                                      kills what is left when the client does not stop

confluent, kafka_python and aiokafka run the client in a background thread (aiokafka in its
own event loop there); kcat and kafkajs run one child process each and parse what it
reports of its rebalances.
"""
from __future__ import annotations

import abc
import collections
import contextlib
import importlib
import subprocess
import sys
import threading
import time
import traceback
from typing import NamedTuple

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
DRIVERS = ("confluent", "kafka_python", "aiokafka_client", "kcat", "kafkajs")


class Record(NamedTuple):
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes]]


class Placement(NamedTuple):
    """A partition as Metadata describes it: leader id, replica ids in assignment order,
    ISR ids sorted."""
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


def placement(leader, replicas, isr) -> Placement:
    return Placement(int(leader), tuple(int(r) for r in replicas), tuple(sorted(int(i) for i in isr)))


class Message(NamedTuple):
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes]]
    partition: int | None = None


def messages_of(messages) -> list[Message]:
    return [Message(*m) for m in messages]


def driver(name: str):
    return importlib.import_module(f"{__name__}.{name}")


def roundtrip(name: str, bootstrap: str, topic: str, pairs, security=None,
              timeout: float = 30.0) -> list[tuple[bytes | None, bytes | None]]:
    """Driver ``name`` produces ``pairs`` ((key, value), no headers) to ``topic`` and reads them
    back from the beginning of its partition 0: the (key, value) pairs it read. ``security``:
    how it connects (clients/security.py), None for PLAINTEXT."""
    client = driver(name)
    client.produce(bootstrap, topic, [(k, v, []) for k, v in pairs], timeout=timeout, security=security)
    records = client.consume_assign(bootstrap, topic, [0], len(pairs), timeout=timeout, security=security)
    return [(r.key, r.value) for r in records]


def acks_value(acks) -> int:
    """0, 1 or -1 from 0 / 1 / "all" / -1 / "0" / "1"."""
    if acks in ("all", -1, "-1"):
        return -1
    value = int(acks)
    if value not in (0, 1):
        raise ValueError(f"acks must be 0, 1 or all, not {acks!r}")
    return value


class Deadline:
    def __init__(self, timeout: float):
        self.end = time.monotonic() + timeout

    def left(self) -> float:
        return max(0.0, self.end - time.monotonic())

    def expired(self) -> bool:
        return time.monotonic() >= self.end


def short(records, count) -> TimeoutError:
    return TimeoutError(f"got {len(records)} of {count} records in time")


# ---------------------------------------------------------------------------- group members

MEMBER_CLOSE_TIMEOUT_S = 15.0
MEMBER_POLL_S = 0.2


class MemberFailed(RuntimeError):
    """A ``GroupMember`` whose client died (thread raised, child process exited)."""


class MemberBase:
    """The assignment bookkeeping every driver's ``GroupMember`` shares: callbacks from the
    client's thread call ``_assigned`` / ``_revoked`` / ``_failed``; the test thread reads."""

    def __init__(self):
        self._lock = threading.Lock()
        self._owned: set[int] = set()
        self._error: str | None = None
        self._closed = False
        self.rebalances = 0
        self.log: list[str] = []  # what the member reported, for failure messages
        self.stderr_tail: collections.deque[str] = collections.deque(maxlen=10)

    def _assigned(self, partitions, incremental=False):
        partitions = set(partitions)
        with self._lock:
            self._owned = (self._owned | partitions) if incremental else partitions
            self.rebalances += 1
            self.log.append(f"assigned {sorted(partitions)}")

    def _revoked(self, partitions=None):
        with self._lock:
            self._owned = set() if partitions is None else self._owned - set(partitions)
            self.log.append(f"revoked {'all' if partitions is None else sorted(partitions)}")

    def _failed(self, error):
        with self._lock:
            if self._error is None and not self._closed:
                self._error = str(error) or repr(error)

    def _note(self, text):
        with self._lock:
            self.log.append(text)

    def assignment(self) -> set[int]:
        with self._lock:
            if self._error is not None:
                raise MemberFailed(f"{type(self).__module__} member failed: {self._error}")
            return set(self._owned)

    def history(self) -> str:
        with self._lock:
            text = "; ".join(self.log[-20:])
            if self.stderr_tail:
                text += "\n    stderr: " + "\n    stderr: ".join(self.stderr_tail)
            return text

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class ThreadMember(MemberBase, abc.ABC):
    """A member whose client runs in a daemon thread: ``_run(stop)`` polls until the event
    is set, then leaves the group itself (clients are not closed from other threads)."""

    def start(self, bootstrap, topic, group):
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._guarded, args=(bootstrap, topic, group),
                                        name=f"{type(self).__module__}-member", daemon=True)
        self._thread.start()
        return self

    def _guarded(self, bootstrap, topic, group):
        try:
            self._run(bootstrap, topic, group, self._stop)
        except BaseException as e:  # noqa: B036 -- reported to the test thread
            self._failed(f"{type(e).__name__}: {e}")
        finally:
            with self._lock:
                self._owned = set()
            if not self._stop.is_set():
                self._failed("the client thread stopped by itself")

    @abc.abstractmethod
    def _run(self, bootstrap, topic, group, stop):
        """Run the client until ``stop`` is set (thread-based members)."""

    def history(self) -> str:
        """What the member reported, and where its client thread is now (a member that stops
        answering its group shows where its client waits)."""
        text = super().history()
        frame = sys._current_frames().get(self._thread.ident) if self._thread.is_alive() else None
        if frame is not None:
            where = traceback.format_stack(frame)[-6:]
            text += "\n    client thread at:\n" + "".join(where).rstrip()
        return text

    def close(self, timeout=MEMBER_CLOSE_TIMEOUT_S):
        with self._lock:
            self._closed = True
        self._stop.set()
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise TimeoutError(f"{type(self).__module__} member did not leave within {timeout} s")


class ProcessMember(MemberBase, abc.ABC):
    """A member that is a child process; a reader thread feeds each line of ``stream`` to
    ``_line``. ``close`` asks it to leave (``_ask_to_leave``), waits, then SIGKILLs."""

    proc: subprocess.Popen

    def _spawn(self, cmd, stream_name, **kwargs):
        """Start ``cmd``; parse its ``stream_name`` ("stdout" or "stderr", a pipe) line by
        line, and keep the tail of its stderr too when that is a pipe as well."""
        from ..cluster import _die_with_parent  # SIGKILL the child if the tests die
        self.proc = subprocess.Popen(_die_with_parent(cmd), **kwargs)
        self._readers = [threading.Thread(target=self._read, args=(getattr(self.proc, stream_name),),
                                          name=f"{type(self).__module__}-reader", daemon=True)]
        if stream_name != "stderr" and self.proc.stderr is not None:
            self._readers.append(threading.Thread(target=self._keep_stderr, args=(self.proc.stderr,),
                                                  name=f"{type(self).__module__}-stderr", daemon=True))
        for reader in self._readers:
            reader.start()

    def _keep_stderr(self, stream):
        with contextlib.suppress(Exception):
            for raw in stream:
                line = raw.decode(errors="replace").rstrip()
                if line:
                    with self._lock:
                        self.stderr_tail.append(line[:500])

    def _read(self, stream):
        try:
            for raw in stream:
                line = raw.decode(errors="replace").rstrip("\n")
                if line:
                    self._line(line)
        except Exception as e:
            self._failed(f"reading the member's output: {type(e).__name__}: {e}")
        finally:
            with self._lock:
                self._owned = set()
            rc = self.proc.wait()
            self._failed(f"the process exited ({rc}); last output: {self.history()}")

    @abc.abstractmethod
    def _line(self, line):
        """Handle one line of the member process's output."""

    def _ask_to_leave(self):
        self.proc.terminate()

    def close(self, timeout=MEMBER_CLOSE_TIMEOUT_S):
        with self._lock:
            self._closed = True
        try:
            if self.proc.poll() is None:
                self._ask_to_leave()
                try:
                    self.proc.wait(timeout)
                except subprocess.TimeoutExpired:
                    raise TimeoutError(f"{type(self).__module__} member did not leave within "
                                       f"{timeout} s") from None
        finally:
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()
            self.proc.wait()
            for reader in self._readers:
                reader.join(5)
            for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
                if stream is not None:
                    with contextlib.suppress(OSError):
                        stream.close()
