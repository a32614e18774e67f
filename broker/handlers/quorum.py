"""The quorum's admin APIs on a broker, forwarded to the active controller as Kafka 4's
KafkaApis forwards them (forwardToControllerOrFail): DescribeQuorum (v0-2), AddRaftVoter,
RemoveRaftVoter and UnregisterBroker (v0), and UpdateFeatures (v0-2), so that ``strom quorum
--bootstrap-server``, ``strom cluster unregister`` and ``strom features upgrade`` reach the
controllers through any broker.

Kafka's ControllerApis authorizes them on the cluster: DESCRIBE for DescribeQuorum, ALTER for
the others. A forwarded request reaches the controller as this broker, not as the client, so
the broker checks the client's principal first and answers CLUSTER_AUTHORIZATION_FAILED
itself, without forwarding. A controller that does not answer in time: REQUEST_TIMED_OUT.
"""
from __future__ import annotations

from typing import Any

from broker.handlers.services import Authorizer, ControllerChannel, allowed_on_cluster, forward
from metadata.security import ALTER, DESCRIBE
from protocol import messages as M
from protocol.context import RequestContext
from protocol.dispatch import Api
from protocol.errors import Error
from raft import wire

DESCRIBE_QUORUM, UNREGISTER_BROKER, ADD_RAFT_VOTER, REMOVE_RAFT_VOTER = 55, 64, 80, 81
UPDATE_FEATURES = 57

# The operation on the cluster each API needs (Kafka's ControllerApis).
OPERATIONS = {DESCRIBE_QUORUM: DESCRIBE, UNREGISTER_BROKER: ALTER, ADD_RAFT_VOTER: ALTER,
              REMOVE_RAFT_VOTER: ALTER, UPDATE_FEATURES: ALTER}
VERSIONS = {**wire.VERSIONS, UPDATE_FEATURES: (0, 2)}


def error_response(api_key: int, version: int, code: int, message: str | None = None) -> Any:
    """A whole-request failure in the API's own shape."""
    if api_key == UNREGISTER_BROKER:
        return M.UnregisterBrokerResponse(error_code=code, error_message=message)
    if api_key == UPDATE_FEATURES:
        return M.UpdateFeaturesResponse(error_code=code, error_message=message)
    return wire.build_error_response(api_key, version, code, message)


class QuorumApis:
    def __init__(self, controller: ControllerChannel, authorizer: Authorizer | None = None):
        self.controller = controller
        self.authorizer = authorizer

    def apis(self) -> list[Api]:
        return [Api(key, *VERSIONS.get(key, (0, 0)), self.handle_forwarded) for key in OPERATIONS]

    async def handle_forwarded(self, ctx: RequestContext, req) -> Any:
        if not allowed_on_cluster(self.authorizer, ctx, OPERATIONS[ctx.api_key]):
            return error_response(ctx.api_key, ctx.api_version, Error.CLUSTER_AUTHORIZATION_FAILED)
        response = await forward(self.controller, ctx, req)
        if response is None:
            return error_response(ctx.api_key, ctx.api_version, Error.REQUEST_TIMED_OUT)
        return response
