"""A frame whose bytes stop arriving closes its connection; a peer quiet between frames does not.

The bound is ``FRAME_READ_TIMEOUT_S`` from a frame's first byte to its last, shortened here so the
tests run in a fraction of a second. The connection's other frames, and other connections, are
unaffected.
"""

from __future__ import annotations

import orjson
import pytest
import trio
import trio.testing
from structlog.testing import capture_logs

from executor.wire import connection as connection_module
from executor.wire.client import connect
from executor.wire.protocol import encode_frame
from tests.support.inprocess import RunningServer, make_wake

SHORT_TIMEOUT_S = 0.3
"""The read timeout these tests run with (seconds): long against a local send, short to wait."""

WAIT_S = 30.0
"""Hard bound on any wait here (seconds), far beyond the timeout on a loaded machine."""


@pytest.fixture(autouse=True)
def short_frame_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test here runs with the short read timeout."""
    monkeypatch.setattr(connection_module, "FRAME_READ_TIMEOUT_S", SHORT_TIMEOUT_S)


def _half_prefix() -> bytes:
    return encode_frame(make_wake("half"))[:2]


def _half_body() -> bytes:
    frame = encode_frame(make_wake("half"))
    return frame[: len(frame) // 2]


@pytest.mark.parametrize("partial", [_half_prefix, _half_body], ids=["prefix", "body"])
async def test_a_half_sent_frame_closes_its_connection(
    executor_server: RunningServer, partial: object
) -> None:
    """A frame stopped half-way (in its prefix or its body) is dropped and the connection closed
    once the read timeout has passed since its first byte, with the reason in its close line;
    nothing is acked or counted as a frame."""
    assert callable(partial)
    with capture_logs() as logs, trio.fail_after(WAIT_S):
        async with connect(executor_server.socket_path) as client:
            await client.send_raw(partial())
            with pytest.raises((EOFError, trio.BrokenResourceError)):
                await client.receive_ack()
        await trio.testing.wait_all_tasks_blocked()  # the server's close of it has run
    stats = executor_server.server.statistics()
    assert (stats.frames, stats.accepted, stats.connections_open) == (0, 0, 0)
    closed = [entry for entry in logs if entry["event"] == "connection closed"]
    assert [entry["reason"] for entry in closed] == ["frame read timed out"]
    warned = [entry for entry in logs if entry["event"].startswith("incomplete frame")]
    assert len(warned) == 1 and warned[0]["log_level"] == "warning"


async def test_a_peer_quiet_between_frames_stays_connected(
    executor_server: RunningServer,
) -> None:
    """A connection idle for several read timeouts between two whole frames is not closed: the
    bound applies inside a frame only."""
    with trio.fail_after(WAIT_S):
        async with connect(executor_server.socket_path) as client:
            first = await client.request(make_wake("before"))
            await trio.sleep(4 * SHORT_TIMEOUT_S)  # the condition under test: a long idle gap
            second = await client.request(make_wake("after"))
    assert (first.status, second.status) == ("accepted", "accepted")
    assert executor_server.server.statistics().accepted == 2


async def test_a_frame_completed_within_the_timeout_is_served(
    executor_server: RunningServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A frame sent in two parts, the server waiting for the second, is acked like any other."""
    monkeypatch.setattr(connection_module, "FRAME_READ_TIMEOUT_S", WAIT_S)
    frame = encode_frame(make_wake("split"))
    with trio.fail_after(WAIT_S):
        async with connect(executor_server.socket_path) as client:
            await client.send_raw(frame[:3])
            await trio.testing.wait_all_tasks_blocked()  # the server waits mid-prefix
            await client.send_raw(frame[3:])
            ack = await client.receive_ack()
    assert ack.status == "accepted"
    assert orjson.loads(frame[4:])["correlation_id"] == ack.correlation_id == "split"
