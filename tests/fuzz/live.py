"""A live fuzz of a real node's listeners: mutated valid frames over many connections while a
healthy client keeps producing and consuming.

    python -m tests.fuzz.live --frames 1000000 [--seed N] [--connections 8] [--dir DIR]

Theory of operation. One combined node (``strom start``, tests/integration/cluster.py) serves
a broker listener and a controller listener. It advertises a recording proxy on loopback
(``RecordingProxy``) as its broker address, so every real client speaks through it: first a
confluent-kafka session (lz4 batches, a consumer group with commits) and a kafka-python one
(gzip batches) whose client frames are recorded; then the healthy client (confluent-kafka,
acks=all producer and an assigned consumer, in a thread) runs through the fuzz. The corpus is
those recorded frames plus frames built from the schemas (tests/fuzz/frames.py) for every API
and version each listener advertises in ApiVersions, and Produce frames carrying real record
batches (plain and compressed). Each fuzz connection sends a few corpus frames, each mutated
(``mutate_frame``: the body's bit flips, truncation, bad lengths, spliced bytes; a wrong api
version or key; a wrong size prefix; corrupt record batches), reads until the node closes it
or goes quiet, and closes.

The node has a third listener, SASL_SSL (PLAIN and SCRAM-SHA-512 enabled, TLS with
tests/security/certs.py's certificates), and a quarter of the frames go over TLS connections to
it that never authenticate: the same corpus (as the SASL_SSL listener advertises it, with
SaslHandshake and SaslAuthenticate frames of every mechanism and of none, wrong credentials
only) sent mutated or, for a third of the frames, as they are, so valid requests of every API
arrive before authentication; a few connections skip TLS and send frames in the clear. Every
response on that listener is read back: its correlation id names the request it answers (the
frames as the node cuts them, size prefix by size prefix, in order) and that request must be
ApiVersions, SaslHandshake or SaslAuthenticate; any other closes the connection unanswered.
After a SaslHandshake v0 answered with error 0 the client's next frames are bare SASL tokens,
and the node answers each (if at all: a failed one closes the connection) with a bare token:
counted apart, matched to the tokens in order. Some exchanges take that path on purpose (a v0
handshake, then a PLAIN token with wrong credentials, or SCRAM's first and final messages). A
second healthy client (confluent-kafka over SASL_SSL with PLAIN) produces and reads back on
that listener through the fuzz.

Valid frames are tamed so that the node's state stays the healthy client's: broker and node
ids far from the real one, cluster ids never null, validate_only set, waits short. Mutations
may undo that (rarely); the node must survive it anyway.

What is checked, and printed as the report:

| figure          | meaning                                                               |
|-----------------|-----------------------------------------------------------------------|
| frames          | frames sent, over ``connections`` connections                         |
| crashes         | 1 if the node process exited                                          |
| hangs           | ApiVersions probes on a fresh connection unanswered within 5 s        |
| tracebacks      | "Traceback" / "exception was never retrieved" lines in the node's log |
| errors          | ERROR / CRITICAL lines in the node's log                              |
| stray lines     | lines of the node's log not in its format (a traceback's, or a line   |
|                 | a client's string forged by carrying a newline into a log message)    |
| healthy         | the healthy client's records acknowledged and read back; its longest  |
|                 | gap between acknowledgements (PLAINTEXT, and SASL_SSL)                |
| sasl            | frames and connections on the SASL_SSL listener, the responses read   |
|                 | there, and those answering anything but ApiVersions / SASL (must be 0)|
|                 | or no request sent (must be 0); the SaslHandshake v0 accepted, and    |
|                 | the bare tokens answered after one                                    |
| rss             | the node's resident memory (all its processes) at start, at peak and  |
|                 | at the end, beside queued.max.request.bytes                           |
| state           | topics and consumer groups the node holds at the end: what fuzzed     |
|                 | requests created (they outlive their connections, as in Kafka)        |
"""
from __future__ import annotations

import argparse
import asyncio
import os
import random
import re
import socket
import ssl
import struct
import sys
import threading
import time
from dataclasses import dataclass, field

from protocol import messages
from protocol.codec import KafkaStruct
from strom.config import PROPERTIES
from tests.fuzz.frames import RandomSource, encode_loose, mutate, request_frame, request_value
from tests.integration.cluster import (
    StromNode,
    build_api_versions_v0_request,
    free_ports,
    parse_api_versions_v0_response,
    probe_api_versions,
)
from tests.security.certs import make_pki

