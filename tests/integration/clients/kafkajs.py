"""kafkajs driver: runs ``node tests/integration/js/driver.js`` with one JSON command per
call (see driver.js). Every codec, through npm codec packages that need no install
script (kafkajs-snappy, @2l/kafkajs-lz4, @bokuweb/zstd-wasm + fzstd). Admin: create,
describe, describe config, alter config (legacy AlterConfigs), delete.

kafkajs has no manual partition assignment: ``consume_assign`` subscribes a fresh group
from the beginning, never commits, and keeps only the asked partitions
(``ASSIGN_IS_REAL = False``).

``GroupMember`` runs ``driver.js`` in its "group_member" mode (command in argv, stdin a
pipe that the member leaves the group on when it closes) and follows its JSON event lines.
"""
from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import uuid

from . import ProcessMember, Record, acks_value, messages_of, placement
from .security import kafkajs_config

NAME = "kafkajs"
CODECS = frozenset({"none", "gzip", "snappy", "lz4", "zstd"})
ADMIN = frozenset({"create_topic", "describe_topic", "describe_topic_config",
                   "alter_topic_config", "delete_topic"})
ASSIGN_IS_REAL = False
JS_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "js")
DRIVER = os.path.join(JS_DIR, "driver.js")
NODE = shutil.which("node")
AVAILABLE = NODE is not None and os.path.isdir(os.path.join(JS_DIR, "node_modules", "kafkajs"))
STARTUP_S = 10.0  # node + module loading, on top of the operation's own timeout


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode()


def _unb64(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text)


def call(op: str, bootstrap: str, timeout: float = 30.0, **args):
    if not AVAILABLE:
        raise RuntimeError("node or tests/integration/js/node_modules is missing (make setup installs them)")
    command = json.dumps({"op": op, "bootstrap": bootstrap, "timeout": timeout, **args})
    env = {**os.environ, "KAFKAJS_NO_PARTITIONER_WARNING": "1"}
    try:
        proc = subprocess.run([NODE, DRIVER], input=command.encode(), capture_output=True,
                              timeout=timeout + STARTUP_S, cwd=JS_DIR, env=env)
    except subprocess.TimeoutExpired as e:
        raise TimeoutError(f"kafkajs {op} ran over {timeout + STARTUP_S} s; stderr: "
                           f"{(e.stderr or b'').decode(errors='replace')[-2000:]}") from None
    lines = proc.stdout.decode(errors="replace").strip().splitlines()
    stderr = proc.stderr.decode(errors="replace")[-3000:]
    try:
        answer = json.loads(lines[-1])
    except (IndexError, ValueError):
        raise RuntimeError(f"kafkajs {op} exited {proc.returncode} without an answer; "
                           f"stderr: {stderr}") from None
    if not answer["ok"]:
        kind = TimeoutError if proc.returncode == 2 else RuntimeError
        raise kind(f"kafkajs {op}: {answer['error']}; stderr: {stderr}")
    return answer["result"]


def _produce_args(topic, messages, acks="all", compression="none", idempotent=False) -> dict:
    payload = [{"key": _b64(m.key), "value": _b64(m.value),
                "headers": [[name, _b64(value)] for name, value in m.headers],
                "partition": m.partition} for m in messages_of(messages)]
    return {"topic": topic, "messages": payload, "acks": acks_value(acks), "compression": compression,
            "idempotent": idempotent}


def produce(bootstrap, topic, messages, acks="all", compression="none", idempotent=False,
            timeout=30.0, security=None):
    if security is not None:
        pairs = [(m.key, m.value) for m in messages_of(messages)]
        _secured_ok(secured("produce", bootstrap, security, topic, pairs, timeout=timeout))
        return
    call("produce", bootstrap, timeout, **_produce_args(topic, messages, acks, compression, idempotent))


