"""The live fuzz's checks (tests/fuzz/live.py): what a SASL_SSL listener answers before
authentication (``requests_as_cut``, ``check_sasl_responses``; after a SaslHandshake v0 the bare
SASL tokens both ways), on frames built here, and what counts in the node's log (``scan_log``)."""
from __future__ import annotations

import struct

from protocol import messages
from tests.fuzz.frames import encode_loose, request_frame
from tests.fuzz.live import (
    API_VERSIONS,
    SASL_AUTHENTICATE,
    SASL_HANDSHAKE,
    Report,
    check_sasl_responses,
    requests_as_cut,
    scan_log,
)

METADATA = 3


def frame(api_key: int, correlation_id: int) -> bytes:
    version = {API_VERSIONS: 0, SASL_HANDSHAKE: 1, SASL_AUTHENTICATE: 0, METADATA: 1}[api_key]
    body = {API_VERSIONS: b"",
            SASL_HANDSHAKE: encode_loose(SASL_HANDSHAKE, 1, messages.SaslHandshakeRequest(mechanism="PLAIN")),
            SASL_AUTHENTICATE: encode_loose(SASL_AUTHENTICATE, 0,
                                            messages.SaslAuthenticateRequest(auth_bytes=b"\0u\0p")),
            METADATA: struct.pack(">i", 0)}[api_key]
    return request_frame(api_key, version, correlation_id, body)


def response(correlation_id: int, body: bytes = b"\0\0") -> bytes:
    return struct.pack(">ii", 4 + len(body), correlation_id) + body


def handshake_v0(correlation_id: int, mechanism: str = "SCRAM-SHA-512") -> bytes:
    body = encode_loose(SASL_HANDSHAKE, 0, messages.SaslHandshakeRequest(mechanism=mechanism))
    return request_frame(SASL_HANDSHAKE, 0, correlation_id, body)


def handshake_answer(correlation_id: int, error_code: int = 0) -> bytes:
    """A SaslHandshake response: its error code, then the enabled mechanisms."""
    mechanisms = b"".join(struct.pack(">h", len(m)) + m for m in (b"SCRAM-SHA-512", b"PLAIN"))
    return response(correlation_id, struct.pack(">hi", error_code, 2) + mechanisms)


def bare(token: bytes) -> bytes:
    """A SASL token as it travels after a SaslHandshake v0: size-prefixed, nothing else."""
    return struct.pack(">i", len(token)) + token


def checked(sent: list[bytes], received: list[bytes]) -> Report:
    report = Report()
    check_sasl_responses(b"".join(sent), b"".join(received), report)
    return report


def test_answers_to_api_versions_and_the_sasl_handshake_pass():
    report = checked([frame(API_VERSIONS, 1), frame(SASL_HANDSHAKE, 2), frame(SASL_AUTHENTICATE, 3)],
                     [response(1), response(2), response(3)])
    assert (report.sasl_responses, report.sasl_answered_other, report.sasl_unmatched) == (3, 0, 0)


def test_an_answer_to_metadata_before_authentication_is_counted():
    report = checked([frame(API_VERSIONS, 1), frame(METADATA, 2)], [response(1), response(2)])
    assert (report.sasl_answered_other, report.sasl_unmatched) == (1, 0)
    assert "api key 3 answered" in report.bad_lines[0]


def test_a_skipped_request_is_passed_over_in_order():
    # the node may leave a request unanswered (it closed after answering, say); the next
    # response is matched to the first request after it with the response's correlation id
    report = checked([frame(SASL_HANDSHAKE, 1), frame(METADATA, 2), frame(SASL_HANDSHAKE, 2)],
                     [response(2)])
    assert report.sasl_answered_other == 1  # the earliest request with id 2 was Metadata


def test_an_answer_naming_no_request_is_unmatched():
    report = checked([frame(API_VERSIONS, 1)], [response(1), response(9)])
    assert (report.sasl_responses, report.sasl_unmatched) == (2, 1)


CLIENT_FIRST = b"n,,n=healthy,r=fyko+d2lbbFgONRv9qkxdawL"
CLIENT_FINAL = b"c=biws,r=fyko+d2lbbFgONRv9qkxdawLx,p=dHpIzSHJtZDTVVgDm"
SERVER_FIRST = b"r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,s=QSXCR+Q6sek8bf92,i=4096"


