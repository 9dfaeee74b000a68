"""The decision: one call that says what a wake becomes (DISPATCH.md §1 steps 1-5, §4 step 1).

:meth:`Decider.decide` runs the checks in the specification's order and returns ONE value: a
:class:`Refusal` (its kind, its reason, and the request its ``rejected`` row describes when it
writes one) or an :class:`Order` to place, real or shadow. The order in which the checks run:

- with no exchange (SERVICE.md): the price checks, then, for a real fire, the kill switch; the
  order carries the configured contract count;
- with an exchange, a real fire: the price checks, sizing, the audit trail (while order rows
  cannot be written, ``audit trail unavailable``: its would-be ``rejected`` row is logged, not
  written), the volume refusal (below one contract; its row carries the fixed count), the kill
  switch, the exchange's own halts (its trigger of the order group, then a pause), the risk gate,
  the production guard;
- with an exchange, a shadow fire: the snap (a price that cannot be snapped is refused), the fixed
  count, the production guard. Shadow fires never read the kill switch or the risk gate.

Refusals after the snap of a real fire with an exchange carry their request, and their reason is
the ``rejected`` row's ``error_message`` (``kill switch engaged: ...``, ``order group ...
triggered by the exchange``, ``trading paused by the exchange``, ``risk gate: ...``); a price or
production refusal writes no row. Without an exchange the kill switch's reason is its own text.

A real order the risk gate let through carries a :class:`RiskTicket`: the gate's bookkeeping for
that one order, for the side that sends it (attempt and in-flight count before the send, the fill
after it, the in-flight count back down whatever happened). The decision itself changes nothing in
the gate but the pruning of its windows.

Synchronous and without I/O of its own: the kill switch is a view it is handed
(:class:`KillSwitchState`; the file behind it, read with a cache, is ``executor.runtime``'s), and
it reads the wall clock for the risk gate's windows. Nothing here logs or counts: the fire path
does, from the value returned.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Final, Protocol

from executor.clock import wall_ms
from executor.config.sizing import SizingConfig
from executor.decide.order_request import FireRequest
from executor.decide.prices import RequestBuilder, checked_price
from executor.decide.risk import RiskGate
from executor.decide.sizing import contract_count
from executor.wire.protocol import WakeMessage

PRODUCTION_WITHOUT_ALLOW: Final = "environment prod without KALSHI_ALLOW_PRODUCTION_ORDERS"
"""The production guard's reason (DISPATCH.md §4 step 1)."""

AUDIT_TRAIL_UNAVAILABLE: Final = "audit trail unavailable"
"""The reason a real fire is refused while order rows cannot be written: an executor that cannot
record what it sends must not send."""


class RefusalKind(enum.Enum):
    """Why a fire ends before any order; each value is the fire path's counter of that refusal."""

    PRICE = "refused_price"
    VOLUME = "refused_volume"
    KILL_SWITCH = "refused_kill_switch"
    RISK = "refused_risk"
    PERMISSION = "refused_permission"
    AUDIT = "refused_audit"
    ORDER_GROUP = "refused_order_group"
    PAUSED = "refused_paused"


@dataclass(frozen=True, slots=True)
class Refusal:
    """A fire that places nothing.

    Attributes:
        kind: which check refused it.
        reason: the text logged, and the ``rejected`` row's ``error_message`` when there is one.
        request: the order the ``rejected`` row describes; None when the refusal writes no row.
    """

    kind: RefusalKind
    reason: str
    request: FireRequest | None = None


