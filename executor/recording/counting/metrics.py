"""``executor serve --metrics HOST:PORT``: a Prometheus text endpoint, off the event loop.

What it costs the hot path: nothing. The counters are the ones the exit lines print, named, typed
and explained by ``executor.recording.counting.counter_list`` (nothing here lists them); a custom
collector calls the two snapshot functions it was given (the server's ``statistics()`` and the
telemetry channel's, both returning the plain values of ``executor.recording.counting.counters``)
when Prometheus scrapes, in the endpoint's own thread. It is handed functions rather than the
server, so this layer never imports the layers above it. The latency histograms and the
orders-by-status counter are fed by the telemetry consumer as rows pass through it (one ``observe``
per row, on the consumer's side of the channel), never by a connection task. The HTTP server is
``prometheus_client``'s own, in its own threads; nothing of it runs on the Trio thread but starting
it and (through a worker thread) stopping it.

Reading the counters from another thread is safe because each is a plain int that only the Trio
thread writes (the GIL makes each read whole); a scrape is not one atomic snapshot across
counters, so two related counters may be one frame apart. The exit lines are exact.
"""

from __future__ import annotations

import gc
import ipaddress
import threading
from collections.abc import Callable, Iterator
from typing import Final
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, Counter, GCCollector, Histogram, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from executor.recording.counting.counter_list import CounterKind
from executor.recording.counting.counters import (
    CounterValues,
    ServerStatistics,
    TelemetryStatistics,
)
from executor.recording.rows import (
    LatencyRow,
    OrderRow,
    OrderRowKind,
    OrderStatus,
    Stage,
    TelemetryRow,
)

NAMESPACE: Final = "trio_executor"

DEFAULT_HOST: Final = "127.0.0.1"
"""Where ``--metrics PORT`` binds: the counters say what the executor trades, so they stay on
this machine unless a host is named."""

HISTOGRAM_STAGES: Final = (
    Stage.WAKE_RECV,
    Stage.DETECT_FIRE,
    Stage.ORDER_BUILD,
    Stage.SIGN,
    Stage.DISPATCH_SEND,
    Stage.DISPATCH_ACK,
    Stage.DISPATCH_WIRE,
    Stage.DETECT_WIRE,
    Stage.STREAM_ROW,
)
"""The stages with a latency histogram: the headline span, the fire path's, the stream's lag."""

LATENCY_BUCKETS_S: Final = (
    0.000_01,
    0.000_025,
    0.000_05,
    0.000_1,
    0.000_25,
    0.000_5,
    0.001,
    0.002_5,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
)
"""Histogram bucket bounds (seconds). wake_recv sits near 30-100 us (docs/performance/notebook/) and
a real dispatch near 10-500 ms, so the buckets run from 10 us to 2.5 s in 1-2.5-5 steps."""

STOP_TIMEOUT_S: Final = 2.0
"""Longest the shutdown waits for the endpoint's thread (seconds); its poll interval is 0.5 s."""


class MetricsSetupError(Exception):
    """The metrics endpoint cannot be bound: a start-up failure, reported in one line like an
    unusable socket (the message names the address and the problem)."""


def parse_metrics_address(text: str) -> tuple[str, int]:
    """``HOST:PORT``, ``[IPv6]:PORT`` or ``PORT`` (on 127.0.0.1) -> ``(host, port)``.

    Raises:
        ValueError: the text is not one of those, or the port is not 0..65535.
    """
    host, separator, port_text = text.rpartition(":")
    if not separator:
        host, port_text = DEFAULT_HOST, text
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
        ipaddress.IPv6Address(host)  # ValueError if it is not one
    elif ":" in host:
        raise ValueError("an IPv6 address goes in brackets, e.g. [::1]:9464")
    if not host:
        raise ValueError("the host is empty (e.g. 127.0.0.1:9464)")
    if not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise ValueError(f"the port must be a number from 0 to 65535, got {port_text!r}")
    return host, int(port_text)