QUEUED_BYTES = PROPERTIES["queued.max.request.bytes"][1]  # the node runs with the default
HEALTHY_TOPIC = "healthy"
SASL_HEALTHY_TOPIC = "healthy-sasl"
TOPICS = ("recorded", HEALTHY_TOPIC, SASL_HEALTHY_TOPIC, "fuzzed")  # created up front: auto-creation is off
SASL_LISTENER = "SASL_SSL"
SASL_MECHANISMS = ("SCRAM-SHA-512", "PLAIN")
SASL_USER, SASL_PASSWORD = "healthy", "healthy-secret"  # the PLAIN user list's one user
SASL_SHARE = 0.25  # of the connections (and so of the frames) go to the SASL_SSL listener
SASL_AS_IS = 1 / 3  # of its frames are sent unmutated: valid requests before authentication
SASL_CLEAR = 0.05  # of its connections skip TLS
API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 17, 36
ANSWERED_UNAUTHENTICATED = frozenset({API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE})
QUIET_S = 0.25  # a fuzz connection that sent everything and hears nothing for this long is closed
PROBE_TIMEOUT_S = 5.0
ID_FIELDS = re.compile(r"(broker|node|replica|leader|voter|candidate|member_epoch|controller)_id$")
TIME_FIELDS = ("timeout_ms", "max_wait_ms", "wait_ms")
BAD_LOG = re.compile(r"Traceback|exception was never retrieved| (ERROR|CRITICAL) ")
LOG_LINE = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} [A-Z]+ ")  # the node's log format


@dataclass
class Healthy:
    """What one healthy client saw."""
    acked: int = 0
    read: int = 0
    failed: int = 0
    max_gap_s: float = 0.0

    def line(self) -> str:
        return (f"{self.acked} acknowledged, {self.read} read back, {self.failed} failed, "
                f"longest gap {self.max_gap_s:.1f} s")


@dataclass
class Report:
    frames: int = 0
    connections: int = 0
    closed_by_node: int = 0
    quiet: int = 0
    crashes: int = 0
    hangs: int = 0
    tracebacks: int = 0
    errors: int = 0
    stray_lines: int = 0  # lines of the node's log not in its format: tracebacks, forged lines
    bad_lines: list[str] = field(default_factory=list)
    healthy: Healthy = field(default_factory=Healthy)
    healthy_sasl: Healthy = field(default_factory=Healthy)
    sasl_frames: int = 0
    sasl_connections: int = 0
    sasl_responses: int = 0  # read back on the SASL_SSL listener
    sasl_answered_other: int = 0  # responses to anything but ApiVersions / SaslHandshake / SaslAuthenticate
    sasl_unmatched: int = 0  # responses whose correlation id names no request sent on that connection
    sasl_v0_handshakes: int = 0  # SaslHandshake v0 answered with error 0: bare tokens follow
    sasl_raw_answered: int = 0  # bare tokens answered bare after a SaslHandshake v0
    rss_start: int = 0
    rss_peak: int = 0
    rss_end: int = 0
    topics: int = -1
    groups: int = -1
    recorded: int = 0
    corpus: int = 0
    seconds: float = 0.0

    def lines(self) -> list[str]:
        mb = 1 << 20
        return [
            f"frames sent      {self.frames} over {self.connections} connections in {self.seconds:.0f} s "
            f"(closed by the node {self.closed_by_node}, quiet {self.quiet})",
            f"corpus           {self.corpus} frames ({self.recorded} recorded from real clients)",
            f"crashes          {self.crashes}",
            f"hangs            {self.hangs}",
            f"tracebacks       {self.tracebacks}",
            f"error lines      {self.errors}",
            f"stray log lines  {self.stray_lines}",
            f"healthy client   {self.healthy.line()}",
            f"healthy SASL_SSL {self.healthy_sasl.line()}",
            f"SASL_SSL         {self.sasl_frames} frames over {self.sasl_connections} unauthenticated "
            f"connections; {self.sasl_responses} responses, {self.sasl_answered_other} to other APIs, "
            f"{self.sasl_unmatched} unmatched; {self.sasl_v0_handshakes} SaslHandshake v0 accepted, "
            f"{self.sasl_raw_answered} v0 raw tokens answered",
            f"node RSS         {self.rss_start / mb:.0f} MiB at start, {self.rss_peak / mb:.0f} MiB peak, "
            f"{self.rss_end / mb:.0f} MiB at the end (queued.max.request.bytes {QUEUED_BYTES // mb} MiB)",
            f"node state       {self.topics} topics, {self.groups} consumer groups at the end",
            *self.bad_lines[:10],
        ]


# ---- the node's memory ----------------------------------------------------------------------

def group_rss(pgid: int) -> int:
    """Resident bytes of every process in the process group ``pgid`` (the node's session)."""
    total = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
            if int(fields[2]) != pgid:
                continue
            with open(f"/proc/{pid}/statm", "rb") as f:
                total += int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, IndexError, ValueError):
            continue
    return total


# ---- the recording proxy --------------------------------------------------------------------

