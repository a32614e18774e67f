"""The KRaft RPCs a replica serves on its controller listener: protocol.dispatch Api handlers.

Each handler parses the request (raft.wire: cluster id and partition checks answer at once,
without the core), registers for the core's answer to it, steps the core and awaits that
answer, which comes in the same step's Ready or, for a parked Fetch or a voter change, a later
one. If none comes in time the driver answers for the core (TIMED_OUT: REQUEST_TIMED_OUT):

| API (key)            | versions | source stepped     | no answer within                  | answer        |
|----------------------|----------|--------------------|-----------------------------------|---------------|
| Fetch (1)            | 4-18     | replica id         | max_wait_ms + request timeout     | empty answer  |
| Vote (52)            | 0-2      | candidate id       | request timeout                   | TIMED_OUT     |
| BeginQuorumEpoch (53)| 0-1      | leader id          | request timeout                   | TIMED_OUT     |
| EndQuorumEpoch (54)  | 0-1      | leader id          | request timeout                   | TIMED_OUT     |
| DescribeQuorum (55)  | 0-2      | -                  | answered from ``core.describe()`` |               |
| FetchSnapshot (59)   | 0-1      | replica id         | request timeout                   | TIMED_OUT     |
| AddRaftVoter (80)    | 0-1      | a ClientToken      | timeout_ms + request timeout      | TIMED_OUT     |
| RemoveRaftVoter (81) | 0        | a ClientToken      | 30 s + request timeout            | TIMED_OUT     |
| UpdateRaftVoter (82) | 0        | a ClientToken      | 30 s + request timeout            | TIMED_OUT     |
"""
from __future__ import annotations

import asyncio
import itertools
import time
from dataclasses import replace

from protocol.dispatch import Api

from . import messages as m
from . import wire
from .outbound import request_timeout_ms

BROKER_NOT_AVAILABLE = 8  # the replica has not started yet, or is closed


class ClientToken:
    """The source of an admin request in the core (any non-int); its answer comes back to it."""

    __slots__ = ("n",)
    _ids = itertools.count(1)

    def __init__(self) -> None:
        self.n = next(self._ids)

    def __repr__(self) -> str:
        return f"client-{self.n}"


def build_apis(driver) -> list[Api]:
    async def handle(header, body):
        return await handle_request(driver, header.api_key, header.api_version, body)

    async def describe(header, body):
        return handle_describe_quorum(driver, header.api_version, body)

    apis = [Api(key, lo, hi, handle) for key, (lo, hi) in wire.VERSIONS.items()
            if key != wire.DESCRIBE_QUORUM]
    lo, hi = wire.VERSIONS[wire.DESCRIBE_QUORUM]
    return sorted([*apis, Api(wire.DESCRIBE_QUORUM, lo, hi, describe)], key=lambda a: a.key)


async def handle_request(driver, api_key: int, version: int, body):
    if driver.core is None or driver.closed:
        return wire.build_error_response(api_key, version, BROKER_NOT_AVAILABLE)
    c = driver.config
    try:
        source, message = wire.parse_request(api_key, version, body, c.cluster_id, c.node_id)
    except wire.WireError as e:
        return wire.build_error_response(api_key, version, e.error_code, str(e))
    if source is None:
        source = ClientToken()
    response_type = wire.RESPONSE_TYPES[api_key]
    if isinstance(message, m.FetchRequest):
        if message.current_leader_epoch == -1:
            message = replace(message, current_leader_epoch=driver.core.quorum.epoch)
        driver.answer_older_fetches(source)
    fut = driver.expect(source, response_type, message)
    driver.step(source, message)
    try:
        timeout_s = request_timeout_ms(driver.config.quorum, message) / 1000
        async with asyncio.timeout(timeout_s):
            answer = await asyncio.shield(fut)
    except TimeoutError:
        driver.forget(source, response_type, fut)
        if fut.done():
            answer = fut.result()
        else:
            error = m.NONE if isinstance(message, m.FetchRequest) else m.REQUEST_TIMED_OUT
            answer = driver.fallback_answer(message, error)
    except asyncio.CancelledError:  # the connection closed
        driver.forget(source, response_type, fut)
        raise
    return wire.build_response(api_key, version, answer, now_ms=int(time.time() * 1000),
                               listener=c.listener_name,
                               leader_endpoints=driver.leader_endpoints(answer.leader_id),
                               log_start_offset=driver.log.log_start_offset)


def handle_describe_quorum(driver, version: int, body):
    if driver.core is None or driver.closed:
        return wire.build_error_response(wire.DESCRIBE_QUORUM, version, BROKER_NOT_AVAILABLE)
    try:
        wire.parse_describe_quorum_request(body)
    except wire.WireError as e:
        return wire.build_error_response(wire.DESCRIBE_QUORUM, version, e.error_code, str(e))
    wall_now, now = int(time.time() * 1000), driver.now_ms()
    return wire.build_describe_quorum_response(driver.describe(), version, lambda t: wall_now - (now - t),
                                               driver.leader_and_epoch())
