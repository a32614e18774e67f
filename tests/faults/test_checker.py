"""The checker against small synthetic histories: one per anomaly, each holding exactly that anomaly,
clean ones that must pass, and a property test over histories generated from a correct log model."""
from __future__ import annotations

import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.faults.checker import (
    ANOMALIES,
    NAMES,
    Ack,
    Committed,
    Fail,
    FinalRead,
    LogEnd,
    Poll,
    ReplicaLog,
    Send,
    check,
    dumps,
    loads,
)

T = "t"


def acked(producer: str, partition: int, value: str, offset: int) -> list:
    return [Send(producer, T, partition, value, 0.0), Ack(producer, T, partition, value, offset, 0.1)]


def final(partition: int, values: list[str], end: int | None = None) -> FinalRead:
    return FinalRead(T, partition, list(enumerate(values)), len(values) if end is None else end)


def polls(consumer: str, partition: int, records: list[tuple[int, str]], session: int = 0) -> list:
    return [Poll(consumer, T, partition, o, v, 1.0, session) for o, v in records]


def replicas(partition: int, values: list[str], brokers=(1, 2, 3), hw: int | None = None) -> list:
    hw = len(values) if hw is None else hw
    return [ReplicaLog(b, T, partition, True, hw, list(enumerate(values))) for b in brokers]


LOG = ["p0-0", "p1-0", "p0-1", "p1-1", "p0-2"]


def clean() -> list:
    """Two producers interleaved on partition 0, read by a consumer, the final read and three ISR
    replicas, the group committed at the log end."""
    history = []
    for offset, value in enumerate(LOG):
        history += acked(value.split("-")[0], 0, value, offset)
    history += polls("assign", 0, list(enumerate(LOG)))
    history += [final(0, LOG), *replicas(0, LOG), Committed("g", T, 0, len(LOG))]
    return history


def anomalies(result) -> set[str]:
    return {name for name, n in result.counts.items() if n}


def test_clean_history_passes_with_every_count_zero():
    result = check(clean())
    assert result.ok, result.summary
    assert result.counts == dict.fromkeys(NAMES, 0)
    assert (result.acknowledged, result.checked) == (5, 5)
    assert "no anomalies" in result.summary


def test_lost_acknowledged_value_absent_though_final_read_reached_past_it():
    history = [e for e in clean() if not isinstance(e, FinalRead)]
    history.append(FinalRead(T, 0, [(o, v) for o, v in enumerate(LOG) if v != "p0-1"], len(LOG)))
    result = check(history)
    assert not result.ok
    assert anomalies(result) == {"lost"}
    assert result.examples["lost"] == [{"topic": T, "partition": 0, "value": "p0-1", "offset": 2,
                                        "end_offset": 5, "at_offset": None}]
    assert result.failed == ["lost"]
    assert "1 lost" in result.summary


def test_unseen_when_final_read_ended_before_the_acknowledged_offset_is_not_lost():
    history = [e for e in clean() if not isinstance(e, FinalRead)]
    history.append(final(0, LOG[:3]))
    result = check(history)
    assert anomalies(result) == {"unseen"}
    assert result.counts["unseen"] == 2
    assert result.ok, "unseen is judged apart"
    assert (result.acknowledged, result.checked) == (5, 3)
    assert not check(history, allow_unseen=False).ok


def offsetless(history: list, value: str) -> list:
    """The history with ``value``'s acknowledgement stripped of its offset, as librdkafka reports a
    batch it acknowledged implicitly (its own answer lost, a later batch acknowledged)."""
    return [Ack(e.producer, e.topic, e.partition, e.value, None, e.time)
            if isinstance(e, Ack) and e.value == value else e for e in history]


def test_an_acknowledgement_without_an_offset_is_judged_by_presence_not_position():
    result = check(offsetless(clean(), "p0-1"))
    assert result.ok, result.summary
    assert (result.acknowledged, result.checked) == (5, 5)


def test_an_acknowledgement_without_an_offset_missing_before_a_later_value_is_lost():
    history = [e for e in offsetless(clean(), "p0-1") if not isinstance(e, FinalRead)]
    history.append(FinalRead(T, 0, [(o, v) for o, v in enumerate(LOG) if v != "p0-1"], len(LOG)))
    result = check(history)
    assert anomalies(result) == {"lost"} and not result.ok
    assert result.examples["lost"][0]["present_later_value"] == ["p0-2"]


