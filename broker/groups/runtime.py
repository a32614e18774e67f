"""The group coordinator's asyncio shell: the broker's IO around the pure core.

It does what the core may not: watches the metadata image for the ``__consumer_offsets``
partitions this broker leads (loading each by replaying it from its log start offset,
unloading it when leadership moves away), asks the controller to create the topic the
first time a group needs it, appends the core's records to the partition's log, completes
parked JoinGroup/SyncGroup futures, and runs one timer task that sleeps until the core's
next deadline.

Order of effects: records are appended before any reply of the same step is sent, so a
member never sees an assignment or a committed offset that a crash could lose.
"""
from __future__ import annotations

import asyncio
import logging
import random
import time

from broker.groups import storage
from broker.groups.consumer_group import ConsumerGroupConfig, Topics
from broker.groups.coordinator import CoordinatorConfig, Effects, GroupCoordinator
from engine.log import ORIGIN_COORDINATOR
from protocol import messages as M
from protocol.errors import Error

log = logging.getLogger("strom.broker.groups")

CREATE_TOPICS_VERSION = 7
CREATE_RETRY_S = 1.0


class AppendError(Exception):
    def __init__(self, code: int, why: str):
        super().__init__(why)
        self.code = code


def _now_ms() -> int:
    return int(time.time() * 1000)


