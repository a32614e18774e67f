"""The checker of a fault trial: compares what was acknowledged with what can be read, after the
faults heal, and names every anomaly as Jepsen's Kafka queue workload does.

Theory of operation. A trial's history is a flat list of the events below, in the order they
happened (the workload appends Send, Ack, Fail and Poll as they occur; the trial appends FinalRead,
ReplicaLog, Committed and LogEnd once the faults have healed). Every value is unique in a trial, so
a value names one send. ``check`` builds, per partition, the log the final read saw (offset ->
value, value -> offsets) and the union of every read (polls, final reads, replica records below
that replica's high watermark), then runs each check below against them. It is pure: no IO, no
clock; ``dumps``/``loads`` turn a history into JSON and back, so a failed trial can be saved and
checked again.

Events (plain frozen dataclasses, fields in this order; ``records`` are ``(offset, value)`` pairs):

| event      | fields                                                    | meaning                           |
|------------|-----------------------------------------------------------|-----------------------------------|
| Send       | producer, topic, partition, value, time                   | produce() called: the send order  |
| Ack        | producer, topic, partition, value, offset, time           | acks=all acknowledgement; offset  |
|            |                                                           | None when the client acknowledged |
|            |                                                           | it without one (below)            |
| Fail       | producer, topic, partition, value, error, definite, time  | delivery failed; definite False:  |
|            |                                                           | it may be in the log (:info)      |
| Poll       | consumer, topic, partition, offset, value, time, session  | one record a consumer returned    |
| FinalRead  | topic, partition, records, end_offset                     | a full read from the log start to |
|            |                                                           | end_offset (the high watermark)   |
| ReplicaLog | broker, topic, partition, in_isr, high_watermark, records | one replica's segment files       |
|            | [, producer_epochs]                                       | (and its batches' producer epochs)|
| Committed  | group, topic, partition, offset                           | a committed group offset          |
| LogEnd     | topic, partition, offset                                  | the log end consumers see         |

A consumer bumps ``session`` on every assignment, rebalance or seek: monotonicity is required within
one (consumer, session) only. A committed offset is the next offset to read, so it may equal the
log end: the highest of the LogEnd offsets, final read end_offsets and replica high watermarks.

Checks (``CheckResult.counts`` keys; Jepsen's name where it has one):

| name                 | Jepsen                | an anomaly when                                         |
|----------------------|-----------------------|---------------------------------------------------------|
| lost                 | :lost-write           | acknowledged, absent from the final read, whose         |
|                      |                       | end_offset is past the acknowledged offset              |
| unseen               | :unseen               | acknowledged, absent, and the final read ended at or    |
|                      |                       | before its offset (judged apart: ``allow_unseen``)      |
| duplicate            | :duplicate            | one value at two or more offsets, in any reads          |
| reordered            | :nonmonotonic-send    | one producer's acknowledged values in one partition     |
|                      |                       | stand in the final read in another order than sent (the |
|                      |                       | idempotent producer keeps send order), or an Ack offset |
|                      |                       | is not where the final read has the value               |
| inconsistent_offsets | :inconsistent-offsets | one (partition, offset) holds two values across polls,  |
|                      |                       | final reads and replica records below their HW          |
| nonmonotonic_poll    | :nonmonotonic-poll    | within one session, a partition's polled offsets do not |
|                      |                       | strictly increase                                       |
| poll_skip            | :poll-skip            | within one session, two consecutive polls of a          |
|                      |                       | partition jump over offsets the final read holds        |
| replica_divergence   |                       | ISR members differ (or one lacks a record) at an offset |
|                      |                       | below the ISR's highest high watermark (the leader's)   |
| committed_past_end   |                       | a committed group offset beyond the log end offset      |
| failed_but_present   | :G1a (aborted read)   | a definite Fail whose value some read found             |

An acknowledgement may come without an offset: an idempotent librdkafka producer whose request
for a batch timed out, once a later batch of the same partition is acknowledged, acknowledges the
earlier one too (the broker accepts sequences only in order, so it must be in the log) but never
learns its offset. Such a value is judged by presence: in the final read it is checked (its order
among the producer's values too); absent, it is lost when a value sent after it is in the final
read, unseen otherwise.

Writes whose outcome is unknown (indefinite Fail, or Send without an outcome) may or may not be in
the log: both are fine. Replica records at or above a replica's own high watermark are not
committed and may legitimately differ (a former leader's tail awaiting truncation): they are left
out of every check. Offsets may be sparse, so gaps in a log are never anomalies by themselves.
"""
from __future__ import annotations

