"""``strom cluster unregister``, as kafka-cluster.sh unregister: UnregisterBroker (API 64) sent
to a broker, which forwards it to the active controller (or to a controller itself with
--bootstrap-controller). The controller removes the broker's registration, fenced or not, after
moving its leaderships and ISR places (Kafka's rule): decommission a broker once its replicas
are moved off (strom reassign-partitions) and its process is stopped.

    Broker 4 is no longer registered.

An unknown id: BROKER_ID_NOT_REGISTERED; a cluster that does not serve the API: Kafka's
"The target cluster does not support the broker unregistration API.".
"""
from __future__ import annotations

import asyncio
import sys
from typing import Any

from protocol import messages as M
from protocol.errors import Error
from strom.admin_client import Admin, AdminError, error_name

UNREGISTER_BROKER = 64
EXAMPLE = """example:
  strom cluster unregister --bootstrap-server 127.0.0.1:9092 --id 4"""
UNSUPPORTED = "The target cluster does not support the broker unregistration API."


def add_arguments(parser: Any) -> None:
    """The options of ``strom cluster unregister`` on the ``strom cluster`` parser."""
    parser.add_argument("--bootstrap-server", "-b", metavar="HOST:PORT[,...]",
                        help="unregister: the brokers to send the request to")
    parser.add_argument("--bootstrap-controller", "-C", metavar="HOST:PORT[,...]",
                        help="unregister: the controllers to send the request to")
    parser.add_argument("--id", "-i", type=int, metavar="N", dest="broker_id",
                        help="unregister: the ID of the broker to unregister")
    parser.add_argument("--config", "-c", metavar="FILE", dest="command_config",
                        help="unregister: client properties to connect with (security.protocol, sasl.*, ...)")


async def unregister(bootstrap: str, broker_id: int, security: Any = None) -> str:
    """The tool's line for a done unregistration; AdminError with the error otherwise."""
    async with Admin(bootstrap, security, "strom-cluster") as admin:
        served = await admin.served()
        if UNREGISTER_BROKER not in served:
            return UNSUPPORTED
        answer = await admin.request(UNREGISTER_BROKER, 0, 0, M.UnregisterBrokerRequest(broker_id=broker_id))
    if answer.error_code != Error.NONE:
        name = error_name(answer.error_code)
        raise AdminError(f"{name}: {answer.error_message}" if answer.error_message else name)
    return f"Broker {broker_id} is no longer registered."


def run(args: Any) -> int:
    from strom.acls import read_command_config

    bootstrap = args.bootstrap_server or args.bootstrap_controller
    if (args.bootstrap_server is None) == (args.bootstrap_controller is None):
        print("strom cluster unregister: exactly one of --bootstrap-server and --bootstrap-controller "
              "is required", file=sys.stderr)
        return 1
    if args.broker_id is None:
        print("strom cluster unregister: --id is required", file=sys.stderr)
        return 1
    try:
        print(asyncio.run(unregister(bootstrap, args.broker_id, read_command_config(args.command_config))))
    except (AdminError, OSError) as e:
        print(f"strom cluster unregister: {e}", file=sys.stderr)
        return 1
    return 0
