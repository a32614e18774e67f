"""UpdateFeatures on a broker: forwarded to the active controller as Kafka's KafkaApis forwards
it, with ALTER on the cluster checked first (CLUSTER_AUTHORIZATION_FAILED, not forwarded), and
REQUEST_TIMED_OUT when the controller does not answer."""
from __future__ import annotations

import asyncio

from broker.authorizer import BrokerAuthorizer
from broker.handlers.quorum import QuorumApis
from controller.feature_control import FeatureControl
from metadata.image import MetadataImage
from metadata.security import ALTER, CLUSTER, CLUSTER_NAME
from protocol import messages as M
from protocol.context import KafkaPrincipal, RequestContext, Session
from protocol.errors import Error
from protocol.headers import RequestHeader
from tests.security.acls import acl

ALICE = Session("PLAINTEXT", client_address="127.0.0.1", principal=KafkaPrincipal("User", "alice"))
R = M.UpdateFeaturesRequest


class Controller:
    """The controller's real decision over an image, recording what reaches it."""

    def __init__(self, answer: bool = True):
        self.image = MetadataImage()
        self.image.features.update({"metadata.version": 25, "transaction.version": 2})
        self.forwarded: list = []
        self.answer = answer

    async def forward(self, api_key, version, req):
        self.forwarded.append((api_key, version))
        if not self.answer:
            raise TimeoutError
        return FeatureControl(node_id=3000).update_features(self.image, req, version).response

    async def wait_for_change(self, timeout):
        pass


def call(apis: QuorumApis, version: int, req):
    api = {a.key: a for a in apis.apis()}[57]
    assert (api.min_version, api.max_version) == (0, 2)
    return asyncio.run(api.fn(RequestContext(RequestHeader(57, version, 1, "test", 2), ALICE), req))


def downgrade(level: int):
    return R(feature_updates=[R.FeatureUpdateKey(feature="transaction.version", max_version_level=level,
                                                 upgrade_type=2)])


def test_update_features_is_forwarded_to_the_controller_with_the_clients_version():
    controller = Controller()
    answer = call(QuorumApis(controller), 1, downgrade(1))
    assert answer.error_code == Error.NONE and controller.forwarded == [(57, 1)]


def test_update_features_needs_alter_on_the_cluster_and_is_then_not_forwarded():
    controller = Controller()
    held = {}
    apis = QuorumApis(controller, BrokerAuthorizer(lambda: held))
    answer = call(apis, 2, downgrade(1))
    assert answer.error_code == Error.CLUSTER_AUTHORIZATION_FAILED and controller.forwarded == []
    entry = acl(CLUSTER, CLUSTER_NAME, ALTER, principal="User:alice")
    held[entry.id] = entry
    assert call(apis, 2, downgrade(1)).error_code == Error.NONE


def test_a_controller_that_does_not_answer_is_a_timeout():
    assert call(QuorumApis(Controller(answer=False)), 2, downgrade(1)).error_code == Error.REQUEST_TIMED_OUT
