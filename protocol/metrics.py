"""A process's metrics: counted in plain integers on the event loop, rendered on scrape.

The hot path only adds to Python ints, lists and dicts the event loop owns: no lock, no
prometheus_client object, no string built. A scrape of ``/metrics`` (served on the same loop,
``serve``) walks the registry through a prometheus_client custom Collector and renders
Prometheus' text format, so rendering costs nothing between scrapes and never races a counter.

Names are Kafka's MBeans as the Prometheus JMX exporter renders them with the rules Kafka users
run (Strimzi's ``kafka-metrics-config.yml``, ``lowercaseOutputName``), so existing dashboards and
alerts work unchanged: a meter's Count (``kafka.server:type=BrokerTopicMetrics,
name=MessagesInPerSec,topic=T``) is the counter ``kafka_server_brokertopicmetrics_messagesin_total
{topic="T"}`` (``PerSec`` dropped, ``_total`` added, the MBean's other keys as labels); a gauge's
Value (``kafka.server:type=ReplicaManager,name=UnderReplicatedPartitions``) is
``kafka_server_replicamanager_underreplicatedpartitions``; a timer or histogram
(``kafka.network:type=RequestMetrics,name=TotalTimeMs,request=Produce``) is a Prometheus
histogram of that name, whose ``_count`` is the exporter's.

A gauge is a function called on scrape (a count of partitions, a purgatory's size), so it
costs nothing until asked.
"""
from __future__ import annotations

import asyncio
import logging
from bisect import bisect_left
from collections.abc import Callable, Iterator
from typing import Any

log = logging.getLogger(__name__)

# Milliseconds: request times, flush times (Kafka's own histograms are in ms).
MS_BUCKETS = (0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1000.0, 2500.0, 5000.0,
              10000.0, 30000.0)

MAX_REQUEST_HEAD_BYTES = 8192  # an HTTP request line and headers; more closes the connection
REQUEST_TIMEOUT_S = 10.0
# The text format ``render`` writes (0.0.4: what every Prometheus reads).
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class Histogram:
    """Observations in fixed buckets (upper bounds, inclusive as Prometheus' ``le``)."""

    __slots__ = ("bounds", "counts", "sum")

    def __init__(self, bounds: tuple[float, ...] = MS_BUCKETS) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)  # the last: above every bound (+Inf)
        self.sum = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.bounds, value)] += 1
        self.sum += value

    @property
    def count(self) -> int:
        return sum(self.counts)

    def cumulative(self) -> list[tuple[str, float]]:
        out, total = [], 0
        for bound, n in zip(self.bounds, self.counts):
            total += n
            out.append((_float_text(bound), total))
        out.append(("+Inf", total + self.counts[-1]))
        return out


def _float_text(value: float) -> str:
    return repr(float(value))


class _Family:
    __slots__ = ("kind", "name", "doc", "labelnames", "values", "fn", "bounds")

    def __init__(self, kind: str, name: str, doc: str, labelnames: tuple[str, ...],
                 fn: Callable[[], Any] | None = None, bounds: tuple[float, ...] = MS_BUCKETS) -> None:
        self.kind, self.name, self.doc, self.labelnames = kind, name, doc, labelnames
        self.values: dict[tuple[str, ...], Any] = {}
        self.fn = fn
        self.bounds = bounds


class Registry:
    """The families of one process. ``counter`` and ``histogram`` hand back the dict that the
    owner adds to (label values tuple -> int, or -> Histogram); ``gauge`` takes a function
    called on scrape that answers a number, or with labels a dict of label values -> number."""

    def __init__(self) -> None:
        self._families: dict[str, _Family] = {}

    def _add(self, family: _Family) -> _Family:
        if family.name in self._families:
            raise ValueError(f"metric {family.name} registered twice")
        self._families[family.name] = family
        return family

    def counter(self, name: str, doc: str, labelnames: tuple[str, ...] = ()) -> dict[tuple[str, ...], int]:
        if not name.endswith("_total"):
            raise ValueError(f"a counter's name ends with _total: {name}")
        family = self._add(_Family("counter", name, doc, labelnames))
        if not labelnames:
            family.values[()] = 0
        return family.values

    def gauge(self, name: str, doc: str, fn: Callable[[], Any], labelnames: tuple[str, ...] = ()) -> None:
        self._add(_Family("gauge", name, doc, labelnames, fn))

    def counter_fn(self, name: str, doc: str, fn: Callable[[], Any],
                   labelnames: tuple[str, ...] = ()) -> None:
        """A counter read on scrape from where it is already counted (``fn`` as a gauge's)."""
        if not name.endswith("_total"):
            raise ValueError(f"a counter's name ends with _total: {name}")
        self._add(_Family("counter", name, doc, labelnames, fn))

    def histogram(self, name: str, doc: str, labelnames: tuple[str, ...] = (),
                  bounds: tuple[float, ...] = MS_BUCKETS) -> dict[tuple[str, ...], Histogram]:
        family = self._add(_Family("histogram", name, doc, labelnames, bounds=bounds))
        if not labelnames:
            family.values[()] = Histogram(bounds)
        return family.values

    def names(self) -> list[str]:
        return list(self._families)

    def collect(self) -> Iterator[Any]:
        """prometheus_client metric families, built now from the counts (a Collector's collect)."""
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

        for f in list(self._families.values()):
            labels = list(f.labelnames)
            if f.kind == "histogram":
                h = HistogramMetricFamily(f.name, f.doc, labels=labels)
                for key, hist in list(f.values.items()):
                    h.add_metric(list(key), hist.cumulative(), hist.sum)
                yield h
                continue
            values = f.values
            if f.fn is not None:
                try:
                    got = f.fn()
                except Exception:  # a gauge that fails leaves the scrape whole
                    log.exception("metric %s failed", f.name)
                    continue
                values = got if labels else {(): got}
            cls = CounterMetricFamily if f.kind == "counter" else GaugeMetricFamily
            family = cls(f.name, f.doc, labels=labels)
            for key, value in list(values.items()):
                family.add_metric(list(key), value)
            yield family

    def render(self) -> bytes:
        """Prometheus' text format of everything registered."""
        from prometheus_client import CollectorRegistry, generate_latest

        registry = CollectorRegistry(auto_describe=False)
        registry.register(_Collector(self))
        return generate_latest(registry)


