"""The broker applying the image's dynamic broker configs without a restart
(broker/dynamic_config.py, Kafka's DynamicBrokerConfig): the cleaner, the replica fetchers, the
running listeners' connection limits and the ip quotas, from ConfigRecords and ClientQuotaRecords
replayed into a real MetadataImage, against a real listener on 127.0.0.1."""
from __future__ import annotations

import asyncio

from broker.dynamic_config import DynamicBrokerConfig
from broker.off_loop import CleanerThread
from metadata.configs import BROKER_RESOURCE
from metadata.image import MetadataImage
from protocol import messages as M
from protocol.net import Server
from replication.fetcher import FetcherConfig, ReplicaFetcherManager
from strom.config import ServerConfig
from tests.broker.test_config import BASE
from tests.engine.test_cleaner_manager import _manager
from tests.limits.echo import echo, served

NODE = 1


def set_config(image: MetadataImage, name: str, value: str | None, broker: str = "") -> None:
    image.replay(image.last_offset + 1, M.ConfigRecord(resource_type=BROKER_RESOURCE, resource_name=broker,
                                                       name=name, value=value))


def set_ip_quota(image: MetadataImage, ip: str | None, rate: float | None) -> None:
    E = M.ClientQuotaRecord.EntityData
    image.replay(image.last_offset + 1, M.ClientQuotaRecord(
        entity=[E(entity_type="ip", entity_name=ip)], key="connection_creation_rate",
                                     value=rate or 0.0, remove=rate is None))


def test_the_cluster_default_then_the_brokers_own_value_reach_the_cleaner_and_the_fetchers(tmp_path):
    config = ServerConfig(BASE)
    manager = _manager(tmp_path)
    try:
        cleaner = CleanerThread(manager, config)
        fetchers = ReplicaFetcherManager(NODE, lambda: 1, lambda _b: None, FetcherConfig(),
                                         lambda _t, _p: None)
        dynamic = DynamicBrokerConfig(config, NODE)
        dynamic.attach(cleaner=cleaner, fetchers=fetchers)
        image = MetadataImage()
        before = cleaner.cleaner
        dynamic.apply(image)
        assert cleaner.cleaner is before, "nothing changed: nothing rebuilt"
        set_config(image, "log.cleaner.io.max.bytes.per.second", "1048576")
        set_config(image, "num.replica.fetchers", "2")
        dynamic.apply(image)
        assert cleaner.cleaner.throttler.rate == 1048576.0
        assert fetchers.config.num_fetchers == 2
        set_config(image, "num.replica.fetchers", "3", broker=str(NODE))
        set_config(image, "num.replica.fetchers", "4", broker="2")
        dynamic.apply(image)
        assert fetchers.config.num_fetchers == 3, "this broker's own value over the cluster default"
        set_config(image, "num.replica.fetchers", None, broker=str(NODE))
        set_config(image, "num.replica.fetchers", None)
        set_config(image, "log.cleaner.backoff.ms", "100")
        dynamic.apply(image)
        assert fetchers.config.num_fetchers == 1, "deleted: the static value again"
        assert cleaner.backoff_s == 0.1
        assert dynamic.current["num.io.threads"] == 8
        set_config(image, "num.io.threads", "16")
        dynamic.apply(image)
        assert dynamic.current["num.io.threads"] == 16, "accepted, kept for the next change's check"
    finally:
        manager.shutdown()


def test_connection_limits_and_ip_quotas_from_the_image_reach_the_running_listener():
    async def scenario():
        config = ServerConfig(BASE)
        server = Server(echo, 1 << 20, limits=config.listener_limits())
        port = server.bind("127.0.0.1", 0)
        server.start()
        dynamic = DynamicBrokerConfig(config, NODE)
        dynamic.attach(server=server)
        image = MetadataImage()
        set_config(image, "max.connections.per.ip", "0")
        set_config(image, "max.connections.per.ip.overrides", "127.0.0.1:1")
        set_config(image, "max.connections", "5")
        dynamic.apply(image)
        assert (server.quotas.max_per_ip, server.quotas.overrides, server.quotas.max_connections) == (
            0, {"127.0.0.1": 1}, 5)
        assert await served(port)
        set_config(image, "max.connections.per.ip.overrides", "127.0.0.1:0")
        dynamic.apply(image)
        assert not await served(port), "no connection from 127.0.0.1 any more"
        set_config(image, "max.connections.per.ip.overrides", None)
        set_config(image, "max.connections.per.ip", None)
        set_ip_quota(image, None, 0.0)
        dynamic.apply(image)
        assert not await served(port), "the default ip entity's rate of 0 closes it unanswered"
        set_ip_quota(image, "127.0.0.1", 100.0)
        dynamic.apply(image)
        assert await served(port), "the ip's own quota over the default"
        await server.close()
    asyncio.run(asyncio.wait_for(scenario(), 20))


def test_what_starts_after_the_image_changed_a_value_gets_the_changed_value(tmp_path):
    config = ServerConfig(BASE)
    manager = _manager(tmp_path)
    try:
        dynamic = DynamicBrokerConfig(config, NODE)
        image = MetadataImage()
        set_config(image, "log.cleaner.backoff.ms", "250")
        set_config(image, "max.connections", "7")
        dynamic.apply(image)  # the broker catching up with the metadata log
        cleaner = CleanerThread(manager, config)
        server = Server(echo, 1 << 20, limits=config.listener_limits())
        dynamic.attach(cleaner=cleaner, server=server)
        assert cleaner.backoff_s == 0.25
        assert server.quotas.max_connections == 7
    finally:
        manager.shutdown()
