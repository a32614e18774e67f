"""One simulated broker: the replication core (Partition, follower.py) behind a driver that does
what ReplicaManager, the replica fetcher, the AlterPartition manager and the acks=all purgatory do
at the edge, with the simulation's network and clock instead of sockets and asyncio.

The driver never decides a replication rule itself: who leads, whether a fetch diverges, where to
truncate, when the ISR changes and when an acks=all produce is done are the core's answers. It
only carries messages, keeps one fetch and one AlterPartition in flight, retries, and times out.

Messages (the fields Kafka's requests carry for one partition):

| message               | fields                                                                 |
|-----------------------|------------------------------------------------------------------------|
| FetchRequest          | replica id, broker epoch, current leader epoch, fetch offset, last     |
|                       | fetched epoch, log start offset                                        |
| FetchResponse         | error, records, high watermark, log start offset, diverging epoch      |
| ListOffsetsRequest    | replica id, current leader epoch (the follower's OFFSET_OUT_OF_RANGE)  |
| ListOffsetsResponse   | error, log start offset, log end offset                                |
| AlterPartitionRequest | broker id, broker epoch, proposed LeaderAndIsr                         |
| AlterPartitionResponse| top-level error, partition error, committed LeaderAndIsr               |

A follower Fetch with nothing to read waits at the leader (fetch.max.wait) and is answered as
soon as the leader appends; the follower's HW therefore moves with the next records or the next
expiry, as in Kafka. Every request carries an id; an answer whose id is not the one in flight
(a duplicate, or the answer to a request that timed out) is dropped by the follower, but every
AlterPartition answer reaches the Partition, which must ignore the stale ones itself.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from replication import errors, follower
from replication.errors import NotEnoughReplicas, NotLeaderOrFollower
from replication.follower import PartitionFetchState
from replication.isr import NO_LEADER, LeaderAndIsr, PartitionRegistration
from replication.log import MemoryPartitionLog
from replication.partition import BrokerLiveness, Outcome, Partition

END = 1 << 62


class SimLog(MemoryPartitionLog):
    """MemoryPartitionLog that remembers the lowest offset it rewrote since it was last looked at,
    so the invariant checker can keep a hash chain of each log without rereading it."""

    def __init__(self) -> None:
        super().__init__()
        self.rewritten_from = END

    def truncate_to(self, offset: int) -> bool:
        result = super().truncate_to(offset)
        self.rewritten_from = min(self.rewritten_from, self.log_end_offset)
        return result

    def truncate_fully_and_start_at(self, offset: int) -> None:
        super().truncate_fully_and_start_at(offset)
        self.rewritten_from = min(self.rewritten_from, 0)

    def crash(self) -> None:
        super().crash()
        self.rewritten_from = min(self.rewritten_from, self.log_end_offset)


@dataclass(slots=True)
class FetchRequest:
    replica_id: int
    broker_epoch: int
    current_leader_epoch: int
    fetch_offset: int
    last_fetched_epoch: int
    log_start_offset: int
    request_id: int


@dataclass(slots=True)
class FetchResponse:
    request_id: int
    error: int
    records: tuple = ()
    high_watermark: int = -1
    log_start_offset: int = -1
    diverging_epoch: tuple[int, int] | None = None


@dataclass(slots=True)
class ListOffsetsRequest:
    replica_id: int
    current_leader_epoch: int
    request_id: int


@dataclass(slots=True)
class ListOffsetsResponse:
    request_id: int
    error: int
    log_start_offset: int = -1
    log_end_offset: int = -1


@dataclass(slots=True)
class AlterPartitionRequest:
    broker_id: int
    broker_epoch: int
    proposal: LeaderAndIsr
    request_id: int


@dataclass(slots=True)
class AlterPartitionResponse:
    request_id: int
    top_error: int
    sent: LeaderAndIsr
    error: int
    result: LeaderAndIsr | None


class Image:
    """The broker's metadata image: replayed from the metadata log, durable across restarts
    (a KRaft broker keeps its copy of the log). It is the Partition's BrokerRegistry."""

    def __init__(self) -> None:
        self.applied = 0
        self.registration: PartitionRegistration | None = None
        self.brokers: dict[int, BrokerLiveness] = {}

    def get(self, broker_id: int) -> BrokerLiveness | None:
        return self.brokers.get(broker_id)


