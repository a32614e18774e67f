"""The dynamic broker configs a controller applies to its own listeners without a restart, as
Kafka's ControllerServer adds its SocketServer to DynamicBrokerConfig's Reconfigurables and
follows its own node id's configs (DynamicConfigPublisher) and the ip entities' client quotas
(DynamicClientQuotaPublisher into its ConnectionQuotas):

| properties                                         | applied to                                |
|----------------------------------------------------|-------------------------------------------|
| max.connections, max.connections.per.ip,           | the controller listeners (security/       |
| max.connections.per.ip.overrides,                  | connection_config.py, as a broker's)      |
| max.connection.creation.rate,                      |                                           |
| listener.name.<l>.max.connections,                 |                                           |
| listener.name.<l>.max.connection.creation.rate,    |                                           |
| client quotas of ip entities                       |                                           |
| (connection_creation_rate)                         |                                           |
| listener.name.<l>.ssl.keystore.*, .truststore.*,   | listener <l>'s TLS context (security/     |
| .ssl.key.password, .ssl.client.auth, ...           | tls.py's TlsReloader, as a broker's)      |

A value is the controller's node id's BROKER config, else the cluster default's, else the static
property, applied from the controller's own image at startup, as it replays the metadata log,
and on each committed change (``publishing``). The listeners themselves (listeners,
advertised.listeners, listener.security.protocol.map) are not reconfigured on a controller, as in
Kafka; its log levels are its BROKER_LOGGER resource (protocol/log_levels.py).

An IncrementalAlterConfigs that names this controller's id is checked against its own listeners
before it is stored (``preprocess``), as a broker checks one naming it before forwarding it
(Kafka's ConfigAdminManager): a listener's new key store that does not load or changes the
certificate's subject or names, and a listener's connection limit not above 0, are refused with
INVALID_REQUEST and the broker's messages; the same stores set again reload their files now.
"""
from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from metadata.configs import (
    BROKER_RESOURCE,
    SET,
    ConfigFailure,
    check_request_shape,
    dynamic_broker_configs,
)
from protocol import messages as M
from protocol.dispatch import Api
from protocol.errors import Error
from security.connection_config import DynamicConnections, check_listener_limits
from security.listener_ssl import listener_ssl_name
from security.tls import SslConfigError, TlsReloader

log = logging.getLogger("strom.controller")

INCREMENTAL_ALTER_CONFIGS = 44


class ControllerDynamicConfig:
    """A controller's listeners under its image's dynamic broker configs (the module doc)."""

    def __init__(self, config: Any, node_id: int):
        self.config = config
        self.node_id = node_id
        self.connections = DynamicConnections(config, node_id)
        self.connections.role = "controller"
        self.tls: TlsReloader | None = None
        self.image: Any = None

    def attach(self, server: Any) -> None:
        """The controller listeners' server, bound: they take what the image holds already."""
        self.connections.attach_server(server)
        names = [lsn.name for lsn in self.config.controller_listeners()]
        self.tls = TlsReloader.of(self.config, names, server.set_ssl_context)
        self.connections.apply_limits()
        if self.image is not None:
            self.apply(self.image)

    def apply(self, image: Any) -> None:
        """A new image: what changed reaches the listeners (a failure is logged; the image goes
        on being replayed)."""
        self.image = image
        try:
            self.connections.apply(image)
            if self.tls is not None:
                self.tls.apply(dynamic_broker_configs(image, self.node_id))
        except Exception:
            log.exception("controller %d: dynamic broker configs not applied", self.node_id)

    def publishing(self, controller: Any) -> Publishing:
        """The raft listener to give the RaftDriver: ``controller`` replays each commit and
        snapshot, then this applies its image."""
        return Publishing(controller, lambda: self.apply(controller.state))

    # ---- a change naming this controller, before it is stored -------------------------------
    def check(self, res: Any, validate_only: bool) -> None:
        """This controller's own BROKER resource ``res``: its listeners' TLS and connection
        limits as the change would make them. Raises ConfigFailure."""
        check_listener_limits(res.configs, [lsn.name for lsn in self.config.controller_listeners()])
        changes = {c.name: c.value if c.config_operation == SET else None for c in res.configs
                   if listener_ssl_name(c.name) is not None}
        if self.tls is None or not changes:
            return
        dynamic = dynamic_broker_configs(self.image, self.node_id) if self.image is not None else {}
        try:
            self.tls.check(changes, dynamic, validate_only)
        except SslConfigError as e:
            raise ConfigFailure(Error.INVALID_REQUEST, str(e)) from None

    def preprocess(self, apis: list[Api]) -> list[Api]:
        """``apis`` with IncrementalAlterConfigs checking a change of this controller's own
        BROKER resource first: a refused one is answered here, the rest go on."""
        return [Api(a.key, a.min_version, a.max_version, self._checked(a.fn), a.raw)
                if a.key == INCREMENTAL_ALTER_CONFIGS else a for a in apis]

    def _checked(self, serve: Callable) -> Callable:
        own = str(self.node_id)

        async def alter(header: Any, req: Any) -> Any:
            R = M.IncrementalAlterConfigsResponse
            malformed = check_request_shape(req.resources, lambda r: r.resource_type == BROKER_RESOURCE)
            refused: dict[int, Any] = {}
            for i, res in enumerate(req.resources):
                if res.resource_type != BROKER_RESOURCE or res.resource_name != own or i in malformed:
                    continue
                try:
                    self.check(res, req.validate_only)
                except ConfigFailure as e:
                    refused[i] = R.AlterConfigsResourceResponse(
                        error_code=e.code, error_message=e.message, resource_type=res.resource_type,
                        resource_name=res.resource_name)
            if not refused:
                return await serve(header, req)
            rest = [r for i, r in enumerate(req.resources) if i not in refused]
            others: list[Any] = []
            if rest:
                others = list((await serve(header, type(req)(resources=rest,
                                                             validate_only=req.validate_only))).responses)
            answers = iter(others)
            return R(responses=[refused[i] if i in refused else next(answers)
                                for i in range(len(req.resources))])
        return alter


class Publishing:
    """A RaftListener (raft/driver.py) that hands each commit and snapshot to ``listener`` and
    then calls ``published``, as Kafka's MetadataLoader hands a new image to its publishers."""

    def __init__(self, listener: Any, published: Callable[[], None]):
        self.listener = listener
        self.published = published

    def handle_commit(self, entries: list) -> None:
        self.listener.handle_commit(entries)
        self.published()

    def handle_snapshot(self, snapshot: Any) -> None:
        self.listener.handle_snapshot(snapshot)
        self.published()

    def handle_leader_change(self, leader_id: int, epoch: int) -> None:
        self.listener.handle_leader_change(leader_id, epoch)
