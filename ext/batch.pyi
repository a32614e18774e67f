"""Record batch v2 (magic 2), Apache Kafka's DefaultRecordBatch.

The layout of a batch and a record, with every field's offset, is in ext/cursor.pxd:
the one place that names them. Python code reads header fields through BatchHeader
(read_header, peek_header, scan's summary) or read_prefix and peek_extent, never at offsets of
its own.
"""
from collections.abc import Iterable, Iterator, Sequence

from ext.errors import CorruptRecordError as CorruptRecordError

LOG_OVERHEAD: int  # 12: baseOffset + batchLength
BATCH_OVERHEAD: int  # 61: header size up to and including recordsCount
MIN_BATCH_LENGTH: int  # 49: BATCH_OVERHEAD - LOG_OVERHEAD, the least batchLength of a batch
MAGIC: int  # 2
NO_PRODUCER_ID: int  # -1
NO_PRODUCER_EPOCH: int  # -1
NO_SEQUENCE: int  # -1
NO_PARTITION_LEADER_EPOCH: int  # -1
NO_TIMESTAMP: int  # -1

COMPRESSION_NONE: int  # 0
COMPRESSION_GZIP: int  # 1
COMPRESSION_SNAPPY: int  # 2
COMPRESSION_LZ4: int  # 3
COMPRESSION_ZSTD: int  # 4
TIMESTAMP_CREATE_TIME: int  # 0
TIMESTAMP_LOG_APPEND_TIME: int  # 1

class TruncatedBatchError(CorruptRecordError):
    """The buffer ends inside a batch (a torn write, or a read that stopped short)."""

class BatchHeader:
    """The fixed header of one batch, read in place. Attributes are read-only."""

    position: int  # byte offset of the batch in the buffer it was read from
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def compression(self) -> int: ...
    @property
    def timestamp_type(self) -> int: ...
    @property
    def is_transactional(self) -> bool: ...
    @property
    def is_control(self) -> bool: ...
    @property
    def last_offset(self) -> int: ...  # base_offset + last_offset_delta
    @property
    def next_offset(self) -> int: ...  # last_offset + 1
    @property
    def size(self) -> int: ...  # batch_length + LOG_OVERHEAD
    @property
    def last_sequence(self) -> int: ...  # base_sequence + last_offset_delta, wrapping at 2**31 (-1 if none)

def read_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    """Structural checks only: enough bytes for the header and the whole batch,
    batchLength >= 49 (header minus LOG_OVERHEAD), magic == 2, recordsCount >= 0,
    lastOffsetDelta >= 0. Raises TruncatedBatchError when the buffer ends inside the
    batch, CorruptRecordError for anything else. Never reads past len(buf)."""

def peek_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    """read_header's checks except that the batch need not end inside buf: its
    BATCH_OVERHEAD header bytes suffice (fewer raise TruncatedBatchError). For stepping
    over a batch larger than the chunk read, and for checking what an index points at."""

def read_prefix(
    buf: bytes | bytearray | memoryview, pos: int = 0
) -> tuple[int, int, int | None, int | None] | None:
    """(baseOffset, batchLength, magic, attributes) of the bytes at buf[pos:], checked for
    nothing: what Kafka's ByteBufferLogInputStream reads before it knows the format. None
    when fewer than LOG_OVERHEAD bytes are left; magic None when the bytes end before it,
    attributes None when they end before its two bytes (in magic 0 and 1 messages the
    attributes lie elsewhere: read them only when magic is 2)."""

def peek_extent(buf: bytes | bytearray | memoryview, pos: int = 0) -> tuple[int, int, int] | None:
    """(baseOffset, lastOffset, size) of the batch at buf[pos:] from its header, nothing else
    checked (Kafka's read path: a batch corrupted after recovery is served, and the client's
    CRC check refuses it). None when the bytes end before lastOffsetDelta or batchLength is
    below MIN_BATCH_LENGTH."""

