"""Incremental fetch sessions (KIP-227), without IO.

A consumer's fetch names a session id and epoch:

    id 0, epoch -1   a full fetch, no session
    id 0, epoch 0    a full fetch that opens a session (if a cache slot is free)
    id N, epoch -1   close session N; a full fetch without a session
    id N, epoch E>0  an incremental fetch: the request lists only partitions that changed
                     (new fetch offset or max bytes) and ``forgotten_topics_data``; the
                     session supplies the rest. E must be the session's next epoch.

An incremental response lists only partitions with news: records, an error, or a high
watermark / last stable offset / log start offset that differs from what the client was
last told. Sessions are evicted least recently used when the cache
(max.incremental.fetch.session.cache.slots) is full.
"""
from __future__ import annotations

import itertools
from collections import OrderedDict
from dataclasses import dataclass, field

from protocol.errors import Error

FULL_NO_SESSION = "full"
INITIAL = 0
FINAL = -1


@dataclass
class SessionPartition:
    fetch_offset: int
    max_bytes: int
    # what the client was last told, to decide whether an incremental response mentions it
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    # the request's other per-partition fields, opaque here (the fetch handler's: leader epochs...)
    extra: tuple = ()


@dataclass
class FetchSession:
    session_id: int
    epoch: int  # the epoch the next request must carry
    partitions: OrderedDict = field(default_factory=OrderedDict)  # (topic key, partition) -> SessionPartition


class FetchSessionError(Exception):
    def __init__(self, code: Error):
        super().__init__(code.name)
        self.code = code


class FetchSessionCache:
    def __init__(self, max_slots: int = 1000):
        self.max_slots = max_slots
        self.sessions: OrderedDict[int, FetchSession] = OrderedDict()
        self._ids = itertools.count(1)

    def begin(self, session_id: int, epoch: int, requested: list[tuple], forgotten: list[tuple]
              ) -> tuple[FetchSession | None, bool]:
        """Resolve a request into (session or None, incremental?). ``requested`` holds
        (key, partition, fetch_offset, max_bytes, *extra) in request order (``extra`` is kept
        with the partition), ``forgotten`` (key, partition).
        Raises FetchSessionError for an unknown session or a wrong epoch."""
        if session_id == 0:
            if epoch == FINAL:
                return None, False
            if epoch != INITIAL:
                raise FetchSessionError(Error.INVALID_FETCH_SESSION_EPOCH)
            if self.max_slots <= 0:
                return None, False
            if len(self.sessions) >= self.max_slots:
                self.sessions.popitem(last=False)
            session = FetchSession(next(self._ids) & 0x7FFFFFFF or next(self._ids), 1)
            for key, partition, offset, max_bytes, *extra in requested:
                session.partitions[(key, partition)] = SessionPartition(offset, max_bytes, extra=tuple(extra))
            self.sessions[session.session_id] = session
            return session, False
        if epoch == FINAL:
            self.sessions.pop(session_id, None)
            return None, False
        session = self.sessions.get(session_id)
        if session is None:
            raise FetchSessionError(Error.FETCH_SESSION_ID_NOT_FOUND)
        if epoch != session.epoch:
            raise FetchSessionError(Error.INVALID_FETCH_SESSION_EPOCH)
        self.sessions.move_to_end(session_id)
        for key, partition in forgotten:
            session.partitions.pop((key, partition), None)
        for key, partition, offset, max_bytes, *extra in requested:
            entry = session.partitions.get((key, partition))
            if entry is None:
                session.partitions[(key, partition)] = SessionPartition(offset, max_bytes, extra=tuple(extra))
            else:
                entry.fetch_offset, entry.max_bytes, entry.extra = offset, max_bytes, tuple(extra)
        session.epoch = session.epoch + 1 if session.epoch < 2**31 - 1 else 1
        return session, True

    @staticmethod
    def changed(entry: SessionPartition, has_records: bool, error: int, high_watermark: int,
                last_stable_offset: int, log_start_offset: int) -> bool:
        """Whether an incremental response must mention this partition; remembers what
        it was told."""
        news = (has_records or error != 0 or high_watermark != entry.high_watermark
                or last_stable_offset != entry.last_stable_offset
                or log_start_offset != entry.log_start_offset)
        entry.high_watermark = high_watermark
        entry.last_stable_offset = last_stable_offset
        entry.log_start_offset = log_start_offset
        return news
