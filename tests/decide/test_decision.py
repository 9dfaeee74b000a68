"""The decision's one-value contract: each refusal kind, a real order and its ticket, a shadow.

Pure: no sockets, no telemetry, no tasks; a kill switch file under tmp_path is the only I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from executor.config.sizing import SizingConfig
from executor.decide.decision import (
    AUDIT_TRAIL_UNAVAILABLE,
    PRODUCTION_WITHOUT_ALLOW,
    Decider,
    Order,
    OrderRules,
    Permission,
    Refusal,
    RefusalKind,
    RiskTicket,
)
from executor.decide.order_request import FireRequest, OrderTemplate
from executor.decide.prices import CANNOT_SNAP, OUTSIDE_THE_BOOK, SNAPPED_OUTSIDE_THE_BOOK
from executor.decide.risk import RiskGate, RiskLimits
from executor.runtime.kill_switch import KillSwitch
from executor.wire.protocol import WakeMessage

TICKER = "KXBTCD-26AUG2917-T112750"
TEMPLATE = OrderTemplate(TICKER, "yes", "bid")


def wake(**overrides: Any) -> WakeMessage:
    """A real wake at 0.56 on the cent grid, on the gate's allowed shard 0."""
    fields: dict[str, Any] = {
        "schema_version": 4,
        "correlation_id": "c-1",
        "market_ticker": TICKER,
        "asset": "BTC",
        "direction": "yes",
        "kalshi_price": 0.42,
        "model_probability": 0.48,
        "fee": 0.01,
        "edge": 0.05,
        "decision_ts_ms": 1_787_289_600_123,
        "sent_at_ms": 1_787_289_600_124,
        "sent_at_ns": 412_737_100_845_213,
        "wire_price_yes_dollars": 0.56,
        "exchange_index": 0,
        "correlation_group": "grp",
    }
    fields.update(overrides)
    return WakeMessage(**fields)


@dataclass
class Account:
    """The balance sizing reads (AccountState's one field the decision uses)."""

    balance_dollars: float = 0.0


class ForbiddenKillSwitch(KillSwitch):
    """A kill switch that fails the test if it is consulted."""

    def engaged_reason(self) -> str | None:
        raise AssertionError("the kill switch was consulted")


def engaged(tmp_path: Path, reason: str = "desk closed") -> KillSwitch:
    """An uncached switch, engaged with ``reason``."""
    switch = KillSwitch(tmp_path / "halt", ttl_s=0)
    switch.engage(reason)
    return switch


def decider(
    *,
    kill_switch: KillSwitch | None = None,
    risk: RiskGate | None = None,
    permission: Permission | None = None,
    account: Account | None = None,
) -> Decider:
    """A decider with an exchange: default sizing, the given gate, switch and guard."""
    rules = OrderRules(SizingConfig(), account or Account(), risk, permission or Permission())
    return Decider(kill_switch=kill_switch, rules=rules)


def request(count: int = 1, *, dry_run: bool = False, price: str = "0.5600") -> FireRequest:
    """The request the sample wake becomes."""
    return FireRequest(TEMPLATE, price, count, 0, "c-1", "grp", dry_run)


# --- refusals ---


@pytest.mark.parametrize(
    ("overrides", "why"),
    [
        ({"wire_price_yes_dollars": 1.5}, OUTSIDE_THE_BOOK),
        ({"wire_price_yes_dollars": 0.003}, SNAPPED_OUTSIDE_THE_BOOK),
        ({"wire_price_yes_dollars": 1e308, "dry_run": True}, CANNOT_SNAP),
    ],
    ids=["outside", "snapped-outside", "cannot-snap"],
)
def test_price_refusal_is_one_value_and_consults_nothing_else(
    tmp_path: Path, overrides: dict[str, Any], why: str
) -> None:
    """An untradeable price is a price refusal with no request, before the switch is read."""
    decision = decider(kill_switch=ForbiddenKillSwitch(tmp_path / "halt")).decide(wake(**overrides))
    assert decision == Refusal(RefusalKind.PRICE, why, None)


def test_price_refusal_alone_matches_the_decision() -> None:
    """The price pre-check gives the decision's price refusal, and None for a tradeable price."""
    subject = decider()
    priced_out = wake(wire_price_yes_dollars=0.0)
    assert subject.price_refusal(priced_out) == subject.decide(priced_out)
    assert subject.price_refusal(wake()) is None


