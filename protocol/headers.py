"""Request and response headers, and framing.

Frame: int32 size, then ``size`` bytes. Request header:

    v0  api_key int16, api_version int16, correlation_id int32
    v1  + client_id nullable string (int16 length, even in v2)
    v2  + tagged fields

Response header: v0 correlation_id int32; v1 + tagged fields. A request uses header v2
when its version is flexible (else v1); a response uses v1 when flexible (else v0), except
ApiVersions responses, which always use v0 so that a client can read the error of a
version it does not know.

Request headers and the hot messages (Produce requests and responses, Fetch requests and
responses, Metadata responses) go through hand-tuned Cython (protocol/fastcodec.pyx and the
modules it gathers), byte-identical to the generic codec. Not building it is not an error,
but it is not silent either: FAST_CODEC says which path is live, a warning is logged at
import, and tests/protocol/test_fastcodec.py fails when the extension is missing.
"""
from __future__ import annotations

import logging
from typing import NamedTuple

from protocol import messages
from protocol.types import ProtocolError, Reader, Writer

try:
    from protocol import fastcodec
except ImportError:  # not built: the generic codec serves every message, loudly (see above)
    fastcodec = None
    logging.getLogger(__name__).warning(
        "protocol.fastcodec is not built (cythonize -i protocol/fastcodec.pyx): "
        "Produce, Fetch and Metadata use the generic codec")

FAST_CODEC = fastcodec is not None
# api_key -> hand-tuned request decoder (version, buf, pos) and response encoder
# (version, correlation_id, body); everything else goes through the generic codec.
FAST_DECODERS = ({0: fastcodec.decode_produce_request, 1: fastcodec.decode_fetch_request}
                 if FAST_CODEC else {})
FAST_ENCODERS = ({0: fastcodec.encode_produce_response, 1: fastcodec.encode_fetch_response,
                  3: fastcodec.encode_metadata_response} if FAST_CODEC else {})
# The client's side: api_key -> hand-tuned request frame encoder (version, correlation_id,
# client_id, body) and response body decoder (version, buf, pos).
FAST_REQUEST_ENCODERS = {1: fastcodec.encode_fetch_request} if FAST_CODEC else {}
FAST_RESPONSE_DECODERS = {1: fastcodec.decode_fetch_response} if FAST_CODEC else {}

API_VERSIONS_KEY = 18


class RequestHeader(NamedTuple):
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    header_version: int
    # Not on the wire: the name of the listener the request came on (Kafka's
    # RequestContext.listenerName), so that answers name brokers by the endpoints the client
    # can reach. None for a request that came on no named listener.
    listener_name: str | None = None


def read_request_header(r: Reader, listener_name: str | None = None) -> RequestHeader:
    """Reads the header; the body follows at r.pos. Unknown API keys and versions still
    parse (so that UNSUPPORTED_VERSION can be answered with the right correlation id).
    ``listener_name``: where the request came on (see RequestHeader)."""
    if fastcodec is not None:
        return fastcodec.read_request_header(r, listener_name, RequestHeader)
    return read_request_header_generic(r, listener_name)


def read_request_header_generic(r: Reader, listener_name: str | None = None) -> RequestHeader:
    """read_request_header through the generic Reader only (the reference for fastcodec)."""
    api_key = r.int16()
    api_version = r.int16()
    correlation_id = r.int32()
    n = r.int16()
    if n < -1:
        raise ProtocolError(f"negative client id length {n}")
    client_id = None if n == -1 else r.string_of(n)
    codec = messages.REQUESTS.get(api_key)
    flexible = codec is not None and codec.message.is_flexible(api_version)
    if flexible:
        for _ in range(r.uvarint()):
            r.uvarint()
            r.raw(r.uvarint())
    return RequestHeader(api_key, api_version, correlation_id, client_id, 2 if flexible else 1, listener_name)


def write_request_header(w: Writer, api_key: int, api_version: int, correlation_id: int,
                         client_id: str | None) -> None:
    w.int16(api_key)
    w.int16(api_version)
    w.int32(correlation_id)
    if client_id is None:
        w.int16(-1)
    else:
        data = client_id.encode()
        w.int16(len(data))
        w.raw(data)
    if messages.REQUESTS[api_key].message.is_flexible(api_version):
        w.uvarint(0)


def response_header_flexible(api_key: int, api_version: int) -> bool:
    if api_key == API_VERSIONS_KEY:
        return False
    codec = messages.RESPONSES.get(api_key)
    return codec is not None and codec.message.is_flexible(api_version)


def write_response_header(w: Writer, api_key: int, api_version: int, correlation_id: int) -> None:
    w.int32(correlation_id)
    if response_header_flexible(api_key, api_version):
        w.uvarint(0)


def read_response_header(r: Reader, api_key: int, api_version: int) -> int:
    correlation_id = r.int32()
    if response_header_flexible(api_key, api_version):
        for _ in range(r.uvarint()):
            r.uvarint()
            r.raw(r.uvarint())
    return correlation_id


def encode_request(api_key: int, api_version: int, correlation_id: int, client_id: str | None,
                   body) -> bytes:
    """A whole request frame (size prefix included)."""
    fast = FAST_REQUEST_ENCODERS.get(api_key)
    if fast is not None:
        return fast(api_version, correlation_id, client_id, body)
    return encode_request_generic(api_key, api_version, correlation_id, client_id, body)


def encode_request_generic(api_key: int, api_version: int, correlation_id: int,
                           client_id: str | None, body) -> bytes:
    """encode_request through the generic codec only (the reference for fastcodec)."""
    w = Writer()
    w.int32(0)
    write_request_header(w, api_key, api_version, correlation_id, client_id)
    messages.REQUESTS[api_key].write(api_version, body, w)
    w.buf[0:4] = (len(w.buf) - 4).to_bytes(4, "big")
    return bytes(w.buf)


def decode_request(api_key: int, api_version: int, r: Reader):
    """The request body at r.pos (after read_request_header)."""
    fast = FAST_DECODERS.get(api_key)
    if fast is not None:  # reads r.buf[r.pos:r.end] and advances r.pos, as the generic does
        return fast(api_version, r)
    return messages.REQUESTS[api_key].decode(api_version, r)


def decode_response(api_key: int, api_version: int, r: Reader):
    """The response body at r.pos (after read_response_header)."""
    fast = FAST_RESPONSE_DECODERS.get(api_key)
    if fast is not None:
        return fast(api_version, r)
    return messages.RESPONSES[api_key].decode(api_version, r)


def encode_response(api_key: int, api_version: int, correlation_id: int, body) -> list:
    """A whole response frame as parts (bytes and file slices, see codec)."""
    fast = FAST_ENCODERS.get(api_key)
    if fast is not None:
        return fast(api_version, correlation_id, body)
    return encode_response_generic(api_key, api_version, correlation_id, body)


def encode_response_generic(api_key: int, api_version: int, correlation_id: int, body) -> list:
    """encode_response through the generic codec only (the reference for fastcodec)."""
    w = Writer()
    w.int32(0)
    write_response_header(w, api_key, api_version, correlation_id)
    messages.RESPONSES[api_key].write(api_version, body, w)
    parts = w.finish()
    size = sum(len(p) if isinstance(p, bytes) else p.size for p in parts) - 4
    first = bytearray(parts[0])
    first[0:4] = size.to_bytes(4, "big")
    parts[0] = bytes(first)
    return parts
