"""DescribeClientQuotas and AlterClientQuotas at the broker (broker/handlers/quotas.py), as Kafka's
KafkaApis and ControllerApis authorize them: DESCRIBE_CONFIGS / ALTER_CONFIGS on the cluster; an
alteration is the controller's and is answered once this broker's image shows it."""
import asyncio
import uuid

from broker.authorizer import ALLOW_ALL, BrokerAuthorizer
from broker.handlers.quotas import QuotaApis
from controller.quota_control import QuotaControl
from metadata.image import MetadataImage
from metadata.security import ALLOW, ALTER_CONFIGS, CLUSTER, CLUSTER_NAME, DESCRIBE_CONFIGS, LITERAL, AclEntry
from protocol import messages as M
from protocol.context import KafkaPrincipal, RequestContext, Session
from protocol.errors import Error
from protocol.headers import RequestHeader

A = M.AlterClientQuotasRequest
D = M.DescribeClientQuotasRequest
ALICE = KafkaPrincipal("User", "alice")


class Controller:
    """The active controller (controller/quota_control.py decides) whose records reach this
    broker's image one change later, as the metadata log would bring them."""

    def __init__(self, image: MetadataImage):
        self.image = image
        self.control = QuotaControl()
        self.pending: list = []
        self.forwarded = 0

    async def forward(self, api_key, api_version, request):
        self.forwarded += 1
        result = self.control.alter_client_quotas(self.image, request)
        self.pending += result.records
        return result.response

    async def wait_for_change(self, timeout):
        await asyncio.sleep(0)
        for record in self.pending:
            self.image.replay(self.image.last_offset + 1, record)
        self.pending = []


def ctx(api_key, principal=ALICE):
    session = Session("PLAINTEXT", client_address="127.0.0.1", principal=principal)
    return RequestContext(RequestHeader(api_key, 1, 1, "test", 2), session)


def alteration(name="app", value=1024.0, validate_only=False):
    op = A.EntryData.OpData(key="producer_byte_rate", value=value, remove=False)
    return A(entries=[A.EntryData(entity=[A.EntryData.EntityData(entity_type="client-id", entity_name=name)],
                                  ops=[op])], validate_only=validate_only)


def authorizer(image, *operations):
    for operation in operations:
        acl_id = uuid.uuid4()
        image.acls[acl_id] = AclEntry(acl_id, CLUSTER, CLUSTER_NAME, LITERAL, str(ALICE), "*", operation,
                                      ALLOW)
    return BrokerAuthorizer(lambda: image.acls)


def test_an_alteration_is_answered_once_the_image_shows_it_and_described_from_the_image():
    image = MetadataImage()
    controller = Controller(image)
    apis = QuotaApis(lambda: image, controller, ALLOW_ALL)
    response = asyncio.run(apis.handle_alter_client_quotas(ctx(49), alteration()))
    assert [(r.error_code, [(e.entity_type, e.entity_name) for e in r.entity]) for r in response.entries] == [
        (Error.NONE, [("client-id", "app")])]
    assert image.client_quotas == {(("client-id", "app"),): {"producer_byte_rate": 1024.0}}
    described = asyncio.run(apis.handle_describe_client_quotas(ctx(48), D(components=[], strict=False)))
    assert described.error_code == Error.NONE
    assert [[(v.key, v.value) for v in e.values] for e in described.entries] == [
        [("producer_byte_rate", 1024.0)]]


def test_validate_only_changes_nothing():
    image = MetadataImage()
    apis = QuotaApis(lambda: image, Controller(image), ALLOW_ALL)
    response = asyncio.run(apis.handle_alter_client_quotas(ctx(49), alteration(validate_only=True)))
    assert [r.error_code for r in response.entries] == [Error.NONE] and image.client_quotas == {}


def test_an_invalid_value_is_the_controllers_invalid_request():
    image = MetadataImage()
    apis = QuotaApis(lambda: image, Controller(image), ALLOW_ALL)
    response = asyncio.run(apis.handle_alter_client_quotas(ctx(49), alteration(value=-1)))
    assert [(r.error_code, r.error_message) for r in response.entries] == [
        (Error.INVALID_REQUEST, "Quota producer_byte_rate must be greater than 0")]


def test_without_alter_configs_on_the_cluster_every_entry_is_refused_and_nothing_forwarded():
    image = MetadataImage()
    controller = Controller(image)
    apis = QuotaApis(lambda: image, controller, authorizer(image, DESCRIBE_CONFIGS))
    response = asyncio.run(apis.handle_alter_client_quotas(ctx(49), alteration()))
    assert [r.error_code for r in response.entries] == [Error.CLUSTER_AUTHORIZATION_FAILED]
    assert controller.forwarded == 0
    described = asyncio.run(apis.handle_describe_client_quotas(ctx(48), D(components=[], strict=False)))
    assert described.error_code == Error.NONE


def test_without_describe_configs_on_the_cluster_describe_is_refused():
    image = MetadataImage()
    apis = QuotaApis(lambda: image, Controller(image), authorizer(image))
    described = asyncio.run(apis.handle_describe_client_quotas(ctx(48), D(components=[], strict=False)))
    assert described.error_code == Error.CLUSTER_AUTHORIZATION_FAILED and described.entries is None


def test_alter_configs_on_the_cluster_implies_describe_configs():
    image = MetadataImage()
    apis = QuotaApis(lambda: image, Controller(image), authorizer(image, ALTER_CONFIGS))
    described = asyncio.run(apis.handle_describe_client_quotas(ctx(48), D(components=[], strict=False)))
    assert described.error_code == Error.NONE
    altered = asyncio.run(apis.handle_alter_client_quotas(ctx(49), alteration()))
    assert [r.error_code for r in altered.entries] == [Error.NONE]
