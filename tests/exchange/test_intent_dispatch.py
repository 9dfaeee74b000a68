"""The dispatcher's intent record: written before the order's first byte leaves, the one
file-system call between the decision and the send, and an order whose record cannot be written
is not sent."""

from __future__ import annotations

import ast
import errno
import inspect
import textwrap
from typing import Any

import orjson
import pytest

from executor.decide.risk import RiskGate, RiskLimits
from executor.exchange.messages import INTENT_NOT_RECORDED
from executor.exchange.orders.dispatcher import OrderDispatcher
from executor.exchange.orders.rows import order_row
from executor.fire.path import FireOutcome
from executor.recording.orders.installation import ClientOrderIds
from executor.recording.orders.intent_journal import JournalWriteError
from executor.recording.rows import OrderRow, OrderStatus
from tests.support.inprocess import make_wake
from tests.support.order_fakes import FakePlacer, StartingPlacer, order_harness


@pytest.mark.parametrize(
    ("can_start", "expected"),
    [(True, ["intent", "send", "pending"]), (False, ["intent", "pending", "send"])],
)
async def test_the_intent_is_recorded_before_the_order_is_sent(
    can_start: bool, expected: list[str]
) -> None:
    """The pending row goes to the intent record first, then the transport, then the channel
    (written at once) or the channel, then the transport's task (when it cannot write at once);
    and the record holds what finding the order again needs: its id (with the installation's
    prefix), ticker, side, count, price, the time it was requested and the wake's id."""
    placer = StartingPlacer([], can_start=can_start)
    async with order_harness(placer=placer) as harness:
        harness.orders.dispatcher.ids = ClientOrderIds("0badcafe")
        assert await harness.fire_path.fire(make_wake("c-9", exchange_index=0)) is (
            FireOutcome.FIRED
        )
    kinds = [kind for kind, _ in harness.events if kind in {"intent", "pending", "send"}]
    assert kinds == expected
    (intent,) = harness.sink.intents
    pending = next(row for row in harness.sink.orders if isinstance(row, OrderRow))
    assert intent == pending
    body = orjson.loads(harness.placer.bodies[0])
    assert intent.client_order_id == body["client_order_id"]
    assert intent.client_order_id.startswith("0badcafe") and len(intent.client_order_id) == 32
    assert (intent.ticker, intent.count, intent.price_dollars) == (
        body["ticker"],
        body["count"],
        body["price"],
    )
    assert (intent.outcome_side, intent.correlation_id, intent.status) == (
        "yes",
        "c-9",
        OrderStatus.PENDING,
    )
    assert intent.requested_at_ms > 0


async def test_an_order_whose_intent_cannot_be_recorded_is_not_sent() -> None:
    """A journal that refuses the record (a full disk): nothing reaches the transport, the
    fire is a dispatch error, and the row says ``error`` with why (a definite error: not one
    to reconcile)."""
    async with order_harness(placer=FakePlacer([])) as harness:
        harness.sink.intent_error = JournalWriteError(errno.ENOSPC, "intent journal j: full")
        outcome = await harness.fire_path.fire(make_wake("c-10", exchange_index=0))
    assert outcome is FireOutcome.DISPATCH_ERROR
    assert harness.placer.bodies == []
    (row,) = [row for row in harness.sink.orders if isinstance(row, OrderRow)]
    assert row.status is OrderStatus.ERROR
    assert row.error_message == INTENT_NOT_RECORDED + "[Errno 28] intent journal j: full"
    assert harness.fire_path.counters().dispatch_errors == 1


def _calls_between_the_row_and_the_send(function: object) -> list[str]:
    """The names ``function`` calls after preparing the order's ids and before the body is
    built and the request started (``_build_and_start``), in order."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(function)))  # type: ignore[arg-type]
    calls = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else ast.unparse(func)
            calls.append((node.lineno, node.col_offset, name))
    names = [name for _, _, name in sorted(calls)]
    return names[names.index("prepare") + 1 : names.index("_build_and_start")]


def test_the_intent_record_is_the_only_call_between_decision_and_send() -> None:
    """Between preparing the ids and starting the request the dispatcher reads the clock and
    writes the intent record from its fields: nothing else (not the row, not its queueing, not
    the risk gate); ``_build_and_start`` itself is guarded by tests/exchange/test_order_path.py."""
    between = _calls_between_the_row_and_the_send(OrderDispatcher.begin)
    assert between == ["StartedOrder", "wall_ms", "_record_intent", "pending_record"]


async def test_the_risk_gate_hears_of_the_attempt_right_after_the_write() -> None:
    """The gate's attempt and in-flight count are recorded in the same step as the write, just
    after it: none at the send, one when ``start`` returns, none once the order is done."""
    risk = RiskGate(RiskLimits(), allowed_exchange_indexes=frozenset({0}))
    placer = StartingPlacer([])
    send_now = placer.send_order_now
    in_flight_at_send: list[int] = []

    def counting(body: bytes, stamps: Any) -> Any:
        in_flight_at_send.append(risk.in_flight)
        return send_now(body, stamps)

    placer.send_order_now = counting  # type: ignore[method-assign]
    async with order_harness(placer=placer, risk=risk) as harness:
        rest = harness.fire_path.start(make_wake("c-2", exchange_index=0))
        assert in_flight_at_send == [0] and risk.in_flight == 1
        assert not isinstance(rest, FireOutcome)
        assert await rest() is FireOutcome.FIRED
    assert risk.in_flight == 0


def test_the_check_sees_a_log_call_slipped_in() -> None:
    """The negative twin: an extra call before the send is something the check reports."""

    def slipped(self: OrderDispatcher) -> None:
        prepared = self.prepare()  # type: ignore[call-arg]
        self._record_intent(prepared)  # type: ignore[arg-type]
        log.info("x")  # type: ignore[name-defined]  # noqa: F821
        self.sink.record_pending(order_row())  # type: ignore[call-arg]
        self._build_and_start()  # type: ignore[call-arg]

    assert _calls_between_the_row_and_the_send(slipped) == [
        "_record_intent",
        "info",
        "record_pending",
        "order_row",
    ]