class RecordingProxy:
    """Forwards loopback connections to the broker; records client frames while ``recording``."""

    def __init__(self, target_port: int, cap: int = 5000):
        self.target_port = target_port
        self.recording = True
        self.frames: list[bytes] = []
        self.cap = cap
        self.server: asyncio.base_events.Server | None = None

    async def start(self, port: int) -> None:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", port)

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()

    async def _serve(self, reader, writer) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            writer.close()
            return
        down = asyncio.ensure_future(self._pipe(up_reader, writer, record=False))
        try:
            await self._pipe(reader, up_writer, record=True)
            await asyncio.wait({down}, timeout=1)
        except asyncio.CancelledError:  # the proxy is closing with the event loop
            pass
        finally:
            down.cancel()

    async def _pipe(self, reader, writer, record: bool) -> None:
        pending = b""
        try:
            while data := await reader.read(1 << 16):
                writer.write(data)
                await writer.drain()
                if record and self.recording and len(self.frames) < self.cap:
                    pending += data
                    while len(pending) >= 4:
                        size = struct.unpack(">i", pending[:4])[0]
                        if len(pending) < 4 + size:
                            break
                        self.frames.append(pending[:4 + size])
                        pending = pending[4 + size:]
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()


def record_real_clients(bootstrap: str) -> None:
    """A short session of each real client (their frames go through the proxy)."""
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(name, 1, 1) for name in TOPICS]).values():
        future.result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "compression.type": "lz4",
                         "enable.idempotence": True, "linger.ms": 5})
    for i in range(30):
        producer.produce("recorded", key=b"k%d" % i, value=b"value-%d" % i * (i % 5 + 1),
                         headers=[("h", b"v")])
    producer.flush(15)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "recorder",
                         "auto.offset.reset": "earliest", "enable.auto.commit": True,
                         "auto.commit.interval.ms": 200, "session.timeout.ms": 6000})
    consumer.subscribe(["recorded"])
    deadline, got = time.monotonic() + 15, 0
    while got < 30 and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and not msg.error():
            got += 1
    consumer.commit(asynchronous=False) if got else None
    consumer.close()
    try:
        import kafka
    except ImportError:
        return
    kp = kafka.KafkaProducer(bootstrap_servers=bootstrap, compression_type="gzip")
    for i in range(10):
        kp.send("recorded", b"kafka-python-%d" % i)
    kp.flush(10)
    kp.close(5)
    kc = kafka.KafkaConsumer("recorded", bootstrap_servers=bootstrap, group_id="recorder-kp",
                             auto_offset_reset="earliest", consumer_timeout_ms=3000)
    for _ in kc:
        pass
    kc.close()


# ---- the healthy client ---------------------------------------------------------------------

def count_state(bootstrap: str, report: Report) -> None:
    """The topics and groups the node holds (best effort: -1 where it did not answer)."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    try:
        report.topics = len(admin.list_topics(timeout=10).topics)
        report.groups = len(admin.list_consumer_groups(request_timeout=10).result(timeout=15).valid)
    except Exception as e:  # noqa: BLE001 - a figure of the report, not a check
        print(f"count_state: {e}", file=sys.stderr)


class HealthyClient(threading.Thread):
    """Produces (acks=all) and reads back one record at a time until stopped; ``client``
    adds to both clients' configuration (security.protocol, sasl.*, ssl.*)."""

    def __init__(self, bootstrap: str, stats: Healthy, topic: str = HEALTHY_TOPIC,
                 client: dict[str, str] | None = None):
        super().__init__(daemon=True)
        self.bootstrap, self.stats, self.topic = bootstrap, stats, topic
        self.client = {"bootstrap.servers": bootstrap, **(client or {})}
        self.stopping = threading.Event()
        self.ready = threading.Event()

    def run(self) -> None:
        from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
        r = self.stats
        producer = Producer({**self.client, "acks": "all", "linger.ms": 0, "message.timeout.ms": 10000})
        consumer = Consumer({**self.client, "group.id": f"{self.topic}-reader", "enable.auto.commit": False})
        consumer.assign([TopicPartition(self.topic, 0, 0)])
        last_ack = time.monotonic()
        acked: list[int] = []

        def delivered(err, msg):
            nonlocal last_ack
            if err is None:
                now = time.monotonic()
                r.max_gap_s = max(r.max_gap_s, now - last_ack)
                last_ack = now
                r.acked += 1
                acked.append(msg.offset())
            else:
                r.failed += 1
        i = 0
        while not self.stopping.is_set():
            producer.produce(self.topic, value=b"healthy-%d" % i, partition=0, callback=delivered)
            producer.flush(10)
            i += 1
            self.ready.set()
            self.stopping.wait(0.005)  # steady traffic, not a CPU race with the fuzzer
            msg = consumer.poll(0.05)
            if msg is not None and (not msg.error() or msg.error().code() == KafkaError._PARTITION_EOF):
                r.read += 0 if msg.error() else 1
        deadline = time.monotonic() + 10
        while r.read < r.acked and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and not msg.error():
                r.read += 1
        r.max_gap_s = max(r.max_gap_s, time.monotonic() - last_ack if r.acked == 0 else 0)
        consumer.close()