def test_an_acknowledgement_without_an_offset_missing_after_everything_read_is_unseen():
    history = [e for e in offsetless(clean(), "p0-2") if not isinstance(e, FinalRead)]
    history.append(final(0, LOG[:4]))
    result = check(history)
    assert anomalies(result) == {"unseen"} and result.ok


def test_unseen_when_a_partition_has_no_final_read():
    history = [e for e in clean() if not isinstance(e, FinalRead)] + acked("p0", 1, "p0-9", 0)
    history.append(final(0, LOG))
    result = check(history)
    assert anomalies(result) == {"unseen"}
    assert result.examples["unseen"][0]["value"] == "p0-9"


def test_duplicate_value_at_two_offsets():
    history = [e for e in clean() if not isinstance(e, FinalRead)]
    history.append(final(0, LOG + ["p1-0"]))
    result = check(history)
    assert anomalies(result) == {"duplicate"}
    assert result.examples["duplicate"] == [{"value": "p1-0", "positions": [[T, 0, 1], [T, 0, 5]]}]


def test_a_duplicate_names_the_producer_epochs_its_copies_were_written_under():
    """A second copy under a newer producer epoch is the client's re-send after bumping its
    epoch (the broker's idempotence covers one epoch); under the same epoch it is the broker's."""
    log = LOG + ["p1-0"]
    history = [e for e in clean() if not isinstance(e, (FinalRead, ReplicaLog))]
    history += [final(0, log)]
    history += [ReplicaLog(b, T, 0, True, len(log), list(enumerate(log)), [(0, 7, 0), (5, 7, 1)])
                for b in (1, 2, 3)]
    result = check(history)
    assert not result.ok and anomalies(result) == {"duplicate"}
    assert result.examples["duplicate"] == [{"value": "p1-0", "positions": [[T, 0, 1], [T, 0, 5]],
                                             "producer_epochs": [0, 1]}]
    assert check(loads(dumps(history))).examples == result.examples


def test_duplicate_value_in_two_partitions():
    history = clean() + polls("assign", 1, [(0, "p0-0")]) + [final(1, ["p0-0"])]
    assert anomalies(check(history)) == {"duplicate"}


def test_reordered_producer_values_stand_in_the_log_out_of_send_order():
    # p0 sent p0-0, p0-1, p0-2 in that order and was told offsets 0, 2, 4; the log holds p0-1 first
    swapped = ["p0-1", "p1-0", "p0-0", "p1-1", "p0-2"]
    history = [e for e in clean() if not isinstance(e, (FinalRead, ReplicaLog, Poll))]
    history += [final(0, swapped), *replicas(0, swapped), *polls("assign", 0, list(enumerate(swapped)))]
    result = check(history)
    assert anomalies(result) == {"reordered"}
    kinds = [e["kind"] for e in result.examples["reordered"]]
    assert kinds.count("send_order") == 1 and kinds.count("ack_offset") == 2
    send_order = next(e for e in result.examples["reordered"] if e["kind"] == "send_order")
    assert send_order["values"] == ["p0-0", "p0-1"] and send_order["offsets"] == [2, 0]


def test_reordered_ack_offset_disagrees_with_where_the_value_is():
    history = [e for e in clean() if not (isinstance(e, Ack) and e.value == "p1-1")]
    history.append(Ack("p1", T, 0, "p1-1", 7, 0.1))
    result = check(history)
    assert anomalies(result) == {"reordered"}
    assert result.examples["reordered"][0]["acknowledged_offset"] == 7
    assert result.examples["reordered"][0]["log_offsets"] == [3]


def test_inconsistent_offsets_poll_and_final_read_disagree():
    history = clean() + polls("group", 0, [(2, "p9-9")])
    result = check(history)
    assert anomalies(result) == {"inconsistent_offsets"}
    assert result.examples["inconsistent_offsets"][0]["values"] == {
        "p0-1": ["broker 1", "broker 2", "broker 3", "final", "poll assign"], "p9-9": ["poll group"]}


