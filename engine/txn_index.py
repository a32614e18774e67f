"""Kafka's aborted-transaction index: the ``.txnindex`` file beside a segment.

One entry per transaction aborted by a marker written in this segment (a transaction may
start in an earlier one), appended in the order the markers land. Each entry is an
AbortedTxn, 34 bytes, big-endian, byte-identical to Kafka's (AbortedTxn.java)::

    offset  field             type   meaning
    0       version           int16  0
    2       producerId        int64  the producer whose transaction aborted
    10      firstOffset       int64  the transaction's first offset in this partition
    18      lastOffset        int64  the offset of its ABORT marker
    26      lastStableOffset  int64  the partition's last stable offset once the marker
                                     completed the transaction

The file has no header and is not preallocated: it is created by its first append (a
segment without aborted transactions has no ``.txnindex``, as in Kafka), and its entries
are the ``size // 34`` whole entries; lastOffset strictly increases from entry to entry.

A read_committed fetch asks each segment from the fetch offset on for
``collect_aborted(fetch_offset, upper_bound_offset)`` (Kafka's collectAbortedTxns): the
entries whose transactions overlap the range, and whether the search is complete, i.e. an
entry's last stable offset reached the upper bound, so no later segment can hold an
abort of a transaction that overlaps the range.

Corruption. Kafka's TransactionIndex.sanityCheck refuses an entry whose lastOffset is
below the segment's base offset, and its reader refuses a version above 0; both raise
InvalidIndexError here, which makes recovery rebuild the segment's indexes. A size that is
not a multiple of 34 (a torn append) is refused by ``sanity_check`` too, as the offset and
time indexes are: Kafka's reader skips the torn tail, but its next append would land after
it and misalign every later entry. Reads (``parse_aborted_txns``, ``read_aborted_txns``)
ignore a torn tail, as Kafka's iterator does; ``append`` cuts it off before writing.

Unlike Kafka's, a reopened index knows its last entry, so an append below it is refused
after a restart too.

Reads from memory. A TransactionIndex is its file's only writer, so it keeps the entries it
found at open and those it appended (``append``, ``truncate_to`` and ``reset`` keep them
current) and a read_committed fetch bisects on lastOffset to the first entry that can
overlap the fetch, instead of reading and parsing the file each time (Kafka reads the file
on every fetch). An index whose file failed to parse at open keeps nothing in memory and
reads the file, so its corruption is still reported.
"""
from __future__ import annotations

import os
import struct
from bisect import bisect_left
from typing import NamedTuple

from engine.errors import InvalidIndexError
from engine.reader import file_name

TXN_INDEX_SUFFIX = ".txnindex"
ABORTED_TXN_VERSION = 0
_ENTRY = struct.Struct(">hqqqq")  # version, producerId, firstOffset, lastOffset, lastStableOffset
ENTRY_SIZE = _ENTRY.size  # 34


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    def to_bytes(self) -> bytes:
        return _ENTRY.pack(ABORTED_TXN_VERSION, self.producer_id, self.first_offset,
                           self.last_offset, self.last_stable_offset)


class TxnIndexSearchResult(NamedTuple):
    aborted: list[AbortedTxn]
    is_complete: bool  # the search need not continue into the next segment


def txn_index_file_name(base_offset: int) -> str:
    """``<20-digit base offset>.txnindex``."""
    return file_name(base_offset, TXN_INDEX_SUFFIX)


def parse_aborted_txns(data: bytes | bytearray | memoryview, path: str = "<txnindex>") -> list[AbortedTxn]:
    """The whole entries of ``data`` (a torn tail is ignored); InvalidIndexError for an
    entry whose version is not 0."""
    whole = len(data) - len(data) % ENTRY_SIZE
    entries = []
    for i, (version, pid, first, last, lso) in enumerate(_ENTRY.iter_unpack(memoryview(data)[:whole])):
        if version != ABORTED_TXN_VERSION:
            raise InvalidIndexError(
                f"{path}: aborted transaction version {version} at entry {i}, only "
                f"{ABORTED_TXN_VERSION} is known")
        entries.append(AbortedTxn(pid, first, last, lso))
    return entries


