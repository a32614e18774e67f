"""The controller process: the metadata log, the quorum controller, the controller listener.

``run(config)`` takes the node's parsed configuration (strom.config.ServerConfig) from the
``strom`` command and serves until SIGTERM/SIGINT.
"""
from __future__ import annotations

import asyncio
import logging
import signal

from controller.metadata_log import SingleVoterLog
from controller.quorum_controller import QuorumController
from protocol.dispatch import Dispatcher
from protocol.net import Server

log = logging.getLogger("strom.controller")


async def serve(config, cluster_id: str, ready=None) -> None:
    metadata = SingleVoterLog(config.metadata_log_dir, config.node_id, cluster_id)
    controller = QuorumController(metadata, config.node_id, cluster_id, {
        "num.partitions": config["num.partitions"],
        "default.replication.factor": config["default.replication.factor"],
    })
    dispatcher = Dispatcher(controller.apis())
    server = Server(dispatcher.handle, config["socket.request.max.bytes"])
    for listener in config.controller_listeners():
        port = server.bind(listener.host, listener.port)
        log.info("controller %d listening on %s:%d", config.node_id, listener.host, port)
    server.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    if ready is not None:
        ready()
    try:
        await stop.wait()
    finally:
        await server.close()
        metadata.close()
        log.info("controller %d stopped", config.node_id)


def run(config, cluster_id: str) -> int:
    asyncio.run(serve(config, cluster_id))
    return 0