def test_inconsistent_offsets_out_of_isr_replica_below_its_high_watermark():
    stale = ReplicaLog(4, T, 0, False, 2, [(0, "p0-0"), (1, "p7-7")])
    result = check(clean() + [stale])
    assert anomalies(result) == {"inconsistent_offsets"}


def test_nonmonotonic_poll_offset_goes_back_within_one_session():
    history = clean() + polls("assign", 0, [(1, "p1-0")])
    result = check(history)
    assert anomalies(result) == {"nonmonotonic_poll"}
    assert result.examples["nonmonotonic_poll"][0]["offsets"] == [4, 1]


def test_nonmonotonic_poll_same_offset_polled_twice_within_one_session():
    history = clean() + polls("assign", 0, [(4, "p0-2")])
    assert anomalies(check(history)) == {"nonmonotonic_poll"}


def test_rebalance_resets_monotonicity():
    # a new session (rebalance, assignment, seek) may start anywhere, earlier offsets included
    history = clean() + polls("assign", 0, [(1, "p1-0"), (2, "p0-1")], session=1)
    history += polls("assign", 0, [(4, "p0-2")], session=2)
    result = check(history)
    assert result.ok and not anomalies(result)


def test_poll_skip_over_offsets_the_final_read_holds():
    history = [e for e in clean() if not (isinstance(e, Poll) and e.offset in (2, 3))]
    result = check(history)
    assert anomalies(result) == {"poll_skip"}
    assert result.examples["poll_skip"][0]["offsets"] == [1, 4]
    assert result.examples["poll_skip"][0]["first_skipped"] == [2, 3]


def test_poll_gap_over_offsets_absent_from_the_final_read_is_not_a_skip():
    # offsets are sparse (transaction markers take offsets no consumer sees)
    history = acked("p0", 0, "p0-0", 0) + acked("p0", 0, "p0-1", 3)
    history += polls("assign", 0, [(0, "p0-0"), (3, "p0-1")])
    history.append(FinalRead(T, 0, [(0, "p0-0"), (3, "p0-1")], 4))
    assert check(history).ok and not anomalies(check(history))


def test_replica_divergence_isr_member_lacks_a_record_below_the_high_watermark():
    history = [e for e in clean() if not (isinstance(e, ReplicaLog) and e.broker == 3)]
    history.append(ReplicaLog(3, T, 0, True, 5, [(o, v) for o, v in enumerate(LOG) if o != 2]))
    result = check(history)
    assert anomalies(result) == {"replica_divergence"}
    assert result.examples["replica_divergence"][0]["by_broker"] == {1: "p0-1", 2: "p0-1", 3: None}


def test_replica_divergence_follower_behind_the_leaders_high_watermark():
    # the ISR's high watermark is the leader's (the highest): every ISR member holds what is below it
    history = [e for e in clean() if not (isinstance(e, ReplicaLog) and e.broker == 3)]
    history.append(ReplicaLog(3, T, 0, True, 3, list(enumerate(LOG[:3]))))
    result = check(history)
    assert anomalies(result) == {"replica_divergence"}
    assert [e["offset"] for e in result.examples["replica_divergence"]] == [3, 4]


def test_replica_tails_above_high_watermark_and_lagging_out_of_isr_replicas_are_fine():
    history = [e for e in clean() if not isinstance(e, ReplicaLog)]
    history += [ReplicaLog(1, T, 0, True, 5, list(enumerate(LOG + ["p0-3"]))),   # leader's uncommitted tail
                ReplicaLog(2, T, 0, True, 5, list(enumerate(LOG + ["p1-2"]))),   # diverged above the HW
                ReplicaLog(3, T, 0, False, 2, list(enumerate(LOG[:2] + ["p5-5"])))]  # lagging, own HW 2
    history += [Send("p0", T, 0, "p0-3", 2.0), Fail("p0", T, 0, "p0-3", "timed out", False, 3.0)]
    result = check(history)
    assert result.ok and not anomalies(result), result.summary


def test_committed_past_end_of_the_log():
    history = clean() + [Committed("g", T, 0, 6)]
    result = check(history)
    assert anomalies(result) == {"committed_past_end"}
    assert result.examples["committed_past_end"][0]["log_end_offset"] == 5


