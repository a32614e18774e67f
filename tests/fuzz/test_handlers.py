"""Decoded but hostile requests through a broker's real Dispatcher and handlers.

A one-broker cluster without sockets (tests/broker/replica_nodes.py, tests/groups/
coordinator_node.py): topic ``t`` (2 partitions) and ``__consumer_offsets`` on broker 1, the
produce, fetch, offsets, metadata and group handlers behind one protocol.dispatch.Dispatcher.
Requests are drawn from the schemas at every served version with nulls only where the schema
allows them (the decoders refuse the rest, tests/fuzz/test_decoders.py), then made hostile:
names empty, 300 characters, unknown or the real ones, partitions negative or far out of
range, topic ids unknown, counts large. Each goes in as a frame; what comes out must be a
response that decodes (its error codes are the answer) or a close, and nothing may be logged
at ERROR or as an encoding failure (each of those is a traceback or a dropped connection in
a real broker's log).
"""
from __future__ import annotations

import asyncio
import logging
import random

import pytest

from protocol import messages
from protocol.dispatch import Deferred, Dispatcher
from protocol.headers import read_response_header
from protocol.types import Reader
from tests.broker.replica_nodes import TOPIC, TOPIC_ID, Cluster
from tests.fuzz.frames import RandomSource, encode_loose, request_frame, request_value
from tests.groups.coordinator_node import CoordinatorNode, create_offsets_topic

NAMES = ("", TOPIC, "__consumer_offsets", "g", "x" * 300, "unknown", "ëß日本")
IDS = (TOPIC_ID, bytes(16), bytes(range(16)))
INTS = (-(1 << 31), -2, -1, 0, 1, 2, 1 << 20, (1 << 31) - 1)
TIME_FIELDS = ("timeout_ms", "max_wait_ms", "session_timeout_ms", "rebalance_timeout_ms",
               "transaction_timeout_ms")
WAIT_S = 5.0


class HostileSource(RandomSource):
    """Draws real and bad names, ids and partitions (by field name); waits stay short."""

    def integer(self, lo: int, hi: int) -> int:
        if self.field.endswith(TIME_FIELDS):
            return max(lo, min(hi, self.rng.choice((-1, 0, 10))))
        if self.rng.random() < 0.5:
            return self.rng.choice([v for v in INTS if lo <= v <= hi] or [lo])
        return super().integer(lo, hi)

    def text(self, hi: int) -> str:
        return self.rng.choice(NAMES) if self.rng.random() < 0.6 else super().text(hi)

    def raw(self, lo: int, hi: int) -> bytes:
        if lo == hi == 16 and self.rng.random() < 0.6:
            return self.rng.choice(IDS)
        return super().raw(lo, hi)


async def broker_dispatcher(tmp_path) -> tuple[Dispatcher, CoordinatorNode]:
    cluster = Cluster(brokers=(1,))
    cluster.create_topic(replicas=(1,), partitions=2)
    create_offsets_topic(cluster, replicas=(1,))
    coordinator = CoordinatorNode(tmp_path, 1, cluster)
    await coordinator.sync()
    node = coordinator.node
    apis = [*node.apis.values(), *coordinator.apis.values(), *node.metadata_handlers().apis()]
    return Dispatcher([a for a in apis if a.key != 22]), coordinator


async def send(dispatcher: Dispatcher, frame: bytes):
    """The parts answered (or None: closed), as protocol/net.py would get them."""
    parts = await dispatcher.handle(memoryview(bytearray(frame[4:])))
    if isinstance(parts, Deferred):
        parts = await asyncio.wait_for(parts.response, WAIT_S)
    return parts


def check_answer(parts, api_key: int, version: int, correlation_id: int) -> None:
    if parts is None or parts == []:
        return
    data = b"".join(p if isinstance(p, bytes) else bytes(p) for p in parts
                    if isinstance(p, (bytes, bytearray, memoryview)))
    r = Reader(data[4:])
    assert read_response_header(r, api_key, version) == correlation_id
    if all(isinstance(p, (bytes, bytearray, memoryview)) for p in parts):
        messages.RESPONSES[api_key].decode(version, r)


def assert_clean_log(caplog) -> None:
    bad = [r for r in caplog.records
           if r.levelno >= logging.ERROR or r.exc_info or "cannot encode" in r.getMessage()]
    assert not bad, "\n".join(f"{r.levelname} {r.name}: {r.getMessage()}" for r in bad)


async def send_every_api(dispatcher, src, per_version: int) -> int:
    """``per_version`` hostile requests of every API and version the dispatcher serves, each
    answer checked; how many were sent."""
    sent = 0
    for api in sorted(dispatcher.apis.values(), key=lambda a: a.key):
        for version in range(api.min_version, api.max_version + 1):
            for i in range(per_version):
                request = request_value(src, api.key, version)
                frame = request_frame(api.key, version, i, encode_loose(api.key, version, request))
                check_answer(await send(dispatcher, frame), api.key, version, i)
                sent += 1
    return sent


def fuzz_handlers(tmp_path, caplog, seed: int, per_version: int) -> int:
    caplog.set_level(logging.INFO)

    async def main() -> int:
        dispatcher, coordinator = await broker_dispatcher(tmp_path)
        rng = random.Random(seed)
        src = HostileSource(rng)
        try:
            return await send_every_api(dispatcher, src, per_version)
        finally:
            await coordinator.runtime.stop()

    sent = asyncio.run(main())
    assert_clean_log(caplog)
    return sent


def test_hostile_requests_get_error_codes_or_a_close_never_an_exception(tmp_path, caplog):
    assert fuzz_handlers(tmp_path, caplog, seed=13, per_version=15) > 1500


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(5))
def test_hostile_requests_heavy(tmp_path, caplog, seed):
    fuzz_handlers(tmp_path, caplog, seed=seed, per_version=200)


def fuzz_controller(caplog, seed: int, per_version: int) -> int:
    """The same against a controller's Dispatcher (QuorumController and KRaft handlers on a
    single-voter RaftDriver, tests/controller/test_shell.py), its cluster id among the names."""
    from tests.controller.test_shell import CLUSTER_ID, Controller
    caplog.set_level(logging.INFO)

    class ControllerSource(HostileSource):
        def text(self, hi: int) -> str:
            if self.field == "cluster_id" and self.rng.random() < 0.5:
                return CLUSTER_ID
            return super().text(hi)

    async def main() -> int:
        rng = random.Random(seed)
        src = ControllerSource(rng)
        async with Controller() as controller:
            return await send_every_api(controller.dispatcher, src, per_version)

    sent = asyncio.run(main())
    assert_clean_log(caplog)
    return sent


def test_hostile_requests_to_the_controller_get_error_codes_or_a_close(caplog):
    assert fuzz_controller(caplog, seed=13, per_version=8) > 300


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(3))
def test_hostile_requests_to_the_controller_heavy(caplog, seed):
    fuzz_controller(caplog, seed=seed, per_version=100)
