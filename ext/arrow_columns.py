"""ext.columns' Columns as a pyarrow RecordBatch in the schema of Spark's Kafka source.

    field          Arrow type                                          built from
    key            binary                                              key_offsets, key_data, key_validity
    value          binary                                              value_*
    topic          string                                              the topic, repeated
    partition      int32                                               the partition, repeated
    offset         int64                                               offsets
    timestamp      timestamp[us, tz=UTC]                               timestamps_us
    timestampType  int32                                               timestamp_types
    headers        list<element: struct<key: string, value: binary>>   header_* (include_headers only;
                                                                       null for a record without headers)

Every field is nullable, as Spark declares them. Spark compares the first batch's schema
with pa.Schema.equals and fails the query on any difference (int32 vs int64, binary vs
large_binary, a dictionary-encoded string): so binary/string with int32 offsets here, and
the list's child is named "element" as pyspark names it. The arrays view the Columns'
buffers without a copy; only topic and partition are materialised (vectorised).

pyarrow is imported on first use: nothing else in ext/ needs it.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import pyarrow as pa

    from ext.columns import Columns

_INT32_MAX = 2**31 - 1


def _pa() -> Any:
    import pyarrow

    return pyarrow


def header_type() -> pa.DataType:
    pa = _pa()
    return pa.list_(pa.field("element", pa.struct([pa.field("key", pa.string()),
                                                    pa.field("value", pa.binary())])))


def spark_kafka_schema(include_headers: bool = False) -> pa.Schema:
    """The Arrow schema pyspark derives from Spark's Kafka source schema."""
    pa = _pa()
    fields = [
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("timestamp", pa.timestamp("us", tz="UTC")),
        pa.field("timestampType", pa.int32()),
    ]
    if include_headers:
        fields.append(pa.field("headers", header_type()))
    return pa.schema(fields)


def _bitmap(pa: Any, validity: bytes | None) -> pa.Buffer | None:
    return None if validity is None else pa.py_buffer(validity)


def _binary(pa: Any, type_: pa.DataType, count: int, offsets: np.ndarray, data: bytes,
            validity: bytes | None, null_count: int) -> pa.Array:
    return pa.Array.from_buffers(
        type_, count, [_bitmap(pa, validity), pa.py_buffer(offsets), pa.py_buffer(data)],
        null_count=null_count)


def _repeated_string(pa: Any, text: str, count: int) -> pa.Array:
    # A plain string column (no dictionary: Spark's schema check refuses one), built as
    # offsets k * len over the text repeated rather than from count Python objects.
    raw = text.encode("utf-8")
    if count * len(raw) > _INT32_MAX:
        raise ValueError(f"{count} copies of a {len(raw)}-byte topic pass the 2 GiB an Arrow "
                         f"string column can hold: decode fewer records per batch")
    offsets = np.arange(count + 1, dtype=np.int32) * np.int32(len(raw))
    return pa.Array.from_buffers(pa.string(), count,
                                 [None, pa.py_buffer(offsets), pa.py_buffer(raw * count)],
                                 null_count=0)


def _headers(pa: Any, c: Columns) -> pa.Array:
    type_ = header_type()
    keys = _binary(pa, pa.string(), c.header_count, c.header_key_offsets, c.header_key_data,
                   None, 0)
    values = _binary(pa, pa.binary(), c.header_count, c.header_value_offsets,
                     c.header_value_data, c.header_value_validity, c.header_value_null_count)
    entries = pa.StructArray.from_arrays([keys, values], fields=list(type_.value_type))
    return pa.Array.from_buffers(
        type_, c.count, [_bitmap(pa, c.header_list_validity), pa.py_buffer(c.header_list_offsets)],
        null_count=c.header_list_null_count, children=[entries])


def to_arrow(columns: Columns, topic: str, partition: int,
             include_headers: bool = False) -> pa.RecordBatch:
    """One RecordBatch of ``columns`` in spark_kafka_schema(include_headers)."""
    pa = _pa()
    c = columns
    n = c.count
    if include_headers and not c.include_headers:
        raise ValueError("include_headers: these columns were decoded without headers")
    topic_column = _repeated_string(pa, topic, n)
    arrays = [
        _binary(pa, pa.binary(), n, c.key_offsets, c.key_data, c.key_validity, c.key_null_count),
        _binary(pa, pa.binary(), n, c.value_offsets, c.value_data, c.value_validity,
                c.value_null_count),
        topic_column,
        pa.Array.from_buffers(pa.int32(), n, [None, pa.py_buffer(np.full(n, partition, np.int32))],
                              null_count=0),
        pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(c.offsets)], null_count=0),
        pa.Array.from_buffers(pa.timestamp("us", tz="UTC"), n, [None, pa.py_buffer(c.timestamps_us)],
                              null_count=0),
        pa.Array.from_buffers(pa.int32(), n, [None, pa.py_buffer(c.timestamp_types)], null_count=0),
    ]
    if include_headers:
        arrays.append(_headers(pa, c))
    return pa.RecordBatch.from_arrays(arrays, schema=spark_kafka_schema(include_headers))
