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
Clients log through Python's logging (``strom.faults.client``), not stderr. ``close()`` ends every
client a workload made, stopped or not (a trial calls it on its way out, passed or failed): what a
producer still holds is purged, and each librdkafka instance is destroyed with its threads, so none
keeps reconnecting to a cluster that is gone (or to whatever listens on its ports next) and logging.
"""
from __future__ import annotations

import logging
import threading
import time
import warnings
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


_CLOSING = threading.Lock()


def close_producer(producer: Producer | None) -> None:
    """Destroy a producer now: what it still queues or has in flight is purged (its delivery
    reports say so) rather than flushed, so this never waits on an unreachable cluster."""
    if producer is None:
        return
    try:
        producer.purge()
        producer.poll(0)
    except KafkaException as e:  # a fenced or otherwise failed instance says so again: ended anyway
        log.info("closing a producer: %s", e)
    except RuntimeError:  # closed already
        return
    try:
        # A fenced zombie's close warns that it could not abort: logged, not a warning of the run.
        # (The warnings filters are the process's: one close at a time changes them.)
        with _CLOSING, warnings.catch_warnings(record=True) as said:
            warnings.simplefilter("always", RuntimeWarning)
            producer.close()
        for warning in said:
            log.info("closing a producer: %s", warning.message)
    except (KafkaException, RuntimeError) as e:
        log.info("closing a producer: %s", e)


def _client_log(actor: str) -> Callable:
    def record(err) -> None:
        log.info("%s: %s", actor, err)
    return record


def crash_text(name: str, e: BaseException) -> str:
    """An actor's thread ended by an exception nothing in it expects: what the trial reports."""
    import traceback

    return f"{name}: {type(e).__name__}: {e}\n" + "".join(traceback.format_exception(e)[-6:])