@dataclass(frozen=True, slots=True)
class RiskTicket:
    """The risk gate's bookkeeping of one order it let through, kept by whoever sends the order.

    Call :meth:`sending` just before the request goes out, :meth:`filled` with the response's
    ``fill_count``, and :meth:`finished` whatever happened (also on error and cancellation).
    """

    gate: RiskGate
    ticker: str
    direction: str
    count: int
    price: float
    correlation_group: str

    def sending(self) -> None:
        """Record the attempt (a hung or failed order still counts) and one dispatch in flight."""
        gate = self.gate
        gate.record_attempt(
            self.ticker, self.direction, self.count, self.price, wall_ms(), self.correlation_group
        )
        gate.dispatch_started()

    def filled(self, fill_count: float | None) -> None:
        """Feed a response's fill to the gate's positions (none, zero or less changes nothing)."""
        if fill_count is not None and fill_count > 0:
            self.gate.record_fill(self.ticker, fill_count, wall_ms(), self.correlation_group)

    def finished(self) -> None:
        """One dispatch fewer in flight."""
        self.gate.dispatch_finished()


@dataclass(frozen=True, slots=True)
class Order:
    """A fire that places an order: real, or shadow when ``request.dry_run`` is set.

    Attributes:
        request: what to build and send.
        ticket: the risk gate's bookkeeping for a real order; None for a shadow order, without an
            exchange, or with the gate disabled.
    """

    request: FireRequest
    ticket: RiskTicket | None = None

    @property
    def shadow(self) -> bool:
        """True for a shadow fire, which must place nothing."""
        return self.request.dry_run


Decision = Refusal | Order
"""What :meth:`Decider.decide` returns."""


@dataclass(frozen=True, slots=True)
class Permission:
    """Where orders may go: the production guard (``KALSHI_ENVIRONMENT``, the allow flag)."""

    environment: str = "demo"
    allow_production: bool = False

    def refusal(self) -> str | None:
        """Why no order may be minted at all, or None."""
        if self.environment == "prod" and not self.allow_production:
            return PRODUCTION_WITHOUT_ALLOW
        return None


class AuditTrail(Protocol):
    """Whether order rows can be written now (``executor.telemetry.Telemetry``)."""

    @property
    def audit_available(self) -> bool: ...


class KillSwitchState(Protocol):
    """What the decision reads of the kill switch (``executor.runtime.kill_switch.KillSwitch``, the
    file behind it, keeps the reading cached; the decision never touches the file itself)."""

    def engaged_reason(self) -> str | None:
        """Why the switch is engaged, or None when it is released."""
        ...


class ExchangeHalt(Protocol):
    """What the exchange halts now (``executor.exchange.halts.ExchangeHalts``): plain state."""

    def group_halt(self) -> str | None:
        """Why no order may go while the exchange has the order group triggered, or None."""
        ...

    def trading_pause(self) -> str | None:
        """Why no order may go while the exchange pauses trading, or None."""
        ...


class Balance(Protocol):
    """The account figure sizing reads (``executor.exchange.follow.account.AccountState``)."""

    @property
    def balance_dollars(self) -> float: ...


@dataclass(frozen=True, slots=True)
class OrderRules:
    """What a decision with an exchange consults beyond the price and the kill switch.

    Attributes:
        sizing: the contract-count rule's configuration.
        account: the last polled balance, read at each decision.
        risk: the risk gate, or None when it is disabled.
        permission: the production guard.
        audit: whether order rows can be written; None never refuses.
        halts: what the exchange halts (its trigger of the group, a pause); None never refuses.
    """

    sizing: SizingConfig
    account: Balance
    risk: RiskGate | None
    permission: Permission
    audit: AuditTrail | None = None
    halts: ExchangeHalt | None = None


