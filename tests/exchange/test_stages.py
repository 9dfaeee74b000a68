"""Stage rows to the wire (dispatch_wire, detect_wire) and the sign row's kind of signature."""

from __future__ import annotations

import orjson

from executor.clock import clock_domain
from executor.exchange.messages import OrderStamps
from executor.exchange.orders.stages import FireStamps, PerfToWall, stage_rows
from executor.wire.protocol import WakeMessage
from tests.support.inprocess import make_wake


def _stamps(*, wire: int | None, signature: str | None = None) -> FireStamps:
    order = OrderStamps(
        sign_start_ns=2_000_000,
        sign_end_ns=3_000_000,
        sent_ns=4_000_000,
        ack_ns=9_000_000,
        wire_ns=wire,
        signature=signature,
    )
    return FireStamps(build_start_ns=1_000_000, build_end_ns=1_500_000, order=order)


def _wake(domain: str | None = None) -> WakeMessage:
    return make_wake(recv_ns=500_000, clock_domain=clock_domain() if domain is None else domain)


def test_the_wire_stamp_gives_dispatch_wire_and_detect_wire() -> None:
    """dispatch_wire is sent -> wire and detect_wire recv -> wire; detect_fire keeps sent."""
    rows = {
        r.stage.value: r
        for r in stage_rows(_wake(), _stamps(wire=4_250_000), PerfToWall(), clock_domain())
    }
    assert rows["dispatch_wire"].duration_ms == 0.25
    assert rows["detect_wire"].duration_ms == 3.75
    assert rows["detect_fire"].duration_ms == 3.5
    assert rows["dispatch_ack"].duration_ms == 5.0


def test_no_wire_stamp_no_wire_rows() -> None:
    """A fire whose request never reached the wire (a shadow fire) has neither wire row."""
    stages = [
        r.stage.value for r in stage_rows(_wake(), _stamps(wire=None), PerfToWall(), clock_domain())
    ]
    assert "dispatch_wire" not in stages and "detect_wire" not in stages


def test_detect_wire_follows_detect_fires_clock_rule() -> None:
    """A wake from another clock domain gets dispatch_wire but neither detect row."""
    rows = stage_rows(_wake("elsewhere:0"), _stamps(wire=4_100_000), PerfToWall(), clock_domain())
    stages = [r.stage.value for r in rows]
    assert "dispatch_wire" in stages
    assert "detect_wire" not in stages and "detect_fire" not in stages


def test_the_sign_row_says_how_the_signature_was_had() -> None:
    """The sign row's metadata names presigned or inline; the other rows keep the plain spelling."""
    for how in ("presigned", "inline"):
        rows = {
            r.stage.value: r
            for r in stage_rows(
                _wake(), _stamps(wire=5_000_000, signature=how), PerfToWall(), clock_domain()
            )
        }
        assert orjson.loads(rows["sign"].metadata_json or "") == {
            "dry_run": False,
            "signature": how,
        }
        assert rows["dispatch_wire"].metadata_json == '{"dry_run": false}'


def test_the_engine_time_splits_the_round_trip_and_estimates_the_offset() -> None:
    """wire at T, the engine's ts_ms 10 ms after, the ack 4 ms later: wire_engine 10, engine_ack
    4 (summing to the round trip), offset (10 - 4) / 2 = 3 ms within 7 + 1 ms."""
    clock = PerfToWall()
    clock.offset_ns = 0  # perf ns are wall ns here, so the engine's time is easy to place
    stamps = _stamps(wire=1_000_000_000_000_000)
    stamps.order.ack_ns = stamps.order.wire_ns + 14_000_000  # type: ignore[operator]
    stamps.engine_ts_ms = 1_000_000_000 + 10
    rows = {r.stage.value: r for r in stage_rows(_wake(), stamps, clock, clock_domain())}
    assert rows["wire_engine"].duration_ms == 10.0
    assert rows["engine_ack"].duration_ms == 4.0
    assert rows["wire_engine"].ended_at_ms == rows["engine_ack"].started_at_ms == 1_000_000_010
    assert orjson.loads(rows["engine_ack"].metadata_json or "") == {
        "dry_run": False,
        "engine_offset_ms": 3.0,
        "engine_offset_within_ms": 8.0,
    }


def test_no_engine_time_no_engine_rows() -> None:
    """The negative twin: an answer without ts_ms (or no ack) gives neither engine row."""
    stamps = _stamps(wire=4_250_000)
    stages = [r.stage.value for r in stage_rows(_wake(), stamps, PerfToWall(), clock_domain())]
    assert "wire_engine" not in stages and "engine_ack" not in stages