# ---- the corpus -----------------------------------------------------------------------------

def tame(obj: KafkaStruct, rng: random.Random) -> KafkaStruct:
    """Keeps a valid frame away from the healthy client's state (see the module doc)."""
    for name in obj._fields:
        v = getattr(obj, name)
        if isinstance(v, KafkaStruct):
            tame(v, rng)
        elif isinstance(v, list):
            for item in v:
                if isinstance(item, KafkaStruct):
                    tame(item, rng)
        elif name == "validate_only":
            setattr(obj, name, True)
        elif name == "cluster_id" and v is None:
            setattr(obj, name, "fuzz-cluster")
        elif name.endswith(TIME_FIELDS) and isinstance(v, int):
            setattr(obj, name, rng.choice((0, 10, 100)))
        elif ID_FIELDS.search(name) and isinstance(v, int) and not isinstance(v, bool):
            setattr(obj, name, rng.randint(1000, 1 << 20))
        elif name in ("topic", "name") and v in (HEALTHY_TOPIC, SASL_HEALTHY_TOPIC):
            setattr(obj, name, "not-healthy")
    return obj


def schema_corpus(rng: random.Random, served: dict[int, tuple[int, int]], per_version: int) -> list[bytes]:
    src = RandomSource(rng)
    frames = []
    for key, (lo, hi) in sorted(served.items()):
        if key not in messages.REQUESTS:
            continue
        schema = messages.REQUESTS[key].message.versions
        for version in range(max(lo, schema.lo), min(hi, schema.hi) + 1):
            for _ in range(per_version):
                body = encode_loose(key, version, tame(request_value(src, key, version), rng))
                frames.append(request_frame(key, version, rng.randint(0, 1 << 30), body))
    return frames


def produce_corpus(rng: random.Random, count: int) -> list[bytes]:
    """Produce frames with real record batches (none, gzip, snappy, lz4, zstd)."""
    from ext.batch import build_batch
    R = messages.ProduceRequest
    frames = []
    for i in range(count):
        records = [(b"k", rng.randbytes(rng.randint(0, 200)), [("h", b"v")], 1_700_000_000_000 + j)
                   for j in range(rng.randint(1, 5))]
        try:
            batch = build_batch(records, compression=i % 5)
        except Exception:  # a codec the build lacks
            batch = build_batch(records)
        version = rng.choice((3, 7, 8, 9, 11, 12))
        body = R(transactional_id=None, acks=rng.choice((0, 1, -1)), timeout_ms=100, topic_data=[
            R.TopicProduceData(name="fuzzed", partition_data=[
                R.PartitionProduceData(index=0, records=batch)])])
        frames.append(request_frame(0, version, i, encode_loose(0, version, body)))
    return frames


def sasl_tokens(rng: random.Random) -> dict[str, list[bytes]]:
    """SaslAuthenticate tokens per mechanism: well-formed first messages with wrong or unknown
    credentials, and broken ones. None authenticates (the one user's password is never sent)."""
    nonce = rng.randbytes(12).hex().encode()
    scram_final = b"c=biws,r=" + nonce + b"x,p=" + rng.randbytes(64).hex().encode()
    return {
        "PLAIN": [b"\0" + SASL_USER.encode() + b"\0wrong-secret", b"\0nobody\0secret",
                  b"admin\0" + SASL_USER.encode() + b"\0wrong", b"\0\0", b"", b"\0" * 300,
                  SASL_USER.encode(), b"\0" + SASL_USER.encode() + b"\0" + b"\xff\xfe" * 8],
        "SCRAM-SHA-512": [b"n,,n=" + SASL_USER.encode() + b",r=" + nonce, b"n,,n=nobody,r=" + nonce,
                          b"n,,n=" + SASL_USER.encode() + b",r=" + nonce + b",tokenauth=true",
                          b"p=tls-unique,,n=" + SASL_USER.encode() + b",r=" + nonce,
                          b"n,a=admin,n=" + SASL_USER.encode() + b",r=" + nonce,
                          b"n,,n=a=3Db,r=", b"y,,r=" + nonce, scram_final, b"", b"n,,",
                          b"n,,n=x\nforged,r=" + nonce],
    }


