"""The exchange's own halts in the decision: refused before the risk gate, with a row's request.

Pure: the halts are the plain ``ExchangeHalts`` state, told what the exchange said.
"""

from __future__ import annotations

from executor.config.sizing import SizingConfig
from executor.decide.decision import Decider, Order, OrderRules, Permission, Refusal, RefusalKind
from executor.decide.risk import RiskGate, RiskLimits
from executor.exchange.halts import ExchangeHalts
from tests.decide.test_decision import Account, request, wake

GROUP = "og-1"


class ForbiddenGate(RiskGate):
    """A risk gate that fails the test if it is consulted (no attempt, no notional)."""

    def check(self, *args: object, **kwargs: object) -> str | None:
        raise AssertionError("the risk gate was consulted")


def halted_decider(halts: ExchangeHalts, gate: RiskGate | None = None) -> Decider:
    """A decider with an exchange whose halts are ``halts``."""
    rules = OrderRules(SizingConfig(), Account(), gate, Permission(), halts=halts)
    return Decider(rules=rules)


def test_a_group_the_exchange_triggered_refuses_a_real_fire_naming_the_group() -> None:
    """Triggered on the stream: a real fire is an order-group refusal whose row names the group,
    and the risk gate is never consulted (no attempt, no notional spent)."""
    halts = ExchangeHalts(GROUP)
    halts.hear_group_event("triggered", GROUP)
    gate = ForbiddenGate(RiskLimits(), frozenset({0}))
    decision = halted_decider(halts, gate).decide(wake())
    reason = f"order group {GROUP} triggered by the exchange"
    assert decision == Refusal(RefusalKind.ORDER_GROUP, reason, request(1))


def test_a_reset_heard_lets_real_fires_through_again() -> None:
    """The twin: once the reset is heard, the same wake is an order."""
    halts = ExchangeHalts(GROUP)
    halts.hear_group_event("triggered", GROUP)
    halts.hear_group_event("reset", GROUP)
    assert halted_decider(halts).decide(wake()) == Order(request(1))


def test_a_trading_pause_refuses_a_real_fire_and_not_a_shadow_one() -> None:
    """While trading is paused a real fire is a pause refusal naming the pause and its resume
    time; a shadow fire (nothing is sent) still goes through."""
    halts = ExchangeHalts(GROUP)
    resume = "2026-12-10T10:00:00Z"
    halts.hear_status(exchange_active=True, trading_active=False, resume_time=resume)
    subject = halted_decider(halts, ForbiddenGate(RiskLimits(), frozenset({0})))
    reason = "trading paused by the exchange (estimated resume 2026-12-10T10:00:00Z)"
    assert subject.decide(wake()) == Refusal(RefusalKind.PAUSED, reason, request(1))
    shadow = subject.decide(wake(dry_run=True))
    assert isinstance(shadow, Order) and shadow.shadow


def test_a_pause_that_ended_refuses_nothing() -> None:
    """The twin: trading active again, the wake is an order."""
    halts = ExchangeHalts(GROUP)
    halts.hear_status(exchange_active=False, trading_active=False, resume_time=None)
    halts.hear_status(exchange_active=True, trading_active=True, resume_time=None)
    assert halted_decider(halts).decide(wake()) == Order(request(1))
