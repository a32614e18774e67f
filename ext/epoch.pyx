# cython: language_level=3
"""Leader-epoch cache: leader epoch -> start offset of that epoch, for one partition log
(Kafka's LeaderEpochFileCache).

Every batch carries the leader epoch it was written in; the cache records the first
offset of each epoch, so the end of epoch N is always the start of the next epoch (or the
log end offset for the latest). That one fact answers OffsetsForLeaderEpoch and gives a
returning follower its exact truncation point (KIP-101, KIP-279): a follower that wrote
ahead in epoch 5 up to offset 142 while the leader's cache says {5: 100, 7: 130} learns
end_offset_for(5) == (5, 130) and truncates 130..142.

Persisted as Kafka's ``leader-epoch-checkpoint`` text file, "\\n" line ends:

    line   content              meaning
    1      0                    version
    2      N                    number of entries
    3..    "epoch startOffset"  N lines, epochs and offsets strictly increasing

written to ``<path>.tmp``, fsynced, renamed over ``path``, and the directory fsynced, so a
crash leaves either the old file or the new one. Reading follows Kafka's
CheckpointFile: an empty file, or one holding only the version line, is an empty cache;
fields are split on whitespace; each entry is assigned in order (so a non-monotonic file
is repaired exactly as Kafka repairs it on load).

Invariant: epochs and start offsets both strictly increase. ``assign`` keeps it by
removing, from the end, every entry that would break it (Kafka's
maybeTruncateNonMonotonicEntries): a newer epoch starting at or before an older one's
start means that older epoch's records were truncated away.
"""
import os
import re

from libc.stdint cimport INT32_MAX, int32_t, int64_t

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1

# Java's Integer.parseInt/Long.parseLong: optional sign, ASCII digits only.
_INT = re.compile(rb"[+-]?[0-9]+")
# LeaderEpochCheckpointFile splits an entry on \s+ and wants exactly two fields; Java's
# split drops trailing empty fields, so trailing whitespace is allowed, leading is not.
_ENTRY = re.compile(rb"([+-]?[0-9]+)[ \t\x0b\x0c]+([+-]?[0-9]+)[ \t\x0b\x0c]*")
_INT64_MAX = 2**63 - 1