def sasl_corpus(rng: random.Random) -> list[bytes]:
    """SaslHandshake frames naming each mechanism (enabled, not enabled, unknown, empty) and
    SaslAuthenticate frames of every version carrying every token of ``sasl_tokens``."""
    frames = []
    for mechanism in (*SASL_MECHANISMS, "SCRAM-SHA-256", "OAUTHBEARER", "GSSAPI", "", "plain", "X" * 300,
                      "PLAIN\nforged", "\r\n"):
        for version in (0, 1):
            body = encode_loose(SASL_HANDSHAKE, version, messages.SaslHandshakeRequest(mechanism=mechanism))
            frames.append(request_frame(SASL_HANDSHAKE, version, rng.randint(0, 1 << 30), body))
    for tokens in sasl_tokens(rng).values():
        for token in tokens:
            for version in (0, 1, 2):
                body = encode_loose(SASL_AUTHENTICATE, version,
                                    messages.SaslAuthenticateRequest(auth_bytes=token))
                frames.append(request_frame(SASL_AUTHENTICATE, version, rng.randint(0, 1 << 30), body))
    return frames


def bare(token: bytes) -> bytes:
    """A SASL token as it travels after a SaslHandshake v0: size-prefixed, no request header."""
    return struct.pack(">i", len(token)) + token


def sasl_exchange(rng: random.Random) -> tuple[list[bytes], list[bytes]]:
    """The opening of a SASL exchange as a client sends it, so the fuzz reaches each mechanism's
    later steps: ApiVersions and a SaslHandshake naming an enabled mechanism, then (v1) a first
    SaslAuthenticate with wrong credentials and for SCRAM a final message with a made-up proof,
    or (v0, half the time) the same tokens bare: a PLAIN token with a wrong password or an
    unknown user, or SCRAM's first message (answered bare, the server's first message, even for
    an unknown user) and its final one. Returns the requests and the bare tokens after them."""
    mechanism = rng.choice(SASL_MECHANISMS)
    tokens = sasl_tokens(rng)[mechanism]
    handshake = rng.choice((0, 1))
    av = rng.choice((0, 1, 2, 3))
    if mechanism.startswith("SCRAM"):
        # a client-first message, well-formed, then a client-final message with a made-up proof
        chosen = [rng.choice(tokens[:2]) if handshake == 0 else rng.choice(tokens),
                  next(t for t in tokens if t.startswith(b"c="))]
    else:
        chosen = [rng.choice(tokens[:2]) if handshake == 0 else rng.choice(tokens)]
    requests = [request_frame(API_VERSIONS, av, 0, encode_loose(API_VERSIONS, av, messages.ApiVersionsRequest(
                    client_software_name="fuzz", client_software_version="1"))),
                request_frame(SASL_HANDSHAKE, handshake, 0, encode_loose(
                    SASL_HANDSHAKE, handshake, messages.SaslHandshakeRequest(mechanism=mechanism)))]
    if handshake == 0:
        return requests, [bare(token) for token in chosen]
    version = rng.choice((0, 1, 2))
    return requests + [request_frame(SASL_AUTHENTICATE, version, 0, encode_loose(
        SASL_AUTHENTICATE, version, messages.SaslAuthenticateRequest(auth_bytes=token)))
        for token in chosen], []


def with_correlation_id(frame: bytes, correlation_id: int) -> bytes:
    """``frame`` with another correlation id (frames too short to hold one unchanged)."""
    if len(frame) < 12:
        return frame
    return frame[:8] + struct.pack(">i", correlation_id) + frame[12:]


def frames_as_cut(stream: bytes) -> list[bytes]:
    """The frames of ``stream`` (size prefixes off) as the node cuts it: a size prefix, that many
    bytes, the next size prefix; it stops at a negative size or where a frame cannot be whole."""
    frames, pos = [], 0
    while pos + 4 <= len(stream):
        size = struct.unpack_from(">i", stream, pos)[0]
        if size < 0 or pos + 4 + size > len(stream):
            break
        frames.append(stream[pos + 4:pos + 4 + size])
        pos += 4 + size
    return frames


def requests_as_cut(stream: bytes) -> list[tuple[int, int]]:
    """(api key, correlation id) of each request in ``stream`` as the node cuts it; it stops at a
    frame too short for a request header (the node closes the connection there)."""
    requests = []
    for frame in frames_as_cut(stream):
        if len(frame) < 8:
            break
        key, _, correlation_id = struct.unpack_from(">hhi", frame)
        requests.append((key, correlation_id))
    return requests


