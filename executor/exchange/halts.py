"""The exchange's own halts: this executor's order group triggered by the exchange, and pauses.

Kalshi can stop our orders by itself: it triggers the order group when more contracts match in
15 s than the group's limit allows (``getting_started/order_groups``), and it pauses trading
(every Thursday 03:00-05:00 ET, and whenever it must: ``getting_started/maintenance_and_pauses``).
Until the group is reset, or trading resumes, every order it gets is refused. :class:`ExchangeHalts`
is what this executor knows of both, heard from four sources:

- the stream's ``order_group_updates`` (``triggered``, ``reset``, ``deleted`` of our group);
- an order's refusal whose body says the group is triggered, or that trading is paused
  (:func:`refusal_kind`: the code the fake exchange answers, and the words Kalshi's messages use);
- ``executor group reset`` run from a shell: it resets the group on the exchange and signals
  this process (:meth:`ExchangeHalts.operator_reset`), the one way back without the stream;
- ``GET /exchange/status`` (``exchange_active``, ``trading_active``,
  ``exchange_estimated_resume_time``), read by ``executor.exchange.status``.

The decision reads it (a plain object, no I/O: ``group_halt`` and ``trading_pause`` give the
refusal's reason or None) and refuses real fires before anything is sent. A group trigger this
executor asked for itself (the kill switch, an audit outage) is not the exchange's halt: the book
guard says so (:meth:`ExchangeHalts.own_trigger`) and resets it itself
(:meth:`ExchangeHalts.own_reset`). Each halt's start and end
is ONE log line (WARNING at the start, saying how to resume; INFO at the end).

Pure state: no I/O, never checkpoints.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Final

import structlog

log = structlog.get_logger()

GROUP_RESUME_HINT: Final = (
    "run `executor group reset --telemetry-db DB` (or engage then release the kill switch)"
)
"""How an operator resumes after the exchange triggered the group (the WARNING line says it)."""

ORDER_GROUP_TRIGGERED_CODE: Final = "order_group_triggered"
"""The error code of an order refused because its group is triggered. Kalshi does not publish its
error codes; this is the fake exchange's, and a refusal's text naming an order group and
``triggered`` is recognised as well."""

PAUSE_WORDS: Final = ("trading_is_paused", "trading_paused", "exchange_paused", "paused")
"""Words of a refusal that says trading (or the exchange) is paused: the status is then re-read.
A guess at Kalshi's unpublished codes; a false match costs one status read."""


GROUP_HALT_TEXT: Final = "order group {order_group_id} triggered by the exchange"
"""A fire refused while the exchange has the group triggered: its ``rejected`` row's text."""
PAUSE_TEXT: Final = "{kind} paused by the exchange"
"""A fire refused in a pause (``trading`` or ``exchange``): its row's text, then the estimated
resume time in parentheses when the status gives one."""
HALT_ROW_PATTERNS: Final = {
    "refused_order_group": "order group % triggered by the exchange",
    "refused_paused": "% paused by the exchange%",
}
"""SQL ``LIKE`` patterns of the two texts above (``executor stats`` counts the rows by them)."""


class RefusalSign(enum.Enum):
    """What an order's refusal says of the exchange's halts."""

    GROUP_TRIGGERED = "group_triggered"
    PAUSED = "paused"


def refusal_kind(text: str) -> RefusalSign | None:
    """What the text of an order's refusal (``"400 code: message"``) says of a halt, or None."""
    lowered = text.lower()
    if ORDER_GROUP_TRIGGERED_CODE in lowered or (
        "order group" in lowered and "triggered" in lowered
    ):
        return RefusalSign.GROUP_TRIGGERED
    if any(word in lowered for word in PAUSE_WORDS):
        return RefusalSign.PAUSED
    return None


