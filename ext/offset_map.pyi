"""The log cleaner's offset map: each record key of a log's dirty section to the offset of its
last occurrence, Apache Kafka's SkimpyOffsetMap.

A fixed table of ``slots`` entries, each a 16-byte key digest (MurmurHash3 x64 128, seed 0)
and an int64 offset: 24 bytes, so ``memory // 24`` slots from a byte budget as Kafka sizes its
MD5 map. Linear probing; two keys with the same digest are one key, as in Kafka; no deletes.
The per-record work of add_batches and retain_mask is C over the batch bytes (ext/cursor.pxd's
readers, ext.compress for a compressed batch); nothing is called per record from Python,
and both walks run without the GIL (taken back only to decompress a batch or to raise).
"""
from collections.abc import Iterable

BYTES_PER_ENTRY: int  # 24
DEFAULT_LOAD_FACTOR: float  # 0.9, log.cleaner.io.buffer.load.factor

def cleaner_map_memory(dedupe_buffer_size: int, threads: int, load_factor: float = ...) -> int:
    """One cleaner thread's map bytes: log.cleaner.dedupe.buffer.size // log.cleaner.threads,
    at most 2**31 - 1, as Kafka's LogCleaner sizes its SkimpyOffsetMap."""

def digest(key: bytes | bytearray | memoryview) -> bytes:
    """The 16-byte digest the map keeps for a key: MurmurHash3 x64 128, seed 0, its two 64-bit
    halves little-endian (what ``mmh3.hash_bytes(key)`` returns)."""

class MapFill:
    """What one add_batches call took."""

    full: bool  # stopped at the load factor
    position: int  # full: the position of the batch it stopped in; else the end of the whole batches read
    batches: int  # batches read to their end
    records: int  # keyed records put
    stop_offset: int  # full: the offset of the first record not taken; else -1

class OffsetMap:
    """``OffsetMap(memory)``: ``memory // 24`` slots; ``OffsetMap(slots=n)``: n slots.
    add_batches stops taking keys once the map holds ``max_entries`` of them."""

    slots: int
    size: int  # distinct keys put
    load_factor: float
    latest_offset: int  # the greatest offset put or read past (-1 when empty)

    def __init__(
        self, memory: int | None = None, *, slots: int | None = None, load_factor: float = 0.9
    ) -> None: ...
    @property
    def max_entries(self) -> int: ...  # int(slots * load_factor), Kafka's maxDesiredMapSize
    @property
    def utilization(self) -> float: ...  # size / slots
    def clear(self) -> None:
        """Forget every key; latest_offset back to -1."""
    def update_latest_offset(self, offset: int) -> None:
        """Set latest_offset: the cleaner's fast-forward to the offset before the next
        segment's base when a segment ends in a gap."""
    def get(self, key: bytes | bytearray | memoryview) -> int:
        """The offset of the key's last occurrence put, -1 if none."""
    def put(self, key: bytes | bytearray | memoryview | None, offset: int) -> None:
        """Map key to offset, keeping the greater offset of a key already there; a None key
        is skipped. ValueError for a negative offset; OverflowError for a new key when all
        slots are taken."""
    def add_batches(
        self,
        buf: bytes | bytearray | memoryview,
        start_offset: int = 0,
        pos: int = 0,
        aborted: Iterable[tuple[int, int, int]] = (),
    ) -> MapFill:
        """Kafka's buildOffsetMapForSegment over the whole batches of buf[pos:]: every keyed
        record at or past start_offset of every non-control batch is put, in order; a
        transactional batch of a producer whose aborted transaction covers its base offset
        (``aborted``: (producer_id, first_offset, last_offset) from the .txnindex) is
        skipped; latest_offset becomes each batch's last offset once the batch is read.
        Stops (``full``) at the first keyed record at or past the floor met once the map
        holds max_entries keys; the cleaner then cleans up to latest_offset + 1. A batch cut
        by the buffer's end is left unread (``position`` says where). Raises
        ext.errors.CorruptRecordError for a batch or record that does not parse."""
    def retain_mask(
        self, buf: bytes | bytearray | memoryview, pos: int = 0, now_ms: int = -1
    ) -> bytearray:
        """One byte per record of the whole batches of buf[pos:], in order: 1 where Kafka's
        shouldRetainRecord keeps it. A control batch's records are kept (the cleaner decides
        about markers); a record past latest_offset is kept; else a record without a key is
        dropped, and a keyed one is kept when its offset is at least the map's for its key
        (or the key is absent), except a tombstone (null value) in a batch whose delete
        horizon (its baseTimestamp, when the batch has one) is at or before now_ms. Raises
        ext.errors.CorruptRecordError for a batch or record that does not parse."""