def test_committed_past_end_is_judged_against_the_highest_log_end_known():
    # a final read cut short (unseen) does not make a committed offset look past the end
    cut = [e for e in clean() if not isinstance(e, FinalRead)] + [final(0, LOG[:3])]
    assert anomalies(check(cut)) == {"unseen"}
    assert anomalies(check(cut + [LogEnd(T, 0, 6), Committed("g", T, 0, 6)])) == {"unseen"}
    assert "committed_past_end" in anomalies(check(cut + [LogEnd(T, 0, 6), Committed("g", T, 0, 7)]))


def test_failed_but_present_definite_failure_found_in_the_log():
    history = [e for e in clean() if not (isinstance(e, Ack) and e.value == "p1-1")]
    history.append(Fail("p1", T, 0, "p1-1", "INVALID_RECORD", True, 0.1))
    result = check(history)
    assert anomalies(result) == {"failed_but_present"}
    assert not result.ok


def test_indefinite_failures_present_or_absent_are_fine():
    present = [e for e in clean() if not (isinstance(e, Ack) and e.value == "p1-1")]
    present.append(Fail("p1", T, 0, "p1-1", "REQUEST_TIMED_OUT", False, 0.1))
    absent = clean() + [Send("p1", T, 0, "p1-2", 2.0), Fail("p1", T, 0, "p1-2", "timed out", False, 3.0)]
    definite_absent = clean() + [Send("p1", T, 0, "p1-3", 2.0), Fail("p1", T, 0, "p1-3", "bad", True, 3.0)]
    for history in (present, absent, definite_absent):
        result = check(history)
        assert result.ok and not anomalies(result), result.summary


def test_ignored_values_are_left_out_of_every_check():
    # a probe written twice outside the workload, polled by the workload's consumer
    history = clean() + polls("assign", 0, [(5, "probe"), (6, "probe")])
    history[history.index(next(e for e in history if isinstance(e, FinalRead)))] = \
        FinalRead(T, 0, list(enumerate(LOG + ["probe", "probe"])), 7)
    assert "duplicate" in anomalies(check(history))
    assert check(history, ignore={"probe"}).ok


def test_more_event_lists_are_checked_with_the_history():
    history = clean()
    later = [e for e in history if isinstance(e, (FinalRead, ReplicaLog, Committed))]
    earlier = [e for e in history if e not in later]
    assert check(earlier, later[:1], later[1:]).counts == check(history).counts
    assert check(earlier).counts["unseen"] == 5


def test_examples_are_capped_but_counts_are_not():
    history = [e for e in clean() if not isinstance(e, FinalRead)] + [FinalRead(T, 0, [], 5)]
    result = check(history, max_examples=2)
    assert result.counts["lost"] == 5 and len(result.examples["lost"]) == 2


def test_history_round_trips_through_json():
    history = clean() + [Fail("p1", T, 0, "x", "e", False, 1.5), LogEnd(T, 0, 5)]
    again = loads(dumps(history))
    assert again == history
    assert check(again).to_dict() == check(history).to_dict()


# ---------------------------------------------------------------------------------------------
# Property: a history from a correct log model passes; one injected anomaly is found by its name


PARTITIONS, PRODUCERS = 2, 2