def check_sasl_responses(sent: bytes, received: bytes, report: Report) -> None:
    """Each response read on the SASL_SSL listener answers, in order, a request whose key is
    ApiVersions, SaslHandshake or SaslAuthenticate: the first not yet answered with its
    correlation id (an answer to any other request is counted, as is one that matches none).

    After a SaslHandshake v0 answered with error 0, every later frame of the connection is a bare
    SASL token (the fuzz never authenticates, and a failed token closes the connection), and each
    answer is a bare token, in order, one per token at most, with no correlation id: counted as
    ``sasl_raw_answered`` (the handshakes as ``sasl_v0_handshakes``); one beyond the tokens sent
    is unmatched."""
    frames, at, pos = frames_as_cut(sent), 0, 0
    raw = False  # the frames from ``at`` on are bare tokens
    while pos + 4 <= len(received):
        size = struct.unpack_from(">i", received, pos)[0]
        if size < (0 if raw else 4) or pos + 4 + size > len(received):
            break
        answer = received[pos + 4:pos + 4 + size]
        pos += 4 + size
        if raw:
            if at == len(frames):
                report.sasl_unmatched += 1
                report.bad_lines.append(f"SASL_SSL: a bare {size}-byte answer after SaslHandshake v0 "
                                        f"beyond the {len(frames)} frames sent")
                return
            report.sasl_raw_answered += 1
            at += 1
            continue
        correlation_id = struct.unpack_from(">i", answer)[0]
        report.sasl_responses += 1
        while at < len(frames) and len(frames[at]) >= 8 and \
                struct.unpack_from(">i", frames[at], 4)[0] != correlation_id:
            at += 1
        if at == len(frames) or len(frames[at]) < 8:  # the node closes at a frame with no header
            report.sasl_unmatched += 1
            report.bad_lines.append(f"SASL_SSL: a response with correlation id {correlation_id} answers "
                                    f"no request of {requests_as_cut(sent)}")
            return
        key, version = struct.unpack_from(">hh", frames[at])
        if key not in ANSWERED_UNAUTHENTICATED:
            report.sasl_answered_other += 1
            report.bad_lines.append(f"SASL_SSL: api key {key} answered before authentication")
        elif key == SASL_HANDSHAKE and version == 0 and size >= 6 and \
                struct.unpack_from(">h", answer, 4)[0] == 0:
            raw = True
            report.sasl_v0_handshakes += 1
        at += 1


def header_size(frame: bytes) -> int:
    """Where the body starts in a frame (size prefix included); 12 if it cannot tell."""
    if len(frame) < 14:
        return len(frame)
    key, version = struct.unpack(">hh", frame[4:8])
    n = struct.unpack(">h", frame[12:14])[0]
    pos = 14 + max(n, 0)
    codec = messages.REQUESTS.get(key)
    if codec is not None and codec.message.is_flexible(version):
        pos += 1
    return min(pos, len(frame))


def mutate_frame(frame: bytes, rng: random.Random) -> bytes:
    kind = rng.random()
    start = header_size(frame)
    if kind < 0.55:  # the body (record batches included)
        payload = frame[4:start] + mutate(frame[start:], rng)
    elif kind < 0.7:  # another api version
        payload = frame[4:6] + struct.pack(">h", rng.choice((-1, 0, 1, 2, 5, 13, 99, 32767))) + frame[8:]
    elif kind < 0.75:  # another api key
        payload = struct.pack(">h", rng.randint(-2, 100)) + frame[6:]
    elif kind < 0.85:  # the header and body at once
        payload = mutate(frame[4:], rng)
    elif kind < 0.95:  # a wrong size prefix: the next frame starts in the wrong place
        body = frame[4:]
        size = max(0, len(body) + rng.choice((-8, -1, 1, 3, 100)))
        return struct.pack(">i", size) + body
    else:
        return frame  # unmutated
    return struct.pack(">i", len(payload)) + payload


# ---- the fuzz -------------------------------------------------------------------------------

async def fuzz_connection(port: int, frames: list[bytes], report: Report) -> None:
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), 5)
    except (TimeoutError, OSError):
        return
    report.connections += 1
    try:
        writer.write(b"".join(frames))
        report.frames += len(frames)
        while True:
            try:
                data = await asyncio.wait_for(reader.read(1 << 16), QUIET_S)
            except TimeoutError:
                report.quiet += 1
                return
            if not data:
                report.closed_by_node += 1
                return
    except OSError:
        report.closed_by_node += 1
    finally:
        writer.close()


def sasl_batch(rng: random.Random, corpus: list[bytes]) -> list[bytes]:
    """Frames for one unauthenticated SASL_SSL connection: sometimes the opening of an exchange,
    then corpus frames; each with its own correlation id, a third sent as it is, the rest mutated.
    An exchange opened with SaslHandshake v0 is sent as it is and followed by its bare tokens only
    (mutated as the rest): the node reads every later frame of the connection as a token."""
    requests, tokens = sasl_exchange(rng) if rng.random() < 0.3 else ([], [])
    if not tokens:
        requests += [rng.choice(corpus) for _ in range(rng.randint(1, 6))]
    numbered = [with_correlation_id(frame, i + 1) for i, frame in enumerate(requests)]
    if tokens:
        return numbered + [t if rng.random() < SASL_AS_IS else mutate_frame(t, rng) for t in tokens]
    return [f if rng.random() < SASL_AS_IS else mutate_frame(f, rng) for f in numbered]


