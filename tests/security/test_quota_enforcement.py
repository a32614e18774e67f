"""The broker's client quotas around its handlers (broker/quotas.py), as Kafka's
ClientQuotaManager and KIP-219 enforce them: the answer carries throttle_time_ms at once and the
connection's next request waits it out; other clients are not touched; a replica's fetch is never
throttled; a throttled fetch answers no records; request_percentage counts the handler's own time."""
import asyncio
import contextvars
import time

from broker.quotas import BrokerQuotas
from metadata.image import MetadataImage
from protocol import messages as M
from protocol.context import KafkaPrincipal, RequestContext, Session
from protocol.dispatch import Api, Deferred, resolve
from protocol.headers import RequestHeader
from security.quotas import entity

P = M.ProduceRequest
F = M.FetchRequest
R = M.FetchResponse


def ctx(api_key, version, client_id, user="ANONYMOUS"):
    session = Session("PLAINTEXT", client_address="127.0.0.1", principal=KafkaPrincipal("User", user))
    return RequestContext(RequestHeader(api_key, version, 1, client_id, 2), session)


def produce_request(size):
    return P(acks=1, timeout_ms=1000, topic_data=[P.TopicProduceData(name="t", partition_data=[
        P.TopicProduceData.PartitionProduceData(index=0, records=b"x" * size)])])


class Broker:
    """Handlers that answer at once, wrapped by BrokerQuotas over an image of given quotas."""

    def __init__(self, quotas, samples=2, now_ms=None):
        self.image = MetadataImage()
        self.image.client_quotas.update(quotas)
        clock = {} if now_ms is None else {"now_ms": now_ms}
        self.quotas = BrokerQuotas(lambda: self.image, samples=samples, window_seconds=1, **clock)
        self.started: list[float] = []
        self.fetched = b"y" * 5000

        async def produce(c, req):
            self.started.append(asyncio.get_running_loop().time())
            return M.ProduceResponse(responses=[])

        async def fetch(c, req):
            self.max_bytes = req.max_bytes
            topic = R.FetchableTopicResponse(topic="t", partitions=[R.PartitionData(
                partition_index=0, high_watermark=1, records=self.fetched)])
            return R(error_code=0, session_id=7, responses=[topic])

        self.apis = {a.key: a.fn for a in self.quotas.wrap([Api(0, 3, 11, produce), Api(1, 4, 17, fetch)])}

    async def produce(self, client_id, size, user="ANONYMOUS"):
        return await resolve(await self.apis[0](ctx(0, 9, client_id, user), produce_request(size)))

    async def fetch(self, client_id, replica_id=-1, session_epoch=0):
        req = F(replica_id=replica_id, max_wait_ms=0, min_bytes=1, max_bytes=50_000_000, session_id=0,
                session_epoch=session_epoch, topics=[])
        return await self.apis[1](ctx(1, 12, client_id), req)


def test_a_producer_over_its_client_id_quota_is_answered_with_throttle_time_and_its_next_request_waits():
    # The rate's clock stands still (a loaded box must not move the second request into another
    # window); the wait the connection is muted for is the event loop's own.
    broker = Broker({entity(client_id="slow"): {"producer_byte_rate": 10_000.0}}, now_ms=lambda: 1_000_000.0)

    async def run():
        first = await broker.produce("slow", 15_000)  # 15 kB over a 1 s window: 5 kB too many
        answered = asyncio.get_running_loop().time()
        second = await broker.produce("slow", 100)
        return first, answered, second

    first, answered, second = asyncio.run(run())
    assert first.throttle_time_ms == 500  # (15000 - 10000) / 10000 * 1000 ms
    assert broker.started[1] - answered >= 0.5  # the connection's next request waited it out
    assert second.throttle_time_ms > 0


def test_another_client_is_neither_throttled_nor_measured():
    broker = Broker({entity(client_id="slow"): {"producer_byte_rate": 10_000.0}})

    async def run():
        await broker.produce("slow", 15_000)
        # Its own connection: a task of its own context, as each connection's.
        return await asyncio.create_task(broker.produce("fast", 1_000_000), context=contextvars.Context())

    assert asyncio.run(run()).throttle_time_ms == 0
    assert list(broker.quotas.produce._rates) == [("", "slow")]


def test_a_user_quota_applies_to_the_principals_name_and_its_default_to_every_other_user():
    broker = Broker({entity(user="alice"): {"producer_byte_rate": 1_000_000.0},
                     entity(user=None): {"producer_byte_rate": 1000.0}})

    async def run():
        alice = await broker.produce("app", 5000, user="alice")
        bob = await asyncio.create_task(broker.produce("app", 5000, user="bob"),
                                        context=contextvars.Context())
        return alice.throttle_time_ms, bob.throttle_time_ms

    alice, bob = asyncio.run(run())
    assert alice == 0 and bob > 0