def model_history(rng: random.Random) -> list:
    """Idempotent producers appending to per-partition logs in send order; some writes fail, either
    way (definite: not in the log; indefinite: maybe); consumers read consecutive runs in sessions
    that start anywhere; a full final read; three ISR replicas holding the log (the leader with an
    uncommitted tail); a lagging out-of-ISR replica; committed offsets within the log."""
    logs: dict[int, list[str]] = {p: [] for p in range(PARTITIONS)}
    history: list = []
    outcomes: list = []
    for i in range(rng.randrange(12, 40)):
        # every partition gets two acknowledged values from each producer first
        forced = i < 2 * PARTITIONS * PRODUCERS
        producer = f"p{i % PRODUCERS}" if forced else f"p{rng.randrange(PRODUCERS)}"
        partition = (i // PRODUCERS) % PARTITIONS if forced else rng.randrange(PARTITIONS)
        value = f"{producer}-{i}"
        history.append(Send(producer, T, partition, value, float(i)))
        fate = "ack" if forced else rng.choice(["ack", "ack", "ack", "maybe-in", "maybe-out", "refused"])
        if fate in ("ack", "maybe-in"):
            logs[partition].append(value)
        if fate == "ack":
            outcomes.append(Ack(producer, T, partition, value, len(logs[partition]) - 1, i + rng.random()))
        elif fate == "refused":
            outcomes.append(Fail(producer, T, partition, value, "INVALID_RECORD", True, i + rng.random()))
        else:
            outcomes.append(Fail(producer, T, partition, value, "timed out", False, i + rng.random()))
    history += sorted(outcomes, key=lambda e: e.time)  # outcomes arrive in any order
    for consumer in ("group", "assign"):
        session = 0
        for _ in range(rng.randrange(1, 4)):
            session += 1
            for p, log in logs.items():
                start = rng.randrange(len(log) + 1)
                stop = rng.randrange(start, len(log) + 1)
                history += polls(consumer, p, [(o, log[o]) for o in range(start, stop)], session)
    for p, log in logs.items():
        history.append(final(p, log))
        history.append(LogEnd(T, p, len(log)))
        history.append(ReplicaLog(1, T, p, True, len(log), list(enumerate(log + [f"tail-{p}"]))))
        history += replicas(p, log, brokers=(2, 3))
        lag = rng.randrange(len(log) + 1)
        history.append(ReplicaLog(4, T, p, False, lag, list(enumerate(log[:lag]))))
        history.append(Committed("g", T, p, rng.randrange(len(log) + 1)))
    return history


def _replace(history: list, old, new) -> list:
    return [new if e is old else e for e in history]


def inject(name: str, history: list, rng: random.Random) -> list:
    """One anomaly of the named kind, leaving every other check passing."""
    acks = [e for e in history if isinstance(e, Ack)]
    reads = {e.partition: e for e in history if isinstance(e, FinalRead)}
    if name == "lost":
        ack = rng.choice(acks)
        read = reads[ack.partition]
        kept = [(o, v) for o, v in read.records if v != ack.value]
        return _replace(history, read, FinalRead(T, ack.partition, kept, read.end_offset))
    if name == "unseen":
        ack = rng.choice(acks)
        read = reads[ack.partition]
        kept = [(o, v) for o, v in read.records if o < ack.offset]
        return _replace(history, read, FinalRead(T, ack.partition, kept, ack.offset))
    if name == "duplicate":
        read = rng.choice(list(reads.values()))
        _, value = rng.choice(read.records)
        records = read.records + [(read.end_offset, value)]
        return _replace(history, read, FinalRead(T, read.partition, records, read.end_offset + 1))
    if name == "reordered":
        # swap two of one producer's acknowledged values everywhere they were read
        ack = rng.choice(acks)
        mine = [a for a in acks if (a.producer, a.partition) == (ack.producer, ack.partition)]
        a, b = rng.sample(mine, 2)
        swap = {a.value: b.value, b.value: a.value}
        out = []
        for e in history:
            if isinstance(e, (FinalRead, ReplicaLog)) and e.partition == a.partition:
                e = type(e)(**{**e.__dict__, "records": [(o, swap.get(v, v)) for o, v in e.records]})
            elif isinstance(e, Poll) and e.value in swap:
                e = Poll(e.consumer, e.topic, e.partition, e.offset, swap[e.value], e.time, e.session)
            out.append(e)
        return out
    if name == "inconsistent_offsets":
        ack = rng.choice(acks)
        return history + [Poll("late", T, ack.partition, ack.offset, "phantom", 99.0, 0)]
    if name == "nonmonotonic_poll":
        ack = rng.choice(acks)
        return history + polls("late", ack.partition, [(ack.offset, ack.value)] * 2)
    if name == "poll_skip":
        read = rng.choice([r for r in reads.values() if len(r.records) >= 3])
        i = rng.randrange(len(read.records) - 2)
        return history + polls("late", read.partition, [read.records[i], read.records[i + 2]])
    if name == "replica_divergence":
        follower = rng.choice([e for e in history if isinstance(e, ReplicaLog) and e.broker in (2, 3)])
        drop = rng.randrange(len(follower.records))
        records = follower.records[:drop] + follower.records[drop + 1:]
        return _replace(history, follower, ReplicaLog(follower.broker, T, follower.partition, True,
                                                      follower.high_watermark, records))
    if name == "committed_past_end":
        read = rng.choice(list(reads.values()))
        return history + [Committed("g2", T, read.partition, read.end_offset + rng.randrange(1, 5))]
    if name == "failed_but_present":
        ack = rng.choice(acks)
        refused = Fail(ack.producer, T, ack.partition, ack.value, "refused", True, ack.time)
        return _replace(history, ack, refused)
    raise AssertionError(name)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rng=st.randoms(use_true_random=False))
