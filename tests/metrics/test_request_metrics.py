"""The dispatcher's request metrics: each decoded request counted under its API's name and
version (RequestsPerSec), its time to the answer observed (TotalTimeMs), a deferred answer's
when it comes."""
import asyncio

from prometheus_client.parser import text_string_to_metric_families

from protocol import messages as M
from protocol.dispatch import Api, Deferred, Dispatcher
from protocol.headers import encode_request
from protocol.metrics import Registry, RequestMetrics

METADATA_KEY, LIST_GROUPS_KEY = 3, 16


def scrape(registry: Registry) -> dict[tuple[str, tuple], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for f in text_string_to_metric_families(registry.render().decode()) for s in f.samples}


def frame(api_key: int, version: int, body) -> memoryview:
    return memoryview(encode_request(api_key, version, 7, "metrics-test", body))[4:]


def test_each_request_is_counted_per_api_and_version_and_timed_when_answered():
    async def main():
        registry = Registry()
        release = asyncio.get_running_loop().create_future()

        async def metadata(ctx, request):
            return M.MetadataResponse()

        async def list_groups(ctx, request):
            return Deferred(release)  # answered later, by a callback

        dispatcher = Dispatcher([Api(METADATA_KEY, 0, 12, metadata), Api(LIST_GROUPS_KEY, 0, 5, list_groups)],
                                metrics=RequestMetrics(registry, M.API_NAMES))
        await dispatcher.handle(frame(METADATA_KEY, 12, M.MetadataRequest(topics=None)))
        await dispatcher.handle(frame(METADATA_KEY, 9, M.MetadataRequest(topics=None)))
        await dispatcher.handle(frame(METADATA_KEY, 12, M.MetadataRequest(topics=None)))
        deferred = await dispatcher.handle(frame(LIST_GROUPS_KEY, 4, M.ListGroupsRequest()))
        before = scrape(registry)
        release.set_result(M.ListGroupsResponse())
        await deferred.response
        assert await dispatcher.handle(memoryview(b"\x00\x03")) is None  # malformed: not counted
        return before, scrape(registry)

    before, after = asyncio.run(main())
    requests = "kafka_network_requestmetrics_requests_total"
    assert after[(requests, (("request", "Metadata"), ("version", "12")))] == 2
    assert after[(requests, (("request", "Metadata"), ("version", "9")))] == 1
    assert after[(requests, (("request", "ListGroups"), ("version", "4")))] == 1
    assert sum(v for (name, _), v in after.items() if name == requests) == 4
    times = "kafka_network_requestmetrics_totaltimems_count"
    assert after[(times, (("request", "Metadata"),))] == 3
    assert (times, (("request", "ListGroups"),)) not in before  # not answered yet
    assert after[(times, (("request", "ListGroups"),))] == 1


def test_without_metrics_the_dispatcher_answers_the_same():
    async def main():
        async def metadata(ctx, request):
            return M.MetadataResponse()

        plain = Dispatcher([Api(METADATA_KEY, 0, 12, metadata)])
        counted = Dispatcher([Api(METADATA_KEY, 0, 12, metadata)],
                             metrics=RequestMetrics(Registry(), M.API_NAMES))
        request = frame(METADATA_KEY, 12, M.MetadataRequest(topics=None))
        return (b"".join(bytes(p) for p in await plain.handle(request)),
                b"".join(bytes(p) for p in await counted.handle(request)))

    plain, counted = asyncio.run(main())
    assert plain == counted