class ExchangeHalts:
    """What the exchange halts now, as last heard.

    Args:
        order_group_id: this run's order group, or None (then no group halt is ever heard).
        on_pause_hint: called when an order refusal says trading is paused (re-read the status).

    Attributes:
        group_tripped_by: how the exchange's trigger of the group was heard (``stream``,
            ``order refusal``), or None while the group is not triggered by the exchange.
        exchange_active / trading_active: the exchange's last status (true until heard).
        resume_time: the status's ``exchange_estimated_resume_time`` while paused, or None.
        group_halts / pauses: halts of each kind heard so far.
    """

    def __init__(
        self, order_group_id: str | None, on_pause_hint: Callable[[], None] | None = None
    ) -> None:
        self.order_group_id = order_group_id
        self._on_pause_hint = on_pause_hint
        self.group_tripped_by: str | None = None
        self.exchange_active = True
        self.trading_active = True
        self.resume_time: str | None = None
        self.group_halts = 0
        self.pauses = 0
        self._own_trigger = False

    # ------------------------------------------------------------ what the decision reads

    @property
    def group_tripped(self) -> bool:
        """Whether the exchange triggered the group (and it is not reset yet)."""
        return self.group_tripped_by is not None

    @property
    def paused(self) -> bool:
        """Whether orders cannot be placed now (a trading or an exchange pause)."""
        return not (self.trading_active and self.exchange_active)

    def group_halt(self) -> str | None:
        """The refusal's reason while the exchange has the group triggered, else None."""
        if self.group_tripped_by is None:
            return None
        return GROUP_HALT_TEXT.format(order_group_id=self.order_group_id)

    def trading_pause(self) -> str | None:
        """The refusal's reason while the exchange pauses trading, else None."""
        if not self.paused:
            return None
        kind = "exchange" if not self.exchange_active else "trading"
        until = "" if self.resume_time is None else f" (estimated resume {self.resume_time})"
        return PAUSE_TEXT.format(kind=kind) + until

    # ------------------------------------------------------------ the sources

    def own_trigger(self, asked: bool) -> None:
        """Whether this executor is asking for, or holds, the group's trigger (the book guard:
        True before its trigger, False when the trigger failed): a ``triggered`` heard meanwhile
        is its own, not a halt."""
        self._own_trigger = asked

    def own_reset(self) -> None:
        """This executor reset the group on the exchange: whoever had triggered it, it is open."""
        self._own_trigger = False
        self._group_reset("reset by this executor")

    def operator_reset(self) -> None:
        """The operator reset the group on the exchange (``executor group reset`` signalled this
        process): the exchange's trigger of it is over. A trigger this executor holds itself (the
        kill switch, an audit outage) is the book guard's, untouched here."""
        if self.group_tripped_by is None:
            log.debug("operator's group reset heard: the exchange had not halted the group")
            return
        self.group_tripped_by = None
        log.info(
            "order group reset by the operator: real fires go out again",
            order_group_id=self.order_group_id,
        )

    def hear_group_event(self, event_type: str, order_group_id: str) -> None:
        """An ``order_group_updates`` event; only this run's group's ``triggered``, ``reset`` and
        ``deleted`` change anything."""
        if order_group_id != self.order_group_id:
            return
        if event_type == "triggered" and not self._own_trigger:
            self._group_tripped("stream")
        elif event_type in ("reset", "deleted"):
            self._group_reset(f"{event_type} (heard on the stream)")

    def hear_order_refusal(self, text: str) -> None:
        """An order the exchange refused (the error's text): a triggered group halts at once; a
        pause asks for the status to be re-read."""
        sign = refusal_kind(text)
        if sign is RefusalSign.GROUP_TRIGGERED and self.order_group_id is not None:
            if not self._own_trigger:
                self._group_tripped("order refusal")
        elif sign is RefusalSign.PAUSED and self._on_pause_hint is not None:
            self._on_pause_hint()

    def hear_status(
        self, *, exchange_active: bool, trading_active: bool, resume_time: str | None
    ) -> None:
        """The exchange's status as read: a pause starts or ends here (one line each)."""
        was_paused, was_reason = self.paused, self.trading_pause()
        self.exchange_active, self.trading_active = exchange_active, trading_active
        self.resume_time = resume_time if self.paused else None
        if self.paused and not was_paused:
            self.pauses += 1
            log.warning(
                "the exchange pauses trading: real fires are refused until it resumes",
                reason=self.trading_pause(),
                exchange_active=exchange_active,
                trading_active=trading_active,
                estimated_resume=resume_time,
            )
        elif was_paused and not self.paused:
            log.info("the exchange resumed trading: real fires go out again", was=was_reason)

    def _group_tripped(self, heard_from: str) -> None:
        if self.group_tripped_by is not None:
            return
        self.group_tripped_by = heard_from
        self.group_halts += 1
        log.warning(
            "the exchange triggered this executor's order group: real fires are refused until "
            "it is reset",
            order_group_id=self.order_group_id,
            heard_from=heard_from,
            resume=GROUP_RESUME_HINT,
        )

    def _group_reset(self, how: str) -> None:
        if self.group_tripped_by is None:
            return
        self.group_tripped_by = None
        log.info(
            "order group open again: real fires go out again",
            order_group_id=self.order_group_id,
            how=how,
        )


__all__ = [
    "GROUP_HALT_TEXT",
    "GROUP_RESUME_HINT",
    "HALT_ROW_PATTERNS",
    "ORDER_GROUP_TRIGGERED_CODE",
    "PAUSE_TEXT",
    "PAUSE_WORDS",
    "ExchangeHalts",
    "RefusalSign",
    "refusal_kind",
]
