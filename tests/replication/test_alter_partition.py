"""AlterPartitionManager against a scripted controller (the ``send`` it is given): one request in
flight for the whole broker, batching, replacement of queued proposals, retries after the
backoff, and each partition's answer routed to ``on_result``."""
from __future__ import annotations

import asyncio

from protocol import messages as M
from replication import errors
from replication.alter_partition import AlterPartitionManager
from replication.isr import RECOVERED, RECOVERING, LeaderAndIsr

T1, T2 = b"\x01" * 16, b"\x02" * 16
BROKER = 1
TEST_TIMEOUT_S = 10


def run(scenario):
    async def bounded():
        await asyncio.wait_for(scenario(), TEST_TIMEOUT_S)
    asyncio.run(bounded())


def proposal(isr, partition_epoch=5, leader_epoch=3, recovery=RECOVERED) -> LeaderAndIsr:
    return LeaderAndIsr.build(BROKER, leader_epoch, [(b, 100 + b) for b in isr], recovery, partition_epoch)


def answer_all(request, error=errors.NONE, skip=()) -> object:
    """The controller's answer committing every proposal of ``request`` at partition epoch + 1."""
    R = M.AlterPartitionResponse
    topics = []
    for t in request.topics:
        parts = []
        for p in t.partitions:
            if (bytes(t.topic_id), p.partition_index) in skip:
                continue
            parts.append(R.TopicData.PartitionData(
                partition_index=p.partition_index, error_code=error,
                leader_id=request.broker_id if error == 0 else -1,
                leader_epoch=p.leader_epoch if error == 0 else -1,
                isr=[s.broker_id for s in p.new_isr_with_epochs] if error == 0 else [],
                leader_recovery_state=p.leader_recovery_state,
                partition_epoch=p.partition_epoch + 1 if error == 0 else -1))
        topics.append(R.TopicData(topic_id=t.topic_id, partitions=parts))
    return R(throttle_time_ms=0, error_code=errors.NONE, topics=topics)


class Controller:
    """A ``send`` whose answers the test releases one request at a time."""

    def __init__(self) -> None:
        self.requests: list = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.arrived: asyncio.Queue = asyncio.Queue()
        self.answers: asyncio.Queue = asyncio.Queue()

    async def send(self, request):
        self.requests.append(request)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        await self.arrived.put(request)
        try:
            answer = await self.answers.get()
        finally:
            self.in_flight -= 1
        if isinstance(answer, BaseException):
            raise answer
        return answer(request) if callable(answer) else answer

    async def next_request(self):
        return await self.arrived.get()


class Results:
    def __init__(self) -> None:
        self.calls: list[tuple] = []
        self.event = asyncio.Event()

    def __call__(self, topic_id, partition, sent, error, result) -> None:
        self.calls.append((topic_id, partition, sent, error, result))
        self.event.set()

    async def wait_for(self, n: int) -> None:
        while len(self.calls) < n:
            self.event.clear()
            await self.event.wait()


def sent_partitions(request) -> dict[tuple[bytes, int], tuple]:
    return {(bytes(t.topic_id), p.partition_index):
            (p.leader_epoch, tuple((s.broker_id, s.broker_epoch) for s in p.new_isr_with_epochs),
             p.leader_recovery_state, p.partition_epoch)
            for t in request.topics for p in t.partitions}


def test_request_carries_broker_epoch_and_v3_isr_with_broker_epochs_grouped_by_topic_id():
    async def scenario():
        controller, results = Controller(), Results()
        manager = AlterPartitionManager(BROKER, lambda: 42, controller.send, results)
        manager.submit(T1, 0, proposal([1, 2, 3]))
        manager.submit(T1, 1, proposal([1, 3], partition_epoch=9, recovery=RECOVERING))
        manager.submit(T2, 0, proposal([1]))
        request = await controller.next_request()
        assert request.broker_id == BROKER and request.broker_epoch == 42
        assert sorted(bytes(t.topic_id) for t in request.topics) == [T1, T2]
        assert sent_partitions(request) == {
            (T1, 0): (3, ((1, 101), (2, 102), (3, 103)), RECOVERED, 5),
            (T1, 1): (3, ((1, 101), (3, 103)), RECOVERING, 9),
            (T2, 0): (3, ((1, 101),), RECOVERED, 5),
        }
        await controller.answers.put(answer_all)
        await results.wait_for(3)
        await manager.close()
    run(scenario)