def batch(bootstrap, steps, timeout=60.0) -> list:
    """Several operations in one node process (node and kafkajs start once), one after the
    other: each step ``("produce", kwargs)``, ``("consume_assign", kwargs)`` or
    ``("consume_group", kwargs)``, its kwargs those of the function of that name less bootstrap
    and timeout; ``timeout`` bounds them all. Their results in order, as those functions return them."""
    commands, readers = [], []
    for op, kwargs in steps:
        if op == "produce":
            commands.append({"op": op, **_produce_args(**kwargs)})
            readers.append(lambda result: None)
        elif op == "consume_assign":
            commands.append({"op": op, "topic": kwargs["topic"], "partitions": list(kwargs["partitions"]),
                             "count": kwargs["count"], "isolation": kwargs.get("isolation"),
                             "partitionFetchBytes": kwargs.get("partition_fetch_bytes")})
            readers.append(_records)
        elif op == "consume_group":
            commands.append({"op": op, "topic": kwargs["topic"], "group": kwargs["group"],
                             "count": kwargs["count"], "commit": kwargs.get("commit", True)})
            readers.append(_records)
        else:
            raise ValueError(f"kafkajs cannot batch {op}")
    results = call("batch", bootstrap, timeout, commands=commands)
    return [read(result) for read, result in zip(readers, results, strict=True)]


def _records(rows) -> list[Record]:
    return [Record(p, o, _unb64(k), _unb64(v), [(name, _unb64(h)) for name, h in headers])
            for p, o, k, v, headers in rows]


def consume_assign(bootstrap, topic, partitions, count, timeout=30.0, isolation=None,
                   partition_fetch_bytes=None, security=None):
    if security is not None:  # a fresh group from the beginning, as driver.js's assign
        assert list(partitions) == [0] and isolation is None and partition_fetch_bytes is None
        got = _secured_ok(secured("consume", bootstrap, security, topic, [(None, None)] * count,
                                  group=f"strom-assign-{uuid.uuid4().hex[:8]}", timeout=timeout))
        return [Record(0, -1, k.encode(), v.encode(), []) for k, v in got["got"]]
    return _records(call("consume_assign", bootstrap, timeout, topic=topic,
                         partitions=list(partitions), count=count, isolation=isolation,
                         partitionFetchBytes=partition_fetch_bytes))


def consume_group(bootstrap, topic, group, count, timeout=30.0, commit=True):
    return _records(call("consume_group", bootstrap, timeout, topic=topic, group=group,
                         count=count, commit=commit))


SECURED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "secured.js")


def secured(op: str, bootstrap: str, security, topic: str, messages, retries: int = 5,
            consumer_retries: int | None = None, group: str | None = None, txn_id: str | None = None,
            timeout: float = 30.0) -> dict:
    """One operation of secured.js ("produce", "consume" from the beginning in ``group`` until as
    many messages as ``messages`` came, "transaction" with ``txn_id``) over a listener secured as
    ``security`` (clients/security.py) with kafkajs's ``retries``; messages are (key, value) text
    pairs, keys and values UTF-8. Its answer: {"ok": true}, {"got": [[key, value], ...]} or
    {"error": {"name", "message", "cause", "logged"}} (see secured.js)."""
    if not AVAILABLE:
        raise RuntimeError("node or tests/integration/js/node_modules is missing (make setup installs them)")
    command = json.dumps({"op": op, "bootstrap": bootstrap, "security": kafkajs_config(security),
                          "retries": retries, "consumerRetries": consumer_retries, "topic": topic,
                          "group": group, "txnId": txn_id,
                          "messages": [[_str(k), _str(v)] for k, v in messages]})
    env = {**os.environ, "KAFKAJS_PATH": os.path.join(JS_DIR, "node_modules", "kafkajs"),
           "KAFKAJS_NO_PARTITIONER_WARNING": "1"}
    proc = subprocess.run([NODE, SECURED, command], capture_output=True, timeout=timeout + STARTUP_S,
                          cwd=JS_DIR, env=env, stdin=subprocess.DEVNULL)
    lines = proc.stdout.decode(errors="replace").strip().splitlines()
    try:
        return json.loads(lines[-1])
    except (IndexError, ValueError):
        raise RuntimeError(f"kafkajs {op} exited {proc.returncode} without an answer; "
                           f"stderr: {proc.stderr.decode(errors='replace')[-2000:]}") from None