def read_aborted_txns(path: str) -> list[AbortedTxn]:
    """The entries of the index file at ``path``, read without opening it for writing
    (the read-only seam: a live broker may be appending); an absent file has none."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return []
    try:
        return parse_aborted_txns(_read_all(fd), path)
    finally:
        os.close(fd)


def collect_aborted(entries: list[AbortedTxn], fetch_offset: int,
                    upper_bound_offset: int) -> TxnIndexSearchResult:
    """Kafka's collectAbortedTxns over one segment's entries: those whose lastOffset >=
    ``fetch_offset`` (inclusive) and firstOffset < ``upper_bound_offset`` (exclusive),
    complete as soon as an entry's last stable offset reaches the upper bound."""
    aborted = []
    for entry in entries:
        if entry.last_offset >= fetch_offset and entry.first_offset < upper_bound_offset:
            aborted.append(entry)
        if entry.last_stable_offset >= upper_bound_offset:
            return TxnIndexSearchResult(aborted, True)
    return TxnIndexSearchResult(aborted, False)


def _read_all(fd: int) -> bytes:
    size = os.fstat(fd).st_size
    chunks = []
    position = 0
    while position < size:
        chunk = os.pread(fd, size - position, position)
        if not chunk:
            break  # cut short under us: what was read is what there is
        chunks.append(chunk)
        position += len(chunk)
    return b"".join(chunks)