def test_only_one_request_in_flight_and_everything_queued_meanwhile_goes_in_the_next_one():
    async def scenario():
        controller, results = Controller(), Results()
        manager = AlterPartitionManager(BROKER, lambda: 7, controller.send, results)
        manager.submit(T1, 0, proposal([1, 2]))
        first = await controller.next_request()
        for partition in (1, 2, 3):
            manager.submit(T1, partition, proposal([1, 2]))
        manager.submit(T2, 0, proposal([1, 2]))
        await asyncio.sleep(0.05)
        assert len(controller.requests) == 1 and controller.in_flight == 1
        assert set(manager.queued()) == {(T1, 1), (T1, 2), (T1, 3), (T2, 0)}
        await controller.answers.put(answer_all)
        second = await controller.next_request()
        assert set(sent_partitions(first)) == {(T1, 0)}
        assert set(sent_partitions(second)) == {(T1, 1), (T1, 2), (T1, 3), (T2, 0)}
        await controller.answers.put(answer_all)
        await results.wait_for(5)
        assert controller.max_in_flight == 1
        await manager.close()
    run(scenario)


def test_a_newer_proposal_replaces_the_queued_one_but_not_the_one_in_flight():
    async def scenario():
        controller, results = Controller(), Results()
        manager = AlterPartitionManager(BROKER, lambda: 7, controller.send, results)
        in_flight = proposal([1, 2, 3], partition_epoch=5)
        manager.submit(T1, 0, in_flight)
        await controller.next_request()
        manager.submit(T1, 0, proposal([1, 2], partition_epoch=6))
        newest = proposal([1], partition_epoch=6)
        manager.submit(T1, 0, newest)
        assert manager.queued() == {(T1, 0): newest}
        assert manager.in_flight() == {(T1, 0): in_flight}
        await controller.answers.put(answer_all)
        second = await controller.next_request()
        assert sent_partitions(second) == {(T1, 0): (3, ((1, 101),), RECOVERED, 6)}
        await controller.answers.put(answer_all)
        await results.wait_for(2)
        assert [call[2] for call in results.calls] == [in_flight, newest]
        assert results.calls[0][4].partition_epoch == 6 and results.calls[1][4].partition_epoch == 7
        await manager.close()
    run(scenario)


def test_a_failed_send_retries_the_whole_batch_after_the_backoff():
    async def scenario():
        controller, results = Controller(), Results()
        manager = AlterPartitionManager(BROKER, lambda: 7, controller.send, results, retry_backoff_ms=200)
        manager.submit(T1, 0, proposal([1, 2]))
        manager.submit(T2, 3, proposal([1, 3]))
        first = await controller.next_request()
        loop = asyncio.get_running_loop()
        failed_at = loop.time()
        await controller.answers.put(ConnectionError("controller gone"))
        second = await controller.next_request()
        assert loop.time() - failed_at >= 0.19
        assert sent_partitions(second) == sent_partitions(first)
        assert results.calls == []
        await controller.answers.put(answer_all)
        await results.wait_for(2)
        assert {(c[0], c[1], c[3]) for c in results.calls} == {(T1, 0, 0), (T2, 3, 0)}
        await manager.close()
    run(scenario)


