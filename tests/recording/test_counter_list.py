"""One counter list: the exit lines, the metrics and their help all come from it."""

from __future__ import annotations

import re
from types import SimpleNamespace
from typing import Any

import pytest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from executor.fire.outcomes import FIRE_COUNTERS, FireCounters
from executor.fire.path import FirePath
from executor.recording.counting.counter_list import (
    ORDER_PATH_OWNERS,
    SERVER_COUNTERS,
    TELEMETRY_COUNTERS,
    CounterKind,
    CounterSpec,
    Owner,
    names_of,
)
from executor.recording.counting.counters import ServerStatistics, TelemetryStatistics
from executor.recording.counting.metrics import ExecutorCollector, counter_metrics
from executor.trading.counters import order_path_counters
from tests.support.processes import (
    EXTRA_SERVER_KEYS,
    EXTRA_TELEMETRY_KEYS,
    SERVER_KEYS,
    TELEMETRY_KEYS,
)

METRICS_ONLY_SERVER: tuple[str, ...] = (
    "oversized_frames",
    "connections_opened",
    "connections_open",
    "foreign_orders",
)
"""Server counters served as metrics but not printed at exit (as before the list existed)."""

METRICS_ONLY_TELEMETRY: tuple[str, ...] = (
    "channel_depth",
    "batches_committed",
    "intents_unrecorded",
    "order_rows_owed",
)
"""Telemetry metrics not printed at exit (``channel_depth`` is the ``queued`` snapshot)."""

GAUGES: frozenset[str] = frozenset(
    {
        "trio_executor_connections_open",
        "trio_executor_stream_connected",
        "trio_executor_order_group_triggered",
        "trio_executor_orders_open",
        "trio_executor_foreign_orders",
        "trio_executor_trading_paused",
        "trio_executor_telemetry_channel_depth",
        "trio_executor_telemetry_audit_unavailable",
        "trio_executor_telemetry_order_rows_owed",
    }
)
"""The metrics that go up and down, as the endpoint typed them before the list existed."""


class ExtendedStatistics(ServerStatistics):
    """ServerStatistics over the list with two counters added at its end."""

    __slots__ = ()
    counters = (
        *SERVER_COUNTERS,
        CounterSpec("brand_new", "a counter added for the test", Owner.SERVER),
        CounterSpec("brand_new_level", "a gauge added", Owner.SERVER, kind=CounterKind.GAUGE),
    )


def numbered(specs: tuple[CounterSpec, ...]) -> dict[str, int]:
    """A distinct value per counter (its position plus 100), so a swapped pair shows."""
    return {spec.name: 100 + index for index, spec in enumerate(specs)}


def test_the_first_exit_line_is_byte_identical_to_the_pinned_keys() -> None:
    """The first exit line prints the C++ port's keys and this executor's, in the pinned order."""
    values = numbered(SERVER_COUNTERS)
    keys = (*SERVER_KEYS, *EXTRA_SERVER_KEYS)
    expected = " ".join(f"{key}={values[key]}" for key in keys)
    assert ServerStatistics(**values).exit_line() == expected


def test_the_telemetry_exit_line_is_byte_identical_to_the_pinned_keys() -> None:
    """The second exit line is ``telemetry`` and its keys in the pinned order."""
    values = numbered(TELEMETRY_COUNTERS)
    keys = (*TELEMETRY_KEYS, *EXTRA_TELEMETRY_KEYS)
    expected = "telemetry " + " ".join(f"{key}={values[key]}" for key in keys)
    assert TelemetryStatistics(**values).exit_line() == expected


def collected(server: ServerStatistics, telemetry: TelemetryStatistics) -> dict[str, Any]:
    """Every metric the endpoint's collector yields, by name."""
    collector = ExecutorCollector(lambda: server, lambda: telemetry)
    return {metric.name: metric for metric in collector.collect()}


def test_the_metric_names_and_kinds_are_the_ones_served_before() -> None:
    """Every exit-line counter and the metrics-only ones are served, named and typed as before."""
    server = ServerStatistics(**numbered(SERVER_COUNTERS))
    telemetry = TelemetryStatistics(**numbered(TELEMETRY_COUNTERS))
    metrics = collected(server, telemetry)
    server_names = (*SERVER_KEYS, *EXTRA_SERVER_KEYS, *METRICS_ONLY_SERVER)
    telemetry_names = (*TELEMETRY_KEYS, *EXTRA_TELEMETRY_KEYS, *METRICS_ONLY_TELEMETRY)
    expected = {f"trio_executor_{name}" for name in server_names} | {
        f"trio_executor_telemetry_{name}" for name in telemetry_names
    }
    assert set(metrics) == expected
    gauges = {name for name, metric in metrics.items() if metric.type == "gauge"}
    assert gauges == GAUGES
    depth = metrics["trio_executor_telemetry_channel_depth"]
    assert depth.samples[0].value == telemetry["queued"]


