"""The workload of a fault trial: idempotent acks=all producers and two kinds of consumers on one
topic, every value unique, every send, acknowledgement and poll recorded with its offset.

| actor                | client                                   | records                          |
|----------------------|------------------------------------------|----------------------------------|
| producer ``p<i>``    | confluent-kafka, enable.idempotence,     | Send at produce(); Ack (offset)  |
|                      | acks=all, paced at ``rate`` values/s,    | or Fail (error) from its delivery|
|                      | partitions in turn                       | report                           |
| consumer ``group``   | subscribe() in group ``<topic>-g``,      | Poll (offset, value, session);   |
|                      | commits automatically                    | session + 1 on every assignment  |
|                      |                                          | and revocation                   |
| consumer ``assign``  | assign() every partition from offset 0   | Poll; one session                |

In a trial with racks both consumers set client.rack to one broker's rack, so they fetch from
that broker the partitions it follows (KIP-392's preferred read replica); they run in a network
namespace of their own, so the bytes each broker sends them are counted (tests/faults/hosts.py).

Values are ``<producer>-<sequence>``: unique per trial, so a value found twice is a duplicate and
a value found at two offsets is an inconsistency. The history is the checker's
(tests/faults/checker.py): Send, Ack, Fail and Poll here; FinalRead, ReplicaLog and Committed are
read by the trial after the faults heal.

A fatal error of an idempotent producer (UNKNOWN_PRODUCER_ID, OUT_OF_ORDER_SEQUENCE_NUMBER: the
cluster lost what it knew of the producer) is recorded and the producer replaced; a trial with one
fails. Every failed delivery is recorded as indefinite (Fail.definite False): librdkafka does not say
whether a timed-out or aborted idempotent batch reached the log, so it may or may not be there.
Clients log through Python's logging (``strom.faults.client``), not stderr.
"""
from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from tests.faults import checker as C

log = logging.getLogger("strom.faults.client")

POLL_S = 0.1
FLUSH_S = 30.0
CLIENT_TIMEOUTS = {
    # a trial's faults last seconds: let the clients retry through them, and give up long before
    # the trial's own deadline so every outcome is known when the history is checked
    "message.timeout.ms": 60000,
    "request.timeout.ms": 10000,
    "reconnect.backoff.max.ms": 1000,
    "metadata.max.age.ms": 5000,
}
CONSUMER_TIMEOUTS = {"reconnect.backoff.max.ms", "metadata.max.age.ms"}


def _client_log(actor: str) -> Callable:
    def record(err) -> None:
        log.info("%s: %s", actor, err)
    return record


class ProducerActor:
    def __init__(self, name: str, bootstrap: str, topic: str, partitions: int, rate: float,
                 history: list, clock: Callable[[], float]) -> None:
        self.name, self.topic, self.partitions, self.rate = name, topic, partitions, rate
        self.history, self.clock = history, clock
        self.sent = 0
        self.fatal: list[str] = []  # fatal errors of the idempotent producer (each replaced it)
        self.config = {
            "bootstrap.servers": bootstrap, "client.id": name, "acks": "all",
            "enable.idempotence": True, "linger.ms": 5, **CLIENT_TIMEOUTS,
            "error_cb": _client_log(name), "logger": log,
        }
        self.producer = Producer(self.config)
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)

    def _report(self, value: str, partition: int):
        def delivered(err, msg) -> None:
            if err is None:
                self.history.append(C.Ack(self.name, self.topic, partition, value, msg.offset(),
                                          self.clock()))
            else:
                self.history.append(C.Fail(self.name, self.topic, partition, value, str(err), False,
                                           self.clock()))
        return delivered

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._send_paced()
            except KafkaException as e:
                # A fatal idempotence error (the broker lost the producer's state or sequence): what
                # this producer had in flight has an unknown outcome; a new producer carries on.
                self.fatal.append(str(e))
                log.warning("%s: fatal error, replaced by a new producer: %s", self.name, e)
                self.producer = Producer(self.config)

    def _send_paced(self) -> None:
        interval = 1.0 / self.rate
        next_at = time.monotonic()
        while not self._stop.is_set():
            partition = self.sent % self.partitions
            value = f"{self.name}-{self.sent}"
            try:
                self.producer.produce(self.topic, value.encode(), partition=partition,
                                      on_delivery=self._report(value, partition))
            except BufferError:
                self.producer.poll(POLL_S)
                continue
            self.history.append(C.Send(self.name, self.topic, partition, value, self.clock()))
            self.sent += 1
            next_at += interval
            self.producer.poll(max(0.0, next_at - time.monotonic()))

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> int:
        """Stop sending and wait for the outcome of everything sent; how many are unknown."""
        self._stop.set()
        self.thread.join()
        try:
            return self.producer.flush(FLUSH_S)
        except KafkaException as e:
            self.fatal.append(str(e))
            return len(self.producer)