class _Collector:
    """prometheus_client's custom Collector over a Registry."""

    def __init__(self, registry: Registry) -> None:
        self.registry = registry

    def collect(self) -> Iterator[Any]:
        return self.registry.collect()


# The process's registry: what /metrics renders.
REGISTRY = Registry()


class RequestMetrics:
    """kafka.network:type=RequestMetrics per API: RequestsPerSec (request, version) and
    TotalTimeMs (request), from a request's arrival at the dispatcher to its encoded answer."""

    __slots__ = ("requests", "total_time", "names")

    def __init__(self, registry: Registry, names: dict[int, str]) -> None:
        self.names = names
        self.requests = registry.counter(
            "kafka_network_requestmetrics_requests_total",
            "Requests received (kafka.network:type=RequestMetrics,name=RequestsPerSec)",
            ("request", "version"))
        self.total_time = registry.histogram(
            "kafka_network_requestmetrics_totaltimems",
            "Request total time in ms (kafka.network:type=RequestMetrics,name=TotalTimeMs)", ("request",))

    def received(self, api_key: int, version: int) -> None:
        key = (self.names.get(api_key, str(api_key)), str(version))
        requests = self.requests
        requests[key] = requests.get(key, 0) + 1

    def answered(self, api_key: int, elapsed_ms: float) -> None:
        key = (self.names.get(api_key, str(api_key)),)
        hist = self.total_time.get(key)
        if hist is None:
            hist = self.total_time[key] = Histogram()
        hist.observe(elapsed_ms)


class BrokerTopicStats:
    """kafka.server:type=BrokerTopicMetrics: MessagesInPerSec, BytesInPerSec, BytesOutPerSec per
    topic (the ``topic`` label) and over all topics (no label), as Kafka's BrokerTopicStats."""

    __slots__ = ("topics",)

    def __init__(self, registry: Registry) -> None:
        self.topics: dict[str, list[int]] = {}  # topic -> [messages in, bytes in, bytes out]
        for index, (name, doc) in enumerate((
                ("messagesin", "Messages appended as leader (MessagesInPerSec)"),
                ("bytesin", "Bytes appended as leader (BytesInPerSec)"),
                ("bytesout", "Bytes read by consumers (BytesOutPerSec)"))):
            registry.counter_fn(f"kafka_server_brokertopicmetrics_{name}_total", doc,
                                self._counts(index), ("topic",))

    def _counts(self, index: int) -> Callable[[], dict[tuple[str, ...], int]]:
        """Each topic's (``topic`` label) and all topics' (no label: the MBean without the topic
        key, which the exporter renders under the same name)."""
        def counts() -> dict[tuple[str, ...], int]:
            out: dict[tuple[str, ...], int] = {(): 0}
            for topic, c in list(self.topics.items()):
                out[(topic,)] = c[index]
                out[()] += c[index]
            return out
        return counts

    def appended(self, topic: str, messages: int, size: int) -> None:
        counts = self.topics.get(topic)
        if counts is None:
            counts = self.topics[topic] = [0, 0, 0]
        counts[0] += messages
        counts[1] += size

    def read(self, topic: str, size: int) -> None:
        counts = self.topics.get(topic)
        if counts is None:
            counts = self.topics[topic] = [0, 0, 0]
        counts[2] += size


async def serve(registry: Registry, host: str, port: int) -> asyncio.Server:
    """``GET /metrics`` over HTTP/1.1 on the running loop: the registry rendered at each request
    (404 for any other path, 405 for any other method); one request per connection."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), REQUEST_TIMEOUT_S)
            method, _, rest = head.split(b"\r\n", 1)[0].decode("latin-1").partition(" ")
            path = rest.split(" ", 1)[0].split("?", 1)[0]
            if method not in ("GET", "HEAD"):
                status, body, ctype = "405 Method Not Allowed", b"GET /metrics\n", "text/plain"
            elif path != "/metrics":
                status, body, ctype = "404 Not Found", b"GET /metrics\n", "text/plain"
            else:
                status, body, ctype = "200 OK", registry.render(), CONTENT_TYPE
            writer.write(f"HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}\r\n"
                         f"Connection: close\r\n\r\n".encode("latin-1"))
            if method != "HEAD":
                writer.write(body)
            await writer.drain()
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError, ConnectionError,
                UnicodeDecodeError):
            pass  # a client that went away or sent no HTTP: that connection only
        finally:
            writer.close()

    return await asyncio.start_server(handle, host or None, port, limit=MAX_REQUEST_HEAD_BYTES)