def test_volume_refusal_carries_a_request_at_the_fixed_count() -> None:
    """Sized below one contract: a volume refusal whose rejected row has the fixed count."""
    decision = decider().decide(wake(available_size_contracts=0.5))
    reason = "insufficient resting volume: 0.5 contracts at the level"
    assert decision == Refusal(RefusalKind.VOLUME, reason, request(1))


def test_kill_switch_refusal_with_an_exchange_names_the_row_text(tmp_path: Path) -> None:
    """With an exchange, an engaged switch refuses with the rejected row's text and request."""
    decision = decider(kill_switch=engaged(tmp_path)).decide(wake())
    reason = "kill switch engaged: desk closed"
    assert decision == Refusal(RefusalKind.KILL_SWITCH, reason, request(1))


def test_kill_switch_refusal_without_an_exchange_writes_no_row(tmp_path: Path) -> None:
    """Without an exchange the refusal is the switch's own reason and carries no request."""
    decision = Decider(kill_switch=engaged(tmp_path, "ops halt")).decide(wake())
    assert decision == Refusal(RefusalKind.KILL_SWITCH, "ops halt", None)


def test_risk_refusal_carries_the_gate_text_and_the_request() -> None:
    """A risk-gate refusal is "risk gate: <rule>" with the request its row describes."""
    gate = RiskGate(RiskLimits(), frozenset({0}))
    decision = decider(risk=gate).decide(wake(exchange_index=5))
    reason = "risk gate: exchange_index=5 not in allowed [0]"
    assert decision == Refusal(
        RefusalKind.RISK, reason, FireRequest(TEMPLATE, "0.5600", 1, 5, "c-1", "grp", False)
    )


@pytest.mark.parametrize("dry_run", [False, True])
def test_production_without_allow_refuses_with_no_row(dry_run: bool) -> None:
    """Prod without the allow flag refuses real and shadow fires alike, writing no row."""
    decision = decider(permission=Permission("prod", allow_production=False)).decide(
        wake(dry_run=dry_run)
    )
    assert decision == Refusal(RefusalKind.PERMISSION, PRODUCTION_WITHOUT_ALLOW, None)


def test_production_with_allow_is_an_order() -> None:
    """The twin: prod with the allow flag decides an order."""
    decision = decider(permission=Permission("prod", allow_production=True)).decide(wake())
    assert decision == Order(request(1))


def test_the_risk_gate_refuses_before_the_production_guard() -> None:
    """In the specification's order, a fire the gate refuses is a risk refusal even in prod."""
    gate = RiskGate(RiskLimits(), frozenset({0}))
    subject = decider(risk=gate, permission=Permission("prod"))
    decision = subject.decide(wake(exchange_index=5))
    assert isinstance(decision, Refusal) and decision.kind is RefusalKind.RISK


# --- orders ---


def test_real_order_carries_a_ticket_and_leaves_the_gate_unchanged() -> None:
    """A real order the gate allows carries its ticket; deciding records no attempt by itself."""
    roomy = RiskLimits(
        max_position_contracts_per_ticker=100,
        max_position_contracts_per_event=100,
        max_position_contracts_per_correlation_group=100,
    )
    gate = RiskGate(roomy, frozenset({0}))
    subject = decider(risk=gate, account=Account(balance_dollars=1000.0))
    decision = subject.decide(wake())
    # DISPATCH.md §2's example: edge 0.05, price 0.42, balance 1000 -> 30, capped by nothing.
    assert decision == Order(request(30), RiskTicket(gate, TICKER, "yes", 30, 0.56, "grp"))
    assert isinstance(decision, Order) and not decision.shadow
    assert gate.in_flight == 0
    assert subject.decide(wake(correlation_id="c-1")) == decision  # no cooldown yet


def test_the_ticket_keeps_the_gates_books() -> None:
    """The ticket records the attempt and in-flight count, the fill, and the end of the dispatch."""
    limits = RiskLimits(max_position_contracts_per_ticker=3.0, max_concurrent_dispatches=1)
    gate = RiskGate(limits, frozenset({0}))
    subject = decider(risk=gate)
    order = subject.decide(wake())
    assert isinstance(order, Order) and order.ticket is not None
    order.ticket.sending()
    assert gate.in_flight == 1
    busy = subject.decide(wake(direction="no"))
    assert isinstance(busy, Refusal)
    assert busy.reason == "risk gate: 1 dispatches already in flight (max 1)"
    order.ticket.filled(3.0)
    order.ticket.finished()
    assert gate.in_flight == 0
    again = subject.decide(wake())
    assert isinstance(again, Refusal) and again.reason.startswith("risk gate: cooldown")
    other_side = subject.decide(wake(direction="no"))
    assert other_side == Refusal(
        RefusalKind.RISK,
        f"risk gate: position on {TICKER} would reach 4 contracts (max 3)",
        FireRequest(OrderTemplate(TICKER, "no", "ask"), "0.5600", 1, 0, "c-1", "grp", False),
    )


