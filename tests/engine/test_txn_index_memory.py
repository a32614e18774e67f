"""engine/txn_index.py's TransactionIndex answers read_committed fetches from the entries it
keeps in memory (it is its file's only writer): the answers are Kafka's collectAbortedTxns
over the file's entries, whatever appends, truncations and resets came before, and a fetch
reads nothing from the file."""
from __future__ import annotations

import os
import random

import pytest

import engine.txn_index as txn_index
from engine.txn_index import AbortedTxn, TransactionIndex, collect_aborted, read_aborted_txns


def _history(rng: random.Random, n: int) -> list[AbortedTxn]:
    entries, last = [], 0
    for _ in range(n):
        first = last + rng.randint(0, 5)
        last = first + rng.randint(1, 20)
        entries.append(AbortedTxn(rng.randint(1, 5), first, last, last + 1 - rng.randint(0, 3)))
    return entries


@pytest.mark.parametrize("seed", range(5))
def test_collect_aborted_from_memory_is_kafkas_collect_aborted_txns_over_the_file(tmp_path, seed):
    rng = random.Random(seed)
    path = str(tmp_path / "00000000000000000000.txnindex")
    index = TransactionIndex(path, 0)
    for step in range(300):
        action = rng.random()
        if action < 0.8:
            last = index.last_offset if index.last_offset is not None else 0
            first = last + rng.randint(1, 10)
            end = first + rng.randint(0, 20)
            index.append(AbortedTxn(rng.randint(1, 5), first, end, end + 1 - rng.randint(0, 3)))
        elif action < 0.95:
            index.truncate_to(rng.randint(0, (index.last_offset or 0) + 5))
        else:
            index.reset()
        on_disk = read_aborted_txns(path)
        assert index.all_aborted() == on_disk
        assert index.last_offset == (on_disk[-1].last_offset if on_disk else None)
        top = (index.last_offset or 0) + 30
        for _ in range(5):
            fetch = rng.randint(0, top)
            upper = rng.randint(0, top)
            expected = collect_aborted(on_disk, fetch, upper)
            assert index.collect_aborted(fetch, upper) == expected, (step, fetch, upper)
    index.close()


def test_a_reopened_index_answers_from_the_entries_it_read_at_open(tmp_path, monkeypatch):
    path = str(tmp_path / "00000000000000000000.txnindex")
    entries = _history(random.Random(7), 2000)
    with TransactionIndex(path, 0) as index:
        for entry in entries:
            index.append(entry)
    index = TransactionIndex(path, 0)
    reads = []
    real_pread = os.pread
    monkeypatch.setattr(txn_index.os, "pread", lambda *a: reads.append(a) or real_pread(*a))
    fetch = entries[1500].last_offset
    result = index.collect_aborted(fetch, fetch + 50)
    assert result == collect_aborted(entries, fetch, fetch + 50)
    assert result.aborted and reads == []
    index.close()


def test_an_index_corrupt_at_open_still_reports_its_corruption_on_read(tmp_path):
    path = str(tmp_path / "00000000000000000000.txnindex")
    with open(path, "wb") as f:
        f.write(b"\x00\x07" + bytes(32))  # version 7
    index = TransactionIndex(path, 0)
    with pytest.raises(txn_index.InvalidIndexError):
        index.collect_aborted(0, 10)
    index.reset()
    assert index.collect_aborted(0, 10).aborted == []
    index.close()
