"""The transaction marker channel (broker/transactions/markers.py): Kafka's
TransactionMarkerRequestCompletionHandler's rules, the grouping by leader, and the retry of
a partition across a leader move, against real listeners on loopback."""
from __future__ import annotations

import asyncio
from types import SimpleNamespace

from broker.transactions.coordinator import MarkerRequest, TransactionCoordinator
from broker.transactions.markers import (
    ABORT,
    GONE,
    NO_LEADER,
    RETRY,
    WRITTEN,
    MarkerChannel,
    Pending,
    build_request,
    group_by_leader,
    outcome,
    partition_errors,
)
from protocol import messages as M
from protocol.dispatch import Api, Dispatcher
from protocol.errors import Error
from protocol.net import Server


def marker(tid="t", pid=7, partitions=(("a", 0), ("a", 1), ("b", 0)), epoch=3, coordinator_epoch=5):
    return MarkerRequest(tid, pid, epoch, True, coordinator_epoch, list(partitions), 2)


def test_marker_answers_follow_kafkas_completion_handler():
    assert outcome(Error.NONE) == WRITTEN
    # the producer could not have written there: dropped as written
    assert outcome(Error.UNSUPPORTED_FOR_MESSAGE_FORMAT) == WRITTEN
    assert outcome(Error.UNSUPPORTED_VERSION) == WRITTEN
    # a newer coordinator owns the transaction: its markers are dropped
    assert outcome(Error.INVALID_PRODUCER_EPOCH) == ABORT
    assert outcome(Error.TRANSACTION_COORDINATOR_FENCED) == ABORT
    for retriable in (Error.NOT_LEADER_OR_FOLLOWER, Error.UNKNOWN_TOPIC_OR_PARTITION,
                      Error.NOT_ENOUGH_REPLICAS,
                      Error.NOT_ENOUGH_REPLICAS_AFTER_APPEND, Error.REQUEST_TIMED_OUT,
                      Error.KAFKA_STORAGE_ERROR, Error.NETWORK_EXCEPTION):
        assert outcome(retriable) == RETRY, Error(retriable).name


def test_partitions_are_grouped_by_their_current_leader_deleted_ones_dropped_leaderless_ones_wait():
    first = Pending(marker("t1", 1), {("a", 0), ("a", 1), ("gone", 0), ("b", 0)})
    second = Pending(marker("t2", 2), {("a", 0), ("c", 0)}, in_flight={("c", 0)})
    leaders = {("a", 0): 1, ("a", 1): 2, ("b", 0): NO_LEADER, ("c", 0): 1, ("gone", 0): GONE}
    by_leader, gone = group_by_leader([first, second], leaders.__getitem__)
    assert by_leader == {1: [(first, [("a", 0)]), (second, [("a", 0)])], 2: [(first, [("a", 1)])]}
    assert gone == [(first, [("gone", 0)])]


def test_one_request_per_leader_carries_each_transactions_marker_and_answers_match_by_producer_id():
    first, second = Pending(marker("t1", 1)), Pending(marker("t2", 2, epoch=9))
    items = [(first, [("a", 0), ("b", 0)]), (second, [("a", 0)])]
    request = build_request(items)
    assert [(m.producer_id, m.producer_epoch, m.transaction_result, m.coordinator_epoch,
             m.transaction_version, [(t.name, t.partition_indexes) for t in m.topics])
            for m in request.markers] == [
        (1, 3, True, 5, 2, [("a", [0]), ("b", [0])]), (2, 9, True, 5, 2, [("a", [0])])]
    R = M.WriteTxnMarkersResponse.WritableTxnMarkerResult
    TR = R.WritableTxnMarkerTopicResult
    response = M.WriteTxnMarkersResponse(markers=[  # in another order, and t1's b-0 left out
        R(producer_id=2, topics=[TR(name="a", partitions=[TR.WritableTxnMarkerPartitionResult(
            partition_index=0, error_code=Error.NOT_LEADER_OR_FOLLOWER)])]),
        R(producer_id=1, topics=[TR(name="a", partitions=[TR.WritableTxnMarkerPartitionResult(
            partition_index=0, error_code=Error.NONE)])])])
    assert partition_errors(response, items) == [
        {("a", 0): Error.NONE, ("b", 0): Error.REQUEST_TIMED_OUT},
        {("a", 0): Error.NOT_LEADER_OR_FOLLOWER}]


