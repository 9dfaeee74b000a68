"""What the executor does to the exchange's book (issue 22): the order group's limit, the pause
flag every order carries, and the two cancel flags.

Read once at start-up with the rest of the settings (``executor.config.settings`` keeps them in
``ExchangeSettings.book`` and adds the flags to ``executor serve``); here so that module stays
one screenful shorter. Every value is checked here: a bad one is a one-line
:class:`~executor.config.variables.ConfigError` naming the variable.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Final

from executor.config.variables import Variables

DEFAULT_ORDER_GROUP_CONTRACTS_LIMIT: Final = 50
"""Contracts the order group lets match in 15 s before the exchange halts it
(``KALSHI_ORDER_GROUP_CONTRACTS_LIMIT``; 0: no group). Far above what the risk gate's defaults let
through, far below a runaway: a guess to set per account."""
MAX_ORDER_GROUP_CONTRACTS_LIMIT: Final = 1_000_000
"""The largest limit Kalshi allows a group."""


@dataclass(frozen=True, slots=True)
class BookSettings:
    """What the executor does to the exchange's book (issue 22).

    Attributes:
        order_group_contracts_limit: the order group's limit (contracts per 15 s); 0: no group.
        cancel_order_on_pause: sent with every order (the exchange cancels it at a pause).
        cancel_resting_on_engage: the kill switch engaging cancels the resting orders (and
            triggers the group); None: yes exactly when orders rest (good_till_canceled).
        cancel_resting_on_exit: an orderly shutdown cancels the resting orders.
    """

    order_group_contracts_limit: int = DEFAULT_ORDER_GROUP_CONTRACTS_LIMIT
    cancel_order_on_pause: bool = True
    cancel_resting_on_engage: bool | None = None
    cancel_resting_on_exit: bool = False


def add_book_arguments(group: argparse._ArgumentGroup) -> None:
    """Add ``--cancel-resting-on-engage`` and ``--cancel-resting-on-exit`` to ``group``."""
    group.add_argument(
        "--cancel-resting-on-engage",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="when the kill switch engages, cancel this executor's resting orders and trigger "
        "its order group (default: yes when KALSHI_ORDER_TIME_IN_FORCE is good_till_canceled; "
        "with other times in force nothing rests, and the group is triggered anyway)",
    )
    group.add_argument(
        "--cancel-resting-on-exit",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="at an orderly shutdown, cancel this executor's resting orders (default: no; they "
        "stay on the book and the next start follows them)",
    )


def book_settings(values: Variables, flags: tuple[bool | None, bool]) -> BookSettings:
    """The order group's limit and pause flag (variables) and the two cancel flags (``flags``:
    ``--cancel-resting-on-engage``, ``--cancel-resting-on-exit``)."""
    limit = values.number(
        "KALSHI_ORDER_GROUP_CONTRACTS_LIMIT",
        int,
        DEFAULT_ORDER_GROUP_CONTRACTS_LIMIT,
        minimum=0,
        maximum=MAX_ORDER_GROUP_CONTRACTS_LIMIT,
    )
    on_engage, on_exit = flags
    return BookSettings(
        order_group_contracts_limit=limit,
        cancel_order_on_pause=values.flag("KALSHI_ORDER_CANCEL_ON_PAUSE", default=True),
        cancel_resting_on_engage=on_engage,
        cancel_resting_on_exit=on_exit,
    )


__all__ = [
    "DEFAULT_ORDER_GROUP_CONTRACTS_LIMIT",
    "MAX_ORDER_GROUP_CONTRACTS_LIMIT",
    "BookSettings",
    "add_book_arguments",
    "book_settings",
]