def test_history_from_a_correct_log_model_always_passes(rng):
    result = check(model_history(rng))
    assert result.ok and not anomalies(result), result.summary


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rng=st.randoms(use_true_random=False), name=st.sampled_from(NAMES))
def test_one_injected_anomaly_is_detected_under_its_name(rng, name):
    result = check(inject(name, model_history(rng), rng))
    assert anomalies(result) == {name}, result.summary
    assert result.ok == (name not in ANOMALIES)


# ---- transactions ---------------------------------------------------------------------------------

from tests.faults.checker import (  # noqa: E402
    TXN_ANOMALIES,
    Init,
    Stable,
    Txn,
    TxnRead,
    check_transactions,
    txn_key,
    txn_value,
)


def txn(number: int, intent: str, parts: list[int], outcome: str, commit_at: float | None = 2.0,
        producer: str = "t0", instance: int = 1) -> Txn:
    records = [(p, txn_value(producer, instance, number, i, intent)) for i, p in enumerate(parts)]
    return Txn(producer, instance, number, intent, records, 1.0, commit_at if intent == "c" else None,
               outcome, 3.0)


def committed_reads(*txns_: Txn, partitions: int = 2, drop: set[str] = frozenset(),
                    extra: dict[int, list[str]] | None = None) -> list:
    """The final read_committed reads holding every record of the given transactions (in their
    order, a marker's offset after each), less ``drop``, plus ``extra`` values; and ListOffsets
    agreeing at both levels."""
    logs: dict[int, list[tuple[int, str]]] = {p: [] for p in range(partitions)}
    ends = dict.fromkeys(range(partitions), 0)
    for t in txns_:
        for p, v in t.records:
            if v not in drop:
                logs[p].append((ends[p], v))
            ends[p] += 1
        for p in {p for p, _ in t.records}:
            ends[p] += 1  # the marker
    for p, values in (extra or {}).items():
        for v in values:
            logs[p].append((ends[p], v))
            ends[p] += 1
    return ([TxnRead("read_committed", T, p, logs[p], ends[p]) for p in range(partitions)]
            + [Stable(T, p, ends[p], ends[p]) for p in range(partitions)])


def found(history: list) -> dict[str, int]:
    result = check_transactions(history)
    return {name: n for name, n in result.counts.items() if name in TXN_ANOMALIES and n}


def test_a_clean_transactional_history_passes():
    a, b = txn(1, "c", [0, 1, 0], "committed"), txn(2, "a", [1, 0], "aborted")
    c = txn(3, "c", [1], "committed")
    polls_ = [Poll("rc0", T, 0, 0, a.records[0][1], 2.5, 0), Poll("rc0", T, 0, 1, a.records[2][1], 2.6, 0)]
    result = check_transactions([Init("t0", 1, 0.5), a, b, c, *polls_], committed_reads(a, c))
    assert result.ok, result.summary
    assert result.counts["txn_committed"] == 2 and result.counts["txn_aborted"] == 1


def test_an_aborted_transactions_record_read_committed_is_an_aborted_read_g1a():
    a, b = txn(1, "c", [0], "committed"), txn(2, "a", [1], "aborted")
    assert found([a, b, *committed_reads(a, b)]) == {"aborted_read": 1}
    # a transaction never asked to commit (its producer died first) may not be seen either
    c = txn(3, "c", [1], "unknown", commit_at=None)
    assert found([a, c, *committed_reads(a, c)]) == {"aborted_read": 1}