async def sasl_fuzz_connection(port: int, frames: list[bytes], report: Report,
                               context: ssl.SSLContext | None) -> None:
    """``fuzz_connection`` over TLS (``context``; None: in the clear, as a client that forgot TLS),
    never authenticating; what comes back is checked by ``check_sasl_responses``."""
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(
            "127.0.0.1", port, ssl=context, server_hostname="127.0.0.1" if context else None), 5)
    except (TimeoutError, OSError):
        return
    report.connections += 1
    report.sasl_connections += 1
    sent = b"".join(frames)
    received = bytearray()
    try:
        writer.write(sent)
        report.frames += len(frames)
        report.sasl_frames += len(frames)
        while True:
            try:
                data = await asyncio.wait_for(reader.read(1 << 16), QUIET_S)
            except TimeoutError:
                report.quiet += 1
                return
            if not data:
                report.closed_by_node += 1
                return
            received += data
    except OSError:
        report.closed_by_node += 1
    finally:
        writer.close()
        if context is not None:  # in the clear, the node answers with TLS alerts, not frames
            check_sasl_responses(sent, bytes(received), report)


def tls_api_versions(port: int, context: ssl.SSLContext, timeout: float = PROBE_TIMEOUT_S
                     ) -> dict[int, tuple[int, int]]:
    """``probe_api_versions`` over TLS: the listener's ApiVersions v0 answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as raw, \
            context.wrap_socket(raw, server_hostname="127.0.0.1") as sock:
        sock.sendall(build_api_versions_v0_request(7))
        payload = b""
        while len(payload) < 4 or len(payload) < 4 + struct.unpack(">i", payload[:4])[0]:
            chunk = sock.recv(1 << 16)
            if not chunk:
                raise EOFError("the listener closed the connection")
            payload += chunk
    correlation_id, error_code, apis = parse_api_versions_v0_response(payload[4:])
    if correlation_id != 7 or error_code != 0:
        raise ValueError(f"ApiVersions answered correlation id {correlation_id}, error {error_code}")
    return apis


def sasl_listener_properties(node: StromNode, sasl_port: int, proxy_port: int, pki) -> dict[str, str]:
    """The node's listeners with a SASL_SSL one (SCRAM-SHA-512 and PLAIN; PLAIN's one user)."""
    prefix = f"listener.name.{SASL_LISTENER.lower()}."
    sasl = f"{SASL_LISTENER}://127.0.0.1:{sasl_port}"
    return {
        "listeners": f"PLAINTEXT://127.0.0.1:{node.broker_port},{sasl},CONTROLLER://127.0.0.1:{node.controller_port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{proxy_port},{sasl}",
        "listener.security.protocol.map": f"PLAINTEXT:PLAINTEXT,{SASL_LISTENER}:SASL_SSL,"
                                          "CONTROLLER:PLAINTEXT",
        "inter.broker.listener.name": "PLAINTEXT",
        prefix + "ssl.keystore.type": "PEM",
        prefix + "ssl.keystore.location": pki.server.keystore,
        prefix + "sasl.enabled.mechanisms": ",".join(SASL_MECHANISMS),
        prefix + "plain.sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule required "
                                           f'user_{SASL_USER}="{SASL_PASSWORD}";',
    }


def sasl_client(pki) -> dict[str, str]:
    """A confluent-kafka client's settings for the SASL_SSL listener, as the PLAIN user."""
    return {"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "sasl.username": SASL_USER,
            "sasl.password": SASL_PASSWORD, "ssl.ca.location": pki.ca}


async def probe(port: int, report: Report, context: ssl.SSLContext | None = None) -> None:
    try:
        if context is None:
            call = asyncio.to_thread(probe_api_versions, "127.0.0.1", port, PROBE_TIMEOUT_S)
        else:
            call = asyncio.to_thread(tls_api_versions, port, context, PROBE_TIMEOUT_S)
        await asyncio.wait_for(call, PROBE_TIMEOUT_S + 1)
    except Exception:
        report.hangs += 1


