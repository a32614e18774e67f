"""Errors the storage engine raises; each maps to one Kafka error code at the broker."""
from ext.errors import CorruptRecordError, InvalidIndexError

__all__ = [
    "CorruptRecordError",
    "InvalidIndexError",
    "StorageError",
    "OffsetOutOfRangeError",
    "RecordTooLargeError",
    "InvalidTimestampError",
    "InvalidRecordError",
    "RecordValidationError",
    "UnexpectedAppendOffsetError",
    "DuplicateSequenceError",
    "LogDirError",
    "ConfigError",
]


class StorageError(Exception):
    """Base class of the engine's own errors."""


class OffsetOutOfRangeError(StorageError):
    """A read or a truncation named an offset outside [log start offset, log end offset]."""


class RecordTooLargeError(StorageError):
    """A batch is larger than max.message.bytes or the segment size."""


class InvalidTimestampError(StorageError):
    """A CreateTime batch's timestamps lie outside message.timestamp.{before,after}.max.ms."""


class InvalidRecordError(StorageError):
    """A well-formed batch that a leader must not accept (e.g. an empty batch, a control
    batch from a client)."""


class RecordValidationError(InvalidRecordError):
    """Records of a batch that the leader refuses one by one (Kafka's
    RecordValidationException): ``record_errors`` lists (index of the record within its batch,
    why), what the Produce response's record_errors carries (v8+); the message is Kafka's
    summary of them."""

    def __init__(self, record_errors: list[tuple[int, str]]):
        shown = ", ".join(f"RecordError(batchIndex={index}, message='{why}')"
                          for index, why in record_errors[:3])
        super().__init__(f"One or more records have been rejected due to {len(record_errors)} "
                         f"record errors in total, and only showing the first three errors at "
                         f"most: [{shown}]")
        self.record_errors = record_errors


class UnexpectedAppendOffsetError(StorageError):
    """A follower append whose first offset is below the log end offset."""


class DuplicateSequenceError(StorageError):
    """An idempotent producer retried a batch that is already in the log: nothing is
    written, and the original offsets are the answer."""

    def __init__(self, first_offset: int, last_offset: int):
        super().__init__(f"duplicate of the batch at offsets {first_offset}..{last_offset}")
        self.first_offset = first_offset
        self.last_offset = last_offset


class LogDirError(StorageError):
    """A log directory is unusable: bad meta.properties, unreadable, or not ours."""


class ConfigError(ValueError):
    """An unknown or invalid property; the message names it."""

    def __init__(self, name: str, message: str):
        super().__init__(f"{name}: {message}")
        self.name = name
