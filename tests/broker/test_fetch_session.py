"""KIP-227 session rules (broker/fetch_session.py)."""
import pytest

from broker.fetch_session import FetchSessionCache, FetchSessionError
from protocol.errors import Error


def test_epoch_zero_opens_a_session_holding_the_requested_partitions():
    cache = FetchSessionCache()
    session, incremental = cache.begin(0, 0, [("t", 0, 10, 100), ("t", 1, 20, 100)], [])
    assert session.session_id > 0 and not incremental and session.epoch == 1
    entries = [(k, p, e.fetch_offset) for (k, p), e in session.partitions.items()]
    assert entries == [("t", 0, 10), ("t", 1, 20)]


def test_incremental_fetch_updates_adds_and_forgets_partitions():
    cache = FetchSessionCache()
    session, _ = cache.begin(0, 0, [("t", 0, 10, 100), ("t", 1, 20, 100)], [])
    same, incremental = cache.begin(session.session_id, 1, [("t", 0, 15, 100), ("u", 0, 0, 50)], [("t", 1)])
    assert same is session and incremental and session.epoch == 2
    assert {(k, p): e.fetch_offset for (k, p), e in session.partitions.items()} == {("t", 0): 15, ("u", 0): 0}


@pytest.mark.parametrize("session_id,epoch,code", [
    (12345, 1, Error.FETCH_SESSION_ID_NOT_FOUND),
    (0, 3, Error.INVALID_FETCH_SESSION_EPOCH),
])
def test_unknown_sessions_and_bad_epochs_are_errors(session_id, epoch, code):
    with pytest.raises(FetchSessionError) as err:
        FetchSessionCache().begin(session_id, epoch, [], [])
    assert err.value.code == code


def test_a_repeated_epoch_is_refused_and_epoch_minus_one_closes():
    cache = FetchSessionCache()
    session, _ = cache.begin(0, 0, [("t", 0, 0, 1)], [])
    cache.begin(session.session_id, 1, [], [])
    with pytest.raises(FetchSessionError):
        cache.begin(session.session_id, 1, [], [])
    assert cache.begin(session.session_id, -1, [], []) == (None, False)
    with pytest.raises(FetchSessionError):
        cache.begin(session.session_id, 3, [], [])


def test_an_incremental_response_mentions_only_partitions_with_news():
    cache = FetchSessionCache()
    session, _ = cache.begin(0, 0, [("t", 0, 0, 1)], [])
    entry = session.partitions[("t", 0)]
    assert cache.changed(entry, False, 0, 5, 5, 0)  # first time: the client knows nothing
    assert not cache.changed(entry, False, 0, 5, 5, 0)
    assert cache.changed(entry, True, 0, 5, 5, 0)  # records
    assert cache.changed(entry, False, 0, 6, 6, 0)  # the high watermark moved


def test_the_least_recently_used_session_is_evicted_when_full():
    cache = FetchSessionCache(max_slots=2)
    a, _ = cache.begin(0, 0, [], [])
    b, _ = cache.begin(0, 0, [], [])
    cache.begin(a.session_id, 1, [], [])
    c, _ = cache.begin(0, 0, [], [])
    assert set(cache.sessions) == {a.session_id, c.session_id}
    assert b.session_id not in cache.sessions
