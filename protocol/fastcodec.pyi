"""Hand-tuned codecs for Produce and Fetch requests and Produce/Fetch/Metadata responses (see
fastcodec.pyx; the Fetch functions are fastfetch_request's and fastfetch_response's,
re-exported); byte-identical to protocol.codec / protocol.headers."""
from typing import Any

from protocol.types import Reader

# (lowest, highest) version each function handles: the schema's range.
PRODUCE_VERSIONS: tuple[int, int]
PRODUCE_RESPONSE_VERSIONS: tuple[int, int]
FETCH_VERSIONS: tuple[int, int]
METADATA_VERSIONS: tuple[int, int]
FETCH_REQUEST_VERSIONS: tuple[int, int]

def frame_buffer(size: int) -> bytearray:
    """A bytearray of ``size`` bytes, not zeroed: only for a buffer about to be filled whole."""

def decode_produce_request(version: int, buf: bytes | bytearray | memoryview | Reader,
                           pos: int = 0) -> Any:
    """The ProduceRequest body at buf[pos:] (or a Reader's buf[pos:end]; it advances pos)
    as protocol.messages.ProduceRequest; each partition's records is a memoryview slice of
    buf (writable when buf is). Raises protocol.types.ProtocolError on malformed or
    truncated input."""

def encode_produce_response(version: int, correlation_id: int, response: Any) -> list:
    """The whole Produce response frame as parts (a single bytes object): what
    protocol.headers.encode_response(0, ...) returns."""

def encode_fetch_response(version: int, correlation_id: int, response: Any) -> list:
    """The whole Fetch response frame as parts (bytes, and file slices for records that
    are not buffers): what protocol.headers.encode_response(1, ...) returns."""

def encode_metadata_response(version: int, correlation_id: int, response: Any) -> list:
    """The whole Metadata response frame as parts (a single bytes object): what
    protocol.headers.encode_response(3, ...) returns."""

def decode_fetch_request(version: int, buf: bytes | bytearray | memoryview | Reader,
                         pos: int = 0) -> Any:
    """The FetchRequest body at buf[pos:] (or a Reader's buf[pos:end]; it advances pos) as
    protocol.messages.FetchRequest, equal to what messages.REQUESTS[1].decode returns (tagged
    fields and absent-field defaults included). Raises protocol.types.ProtocolError on
    malformed or truncated input."""

def encode_fetch_request(version: int, correlation_id: int, client_id: str | None, request: Any) -> bytes:
    """The whole Fetch request frame (size prefix, request header, body): what
    protocol.headers.encode_request(1, ...) returns."""

def decode_fetch_response(version: int, buf: bytes | bytearray | memoryview | Reader,
                          pos: int = 0) -> Any:
    """The FetchResponse body at buf[pos:] (or a Reader's buf[pos:end]; it advances pos),
    after the response header, as protocol.messages.FetchResponse, equal to what
    messages.RESPONSES[1].decode returns; each partition's records is a memoryview slice of
    buf (no copy). Raises protocol.types.ProtocolError on malformed or truncated input."""
