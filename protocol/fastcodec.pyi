"""Hand-tuned codecs for Produce requests and Fetch/Metadata responses (see fastcodec.pyx);
byte-identical to protocol.codec / protocol.headers.encode_response."""
from typing import Any

# (lowest, highest) version each function handles: the schema's range.
PRODUCE_VERSIONS: tuple[int, int]
FETCH_VERSIONS: tuple[int, int]
METADATA_VERSIONS: tuple[int, int]

def frame_buffer(size: int) -> bytearray:
    """A bytearray of ``size`` bytes, not zeroed: only for a buffer about to be filled whole."""

def decode_produce_request(version: int, buf: bytes | bytearray | memoryview, pos: int = 0) -> Any:
    """The ProduceRequest body at buf[pos:] as protocol.messages.ProduceRequest; each
    partition's records is a memoryview slice of buf (writable when buf is). Raises
    protocol.types.ProtocolError on malformed or truncated input."""

def encode_fetch_response(version: int, correlation_id: int, response: Any) -> list:
    """The whole Fetch response frame as parts (bytes, and file slices for records that
    are not buffers): what protocol.headers.encode_response(1, ...) returns."""

def encode_metadata_response(version: int, correlation_id: int, response: Any) -> list:
    """The whole Metadata response frame as parts (a single bytes object): what
    protocol.headers.encode_response(3, ...) returns."""
