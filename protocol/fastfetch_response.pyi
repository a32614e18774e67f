"""Fetch responses both ways (see fastfetch_response.pyx); use them through protocol.fastcodec."""
from typing import Any

from protocol.types import Reader

FETCH_VERSIONS: tuple[int, int]

def encode_fetch_response(version: int, correlation_id: int, response: Any) -> list:
    """The whole Fetch response frame as parts (bytes, and file slices for records that
    are not buffers): what protocol.headers.encode_response(1, ...) returns."""

def decode_fetch_response(version: int, buf: bytes | bytearray | memoryview | Reader,
                          pos: int = 0) -> Any:
    """The FetchResponse body at buf[pos:] (or a Reader's buf[pos:end]; it advances pos),
    after the response header, as protocol.messages.FetchResponse, equal to what
    messages.RESPONSES[1].decode returns; each partition's records is a memoryview slice of
    buf (no copy). Raises protocol.types.ProtocolError on malformed or truncated input."""
