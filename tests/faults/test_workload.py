"""A trial's workload ends every client it made: once closed, no librdkafka instance of it is left
to reconnect to a cluster that is gone (or to whatever listens on its ports next) and to log."""
from __future__ import annotations

import logging
import os
import socket
import time

import pytest

from tests.faults import workload as W
from tests.faults.workload import TxnWorkload, Workload

CLIENT_LOG = "strom.faults.client"


def _librdkafka_threads() -> int:
    """This process's threads that librdkafka started (each instance has its own, named rdk:*)."""
    count = 0
    tasks = f"/proc/{os.getpid()}/task"
    for tid in os.listdir(tasks):
        try:
            with open(f"{tasks}/{tid}/comm") as f:
                count += f.read().startswith("rdk:")
        except FileNotFoundError:  # a thread that ended while we looked
            pass
    return count


def _nothing_listening() -> str:
    """An address on which nothing listens: every connection the clients try is refused."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


def _wait_for(condition, bound_s: float = 20.0) -> None:
    deadline = time.monotonic() + bound_s
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.05)


@pytest.mark.skipif(not os.path.isdir(f"/proc/{os.getpid()}/task"), reason="threads are counted in /proc")
def test_a_workload_closed_mid_run_leaves_no_client_running(caplog):
    """The way out of a failed trial: producers with records in flight and consumers polling a
    cluster that is unreachable, closed without being stopped first."""
    caplog.set_level(logging.INFO, logger=CLIENT_LOG)
    before = _librdkafka_threads()
    workload = Workload({"bootstrap.servers": _nothing_listening()}, "t", 2, producers=2, rate=50.0)
    try:
        workload.start()
        actors = {"p0", "p1", "group", "assign"}
        logged = lambda: {r.getMessage().split(":")[0] for r in caplog.records}  # noqa: E731
        _wait_for(lambda: all(p.sent for p in workload.producers) and actors <= logged())
        assert all(p.sent for p in workload.producers)
        # every client is live: it tried the address and said it could not connect
        assert actors <= logged()
        assert _librdkafka_threads() > before
    finally:
        workload.close()
    assert _librdkafka_threads() == before
    assert not any(a.thread.is_alive() for a in [*workload.producers, *workload.consumers])
    with pytest.raises(RuntimeError, match="closed"):
        workload.producers[0].producer.produce("t", b"after", partition=0)
    assert all(c.consumer is None for c in workload.consumers)
    assert workload.crashed() == []  # refused connections are the clients' business, not a crash
    workload.close()  # a second close (a trial's finally after its own stop) is harmless


@pytest.mark.skipif(not os.path.isdir(f"/proc/{os.getpid()}/task"), reason="threads are counted in /proc")
def test_a_transactional_workload_closed_leaves_no_client_running(monkeypatch):
    # its producers wait in init_transactions (bounded by TXN_CALL_S) for a coordinator that is
    # not there; a shorter bound lets close() join them sooner
    monkeypatch.setattr(W, "TXN_CALL_S", 1.0)
    before = _librdkafka_threads()
    workload = TxnWorkload({"bootstrap.servers": _nothing_listening()}, "t", 2, seed=1)
    try:
        workload.start()
        _wait_for(lambda: _librdkafka_threads() > before)
        assert _librdkafka_threads() > before
    finally:
        workload.close()
    assert _librdkafka_threads() == before
    assert not any(a.thread.is_alive() for a in [*workload.producers, *workload.consumers])
    assert workload.crashed() == []


def test_an_actor_whose_thread_an_unexpected_error_ends_is_reported_as_crashed(monkeypatch):
    """A producer thread that dies of an error nothing expects (not a client's KafkaException)
    would only shrink the workload and let the trial pass on fewer writers: it is named in
    crashed(), which fails the trial."""
    def broken(self):
        raise ValueError("a bug in the actor")

    monkeypatch.setattr(W.ProducerActor, "_send_paced", broken)
    workload = Workload({"bootstrap.servers": _nothing_listening()}, "t", 2, producers=2, rate=50.0)
    try:
        workload.start()
        _wait_for(lambda: len(workload.crashed()) == 2)
    finally:
        workload.close()
    crashed = workload.crashed()
    assert sorted(c.split(":")[0] for c in crashed) == ["p0", "p1"]
    assert all("ValueError: a bug in the actor" in c for c in crashed)


def test_a_transactional_actor_that_crashes_is_reported_and_a_clean_one_is_not(monkeypatch):
    monkeypatch.setattr(W, "TXN_CALL_S", 1.0)

    def broken(self):
        raise KeyError("lost state")

    workload = TxnWorkload({"bootstrap.servers": _nothing_listening()}, "t", 2, seed=1)
    monkeypatch.setattr(workload.producers[0], "_new_instance", broken.__get__(workload.producers[0]))
    try:
        workload.start()
        _wait_for(lambda: bool(workload.crashed()))
    finally:
        workload.close()
    (crashed,) = workload.crashed()
    assert crashed.startswith("t0: KeyError: 'lost state'")
