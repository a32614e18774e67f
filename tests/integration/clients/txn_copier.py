"""An exactly-once consume-transform-produce loop with confluent-kafka, run as its own process
so that a test can kill it with SIGKILL and start it again with the same transactional id.

    python tests/integration/clients/txn_copier.py --bootstrap B --transactional-id T \
        --group G --source in --sink out --commit-every 200

Each round: consume up to ``--commit-every`` records (read_committed, no auto commit), produce
``value + b"!"`` with the same key to the same partition of the sink, send the consumer's
positions to the transaction and commit. A transaction that must be aborted is aborted and the
consumer rewound to the group's committed offsets, so nothing is copied twice in what a
read_committed reader sees. On a rebalance the open transaction is aborted first (KIP-447: its
offsets would be refused by the new generation anyway).

It prints ``ready`` once the producer is initialized, ``progress <offsets>`` after every commit
(the sum of the committed positions of the partitions it holds), ``aborted <n>`` after every
abort, and exits 0 once the group's committed offsets reach the end of every source partition.
A fatal error ends it with exit code 2 and the error on stderr.

A watchdog ends it with exit code 3 (``hung``) when one commit, send_offsets_to_transaction and
commit_transaction, has not returned within HUNG_S, as an application's liveness check would:
librdkafka 2.10 and later can wait forever in send_offsets_to_transaction once the group's
coordinator left the cluster's metadata (its broker handle is decommissioned and nothing wakes
the coordinator lookup: confluentinc/librdkafka#5511, and the call ignores its timeout, #5456).
The supervisor starts it again; the new producer's InitProducerId fences the hung one.
"""
from __future__ import annotations

import argparse
import os
import sys
import threading
import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition

COMMIT_TIMEOUT_S = 60.0
OFFSETS_TIMEOUT_S = 10.0
DONE_CHECK_S = 1.0
HUNG_S = 20.0  # well past OFFSETS_TIMEOUT_S and a coordinator's failover
HUNG_EXIT = 3


def say(line: str) -> None:
    print(line, flush=True)


