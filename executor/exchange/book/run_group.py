"""The order group's lifecycle: one group per installation, found again at each start.

A group used to be created by every start, before the database was even opened, so a start then
refused (a second executor on the file, a corrupt database) left one behind, and a restart loop
left a pile. Now :func:`open_run_group` runs in stage two of the start-up
(``executor.trading.assembly``), once the socket is claimed and the database opened, locked and
proven writable, and it reuses the group the database records for this exchange when the exchange
still has it with the same limit (``GET /portfolio/order_groups/{id}``); only otherwise does it
create one (``POST .../create``), committing its row before any order can go into it, so
``executor killswitch engage`` and ``executor group reset`` run alone find it.

A reused group may stand triggered (the exchange's halt, or an engage made while no executor
ran): it is not reset here, since a restart is no operator's word that the halt is over; the
first order's refusal says so (``executor.exchange.halts``) and the WARNING line says how to
resume.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Protocol

import structlog
import trio

from executor.clock import wall_ms
from executor.config.settings import ExchangeSettings
from executor.config.variables import StartupError
from executor.exchange.book.cancels import BookWriter
from executor.exchange.book.order_group import OrderGroup, create_order_group
from executor.exchange.halts import ExchangeHalts
from executor.exchange.messages import ORDER_GROUPS_PATH, ExchangeError
from executor.exchange.protocols import SignedReader
from executor.recording.database import TelemetryOpenError
from executor.recording.orders.groups import (
    RecordedGroup,
    latest_order_group,
    record_order_group,
)

log = structlog.get_logger()

NOT_FOUND_STATUS = 404
"""The status of a group the exchange no longer has (deleted, or another account's)."""


class GroupClient(BookWriter, SignedReader, Protocol):
    """Signed writes and reads (``executor.exchange.rest.RestClient``)."""


async def still_usable(reader: SignedReader, recorded: RecordedGroup) -> bool:
    """Whether the exchange still has ``recorded`` with its limit (False: create another).

    Raises:
        ExchangeError: the exchange could not be asked (anything but a 404).
    """
    try:
        answer = await reader.get_json(f"{ORDER_GROUPS_PATH}/{recorded.order_group_id}")
    except ExchangeError as error:
        if error.status == NOT_FOUND_STATUS:
            return False
        raise
    try:
        limit = Decimal(str(answer.get("contracts_limit_fp")))
    except InvalidOperation:
        return False
    return limit == recorded.contracts_limit


async def open_run_group(
    exchange: ExchangeSettings,
    client: GroupClient,
    base_url: str,
    telemetry_db: Path,
    on_pause_hint: Callable[[], None] | None = None,
) -> tuple[OrderGroup | None, ExchangeHalts]:
    """This installation's order group (reused or created, recorded) and the halts that follow
    it (``on_pause_hint``: theirs); no group when ``KALSHI_ORDER_GROUP_CONTRACTS_LIMIT`` is 0.

    Raises:
        StartupError: the exchange would not answer or create the group, or the database would
            not take its row.
    """
    limit = exchange.book.order_group_contracts_limit
    if limit <= 0:
        log.warning("no order group (KALSHI_ORDER_GROUP_CONTRACTS_LIMIT=0): no exchange-side halt")
        return None, ExchangeHalts(None, on_pause_hint)
    try:
        recorded = await trio.to_thread.run_sync(latest_order_group, telemetry_db, base_url)
    except sqlite3.Error as error:
        raise StartupError(f"order groups not readable in {telemetry_db}: {error}") from None
    try:
        reusable = recorded is not None and recorded.contracts_limit == limit
        if recorded is not None and reusable and await still_usable(client, recorded):
            log.info("order group reused", order_group_id=recorded.order_group_id, limit=limit)
            halts = ExchangeHalts(recorded.order_group_id, on_pause_hint)
            return OrderGroup(client, recorded.order_group_id, limit, halts), halts
        group_id = await create_order_group(client, limit)
    except ExchangeError as error:
        raise StartupError(f"the exchange would not create an order group: {error}") from None
    log.info("order group created", order_group_id=group_id, contracts_limit=limit)
    row = RecordedGroup(group_id, base_url, limit, wall_ms(), os.getpid())
    try:
        await trio.to_thread.run_sync(record_order_group, telemetry_db, row)
    except (TelemetryOpenError, sqlite3.Error) as error:
        raise StartupError(
            f"order group {group_id} not recorded in {telemetry_db}: {error}"
        ) from None
    halts = ExchangeHalts(group_id, on_pause_hint)
    return OrderGroup(client, group_id, limit, halts), halts


__all__ = ["GroupClient", "open_run_group", "still_usable"]