class GroupCoordinatorRuntime:
    def __init__(self, broker):
        self.broker = broker
        c = broker.config
        self.core = GroupCoordinator(CoordinatorConfig(
            initial_rebalance_delay_ms=c["group.initial.rebalance.delay.ms"],
            min_session_timeout_ms=c["group.min.session.timeout.ms"],
            max_session_timeout_ms=c["group.max.session.timeout.ms"],
            max_size=c["group.max.size"],
            offset_metadata_max_bytes=c.get("offset.metadata.max.bytes", 4096),
            consumer=ConsumerGroupConfig(
                session_timeout_ms=c.get("group.consumer.session.timeout.ms", 45000),
                heartbeat_interval_ms=c.get("group.consumer.heartbeat.interval.ms", 5000),
                max_size=c.get("group.consumer.max.size", 2**31 - 1)),
        ), random.Random())
        self.consumer_protocol = "consumer" in c.get("group.coordinator.rebalance.protocols",
                                                     ["classic", "consumer"])
        self._wake = asyncio.Event()
        self._tasks: list[asyncio.Task] = []
        self._loads: dict[int, asyncio.Task] = {}
        self._creating: asyncio.Task | None = None

    # ---- lifecycle -----------------------------------------------------------------------

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._watch_metadata()), loop.create_task(self._run_timers())]

    async def stop(self) -> None:
        tasks = self._tasks + list(self._loads.values()) + ([self._creating] if self._creating else [])
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for p in list(self.core.owned):
            self._complete(self.core.unload(p))

    # ---- the topic and its partitions ----------------------------------------------------

    def ensure_offsets_topic(self) -> bool:
        """True if ``__consumer_offsets`` exists; otherwise start creating it (once)."""
        if storage.OFFSETS_TOPIC in self.broker.image.topics:
            return True
        if self._creating is None or self._creating.done():
            self._creating = asyncio.get_running_loop().create_task(self._create_offsets_topic())
        return False

    async def _create_offsets_topic(self) -> None:
        c = self.broker.config
        R = M.CreateTopicsRequest
        live = len(self.broker.image.unfenced_brokers()) or 1
        request = R(topics=[R.CreatableTopic(
            name=storage.OFFSETS_TOPIC, num_partitions=c["offsets.topic.num.partitions"],
            replication_factor=min(c["offsets.topic.replication.factor"], live),
            configs=[R.CreatableTopic.CreatableTopicConfig(name="cleanup.policy", value="compact"),
                     R.CreatableTopic.CreatableTopicConfig(name="segment.bytes",
                                                           value=str(c["offsets.topic.segment.bytes"]))])],
            timeout_ms=5000, validate_only=False)
        try:
            response = await self.broker.follower.forward(19, CREATE_TOPICS_VERSION, request)
            for t in response.topics:
                if t.error_code not in (Error.NONE, Error.TOPIC_ALREADY_EXISTS):
                    log.warning("creating %s failed: %s %s", t.name, Error(t.error_code).name,
                                t.error_message)
                    await asyncio.sleep(CREATE_RETRY_S)  # the next request tries again, not sooner
        except (ConnectionError, TimeoutError, OSError) as e:
            log.warning("creating %s failed: %s", storage.OFFSETS_TOPIC, e)
            await asyncio.sleep(CREATE_RETRY_S)

    def topics(self) -> Topics:
        """The metadata image's topics as the consumer group assignor sees them."""
        return {name: (t.topic_id, len(t.partitions)) for name, t in self.broker.image.topics.items()
                if name != storage.OFFSETS_TOPIC}

    def coordinator_of(self, group_id: str) -> tuple[int, int]:
        """(error, node id of the leader of the group's partition)."""
        topic = self.broker.image.topics.get(storage.OFFSETS_TOPIC)
        if topic is None or not topic.partitions:
            return Error.COORDINATOR_NOT_AVAILABLE, -1
        partition = topic.partitions.get(storage.partition_for(group_id, len(topic.partitions)))
        if partition is None or partition.leader < 0:
            return Error.COORDINATOR_NOT_AVAILABLE, -1
        return Error.NONE, partition.leader

    async def _watch_metadata(self) -> None:
        while True:
            try:
                self._reconcile()
            except Exception:
                log.exception("group coordinator: reconciling with the metadata image failed")
            await self.broker.follower.wait_for_change(1.0)

    def _reconcile(self) -> None:
        topic = self.broker.image.topics.get(storage.OFFSETS_TOPIC)
        led: set[int] = set()
        if topic is not None:
            self.core.num_partitions = len(topic.partitions)
            led = {p for p, st in topic.partitions.items() if st.leader == self.broker.node_id}
        for p in (self.core.owned | self.core.loading) - led:
            task = self._loads.pop(p, None)
            if task is not None:
                task.cancel()
            self._complete(self.core.unload(p))
        if topic is None:
            self.core.num_partitions = 0
            return
        for p in led - self.core.owned - self.core.loading:
            self.core.begin_load(p)
            self._loads[p] = asyncio.get_running_loop().create_task(self._load(p))

    async def _load(self, partition: int) -> None:
        """Replay the partition from its log start offset: the latest record of a key wins."""
        started = time.monotonic()
        state = storage.GroupState()
        log_ = self.broker.replicas.local_log(storage.OFFSETS_TOPIC, partition)
        if log_ is not None:
            chunk = self.broker.config.get("offsets.load.buffer.size", 5242880)
            for data in storage.read_chunks(log_, chunk):
                storage.replay_batches(state, data)
                await asyncio.sleep(0)  # let other requests in between chunks
        self._loads.pop(partition, None)
        self.core.complete_load(partition, state, _now_ms())
        self._wake.set()
        log.info("loaded %s-%d: %d groups, %d groups with offsets in %.3f s", storage.OFFSETS_TOPIC,
                 partition, len(state.groups), len(state.offsets), time.monotonic() - started)

    # ---- effects -------------------------------------------------------------------------

    def run(self, fx: Effects) -> int:
        """Append, then reply. Error.NONE, or the error of the first append that failed
        (its records are not applied; the replies are still sent)."""
        result = Error.NONE
        for partition, records in fx.appends:
            try:
                self._append(partition, records)
            except AppendError as e:
                log.warning("append to %s-%d failed: %s", storage.OFFSETS_TOPIC, partition, e)
                result = result or e.code
                continue
            self.core.apply_records(records)
        self._complete(fx)
        self._wake.set()
        return result

    def _complete(self, fx: Effects) -> None:
        for waiter, response in fx.replies:
            if not waiter.done():
                waiter.set_result(response)

    def _append(self, partition: int, records: list[tuple[bytes, bytes | None]]) -> None:
        now = _now_ms()
        batch = storage.build_records_batch(records, now)
        result = self.broker.replicas.append_local(storage.OFFSETS_TOPIC, partition, batch, acks=1,
                                                   origin=ORIGIN_COORDINATOR, now_ms=now)
        if result.error == Error.NONE:
            return
        if result.error == Error.NOT_LEADER_OR_FOLLOWER:
            raise AppendError(Error.NOT_COORDINATOR, "no longer the leader")
        if result.error == Error.MESSAGE_TOO_LARGE:
            raise AppendError(Error.INVALID_COMMIT_OFFSET_SIZE, result.error_message or "too large")
        raise AppendError(Error.COORDINATOR_NOT_AVAILABLE,
                          result.error_message or f"append failed: {Error(result.error).name}")

    def waiter(self) -> asyncio.Future:
        return asyncio.get_running_loop().create_future()

    async def _run_timers(self) -> None:
        while True:
            deadline = self.core.next_deadline()
            self._wake.clear()
            timeout = None if deadline is None else max(0.0, (deadline - _now_ms()) / 1000)
            if timeout is None or timeout > 0:
                try:
                    await asyncio.wait_for(self._wake.wait(), timeout)
                except TimeoutError:
                    pass
            try:
                fx = self.core.tick(_now_ms())
                if fx.appends or fx.replies:
                    self.run(fx)
            except Exception:
                log.exception("group coordinator timers failed")
                await asyncio.sleep(0.1)

    def run_timers_soon(self) -> None:
        """Deadlines moved: the timer task recomputes its sleep."""
        self._wake.set()