class Copier:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        base = {"bootstrap.servers": args.bootstrap, "broker.address.family": "v4", "log_level": 3,
                "socket.timeout.ms": 10_000, "topic.metadata.refresh.interval.ms": 1000}
        if args.debug:
            base["debug"] = args.debug
        self.producer = Producer({**base, "transactional.id": args.transactional_id,
                                  "transaction.timeout.ms": args.transaction_timeout_ms,
                                  "linger.ms": 5, "message.timeout.ms": args.transaction_timeout_ms})
        self.consumer = Consumer({**base, "group.id": args.group, "isolation.level": "read_committed",
                                  "enable.auto.commit": False, "auto.offset.reset": "earliest",
                                  "session.timeout.ms": args.session_timeout_ms,
                                  "heartbeat.interval.ms": max(100, args.session_timeout_ms // 10),
                                  "enable.partition.eof": False})
        self.in_transaction = False
        self.pending = 0  # records produced in the open transaction
        self.aborts = 0
        self.copied = 0  # records copied by this run, committed or not (the pacing counts them)
        self.started = time.monotonic()

    # ---- the transaction ------------------------------------------------------------------
    def begin(self) -> None:
        if not self.in_transaction:
            self.producer.begin_transaction()
            self.in_transaction = True
            self.pending = 0

    def abort(self) -> None:
        """Abort the open transaction and rewind every held partition to the group's committed
        offset (where the last committed transaction left it)."""
        if self.in_transaction:
            self._retrying(lambda: self.producer.abort_transaction(COMMIT_TIMEOUT_S))
            self.in_transaction = False
            self.aborts += 1
            say(f"aborted {self.aborts}")
        self.rewind()

    def rewind(self) -> None:
        held = self.consumer.assignment()
        if not held:
            return
        for tp in self.consumer.committed(held, timeout=COMMIT_TIMEOUT_S):
            offset = tp.offset if tp.offset >= 0 else OFFSET_BEGINNING
            try:
                self.consumer.seek(TopicPartition(tp.topic, tp.partition, offset))
            except KafkaException:  # not yet fetching: the assignment's start offset applies
                pass

    def _retrying(self, call) -> None:
        """``call`` again while it fails with a retriable error; a fatal error ends the process."""
        while True:
            try:
                call()
                return
            except KafkaException as e:
                err = e.args[0]
                if err.fatal():
                    raise
                if err.retriable():
                    print(f"retrying: {err}", file=sys.stderr, flush=True)
                    time.sleep(0.1)
                    continue
                raise

    def commit(self) -> bool:
        """Send the positions and commit, under the watchdog; False (after aborting) if the
        transaction failed."""
        watchdog = threading.Timer(HUNG_S, _hung)
        watchdog.daemon = True
        watchdog.start()
        try:
            return self._commit()
        finally:
            watchdog.cancel()

    def _commit(self) -> bool:
        if self.args.debug:
            print(f"COPIER committing {self.pending}", file=sys.stderr, flush=True)
        held = self.consumer.assignment()
        positions = [tp for tp in self.consumer.position(held) if tp.offset >= 0]
        try:
            if positions:
                self.producer.send_offsets_to_transaction(
                    positions, self.consumer.consumer_group_metadata(), OFFSETS_TIMEOUT_S)
            self._retrying(lambda: self.producer.commit_transaction(COMMIT_TIMEOUT_S))
        except KafkaException as e:
            err = e.args[0]
            # a send_offsets_to_transaction that timed out or failed retriably is given up with
            # the transaction: librdkafka can keep waiting on a group coordinator that left the
            # cluster's metadata; a fresh transaction asks for the coordinator again
            if not (err.txn_requires_abort() or (err.retriable() and not err.fatal())):
                raise
            say(f"abortable {err.name()}")
            self.abort()
            return False
        self.in_transaction = False
        say(f"progress {sum(tp.offset for tp in positions)}")
        return True

    # ---- the group ------------------------------------------------------------------------
    def on_revoke(self, _consumer, _partitions) -> None:
        if self.in_transaction:
            self.abort_without_rewind()

    def abort_without_rewind(self) -> None:
        self._retrying(lambda: self.producer.abort_transaction(COMMIT_TIMEOUT_S))
        self.in_transaction = False
        self.aborts += 1
        say(f"aborted {self.aborts}")

    def done(self) -> bool:
        """The group's committed offsets are at the end of every source partition."""
        meta = self.consumer.list_topics(self.args.source, timeout=10)
        partitions = [TopicPartition(self.args.source, p) for p in meta.topics[self.args.source].partitions]
        committed = {tp.partition: tp.offset for tp in self.consumer.committed(partitions, timeout=10)}
        for tp in partitions:
            _low, high = self.consumer.get_watermark_offsets(tp, timeout=10, cached=False)
            if committed[tp.partition] < high:
                return False
        return True

    # ---- the loop -------------------------------------------------------------------------
    def run(self) -> int:
        self._retrying(lambda: self.producer.init_transactions(COMMIT_TIMEOUT_S))
        say("ready")
        self.consumer.subscribe([self.args.source], on_revoke=self.on_revoke)
        last_check = 0.0
        while True:
            self._pace()
            messages = self.consumer.consume(self.args.commit_every, timeout=0.5)
            copied = 0
            for m in messages:
                if m.error():
                    if m.error().code() == KafkaError._PARTITION_EOF:
                        continue
                    raise KafkaException(m.error())
                self.begin()
                self._produce(m.key(), m.value() + b"!", m.partition())
                copied += 1
            self.copied += copied
            if copied:
                self.commit()
                continue
            now = time.monotonic()
            if now - last_check >= DONE_CHECK_S:
                last_check = now
                if self.done():
                    return 0

    def _pace(self) -> None:
        """At most --max-rate records a second (0: as fast as it goes), so that a test's faults
        land while there is still work to do."""
        if self.args.max_rate > 0:
            ahead = self.copied / self.args.max_rate - (time.monotonic() - self.started)
            if ahead > 0:
                time.sleep(ahead)

    def _produce(self, key: bytes | None, value: bytes, partition: int) -> None:
        while True:
            try:
                self.producer.produce(self.args.sink, value=value, key=key, partition=partition)
                self.pending += 1
                return
            except BufferError:
                self.producer.poll(0.05)

    def close(self) -> None:
        self.consumer.close()


def _hung() -> None:
    say("hung")
    print(f"a commit did not return within {HUNG_S} s (librdkafka#5511): exiting", file=sys.stderr,
          flush=True)
    os._exit(HUNG_EXIT)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--transactional-id", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--source", required=True)
    parser.add_argument("--sink", required=True)
    parser.add_argument("--commit-every", type=int, default=200)
    parser.add_argument("--transaction-timeout-ms", type=int, default=20_000)
    parser.add_argument("--session-timeout-ms", type=int, default=6_000)
    parser.add_argument("--max-rate", type=float, default=0.0, help="records/s at most (0: unpaced)")
    parser.add_argument("--debug", default="", help="librdkafka debug contexts, logged to stderr")
    args = parser.parse_args(argv)
    copier = Copier(args)
    try:
        code = copier.run()
    except KafkaException as e:
        print(f"fatal: {e.args[0]}", file=sys.stderr, flush=True)
        return 2
    copier.close()
    say("done")
    return code


if __name__ == "__main__":
    sys.exit(main())
