"""Record batches v2 decoded into Arrow-shaped columns, for the Spark reader.

n decoded records, m headers (include_headers only):

    column                 type           entries  notes
    offsets                int64          n        absolute offsets
    timestamps_us          int64          n        ms * 1000; LogAppendTime batch: its maxTimestamp
    timestamp_types        int32          n        0 CreateTime, 1 LogAppendTime
    key_offsets            int32          n + 1    Arrow binary offsets over key_data
    key_validity           bytes | None   n bits   Arrow bitmap, LSB first, 1 = set; None: no null
    value_*                                        as for the key
    header_list_offsets    int32          n + 1    record i's headers are [o[i], o[i + 1])
    header_list_validity   bytes | None   n bits   0 for a record without headers (Spark: null)
    header_key_offsets     int32          m + 1    over header_key_data, utf-8 (checked)
    header_value_offsets   int32          m + 1    over header_value_data
    header_value_validity  bytes | None   m bits   a header value may be null
"""
import numpy as np
import numpy.typing as npt

from ext.errors import CorruptRecordError as CorruptRecordError

class Columns:
    count: int
    offsets: npt.NDArray[np.int64]
    timestamps_us: npt.NDArray[np.int64]
    timestamp_types: npt.NDArray[np.int32]
    key_offsets: npt.NDArray[np.int32]
    key_data: bytes
    key_validity: bytes | None
    key_null_count: int
    value_offsets: npt.NDArray[np.int32]
    value_data: bytes
    value_validity: bytes | None
    value_null_count: int
    include_headers: bool
    # The header columns are None (counts 0) without include_headers.
    header_count: int  # m
    header_list_offsets: npt.NDArray[np.int32] | None
    header_list_validity: bytes | None
    header_list_null_count: int
    header_key_offsets: npt.NDArray[np.int32] | None
    header_key_data: bytes | None
    header_value_offsets: npt.NDArray[np.int32] | None
    header_value_data: bytes | None
    header_value_validity: bytes | None
    header_value_null_count: int
    next_position: int  # in data, just after the last whole batch consumed
    last_offset: int  # last offset of that batch, or -1 if none

def decode_columns(
    data: bytes | bytearray | memoryview,
    start_offset: int,
    end_offset: int,
    include_headers: bool = False,
    check_crc: bool = False,
    base_position: int = 0,
) -> Columns:
    """Every record with start_offset <= offset < end_offset of every non-control batch in
    ``data`` (consecutive batches from its first byte), decompressed as needed.

    Control batches and batches whose offsets all lie outside the range are passed over
    from their header (no CRC check, no decompression). check_crc checks the batches that
    are decoded. A torn tail (data ends inside a batch) is left alone: next_position is
    its start. If a data column would pass 2**31 - 1 bytes (int32 offsets), the call stops
    before the batch that would do it, and next_position says where to continue.

    Every record of a decoded batch, in range or not, is checked as batch.decode_records
    checks it (header keys must be utf-8 even without include_headers): a batch one
    refuses, the other refuses. Raises CorruptRecordError for a bad batch or record, whose
    position is base_position plus the batch's position in data; the message names the
    batch's offsets once its header could be read."""

def _set_column_limit(limit: int) -> int:
    """Tests only: lower the per-column byte limit (<= 0 restores 2**31 - 1); returns the old one."""