class Decider:
    """Decides what each wake becomes; holds the template cache.

    Not safe to share between threads; never checkpoints.

    Args:
        kill_switch: consulted for real fires; None means there is no switch.
        contract_count: contracts per order without an exchange.
        rules: sizing, risk gate and production guard with an exchange; None without one.
    """

    def __init__(
        self,
        *,
        kill_switch: KillSwitchState | None = None,
        contract_count: int = 1,
        rules: OrderRules | None = None,
    ) -> None:
        self._kill_switch = kill_switch
        self._contract_count = contract_count
        self._rules = rules
        self._requests = RequestBuilder()

    @property
    def templates_built(self) -> int:
        """How many order templates have been built (one per distinct market and direction)."""
        return self._requests.templates_built

    def price_refusal(self, message: WakeMessage) -> Refusal | None:
        """The price refusal :meth:`decide` would return first, or None (consults nothing else).

        Lets a caller end a priced-out fire without starting a task for the rest of the decision.
        """
        price = checked_price(message)
        return Refusal(RefusalKind.PRICE, price) if isinstance(price, str) else None

    def decide(self, message: WakeMessage) -> Decision:
        """What ``message`` becomes: one refusal or one order (the module docstring's order)."""
        price = checked_price(message)
        if isinstance(price, str):
            return Refusal(RefusalKind.PRICE, price)
        rules = self._rules
        if rules is None:
            if not message.dry_run:
                switch_reason = self._switch_reason()
                if switch_reason is not None:
                    return Refusal(RefusalKind.KILL_SWITCH, switch_reason)
            return Order(self._requests.request(message, price, self._contract_count))
        count = contract_count(
            rules.sizing,
            dry_run=message.dry_run,
            edge=message.edge,
            kalshi_price=message.kalshi_price,
            available_size_contracts=message.available_size_contracts,
            balance_dollars=rules.account.balance_dollars,
        )
        if message.dry_run:
            return self._permitted(rules, Order(self._requests.request(message, price, count)))
        return self._decide_real(message, price, count, rules)

    def _decide_real(
        self, message: WakeMessage, price: float, count: int, rules: OrderRules
    ) -> Decision:
        if rules.audit is not None and not rules.audit.audit_available:
            logged = count if count >= 1 else rules.sizing.fixed_contract_count
            request = self._requests.request(message, price, logged)
            return Refusal(RefusalKind.AUDIT, AUDIT_TRAIL_UNAVAILABLE, request)
        if count < 1:
            available = message.available_size_contracts
            reason = f"insufficient resting volume: {available:g} contracts at the level"
            fixed = rules.sizing.fixed_contract_count
            return Refusal(
                RefusalKind.VOLUME, reason, self._requests.request(message, price, fixed)
            )
        request = self._requests.request(message, price, count)
        switch_reason = self._switch_reason()
        if switch_reason is not None:
            reason = f"kill switch engaged: {switch_reason}"
            return Refusal(RefusalKind.KILL_SWITCH, reason, request)
        halt = _halt_refusal(rules.halts, request)
        if halt is not None:
            return halt
        ticker, direction = message.market_ticker, message.direction
        group = message.correlation_group
        risk = rules.risk
        ticket = None
        if risk is not None:
            risk_reason = risk.check(
                ticker, direction, message.exchange_index, count, price, wall_ms(), group
            )
            if risk_reason is not None:
                return Refusal(RefusalKind.RISK, f"risk gate: {risk_reason}", request)
            ticket = RiskTicket(risk, ticker, direction, count, price, group)
        return self._permitted(rules, Order(request, ticket))

    def _permitted(self, rules: OrderRules, order: Order) -> Decision:
        """``order``, unless the production guard refuses every order (writing no row)."""
        refusal = rules.permission.refusal()
        return order if refusal is None else Refusal(RefusalKind.PERMISSION, refusal)

    def _switch_reason(self) -> str | None:
        return None if self._kill_switch is None else self._kill_switch.engaged_reason()


def _halt_refusal(halts: ExchangeHalt | None, request: FireRequest) -> Refusal | None:
    """The refusal of a fire the exchange would refuse (its group triggered, trading paused)."""
    if halts is None:
        return None
    group = halts.group_halt()
    if group is not None:
        return Refusal(RefusalKind.ORDER_GROUP, group, request)
    pause = halts.trading_pause()
    return None if pause is None else Refusal(RefusalKind.PAUSED, pause, request)


__all__ = [
    "AUDIT_TRAIL_UNAVAILABLE",
    "PRODUCTION_WITHOUT_ALLOW",
    "AuditTrail",
    "Balance",
    "Decider",
    "Decision",
    "ExchangeHalt",
    "KillSwitchState",
    "Order",
    "OrderRules",
    "Permission",
    "Refusal",
    "RefusalKind",
    "RiskTicket",
]