def test_a_zero_or_unknown_fill_changes_no_position() -> None:
    """A ticket fed no fill (None or 0) leaves the position where it was."""
    gate = RiskGate(RiskLimits(max_position_contracts_per_ticker=1.0), frozenset({0}))
    subject = decider(risk=gate)
    order = subject.decide(wake())
    assert isinstance(order, Order) and order.ticket is not None
    order.ticket.filled(None)
    order.ticket.filled(0.0)
    assert subject.decide(wake(direction="no")) == Order(
        FireRequest(OrderTemplate(TICKER, "no", "ask"), "0.5600", 1, 0, "c-1", "grp", False),
        RiskTicket(gate, TICKER, "no", 1, 0.56, "grp"),
    )


def test_risk_disabled_order_has_no_ticket() -> None:
    """With the gate disabled a real order carries no ticket."""
    assert decider(risk=None).decide(wake()) == Order(request(1), None)


def test_shadow_order_skips_switch_and_gate_and_takes_the_fixed_count(tmp_path: Path) -> None:
    """A shadow fire becomes a shadow order at the fixed count, never reading switch or gate."""
    gate = RiskGate(RiskLimits(), frozenset({0}))
    subject = decider(
        kill_switch=ForbiddenKillSwitch(tmp_path / "halt"),
        risk=gate,
        account=Account(balance_dollars=1000.0),
    )
    decision = subject.decide(wake(dry_run=True, exchange_index=5, wire_price_yes_dollars=1.5))
    assert decision == Order(FireRequest(TEMPLATE, "1.5000", 1, 5, "c-1", "grp", True), None)
    assert isinstance(decision, Order) and decision.shadow


def test_no_exchange_order_has_the_configured_count(tmp_path: Path) -> None:
    """Without an exchange a real fire is an order of the configured count, no ticket."""
    switch = KillSwitch(tmp_path / "halt", ttl_s=0)
    assert Decider(kill_switch=switch, contract_count=7).decide(wake()) == Order(request(7))


def test_templates_are_cached_across_decisions() -> None:
    """One template per (market, direction), reused by every decision, refusals included."""
    subject = decider()
    first = subject.decide(wake())
    refused = subject.decide(wake(available_size_contracts=0.5))
    assert isinstance(first, Order) and isinstance(refused, Refusal)
    assert refused.request is not None and refused.request.template is first.request.template
    subject.decide(wake(direction="no"))
    assert subject.templates_built == 2


# --- the audit trail ---


@dataclass
class Audit:
    """Whether order rows can be written (Telemetry's ``audit_available``)."""

    audit_available: bool


def audited(available: bool, **rules: Any) -> Decider:
    """A decider with an exchange whose audit trail is (un)available."""
    kill_switch = rules.pop("kill_switch", None)
    order_rules = OrderRules(
        SizingConfig(), Account(), None, Permission(), audit=Audit(available), **rules
    )
    return Decider(kill_switch=kill_switch, rules=order_rules)


def test_an_unavailable_audit_trail_refuses_a_real_fire_first(tmp_path: Path) -> None:
    """While order rows cannot be written a real fire is refused ("audit trail unavailable"),
    carrying the request its row would have described, before the switch or the volume check."""
    subject = audited(False, kill_switch=ForbiddenKillSwitch(tmp_path / "halt"))
    assert subject.decide(wake()) == Refusal(RefusalKind.AUDIT, AUDIT_TRAIL_UNAVAILABLE, request(1))
    thin = subject.decide(wake(available_size_contracts=0.5))
    assert isinstance(thin, Refusal) and thin.kind is RefusalKind.AUDIT


def test_an_unavailable_audit_trail_lets_shadow_fires_through() -> None:
    """Shadow fires send nothing and write no order row: they go on while the trail is down."""
    decision = audited(False).decide(wake(dry_run=True))
    assert isinstance(decision, Order) and decision.shadow


def test_an_available_audit_trail_changes_nothing() -> None:
    """With the trail available the decision is the one it would be without the check."""
    assert audited(True).decide(wake()) == decider().decide(wake())
