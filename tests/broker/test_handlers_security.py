"""The broker's ACL and SCRAM credential handlers, as Kafka's AclApis and KafkaApis authorize
them: DESCRIBE / ALTER on the cluster (CLUSTER_AUTHORIZATION_FAILED for every item), then
SECURITY_DISABLED for the ACL APIs without an authorizer; describes come from the image, changes
from the controller once the image shows them."""
import asyncio
import uuid

from broker.authorizer import ALLOW_ALL, BrokerAuthorizer
from broker.handlers.security import SecurityApis
from metadata.image import MetadataImage
from metadata.security import ALLOW, ALTER, CLUSTER, CLUSTER_NAME, DESCRIBE, LITERAL, READ, TOPIC, AclEntry
from protocol import messages as M
from protocol.context import KafkaPrincipal, RequestContext, Session
from protocol.errors import Error
from protocol.headers import RequestHeader

ALICE, BOB = KafkaPrincipal("User", "alice"), KafkaPrincipal("User", "bob")


class Controller:
    """The controller channel: answers CreateAcls with success and applies the ACL to the image
    one change later, as the metadata log would."""

    def __init__(self, image: MetadataImage):
        self.image = image
        self.forwarded: list[int] = []
        self.pending: list[AclEntry] = []

    async def forward(self, api_key, api_version, request):
        self.forwarded.append(api_key)
        R = M.CreateAclsResponse
        for c in request.creations:
            self.pending.append(AclEntry(uuid.uuid4(), c.resource_type, c.resource_name,
                                         c.resource_pattern_type, c.principal, c.host, c.operation,
                                         c.permission_type))
        return R(results=[R.AclCreationResult(error_code=Error.NONE) for _ in request.creations])

    async def wait_for_change(self, timeout):
        await asyncio.sleep(0)
        for acl in self.pending:
            self.image.acls[acl.id] = acl
        self.pending = []


def ctx(api_key, version, principal=ALICE) -> RequestContext:
    session = Session("PLAINTEXT", client_address="127.0.0.1", principal=principal)
    return RequestContext(RequestHeader(api_key, version, 1, "test", 2), session)


def acl(resource_type, name, principal, operation) -> AclEntry:
    return AclEntry(uuid.uuid4(), resource_type, name, LITERAL, str(principal), "*", operation, ALLOW)


def describe_all():
    return M.DescribeAclsRequest(resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1,
                                 principal_filter=None, host_filter=None, operation=1, permission_type=1)


def creation(name="orders"):
    C = M.CreateAclsRequest
    return C(creations=[C.AclCreation(resource_type=TOPIC, resource_name=name, resource_pattern_type=LITERAL,
                                      principal="User:carol", host="*", operation=READ,
                                      permission_type=ALLOW)])


def handlers(image, authorizer):
    controller = Controller(image)
    return SecurityApis(lambda: image, controller, authorizer), controller


def test_without_an_authorizer_the_acl_apis_answer_security_disabled_and_scram_describe_works():
    image = MetadataImage()
    apis, controller = handlers(image, ALLOW_ALL)
    described = asyncio.run(apis.handle_describe_acls(ctx(29, 3), describe_all()))
    assert described.error_code == Error.SECURITY_DISABLED
    created = asyncio.run(apis.handle_create_acls(ctx(30, 3), creation()))
    assert [r.error_code for r in created.results] == [Error.SECURITY_DISABLED]
    assert controller.forwarded == []
    scram = asyncio.run(apis.handle_describe_user_scram_credentials(
        ctx(50, 0), M.DescribeUserScramCredentialsRequest(users=None)))
    assert scram.error_code == Error.NONE


def test_a_principal_without_alter_on_the_cluster_gets_cluster_authorization_failed_for_every_item():
    image = MetadataImage()
    for a in (acl(CLUSTER, CLUSTER_NAME, ALICE, ALTER), acl(CLUSTER, CLUSTER_NAME, BOB, DESCRIBE)):
        image.acls[a.id] = a
    apis, controller = handlers(image, BrokerAuthorizer(lambda: image.acls))
    refused = asyncio.run(apis.handle_create_acls(ctx(30, 3, BOB), creation()))
    assert [r.error_code for r in refused.results] == [Error.CLUSTER_AUTHORIZATION_FAILED]
    A = M.AlterUserScramCredentialsRequest
    upsertion = A.ScramCredentialUpsertion(name="x", mechanism=1, iterations=4096, salt=b"s",
                                           salted_password=b"p")
    refused_scram = asyncio.run(apis.handle_alter_user_scram_credentials(ctx(51, 0, BOB),
                                                                         A(upsertions=[upsertion])))
    assert [(r.user, r.error_code) for r in refused_scram.results] == [
        ("x", Error.CLUSTER_AUTHORIZATION_FAILED)]
    assert controller.forwarded == []
    carol = KafkaPrincipal("User", "carol")
    assert asyncio.run(apis.handle_describe_acls(ctx(29, 3, carol), describe_all())).error_code == \
        Error.CLUSTER_AUTHORIZATION_FAILED


def test_an_allowed_create_is_answered_once_the_image_shows_it_and_describe_sees_it():
    image = MetadataImage()
    cluster_alter = acl(CLUSTER, CLUSTER_NAME, ALICE, ALTER)
    image.acls[cluster_alter.id] = cluster_alter
    apis, controller = handlers(image, BrokerAuthorizer(lambda: image.acls))
    created = asyncio.run(apis.handle_create_acls(ctx(30, 3, ALICE), creation("orders")))
    assert [r.error_code for r in created.results] == [Error.NONE]
    assert controller.forwarded == [30]
    # ALTER implies DESCRIBE: alice may list what she created.
    described = asyncio.run(apis.handle_describe_acls(ctx(29, 3, ALICE), describe_all()))
    assert described.error_code == Error.NONE
    listed = {(r.resource_name, a.principal) for r in described.resources for a in r.acls}
    assert ("orders", "User:carol") in listed
