"""Client quotas at the broker: DescribeClientQuotas and AlterClientQuotas (0-1, KIP-546).

DescribeClientQuotas is answered from this broker's metadata image with Kafka's filter
(security/quotas.py: exact, default and specified components, strict); it needs
DESCRIBE_CONFIGS on the cluster, else CLUSTER_AUTHORIZATION_FAILED for the whole answer.
AlterClientQuotas needs ALTER_CONFIGS on the cluster (else CLUSTER_AUTHORIZATION_FAILED for
every entry); it is forwarded to the active controller as the client sent it
(controller/quota_control.py decides) and answered once this broker's image shows the values
written, so the next Describe here sees them and the quota is enforced from the next request.
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
from metadata.image import quota_entity
from metadata.security import ALTER_CONFIGS, DESCRIBE_CONFIGS
from protocol import messages as M
from protocol.context import RequestContext
from protocol.dispatch import Api
from protocol.errors import Error
from security.quotas import describe_client_quotas

if TYPE_CHECKING:
    from metadata.image import MetadataImage


def _entity_key(pairs) -> tuple:
    """The image's key for a request's entity (a type named twice keeps its last name, as Kafka's map)."""
    return quota_entity(dict(pairs).items())


class QuotaApis:
    def __init__(self, image: Callable[[], MetadataImage], controller: ControllerChannel,
                 authorizer: Authorizer | None = None):
        self.image = image
        self.controller = controller
        self.authorizer = authorizer

    def apis(self) -> list[Api]:
        return [Api(48, 0, 1, self.handle_describe_client_quotas),
                Api(49, 0, 1, self.handle_alter_client_quotas)]

    def _allowed(self, ctx: RequestContext, operation: int) -> bool:
        return allowed_on_cluster(self.authorizer, ctx, operation)

    async def handle_describe_client_quotas(self, ctx: RequestContext, req) -> Any:
        if not self._allowed(ctx, DESCRIBE_CONFIGS):
            return M.DescribeClientQuotasResponse(error_code=Error.CLUSTER_AUTHORIZATION_FAILED,
                                                  error_message=None, entries=None)
        return describe_client_quotas(self.image().client_quotas, req)

    async def handle_alter_client_quotas(self, ctx: RequestContext, req) -> Any:
        response = None
        code = Error.CLUSTER_AUTHORIZATION_FAILED
        if self._allowed(ctx, ALTER_CONFIGS):
            code = Error.REQUEST_TIMED_OUT
            response = await forward(self.controller, ctx, req)
        if response is None:
            R = M.AlterClientQuotasResponse
            Entity = R.EntryData.EntityData
            return R(entries=[
                R.EntryData(error_code=code, error_message=None,
                            entity=[Entity(entity_type=e.entity_type, entity_name=e.entity_name)
                                    for e in entry.entity])
                for entry in req.entries])
        if not req.validate_only:
            await self._wait_until_shown(req, response)
        return response

    async def _wait_until_shown(self, req, response) -> None:
        """Until this broker's image holds what each accepted entry set (and not what it
        removed), for at most services.APPLY_WAIT_S."""
        accepted = {_entity_key((e.entity_type, e.entity_name) for e in r.entity)
                    for r in response.entries if r.error_code == Error.NONE}
        wanted: dict[tuple, dict[str, float | None]] = {}
        for entry in req.entries:
            key = _entity_key((e.entity_type, e.entity_name) for e in entry.entity)
            if key in accepted:
                ops = wanted.setdefault(key, {})
                for op in entry.ops:
                    ops.setdefault(op.key, None if op.remove else op.value)
        if not wanted:
            return

        def shown(image: MetadataImage) -> bool:
            for key, ops in wanted.items():
                current = image.client_quotas.get(key, {})
                for name, value in ops.items():
                    if current.get(name) != value:
                        return False
            return True

        await wait_until_shown(self.image, self.controller, shown)
