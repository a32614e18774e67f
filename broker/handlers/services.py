"""The services the handlers share, as the narrow Protocols they use, and the pattern of every
change a broker makes through the controller: forward the request as the client sent it, then
answer once this broker's own metadata image shows the change, so that the client's next
request here already sees it.

- ``ControllerChannel``: what the handlers ask of the broker's metadata follower (forward a
  request to the active controller; wait for the metadata image to change).
- ``Authorizer``: what they use of broker/authorizer.py's BrokerAuthorizer.
- ``forward``: the controller's answer, or None when it could not be reached in time.
- ``wait_until_shown``: until the image satisfies a condition, at most APPLY_WAIT_S seconds;
  ``wait_for_topics``: until it holds (or no longer holds) each of some topics.
"""
from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Protocol

from metadata.security import CLUSTER, CLUSTER_NAME
from protocol.context import RequestContext

if TYPE_CHECKING:
    from metadata.image import MetadataImage

# How long a change forwarded to the controller waits for this broker's image to show it.
APPLY_WAIT_S = 5.0


class ControllerChannel(Protocol):
    """What the handlers ask of the broker's metadata follower: forward a request to the active
    controller, and wait for the metadata image to change."""

    async def forward(self, api_key: int, api_version: int, request: Any) -> Any: ...

    async def wait_for_change(self, timeout: float) -> None: ...


class Authorizer(Protocol):
    """What the handlers use of broker/authorizer.py's BrokerAuthorizer."""
    enabled: bool

    def authorize(self, ctx: RequestContext, operation: int, resource_type: int, name: str) -> bool: ...


def allowed_on_cluster(authorizer: Authorizer | None, ctx: RequestContext, operation: int) -> bool:
    """May the request's principal do ``operation`` on the cluster (always, with no authorizer
    or a disabled one)."""
    return authorizer is None or not authorizer.enabled or authorizer.authorize(ctx, operation, CLUSTER,
                                                                                CLUSTER_NAME)


async def forward(controller: ControllerChannel, ctx: RequestContext, request: Any) -> Any | None:
    """The active controller's answer to ``request`` (at the client's API and version), or None
    when the controller could not be reached or did not answer in time."""
    try:
        return await controller.forward(ctx.api_key, ctx.api_version, request)
    except (ConnectionError, TimeoutError):
        return None


async def wait_until_shown(image: Callable[[], MetadataImage], controller: ControllerChannel,
                           shown: Callable[[MetadataImage], bool], timeout: float = APPLY_WAIT_S) -> None:
    """Until ``shown(image())`` holds, at most ``timeout`` seconds (then the caller answers
    anyway: the change is the controller's, the image only lags it)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not shown(image()):
        remaining = deadline - loop.time()
        if remaining <= 0:
            return
        await controller.wait_for_change(remaining)


async def wait_for_topics(image: Callable[[], MetadataImage], controller: ControllerChannel,
                          names: Iterable[str], timeout: float = APPLY_WAIT_S, present: bool = True) -> None:
    """Until each of ``names`` is in the image (``present``) or out of it, at most ``timeout``
    seconds; then one turn of the loop, so that what the image's change woke runs first."""
    names = list(names)
    await wait_until_shown(image, controller,
                           lambda current: all((n in current.topics) == present for n in names), timeout)
    await asyncio.sleep(0)