class TransactionIndex:
    """The writable ``.txnindex`` of the segment starting at ``start_offset``.

    Invariants: ``_fd`` is open exactly when the file exists (or was opened before it was
    deleted); ``_size`` is the file's length as this object last wrote or found it;
    ``last_offset`` is the lastOffset of the last whole entry, None when there is none;
    ``_entries`` the file's whole entries and ``_lasts`` their lastOffsets, or both None when
    the file could not be parsed at open (reads then go to the file)."""

    def __init__(self, path: str, start_offset: int):
        self.path = path
        self.start_offset = start_offset
        self._fd = -1
        self._size = 0
        self.last_offset: int | None = None
        self.closed = False
        self._entries: list[AbortedTxn] | None = []
        self._lasts: list[int] | None = []
        try:
            self._fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
        except FileNotFoundError:
            return
        self._size = os.fstat(self._fd).st_size
        try:
            entries = parse_aborted_txns(_read_all(self._fd), self.path)
        except InvalidIndexError:
            # Opened anyway, as Kafka opens its index lazily: sanity_check() names the
            # corruption and recovery reset()s the index; nothing leaks meanwhile.
            self._entries = self._lasts = None
            return
        self._entries = entries
        self._lasts = [entry.last_offset for entry in entries]
        if entries:
            self.last_offset = entries[-1].last_offset

    @classmethod
    def for_segment(cls, directory: str, base_offset: int) -> TransactionIndex:
        return cls(os.path.join(directory, txn_index_file_name(base_offset)), base_offset)

    @property
    def exists(self) -> bool:
        return self._fd >= 0

    @property
    def size_in_bytes(self) -> int:
        return self._size

    def _check_open(self) -> None:
        if self.closed:
            raise ValueError(f"transaction index {self.path} is closed")

    # ---- appends and truncation ---------------------------------------------------------

    def append(self, txn: AbortedTxn) -> None:
        """Write one entry at the end (creating the file on the first). Kafka's rule: the
        lastOffset must be greater than the previous entry's, else InvalidIndexError and
        nothing is written. A failed write (ENOSPC, EIO) leaves the file as it was."""
        self._check_open()
        if self.last_offset is not None and txn.last_offset <= self.last_offset:
            raise InvalidIndexError(
                f"the last offset of appended transactions must increase: {txn.last_offset} is "
                f"not greater than the last offset {self.last_offset} of {self.path}")
        if self._fd < 0:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            self._size = os.fstat(self._fd).st_size
        start = self._size - self._size % ENTRY_SIZE
        if start != self._size:
            os.ftruncate(self._fd, start)  # a torn entry left by a crash
            self._size = start
        entry = txn.to_bytes()
        try:
            written = 0
            while written < ENTRY_SIZE:
                written += os.pwrite(self._fd, entry[written:], start + written)
        except OSError:
            try:
                os.ftruncate(self._fd, start)
            except OSError:
                pass
            raise
        self._size = start + ENTRY_SIZE
        self.last_offset = txn.last_offset
        if self._entries is not None and self._lasts is not None:
            self._entries.append(txn)
            self._lasts.append(txn.last_offset)

    def truncate_to(self, offset: int) -> None:
        """Drop every entry from the first whose lastOffset >= ``offset`` on (Kafka's
        truncateTo: the log is cut at ``offset``, so markers from there on are gone)."""
        self._check_open()
        entries = self.all_aborted()
        i = bisect_left([entry.last_offset for entry in entries] if self._lasts is None else self._lasts,
                        offset)
        if i < len(entries):
            self._truncate_bytes(i * ENTRY_SIZE)
            self.last_offset = entries[i - 1].last_offset if i else None
            if self._entries is not None and self._lasts is not None:
                del self._entries[i:], self._lasts[i:]

    def reset(self) -> None:
        """Remove every entry (the file stays, empty): recovery rebuilds it from the log."""
        self._check_open()
        self._truncate_bytes(0)
        self.last_offset = None
        self._entries, self._lasts = [], []

    def _truncate_bytes(self, size: int) -> None:
        if self._fd >= 0:
            os.ftruncate(self._fd, size)
            self._size = size

    # ---- reads ---------------------------------------------------------------------------

    def all_aborted(self) -> list[AbortedTxn]:
        self._check_open()
        if self._entries is not None:
            return list(self._entries)
        if self._fd < 0:
            return []
        return parse_aborted_txns(_read_all(self._fd), self.path)

    def collect_aborted(self, fetch_offset: int, upper_bound_offset: int) -> TxnIndexSearchResult:
        """``collect_aborted`` over this index's entries, from the first whose lastOffset >=
        ``fetch_offset`` (bisected in memory). An entry before it ends below the fetch offset,
        so its last stable offset (at most its lastOffset + 1) can complete the search only
        when the upper bound is at or below the fetch offset: then every entry is scanned."""
        self._check_open()
        entries, lasts = self._entries, self._lasts
        if entries is None or lasts is None:
            return collect_aborted(self.all_aborted(), fetch_offset, upper_bound_offset)
        if upper_bound_offset <= fetch_offset:
            return collect_aborted(entries, fetch_offset, upper_bound_offset)
        aborted = []
        for i in range(bisect_left(lasts, fetch_offset), len(entries)):
            entry = entries[i]
            if entry.first_offset < upper_bound_offset:
                aborted.append(entry)
            if entry.last_stable_offset >= upper_bound_offset:
                return TxnIndexSearchResult(aborted, True)
        return TxnIndexSearchResult(aborted, False)

    def sanity_check(self) -> None:
        """InvalidIndexError for a torn file, an unknown entry version or an entry whose
        lastOffset is below the segment's start offset (see the module docstring)."""
        self._check_open()
        if self._fd < 0:
            return
        size = os.fstat(self._fd).st_size
        if size % ENTRY_SIZE != 0:
            raise InvalidIndexError(
                f"transaction index {self.path} is corrupt: {size} bytes is not a multiple "
                f"of {ENTRY_SIZE}")
        for entry in parse_aborted_txns(_read_all(self._fd), self.path):  # the file, not memory
            if entry.last_offset < self.start_offset:
                raise InvalidIndexError(
                    f"last offset of aborted transaction {entry} in index {self.path} is less "
                    f"than the start offset {self.start_offset}")

    # ---- lifecycle -----------------------------------------------------------------------

    def flush(self) -> None:
        self._check_open()
        if self._fd >= 0:
            os.fdatasync(self._fd)

    def close(self) -> None:
        """A second close does nothing."""
        if self.closed:
            return
        self.closed = True
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def rename(self, new_path: str) -> None:
        """Move the file (if it exists) and follow it: the ``.deleted``, ``.cleaned`` and
        ``.swap`` suffixes of segment deletion and compaction. Like Kafka's renameTo, the
        index takes the new path even when it has no file yet."""
        try:
            os.replace(self.path, new_path)
        except FileNotFoundError:
            pass
        self.path = new_path

    def delete_if_exists(self) -> bool:
        """Close and delete the file; False when there was none."""
        self.close()
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            return False
        return True

    def __enter__(self) -> TransactionIndex:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"TransactionIndex({self.path}, last_offset={self.last_offset})"


__all__ = [
    "ABORTED_TXN_VERSION", "ENTRY_SIZE", "TXN_INDEX_SUFFIX", "AbortedTxn", "TransactionIndex",
    "TxnIndexSearchResult", "collect_aborted", "parse_aborted_txns", "read_aborted_txns",
    "txn_index_file_name",
]
