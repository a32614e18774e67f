# cython: language_level=3, cdivision=True
"""Kafka's sparse segment indexes, mmap-backed, binary search in C.

Offset index (NNNNNNNNNNNNNNNNNNNN.index), 8-byte entries, big-endian:

    offset  field           type   meaning
    0       relativeOffset  int32  offset - baseOffset, strictly increasing
    4       position        int32  byte position of a batch in the .log file

Time index (NNNNNNNNNNNNNNNNNNNN.timeindex), 12-byte entries, big-endian:

    offset  field           type   meaning
    0       timestamp       int64  strictly increasing (never -1: NO_TIMESTAMP is the empty key)
    8       relativeOffset  int32  offset - baseOffset, never decreasing

Files are byte-identical to Kafka's (OffsetIndex.java, TimeIndex.java).

Lifecycle. A newly created writable index is preallocated (ftruncate, sparse) to
``max_index_size`` rounded down to whole entries and mapped MAP_SHARED whole, read-only;
appends are pwrite(2)s of one entry at its slot, and ``trim_to_valid_size``/``close`` shrink
the file to its entries.

Why pwrite and not a store into the mapping: the file is sparse, so the first entry in each
page needs a block from the filesystem. A store into the mapping asks for it in a page fault,
and a full filesystem (or an IO error) answers that fault with SIGBUS, which kills the process
without a word. pwrite asks in a system call, which fails with ENOSPC/EIO: the append raises
OSError, the entry count stays, and the log dir goes offline through the broker's log dir
failure path. The mapping shares the page cache, so reads see an entry as soon as pwrite
returns. A pwrite cut short (an entry straddling into a page the filesystem cannot give) has
the bytes it wrote zeroed again, so a reopened index ends its prefix before it; and the prefix
scan at open stops at the file's first hole, never reading one through the mapping. Cost: one
system call per index entry, i.e. per ``index.interval.bytes`` of appended batches.

An existing file keeps its size: ``size // entry_size`` slots, of which the entries are the
longest prefix whose keys strictly increase. That prefix rule is how a
preallocated index left behind by a crash (a zero-filled tail after the last store) opens
with the right count: the first all-zero slot after an entry is not greater than it. An
all-zero slot 0 followed by a slot whose key is not greater is the empty index; were it a
real entry ("offset baseOffset at position 0", or "timestamp 0 at baseOffset"), dropping
it changes no lookup's offset, since the empty answer names baseOffset too.

A read-only index (``writable=False``) maps PROT_READ, never creates, grows or trims the
file; the Spark reader opens closed segments' indexes this way.

Search. ``floor_slot`` is Kafka's largestLowerBoundSlotFor: the largest slot whose key is
<= target, or -1. Appends touch only the end of the index and most lookups (fetches near
the log end) land there too, so like Kafka we first try the warm section (the last 8 KiB
of entries): a search confined to it touches the same few pages each time and keeps them
resident, where a search over the whole index would fault in cold pages on every probe
path from the middle.
"""
import io
import os

from libc.errno cimport EINTR, ENOSPC, errno
from libc.stdint cimport INT32_MAX, INT32_MIN, INT64_MAX, int32_t, int64_t, uint32_t, uint64_t
from libc.string cimport memset
from posix.mman cimport MAP_FAILED, MAP_SHARED, PROT_READ, mmap, munmap
from posix.types cimport off_t
from posix.unistd cimport close, pwrite

from ext.cursor cimport be32, be64, put_be32, put_be64

from ext.errors import InvalidIndexError

cdef enum:
    WARM_SECTION_BYTES = 8192


cdef inline int64_t _key_at(const unsigned char *data, Py_ssize_t n, Py_ssize_t entry_size,
                            bint wide_key) noexcept nogil:
    cdef const unsigned char *p = data + n * entry_size
    if wide_key:
        return be64(p)
    return be32(p)


