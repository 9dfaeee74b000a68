"""The stream's state: counts that only add, and a wait that every change ends."""

from __future__ import annotations

import trio
import trio.testing

from executor.exchange.stream.state import StreamState


async def test_a_note_sets_connected_adds_the_counts_and_wakes_every_waiter() -> None:
    """Two watchers wait; nothing wakes them until a note, which wakes both with its values."""
    state = StreamState()
    woken: list[tuple[int, int, int]] = []

    async def watch() -> None:
        await state.wait_changed()
        woken.append((state.connected, state.connects, state.failures))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(watch)
        nursery.start_soon(watch)
        await trio.testing.wait_all_tasks_blocked()
        assert woken == []
        state.note(connected=1, connects=1)
    assert woken == [(1, 1, 0), (1, 1, 0)]
    state.note(connected=0, failures=1)
    state.note(connected=0, connects=1)
    assert (state.connected, state.connects, state.failures, state.reconnects) == (0, 2, 1, 1)


async def test_a_wait_begun_after_a_note_waits_for_the_next(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A change already past does not end a later wait (an hour of simulated time passes)."""
    state = StreamState()
    state.note(connected=1, connects=1)
    with trio.move_on_after(3600) as scope:
        await state.wait_changed()
    assert scope.cancelled_caught
