"""Errors raised by the native kernels; shared by every ext module."""


class CorruptRecordError(ValueError):
    """A record batch failed validation: bad length, magic, CRC or framing.

    ``position`` is the byte offset of the failing batch within the buffer or file
    that was being read (or -1 when not known).
    """

    def __init__(self, message: str, position: int = -1):
        super().__init__(message)
        self.position = position


class InvalidIndexError(ValueError):
    """An offset or time index file is inconsistent with its segment."""