cdef Py_ssize_t floor_slot(const unsigned char *data, Py_ssize_t entries,
                           Py_ssize_t entry_size, bint wide_key,
                           int64_t target) noexcept nogil:
    cdef Py_ssize_t lo, hi, mid, first_warm
    if entries == 0 or _key_at(data, 0, entry_size, wide_key) > target:
        return -1
    # Invariant: key(lo) <= target, and the answer lies in [lo, hi].
    lo = 0
    hi = entries - 1
    first_warm = entries - 1 - WARM_SECTION_BYTES // entry_size
    if first_warm > 0:
        if _key_at(data, first_warm, entry_size, wide_key) <= target:
            lo = first_warm
        else:
            hi = first_warm - 1
    while lo < hi:
        mid = lo + (hi - lo + 1) // 2
        if _key_at(data, mid, entry_size, wide_key) <= target:
            lo = mid
        else:
            hi = mid - 1
    return lo


cdef Py_ssize_t first_slot_with_offset_at_least(const unsigned char *data,
                                                Py_ssize_t entries, Py_ssize_t entry_size,
                                                Py_ssize_t offset_at,
                                                int64_t relative) noexcept nogil:
    # Offsets never decrease in either index, so a lower bound is exact even where the
    # time index repeats an offset (Kafka's search may stop inside such a run).
    cdef Py_ssize_t lo = 0, hi = entries, mid
    while lo < hi:
        mid = lo + (hi - lo) // 2
        if be32(data + mid * entry_size + offset_at) < relative:
            lo = mid + 1
        else:
            hi = mid
    return lo


cdef Py_ssize_t valid_prefix(const unsigned char *data, Py_ssize_t slots,
                             Py_ssize_t entry_size, bint wide_key) noexcept nogil:
    cdef Py_ssize_t n = 1, i
    cdef int64_t previous, key
    if slots == 0:
        return 0
    previous = _key_at(data, 0, entry_size, wide_key)
    while n < slots:
        key = _key_at(data, n, entry_size, wide_key)
        if key <= previous:
            break
        previous = key
        n += 1
    if n > 1:
        return n
    # An all-zero slot 0 with no greater key after it starts a zero tail: the empty index.
    for i in range(entry_size):
        if data[i] != 0:
            return 1
    return 0