def test_without_quotas_nothing_is_measured_or_throttled():
    broker = Broker({})
    response = asyncio.run(broker.produce("any", 10_000_000))
    assert response.throttle_time_ms == 0 and broker.quotas.produce._rates == {}


def test_a_throttled_consumer_fetch_answers_no_records_and_takes_its_bytes_back():
    broker = Broker({entity(client_id="reader"): {"consumer_byte_rate": 2000.0}})
    response = asyncio.run(broker.fetch("reader"))
    assert response.throttle_time_ms > 0
    assert response.responses == [] and response.session_id == 0
    # The fetch asked for no more than one quota window holds: bound * (samples - 1) * window.
    assert broker.max_bytes == 2000
    rate = broker.quotas.fetch._rates[("", "reader")]
    assert rate.measure(int(asyncio.run(_loop_ms()))) == 0


async def _loop_ms():
    return asyncio.get_running_loop().time() * 1000


def test_an_incremental_fetch_session_keeps_its_id_when_throttled():
    broker = Broker({entity(client_id="reader"): {"consumer_byte_rate": 2000.0}})
    response = asyncio.run(broker.fetch("reader", session_epoch=3))
    assert response.throttle_time_ms > 0 and response.session_id == 7


def test_a_replica_fetch_is_never_throttled():
    broker = Broker({entity(client_id=None): {"consumer_byte_rate": 1.0}})
    response = asyncio.run(broker.fetch("broker-2", replica_id=2))
    assert response.throttle_time_ms == 0 and len(response.responses) == 1


def test_a_consumer_fetch_within_its_quota_is_answered_whole():
    broker = Broker({entity(client_id="reader"): {"consumer_byte_rate": 1_000_000.0}})
    response = asyncio.run(broker.fetch("reader"))
    assert response.throttle_time_ms == 0 and len(response.responses) == 1


def request_broker(handler):
    image = MetadataImage()
    image.client_quotas[entity(client_id="busy")] = {"request_percentage": 1.0}
    quotas = BrokerQuotas(lambda: image, samples=2, window_seconds=1)
    return {a.key: a.fn for a in quotas.wrap([Api(3, 0, 12, handler)])}[3]


def test_request_percentage_counts_the_time_the_handler_runs():
    async def busy(c, req):
        end = time.perf_counter() + 0.05  # 5% of a second: five times a 1% quota
        while time.perf_counter() < end:
            pass
        return M.MetadataResponse()

    response = asyncio.run(request_broker(busy)(ctx(3, 12, "busy"), M.MetadataRequest()))
    assert 0 < response.throttle_time_ms <= 1000  # at most one window


def test_request_percentage_does_not_count_the_time_the_handler_waits():
    async def waits(c, req):
        await asyncio.sleep(0.2)
        return M.MetadataResponse()

    response = asyncio.run(request_broker(waits)(ctx(3, 12, "busy"), M.MetadataRequest()))
    assert response.throttle_time_ms == 0


def test_a_deferred_answer_carries_the_throttle_time_once_ready():
    image = MetadataImage()
    image.client_quotas[entity(client_id="slow")] = {"producer_byte_rate": 100.0}
    quotas = BrokerQuotas(lambda: image, samples=2, window_seconds=1)

    async def produce(c, req):
        async def later():
            return M.ProduceResponse(responses=[])
        return Deferred(later())

    fn = quotas.wrap([Api(0, 3, 11, produce)])[0].fn

    async def run():
        answer = await fn(ctx(0, 9, "slow"), produce_request(1000))
        assert isinstance(answer, Deferred)
        return await resolve(answer)

    assert asyncio.run(run()).throttle_time_ms > 0


def test_wrapped_apis_keep_everything_but_their_handler():
    """SaslHandshake v0's bare tokens go to its Api's raw handler: a wrapper that dropped it
    closed every v0 client's connection after its handshake (the live fuzz found it)."""
    async def handler(ctx, req):
        return None

    async def raw(token):
        return b""

    quotas = BrokerQuotas(lambda: MetadataImage())
    apis = [Api(17, 0, 1, handler, raw), Api(36, 0, 2, handler), Api(0, 3, 11, handler)]
    wrapped = quotas.wrap(apis)
    assert [(a.key, a.min_version, a.max_version, a.raw) for a in wrapped] == \
        [(a.key, a.min_version, a.max_version, a.raw) for a in apis]