import dataclasses
import itertools
import json
from bisect import bisect_left, bisect_right
from collections import defaultdict
from collections.abc import Collection
from dataclasses import dataclass, field

TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class Send:
    producer: str
    topic: str
    partition: int
    value: str
    time: float


@dataclass(frozen=True)
class Ack:
    producer: str
    topic: str
    partition: int
    value: str
    offset: int | None  # None: acknowledged without an offset (see the module docstring)
    time: float


@dataclass(frozen=True)
class Fail:
    producer: str
    topic: str
    partition: int
    value: str
    error: str
    definite: bool  # False: the outcome is unknown, the value may be in the log
    time: float


@dataclass(frozen=True)
class Poll:
    consumer: str
    topic: str
    partition: int
    offset: int
    value: str
    time: float
    session: int  # monotonicity is required within one (consumer, session) only


@dataclass(frozen=True)
class FinalRead:
    topic: str
    partition: int
    records: list[tuple[int, str]]
    end_offset: int  # every offset below it was readable: absent acknowledged values below are lost


@dataclass(frozen=True)
class ReplicaLog:
    broker: int
    topic: str
    partition: int
    in_isr: bool
    high_watermark: int  # records below it are committed and checked; those at or above are not
    records: list[tuple[int, str]]
    # (first offset, producer id, producer epoch) wherever the batches' producer changes: what
    # a duplicate's copies were written under (its ``producer_epochs``, below)
    producer_epochs: list[tuple[int, int, int]] = field(default_factory=list)


@dataclass(frozen=True)
class Committed:
    group: str
    topic: str
    partition: int
    offset: int


@dataclass(frozen=True)
class LogEnd:
    topic: str
    partition: int
    offset: int


EVENTS = {cls.__name__: cls for cls in (Send, Ack, Fail, Poll, FinalRead, ReplicaLog, Committed, LogEnd)}

# Every check by name, in report order; all but unseen decide CheckResult.ok.
ANOMALIES = ("lost", "duplicate", "reordered", "inconsistent_offsets", "nonmonotonic_poll", "poll_skip",
             "replica_divergence", "committed_past_end", "failed_but_present")
NAMES = ANOMALIES + ("unseen",)


@dataclass
class CheckResult:
    ok: bool
    counts: dict[str, int]  # every name in NAMES, zero included
    examples: dict[str, list[dict]]  # at most max_examples per name
    summary: str
    acknowledged: int = 0  # Ack events
    checked: int = 0  # acknowledged values the final read could judge: present, or lost
    failed: list[str] = field(default_factory=list)  # the names that made ok False

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


# ---------------------------------------------------------------------------------------------
# JSON


def to_json(history: list) -> list[dict]:
    return [{"type": type(e).__name__, **dataclasses.asdict(e)} for e in history]


def from_json(items: list[dict]) -> list:
    out = []
    for item in items:
        fields = dict(item)
        cls = EVENTS[fields.pop("type")]
        if "records" in fields:
            fields["records"] = [(int(o), v) for o, v in fields["records"]]
        if "producer_epochs" in fields:
            fields["producer_epochs"] = [tuple(run) for run in fields["producer_epochs"]]
        out.append(cls(**fields))
    return out


def dumps(history: list) -> str:
    return json.dumps(to_json(history), separators=(",", ":"))


def loads(text: str) -> list:
    return from_json(json.loads(text))


# ---------------------------------------------------------------------------------------------
# The checks


