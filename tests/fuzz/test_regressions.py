"""One test per defect the fuzzers found, named after it (issue 13, "Fuzzing")."""
from __future__ import annotations

import asyncio
import logging

import pytest

from protocol import messages as M
from protocol.dispatch import Api, Deferred, Dispatcher
from protocol.errors import Error
from protocol.headers import encode_request, read_response_header
from protocol.types import Reader
from tests.broker.replica_nodes import TOPIC_ID
from tests.fuzz.frames import encode_loose, request_frame
from tests.fuzz.test_handlers import broker_dispatcher, send


def test_a_null_topic_array_closes_the_connection_before_any_handler_runs(tmp_path, caplog):
    """Found by the live fuzz: ``topic_data`` sent as null (-1) reached the Produce handler,
    which iterated it (TypeError, a traceback per frame). Now the decoder refuses it."""
    caplog.set_level(logging.INFO)

    async def main():
        dispatcher, coordinator = await broker_dispatcher(tmp_path)
        try:
            for key, version, request in [
                (0, 8, M.ProduceRequest(acks=1, timeout_ms=1, topic_data=None)),
                (0, 9, M.ProduceRequest(acks=1, timeout_ms=1, topic_data=None)),
                (1, 12, M.FetchRequest(topics=None)),
                (2, 5, M.ListOffsetsRequest(topics=None)),
                (8, 8, M.OffsetCommitRequest(group_id="g", topics=None)),
                (15, 5, M.DescribeGroupsRequest(groups=None)),
            ]:
                frame = request_frame(key, version, 1, encode_loose(key, version, request))
                assert await send(dispatcher, frame) is None
        finally:
            await coordinator.runtime.stop()
    asyncio.run(main())
    messages = [r.getMessage() for r in caplog.records if r.name == "protocol.dispatch"]
    assert len(messages) == 6 and all("was serialized as null" in m for m in messages)
    assert not any(r.exc_info for r in caplog.records)


async def _echo_null_name(header, request):
    R = M.MetadataResponse
    return R(topics=[R.MetadataResponseTopic(name=None)])  # name is nullable from v12 only


async def _deferred_null_name(header, request):
    return Deferred(_echo_null_name(header, request))


@pytest.mark.parametrize("handler", [_echo_null_name, _deferred_null_name], ids=["now", "deferred"])
def test_a_response_that_cannot_be_encoded_closes_the_connection_with_one_log_line(caplog, handler):
    """Found by the live fuzz: a null topic name echoed into a field that is not nullable in
    the response made encode_response raise inside the connection's task ("Task exception
    was never retrieved"). Now the connection closes with one warning, no traceback."""
    caplog.set_level(logging.INFO)
    frame = encode_request(3, 11, 5, "c", M.MetadataRequest(topics=[]))

    async def main():
        dispatcher = Dispatcher([Api(3, 0, 12, handler)])
        parts = await dispatcher.handle(memoryview(bytearray(frame[4:])))
        if isinstance(parts, Deferred):
            parts = await parts.response
        return parts
    assert asyncio.run(main()) is None
    [record] = [r for r in caplog.records if r.name == "protocol.dispatch"]
    assert record.levelno == logging.WARNING and record.exc_info is None
    assert "cannot encode the Metadata v11 response" in record.getMessage()


def decode_answer(parts, api_key: int, version: int):
    r = Reader(b"".join(parts)[4:])
    read_response_header(r, api_key, version)
    return M.RESPONSES[api_key].decode(version, r)


def _metadata(tmp_path, version: int, topics) -> M.MetadataResponse:
    async def main():
        dispatcher, coordinator = await broker_dispatcher(tmp_path)
        try:
            frame = encode_request(3, version, 9, "c", M.MetadataRequest(topics=topics))
            parts = await send(dispatcher, frame)
            return decode_answer(parts, 3, version)
        finally:
            await coordinator.runtime.stop()
    return asyncio.run(main())


@pytest.mark.parametrize("version", [10, 11])
def test_metadata_by_topic_id_before_v12_answers_invalid_request(tmp_path, version):
    """Found by the handler fuzz: Metadata v10-11 has a nullable topic name and a topic id in
    the request but not in use until v12; a topic asked by id had its null name echoed into a
    response field that cannot be null, and the connection failed. Kafka answers
    INVALID_REQUEST."""
    T = M.MetadataRequest.MetadataRequestTopic
    response = _metadata(tmp_path, version, [T(name=None, topic_id=TOPIC_ID), T(name="t")])
    assert [(t.error_code, t.name) for t in response.topics] == [
        (Error.INVALID_REQUEST, ""), (Error.INVALID_REQUEST, "t")]


def test_metadata_v12_by_unknown_topic_id_answers_unknown_topic_id(tmp_path):
    T = M.MetadataRequest.MetadataRequestTopic
    unknown = bytes(range(16))
    response = _metadata(tmp_path, 12, [T(name=None, topic_id=unknown), T(name=None, topic_id=TOPIC_ID)])
    gone, known = response.topics
    assert (gone.error_code, gone.name, gone.topic_id) == (Error.UNKNOWN_TOPIC_ID, None, unknown)
    assert (known.error_code, known.name, known.topic_id) == (Error.NONE, "t", TOPIC_ID)


def test_offset_commit_with_a_huge_retention_time_never_expires_instead_of_failing(tmp_path, caplog):
    """Found by the handler fuzz: OffsetCommit v2-4 with retention_time_ms near 2**63 made the
    expire timestamp overflow int64 when the offset record was encoded (a traceback and a
    closed connection). It is capped at the largest timestamp."""
    caplog.set_level(logging.INFO)
    R = M.OffsetCommitRequest
    T = R.OffsetCommitRequestTopic
    request = R(group_id="g", generation_id_or_member_epoch=-1, member_id="",
                retention_time_ms=(1 << 63) - 1, topics=[T(name="t", partitions=[
                    T.OffsetCommitRequestPartition(partition_index=0, committed_offset=5)])])

    async def main():
        dispatcher, coordinator = await broker_dispatcher(tmp_path)
        try:
            frame = encode_request(8, 2, 3, "c", request)
            parts = await send(dispatcher, frame)
            return decode_answer(parts, 8, 2)
        finally:
            await coordinator.runtime.stop()
    response = asyncio.run(main())
    assert response.topics[0].partitions[0].error_code == Error.NONE
    assert not any(r.levelno >= logging.ERROR for r in caplog.records)