def test_each_metric_carries_its_value_and_its_own_help() -> None:
    """A metric's value is its counter's, and its help is the list's line for it."""
    server = ServerStatistics(**numbered(SERVER_COUNTERS))
    for spec in SERVER_COUNTERS:
        metric = collected(server, TelemetryStatistics())[f"trio_executor_{spec.name}"]
        assert metric.samples[0].value == server[spec.name]
        assert metric.documentation == spec.help
    helps = [spec.help for spec in (*SERVER_COUNTERS, *TELEMETRY_COUNTERS)]
    assert all(helps) and len(set(helps)) == len(helps)  # no empty or copied help


def test_a_counter_added_to_the_list_shows_in_the_exit_line_and_the_metrics() -> None:
    """Two entries added to a list reach the exit line's end and the metrics, help and kind."""
    statistics = ExtendedStatistics(brand_new=7, brand_new_level=3, frames=2)
    assert statistics.exit_line().endswith(" trading_paused=0 brand_new=7 brand_new_level=3")
    assert statistics.brand_new == 7
    metrics = {metric.name: metric for metric in counter_metrics(statistics, "p")}
    assert isinstance(metrics["p_brand_new"], CounterMetricFamily)
    assert metrics["p_brand_new"].documentation == "a counter added for the test"
    assert isinstance(metrics["p_brand_new_level"], GaugeMetricFamily)
    assert metrics["p_brand_new_level"].samples[0].value == 3
    assert len(metrics) == len(SERVER_COUNTERS) + 2


def test_a_name_not_in_the_list_is_refused() -> None:
    """A snapshot given a name its list lacks (a typo) raises instead of dropping it."""
    with pytest.raises(TypeError, match="frame"):
        ServerStatistics(frame=1)
    with pytest.raises(AttributeError, match="no counter"):
        _ = ServerStatistics().frame


def test_the_names_are_unique_and_fit_a_metric() -> None:
    """No name is listed twice, and each is a valid Prometheus name part."""
    for specs in (SERVER_COUNTERS, TELEMETRY_COUNTERS):
        names = [spec.metric_name for spec in specs]
        assert len(set(names)) == len(names)
        assert all(re.fullmatch(r"[a-z][a-z0-9_]*", name) for name in names)


def test_the_fire_path_reports_every_counter_it_owns_and_nothing_else() -> None:
    """A fire path without an exchange reports exactly the fire path's and the order path's."""
    counters = FirePath().counters()
    assert tuple(counters.as_dict()) == names_of(FIRE_COUNTERS)
    owners = {spec.owner for spec in FIRE_COUNTERS}
    assert owners == {Owner.FIRE, *ORDER_PATH_OWNERS}
    assert "frames" not in counters.as_dict() and "log_dropped" not in counters.as_dict()
    assert counters == FireCounters()


def order_path_objects(with_stream: bool) -> dict[str, Any]:
    """Stand-ins for the order path's counting objects, each counter a distinct number."""
    limits = SimpleNamespace(write=SimpleNamespace(waits=10), read=SimpleNamespace(waits=11))
    client = SimpleNamespace(presigned=1, signed_inline=2, rest=SimpleNamespace(limits=limits))
    reconciler = SimpleNamespace(reconciled=3, reconcile_failed=4, lookups_unknown=5, orders_open=6)
    stream = SimpleNamespace(
        fill_messages=14, order_messages=15, fills_applied=16, orders_applied=17
    )
    return {
        "client": client,
        "reconciler": reconciler,
        "book": SimpleNamespace(cancels_sent=7, cancels_failed=8, group_triggered=True),
        "adopter": SimpleNamespace(adopted=12, foreign_orders=13),
        "stream": (stream, SimpleNamespace(connected=1, reconnects=18)) if with_stream else None,
    }


def test_the_composition_root_gathers_every_order_path_counter_from_its_owner() -> None:
    """The gathered counters are exactly the order path owners', each read from its object."""
    gathered = order_path_counters(**order_path_objects(with_stream=True))()
    assert set(gathered) == set(names_of(SERVER_COUNTERS, *ORDER_PATH_OWNERS))
    assert gathered == {
        "presigned": 1,
        "signed_inline": 2,
        "reconciled": 3,
        "reconcile_failed": 4,
        "lookups_unknown": 5,
        "orders_open": 6,
        "cancels_sent": 7,
        "cancels_failed": 8,
        "order_group_triggered": 1,
        "write_token_waits": 10,
        "read_token_waits": 11,
        "adopted": 12,
        "foreign_orders": 13,
        "stream_fill_messages": 14,
        "stream_order_messages": 15,
        "stream_fills_applied": 16,
        "stream_orders_applied": 17,
        "stream_connected": 1,
        "stream_reconnects": 18,
        "trading_paused": 0,
    }


def test_without_the_stream_its_counters_are_zero_and_still_reported() -> None:
    """``--stream off``: the stream's counters are 0 but every order path counter is there."""
    gathered = order_path_counters(**order_path_objects(with_stream=False))()
    assert set(gathered) == set(names_of(SERVER_COUNTERS, *ORDER_PATH_OWNERS))
    stream_values = {name: value for name, value in gathered.items() if name.startswith("stream_")}
    assert stream_values == dict.fromkeys(names_of(SERVER_COUNTERS, Owner.STREAM), 0)
    assert gathered["adopted"] == 12