class _Examples:
    """Counts per name and the first ``limit`` examples of each."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.counts = dict.fromkeys(NAMES, 0)
        self.examples: dict[str, list[dict]] = {name: [] for name in NAMES}

    def add(self, name: str, example: dict) -> None:
        self.counts[name] += 1
        if len(self.examples[name]) < self.limit:
            self.examples[name].append(example)


class _Reads:
    """Per partition: the final read's log, every read's (offset -> values), value -> positions."""

    def __init__(self, history: list) -> None:
        self.final: dict[TopicPartition, dict[int, str]] = defaultdict(dict)
        self.final_end: dict[TopicPartition, int] = {}
        self.final_positions: dict[TopicPartition, dict[str, list[int]]] = \
            defaultdict(lambda: defaultdict(list))
        # (tp, offset) -> value -> where it was read ("final", "poll <consumer>", "broker <id>")
        self.at: dict[tuple[TopicPartition, int], dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
        self.epoch_runs: dict[TopicPartition, list[tuple[int, int, int]]] = {}
        for e in history:
            if isinstance(e, FinalRead):
                tp = (e.topic, e.partition)
                self.final_end[tp] = max(self.final_end.get(tp, e.end_offset), e.end_offset)
                for offset, value in e.records:
                    self.final[tp][offset] = value
                    if offset not in self.final_positions[tp][value]:
                        self.final_positions[tp][value].append(offset)
                    self.at[(tp, offset)][value].add("final")
            elif isinstance(e, Poll):
                self.at[((e.topic, e.partition), e.offset)][e.value].add(f"poll {e.consumer}")
            elif isinstance(e, ReplicaLog):
                for offset, value in e.records:
                    if offset < e.high_watermark:
                        self.at[((e.topic, e.partition), offset)][value].add(f"broker {e.broker}")
                if e.producer_epochs:
                    self.epoch_runs.setdefault((e.topic, e.partition), sorted(e.producer_epochs))
        for positions in self.final_positions.values():
            for offsets in positions.values():
                offsets.sort()

    def producer_epoch(self, tp: TopicPartition, offset: int) -> int | None:
        """The producer epoch of the batch holding ``offset``, as recorded by the partition's
        first replica log that has them (None: none has)."""
        runs = self.epoch_runs.get(tp)
        i = bisect_right(runs, (offset, float("inf"))) - 1 if runs else -1
        return runs[i][2] if i >= 0 else None

    def everywhere(self) -> dict[str, set[tuple[TopicPartition, int]]]:
        """Value -> every (partition, offset) any read found it at."""
        where: dict[str, set[tuple[TopicPartition, int]]] = defaultdict(set)
        for position, values in self.at.items():
            for value in values:
                where[value].add(position)
        return where


def _check_acknowledged(history: list, reads: _Reads, out: _Examples) -> tuple[int, int]:
    """lost, unseen and reordered; returns (acknowledged, checked)."""
    sent_order: dict[tuple[str, TopicPartition], list[str]] = defaultdict(list)
    acks: dict[str, Ack] = {}
    for e in history:
        if isinstance(e, Send):
            sent_order[(e.producer, (e.topic, e.partition))].append(e.value)
        elif isinstance(e, Ack):
            acks[e.value] = e
    max_polled: dict[TopicPartition, int] = {}
    for e in history:
        if isinstance(e, Poll):
            tp = (e.topic, e.partition)
            max_polled[tp] = max(max_polled.get(tp, -1), e.offset)
    checked = 0
    for ack in acks.values():
        tp = (ack.topic, ack.partition)
        offsets = reads.final_positions[tp].get(ack.value)
        end = reads.final_end.get(tp, 0)
        if ack.offset is None:  # acknowledged without an offset (see Ack): judged by presence
            checked += _check_offsetless(ack, offsets, sent_order, acks, reads, out)
            continue
        if offsets:
            checked += 1
            if ack.offset not in offsets:
                out.add("reordered", {"kind": "ack_offset", "topic": ack.topic, "partition": ack.partition,
                                      "producer": ack.producer, "value": ack.value,
                                      "acknowledged_offset": ack.offset, "log_offsets": offsets})
        elif ack.offset < end:
            checked += 1
            out.add("lost", {"topic": ack.topic, "partition": ack.partition, "value": ack.value,
                             "offset": ack.offset, "end_offset": end,
                             "at_offset": reads.final[tp].get(ack.offset)})
        else:
            out.add("unseen", {"topic": ack.topic, "partition": ack.partition, "value": ack.value,
                               "offset": ack.offset, "end_offset": end,
                               "max_polled_offset": max_polled.get(tp)})
    # Acks without a Send (a history cut short) keep their acknowledgement order.
    for ack in acks.values():
        key = (ack.producer, (ack.topic, ack.partition))
        if ack.value not in sent_order[key]:
            sent_order[key].append(ack.value)
    for (producer, tp), values in sorted(sent_order.items()):
        placed = [(v, reads.final_positions[tp][v][0]) for v in values
                  if v in acks and reads.final_positions[tp].get(v)]
        for (v1, o1), (v2, o2) in zip(placed, placed[1:]):
            if o2 <= o1:
                out.add("reordered", {"kind": "send_order", "topic": tp[0], "partition": tp[1],
                                      "producer": producer, "values": [v1, v2], "offsets": [o1, o2]})
    return len(acks), checked


def _check_offsetless(ack: Ack, offsets, sent_order, acks: dict, reads: _Reads, out: _Examples) -> int:
    """An acknowledgement without an offset: present is fine; absent is lost if a value the same
    producer sent later to the same partition was acknowledged and is in the final read (the
    idempotent producer's order puts this one before it), else unseen. Returns 1 if judged."""
    if offsets:
        return 1
    tp = (ack.topic, ack.partition)
    order = sent_order[(ack.producer, tp)]
    later = order[order.index(ack.value) + 1:] if ack.value in order else []
    found = [v for v in later if v in acks and reads.final_positions[tp].get(v)]
    name = "lost" if found else "unseen"
    out.add(name, {"topic": ack.topic, "partition": ack.partition, "value": ack.value, "offset": None,
                   "end_offset": reads.final_end.get(tp, 0), "present_later_value": found[:1]})
    return 1 if found else 0


def _check_reads(reads: _Reads, out: _Examples) -> None:
    """inconsistent_offsets and duplicate, across every read."""
    for (tp, offset), values in sorted(reads.at.items()):
        if len(values) > 1:
            out.add("inconsistent_offsets", {
                "topic": tp[0], "partition": tp[1], "offset": offset,
                "values": {v: sorted(where) for v, where in sorted(values.items())}})
    for value, positions in sorted(reads.everywhere().items()):
        if len(positions) > 1:
            example = {"value": value, "positions": _positions(positions)}
            epochs = [reads.producer_epoch(tp, offset) for tp, offset in sorted(positions)]
            if any(e is not None for e in epochs):
                # One producer epoch: the broker's idempotence let a retry in. Several: the
                # client bumped its epoch and sent the value again, a new sequence the broker
                # cannot match (Kafka stores it twice as well).
                example["producer_epochs"] = epochs
            out.add("duplicate", example)


def _positions(positions: set[tuple[TopicPartition, int]]) -> list[list]:
    return [[topic, partition, offset] for (topic, partition), offset in sorted(positions)]


def _check_polls(history: list, reads: _Reads, out: _Examples) -> None:
    """nonmonotonic_poll and poll_skip, per (consumer, session, partition)."""
    last: dict[tuple[str, int, TopicPartition], Poll] = {}
    final_offsets = {tp: sorted(log) for tp, log in reads.final.items()}
    for e in history:
        if not isinstance(e, Poll):
            continue
        tp = (e.topic, e.partition)
        key = (e.consumer, e.session, tp)
        prev = last.get(key)
        last[key] = e
        if prev is None:
            continue
        where = {"consumer": e.consumer, "session": e.session, "topic": e.topic, "partition": e.partition,
                 "offsets": [prev.offset, e.offset], "values": [prev.value, e.value],
                 "times": [prev.time, e.time]}
        if e.offset <= prev.offset:
            out.add("nonmonotonic_poll", where)
            continue
        skipped = _between(final_offsets.get(tp, []), prev.offset, e.offset)
        if skipped:
            out.add("poll_skip", {**where, "skipped": len(skipped), "first_skipped": skipped[:5]})


def _between(offsets: list[int], low: int, high: int) -> list[int]:
    """The sorted ``offsets`` strictly between low and high."""
    return offsets[bisect_right(offsets, low):bisect_left(offsets, high)]


def _check_replicas(history: list, out: _Examples) -> None:
    """replica_divergence: every ISR member holds the same records below the ISR's high watermark."""
    isr: dict[TopicPartition, list[ReplicaLog]] = defaultdict(list)
    for e in history:
        if isinstance(e, ReplicaLog) and e.in_isr:
            isr[(e.topic, e.partition)].append(e)
    for tp, members in sorted(isr.items()):
        if len(members) < 2:
            continue
        hw = max(m.high_watermark for m in members)
        held = {m.broker: {o: v for o, v in m.records if o < hw} for m in members}
        for offset in sorted(set().union(*held.values())):
            values = {broker: log.get(offset) for broker, log in sorted(held.items())}
            if len(set(values.values())) > 1:
                out.add("replica_divergence", {"topic": tp[0], "partition": tp[1], "offset": offset,
                                               "high_watermark": hw, "by_broker": values})


def _check_committed(history: list, reads: _Reads, out: _Examples) -> None:
    """A committed offset past the highest log end any source saw: LogEnd, a final read's
    end_offset, a replica's high watermark (a final read cut short must not make it look past)."""
    ends = dict(reads.final_end)
    for e in history:
        if isinstance(e, LogEnd):
            tp = (e.topic, e.partition)
            ends[tp] = max(ends.get(tp, e.offset), e.offset)
        elif isinstance(e, ReplicaLog):
            tp = (e.topic, e.partition)
            ends[tp] = max(ends.get(tp, e.high_watermark), e.high_watermark)
    for e in history:
        if isinstance(e, Committed):
            end = ends.get((e.topic, e.partition))
            if end is not None and e.offset > end:
                out.add("committed_past_end", {"group": e.group, "topic": e.topic, "partition": e.partition,
                                               "offset": e.offset, "log_end_offset": end})


def _check_failed(history: list, reads: _Reads, out: _Examples) -> None:
    where = reads.everywhere()
    for e in history:
        if isinstance(e, Fail) and e.definite and e.value in where:
            out.add("failed_but_present", {"producer": e.producer, "value": e.value, "error": e.error,
                                           "positions": _positions(where[e.value])})


def check(history: list, *more: list, allow_unseen: bool = True, max_examples: int = 10,
          ignore: Collection[str] = ()) -> CheckResult:
    """Every check above over one trial's events: ``history`` and any ``more`` lists (final reads,
    replica logs, committed offsets) taken as one. ``allow_unseen`` False makes unseen fail it too;
    values in ``ignore`` (written outside the workload, such as probes) are left out of every check."""
    events = [e for e in itertools.chain(history, *more) if getattr(e, "value", None) not in ignore]
    if ignore:
        events = [_without(e, ignore) for e in events]
    out = _Examples(max_examples)
    reads = _Reads(events)
    acknowledged, checked = _check_acknowledged(events, reads, out)
    _check_reads(reads, out)
    _check_polls(events, reads, out)
    _check_replicas(events, out)
    _check_committed(events, reads, out)
    _check_failed(events, reads, out)
    judged = ANOMALIES if allow_unseen else NAMES
    failed = [name for name in judged if out.counts[name]]
    summary = _summary(events, out, acknowledged, checked, failed)
    return CheckResult(not failed, out.counts, out.examples, summary, acknowledged, checked, failed)


def _without(e, ignore: Collection[str]):
    if isinstance(e, (FinalRead, ReplicaLog)):
        return dataclasses.replace(e, records=[(o, v) for o, v in e.records if v not in ignore])
    return e


def _summary(history: list, out: _Examples, acknowledged: int, checked: int, failed: list[str]) -> str:
    partitions = {(e.topic, e.partition) for e in history if isinstance(e, (Ack, FinalRead))}
    polls = sum(1 for e in history if isinstance(e, Poll))
    sessions = {(e.consumer, e.session) for e in history if isinstance(e, Poll)}
    replicas = sum(1 for e in history if isinstance(e, ReplicaLog))
    head = (f"{checked} of {acknowledged} acknowledged records checked against the final read of "
            f"{len(partitions)} partitions; {polls} polls in {len(sessions)} consumer sessions; "
            f"{replicas} replica logs.")
    found = [f"{out.counts[name]} {name}" for name in NAMES if out.counts[name]]
    if not failed:
        return f"{head} OK" + (f" ({', '.join(found)})." if found else ": no anomalies.")
    first = out.examples[failed[0]][0] if out.examples[failed[0]] else {}
    return f"{head} FAILED: {', '.join(found)}. First {failed[0]}: {json.dumps(first, sort_keys=True)}."


# ---------------------------------------------------------------------------------------------
# Transactions
#
# The transactional workload (tests/faults/workload.py, TxnWorkload) writes transactions of a few
# records over several partitions; a value names its writer, the writer's instance (a new one
# each time the producer is recreated with the same transactional.id), the transaction, its
# place in it and the seeded intent (``c`` commit, ``a`` abort): ``<producer>.<instance>.<txn>.
# <index>.<intent>``. Its events:
#
# | event    | fields                                                   | meaning                        |
# |----------|----------------------------------------------------------|--------------------------------|
# | Init     | producer, instance, time                                 | init_transactions() returned:  |
# |          |                                                          | every older instance is fenced |
# | Txn      | producer, instance, number, intent, records, begun,      | one transaction; records are   |
# |          | commit_at, outcome, ended                                | (partition, value) produced;   |
# |          |                                                          | commit_at when commit was asked|
# |          |                                                          | (None: never); outcome as the  |
# |          |                                                          | client saw it                  |
# | Poll     | (above) from a read_committed consumer                   | one record it returned         |
# | TxnRead  | isolation, topic, partition, records, end_offset         | a full read after the heal, to |
# |          |                                                          | the LSO (read_committed) or the|
# |          |                                                          | high watermark                 |
# | Stable   | topic, partition, last_stable, high_watermark            | ListOffsets at both isolation  |
# |          |                                                          | levels once the faults healed  |
#
# Outcomes: ``committed`` (commit_transaction returned), ``aborted`` (abort_transaction returned,
# or the commit failed with an abortable error and the abort returned), ``fenced`` (a deliberate
# zombie: an instance asked to commit after its successor's Init) and ``unknown`` (a commit or
# abort call that failed indefinitely, or a fatal error).
#
# Checks (``check_transactions``; Jepsen's names from its Kafka analyses):
#
# | name                 | Jepsen                | an anomaly when                                        |
# |----------------------|-----------------------|--------------------------------------------------------|
# | aborted_read         | G1a                   | a read_committed read (poll or final) returns a record |
# |                      |                       | of a transaction that was aborted or never asked to    |
# |                      |                       | commit                                                 |
# | intermediate_read    | G1b                   | a read_committed poll returns a record before its      |
# |                      |                       | transaction asked to commit: a state no committed      |
# |                      |                       | transaction had yet                                    |
# | torn_transaction     | torn transaction      | the final read_committed read holds some of a          |
# |                      |                       | transaction's records but not all: per partition, or a |
# |                      |                       | whole partition of it missing                          |
# | lost_after_commit    | :lost-write           | the client saw the commit return and a record of it is |
# |                      |                       | absent from the final read_committed read              |
# | duplicate_after_commit | :duplicate          | one value at two offsets in read_committed reads       |
# | zombie_not_fenced    | (KIP-98 fencing)      | a transaction that asked to commit after a newer       |
# |                      |                       | instance of its transactional.id initialised is        |
# |                      |                       | visible, or its commit returned                        |
# | hanging_transaction  | (KIP-664 hanging)     | once the faults healed, a partition's last stable      |
# |                      |                       | offset stays below its high watermark                  |
# | nonmonotonic_poll    | :nonmonotonic-poll    | as above, for the read_committed consumers             |
# | inconsistent_offsets | :inconsistent-offsets | one (partition, offset) holds two values across reads  |
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Init:
    producer: str
    instance: int
    time: float


@dataclass(frozen=True)
class Txn:
    producer: str
    instance: int
    number: int
    intent: str  # "c" or "a": the seeded choice
    records: list[tuple[int, str]]  # (partition, value), in produce order
    begun: float
    commit_at: float | None  # when commit_transaction was first called (None: never)
    outcome: str  # committed, aborted, fenced, unknown
    ended: float


@dataclass(frozen=True)
class TxnRead:
    isolation: str  # read_committed or read_uncommitted
    topic: str
    partition: int
    records: list[tuple[int, str]]
    end_offset: int


@dataclass(frozen=True)
class Stable:
    topic: str
    partition: int
    last_stable: int
    high_watermark: int


EVENTS.update({cls.__name__: cls for cls in (Init, Txn, TxnRead, Stable)})

TXN_ANOMALIES = ("aborted_read", "intermediate_read", "torn_transaction", "lost_after_commit",
                 "duplicate_after_commit", "zombie_not_fenced", "hanging_transaction", "nonmonotonic_poll",
                 "inconsistent_offsets")
OUTCOMES = ("committed", "aborted", "fenced", "unknown")


def txn_value(producer: str, instance: int, number: int, index: int, intent: str) -> str:
    return f"{producer}.{instance}.{number}.{index}.{intent}"


def txn_key(value: str) -> tuple[str, int, int] | None:
    """(producer, instance, transaction number) of a transactional value; None for another."""
    parts = value.split(".")
    if len(parts) != 5 or not all(p.isdigit() for p in parts[1:4]):
        return None
    return parts[0], int(parts[1]), int(parts[2])


def check_transactions(history: list, *more: list, max_examples: int = 10,
                       ignore: Collection[str] = ()) -> CheckResult:
    """Every transactional check above over one trial's events (``history`` and ``more`` taken as
    one); values in ``ignore`` are left out. ``counts`` also holds the transactions by outcome
    (``txn_<outcome>``) and the records each final read returned (``read_<isolation>``)."""
    events = [e for e in itertools.chain(history, *more) if getattr(e, "value", None) not in ignore]
    out = _Examples(max_examples)
    out.counts = dict.fromkeys(TXN_ANOMALIES, 0)
    out.examples = {name: [] for name in TXN_ANOMALIES}
    txns: dict[tuple[str, int, int], Txn] = {}
    inits: dict[str, list[Init]] = defaultdict(list)
    final: dict[TopicPartition, dict[int, str]] = defaultdict(dict)  # read_committed
    final_end: dict[TopicPartition, int] = {}
    read_counts = {"read_committed": 0, "read_uncommitted": 0}
    at: dict[tuple[TopicPartition, int], dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    committed_at: dict[str, set[tuple[TopicPartition, int]]] = defaultdict(set)  # rc reads only
    polls: list[Poll] = []
    for e in events:
        if isinstance(e, Txn):
            txns[(e.producer, e.instance, e.number)] = e
        elif isinstance(e, Init):
            inits[e.producer].append(e)
        elif isinstance(e, TxnRead):
            tp = (e.topic, e.partition)
            records = [(o, v) for o, v in e.records if v not in ignore]
            read_counts[e.isolation] = read_counts.get(e.isolation, 0) + len(records)
            for offset, value in records:
                at[(tp, offset)][value].add(f"final {e.isolation}")
                if e.isolation == "read_committed":
                    final[tp][offset] = value
                    committed_at[value].add((tp, offset))
            if e.isolation == "read_committed":
                final_end[tp] = max(final_end.get(tp, e.end_offset), e.end_offset)
        elif isinstance(e, Poll):
            polls.append(e)
            at[((e.topic, e.partition), e.offset)][e.value].add(f"poll {e.consumer}")
            committed_at[e.value].add(((e.topic, e.partition), e.offset))

    def fenced_by(txn: Txn) -> Init | None:
        """The first Init of a newer instance of txn's producer."""
        later = [i for i in inits.get(txn.producer, []) if i.instance > txn.instance]
        return min(later, key=lambda i: i.time) if later else None

    # G1a and G1b: every read_committed record of a transaction that may not be seen (yet).
    for value, positions in sorted(committed_at.items()):
        key = txn_key(value)
        txn = txns.get(key) if key else None
        if txn is None:
            continue
        if txn.commit_at is None or txn.outcome == "aborted":
            out.add("aborted_read", {"value": value, "outcome": txn.outcome, "commit_at": txn.commit_at,
                                     "positions": _positions(positions)})
    for e in polls:
        key = txn_key(e.value)
        txn = txns.get(key) if key else None
        if txn is not None and txn.commit_at is not None and e.time < txn.commit_at:
            out.add("intermediate_read", {"consumer": e.consumer, "value": e.value, "partition": e.partition,
                                          "offset": e.offset, "polled_at": e.time,
                                          "commit_at": txn.commit_at})
    # Torn and lost: the final read_committed read against each transaction's records.
    present = {v for log in final.values() for v in log.values()}
    topic = next((e.topic for e in events if isinstance(e, TxnRead)), "")
    for _key, txn in sorted(txns.items()):
        by_partition: dict[int, list[str]] = defaultdict(list)
        for partition, value in txn.records:
            by_partition[partition].append(value)
        seen = {p: [v for v in values if v in present] for p, values in by_partition.items()}
        where = {"producer": txn.producer, "instance": txn.instance, "number": txn.number,
                 "outcome": txn.outcome}
        if any(seen.values()):
            for p, values in sorted(by_partition.items()):
                if 0 < len(seen[p]) < len(values):
                    out.add("torn_transaction", {**where, "scope": "partition", "partition": p,
                                                 "present": seen[p],
                                                 "missing": [v for v in values if v not in present]})
                elif not seen[p]:
                    out.add("torn_transaction", {**where, "scope": "partitions", "partition": p,
                                                 "missing": values})
        if txn.outcome == "committed":
            for partition, value in txn.records:
                if value not in present:
                    out.add("lost_after_commit", {**where, "partition": partition, "value": value,
                                                  "end_offset": final_end.get((topic, partition))})
        newer = fenced_by(txn)
        if newer is not None and txn.commit_at is not None and txn.commit_at > newer.time:
            visible = [v for _, v in txn.records if v in committed_at]
            if visible or txn.outcome == "committed":
                out.add("zombie_not_fenced", {**where, "commit_at": txn.commit_at,
                                              "successor": newer.instance, "successor_init": newer.time,
                                              "visible": visible})
    for value, positions in sorted(committed_at.items()):
        if len(positions) > 1:
            out.add("duplicate_after_commit", {"value": value, "positions": _positions(positions)})
    for (tp, offset), values in sorted(at.items()):
        if len(values) > 1:
            out.add("inconsistent_offsets", {"topic": tp[0], "partition": tp[1], "offset": offset,
                                             "values": {v: sorted(w) for v, w in sorted(values.items())}})
    last: dict[tuple[str, int, TopicPartition], Poll] = {}
    for e in polls:
        key3 = (e.consumer, e.session, (e.topic, e.partition))
        prev = last.get(key3)
        last[key3] = e
        if prev is not None and e.offset <= prev.offset:
            out.add("nonmonotonic_poll", {"consumer": e.consumer, "session": e.session,
                                          "partition": e.partition, "offsets": [prev.offset, e.offset],
                                          "values": [prev.value, e.value]})
    for e in events:
        if isinstance(e, Stable) and e.last_stable < e.high_watermark:
            out.add("hanging_transaction", {"topic": e.topic, "partition": e.partition,
                                            "last_stable": e.last_stable, "high_watermark": e.high_watermark})
    failed = [name for name in TXN_ANOMALIES if out.counts[name]]
    outcomes = {f"txn_{o}": sum(1 for t in txns.values() if t.outcome == o) for o in OUTCOMES}
    counts = {**out.counts, **outcomes, **{f"read_{k}": n for k, n in read_counts.items()}}
    by_outcome = ", ".join(f"{o} {outcomes['txn_' + o]}" for o in OUTCOMES)
    lines = [f"transactions: {by_outcome}; instances "
             f"initialised {sum(len(v) for v in inits.values())}; final reads: "
             f"{', '.join(f'{k} {n}' for k, n in read_counts.items())} records"]
    lines += [f"{name}: {out.counts[name]}" + (f"  e.g. {out.examples[name][0]}" if out.counts[name] else "")
              for name in TXN_ANOMALIES]
    committed_records = sum(len(t.records) for t in txns.values() if t.outcome == "committed")
    return CheckResult(not failed, counts, out.examples, "\n".join(lines), acknowledged=committed_records,
                       checked=committed_records, failed=failed)