def test_a_top_level_error_retries_the_batch_and_a_newer_queued_proposal_wins():
    async def scenario():
        controller, results = Controller(), Results()
        epochs = iter([7, 8])
        manager = AlterPartitionManager(BROKER, lambda: next(epochs), controller.send, results,
                                        retry_backoff_ms=20)
        manager.submit(T1, 0, proposal([1, 2, 3]))
        manager.submit(T1, 1, proposal([1, 2, 3]))
        first = await controller.next_request()
        assert first.broker_epoch == 7
        newer = proposal([1, 2], partition_epoch=6)
        manager.submit(T1, 1, newer)
        stale = M.AlterPartitionResponse(throttle_time_ms=0, error_code=errors.STALE_BROKER_EPOCH, topics=[])
        await controller.answers.put(stale)
        second = await controller.next_request()
        assert second.broker_epoch == 8, "the broker epoch is read again for the retry"
        assert sent_partitions(second)[(T1, 0)] == sent_partitions(first)[(T1, 0)]
        assert sent_partitions(second)[(T1, 1)] == (3, ((1, 101), (2, 102)), RECOVERED, 6)
        await controller.answers.put(answer_all)
        await results.wait_for(2)
        assert {c[1]: c[2] for c in results.calls}[1] == newer
        await manager.close()
    run(scenario)


def test_per_partition_errors_are_routed_and_a_partition_left_out_is_an_unknown_server_error():
    async def scenario():
        controller, results = Controller(), Results()
        manager = AlterPartitionManager(BROKER, lambda: 7, controller.send, results)
        sent = {p: proposal([1, 2], partition_epoch=10 + p) for p in range(4)}
        for p, item in sent.items():
            manager.submit(T1, p, item)
        request = await controller.next_request()

        def answer(req):
            response = answer_all(req, skip={(T1, 3)})
            by_index = {p.partition_index: p for p in response.topics[0].partitions}
            by_index[1].error_code = errors.INVALID_UPDATE_VERSION
            by_index[2].error_code = errors.INELIGIBLE_REPLICA
            return response
        await controller.answers.put(answer)
        await results.wait_for(4)
        got = {c[1]: (c[2], c[3], c[4]) for c in results.calls}
        assert got[0][1] == errors.NONE
        assert got[0][2] == LeaderAndIsr.build(BROKER, 3, [(1, -1), (2, -1)], RECOVERED, 11)
        assert got[1] == (sent[1], errors.INVALID_UPDATE_VERSION, None)
        assert got[2] == (sent[2], errors.INELIGIBLE_REPLICA, None)
        assert got[3] == (sent[3], errors.UNKNOWN_SERVER_ERROR, None)
        assert len(controller.requests) == 1 and request is controller.requests[0]
        await manager.close()
    run(scenario)


def test_a_result_handler_may_resubmit_and_the_proposal_goes_in_the_next_request():
    async def scenario():
        controller = Controller()
        calls = []

        def on_result(topic_id, partition, sent, error, result):
            calls.append(error)
            if error == errors.NOT_CONTROLLER:  # the Partition's answer to a retriable code
                manager.submit(topic_id, partition, sent)
        manager = AlterPartitionManager(BROKER, lambda: 7, controller.send, on_result)
        manager.submit(T1, 0, proposal([1, 2]))
        first = await controller.next_request()
        await controller.answers.put(lambda req: answer_all(req, error=errors.NOT_CONTROLLER))
        second = await controller.next_request()
        assert sent_partitions(second) == sent_partitions(first)
        await controller.answers.put(answer_all)
        while len(calls) < 2:
            await asyncio.sleep(0.01)
        assert calls == [errors.NOT_CONTROLLER, errors.NONE]
        await manager.close()
    run(scenario)


def test_close_drops_queued_proposals_and_stops_retrying():
    async def scenario():
        controller, results = Controller(), Results()
        manager = AlterPartitionManager(BROKER, lambda: 7, controller.send, results, retry_backoff_ms=10)
        manager.submit(T1, 0, proposal([1, 2]))
        await controller.next_request()
        manager.submit(T1, 1, proposal([1, 2]))
        await manager.close()
        manager.submit(T1, 2, proposal([1, 2]))
        await asyncio.sleep(0.1)
        assert len(controller.requests) == 1 and results.calls == []
        assert manager.queued() == {}
    run(scenario)
