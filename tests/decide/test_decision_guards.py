"""Decision behaviours a mutation audit found unguarded (issue 15): each test names its defect."""

from __future__ import annotations

from executor.config.sizing import SizingConfig
from executor.decide.decision import Decider, Order, OrderRules, Permission
from executor.exchange.follow.account import AccountState
from tests.support.inprocess import make_wake


def test_sizing_reads_kalshi_price_not_the_wire_price() -> None:
    """Guards against sizing being fed the wire price: edge 0.05 at kalshi_price 0.42 (wire
    0.30) on $1,000 is 30 contracts (the wire price would give 35)."""
    rules = OrderRules(
        sizing=SizingConfig(),
        account=AccountState(balance_dollars=1000.0),
        risk=None,
        permission=Permission(),
    )
    decision = Decider(rules=rules).decide(
        make_wake(
            "sized",
            edge=0.05,
            kalshi_price=0.42,
            wire_price_yes_dollars=0.30,
            model_probability=0.47,
            exchange_index=0,
        )
    )
    assert isinstance(decision, Order)
    assert decision.request.count == 30