def validate(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    """read_header plus the CRC32C check."""

def validate_records(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    """validate plus the framing of every record (what assign_offsets checks), the batch
    decompressed first when it is compressed: record lengths and varints within bounds,
    offset deltas 0..n-1 in order, exactly recordsCount records, nothing after the last.
    Raises CorruptRecordError naming the batch and the record."""

def iter_batches(
    buf: bytes | bytearray | memoryview, pos: int = 0, check_crc: bool = False
) -> Iterator[BatchHeader]:
    """Each complete batch from ``pos``; raises (Truncated/)CorruptRecordError at a bad one."""

class BatchSummary:
    """What a scan of a buffer of concatenated batches found. Per-batch arrays are
    Python lists of equal length ``count``; everything else is a scalar."""

    count: int  # batches
    valid_bytes: int  # bytes from the scan start covered by complete, valid batches
    records_count: int  # sum of recordsCount
    first_offset: int  # base offset of the first batch (-1 if count == 0)
    last_offset: int  # last offset of the last batch (-1 if count == 0)
    max_timestamp: int  # largest maxTimestamp (-1 if none)
    offset_of_max_timestamp: int  # last offset of the batch holding max_timestamp (-1 if none)
    positions: list[int]  # batch start, relative to the scan start
    sizes: list[int]
    base_offsets: list[int]
    last_offsets: list[int]
    base_timestamps: list[int]
    min_timestamps: list[int]  # least record timestamp of each batch: assign_offsets only, else []
    max_timestamps: list[int]
    partition_leader_epochs: list[int]
    attributes: list[int]
    records_counts: list[int]
    producer_ids: list[int]
    producer_epochs: list[int]
    base_sequences: list[int]
    error: str | None  # with stop_on_error: why the scan stopped early, else None
    error_position: int  # with stop_on_error: where (relative to the scan start), else -1

def scan(
    buf: bytes | bytearray | memoryview,
    pos: int = 0,
    check_crc: bool = True,
    stop_on_error: bool = False,
) -> BatchSummary:
    """Walk concatenated batches from ``pos`` to the end of ``buf`` in C.
    stop_on_error=False raises (Truncated/)CorruptRecordError at the first bad batch;
    stop_on_error=True returns the summary of the good prefix and sets error/error_position
    (this is what log recovery uses). Also checks that offsets increase from batch to batch."""

def assign_offsets(
    buf: bytearray | memoryview,
    next_offset: int,
    partition_leader_epoch: int,
    log_append_time: int = -1,
) -> BatchSummary:
    """Leader-side append: validate every batch in the writable ``buf`` (structure, CRC and
    each record's framing as validate_records; nothing is patched if any batch is bad), then
    rewrite each batch's baseOffset so offsets run on from ``next_offset`` and set its
    partitionLeaderEpoch. Neither field is covered by the CRC. With log_append_time >= 0 the
    timestampType bit is set and maxTimestamp is replaced by it (Kafka's LogAppendTime);
    otherwise the bit is cleared and maxTimestamp is the greatest record timestamp, whatever
    the producer wrote there (LogValidator's setMaxTimestamp); the CRC is recomputed when
    either changes. Returns the summary with the assigned offsets, and each batch's least
    record timestamp in ``min_timestamps``. No Python object per record."""

def recompress(buf: bytes | bytearray | memoryview, codec: int, level: int | None = None) -> bytes:
    """The batches of ``buf`` with each data batch in another codec rebuilt in ``codec``
    (COMPRESSION_NONE..COMPRESSION_ZSTD): its records section decompressed and compressed
    again at Kafka's ``level`` of ``codec`` (ext.compress.compress; None: the codec's
    default), batchLength, the codec bits and the CRC rewritten, every other header field
    (offsets, epoch, timestamps, producer id/epoch/sequence, transactional bit) kept. A
    batch already in ``codec`` (at whatever level) and every control batch are copied as
    they are. For batches assign_offsets accepted: records are not re-checked. Raises
    ValueError for an unknown ``codec`` or a level it does not have, CorruptRecordError for
    a section that does not decompress."""

def build_batch(
    records: Iterable[tuple[bytes | None, bytes | None, Sequence[tuple[str | bytes, bytes | None]], int]],
    base_offset: int = 0,
    compression: int = 0,
    partition_leader_epoch: int = -1,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    is_transactional: bool = False,
    is_control: bool = False,
    timestamp_type: int = 0,
) -> bytes:
    """One batch from (key, value, headers, timestamp_ms) tuples; offset deltas 0..n-1,
    baseTimestamp = first record's timestamp, maxTimestamp = the largest. Raises ValueError
    for an empty record list."""

def build_batch_at(
    records: Iterable[
        tuple[int, bytes | None, bytes | None, Sequence[tuple[str | bytes, bytes | None]], int]
    ],
    base_offset: int,
    last_offset_delta: int,
    base_timestamp: int,
    max_timestamp: int,
    attributes: int,
    partition_leader_epoch: int = -1,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
) -> bytes:
    """One batch with every header field given (the log cleaner's rebuilt and emptied
    batches, Kafka's buildRetainedRecordsInto and writeEmptyHeader): records as
    (offset_delta, key, value, headers, timestamp_ms), each delta in [0, last_offset_delta]
    so offsets keep their gaps, timestamp deltas taken from ``base_timestamp`` (a record's
    own, or KIP-534's delete horizon), ``attributes`` written as given and its codec bits
    (0..4) compressing the records section when there are records. No records: an empty
    batch (records count 0). Raises ValueError for a delta out of range or an unknown codec."""

class Record:
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]
    attributes: int

def decode_records(buf: bytes | bytearray | memoryview, pos: int = 0, check_crc: bool = True) -> list[Record]:
    """The records of the batch at ``pos``, decompressed; offsets and timestamps absolute
    (for LogAppendTime batches every record's timestamp is the batch maxTimestamp).
    Raises CorruptRecordError for malformed varints, lengths past the end, a record count
    that does not match, or an unknown codec."""

def null_key_indexes(buf: bytes | bytearray | memoryview, pos: int = 0) -> list[int]:
    """The indexes within the batch at ``pos`` (its records in order, from 0) of the records
    whose key is null: Kafka's LogValidator.validateKey for a compacted topic, whose
    RecordError.batchIndex is this index. The same walk as validate_records, decompressing a
    compressed batch; the CRC is not checked (for a batch assign_offsets accepted). Raises
    CorruptRecordError for a malformed batch."""

def retain_records(
    buf: bytes | bytearray | memoryview,
    pos: int,
    keep: bytes | bytearray | memoryview,
    delete_horizon_ms: int | None = None,
    tombstone_horizon_ms: int | None = None,
) -> bytes | None:
    """The log cleaner's rebuild of the batch at ``pos`` (Kafka's MemoryRecords.filterTo and
    buildRetainedRecordsInto), in C with the GIL released for the per-record work: ``keep``
    holds one byte per record (non-zero: kept). The delete horizon is ``delete_horizon_ms``
    when given, else ``tombstone_horizon_ms`` when given and a kept record is a tombstone,
    else the batch's own (when it has one). None when every record is kept and no horizon is
    added (the caller copies the batch's bytes); otherwise the batch of the kept records, as
    build_batch_at writes it: base and last offset (offsets keep their gaps), leader epoch,
    producer id, epoch and base sequence, the codec and the transactional, control and
    timestamp-type bits kept; the horizon, when there is one, as the base timestamp with bit 6
    set, else the first kept record's timestamp; max timestamp the greatest kept (the batch's
    under LogAppendTime). Raises ValueError for a mask of the wrong length, a kept record's
    offset delta outside [0, lastOffsetDelta] or nothing kept, CorruptRecordError for a batch
    or record that does not parse."""
