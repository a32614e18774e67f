"""Fetch requests both ways (see fastfetch_request.pyx); use them through protocol.fastcodec."""
from typing import Any

from protocol.types import Reader

FETCH_REQUEST_VERSIONS: tuple[int, int]

def decode_fetch_request(version: int, buf: bytes | bytearray | memoryview | Reader,
                         pos: int = 0) -> Any:
    """The FetchRequest body at buf[pos:] (or a Reader's buf[pos:end]; it advances pos) as
    protocol.messages.FetchRequest, equal to what messages.REQUESTS[1].decode returns (tagged
    fields and absent-field defaults included). Raises protocol.types.ProtocolError on
    malformed or truncated input."""

def encode_fetch_request(version: int, correlation_id: int, client_id: str | None, request: Any) -> bytes:
    """The whole Fetch request frame (size prefix, request header, body): what
    protocol.headers.encode_request(1, ...) returns."""