@dataclass(slots=True)
class Fetcher:
    leader: int
    state: PartitionFetchState
    inflight: int | None = None
    sent_at: int = 0
    stopped: bool = False  # FENCED_LEADER_EPOCH: wait for metadata with a newer leader epoch


@dataclass(slots=True)
class Waiter:
    """A parked acks=all produce: done when the core says the HW reached required_offset."""
    producer: str
    values: tuple
    first_offset: int
    required_offset: int
    leader_epoch: int
    deadline: int


class Broker:
    def __init__(self, sim: Any, broker_id: int) -> None:
        self.sim = sim
        self.config = sim.config
        self.id = broker_id
        self.log = SimLog()
        self.image = Image()
        self.up = False
        self.incarnation = 0
        self.broker_epoch: int | None = None
        self.registered_at = 0
        self.registration_sent_at = -END
        self.clean_shutdown_epoch = -1  # the previous broker epoch a registration reports
        self.lost_unflushed = False  # crashed losing its tail; the controller has not re-registered it
        self.shutting_down = False
        self.partition: Partition | None = None
        self.hosting = True  # a replica of the partition (else its log is deleted, as Kafka's)
        self.published = False
        self.fetcher: Fetcher | None = None
        self.parked: dict[int, tuple[FetchRequest, int, tuple[int, int]]] = {}
        self.waiters: list[Waiter] = []
        self.ap_queued: LeaderAndIsr | None = None
        self.ap_inflight: tuple[int, LeaderAndIsr, int] | None = None
        self.ap_retry_at = 0
        self.stalled_until = 0
        # invariant bookkeeping (sim_invariants.py)
        self.hashes: list[int] = []
        self.last_hw = 0
        self.last_epochs = (-1, -1)
        self.checked_key: tuple | None = None
        self.completeness_version = -1

    def __repr__(self) -> str:
        state = "up" if self.up else "down"
        return f"broker {self.id} ({state}, incarnation {self.incarnation}, {self.log!r}, {self.partition!r})"

    # -- lifecycle -------------------------------------------------------------------------------------

    def start(self, now: int, epoch: int | None = None, registered_at: int = 0) -> None:
        """Start a new incarnation: the log as recovered, the image as persisted, nothing published
        until the broker has registered and replayed the metadata log up to its registration."""
        self.up = True
        self.incarnation += 1
        self.shutting_down = False
        self.partition = self._new_partition()
        self.published = False
        self.fetcher = None
        self.parked = {}
        self.waiters = []
        self.ap_queued = self.ap_inflight = None
        self.stalled_until = 0
        self.last_hw = self.log.high_watermark
        self.last_epochs = (-1, -1)
        self.checked_key = None
        self.broker_epoch = epoch
        self.registered_at = registered_at
        self.registration_sent_at = -END
        if epoch is None:
            self.send_registration(now)
        else:
            self.maybe_publish(now)

    def _new_partition(self) -> Partition:
        return Partition("sim", 0, self.id, self.log, self.image,
                         replica_lag_time_max_ms=self.config.replica_lag_time_max_ms,
                         min_insync_replicas=self.config.min_insync_replicas)

    def stop(self, lossy: bool) -> list[Waiter]:
        """A hard kill (lossy: unflushed records and the in-memory HW are lost) or the end of a clean
        shutdown (everything flushed and checkpointed first). Returns the waiters that die with it."""
        if lossy:
            self.log.crash()
            self.lost_unflushed = True
            self.clean_shutdown_epoch = -1
        else:
            self.log.flush()
            self.log.checkpoint_high_watermark()
            self.log.crash()  # loses nothing now; the HW restarts from the checkpoint
            self.clean_shutdown_epoch = self.broker_epoch if self.broker_epoch is not None else -1
        self.up = False
        self.partition = None
        self.published = False
        self.fetcher = None
        self.parked = {}
        waiters, self.waiters = self.waiters, []
        self.ap_queued = self.ap_inflight = None
        return waiters

    def send_registration(self, now: int) -> None:
        self.registration_sent_at = now
        message = ("register", self.id, self.incarnation, self.clean_shutdown_epoch)
        self.sim.send_to_controller(self.id, message)

    def shutdown_timeout(self, now: int) -> None:
        if self.shutting_down:
            self.sim.stop_broker(self, lossy=False)

    def on_registered(self, now: int, epoch: int, registered_at: int) -> None:
        if self.broker_epoch is not None:
            return
        self.broker_epoch = epoch
        self.registered_at = registered_at
        self.maybe_publish(now)

    # -- metadata --------------------------------------------------------------------------------------

    def on_metadata(self, now: int, metadata_log: list, end: int) -> None:
        """Replay entries [applied, end) in order, then hand the result to the Partition."""
        image = self.image
        if end <= image.applied:
            return
        changed = False
        for kind, *rest in metadata_log[image.applied:end]:
            if kind == "broker":
                image.brokers[rest[0]] = rest[1]
            else:
                self.sim.checker.on_broker_replay(self, image.registration, rest[0])
                image.registration = rest[0]
                changed = True
        image.applied = end
        if not self.published:
            self.maybe_publish(now)
        elif changed:
            self.apply_registration(now, image.registration)

    def maybe_publish(self, now: int) -> None:
        if self.broker_epoch is not None and self.image.applied >= self.registered_at:
            self.published = True
            self.apply_registration(now, self.image.registration)

    def apply_registration(self, now: int, reg: PartitionRegistration) -> None:
        """ReplicaManager.applyDelta for our one partition: make_leader or make_follower, then
        (re)start or stop the fetcher when the leader epoch moved."""
        if self.id not in reg.replicas:
            if self.hosting:
                self._delete_partition(now)
            return
        if not self.hosting:  # a replica again: from an empty log, as a new partition
            self.hosting = True
            self.partition = self._new_partition()
        p = self.partition
        was_leader = p.is_leader
        if reg.leader == self.id:
            outcome = p.make_leader(reg, now)
            if p.is_leader:
                self.fetcher = None
        else:
            outcome = p.make_follower(reg, now)
            if was_leader and not p.is_leader:
                self.answer_parked(now, force_error=True)
            if outcome.leader_epoch_changed or self.fetcher is None:
                self.start_fetcher(now)
        self.process(now, outcome)

    def _delete_partition(self, now: int) -> None:
        """No longer a replica (a reassignment moved it away): what waits is answered
        NOT_LEADER_OR_FOLLOWER, the fetcher stops, and the log is deleted."""
        if self.partition.is_leader:
            self.answer_parked(now, force_error=True)
        waiters, self.waiters = self.waiters, []
        for waiter in waiters:
            self.sim.on_produce_completed(self, waiter, errors.NOT_LEADER_OR_FOLLOWER)
        self.fetcher = None
        self.ap_queued = self.ap_inflight = None
        self.hosting = False
        self.log = SimLog()
        self.partition = self._new_partition()
        self.sim.checker.on_log_deleted(self)
        self.sim.stats["logs deleted"] += 1

    # -- follower: the replica fetcher -----------------------------------------------------------------

    def start_fetcher(self, now: int) -> None:
        p = self.partition
        if p.is_leader or p.leader_id == NO_LEADER:
            self.fetcher = None
            return
        state = follower.initial_fetch_state(self.log, p.leader_epoch)
        self.fetcher = Fetcher(p.leader_id, state)
        self.sim.stats["fetcher starts"] += 1
        self.send_fetch(now)

    def send_fetch(self, now: int) -> None:
        f = self.fetcher
        if f is None or f.inflight is not None or f.stopped or now < self.stalled_until:
            return
        s = f.state
        request_id = self.sim.next_request_id()
        f.inflight, f.sent_at = request_id, now
        request = FetchRequest(self.id, self.broker_epoch, s.current_leader_epoch, s.fetch_offset,
                               s.last_fetched_epoch, self.log.log_start_offset, request_id)
        self.sim.send(self.id, f.leader, request)

    def fetch_due(self, now: int, fetcher: Fetcher) -> None:
        if fetcher is self.fetcher:
            self.send_fetch(now)

    def _retry_fetch_later(self, now: int) -> None:
        self.sim.at_broker(now + self.config.fetch_backoff_ms, self, "fetch_due", self.fetcher)

    def on_fetch_response(self, now: int, response: FetchResponse) -> None:
        f = self.fetcher
        if f is None or f.inflight != response.request_id:
            return  # a duplicate, or the answer to a request that timed out / an older fetcher
        f.inflight = None
        log = self.log
        if response.error == errors.NONE and response.diverging_epoch is not None:
            epoch, end_offset = response.diverging_epoch
            before = log.log_end_offset
            f.state = follower.handle_diverging_epoch(log, f.state, epoch, end_offset)
            self.sim.stats["diverging truncations"] += log.log_end_offset < before
            self.send_fetch(now)
        elif response.error == errors.NONE:
            f.state, _ = follower.handle_records(log, f.state, response.records, response.high_watermark,
                                                 response.log_start_offset, now)
            self.send_fetch(now)
        elif response.error == errors.OFFSET_OUT_OF_RANGE:
            self.sim.stats["offset out of range"] += 1
            request_id = self.sim.next_request_id()
            f.inflight, f.sent_at = request_id, now
            self.sim.send(self.id, f.leader, ListOffsetsRequest(self.id, f.state.current_leader_epoch,
                                                                request_id))
        elif response.error == errors.FENCED_LEADER_EPOCH:
            f.stopped = True
        else:
            self._retry_fetch_later(now)

    def on_list_offsets_response(self, now: int, response: ListOffsetsResponse) -> None:
        f = self.fetcher
        if f is None or f.inflight != response.request_id:
            return
        f.inflight = None
        if response.error == errors.NONE:
            f.state = follower.handle_offset_out_of_range(self.log, f.state, response.log_start_offset,
                                                          response.log_end_offset)
            self.send_fetch(now)
        elif response.error == errors.FENCED_LEADER_EPOCH:
            f.stopped = True
        else:
            self._retry_fetch_later(now)

    # -- leader: serving follower fetches ---------------------------------------------------------------

    def on_fetch_request(self, now: int, request: FetchRequest, reply_to: tuple[int, int]) -> None:
        if not self.published:
            return self._answer(reply_to, FetchResponse(request.request_id, errors.NOT_LEADER_OR_FOLLOWER))
        p, log = self.partition, self.log
        check = p.check_follower_fetch(request.replica_id, request.current_leader_epoch,
                                       request.fetch_offset, request.last_fetched_epoch)
        if check.error:
            return self._answer(reply_to, FetchResponse(request.request_id, check.error))
        if check.diverging_epoch is not None:
            return self._answer(reply_to, FetchResponse(request.request_id, errors.NONE, (),
                                                        log.high_watermark, log.log_start_offset,
                                                        check.diverging_epoch))
        leader_end = log.log_end_offset
        records = log.read(request.fetch_offset, self.config.fetch_max_entries)
        try:
            outcome = p.update_follower_fetch_state(request.replica_id, request.broker_epoch,
                                                    request.fetch_offset, request.log_start_offset,
                                                    leader_end, now)
        except NotLeaderOrFollower:
            return self._answer(reply_to, FetchResponse(request.request_id, errors.NOT_LEADER_OR_FOLLOWER))
        if records:
            self._answer(reply_to, FetchResponse(request.request_id, errors.NONE, records, log.high_watermark,
                                                log.log_start_offset))
        else:
            self.parked[request.replica_id] = (request, now + self.config.fetch_max_wait_ms, reply_to)
        self.process(now, outcome)

    def answer_parked(self, now: int, force_error: bool = False, expired_only: bool = False) -> None:
        """Complete waiting follower fetches: on new data, on expiry, or when leadership ends."""
        for replica_id, (request, deadline, reply_to) in list(self.parked.items()):
            if expired_only and deadline > now:
                continue
            if not force_error and not expired_only and self.log.log_end_offset <= request.fetch_offset:
                continue
            del self.parked[replica_id]
            p, log = self.partition, self.log
            check = p.check_follower_fetch(request.replica_id, request.current_leader_epoch,
                                           request.fetch_offset, request.last_fetched_epoch)
            if check.error or force_error:
                error = check.error or errors.NOT_LEADER_OR_FOLLOWER
                self._answer(reply_to, FetchResponse(request.request_id, error))
            elif check.diverging_epoch is not None:
                self._answer(reply_to, FetchResponse(request.request_id, errors.NONE, (), log.high_watermark,
                                                    log.log_start_offset, check.diverging_epoch))
            else:
                records = log.read(request.fetch_offset, self.config.fetch_max_entries)
                self._answer(reply_to, FetchResponse(request.request_id, errors.NONE, records,
                                                    log.high_watermark, log.log_start_offset))

    def on_list_offsets_request(self, now: int, request: ListOffsetsRequest,
                                reply_to: tuple[int, int]) -> None:
        if not self.published:
            error = errors.NOT_LEADER_OR_FOLLOWER
            return self._answer(reply_to, ListOffsetsResponse(request.request_id, error))
        error, snapshot = self.partition.fetch_offset_snapshot(request.current_leader_epoch)
        if error:
            return self._answer(reply_to, ListOffsetsResponse(request.request_id, error))
        self._answer(reply_to, ListOffsetsResponse(request.request_id, errors.NONE, snapshot.log_start_offset,
                                                  snapshot.log_end_offset))

    def _answer(self, reply_to: tuple[int, int], response) -> None:
        self.sim.send(self.id, reply_to[0], response, reply_to[1])

    # -- leader: produce and the acks=all purgatory -----------------------------------------------------

    def produce(self, now: int, producer: str, values: tuple, acks: int) -> int:
        """Append on this broker as leader; returns an error code (NONE: appended). acks=all
        produces wait in the purgatory; acks=1 ones are acknowledged by the caller at once."""
        p = self.partition
        try:
            info, outcome = p.append_records_to_leader(values, acks, now)
        except NotEnoughReplicas:
            return errors.NOT_ENOUGH_REPLICAS
        except NotLeaderOrFollower:
            return errors.NOT_LEADER_OR_FOLLOWER
        if acks == -1:
            self.waiters.append(Waiter(producer, values, info.first_offset, info.last_offset + 1,
                                       p.leader_epoch, now + self.config.produce_timeout_ms))
        self.answer_parked(now)
        self.process(now, outcome)
        return errors.NONE

    def complete_waiters(self, now: int) -> None:
        if not self.waiters:
            return
        remaining = []
        for waiter in self.waiters:
            done, error = self.partition.check_enough_replicas_reach_offset(waiter.required_offset)
            if done or error:
                self.sim.on_produce_completed(self, waiter, error)
            elif now >= waiter.deadline:
                self.sim.on_produce_completed(self, waiter, errors.REQUEST_TIMED_OUT)
            else:
                remaining.append(waiter)
        self.waiters = remaining

    # -- the AlterPartition manager --------------------------------------------------------------------

    def submit_alter_partition(self, now: int, proposal: LeaderAndIsr) -> None:
        self.ap_queued = proposal
        self.maybe_send_alter_partition(now)

    def maybe_send_alter_partition(self, now: int) -> None:
        if self.ap_inflight is not None or self.ap_queued is None or now < self.ap_retry_at:
            return
        proposal, self.ap_queued = self.ap_queued, None
        request_id = self.sim.next_request_id()
        self.ap_inflight = (request_id, proposal, now)
        self.sim.send(self.id, 0, AlterPartitionRequest(self.id, self.broker_epoch, proposal, request_id))

    def on_alter_partition_response(self, now: int, response: AlterPartitionResponse) -> None:
        current = self.ap_inflight is not None and self.ap_inflight[0] == response.request_id
        if current:
            self.ap_inflight = None
        if response.top_error:
            if current:
                self.ap_queued = self.ap_queued or response.sent
                self.ap_retry_at = now + self.config.alter_partition_retry_ms
        else:
            outcome = self.partition.handle_alter_partition_response(response.sent, response.error,
                                                                     response.result, now)
            if outcome.alter_partition is not None:
                self.ap_retry_at = now + self.config.alter_partition_retry_ms
            self.process(now, outcome)
        self.maybe_send_alter_partition(now)

    # -- timers ----------------------------------------------------------------------------------------

    def tick(self, now: int) -> None:
        """Every heartbeat interval: heartbeat (or retry the registration), request timeouts,
        expired waiting fetches and produces, AlterPartition retries, and the end of a stall."""
        cfg = self.config
        if self.broker_epoch is None:
            if now - self.registration_sent_at >= cfg.request_timeout_ms:
                self.send_registration(now)
        else:
            heartbeat = ("heartbeat", self.id, self.broker_epoch, self.image.applied)
            self.sim.send_to_controller(self.id, heartbeat)
        f = self.fetcher
        if f is not None and f.inflight is not None and now - f.sent_at >= cfg.request_timeout_ms:
            f.inflight = None
        if f is not None and f.inflight is None:
            self.send_fetch(now)
        if self.parked:
            self.answer_parked(now, expired_only=True)
        if self.ap_inflight is not None and now - self.ap_inflight[2] >= cfg.request_timeout_ms:
            self.ap_queued = self.ap_queued or self.ap_inflight[1]
            self.ap_inflight = None
        self.maybe_send_alter_partition(now)
        self.complete_waiters(now)

    def process(self, now: int, outcome: Outcome) -> None:
        if outcome.alter_partition is not None:
            self.submit_alter_partition(now, outcome.alter_partition)
        self.complete_waiters(now)