class LatencyHistograms:
    """Per-stage latency histograms, observed by the telemetry consumer (``observe_row``)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        histogram = Histogram(
            "latency_seconds",
            "latency_events durations by stage (as written to the telemetry database)",
            labelnames=("stage",),
            namespace=NAMESPACE,
            buckets=LATENCY_BUCKETS_S,
            registry=registry,
        )
        # One child per stage up front: observe_row then costs a dict lookup and one observe.
        self._children = {stage: histogram.labels(stage=stage.value) for stage in HISTOGRAM_STAGES}

    def observe_row(self, row: LatencyRow) -> None:
        """Count one row's duration in its stage's histogram (other stages are ignored)."""
        child = self._children.get(row.stage)
        if child is not None:
            child.observe(row.duration_ms / 1000)


class OrderStatusCounter:
    """``orders_fired`` rows by final status, counted as the telemetry consumer takes them.

    A resolution or a rejection is counted once, under its status; a ``pending`` row is not (its
    resolution follows), so the sum is every real order that was decided. Exactly the rows the
    audit trail was handed, like the histograms.
    """

    def __init__(self, registry: CollectorRegistry) -> None:
        counter = Counter(
            "orders",
            "orders_fired resolutions and rejections by status (as written to the database)",
            labelnames=("status",),
            namespace=NAMESPACE,
            registry=registry,
        )
        final = [status for status in OrderStatus if status is not OrderStatus.PENDING]
        self._children: dict[OrderStatus, Counter] = {
            status: counter.labels(status=status.value) for status in final
        }

    def observe_row(self, row: OrderRow) -> None:
        """Count one order row under its status (pending rows are ignored)."""
        if row.kind is OrderRowKind.PENDING:
            return
        child = self._children.get(row.status)
        if child is not None:
            child.inc()


class ExecutorCollector(Collector):
    """The exit lines' counters, read from the running server at scrape time.

    ``server_statistics`` and ``telemetry_statistics`` are called from the endpoint's thread; the
    second raises RuntimeError until telemetry has started (those counters are then left out).
    """

    def __init__(
        self,
        server_statistics: Callable[[], ServerStatistics],
        telemetry_statistics: Callable[[], TelemetryStatistics],
    ) -> None:
        self._server_statistics = server_statistics
        self._telemetry_statistics = telemetry_statistics

    def collect(self) -> Iterator[Metric]:
        """Yield the server counters, then the telemetry counters (their lists' metrics)."""
        yield from counter_metrics(self._server_statistics(), NAMESPACE)
        try:
            telemetry = self._telemetry_statistics()
        except RuntimeError:  # not started yet
            return
        yield from counter_metrics(telemetry, f"{NAMESPACE}_telemetry")


def counter_metrics(values: CounterValues, prefix: str) -> Iterator[Metric]:
    """One metric per counter of ``values``' list: its kind, ``prefix_`` and its name, its help."""
    for spec, value in values:
        name = f"{prefix}_{spec.metric_name}"
        if spec.kind is CounterKind.GAUGE:
            yield GaugeMetricFamily(name, spec.help, value=value)
        else:
            yield CounterMetricFamily(name, spec.help, value=value)


class GcSettingsCollector(Collector):
    """The garbage collector's settings at scrape time (``executor serve --gc``): how many objects
    start-up froze and the young generation's threshold, beside ``prometheus_client``'s counts of
    collections."""

    def collect(self) -> Iterator[Metric]:
        """Yield the frozen objects and the young threshold, read from ``gc`` now."""
        yield GaugeMetricFamily(
            f"{NAMESPACE}_gc_frozen_objects",
            "objects frozen at start-up, which collections skip (0 with --gc python)",
            value=gc.get_freeze_count(),
        )
        yield GaugeMetricFamily(
            f"{NAMESPACE}_gc_young_threshold",
            "allocations between young collections (the interpreter's own with --gc python)",
            value=gc.get_threshold()[0],
        )


class MetricsEndpoint:
    """A running ``/metrics`` HTTP server in its own thread."""

    def __init__(self, httpd: WSGIServer, thread: threading.Thread) -> None:
        self._httpd = httpd
        self._thread = thread

    @property
    def address(self) -> tuple[str, int]:
        """The bound host and port (the port the kernel chose, for port 0)."""
        host, port = self._httpd.server_address[:2]
        return str(host), int(port)

    def stop(self) -> None:
        """Stop serving and close the socket. Blocks up to the server's poll interval."""
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(STOP_TIMEOUT_S)


def start_metrics_endpoint(
    address: tuple[str, int],
    server_statistics: Callable[[], ServerStatistics],
    telemetry_statistics: Callable[[], TelemetryStatistics],
) -> tuple[MetricsEndpoint, Callable[[TelemetryRow], None]]:
    """Bind the endpoint and start its thread; return it and the row observer.

    ``server_statistics`` and ``telemetry_statistics`` are what a scrape reports (see
    :class:`ExecutorCollector`).

    Raises:
        MetricsSetupError: the address cannot be bound.
    """
    registry = CollectorRegistry(auto_describe=True)
    histograms = LatencyHistograms(registry)
    orders = OrderStatusCounter(registry)
    registry.register(ExecutorCollector(server_statistics, telemetry_statistics))
    # The interpreter's collections per generation (``python_gc_*``): a collection pauses the
    # event loop, and ``--gc`` (``executor.runtime.gc_settings``) is meant to keep them rare.
    GCCollector(registry=registry)
    registry.register(GcSettingsCollector())
    host, port = address
    try:
        httpd, thread = start_http_server(port, addr=host, registry=registry)
    except OSError as error:
        raise MetricsSetupError(
            f"cannot serve metrics on {host}:{port}: {error.strerror or error}"
        ) from None

    def observe(row: TelemetryRow) -> None:
        if type(row) is LatencyRow:
            histograms.observe_row(row)
        elif type(row) is OrderRow:
            orders.observe_row(row)

    return MetricsEndpoint(httpd, thread), observe


__all__ = [
    "DEFAULT_HOST",
    "ExecutorCollector",
    "GcSettingsCollector",
    "LatencyHistograms",
    "MetricsEndpoint",
    "MetricsSetupError",
    "counter_metrics",
    "parse_metrics_address",
    "start_metrics_endpoint",
]
