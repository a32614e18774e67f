"""ACLs and SCRAM credentials at the broker: DescribeAcls, CreateAcls, DeleteAcls (1-3),
DescribeUserScramCredentials and AlterUserScramCredentials (0).

Describes are answered from this broker's metadata image; changes go to the active controller
(the broker forwards the request as the client sent it, controller/acl_control.py and
controller/scram_control.py decide) and are answered once this broker's image shows them, so
the client's next request here already sees the change.

Authorization, as Kafka's AclApis and KafkaApis: the ACL APIs need ALTER (Create, Delete) or
DESCRIBE (Describe) on the cluster, else CLUSTER_AUTHORIZATION_FAILED for every item; then,
with no authorizer configured (``authorizer.class.name`` empty), they answer SECURITY_DISABLED
("No Authorizer is configured"), as Kafka does: ACLs are stored only where they are enforced.
The SCRAM APIs need ALTER / DESCRIBE on the cluster too, and work with or without an
authorizer (SCRAM authentication does not need one).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from broker.handlers.services import (
    Authorizer,
    ControllerChannel,
    allowed_on_cluster,
    forward,
    wait_until_shown,
)
from metadata.acls import describe_acls
from metadata.scram import describe_user_scram_credentials
from metadata.security import ALTER, DESCRIBE
from protocol import messages as M
from protocol.context import RequestContext
from protocol.dispatch import Api
from protocol.errors import Error

if TYPE_CHECKING:
    from metadata.image import MetadataImage

NO_AUTHORIZER = "No Authorizer is configured."


class SecurityApis:
    def __init__(self, image: Callable[[], MetadataImage], controller: ControllerChannel,
                 authorizer: Authorizer | None = None):
        """``authorizer`` None: none is configured (everything allowed, ACL APIs disabled)."""
        self.image = image
        self.controller = controller
        self.authorizer = authorizer

    def apis(self) -> list[Api]:
        return [
            Api(29, 1, 3, self.handle_describe_acls),
            Api(30, 1, 3, self.handle_create_acls),
            Api(31, 1, 3, self.handle_delete_acls),
            Api(50, 0, 0, self.handle_describe_user_scram_credentials),
            Api(51, 0, 0, self.handle_alter_user_scram_credentials),
        ]

    # ---- helpers -----------------------------------------------------------------------------
    @property
    def _enabled(self) -> bool:
        return self.authorizer is not None and self.authorizer.enabled

    def _allowed(self, ctx: RequestContext, operation: int) -> bool:
        """May the request's principal do ``operation`` on the cluster (always, without an authorizer)."""
        return allowed_on_cluster(self.authorizer, ctx, operation)

    def _refusal(self, ctx: RequestContext, operation: int) -> tuple[int, str | None] | None:
        """The error every item of an ACL change gets before it is decided, if any."""
        if not self._allowed(ctx, operation):
            return Error.CLUSTER_AUTHORIZATION_FAILED, None
        if not self._enabled:
            return Error.SECURITY_DISABLED, NO_AUTHORIZER
        return None

    async def _forward(self, ctx: RequestContext, req) -> Any:
        return await forward(self.controller, ctx, req)

    async def _wait_until(self, shown: Callable[[MetadataImage], bool]) -> None:
        """Until this broker's image shows the change, for at most services.APPLY_WAIT_S."""
        await wait_until_shown(self.image, self.controller, shown)

    # ---- ACLs --------------------------------------------------------------------------------
    async def handle_describe_acls(self, ctx: RequestContext, req) -> Any:
        R = M.DescribeAclsResponse
        if not self._allowed(ctx, DESCRIBE):
            return R(error_code=Error.CLUSTER_AUTHORIZATION_FAILED, error_message=None)
        if not self._enabled:
            return R(error_code=Error.SECURITY_DISABLED,
                     error_message="No Authorizer is configured on the broker")
        return describe_acls(self.image().acls.values(), req)

    async def handle_create_acls(self, ctx: RequestContext, req) -> Any:
        R = M.CreateAclsResponse
        refused = self._refusal(ctx, ALTER)
        response = await self._forward(ctx, req) if refused is None else None
        if response is None:
            code, message = refused or (Error.REQUEST_TIMED_OUT, None)
            return R(results=[R.AclCreationResult(error_code=code, error_message=message)
                              for _ in req.creations])
        created = {_binding(c.resource_type, c.resource_name, c.resource_pattern_type, c)
                   for c, r in zip(req.creations, response.results, strict=False)
                   if r.error_code == Error.NONE}
        if created:
            await self._wait_until(lambda image: created <= {
                _binding(a.resource_type, a.resource_name, a.pattern_type, a) for a in image.acls.values()})
        return response

    async def handle_delete_acls(self, ctx: RequestContext, req) -> Any:
        R = M.DeleteAclsResponse
        refused = self._refusal(ctx, ALTER)
        response = await self._forward(ctx, req) if refused is None else None
        if response is None:
            code, message = refused or (Error.REQUEST_TIMED_OUT, None)
            return R(filter_results=[R.DeleteAclsFilterResult(error_code=code, error_message=message)
                                     for _ in req.filters])
        deleted = {_binding(m.resource_type, m.resource_name, m.pattern_type, m)
                   for r in response.filter_results for m in r.matching_acls}
        if deleted:
            await self._wait_until(lambda image: not deleted & {
                _binding(a.resource_type, a.resource_name, a.pattern_type, a) for a in image.acls.values()})
        return response

    # ---- SCRAM credentials -------------------------------------------------------------------
    async def handle_describe_user_scram_credentials(self, ctx: RequestContext, req) -> Any:
        if not self._allowed(ctx, DESCRIBE):
            return M.DescribeUserScramCredentialsResponse(error_code=Error.CLUSTER_AUTHORIZATION_FAILED,
                                                          error_message=None)
        return describe_user_scram_credentials(self.image(), req)

    async def handle_alter_user_scram_credentials(self, ctx: RequestContext, req) -> Any:
        R = M.AlterUserScramCredentialsResponse
        refused = None if self._allowed(ctx, ALTER) else (Error.CLUSTER_AUTHORIZATION_FAILED, None)
        response = await self._forward(ctx, req) if refused is None else None
        if response is None:
            code, message = refused or (Error.REQUEST_TIMED_OUT, None)
            users = dict.fromkeys([d.name for d in req.deletions] + [u.name for u in req.upsertions])
            Result = R.AlterUserScramCredentialsResult
            return R(results=[Result(user=user, error_code=code, error_message=message) for user in users])
        done = {r.user for r in response.results if r.error_code == Error.NONE}
        removed = [(d.name, d.mechanism) for d in req.deletions if d.name in done]
        upserted = [(u.name, u.mechanism, bytes(u.salt), u.iterations)
                    for u in req.upsertions if u.name in done]

        def shown(image: MetadataImage) -> bool:
            creds = image.scram_credentials
            if any(mechanism in creds.get(user, {}) for user, mechanism in removed):
                return False
            for user, mechanism, salt, iterations in upserted:
                c = creds.get(user, {}).get(mechanism)
                if c is None or c.salt != salt or c.iterations != iterations:
                    return False
            return True

        if done:
            await self._wait_until(shown)
        return response


def _binding(resource_type: int, resource_name: str, pattern_type: int, entry: Any) -> tuple:
    return (resource_type, resource_name, pattern_type, entry.principal, entry.host, entry.operation,
            entry.permission_type)
