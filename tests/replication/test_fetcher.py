"""The replica fetcher against a real Kafka-protocol leader on 127.0.0.1 (leader_server.py), with
real engine Logs in tmp dirs on both sides: what it appends, where it truncates, how it restarts,
when it stops, and which answers it drops. Every test is bounded in time."""
from __future__ import annotations

import asyncio
import dataclasses
import os
import socket

import pytest

from engine.config import LogConfig
from engine.log import Log
from protocol.errors import Error
from replication.fetcher import FetcherConfig, FollowerPartition, ReplicaFetcherManager
from tests.engine.batches import producer_batch

from .leader_server import LeaderServer

LOCAL, LEADER = 2, 1
BROKER_EPOCH = 77
T_ID, U_ID = b"\x0a" * 16, b"\x0b" * 16
CONFIG = FetcherConfig(fetch_wait_max_ms=200, backoff_ms=100, request_timeout_ms=5000)
LOG_CONFIG = LogConfig(segment_bytes=4096, index_interval_bytes=512)
TEST_TIMEOUT_S = 20


OPEN: list = []  # close() of every server and fetcher a scenario started: run() closes them


def run(scenario):
    async def bounded():
        try:
            await asyncio.wait_for(scenario(), TEST_TIMEOUT_S)
        finally:
            while OPEN:
                await asyncio.wait_for(OPEN.pop()(), 5)
    asyncio.run(bounded())


async def leader_server(**kwargs) -> LeaderServer:
    server = LeaderServer(**kwargs)
    await server.start()
    OPEN.append(server.stop)
    return server