cdef class LeaderEpochCache:

    def __init__(self, path=None):
        """Loads ``path`` if it exists (malformed file -> ValueError naming it); None keeps
        the cache in memory only."""
        self._entries = []
        self.path = None if path is None else os.fspath(path)
        if self.path is not None:
            self._load()

    def __repr__(self):
        return f"LeaderEpochCache({self.path!r}, {self._entries!r})"

    cdef int _load(self) except -1:
        cdef int lineno
        try:
            with open(self.path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return 0
        # bytes.splitlines ends lines at \n, \r and \r\n, like Java's readLine.
        lines = data.splitlines()
        if not lines:
            return 0

        def malformed(lineno, reason):
            line = lines[lineno - 1] if lineno <= len(lines) else b""
            return ValueError(
                f"malformed leader-epoch checkpoint {self.path}, line {lineno} "
                f"{line!r}: {reason}")

        if _INT.fullmatch(lines[0]) is None:
            raise malformed(1, "expected the version")
        if int(lines[0]) != 0:
            raise malformed(1, f"unknown version {int(lines[0])}, expected 0")
        if len(lines) == 1:
            return 0
        if _INT.fullmatch(lines[1]) is None or int(lines[1]) < 0:
            raise malformed(2, "expected the number of entries")
        expected = int(lines[1])
        if len(lines) - 2 != expected:
            raise malformed(len(lines) if len(lines) - 2 > expected else 2,
                            f"expected {expected} entries, found {len(lines) - 2}")
        for lineno in range(3, len(lines) + 1):
            m = _ENTRY.fullmatch(lines[lineno - 1])
            if m is None:
                raise malformed(lineno, 'expected "epoch startOffset"')
            epoch, start_offset = int(m.group(1)), int(m.group(2))
            if not 0 <= epoch <= INT32_MAX:
                raise malformed(lineno, f"epoch {epoch} outside [0, {INT32_MAX}]")
            if not 0 <= start_offset <= _INT64_MAX:
                raise malformed(lineno, f"start offset {start_offset} outside [0, 2^63)")
            self._assign(epoch, start_offset)
        return 0

    cdef bytes _checkpoint_bytes(self):
        parts = [f"0\n{len(self._entries)}\n"]
        for epoch, start_offset in self._entries:
            parts.append(f"{epoch} {start_offset}\n")
        return "".join(parts).encode("ascii")

    def flush(self):
        """Write the checkpoint file (no-op for an in-memory cache)."""
        cdef Py_ssize_t done = 0
        if self.path is None:
            return
        data = self._checkpoint_bytes()
        tmp = self.path + ".tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
        try:
            while done < len(data):
                done += os.write(fd, data[done:])
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self.path)
        dir_fd = os.open(os.path.dirname(os.path.abspath(self.path)),
                         os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)

    def entries(self):
        return list(self._entries)

    def __len__(self):
        return len(self._entries)

    @property
    def latest_epoch(self):
        latest = self._latest()
        return UNDEFINED_EPOCH if latest is None else latest[0]

    @property
    def earliest_entry(self):
        return self._entries[0] if self._entries else None

    @property
    def latest_entry(self):
        return self._latest()

    cdef tuple _latest(self):
        # Built with wraparound=False: no negative indexing.
        cdef Py_ssize_t n = len(self._entries)
        return self._entries[n - 1] if n else None

    cdef Py_ssize_t _floor_index(self, int64_t epoch):
        """Index of the entry with the largest epoch <= ``epoch``, or -1."""
        cdef Py_ssize_t lo = 0, hi = len(self._entries), mid
        while lo < hi:
            mid = (lo + hi) // 2
            if <int64_t>self._entries[mid][0] <= epoch:
                lo = mid + 1
            else:
                hi = mid
        return lo - 1

    cdef bint _assign(self, int32_t epoch, int64_t start_offset) except -1:
        """Returns whether the cache changed."""
        cdef tuple latest = self._latest()
        if epoch < 0:
            return False
        if start_offset < 0:
            raise ValueError(f"invalid leader epoch entry ({epoch}, {start_offset})")
        if latest is not None and latest[0] == epoch and latest[1] <= start_offset:
            return False
        while latest is not None and (latest[0] >= epoch or latest[1] >= start_offset):
            self._entries.pop()
            latest = self._latest()
        self._entries.append((epoch, start_offset))
        return True

    cpdef assign(self, int32_t epoch, int64_t start_offset, bint flush=True):
        """Record that ``epoch`` starts at ``start_offset``. Ignored for a negative epoch or if
        it is already the latest entry with that start (or an earlier one). Entries that
        would break monotonicity (epoch >= new epoch, or start offset >= new start offset)
        are removed first. Raises ValueError for a negative start offset."""
        if self._assign(epoch, start_offset) and flush:
            self.flush()

    cpdef tuple end_offset_for(self, int32_t requested_epoch, int64_t log_end_offset):
        """OffsetsForLeaderEpoch semantics: (largest epoch <= requested, its exclusive end
        offset = start of the next epoch, or log_end_offset for the latest epoch).
        requested == UNDEFINED_EPOCH or > every known epoch -> (UNDEFINED_EPOCH,
        UNDEFINED_EPOCH_OFFSET); requested < every known epoch -> (requested, start offset of
        the earliest epoch)."""
        cdef list entries = self._entries
        cdef tuple latest = self._latest()
        cdef Py_ssize_t floor
        if requested_epoch == UNDEFINED_EPOCH:
            # A bootstrapping follower, or one on a message format without epochs.
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if latest is not None and latest[0] == requested_epoch:
            # The current epoch is still being written to: it ends at the log end.
            return requested_epoch, log_end_offset
        floor = self._floor_index(requested_epoch)
        if floor == len(entries) - 1:
            # Above every known epoch (or the cache is empty).
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if floor < 0:
            # Below every known epoch: those records were deleted or never existed here;
            # the follower should resume from where this log's known history starts.
            return requested_epoch, entries[0][1]
        return entries[floor][0], entries[floor + 1][1]

    cpdef int32_t epoch_for_offset(self, int64_t offset):
        """The epoch whose range holds ``offset`` (UNDEFINED_EPOCH if before the first)."""
        cdef int32_t epoch = UNDEFINED_EPOCH
        for entry_epoch, start_offset in self._entries:
            if start_offset > offset:
                break
            epoch = entry_epoch
        return epoch

    def previous_epoch(self, int32_t epoch):
        """The largest epoch < ``epoch``, or UNDEFINED_EPOCH."""
        cdef Py_ssize_t floor = self._floor_index(<int64_t>epoch - 1)
        return self._entries[floor][0] if floor >= 0 else UNDEFINED_EPOCH

    cpdef truncate_from_end(self, int64_t end_offset, bint flush=True):
        """Drop entries whose start offset >= end_offset (log truncated to end_offset)."""
        cdef tuple latest = self._latest()
        if end_offset < 0 or latest is None or latest[1] < end_offset:
            return
        while latest is not None and latest[1] >= end_offset:
            self._entries.pop()
            latest = self._latest()
        if flush:
            self.flush()

    cpdef truncate_from_start(self, int64_t start_offset, bint flush=True):
        """Log start moved to start_offset: drop entries that end at or before it and move
        the earliest remaining entry's start up to start_offset."""
        cdef list entries = self._entries
        cdef Py_ssize_t n = 0
        while n < len(entries) and entries[n][1] <= start_offset:
            n += 1
        if n == 0:
            return
        # entries[n - 1] is the epoch covering start_offset: keep it, starting there.
        covering_epoch = entries[n - 1][0]
        del entries[:n]
        entries.insert(0, (covering_epoch, start_offset))
        if flush:
            self.flush()

    def clear(self, bint flush=True):
        self._entries.clear()
        if flush:
            self.flush()
