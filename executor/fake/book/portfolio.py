"""The fake account's money: its balance and positions, as the published endpoints show them.

:class:`Portfolio` holds the balance (cents), the signed positions per ticker and, per market, the
money figures the published ``MarketPosition`` carries; it answers ``GET /portfolio/balance``
(:meth:`Portfolio.balance`) and ``GET /portfolio/positions`` (:meth:`Portfolio.positions_page`,
a cursor over tickers, small pages so every client follows it). Fills move it through
:meth:`Portfolio.book_fill`. The account (``executor.fake.book.account``) is a portfolio with an
order book; no I/O here.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any, Final

from executor.fake.routes import ErrorReply

DEFAULT_BALANCE_CENTS: Final = 100_000
"""The account's starting balance in cents: $1,000 (DISPATCH.md §9)."""
POSITIONS_PAGE_SIZE: Final = 2
"""Positions per page: small, so every client that reads a few positions follows a cursor."""


@dataclass
class MarketBook:
    """What the account has done in one market, for the published ``MarketPosition`` fields."""

    exchange_index: int = 0
    traded_cents: int = 0
    exposure_cents: int = 0
    fees_cents: int = 0
    updated_s: float = 0.0


class Portfolio:
    """A balance and positions.

    Attributes:
        balance_cents: the balance (settable), debited by fills and their fees.
        balance_updated_s: when the balance last moved (Unix seconds).
        positions: signed contracts per ticker (YES positive), built from fills (settable).
        markets: per ticker, what the positions' money fields are built from.
    """

    def __init__(self, *, balance_cents: int = DEFAULT_BALANCE_CENTS) -> None:
        self.balance_cents = balance_cents
        self.balance_updated_s = time.time()
        self.positions: dict[str, float] = {}
        self.markets: dict[str, MarketBook] = {}

    def book_fill(
        self,
        ticker: str,
        exchange_index: int,
        notional_cents: int,
        fee_cents: int,
        signed_contracts: float,
    ) -> None:
        """Add one fill to the position and its market's money figures, and move the balance's
        time (the caller debits the balance: what a fill costs is the order's business)."""
        self.positions[ticker] = self.positions.get(ticker, 0.0) + signed_contracts
        market = self.markets.setdefault(ticker, MarketBook())
        market.exchange_index = exchange_index
        market.traded_cents += notional_cents
        market.exposure_cents += notional_cents
        market.fees_cents += fee_cents
        market.updated_s = self.balance_updated_s = time.time()

    def balance(self) -> dict[str, Any]:
        """The published ``GetBalanceResponse``: cents, the same as dollars, the portfolio value
        (the cost of the open positions) and when the balance last moved (Unix seconds)."""
        return {
            "balance": self.balance_cents,
            "balance_dollars": dollars(self.balance_cents),
            "portfolio_value": sum(market.exposure_cents for market in self.markets.values()),
            "updated_ts": int(self.balance_updated_s),
        }

    def positions_page(self, query: str) -> dict[str, Any]:
        """One page of positions, from the ``cursor`` in ``query`` (an offset; "" ends)."""
        cursor = dict(part.partition("=")[::2] for part in query.split("&") if part).get("cursor")
        start = 0
        if cursor:
            if not cursor.isdigit():
                raise ErrorReply(400, "invalid_cursor", f"bad cursor {cursor!r}")
            start = int(cursor)
        tickers = sorted(self.positions)
        page = tickers[start : start + POSITIONS_PAGE_SIZE]
        following = start + POSITIONS_PAGE_SIZE
        # An event is listed once, on the page of its first market (tickers sort by event).
        listed = {event_ticker(ticker) for ticker in tickers[:start]}
        events = [event for event in dict.fromkeys(map(event_ticker, page)) if event not in listed]
        return {
            "market_positions": [self._market_position(ticker) for ticker in page],
            "event_positions": [self._event_position(event, tickers) for event in events],
            "cursor": str(following) if following < len(tickers) else "",
        }

    def _market_position(self, ticker: str) -> dict[str, Any]:
        """The published ``MarketPosition`` of one ticker (a position set by hand has no money)."""
        market = self.markets.get(ticker, MarketBook())
        return {
            "ticker": ticker,
            "exchange_index": market.exchange_index,
            "total_traded_dollars": dollars(market.traded_cents),
            "position_fp": f"{self.positions[ticker]:.2f}",
            "market_exposure_dollars": dollars(market.exposure_cents),
            "realized_pnl_dollars": dollars(0),
            "fees_paid_dollars": dollars(market.fees_cents),
            "last_updated_ts": datetime.fromtimestamp(market.updated_s, UTC).isoformat(),
        }

    def _event_position(self, event: str, tickers: list[str]) -> dict[str, Any]:
        """The published ``EventPosition`` of ``event``: its markets' figures added up."""
        members = [ticker for ticker in tickers if event_ticker(ticker) == event]
        markets = [self.markets.get(ticker, MarketBook()) for ticker in members]
        shares = sum(abs(self.positions[ticker]) for ticker in members)
        return {
            "event_ticker": event,
            "total_cost_dollars": dollars(sum(market.traded_cents for market in markets)),
            "total_cost_shares_fp": f"{shares:.2f}",
            "event_exposure_dollars": dollars(sum(market.exposure_cents for market in markets)),
            "realized_pnl_dollars": dollars(0),
            "fees_paid_dollars": dollars(sum(market.fees_cents for market in markets)),
        }


def event_ticker(market_ticker: str) -> str:
    """The event a market belongs to: its ticker up to the last ``-`` (``KX-26JAN01-T1``'s is
    ``KX-26JAN01``); a ticker with no ``-`` is its own event."""
    return market_ticker.rpartition("-")[0] or market_ticker


def dollars(cents: int) -> str:
    """Cents as a published ``FixedPointDollars`` string (``12345`` -> ``"123.4500"``)."""
    return f"{Decimal(cents) / 100:.4f}"


__all__ = [
    "DEFAULT_BALANCE_CENTS",
    "POSITIONS_PAGE_SIZE",
    "MarketBook",
    "Portfolio",
    "dollars",
    "event_ticker",
]