def test_a_read_committed_poll_before_the_commit_was_asked_is_an_intermediate_read_g1b():
    a = txn(1, "c", [0, 1], "committed", commit_at=2.0)
    early = Poll("rc0", T, 0, 0, a.records[0][1], 1.5, 0)
    assert found([a, early, *committed_reads(a)]) == {"intermediate_read": 1}


def test_part_of_a_committed_transaction_missing_is_a_torn_transaction_and_lost():
    a = txn(1, "c", [0, 0, 1], "committed")
    in_partition = committed_reads(a, drop={a.records[1][1]})
    assert found([a, *in_partition]) == {"torn_transaction": 1, "lost_after_commit": 1}
    whole_partition = committed_reads(a, drop={a.records[2][1]})
    result = check_transactions([a, *whole_partition])
    assert result.examples["torn_transaction"][0]["scope"] == "partitions"
    # an unknown outcome may be all there or all gone, never in part
    u = txn(2, "c", [0, 1], "unknown")
    assert found([u, *committed_reads(u)]) == {}
    assert found([u, *committed_reads(u, drop={v for _, v in u.records})]) == {}
    assert found([u, *committed_reads(u, drop={u.records[0][1]})]) == {"torn_transaction": 1}


def test_a_committed_transaction_absent_is_lost_after_commit():
    a = txn(1, "c", [0, 1], "committed")
    assert found([a, *committed_reads(a, drop={v for _, v in a.records})]) == {"lost_after_commit": 2}


def test_a_committed_record_at_two_offsets_is_a_duplicate_after_commit():
    a = txn(1, "c", [0], "committed")
    assert found([a, *committed_reads(a, extra={1: [a.records[0][1]]})]) == {"duplicate_after_commit": 1}


def test_a_commit_asked_after_the_successors_init_that_lands_is_a_zombie_not_fenced():
    zombie = txn(1, "c", [0], "fenced", commit_at=5.0)
    successor = Init("t0", 2, 4.0)
    fenced = [Init("t0", 1, 0.5), successor, zombie, *committed_reads()]
    assert found(fenced) == {}
    landed = [Init("t0", 1, 0.5), successor, zombie, *committed_reads(zombie)]
    assert found(landed) == {"zombie_not_fenced": 1}
    said_committed = Txn(*[getattr(zombie, f) for f in ("producer", "instance", "number", "intent", "records",
                                                         "begun", "commit_at")], "committed", 6.0)
    assert found([Init("t0", 1, 0.5), successor, said_committed, *committed_reads()]) == \
        {"zombie_not_fenced": 1, "lost_after_commit": 1}
    # a commit asked before the successor initialised may land (the new init completes it)
    early = txn(1, "c", [0], "unknown", commit_at=3.0)
    assert found([Init("t0", 1, 0.5), successor, early, *committed_reads(early)]) == {}


def test_a_last_stable_offset_below_the_high_watermark_after_the_heal_is_a_hanging_transaction():
    a = txn(1, "c", [0], "committed")
    assert found([a, *committed_reads(a)[:-2], Stable(T, 0, 0, 2), Stable(T, 1, 0, 0)]) == \
        {"hanging_transaction": 1}


def test_read_committed_polls_going_back_or_disagreeing_on_an_offset_are_found():
    a, b = txn(1, "c", [0], "committed"), txn(2, "c", [0], "committed")
    back = [Poll("rc0", T, 0, 2, b.records[0][1], 3.5, 0), Poll("rc0", T, 0, 0, a.records[0][1], 3.6, 0)]
    assert found([a, b, *back, *committed_reads(a, b)]) == {"nonmonotonic_poll": 1}
    other = [Poll("rc1", T, 0, 0, b.records[0][1], 3.5, 0)]
    result = found([a, b, *other, *committed_reads(a, b)])
    assert result["inconsistent_offsets"] == 1


def test_transactional_values_name_their_producer_instance_and_transaction():
    assert txn_key(txn_value("t3", 2, 17, 4, "a")) == ("t3", 2, 17)
    assert txn_key("p0-12") is None and txn_key("probe") is None


def test_a_transactional_history_survives_json():
    a = txn(1, "c", [0, 1], "committed")
    history = [Init("t0", 1, 0.5), a, *committed_reads(a)]
    assert loads(dumps(history)) == history
