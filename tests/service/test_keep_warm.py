"""Keeping the order path warm (``executor.fire.keep_warm``, ``executor serve --keep-warm``).

A rehearsal decides the last real wake again and builds its order again, and must leave no trace a
real fire would: no order sent or signed, no row, no intent record, no id drawn, no risk-gate
attempt, no counter. The task rehearses only after a quiet interval, stops when the server stops,
and stops for good (logged) when a rehearsal raises.
"""

from __future__ import annotations

import dataclasses
import math
import signal
import time
from pathlib import Path

import orjson
import pytest
import structlog
import trio
import trio.testing

from executor.decide.risk import RiskGate, RiskLimits
from executor.fire.keep_warm import KeepWarm
from executor.fire.path import FireOutcome
from executor.recording.orders.installation import ClientOrderIds
from executor.wire.protocol import WakeMessage, encode_frame
from tests.support.inprocess import make_wake
from tests.support.order_fakes import StartingPlacer, order_harness
from tests.support.processes import Spawner, open_client, receive_ack, wait_until_accepting

INTERVAL_S = 0.01


class CountingIds(ClientOrderIds):
    """Client order ids that count every id minted (drawn ahead or taken fresh)."""

    def __init__(self) -> None:
        super().__init__("0badcafe")
        self.minted = 0

    def mint(self) -> str:
        self.minted += 1
        return super().mint()


class Recorder:
    """A fire path stand-in that keeps what each rehearsal was given (or raises)."""

    def __init__(self, error: Exception | None = None) -> None:
        self.rehearsed: list[WakeMessage] = []
        self.error = error

    def rehearse(self, message: WakeMessage) -> None:
        if self.error is not None:
            raise self.error
        self.rehearsed.append(message)


def real(correlation_id: str) -> WakeMessage:
    return make_wake(correlation_id, exchange_index=0)


async def test_a_rehearsal_leaves_no_trace_of_an_order() -> None:
    """Rehearsals after a real fire send, sign and record nothing, draw no id and record no
    risk-gate attempt: with two attempts allowed an hour, the second real fire still passes
    after fifty rehearsals of the first, and the third is refused."""
    placer = StartingPlacer([])
    limits = dataclasses.replace(RiskLimits(), max_attempts_per_hour=2, refire_cooldown_s=0)
    risk = RiskGate(limits, frozenset({0}))
    async with order_harness(placer=placer, risk=risk) as harness:
        ids = CountingIds()
        harness.orders.dispatcher.ids = ids
        assert await harness.fire_path.fire(real("kw-1")) is FireOutcome.FIRED
        events, rows = list(harness.events), list(harness.sink.orders)
        latency, intents = list(harness.sink.latency), list(harness.sink.intents)
        counters, minted = harness.fire_path.counters(), ids.minted
        keep_warm = KeepWarm(INTERVAL_S)
        for _ in range(50):
            keep_warm.rehearse(harness.fire_path, real("kw-1"))
        assert keep_warm.rehearsals == 50 and not keep_warm.failed
        assert (harness.events, harness.sink.orders) == (events, rows)
        assert (harness.sink.latency, harness.sink.intents) == (latency, intents)
        assert harness.fire_path.counters() == counters
        assert ids.minted == minted
        assert risk.in_flight == 0
        assert await harness.fire_path.fire(real("kw-2")) is FireOutcome.FIRED
        assert await harness.fire_path.fire(real("kw-3")) is FireOutcome.REFUSED_RISK
    sent = [orjson.loads(body)["client_order_id"] for body in placer.bodies]
    assert len(sent) == 2 and all(order_id.startswith("0badcafe") for order_id in sent)


async def test_rehearsals_follow_quiet_intervals_with_the_last_real_wake(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Nothing is rehearsed before a real wake, or while real wakes keep coming; a shadow wake
    is never remembered; once real wakes stop, the last one is rehearsed (as decoded again from
    its own encoding) once per interval; setting ``stopping`` ends the task."""
    keep_warm, recorder, stopping = KeepWarm(INTERVAL_S), Recorder(), trio.Event()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(keep_warm.run, lambda: recorder, stopping)
        await trio.sleep(5 * INTERVAL_S)
        assert recorder.rehearsed == []
        for index in range(10):
            keep_warm.note(real(f"kw-{index}"))
            await trio.sleep(INTERVAL_S / 2)
        assert recorder.rehearsed == []
        keep_warm.note(make_wake("kw-shadow", dry_run=True))
        await trio.sleep(10.5 * INTERVAL_S)
        assert 8 <= len(recorder.rehearsed) <= 10
        assert all(message == real("kw-9") for message in recorder.rehearsed)
        stopping.set()
    assert keep_warm.rehearsals == len(recorder.rehearsed)


async def test_a_failing_rehearsal_is_logged_once_and_stops_the_rehearsals(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A rehearsal that raises is logged with the wake it rehearsed, and the task ends."""
    keep_warm = KeepWarm(INTERVAL_S)
    keep_warm.note(real("kw-bad"))
    with structlog.testing.capture_logs() as logs:
        await keep_warm.run(lambda: Recorder(RuntimeError("boom")), trio.Event())
    assert keep_warm.failed and keep_warm.rehearsals == 0 and not keep_warm.enabled
    failures = [entry for entry in logs if entry["log_level"] == "error"]
    assert [entry["correlation_id"] for entry in failures] == ["kw-bad"]


async def test_an_interval_of_zero_is_off() -> None:
    """0 (the default) never rehearses and its task returns at once; a real wake is not kept."""
    keep_warm = KeepWarm(0.0)
    keep_warm.note(real("kw-off"))
    with trio.fail_after(1):
        await keep_warm.run(Recorder, trio.Event())
    assert not keep_warm.enabled and keep_warm.rehearsals == 0


@pytest.mark.parametrize("interval", [-0.001, math.nan, math.inf])
def test_an_interval_that_is_not_a_finite_non_negative_number_is_refused(interval: float) -> None:
    with pytest.raises(ValueError, match="interval_s"):
        KeepWarm(interval)


def test_served_executor_keeps_warm_after_a_real_wake(spawner: Spawner, short_dir: Path) -> None:
    """``executor serve --keep-warm`` rehearses the real wake it served (without an exchange:
    its decision) and says how many times when it stops; an executor without the flag logs
    neither line."""
    for extra in ((), ("--keep-warm", "0.002")):
        directory = short_dir / ("on" if extra else "off")
        directory.mkdir()
        socket_path = directory / "x.sock"
        executor = spawner.serve(socket_path, directory / "t.db", "--log-format", "json", *extra)
        wait_until_accepting(executor, socket_path)
        with open_client(socket_path) as sock:
            sock.sendall(encode_frame(real("kw-served")))
            assert receive_ack(sock).status == "accepted"
            time.sleep(0.2)
        executor.signal(signal.SIGTERM)
        assert executor.wait() == 0
        events = [orjson.loads(line) for line in executor.stderr_lines() if line.startswith("{")]
        stopped = [event for event in events if event["event"] == "keep-warm stopped"]
        if not extra:
            assert stopped == []
            continue
        [started] = [event for event in events if event["event"] == "keeping the order path warm"]
        assert started["interval_s"] == 0.002
        assert stopped[0]["rehearsals"] > 0 and stopped[0]["failed"] is False