class Leader:
    """A listener that answers WriteTxnMarkers with ``answer(topic, partition)`` per partition."""

    def __init__(self, answer):
        self.received: list[tuple[int, str, int]] = []

        async def handle(header, req):
            R = M.WriteTxnMarkersResponse.WritableTxnMarkerResult
            TR = R.WritableTxnMarkerTopicResult
            out = []
            for m in req.markers:
                topics = []
                for t in m.topics:
                    for p in t.partition_indexes:
                        self.received.append((m.producer_id, t.name, p))
                    topics.append(TR(name=t.name, partitions=[TR.WritableTxnMarkerPartitionResult(
                        partition_index=p, error_code=answer(t.name, p)) for p in t.partition_indexes]))
                out.append(R(producer_id=m.producer_id, topics=topics))
            return M.WriteTxnMarkersResponse(markers=out)

        self.server = Server(Dispatcher([Api(27, 1, 2, handle)]).handle, 1 << 20)
        self.port = self.server.bind("127.0.0.1", 0)
        self.server.start()


def fake_runtime(leaders: dict[tuple[str, int], int], endpoints: dict[int, int], owned: dict[int, int]):
    core = TransactionCoordinator(lambda: None, num_partitions=1)
    core.owned.update(owned)
    written: list[tuple[str, int, list]] = []

    def image_topics():
        topics: dict[str, SimpleNamespace] = {}
        for (t, p), leader in leaders.items():
            topic = topics.setdefault(t, SimpleNamespace(partitions={}))
            topic.partitions[p] = SimpleNamespace(leader=leader)
        return topics

    class Broker:
        node_id = 0
        replicas = SimpleNamespace(brokers=SimpleNamespace(
            endpoint_of=lambda b: ("127.0.0.1", endpoints[b]) if b in endpoints else None))

        @property
        def image(self):
            return SimpleNamespace(topics=image_topics())

    broker = Broker()
    runtime = SimpleNamespace(core=core, broker=broker, written=written,
                              markers_written=lambda tid, epoch, tps: written.append((tid, epoch, list(tps))))
    return runtime


async def until(predicate, timeout=10.0):
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.01)


def test_a_partition_whose_leader_moved_is_retried_at_its_new_leader_until_written():
    async def scenario():
        old = Leader(lambda t, p: Error.NOT_LEADER_OR_FOLLOWER if (t, p) == ("a", 1) else Error.NONE)
        new = Leader(lambda t, p: Error.NONE)
        leaders = {("a", 0): 1, ("a", 1): 1}
        runtime = fake_runtime(leaders, {1: old.port, 2: new.port}, {0: 5})
        channel = MarkerChannel(runtime)
        channel.start()
        try:
            channel.add(marker("t", 7, [("a", 0), ("a", 1)]))
            await until(lambda: ("t", 5, [("a", 0)]) in runtime.written)
            await until(lambda: old.received.count((7, "a", 1)) >= 2)  # refused, retried there
            assert channel.pending["t"].remaining == {("a", 1)}
            leaders[("a", 1)] = 2  # the leader moved
            await until(lambda: ("t", 5, [("a", 1)]) in runtime.written)
            assert new.received == [(7, "a", 1)]
            assert "t" not in channel.pending
        finally:
            await channel.stop()
            await old.server.close()
            await new.server.close()
    asyncio.run(scenario())


def test_markers_of_a_partition_the_coordinator_no_longer_owns_are_dropped_and_a_fenced_one_abandoned():
    async def scenario():
        leader = Leader(lambda t, p: Error.TRANSACTION_COORDINATOR_FENCED if t == "fenced"
                        else Error.NOT_LEADER_OR_FOLLOWER)
        runtime = fake_runtime({("fenced", 0): 1, ("slow", 0): 1}, {1: leader.port}, {0: 5})
        channel = MarkerChannel(runtime)
        channel.start()
        try:
            channel.add(marker("f", 1, [("fenced", 0)]))
            channel.add(marker("s", 2, [("slow", 0)]))
            await until(lambda: "f" not in channel.pending)
            assert "s" in channel.pending
            runtime.core.owned[0] = 6  # reloaded at a newer coordinator epoch
            await until(lambda: "s" not in channel.pending)
            assert runtime.written == []
        finally:
            await channel.stop()
            await leader.server.close()
    asyncio.run(scenario())


def test_a_partition_of_a_deleted_topic_is_dropped_as_written():
    async def scenario():
        runtime = fake_runtime({}, {}, {0: 5})
        channel = MarkerChannel(runtime)
        channel.start()
        try:
            channel.add(marker("t", 7, [("deleted", 0)]))
            await until(lambda: runtime.written == [("t", 5, [("deleted", 0)])])
            assert channel.pending == {}
        finally:
            await channel.stop()
    asyncio.run(scenario())