class ProducerActor:
    def __init__(self, name: str, client: dict, topic: str, partitions: int, rate: float,
                 history: list, clock: Callable[[], float]) -> None:
        self.name, self.topic, self.partitions, self.rate = name, topic, partitions, rate
        self.history, self.clock = history, clock
        self.sent = 0
        self.fatal: list[str] = []  # fatal errors of the idempotent producer (each replaced it)
        self.crashed: str | None = None  # what ended its thread, if anything unexpected did
        self.config = {
            **client, "client.id": name, "acks": "all",
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
        try:
            self._produce()
        except BaseException as e:  # noqa: BLE001 -- a dead actor fails the trial (crashed)
            self.crashed = crash_text(self.name, e)
            log.error("%s", self.crashed)

    def _produce(self) -> None:
        while not self._stop.is_set():
            try:
                self._send_paced()
            except KafkaException as e:
                # A fatal idempotence error (the broker lost the producer's state or sequence): what
                # this producer had in flight has an unknown outcome; a new producer carries on.
                self.fatal.append(str(e))
                log.warning("%s: fatal error, replaced by a new producer: %s", self.name, e)
                old, self.producer = self.producer, Producer(self.config)
                close_producer(old)

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

    def close(self) -> None:
        """Stop sending (without waiting for outcomes) and destroy the client."""
        self._stop.set()
        if self.thread.is_alive():
            self.thread.join()
        close_producer(self.producer)


class ConsumerActor:
    def __init__(self, name: str, client: dict, topic: str, partitions: int, history: list,
                 clock: Callable[[], float], group: str | None, rack: str | None = None,
                 enter: Callable[[], None] | None = None) -> None:
        self.name, self.topic, self.partitions = name, topic, partitions
        self.history, self.clock = history, clock
        self.session = 0
        self.polled = 0
        config = {**client, "client.id": name, "auto.offset.reset": "earliest",
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
        self.crashed: str | None = None  # what ended its thread, if anything unexpected did
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
        try:
            self._poll()
        except BaseException as e:  # noqa: BLE001 -- a dead actor fails the trial (crashed)
            self.crashed = crash_text(self.name, e)
            log.error("%s", self.crashed)

    def _poll(self) -> None:
        assert self.consumer is not None
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
        """Stop polling and destroy the client (the group's consumer leaves the group)."""
        self._stop.set()
        if self.thread.is_alive():
            self.thread.join()
        if self.consumer is not None:
            self.consumer.close()
            self.consumer = None

    close = stop


class Workload:
    """``producers`` paced producers and the two consumers, started together. ``client``: the
    properties every client connects with (bootstrap.servers, and a secure cluster's security
    properties: ReplicatedCluster.client_config). ``rack``: the
    consumers' client.rack (KIP-392: they fetch from a replica in that rack where the leader
    says so); ``enter``: what each consumer's thread calls before it makes its client (a move
    into a client network namespace, whose traffic the trial counts)."""

    def __init__(self, client: dict, topic: str, partitions: int, producers: int = 2,
                 rate: float = 100.0, rack: str | None = None,
                 enter: Callable[[], None] | None = None) -> None:
        self.history: list = []
        self.t0 = time.monotonic()
        clock = self.clock
        self.producers = [ProducerActor(f"p{i}", client, topic, partitions, rate, self.history, clock)
                          for i in range(producers)]
        self.consumers = [ConsumerActor("group", client, topic, partitions, self.history, clock,
                                        group=f"{topic}-g", rack=rack, enter=enter),
                          ConsumerActor("assign", client, topic, partitions, self.history, clock,
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

    def close(self) -> None:
        """End every client, stopped or not (what producers still hold is purged)."""
        for producer in self.producers:
            producer.close()
        for consumer in self.consumers:
            consumer.close()

    def fatal(self) -> list[str]:
        return [f"{p.name}: {e}" for p in self.producers for e in p.fatal]

    def crashed(self) -> list[str]:
        """Actors whose thread an unexpected exception ended: the workload shrank under the trial."""
        return [a.crashed for a in [*self.producers, *self.consumers] if a.crashed]

    def acked(self) -> int:
        return sum(1 for e in self.history if isinstance(e, C.Ack))

    def polled_up_to(self) -> dict[tuple[str, int], int]:
        """Per (consumer, partition), the next offset it will poll."""
        seen: dict[tuple[str, int], int] = {}
        for e in list(self.history):
            if isinstance(e, C.Poll):
                seen[(e.consumer, e.partition)] = max(seen.get((e.consumer, e.partition), 0), e.offset + 1)
        return seen


# ---------------------------------------------------------------------------------------------
# The transactional workload
#
# | actor               | client                                      | records                        |
# |---------------------|---------------------------------------------|--------------------------------|
# | producer ``t<i>``   | confluent-kafka, transactional.id ``t<i>``; | Init when init_transactions()  |
# |                     | transactions of TXN_RECORDS records over    | returns; Txn (records, when the|
# |                     | TXN_SPREAD partitions, committed or aborted | commit was asked, the outcome  |
# |                     | by a seeded choice; now and then a zombie   | the client saw) when it ends   |
# | consumers ``rc<i>`` | assign() every partition from offset 0,     | Poll                           |
# |                     | isolation.level read_committed              |                                |
#
# An error the client says needs an abort aborts the transaction; a fatal one (fenced, or the
# broker lost the producer) ends this instance: the outcome is unknown unless the abort returned,
# and a new instance with the same transactional.id fences whatever of it is left. A commit that
# fails retriably is asked again, COMMIT_TRIES times; then its outcome is unknown and the
# instance is replaced too. A zombie (probability ZOMBIE): the instance writes a transaction,
# a new instance initialises, and the old one then asks to commit: the broker must fence it.
# ---------------------------------------------------------------------------------------------

TXN_RECORDS = (2, 6)
TXN_SPREAD = 3
ABORT = 0.3  # the seeded chance that a transaction is meant to abort
ZOMBIE = 0.03
COMMIT_TRIES = 3
TXN_CALL_S = 15.0  # one init, commit or abort call's bound
TXN_PAUSE_S = 0.02


class TxnProducerActor:
    def __init__(self, name: str, client: dict, topic: str, partitions: int, seed: int,
                 history: list, clock: Callable[[], float]) -> None:
        import random

        self.name, self.topic, self.partitions = name, topic, partitions
        self.history, self.clock = history, clock
        self.rng = random.Random(seed)
        self.instance = 0
        self.number = 0
        self.fatal: list[str] = []
        self.crashed: str | None = None  # what ended its thread, if anything unexpected did
        self.current: tuple[int, str, list[tuple[int, str]], float] | None = None
        self.config = {
            **client, "client.id": name, "transactional.id": name,
            "transaction.timeout.ms": 10000, "linger.ms": 5, **CLIENT_TIMEOUTS,
            "message.timeout.ms": 10000, "error_cb": _client_log(name), "logger": log,
        }
        self.producer: Producer | None = None
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)

    def _new_instance(self) -> Producer:
        """A new producer with the same transactional.id, initialised (retried until it is)."""
        while not self._stop.is_set():
            self.instance += 1
            producer = Producer(self.config)
            try:
                producer.init_transactions(TXN_CALL_S)
            except KafkaException as e:
                log.info("%s.%d: init_transactions: %s", self.name, self.instance, e)
                time.sleep(0.5)
                continue
            self.history.append(C.Init(self.name, self.instance, self.clock()))
            return producer
        raise _Stopped

    def _replace(self) -> None:
        old, self.producer = self.producer, None
        close_producer(old)
        self.producer = self._new_instance()

    def _run(self) -> None:
        try:
            self.producer = self._new_instance()
            while not self._stop.is_set():
                if self.rng.random() < ZOMBIE:
                    self._zombie()
                elif not self._transaction(self.producer, self.instance):
                    self._replace()
                time.sleep(TXN_PAUSE_S)
        except _Stopped:
            pass
        except BaseException as e:  # noqa: BLE001 -- a dead actor fails the trial (crashed)
            self.crashed = crash_text(self.name, e)
            log.error("%s", self.crashed)

    def _write(self, producer: Producer, instance: int) -> tuple[int, str, list[tuple[int, str]], float]:
        self.number += 1
        number = self.number
        intent = "a" if self.rng.random() < ABORT else "c"
        spread = self.rng.sample(range(self.partitions), min(TXN_SPREAD, self.partitions))
        begun = self.clock()
        records: list[tuple[int, str]] = []
        self.current = (number, intent, records, begun)  # filled as it goes: what an error leaves
        producer.begin_transaction()
        for i in range(self.rng.randint(*TXN_RECORDS)):
            partition = spread[i % len(spread)]
            value = C.txn_value(self.name, instance, number, i, intent)
            producer.produce(self.topic, value.encode(), partition=partition)
            records.append((partition, value))
        return number, intent, records, begun

    def _transaction(self, producer: Producer, instance: int) -> bool:
        """One transaction; False when this instance must be replaced."""
        number, intent, records, begun, commit_at = 0, "c", [], self.clock(), None
        outcome, keep = "unknown", True
        try:
            number, intent, records, begun = self._write(producer, instance)
            if intent == "a":
                producer.flush(TXN_CALL_S)  # the records reach the log first: there is data to abort
                producer.abort_transaction(TXN_CALL_S)
                outcome = "aborted"
            else:
                commit_at = self.clock()
                outcome = self._commit(producer)
                keep = outcome == "committed"
        except KafkaException as e:
            if self.current is not None:
                number, intent, records, begun = self.current
            outcome, keep = self._after_error(producer, e)
        self.current = None
        if number:
            self.history.append(C.Txn(self.name, instance, number, intent, records, begun, commit_at,
                                      outcome, self.clock()))
        return keep

    def _commit(self, producer: Producer) -> str:
        for _ in range(COMMIT_TRIES):
            try:
                producer.commit_transaction(TXN_CALL_S)
                return "committed"
            except KafkaException as e:
                error = e.args[0]
                if error.txn_requires_abort():
                    producer.abort_transaction(TXN_CALL_S)
                    return "aborted"
                if not error.retriable():
                    raise
        return "unknown"

    def _after_error(self, producer: Producer, e: KafkaException) -> tuple[str, bool]:
        error = e.args[0]
        if error.txn_requires_abort() and not error.fatal():
            try:
                producer.abort_transaction(TXN_CALL_S)
                return "aborted", True
            except KafkaException as again:
                log.info("%s: abort after %s: %s", self.name, e, again)
                return "unknown", False
        if error.fatal():
            self.fatal.append(str(e))
        log.info("%s.%d: %s", self.name, self.instance, e)
        return "unknown", False

    def _zombie(self) -> None:
        """The current instance writes a transaction; a successor initialises; then the old one
        asks to commit, which the broker must refuse (its epoch is fenced)."""
        old, instance = self.producer, self.instance
        assert old is not None
        try:
            number, intent, records, begun = self._write(old, instance)
        except KafkaException as e:
            log.info("%s: zombie's writes: %s", self.name, e)
            return
        old.flush(TXN_CALL_S)
        self.producer = None
        try:
            self.producer = self._new_instance()
        except _Stopped:
            close_producer(old)
            raise
        commit_at = self.clock()
        try:
            old.commit_transaction(TXN_CALL_S)
            outcome = "committed"
        except KafkaException:
            outcome = "fenced"
        close_producer(old)
        self.history.append(C.Txn(self.name, instance, number, "c", records, begun, commit_at, outcome,
                                  self.clock()))

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self.thread.is_alive():
            self.thread.join()

    def close(self) -> None:
        self.stop()
        close_producer(self.producer)


class _Stopped(Exception):
    pass


class TxnWorkload:
    """``producers`` transactional producers and ``consumers`` read_committed consumers;
    ``client`` as Workload's."""

    def __init__(self, client: dict, topic: str, partitions: int, seed: int, producers: int = 2,
                 consumers: int = 2) -> None:
        self.history: list = []
        self.t0 = time.monotonic()
        self.producers = [TxnProducerActor(f"t{i}", client, topic, partitions, seed * 1000 + i,
                                           self.history, self.clock) for i in range(producers)]
        self.consumers = [ConsumerActor(f"rc{i}", client, topic, partitions, self.history, self.clock,
                                        group=None) for i in range(consumers)]
        for c in self.consumers:
            c.config["isolation.level"] = "read_committed"

    @property
    def transactional_ids(self) -> list[str]:
        return [p.name for p in self.producers]

    def clock(self) -> float:
        return round(time.monotonic() - self.t0, 4)

    def start(self) -> TxnWorkload:
        for actor in [*self.producers, *self.consumers]:
            actor.start()
        return self

    def stop_producers(self) -> None:
        for p in self.producers:
            p.stop()

    def stop_consumers(self) -> None:
        for c in self.consumers:
            c.stop()

    def close(self) -> None:
        """End every client, stopped or not."""
        for producer in self.producers:
            producer.close()
        for consumer in self.consumers:
            consumer.close()

    def fatal(self) -> list[str]:
        return [f"{p.name}: {e}" for p in self.producers for e in p.fatal]

    def crashed(self) -> list[str]:
        """Actors whose thread an unexpected exception ended: the workload shrank under the trial."""
        return [a.crashed for a in [*self.producers, *self.consumers] if a.crashed]

    def polled_up_to(self) -> dict[tuple[str, int], int]:
        seen: dict[tuple[str, int], int] = {}
        for e in list(self.history):
            if isinstance(e, C.Poll):
                seen[(e.consumer, e.partition)] = max(seen.get((e.consumer, e.partition), 0), e.offset + 1)
        return seen
