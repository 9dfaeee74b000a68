"""executor.clock: the clock domain string, the boot-time estimate and the stamps."""

from __future__ import annotations

import re
import socket
import time
import types

import pytest

from executor import clock


def _fake_time(wall_s: float, monotonic_s: float) -> types.SimpleNamespace:
    """A stand-in for the ``time`` module with fixed wall and monotonic readings."""
    return types.SimpleNamespace(time=lambda: wall_s, monotonic=lambda: monotonic_s)


def test_clock_domain_is_hostname_colon_quantised_boot() -> None:
    """clock_domain() is "<hostname>:<boot>" with boot a whole multiple of 60 seconds."""
    domain = clock.clock_domain()
    match = re.fullmatch(r"(.*):(-?[0-9]+)", domain)
    assert match is not None, domain
    assert match.group(1) == socket.gethostname()
    assert int(match.group(2)) % 60 == 0


def test_clock_domain_boot_agrees_with_a_fresh_estimate() -> None:
    """The domain's boot is within one quantum of a boot estimate taken now."""
    boot = int(clock.clock_domain().rsplit(":", 1)[1])
    assert abs(boot - clock.estimated_boot_s()) <= clock.BOOT_QUANTUM_S


def test_clock_domain_is_stable_across_calls() -> None:
    """Every call in a process returns the same string (computed once)."""
    assert len({clock.clock_domain() for _ in range(100)}) == 1


def test_clock_domain_is_computed_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A later change of hostname or clocks does not change the process's domain."""
    first = clock.clock_domain()
    monkeypatch.setattr(socket, "gethostname", lambda: "elsewhere")
    monkeypatch.setattr(clock, "time", _fake_time(10_000_000.0, 1.0))
    assert clock.clock_domain() == first


def test_clock_domain_from_given_readings(monkeypatch: pytest.MonkeyPatch) -> None:
    """Uncached, the domain is built from gethostname() and the quantised boot estimate."""
    monkeypatch.setattr(socket, "gethostname", lambda: "Ivory.local")
    monkeypatch.setattr(clock, "time", _fake_time(1787289119.9, 0.5))
    assert clock.clock_domain.__wrapped__() == "Ivory.local:1787289060"


@pytest.mark.parametrize(
    ("wall_s", "monotonic_s", "boot_s"),
    [
        (1787289119.9, 0.5, 1787289060),
        (1787289060.0, 0.0, 1787289060),
        (1787289059.999, 0.0, 1787289000),
        (1787289120.0, 0.0, 1787289120),
        (1787289600.0, 600.0, 1787289000),
        (1787289600.0, 570.25, 1787289000),
    ],
)
def test_estimated_boot_rounds_down_to_a_minute(
    monkeypatch: pytest.MonkeyPatch, wall_s: float, monotonic_s: float, boot_s: int
) -> None:
    """Boot is (wall - monotonic) rounded down, never up or to nearest, to a multiple of 60."""
    monkeypatch.setattr(clock, "time", _fake_time(wall_s, monotonic_s))
    estimate = clock.estimated_boot_s()
    assert estimate == boot_s
    assert type(estimate) is int


def test_estimated_boot_is_a_multiple_of_sixty() -> None:
    """On the real clocks the estimate is a whole number of minutes in the past."""
    estimate = clock.estimated_boot_s()
    assert estimate % 60 == 0
    assert estimate <= time.time()


def test_boot_jitter_within_a_minute_gives_one_domain(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two readings a few milliseconds apart (as two processes see) agree on the boot."""
    monkeypatch.setattr(clock, "time", _fake_time(1787289100.000, 40.0))
    first = clock.estimated_boot_s()
    monkeypatch.setattr(clock, "time", _fake_time(1787289100.004, 40.001))
    assert clock.estimated_boot_s() == first


def test_stamp_ns_is_the_perf_counter() -> None:
    """Durations and recv_ns use time.perf_counter_ns, the poller's clock."""
    assert clock.stamp_ns is time.perf_counter_ns


def test_wall_ms_lies_between_two_wall_readings() -> None:
    """wall_ms() is epoch milliseconds, taken from the wall clock."""
    before = time.time_ns() // 1_000_000
    stamped = clock.wall_ms()
    after = time.time_ns() // 1_000_000
    assert before <= stamped <= after
    assert type(stamped) is int
