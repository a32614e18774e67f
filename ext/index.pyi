"""Kafka's sparse segment indexes, mmap-backed, binary search in C.

Offset index (NNNNNNNNNNNNNNNNNNNN.index), 8-byte entries, big-endian:

    relativeOffset int32   offset - baseOffset
    position       int32   byte position of a batch in the .log file

Time index (NNNNNNNNNNNNNNNNNNNN.timeindex), 12-byte entries, big-endian:

    timestamp      int64
    relativeOffset int32

A writable index is preallocated (sparse) to ``max_index_size`` bytes (rounded down to a
whole number of entries) and trimmed to its entries on ``trim_to_valid_size``/``close``.
Entries are written with pwrite, so a full filesystem or an IO error makes an append raise
OSError (ENOSPC, EIO) rather than SIGBUS; the entry count is unchanged then. An
existing file opened again holds ``file size // entry size`` slots; a zero-filled tail
(left by an unclean shutdown of the active segment) is not counted: the entry count is the
longest prefix whose keys strictly increase (a later all-zero slot ends it).

Invariant: keys strictly increase (offsets for the offset index, timestamps for the time
index); the time index's offsets never decrease.
"""
from ext.errors import InvalidIndexError as InvalidIndexError

class OffsetIndex:
    path: str
    base_offset: int
    def __init__(
        self, path: str, base_offset: int, max_index_size: int = 10485760, writable: bool = True
    ) -> None: ...
    @property
    def entries(self) -> int: ...
    @property
    def max_entries(self) -> int: ...
    @property
    def is_full(self) -> bool: ...
    @property
    def last_offset(self) -> int: ...  # base_offset when empty
    @property
    def size_in_bytes(self) -> int: ...  # entries * 8
    def entry(self, n: int) -> tuple[int, int]: ...  # (absolute offset, position)
    def lookup(self, target_offset: int) -> tuple[int, int]:
        """(offset, position) of the largest entry with offset <= target, or
        (base_offset, 0) when there is none."""
    def append(self, offset: int, position: int) -> None:
        """Raises InvalidIndexError if offset <= last offset (when non-empty), the relative
        offset does not fit an int32, or the index is full; OSError if the write fails."""
    def truncate_to(self, offset: int) -> None: ...  # drop entries with offset >= offset
    def truncate(self) -> None: ...  # drop all entries
    def resize(self, new_size: int) -> None: ...  # change the file/mmap size (entries kept)
    def trim_to_valid_size(self) -> None: ...  # resize to entries * 8
    def sanity_check(self) -> None: ...  # raises InvalidIndexError
    def flush(self) -> None: ...  # fdatasync
    def close(self) -> None: ...  # trim (if writable), unmap, close
    def close_handler(self) -> None: ...  # unmap and close, writing nothing (a failed log dir)
    def rename(self, new_path: str) -> None: ...

class TimeIndex:
    path: str
    base_offset: int
    def __init__(
        self, path: str, base_offset: int, max_index_size: int = 10485760, writable: bool = True
    ) -> None: ...
    @property
    def entries(self) -> int: ...
    @property
    def max_entries(self) -> int: ...
    @property
    def is_full(self) -> bool: ...  # entries >= max_entries - 1: one slot stays free for the roll entry
    @property
    def last_entry(self) -> tuple[int, int]: ...  # (timestamp, offset); (-1, base_offset) when empty
    @property
    def size_in_bytes(self) -> int: ...
    def entry(self, n: int) -> tuple[int, int]: ...  # (timestamp, absolute offset)
    def lookup(self, target_timestamp: int) -> tuple[int, int]:
        """(timestamp, offset) of the largest entry with timestamp <= target, or
        (-1, base_offset) when there is none."""
    def maybe_append(self, timestamp: int, offset: int, skip_full_check: bool = False) -> None:
        """Append only if timestamp > the last entry's timestamp. Raises InvalidIndexError if
        offset < last offset, or the index is full (unless skip_full_check)."""
    def truncate_to(self, offset: int) -> None: ...  # drop entries with offset >= offset
    def truncate(self) -> None: ...
    def resize(self, new_size: int) -> None: ...
    def trim_to_valid_size(self) -> None: ...
    def sanity_check(self) -> None: ...
    def flush(self) -> None: ...
    def close(self) -> None: ...
    def close_handler(self) -> None: ...
    def rename(self, new_path: str) -> None: ...