class ConsumerActor:
    def __init__(self, name: str, bootstrap: str, topic: str, partitions: int, history: list,
                 clock: Callable[[], float], group: str | None, rack: str | None = None,
                 enter: Callable[[], None] | None = None) -> None:
        self.name, self.topic, self.partitions = name, topic, partitions
        self.history, self.clock = history, clock
        self.session = 0
        self.polled = 0
        config = {"bootstrap.servers": bootstrap, "client.id": name, "auto.offset.reset": "earliest",
                  "enable.partition.eof": False,
                  **{k: v for k, v in CLIENT_TIMEOUTS.items() if k in CONSUMER_TIMEOUTS},
                  "error_cb": _client_log(name), "logger": log}
        if rack is not None:
            config["client.rack"] = rack
        if group is not None:
            config.update({"group.id": group, "enable.auto.commit": True, "auto.commit.interval.ms": 1000,
                           "session.timeout.ms": 10000, "heartbeat.interval.ms": 1000})
        else:
            config.update({"group.id": f"{name}-unused", "enable.auto.commit": False})
        self.group = group
        self.config = config
        self.enter = enter
        self.consumer: Consumer | None = None
        self._started = threading.Event()
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)

    def _new_session(self, *_args) -> None:
        self.session += 1

    def _run(self) -> None:
        # The client is made on this thread, after ``enter`` (a client namespace): librdkafka's
        # threads, which open its sockets, start from here and inherit where it stands.
        try:
            if self.enter is not None:
                self.enter()
            self.consumer = Consumer(self.config)
        except BaseException as e:  # noqa: BLE001 -- reported by start()
            self.error = e
            return
        finally:
            self._started.set()
        if self.group is not None:
            self.consumer.subscribe([self.topic], on_assign=self._new_session, on_revoke=self._new_session,
                                    on_lost=self._new_session)
        else:
            self.consumer.assign([TopicPartition(self.topic, p, 0) for p in range(self.partitions)])
        while not self._stop.is_set():
            msg = self.consumer.poll(POLL_S)
            if msg is None:
                continue
            if msg.error() is not None:
                if msg.error().code() != KafkaError._PARTITION_EOF:
                    log.info("%s poll: %s", self.name, msg.error())
                continue
            self.history.append(C.Poll(self.name, msg.topic(), msg.partition(), msg.offset(),
                                       msg.value().decode(), self.clock(), self.session))
            self.polled += 1

    def start(self) -> None:
        self.thread.start()
        self._started.wait()
        if self.error is not None:
            raise RuntimeError(f"consumer {self.name} could not start: {self.error}") from self.error

    def stop(self) -> None:
        self._stop.set()
        self.thread.join()
        if self.consumer is not None:
            self.consumer.close()


class Workload:
    """``producers`` paced producers and the two consumers, started together. ``rack``: the
    consumers' client.rack (KIP-392: they fetch from a replica in that rack where the leader
    says so); ``enter``: what each consumer's thread calls before it makes its client (a move
    into a client network namespace, whose traffic the trial counts)."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, producers: int = 2,
                 rate: float = 100.0, rack: str | None = None,
                 enter: Callable[[], None] | None = None) -> None:
        self.history: list = []
        self.t0 = time.monotonic()
        clock = self.clock
        self.producers = [ProducerActor(f"p{i}", bootstrap, topic, partitions, rate, self.history, clock)
                          for i in range(producers)]
        self.consumers = [ConsumerActor("group", bootstrap, topic, partitions, self.history, clock,
                                        group=f"{topic}-g", rack=rack, enter=enter),
                          ConsumerActor("assign", bootstrap, topic, partitions, self.history, clock,
                                        group=None, rack=rack, enter=enter)]
        self.unknown = 0

    def clock(self) -> float:
        return round(time.monotonic() - self.t0, 4)

    def start(self) -> Workload:
        for actor in [*self.producers, *self.consumers]:
            actor.start()
        return self

    def stop_producers(self) -> int:
        self.unknown = sum(p.stop() for p in self.producers)
        return self.unknown

    def stop_consumers(self) -> None:
        for c in self.consumers:
            c.stop()

    def fatal(self) -> list[str]:
        return [f"{p.name}: {e}" for p in self.producers for e in p.fatal]

    def acked(self) -> int:
        return sum(1 for e in self.history if isinstance(e, C.Ack))

    def polled_up_to(self) -> dict[tuple[str, int], int]:
        """Per (consumer, partition), the next offset it will poll."""
        seen: dict[tuple[str, int], int] = {}
        for e in list(self.history):
            if isinstance(e, C.Poll):
                seen[(e.consumer, e.partition)] = max(seen.get((e.consumer, e.partition), 0), e.offset + 1)
        return seen