def scan_log(path: str, report: Report) -> None:
    """Counts the log's tracebacks, error lines and stray lines (see ``Report``); lines are cut
    at newlines only, as a reader of the file cuts them."""
    started = False
    with open(path, "rb") as f:
        for raw in f:
            line = raw.decode("utf-8", errors="replace")
            if line.startswith("$ "):  # the launcher's command line: strom format, strom start
                started = " start " in line
                continue
            if started and not LOG_LINE.match(line):
                report.stray_lines += 1
                report.bad_lines.append(f"stray: {line.rstrip()[:300]}")
            if BAD_LOG.search(line):
                if "Traceback" in line or "never retrieved" in line:
                    report.tracebacks += 1
                else:
                    report.errors += 1
                report.bad_lines.append(line.rstrip()[:300])


async def run(frames: int, seed: int, connections: int, base_dir: str | None = None,
              progress: bool = False) -> Report:
    report = Report()
    rng = random.Random(seed)
    proxy_port, sasl_port = free_ports(2)
    node = StromNode(base_dir=base_dir, extra={
        "auto.create.topics.enable": False})  # random names must not become topics
    pki = make_pki(os.path.join(node.dir, "pki"))
    node.properties.update(sasl_listener_properties(node, sasl_port, proxy_port, pki))
    tls = ssl.create_default_context(cafile=pki.ca)
    node.start()
    proxy = RecordingProxy(node.broker_port)
    await proxy.start(proxy_port)
    healthy: list[HealthyClient] = []
    started = time.monotonic()
    try:
        bootstrap = f"127.0.0.1:{proxy_port}"
        await asyncio.to_thread(record_real_clients, bootstrap)
        proxy.recording = False
        report.recorded = len(proxy.frames)
        corpus = {
            node.broker_port: proxy.frames + produce_corpus(rng, 200) + schema_corpus(
                rng, probe_api_versions("127.0.0.1", node.broker_port), 4),
            node.controller_port: schema_corpus(
                rng, probe_api_versions("127.0.0.1", node.controller_port), 4),
            sasl_port: proxy.frames + sasl_corpus(rng) + schema_corpus(
                rng, await asyncio.to_thread(tls_api_versions, sasl_port, tls), 2),
        }
        report.corpus = sum(len(c) for c in corpus.values())
        report.rss_start = report.rss_peak = group_rss(node.proc.pid)
        healthy = [HealthyClient(bootstrap, report.healthy),
                   HealthyClient(f"127.0.0.1:{sasl_port}", report.healthy_sasl, SASL_HEALTHY_TOPIC,
                                 sasl_client(pki))]
        for client in healthy:
            client.start()
        for client in healthy:
            await asyncio.to_thread(client.ready.wait, 30)
        started = time.monotonic()

        async def worker() -> None:
            while report.frames < frames and node.running:
                pick = rng.random()
                if pick < SASL_SHARE:
                    context = None if rng.random() < SASL_CLEAR else tls
                    await sasl_fuzz_connection(sasl_port, sasl_batch(rng, corpus[sasl_port]), report, context)
                    continue
                broker = pick < SASL_SHARE + (1 - SASL_SHARE) * 0.8  # broker 4 : controller 1, as before
                port = node.broker_port if broker else node.controller_port
                batch = [mutate_frame(rng.choice(corpus[port]), rng) for _ in range(rng.randint(1, 8))]
                await fuzz_connection(port, batch, report)

        async def watch() -> None:
            tick = 0
            while report.frames < frames and node.running:
                await asyncio.sleep(1)
                tick += 1
                if progress and tick % 30 == 0:
                    print(f"{tick} s: {report.frames} frames, {report.connections} connections, "
                          f"{report.hangs} hangs, RSS {report.rss_peak >> 20} MiB peak", flush=True)
                report.rss_peak = max(report.rss_peak, group_rss(node.proc.pid))
                await probe(node.broker_port, report)
                await probe(node.controller_port, report)
                await probe(sasl_port, report, tls)

        await asyncio.gather(watch(), *(worker() for _ in range(connections)))
    finally:
        report.seconds = time.monotonic() - started
        for client in healthy:
            client.stopping.set()
        for client in healthy:
            await asyncio.to_thread(client.join, 30)
        report.crashes = 0 if node.running else 1
        if node.running:
            report.rss_end = group_rss(node.proc.pid)
            report.rss_peak = max(report.rss_peak, report.rss_end)
            await asyncio.to_thread(count_state, f"127.0.0.1:{proxy_port}", report)
        await proxy.close()
        node.close()
        scan_log(node.log_path, report)
        if base_dir is None:
            node.cleanup()
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--frames", type=int, default=20000)
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--dir", help="keep the node's directory (its node.log) here")
    args = parser.parse_args(argv)
    report = asyncio.run(run(args.frames, args.seed, args.connections, args.dir, progress=True))
    print("\n".join(report.lines()))
    ok = (report.crashes == report.hangs == report.tracebacks == report.errors == report.stray_lines == 0
          and report.sasl_answered_other == report.sasl_unmatched == 0)
    return 0 if ok and report.healthy.failed == report.healthy_sasl.failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
