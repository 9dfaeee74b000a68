"""The path breakdown: a real fire's stamps cut into segments that add up to its detect_wire."""

from __future__ import annotations

import tempfile
from pathlib import Path

import orjson

from bench.clients.fire import read_client_stamps, write_client_stamps
from bench.reports.fire_path import breakdown_lines
from bench.scenarios.fire import PATH_SPANS, StageRow, series_of
from bench.scenarios.fire_path import SEGMENTS, segments_of
from executor.clock import clock_domain
from executor.exchange.messages import OrderStamps
from executor.exchange.orders.stages import PATH_STAMPS, FireStamps, PerfToWall, path_us, stage_rows
from tests.support.inprocess import make_wake

_ALL_STAMPS = {name: float(10 * (index + 3)) for index, name in enumerate(PATH_STAMPS)}
"""read 30, acked 40, ... wire 120 (µs after recv_ns)."""


def test_segments_run_from_stamp_to_stamp_and_add_up_to_the_wire() -> None:
    """Each segment ends at its stamp and starts at the previous one; together they are wire."""
    segments = segments_of(_ALL_STAMPS, (5.0, 12.0))
    assert segments is not None
    assert list(segments) == [segment for segment, _ in SEGMENTS]
    assert segments["client_build"] == 5.0 and segments["client_write"] == 7.0
    assert segments["transit_read"] == 18.0  # written at 12, read at 30
    assert segments["write"] == 10.0  # sent 110 -> wire 120
    assert sum(segments.values()) == _ALL_STAMPS["wire"]


def test_a_missing_stamp_gives_no_segments() -> None:
    """Without every stamp (or the client's) the segments could not add up: none are made."""
    partial = {name: value for name, value in _ALL_STAMPS.items() if name != "decided"}
    assert segments_of(partial, (5.0, 12.0)) is None
    assert segments_of(_ALL_STAMPS, None) is None
    assert segments_of(_ALL_STAMPS, (5.0, 12.0)) is not None  # the twin: all there


def test_the_detect_wire_row_carries_the_path_in_us_after_recv() -> None:
    """detect_wire's metadata holds each reached stamp as µs after recv_ns; other rows do not."""
    order = OrderStamps(
        sign_start_ns=2_000_000, sign_end_ns=2_010_000, sent_ns=2_020_000, wire_ns=2_120_000
    )
    stamps = FireStamps(
        build_start_ns=1_900_000, build_end_ns=1_950_000, order=order, read_ns=1_500_000
    )
    stamps.acked_ns, stamps.fire_ns = 1_520_000, 1_600_000
    wake = make_wake(recv_ns=1_000_000, clock_domain=clock_domain())
    rows = {r.stage.value: r for r in stage_rows(wake, stamps, PerfToWall(), clock_domain())}
    metadata = orjson.loads(rows["detect_wire"].metadata_json or "")
    assert metadata["dry_run"] is False
    assert metadata["path_us"] == {
        "read": 500.0,
        "acked": 520.0,
        "fire": 600.0,
        "build": 900.0,
        "built": 950.0,
        "sign": 1000.0,
        "signed": 1010.0,
        "sent": 1020.0,
        "wire": 1120.0,
    }  # "decided" was never stamped, so it is absent
    assert rows["dispatch_wire"].metadata_json == '{"dry_run": false}'
    assert path_us(wake, stamps)["wire"] == rows["detect_wire"].duration_ms * 1000


def test_client_stamps_round_trip_through_their_file() -> None:
    """What the fire client writes (µs after recv_ns) is what the harness reads back."""
    with tempfile.TemporaryDirectory() as directory:
        path = str(Path(directory) / "stamps.csv")
        write_client_stamps(path, {"fire-real-000001": (1_000_000, 1_044_500, 1_055_000)})
        assert read_client_stamps(path) == {"fire-real-000001": (44.5, 55.0)}


def test_series_and_table_come_from_rows_with_paths_and_client_stamps() -> None:
    """A detect_wire row with a path and client stamps gives one sample per segment and a table."""
    row = StageRow("real", "detect_wire", 120.0, False, "a", dict(_ALL_STAMPS))
    series = series_of([row], 1, "trio", 0, {"a": (5.0, 12.0)})
    by_span = {item.span: item.samples_us for item in series}
    assert set(PATH_SPANS) <= set(by_span)
    assert sum(by_span[span][0] for span in PATH_SPANS) == 120.0
    assert not {s.span for s in series_of([row], 1, "trio", 0)} & set(PATH_SPANS)  # no client
    lines = breakdown_lines(series)
    assert any("trio fire:real (1 fires)" in line for line in lines)
    assert any("sum of means" in line and "120.0" in line for line in lines)