async def eventually(predicate, what: str, timeout: float = 5.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


def new_log(tmp_path, side: str, topic: str, partition: int) -> Log:
    return Log(os.path.join(tmp_path, side, f"{topic}-{partition}"), LOG_CONFIG)


def segment_bytes(log: Log) -> dict[str, bytes]:
    out = {}
    for name in sorted(os.listdir(log.dir)):
        if name.endswith(".log"):
            with open(os.path.join(log.dir, name), "rb") as f:
                out[name] = f.read()
    return out


def batch(tag: int, n: int = 10) -> bytearray:
    return producer_batch(n, value_size=60, tag=tag)


class Follower:
    """A ReplicaFetcherManager pointed at one LeaderServer, recording on_appended calls."""

    def __init__(self, server: LeaderServer, config: FetcherConfig = CONFIG):
        self.server = server
        self.appended: list[tuple[str, int]] = []
        self.manager = ReplicaFetcherManager(LOCAL, lambda: BROKER_EPOCH, self.endpoint_of, config,
                                             lambda t, p: self.appended.append((t, p)))
        OPEN.append(self.manager.close)

    def endpoint_of(self, broker_id: int):
        return self.server.endpoint if broker_id == LEADER else None

    def follow(self, topic: str, partition: int, topic_id: bytes, log: Log, epoch: int) -> None:
        self.manager.add_partitions({(topic, partition): FollowerPartition(topic_id, LEADER, epoch, log)})


def test_the_follower_replicates_the_leaders_batches_byte_for_byte(tmp_path):
    async def scenario():
        server = await leader_server()
        leaders = {tp: new_log(tmp_path, "leader", *tp) for tp in [("t", 0), ("u", 0)]}
        followers = {tp: new_log(tmp_path, "follower", *tp) for tp in leaders}
        server.lead("t", 0, T_ID, leaders[("t", 0)], 4)
        server.lead("u", 0, U_ID, leaders[("u", 0)], 4)
        for i in range(12):  # several segments, two leader epochs
            server.append("t", 0, batch(i), epoch=2 if i < 6 else 4)
        server.append("u", 0, batch(100, n=3))
        follower = Follower(server)
        follower.follow("t", 0, T_ID, followers[("t", 0)], 4)
        follower.follow("u", 0, U_ID, followers[("u", 0)], 4)

        def caught_up():
            return all(followers[tp].log_end_offset == leaders[tp].log_end_offset for tp in leaders)
        await eventually(caught_up, "the follower to reach the leader's log end offset")
        server.append("t", 0, batch(12), epoch=4)  # wakes the parked Fetch
        await eventually(caught_up, "the follower to fetch the new batch")
        await eventually(
            lambda: all(followers[tp].high_watermark == leaders[tp].log_end_offset for tp in leaders),
            "the follower's high watermark to follow the leader's")
        for tp, leader in leaders.items():
            assert len(leader.segments) > 1 or tp == ("u", 0)
            assert segment_bytes(followers[tp]) == segment_bytes(leader)
            assert followers[tp].leader_epoch_cache.entries() == leader.leader_epoch_cache.entries()
        assert followers[("t", 0)].leader_epoch_cache.entries() == [(2, 0), (4, 60)]
        assert ("t", 0) in follower.appended and ("u", 0) in follower.appended

        version, request = server.fetches[-1]
        assert version == 16
        state = request.replica_state
        assert (state.replica_id, state.replica_epoch) == (LOCAL, BROKER_EPOCH)
        assert (request.max_wait_ms, request.min_bytes, request.max_bytes) == (200, 1, 10485760)
        assert len(request.topics) == 2, "one Fetch carries every partition of the source broker"
        assert {bytes(t.topic_id) for t in request.topics} == {T_ID, U_ID}
        part = next(t for t in request.topics if bytes(t.topic_id) == T_ID).partitions[0]
        assert (part.current_leader_epoch, part.last_fetched_epoch) == (4, 4)
        assert (part.fetch_offset, part.partition_max_bytes) == (130, 1048576)
        await follower.manager.close()
        await server.stop()
    run(scenario)


def test_a_high_watermark_that_moves_without_records_is_reported_like_an_append(tmp_path):
    """Consumers reading from a follower (KIP-392) wait for its high watermark: Kafka's fetcher
    completes delayed fetches on a new high watermark as on new records."""
    async def scenario():
        server = await leader_server()
        leader_log, follower_log = new_log(tmp_path, "leader", "t", 0), new_log(tmp_path, "follower", "t", 0)
        server.lead("t", 0, T_ID, leader_log, 4)
        server.append("t", 0, batch(0), epoch=4)
        follower = Follower(server)
        follower.follow("t", 0, T_ID, follower_log, 4)
        await eventually(lambda: follower_log.log_end_offset == 10, "the records")
        assert follower_log.high_watermark == 0  # they came with the high watermark of before
        await eventually(lambda: follower_log.high_watermark == 10, "the follower's high watermark")
        assert follower.appended == [("t", 0), ("t", 0)]  # the records, then the high watermark alone
    run(scenario)


@pytest.mark.parametrize("fetch_max_version", [12, 13, 18])
def test_the_fetch_version_is_negotiated_with_api_versions(tmp_path, fetch_max_version):
    async def scenario():
        server = await leader_server(fetch_max_version=fetch_max_version)
        leader, mine = new_log(tmp_path, "leader", "t", 0), new_log(tmp_path, "follower", "t", 0)
        server.lead("t", 0, T_ID, leader, 1)
        for i in range(3):
            server.append("t", 0, batch(i))
        follower = Follower(server)
        follower.follow("t", 0, T_ID, mine, 1)
        await eventually(lambda: mine.log_end_offset == leader.log_end_offset, "replication")
        assert segment_bytes(mine) == segment_bytes(leader)
        version, request = server.fetches[-1]
        assert version == fetch_max_version
        if version >= 15:
            assert request.replica_state.replica_id == LOCAL
        else:
            assert request.replica_id == LOCAL
        if version >= 18:  # KIP-1166: the follower says how far its high watermark got
            assert 0 <= request.topics[0].partitions[0].high_watermark <= mine.log_end_offset
        await follower.manager.close()
        await server.stop()
    run(scenario)


def test_a_returning_follower_truncates_exactly_the_diverging_tail(tmp_path):
    """The chapter's example: the leader's cache says epoch 5 -> 100, epoch 7 -> 130; the follower
    holds epoch 5 up to offset 142. It truncates 130..142 and fetches from 130 in epoch 7."""
    async def scenario():
        server = await leader_server()
        leader, mine = new_log(tmp_path, "leader", "t", 0), new_log(tmp_path, "follower", "t", 0)
        for i in range(13):  # offsets 0..129 on both: epoch 3 up to 99, epoch 5 from 100
            for log in (leader, mine):
                log.append_as_leader(batch(i), 3 if i < 10 else 5)
        mine.append_as_leader(batch(50), 5)  # 130..139: written by the old leader, never committed
        mine.append_as_leader(batch(51, n=3), 5)  # 140..142
        mine.update_high_watermark(120)
        for i in range(20, 23):
            leader.append_as_leader(batch(i), 7)  # 130..159 in epoch 7
        assert leader.leader_epoch_cache.entries() == [(3, 0), (5, 100), (7, 130)]
        assert (mine.log_end_offset, mine.latest_epoch) == (143, 5)
        server.lead("t", 0, T_ID, leader, 7)
        follower = Follower(server)
        follower.follow("t", 0, T_ID, mine, 7)
        await eventually(lambda: mine.log_end_offset == 160, "the follower to catch up")
        fetched = server.fetched_offsets("t", 0)
        assert fetched[:2] == [(143, 5), (130, 5)]
        assert all(offset > 130 and epoch == 7 for offset, epoch in fetched[2:]), \
            "nothing below the divergence is fetched again"
        assert segment_bytes(mine) == segment_bytes(leader)
        assert mine.leader_epoch_cache.entries() == [(3, 0), (5, 100), (7, 130)]
        await follower.manager.close()
        await server.stop()
    run(scenario)


def test_an_epoch_the_leader_never_had_truncates_in_rounds(tmp_path):
    """KIP-279: our last epoch 6 is unknown to the leader (epochs 3, 5 and 8); its answer names
    epoch 5, which we never had, so we truncate to the end of our epoch 3 and ask again."""
    async def scenario():
        server = await leader_server()
        leader, mine = new_log(tmp_path, "leader", "t", 0), new_log(tmp_path, "follower", "t", 0)
        for i in range(5):
            for log in (leader, mine):
                log.append_as_leader(batch(i), 3)  # 0..49
        mine.append_as_leader(batch(30), 6)  # 50..59, epoch 6 never committed
        leader.append_as_leader(batch(40), 5)  # 50..59
        leader.append_as_leader(batch(41), 5)  # 60..69
        leader.assign_epoch_start_offset(8, 70)  # what make_leader does in epoch 8
        server.lead("t", 0, T_ID, leader, 8)
        follower = Follower(server)
        follower.follow("t", 0, T_ID, mine, 8)
        # Caught up at 70, and fetching on from there: the Fetch at 70 follows the append of 69.
        await eventually(lambda: mine.log_end_offset == 70 and len(server.fetched_offsets("t", 0)) >= 3,
                         "the follower to catch up and fetch on")
        assert server.fetched_offsets("t", 0)[:3] == [(60, 6), (50, 3), (70, 5)]
        assert segment_bytes(mine) == segment_bytes(leader)
        await follower.manager.close()
        await server.stop()
    run(scenario)


def test_out_of_range_restarts_the_log_at_the_leaders_log_start(tmp_path):
    async def scenario():
        server = await leader_server()
        leader, mine = new_log(tmp_path, "leader", "t", 0), new_log(tmp_path, "follower", "t", 0)
        leader.truncate_fully_and_start_at(1000)  # the leader deleted everything below 1000
        for i in range(4):
            leader.append_as_leader(batch(i), 4)
        mine.append_as_leader(batch(90), 2)  # 0..9, long gone on the leader
        mine.update_high_watermark(10)
        server.lead("t", 0, T_ID, leader, 4)
        follower = Follower(server)
        follower.follow("t", 0, T_ID, mine, 4)
        await eventually(lambda: mine.log_end_offset == 1040, "the follower to catch up")
        assert mine.log_start_offset == 1000
        assert segment_bytes(mine) == segment_bytes(leader)
        assert list(segment_bytes(mine))[0] == "00000000000000001000.log"
        assert mine.leader_epoch_cache.entries() == [(4, 1000)]
        asked = [(v, r.replica_id, p.timestamp, p.current_leader_epoch)
                 for v, r in server.list_offsets for t in r.topics for p in t.partitions]
        assert sorted(asked) == [(8, LOCAL, -2, 4), (8, LOCAL, -1, 4)]
        await follower.manager.close()
        await server.stop()
    run(scenario)


def test_fenced_epoch_stops_the_partition_until_a_newer_epoch_is_added(tmp_path):
    async def scenario():
        server = await leader_server()
        tps = [("t", 0), ("t", 1), ("t", 2)]
        leaders = {tp: new_log(tmp_path, "leader", *tp) for tp in tps}
        mine = {tp: new_log(tmp_path, "follower", *tp) for tp in tps}
        for tp in tps:
            server.lead(*tp, T_ID, leaders[tp], 5)
            server.append(*tp, batch(tp[1]))
        server.errors[("t", 1)] = Error.FENCED_LEADER_EPOCH
        follower = Follower(server)
        follower.follow("t", 0, T_ID, mine[("t", 0)], 5)
        follower.follow("t", 1, T_ID, mine[("t", 1)], 5)
        follower.follow("t", 2, T_ID, mine[("t", 2)], 4)  # older than the leader's: FENCED_LEADER_EPOCH
        for i in range(3):  # several Fetch rounds for t-0
            server.append("t", 0, batch(10 + i))
            await eventually(lambda: mine[("t", 0)].log_end_offset == leaders[("t", 0)].log_end_offset,
                             "t-0 to replicate")
        assert len(server.fetched_offsets("t", 1)) == 1
        assert len(server.fetched_offsets("t", 2)) == 1
        assert follower.manager.fetch_state("t", 1) is None and follower.manager.fetch_state("t", 2) is None
        assert mine[("t", 1)].log_end_offset == 0 and mine[("t", 2)].log_end_offset == 0

        follower.follow("t", 1, T_ID, mine[("t", 1)], 5)  # the same epoch again: still stopped
        server.append("t", 0, batch(20))
        await eventually(lambda: mine[("t", 0)].log_end_offset == leaders[("t", 0)].log_end_offset,
                         "t-0 to replicate")
        assert len(server.fetched_offsets("t", 1)) == 1

        del server.errors[("t", 1)]
        server.partitions[("t", 1)].leader_epoch = 6
        follower.follow("t", 1, T_ID, mine[("t", 1)], 6)
        follower.follow("t", 2, T_ID, mine[("t", 2)], 5)
        await eventually(lambda: all(mine[tp].log_end_offset == leaders[tp].log_end_offset for tp in tps),
                         "t-1 and t-2 to replicate in their new epochs")
        assert segment_bytes(mine[("t", 1)]) == segment_bytes(leaders[("t", 1)])
        await follower.manager.close()
        await server.stop()
    run(scenario)


def test_unknown_leader_epoch_is_retried_after_the_backoff(tmp_path):
    async def scenario():
        server = await leader_server()
        leader, mine = new_log(tmp_path, "leader", "t", 0), new_log(tmp_path, "follower", "t", 0)
        server.lead("t", 0, T_ID, leader, 5)  # the leader has not learnt epoch 6 yet
        server.append("t", 0, batch(0))
        follower = Follower(server, FetcherConfig(fetch_wait_max_ms=200, backoff_ms=300))
        follower.follow("t", 0, T_ID, mine, 6)
        await eventually(lambda: len(server.fetches) >= 3, "three refused Fetches")
        gaps = [b - a for a, b in zip(server.fetch_times, server.fetch_times[1:])]
        assert all(gap >= 0.28 for gap in gaps), gaps
        server.partitions[("t", 0)].leader_epoch = 6
        await eventually(lambda: mine.log_end_offset == leader.log_end_offset, "replication in epoch 6")
        await follower.manager.close()
        await server.stop()
    run(scenario)


def test_the_fetcher_reconnects_after_the_leader_restarts(tmp_path):
    async def scenario():
        server = await leader_server()
        port = server.port
        leader, mine = new_log(tmp_path, "leader", "t", 0), new_log(tmp_path, "follower", "t", 0)
        server.lead("t", 0, T_ID, leader, 1)
        server.append("t", 0, batch(0))
        follower = Follower(server)
        follower.follow("t", 0, T_ID, mine, 1)
        await eventually(lambda: mine.log_end_offset == 10, "replication")
        await server.stop()
        leader.append_as_leader(batch(1), 1)
        leader.append_as_leader(batch(2), 1)
        await asyncio.sleep(0.3)  # a few failed reconnects (backoff 100 ms)
        assert mine.log_end_offset == 10
        # Its port refuses connections: reported unreachable (Metadata: leader not available).
        assert follower.manager.unreachable(LEADER)
        fetches_while_down = len(server.fetches)
        await server.start(port)
        await eventually(lambda: mine.log_end_offset == 30, "replication after the restart")
        assert not follower.manager.unreachable(LEADER)
        assert len(server.fetches) > fetches_while_down
        assert segment_bytes(mine) == segment_bytes(leader)
        await follower.manager.close()
        await server.stop()
    run(scenario)


def test_an_answer_for_a_removed_or_re_added_partition_is_dropped(tmp_path):
    async def scenario():
        server = await leader_server()
        tps = [("t", 0), ("t", 1)]
        leaders = {tp: new_log(tmp_path, "leader", *tp) for tp in tps}
        mine = {tp: new_log(tmp_path, "follower", *tp) for tp in tps}
        for tp in tps:
            server.lead(*tp, T_ID, leaders[tp], 5)
            server.append(*tp, batch(tp[1]))
        follower = Follower(server, FetcherConfig(fetch_wait_max_ms=3000, backoff_ms=100))
        for tp in tps:
            follower.follow(*tp, T_ID, mine[tp], 5)
        await eventually(lambda: all(mine[tp].log_end_offset == 10 for tp in tps), "replication")

        # Removed while its Fetch is parked on the leader: the answer carrying new records is dropped.
        await eventually(lambda: server.parked == 1, "a parked Fetch")
        follower.manager.remove_partitions([("t", 0)])
        appended_before = follower.appended.count(("t", 0))
        server.append("t", 0, batch(20))
        await eventually(lambda: server.parked == 1 and len(server.fetched_offsets("t", 1)) >= 3,
                         "the next Fetch, without t-0")
        assert mine[("t", 0)].log_end_offset == 10
        assert follower.appended.count(("t", 0)) == appended_before  # (t-1's high watermark moves)
        assert [p.partition for p in server.fetches[-1][1].topics[0].partitions] == [1]

        # Re-added in a newer epoch while a Fetch in the old one is parked: the leader's answer to
        # the old epoch (FENCED_LEADER_EPOCH) is dropped, not taken as a reason to stop.
        follower.follow("t", 0, T_ID, mine[("t", 0)], 5)
        server.append("t", 1, batch(30))  # ends the parked Fetch, so the next one carries t-0 again
        await eventually(lambda: mine[("t", 0)].log_end_offset == 20 and server.parked == 1,
                         "t-0 back and a parked Fetch")
        follower.follow("t", 0, T_ID, mine[("t", 0)], 6)
        server.partitions[("t", 0)].leader_epoch = 6
        server.append("t", 0, batch(21))
        await eventually(lambda: mine[("t", 0)].log_end_offset == 30, "t-0 to replicate in epoch 6")
        assert follower.manager.fetch_state("t", 0).current_leader_epoch == 6
        await follower.manager.close()
        await server.stop()
    run(scenario)


def test_not_leader_or_follower_is_retried_after_the_backoff(tmp_path):
    async def scenario():
        server = await leader_server()
        leader, mine = new_log(tmp_path, "leader", "t", 0), new_log(tmp_path, "follower", "t", 0)
        server.lead("t", 0, T_ID, leader, 5)
        server.append("t", 0, batch(0))
        server.errors[("t", 0)] = Error.NOT_LEADER_OR_FOLLOWER  # e.g. the leader lags the metadata
        follower = Follower(server, FetcherConfig(fetch_wait_max_ms=200, backoff_ms=300))
        follower.follow("t", 0, T_ID, mine, 5)
        await eventually(lambda: len(server.fetches) >= 2, "two refused Fetches")
        del server.errors[("t", 0)]
        await eventually(lambda: mine.log_end_offset == leader.log_end_offset, "t-0 to replicate")
        await follower.manager.close()
        await server.stop()
    run(scenario)


def test_a_fetcher_with_nothing_to_fetch_sends_nothing(tmp_path):
    async def scenario():
        server = await leader_server()
        leader, mine = new_log(tmp_path, "leader", "t", 0), new_log(tmp_path, "follower", "t", 0)
        server.lead("t", 0, T_ID, leader, 1)
        server.errors[("t", 0)] = Error.FENCED_LEADER_EPOCH
        follower = Follower(server)
        follower.follow("t", 0, T_ID, mine, 1)
        await eventually(lambda: len(server.fetches) == 1, "one Fetch")
        await asyncio.sleep(0.5)
        assert len(server.fetches) == 1
        assert follower.manager.sources() == {LEADER: [("t", 0)]}
        follower.manager.remove_partitions([("t", 0)])
        assert follower.manager.sources() == {}
        await follower.manager.close()
        await server.stop()
    run(scenario)


def test_the_fetchers_connection_has_replica_socket_receive_buffer_bytes(tmp_path):
    assert FetcherConfig().socket_receive_buffer_bytes == -1, "the OS's sizing unless set"

    async def scenario():
        server = await leader_server()
        leader, mine = new_log(tmp_path, "leader", "t", 0), new_log(tmp_path, "follower", "t", 0)
        server.lead("t", 0, T_ID, leader, 1)
        server.append("t", 0, batch(0), epoch=1)
        follower = Follower(server, dataclasses.replace(CONFIG, socket_receive_buffer_bytes=32768))
        follower.follow("t", 0, T_ID, mine, 1)
        await eventually(lambda: mine.log_end_offset == leader.log_end_offset, "the follower to catch up")
        conns = [f.conn for f in follower.manager._fetchers.values() if f.conn is not None]
        assert conns, "the fetcher is connected"
        for conn in conns:
            sock = conn._transport.get_extra_info("socket")
            assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF) == 2 * 32768  # Linux doubles it
    run(scenario)