def _str(data) -> str | None:
    return data.decode() if isinstance(data, bytes) else data


def _secured_ok(answer: dict) -> dict:
    if "error" in answer:
        e = answer["error"]
        raise RuntimeError(f"kafkajs: {e['name']}: {e['message']} (cause {e['cause']}; logged {e['logged']})")
    return answer


def create_topic(bootstrap, topic, partitions=1, replication_factor=1, config=None, timeout=30.0):
    call("create_topic", bootstrap, timeout, topic=topic, partitions=partitions,
         replication_factor=replication_factor, config={k: str(v) for k, v in (config or {}).items()})


def describe_topic(bootstrap, topic, timeout=30.0):
    result = call("describe_topic", bootstrap, timeout, topic=topic)
    return {"partitions": {int(p): leader for p, leader in result["partitions"].items()}}


def describe_replicas(bootstrap, topic, timeout=30.0):
    result = call("describe_replicas", bootstrap, timeout, topic=topic)
    return {int(p): placement(*row) for p, row in result.items()}


def describe_topic_config(bootstrap, topic, timeout=30.0):
    return call("describe_topic_config", bootstrap, timeout, topic=topic)


def alter_topic_config(bootstrap, topic, config, timeout=30.0):
    call("alter_topic_config", bootstrap, timeout, topic=topic,
         config={k: str(v) for k, v in config.items()})


def delete_topic(bootstrap, topic, timeout=30.0):
    call("delete_topic", bootstrap, timeout, topic=topic)


def reassign(bootstrap, topic, replicas: dict[int, list[int]], timeout=30.0):
    """AlterPartitionReassignments of ``topic``: partition -> target replicas."""
    call("reassign", bootstrap, timeout, topic=topic, replicas={str(p): r for p, r in replicas.items()})


def list_reassignments(bootstrap, topic, timeout=30.0) -> dict[int, tuple[list, list, list]]:
    """partition -> (replicas, adding, removing) of ``topic``'s reassignments in progress."""
    result = call("list_reassignments", bootstrap, timeout, topic=topic)
    return {int(p): tuple(row) for p, row in result.items()}


MEMBER_LIFETIME_S = 600.0  # a member process exits by itself after this long


class GroupMember(ProcessMember):
    """``node driver.js`` as a long-lived member: "join" events carry its assignment,
    "rebalancing" means it is rejoining and (eager) owns nothing until the next join."""

    def start(self, bootstrap, topic, group):
        if not AVAILABLE:
            raise RuntimeError("node or tests/integration/js/node_modules is missing "
                               "(make setup installs them)")
        command = json.dumps({"op": "group_member", "bootstrap": bootstrap, "topic": topic,
                              "group": group, "timeout": MEMBER_LIFETIME_S})
        env = {**os.environ, "KAFKAJS_NO_PARTITIONER_WARNING": "1"}
        self._spawn([NODE, DRIVER, command], "stdout", stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE, cwd=JS_DIR, env=env)
        return self

    def _line(self, line):
        try:
            event = json.loads(line)
        except ValueError:
            self._note(line)
            return
        kind = event.get("event")
        if kind == "join":
            self._assigned(event["partitions"])
        elif kind == "rebalancing":
            self._revoked()
        elif kind == "crash":
            self._note(f"crash: {event['error']}")
            if not event["restart"]:
                self._failed(f"the consumer crashed: {event['error']}")
        elif "ok" in event and not event["ok"]:
            self._failed(event["error"])

    def _ask_to_leave(self):
        self.proc.stdin.close()  # EOF: disconnect, LeaveGroup, exit 0