cdef class _Index:
    """Shared by OffsetIndex and TimeIndex: file, mapping, entry count, truncation."""

    def __cinit__(self):
        self._fd = -1
        self._data = NULL

    def __dealloc__(self):
        # No trim here: a dropped writable index is left as after a crash, which the
        # prefix rule reopens correctly.
        self._unmap()
        if self._fd >= 0:
            close(self._fd)
            self._fd = -1

    cdef int _open(self, object path, int64_t base_offset, Py_ssize_t max_index_size,
                   bint writable) except -1:
        cdef bint created = False
        cdef Py_ssize_t length
        path = os.fspath(path)
        if base_offset < 0 or base_offset > INT64_MAX - INT32_MAX:
            raise ValueError(f"base offset {base_offset} out of range")
        if max_index_size < 0:
            raise ValueError(f"max_index_size {max_index_size} is negative")
        self.path = path
        self.base_offset = base_offset
        self.writable = writable
        if writable:
            try:
                self._fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
                created = True
            except FileExistsError:
                self._fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
            if created:
                os.ftruncate(self._fd, max_index_size - max_index_size % self._entry_size)
        else:
            self._fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        length = os.fstat(self._fd).st_size
        self._file_length = length
        self._map(length - length % self._entry_size)
        if not created:
            self._entries = valid_prefix(self._data, self._written_slots(), self._entry_size,
                                         self._wide_key)
        return 0

    cdef Py_ssize_t _written_slots(self) except -1:
        # Slots wholly before the file's first hole: a slot touching a hole was never fully
        # written, and the prefix scan must not read a hole through the mapping (tmpfs
        # allocates a page even for a read fault, and on a full filesystem that is SIGBUS).
        try:
            data_end = os.lseek(self._fd, 0, os.SEEK_HOLE)
        except OSError:
            return self._slots
        return min(self._slots, data_end // self._entry_size)

    cdef int _map(self, Py_ssize_t length) except -1:
        cdef void *p
        cdef int prot = PROT_READ    # never stored into: entries are written with pwrite
        self._mapped = 0
        self._slots = 0
        if length == 0:
            self._data = NULL    # mmap rejects a zero length; an empty file has no slots
            return 0
        p = mmap(NULL, <size_t>length, prot, MAP_SHARED, self._fd, 0)
        if p == MAP_FAILED:
            self._data = NULL
            raise OSError(errno, os.strerror(errno), self.path)
        self._data = <unsigned char *>p
        self._mapped = length
        self._slots = length // self._entry_size
        return 0

    cdef void _unmap(self) noexcept:
        if self._data != NULL:
            munmap(self._data, <size_t>self._mapped)
            self._data = NULL
        self._mapped = 0
        self._slots = 0

    cdef int _write_entry(self, const unsigned char *entry, Py_ssize_t slot) except -1:
        """pwrite one entry at ``slot``; an error raises OSError (a cut-short write is
        zeroed again first, best effort)."""
        cdef Py_ssize_t size = self._entry_size, done = 0
        cdef off_t position = <off_t>(slot * self._entry_size)
        cdef ssize_t n
        cdef int err = 0
        cdef unsigned char zeros[16]
        while done < size:
            n = pwrite(self._fd, entry + done, <size_t>(size - done), position + done)
            if n > 0:
                done += n
            elif n < 0 and errno == EINTR:
                continue
            else:
                err = errno if n < 0 else ENOSPC   # a zero count from a regular file
                break
        if err == 0:
            return 0
        if done > 0:
            memset(zeros, 0, sizeof(zeros))
            pwrite(self._fd, zeros, <size_t>done, position)
        raise OSError(err, os.strerror(err), self.path)

    cdef int _check_open(self) except -1:
        if self._fd < 0:
            raise ValueError(f"index {self.path} is closed")
        return 0

    cdef int _check_writable(self) except -1:
        self._check_open()
        if not self.writable:
            raise io.UnsupportedOperation(f"index {self.path} is open read-only")
        return 0

    cdef int _resize(self, Py_ssize_t new_size) except -1:
        cdef Py_ssize_t rounded
        self._check_writable()
        if new_size < 0:
            raise ValueError(f"index size {new_size} is negative")
        rounded = new_size - new_size % self._entry_size
        if rounded < self._entries * self._entry_size:
            raise InvalidIndexError(
                f"cannot resize {self.path} to {new_size} bytes: it holds "
                f"{self._entries} entries of {self._entry_size} bytes")
        if rounded == self._file_length:
            return 0
        # Shrinking truncates the file under the live mapping; nothing is read between
        # the ftruncate and the remap, so no access can fault past the new end of file.
        os.ftruncate(self._fd, rounded)
        self._file_length = rounded
        self._unmap()
        self._map(rounded)
        return 0

    cdef int _truncate_to_entries(self, Py_ssize_t entries) except -1:
        self._entries = entries
        return 0

    cdef int32_t _relative_offset(self, int64_t offset) except? -1:
        if offset < self.base_offset or offset - self.base_offset > INT32_MAX:
            raise InvalidIndexError(
                f"offset {offset} does not fit a relative offset from base offset "
                f"{self.base_offset} in {self.path}")
        return <int32_t>(offset - self.base_offset)

    cdef int64_t _offset_of(self, Py_ssize_t n) noexcept nogil:
        return self.base_offset + be32(
            self._data + n * self._entry_size + self._offset_at)

    @property
    def entries(self):
        return self._entries

    @property
    def max_entries(self):
        return self._slots

    @property
    def size_in_bytes(self):
        return self._entries * self._entry_size

    @property
    def closed(self):
        return self._fd < 0

    def truncate_to(self, int64_t offset):
        """Drop every entry whose offset is >= ``offset``."""
        cdef int64_t relative
        self._check_writable()
        if offset <= self.base_offset:
            self._truncate_to_entries(0)
        elif offset - self.base_offset <= INT32_MAX:
            relative = offset - self.base_offset
            self._truncate_to_entries(first_slot_with_offset_at_least(
                self._data, self._entries, self._entry_size, self._offset_at, relative))

    def truncate(self):
        self._check_writable()
        self._truncate_to_entries(0)

    def resize(self, Py_ssize_t new_size):
        self._resize(new_size)

    def trim_to_valid_size(self):
        self._resize(self._entries * self._entry_size)

    def flush(self):
        self._check_open()
        if self.writable:
            os.fdatasync(self._fd)

    def close(self):
        """Trim (if writable), unmap and close; a second close does nothing."""
        if self._fd < 0:
            return
        try:
            if self.writable:
                self._resize(self._entries * self._entry_size)
        finally:
            self._unmap()
            os.close(self._fd)
            self._fd = -1

    def close_handler(self):
        """Unmap and close without trimming or writing anything (Kafka's closeHandler: a log
        dir that failed is left as it stands); a second close does nothing."""
        if self._fd < 0:
            return
        try:
            self._unmap()
        finally:
            os.close(self._fd)
            self._fd = -1

    def rename(self, new_path):
        new_path = os.fspath(new_path)
        os.replace(self.path, new_path)
        self.path = new_path

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()


cdef class OffsetIndex(_Index):
    """offset -> position in the segment's .log file (see the module docstring)."""

    def __init__(self, path, int64_t base_offset, Py_ssize_t max_index_size=10485760,
                 bint writable=True):
        self._entry_size = 8
        self._wide_key = False
        self._offset_at = 0
        self._open(path, base_offset, max_index_size, writable)

    def __repr__(self):
        return (f"OffsetIndex({self.path!r}, base_offset={self.base_offset}, "
                f"entries={self._entries}, max_entries={self._slots})")

    cdef Py_ssize_t c_lookup(self, int64_t target_offset) noexcept nogil:
        """Slot of the largest entry with offset <= target_offset, or -1."""
        cdef int64_t relative
        if target_offset < self.base_offset:
            # Keys of a sane index are >= 0; a corrupt one may hold negatives, so compare
            # exactly where the difference fits and fall below every int32 otherwise.
            if target_offset >= self.base_offset + INT32_MIN:
                relative = target_offset - self.base_offset
            else:
                relative = <int64_t>INT32_MIN - 1
        else:
            relative = target_offset - self.base_offset
        return floor_slot(self._data, self._entries, 8, False, relative)

    cdef int64_t c_position(self, Py_ssize_t slot) noexcept nogil:
        return be32(self._data + slot * 8 + 4)

    @property
    def is_full(self):
        return self._entries >= self._slots

    @property
    def last_offset(self):
        self._check_open()
        if self._entries == 0:
            return self.base_offset
        return self._offset_of(self._entries - 1)

    def entry(self, Py_ssize_t n):
        """(absolute offset, position) of entry ``n``."""
        self._check_open()
        if n < 0 or n >= self._entries:
            raise IndexError(f"entry {n} out of range [0, {self._entries}) in {self.path}")
        return self._offset_of(n), self.c_position(n)

    def lookup(self, int64_t target_offset):
        """(offset, position) of the largest entry with offset <= target, or
        (base_offset, 0) when there is none."""
        cdef Py_ssize_t slot
        if self._fd < 0:
            self._check_open()
        slot = self.c_lookup(target_offset)
        if slot < 0:
            return self.base_offset, 0
        return self._offset_of(slot), self.c_position(slot)

    def append(self, int64_t offset, int64_t position):
        cdef unsigned char entry[8]
        cdef int32_t relative
        self._check_writable()
        if self._entries >= self._slots:
            raise InvalidIndexError(
                f"attempt to append to a full index {self.path} ({self._entries} entries)")
        if self._entries > 0 and offset <= self._offset_of(self._entries - 1):
            raise InvalidIndexError(
                f"attempt to append offset {offset} to slot {self._entries} of {self.path}, "
                f"no larger than the last offset {self._offset_of(self._entries - 1)}")
        relative = self._relative_offset(offset)
        if position < 0 or position > INT32_MAX:
            raise InvalidIndexError(f"position {position} does not fit an int32 in {self.path}")
        put_be32(entry, <uint32_t>relative)
        put_be32(entry + 4, <uint32_t>position)
        self._write_entry(entry, self._entries)
        self._entries += 1

    def sanity_check(self):
        self._check_open()
        if self._entries > 0 and self._offset_of(self._entries - 1) < self.base_offset:
            raise InvalidIndexError(
                f"corrupt index {self.path}: last offset {self._offset_of(self._entries - 1)} "
                f"is less than the base offset {self.base_offset}")
        if self._file_length % 8 != 0:
            raise InvalidIndexError(
                f"index file {self.path} is corrupt: {self._file_length} bytes is not a "
                f"multiple of 8")


cdef class TimeIndex(_Index):
    """timestamp -> offset, for ListOffsets by time and time-based retention."""

    def __init__(self, path, int64_t base_offset, Py_ssize_t max_index_size=10485760,
                 bint writable=True):
        self._entry_size = 12
        self._wide_key = True
        self._offset_at = 8
        self._open(path, base_offset, max_index_size, writable)
        self._load_last_entry()

    def __repr__(self):
        return (f"TimeIndex({self.path!r}, base_offset={self.base_offset}, "
                f"entries={self._entries}, max_entries={self._slots})")

    cdef void _load_last_entry(self) noexcept:
        if self._entries == 0:
            self._last_timestamp = -1
            self._last_offset = self.base_offset
        else:
            self._last_timestamp = self.c_timestamp(self._entries - 1)
            self._last_offset = self._offset_of(self._entries - 1)

    cdef int _truncate_to_entries(self, Py_ssize_t entries) except -1:
        self._entries = entries
        self._load_last_entry()
        return 0

    cdef Py_ssize_t c_lookup(self, int64_t target_timestamp) noexcept nogil:
        """Slot of the largest entry with timestamp <= target_timestamp, or -1."""
        return floor_slot(self._data, self._entries, 12, True, target_timestamp)

    cdef int64_t c_timestamp(self, Py_ssize_t slot) noexcept nogil:
        return be64(self._data + slot * 12)

    @property
    def is_full(self):
        # One slot stays free for the entry written when the segment rolls
        # (maybe_append(..., skip_full_check=True)), as in Kafka.
        return self._entries >= self._slots - 1

    @property
    def last_entry(self):
        return self._last_timestamp, self._last_offset

    def entry(self, Py_ssize_t n):
        """(timestamp, absolute offset) of entry ``n``."""
        self._check_open()
        if n < 0 or n >= self._entries:
            raise IndexError(f"entry {n} out of range [0, {self._entries}) in {self.path}")
        return self.c_timestamp(n), self._offset_of(n)

    def lookup(self, int64_t target_timestamp):
        """(timestamp, offset) of the largest entry with timestamp <= target, or
        (-1, base_offset) when there is none."""
        cdef Py_ssize_t slot
        if self._fd < 0:
            self._check_open()
        slot = self.c_lookup(target_timestamp)
        if slot < 0:
            return -1, self.base_offset
        return self.c_timestamp(slot), self._offset_of(slot)

    def maybe_append(self, int64_t timestamp, int64_t offset, bint skip_full_check=False):
        """Append only if timestamp > the last entry's timestamp. Raises InvalidIndexError
        if offset < last offset, or the index is full (unless skip_full_check)."""
        cdef unsigned char entry[12]
        cdef int32_t relative
        self._check_writable()
        if not skip_full_check and self._entries >= self._slots - 1:
            raise InvalidIndexError(
                f"attempt to append to a full time index {self.path} ({self._entries} entries)")
        # An equal offset is allowed: closing or rolling a segment re-offers the last entry.
        if self._entries > 0 and offset < self._last_offset:
            raise InvalidIndexError(
                f"attempt to append offset {offset} to slot {self._entries} of {self.path}, "
                f"smaller than the last offset {self._last_offset}")
        if timestamp <= self._last_timestamp:
            return
        if self._entries >= self._slots:
            raise InvalidIndexError(
                f"time index {self.path} has no free slot ({self._entries} entries)")
        relative = self._relative_offset(offset)
        put_be64(entry, <uint64_t>timestamp)
        put_be32(entry + 8, <uint32_t>relative)
        self._write_entry(entry, self._entries)
        self._entries += 1
        self._last_timestamp = timestamp
        self._last_offset = offset

    def sanity_check(self):
        self._check_open()
        if self._entries > 0 and self._last_timestamp < self.c_timestamp(0):
            raise InvalidIndexError(
                f"corrupt time index {self.path}: last timestamp {self._last_timestamp} "
                f"is less than the first timestamp {self.c_timestamp(0)}")
        if self._entries > 0 and self._last_offset < self.base_offset:
            raise InvalidIndexError(
                f"corrupt time index {self.path}: last offset {self._last_offset} "
                f"is less than the base offset {self.base_offset}")
        if self._file_length % 12 != 0:
            raise InvalidIndexError(
                f"time index file {self.path} is corrupt: {self._file_length} bytes is not a "
                f"multiple of 12")