def test_after_a_sasl_handshake_v0_the_next_frames_are_bare_tokens_answered_bare():
    # Kafka's SaslServerAuthenticator after a v0 handshake: the client's tokens and the
    # server's answers are size-prefixed bytes with no header (the server-first message's first
    # four bytes are no correlation id); a failed token closes the connection unanswered
    report = checked([frame(API_VERSIONS, 1), handshake_v0(2), bare(CLIENT_FIRST), bare(CLIENT_FINAL)],
                     [response(1), handshake_answer(2), bare(SERVER_FIRST)])
    assert (report.sasl_responses, report.sasl_v0_handshakes, report.sasl_raw_answered) == (2, 1, 1), \
        report.bad_lines
    assert (report.sasl_answered_other, report.sasl_unmatched) == (0, 0), report.bad_lines


def test_a_bare_token_shorter_than_a_request_header_is_still_a_token():
    report = checked([handshake_v0(1, "PLAIN"), bare(b""), bare(b"\0u\0p")],
                     [handshake_answer(1), bare(b""), bare(b"")])
    assert (report.sasl_raw_answered, report.sasl_unmatched) == (2, 0), report.bad_lines


def test_a_bare_answer_beyond_the_tokens_sent_is_unmatched():
    report = checked([handshake_v0(1), bare(CLIENT_FIRST)],
                     [handshake_answer(1), bare(SERVER_FIRST), bare(SERVER_FIRST)])
    assert (report.sasl_raw_answered, report.sasl_unmatched) == (1, 1)


def test_a_refused_or_v1_handshake_leaves_the_frames_framed():
    # UNSUPPORTED_SASL_MECHANISM (33) to a v0 handshake: no bare tokens follow, so a bare
    # answer is read as a response and names no request; after v1 the tokens travel in
    # SaslAuthenticate requests, answered with their correlation ids
    report = checked([handshake_v0(1, "GSSAPI"), bare(CLIENT_FIRST)],
                     [handshake_answer(1, error_code=33), bare(SERVER_FIRST)])
    assert (report.sasl_v0_handshakes, report.sasl_raw_answered, report.sasl_unmatched) == (0, 0, 1)
    report = checked([frame(SASL_HANDSHAKE, 1), frame(SASL_AUTHENTICATE, 2)],
                     [handshake_answer(1), response(2)])
    assert (report.sasl_responses, report.sasl_raw_answered, report.sasl_unmatched) == (2, 0, 0)
    report = checked([frame(SASL_HANDSHAKE, 1), bare(CLIENT_FIRST)],
                     [handshake_answer(1), bare(SERVER_FIRST)])
    assert report.sasl_unmatched == 1


def test_requests_are_cut_as_the_node_cuts_them():
    first, second = frame(API_VERSIONS, 1), frame(METADATA, 2)
    assert requests_as_cut(first + second) == [(API_VERSIONS, 1), (METADATA, 2)]
    # a size prefix 8 bytes too long swallows the next frame's prefix and header: no second request
    longer = struct.pack(">i", len(first) - 4 + 8) + first[4:]
    assert requests_as_cut(longer + second) == [(API_VERSIONS, 1)]
    assert requests_as_cut(first[:-1]) == []  # not whole yet
    assert requests_as_cut(struct.pack(">i", -1) + first) == []


def test_the_log_scan_counts_a_line_a_client_forged_with_a_newline(tmp_path):
    log = tmp_path / "node.log"
    log.write_bytes(
        b"$ python -m strom format --config server.properties\n"
        b"Formatted data for cluster c3Ry\n"  # strom format's own output: not the log's format
        b"$ python -m strom start --config server.properties\n"
        b"2026-01-01 10:00:00,001 INFO strom.broker: broker 1 started\n"
        b"2026-01-01 10:00:00,002 INFO security.sasl.apis: Failed authentication with 127.0.0.1 "
        b"(Unsupported SASL mechanism PLAIN\r\n"
        b"2026-01-01 10:00:00,003 ERROR forged)\n"
        b"2026-01-01 10:00:00,004 INFO x: a carriage return \r alone does not end a line\n")
    report = Report()
    scan_log(str(log), report)
    assert (report.stray_lines, report.errors, report.tracebacks) == (0, 1, 0)
    log.write_bytes(log.read_bytes() + b"2026-01-01 10:00:01,000 INFO security.sasl.apis: (Unsupported "
                    b"SASL mechanism PLAIN\nforged)\nTraceback (most recent call last):\n")
    report = Report()
    scan_log(str(log), report)
    assert (report.stray_lines, report.tracebacks) == (2, 1)
