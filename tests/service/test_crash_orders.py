"""Every order survives the worst millisecond: SIGKILLs at random moments, restarts on the same
database, and at the end the exchange's book and ``orders_fired`` agree order by order (issue 21).

A seeded campaign of real executor processes (``python -m executor serve``) against one fake
exchange that outlives them all (in this test's process, so its book and its watchers are at
hand): per cycle an executor starts on the same database, some real wakes arrive, each order meets
a fault chosen for it (none, latency, an answer that never comes, a dropped connection, a 503, a
duplicate delivery), the fake lists orders late by a lag that changes from run to run, as does
the time in force
(good_till_canceled orders rest, and the campaign fills or cancels them later, as a market
would), other clients' orders land on the same tickers, and the executor is SIGKILLed, most often
a few milliseconds after the fake has placed one of its orders (the window where the rows are
still in memory), sometimes at a random moment after it serves, sometimes during its start-up.
The fake's stream misbehaves too (issue 35): per cycle, with its own seed so the kills stay where
they were, each channel may lose, duplicate or swap its next message, messages may come late, the
market moves resting orders while the executor runs (maker fills and cancels it hears of on the
stream), and the stream connection may be cut at any moment.
Then one last executor starts (replay, adoption, reconciliation), is stopped with SIGTERM, and the
book is compared with the table: no orphan, no row claiming an order the exchange lacks, no
disagreement in status, fill or order id, no order twice, no row left open.

Bounded at ``BOUND_S`` (the issue's 90 s in CI, a pytest timeout): at most ``MAX_CYCLES``
cycles, none running past ``CAMPAIGN_S`` (a cycle still going then is killed there, one more kill
at a random moment), and the last executor's start and stop within ``FINAL_S``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import random
import sqlite3
import subprocess
import sys
import uuid
from collections import Counter
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import trio

from executor.exchange.follow.lookup import ABSENCE_MARGIN_MS
from executor.exchange.messages import order_body
from executor.fake.book.account import BookEvent
from executor.fake.book.orders import BookOrder
from executor.fake.exchange import FakeCredentials, FakeExchange, Fault
from executor.recording.orders.installation import ClientOrderIds
from executor.recording.orders.terms import CANCELLED_AT_SHUTDOWN, OUTCOME_UNKNOWN_PREFIX
from executor.wire.client import connect
from tests.support.inprocess import make_wake
from tests.support.orders import spec

SEED = 2112
"""The campaign's seed: its kill moments, faults, wakes and decoys."""

STREAM_SEED = 3535
"""The stream's misbehaviour's own seed (issue 35), so adding it moved no kill."""

STREAM_DELAYS_S = (0.0, 0.0, 0.02, 0.3)
"""How late the stream's messages come in a cycle (seconds): on time, just late, later than a
lookup that follows the answer."""

MAX_CYCLES = 14
"""Executor runs killed in one campaign (each is a start-up, some orders, a SIGKILL)."""

BOUND_S = 90
"""The whole test's bound (seconds), the issue's "<= 90 s in CI": its pytest timeout. A quiet
two-core machine takes ~50 s; the parts below leave the rest for a loaded one."""

CAMPAIGN_S = 50.0
"""When the campaign ends (seconds after it began): no cycle starts after it, and a cycle still
running is killed at it (a bound on work, not an assertion: a slow machine runs fewer cycles)."""

FINAL_S = 30.0
"""The last executor's start-up and orderly stop, at most (seconds): ~4 s on a quiet machine.
``CAMPAIGN_S`` + ``FINAL_S`` leaves ~10 s of ``BOUND_S`` for the fixtures and the reaping."""

START_S = 25.0
"""Longest wait for one executor to accept (seconds): a start-up may reconcile young rows."""

ORDER_WAIT_S = 4.0
"""How long a cycle waits for the order it aims its kill at (seconds); an order that never
reaches the book (a 503, a dropped request) ends the wait and the kill comes anyway."""

KILL_WINDOW_S = 0.012
"""Kills aimed at an order land up to this long after the fake placed it (seconds): the
issue's window was the writer's 10 ms linger."""

MODES = ("aimed", "lookup", "aimed", "random", "aimed", "start-up", "aimed", "random")
"""Each cycle's kill, in turn: ``aimed`` at an order just placed, ``lookup`` once a lookup of an
order of unknown outcome has met the listing lag (its first wake meets ``LOOKUP_FAULT``),
``random`` after serving, ``start-up`` before serving. Fixed rather than drawn, so however few
cycles a loaded machine completes in ``CAMPAIGN_S``, most kills are aimed at the window and the
second cycle exercises the three answers."""

LOOKUP_FAULT = Fault("status", status=503, place=True)
"""The ``lookup`` cycle's first order: placed, then answered 503, so its outcome is unknown and
the fire looks it up while the exchange does not list it yet."""

UNKNOWN_LINE = '"order not listed yet: outcome still unknown"'
"""What an executor logs (JSON) when a lookup met the listing lag."""

LOOKUP_WAIT_S = 10.0
"""Longest a ``lookup`` cycle waits for that line (seconds): the fire's first lookup comes
within a second of the 503 on a quiet machine."""

TICKERS = ("KXCRASH-26JAN01-A", "KXCRASH-26JAN01-B", "KXCRASH-26JAN01-C")
"""Markets the wakes and the decoys share."""

FAULTS = (
    None,
    None,
    None,
    Fault("latency", seconds=0.05),
    Fault("latency", seconds=0.3),
    Fault("hang", place=True),
    Fault("hang"),
    Fault("drop", place=True),
    Fault("drop"),
    Fault("status", status=503),
    Fault("status", status=503, place=True),
    Fault("duplicate"),
)
"""What an order may meet; ``None`` is a clean answer. A 503 may come after the order was placed;
a duplicate delivery places it and answers the resend 409 (already exists)."""

LISTING_LAGS_S = (0.0, 6.0, 0.0, 0.5, 2.0)
"""How far behind the book the fake lists orders in a cycle (seconds), in turn: 6 s outlasts the
fire's own lookups (3.5 s), so those end "unknown" and a later start-up must settle them. The 6 s
lag comes second, with the ``lookup`` cycle: on loaded CI runs, when it came fifth (on a
start-up kill) or followed an aimed kill, no lookup met it."""


@dataclasses.dataclass
class Campaign:
    """What the campaign did, for its assertions and its failure messages."""

    cycles: int = 0
    kills: Counter[str] = dataclasses.field(default_factory=Counter)
    wakes: list[str] = dataclasses.field(default_factory=list)
    decoys: set[str] = dataclasses.field(default_factory=set)
    logs: list[Path] = dataclasses.field(default_factory=list)
    ended_s: list[float] = dataclasses.field(default_factory=list)
    """When each cycle ended, the final executor last (seconds into the test): how a slow
    machine spent its bound."""

    def stderr(self) -> str:
        """The last executor's stderr."""
        return self.logs[-1].read_text(errors="replace") if self.logs else ""


@pytest.fixture
def environment(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials
) -> Iterator[dict[str, str]]:
    """Children trade one contract an order against the in-process fake, with limits wide enough
    that the risk gate refuses nothing but a fourth order in flight."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("KALSHI_")}
    env.update(
        {
            "KALSHI_ENVIRONMENT": "demo",
            "KALSHI_DEMO_BASE_URL": fake_exchange.base_url,
            "KALSHI_API_KEY_ID": fake_credentials.key_id,
            "KALSHI_PRIVATE_KEY_PATH": str(fake_credentials.private_key_path),
            "KALSHI_CA_FILE": str(fake_credentials.ca_file),
            "KALSHI_ALLOWED_EXCHANGE_INDEXES": "0",
            "KALSHI_KELLY_FRACTION": "0",
            "KALSHI_FIXED_ORDER_CONTRACT_COUNT": "1",
            "KALSHI_RISK_MAX_CONCURRENT_DISPATCHES": "3",
            "KALSHI_RISK_REFIRE_COOLDOWN_SECONDS": "0",
            "KALSHI_RISK_MAX_ATTEMPTS_PER_HOUR": "10000",
            "KALSHI_RISK_MAX_ATTEMPTS_PER_DAY": "10000",
            "KALSHI_RISK_MAX_ATTEMPTS_PER_TICKER_PER_DAY": "10000",
            "KALSHI_RISK_MAX_ATTEMPTS_PER_EVENT_PER_DAY": "10000",
            "KALSHI_RISK_MAX_ATTEMPTS_PER_CORRELATION_GROUP_PER_DAY": "10000",
            "KALSHI_RISK_MAX_NOTIONAL_PER_DAY_DOLLARS": "10000",
            "KALSHI_RISK_MAX_POSITION_CONTRACTS_PER_TICKER": "10000",
            "KALSHI_RISK_MAX_POSITION_CONTRACTS_PER_EVENT": "10000",
            "KALSHI_RISK_MAX_POSITION_CONTRACTS_PER_CORRELATION_GROUP": "10000",
        }
    )
    yield env


class ExecutorRun:
    """One ``executor serve`` child of the campaign."""

    def __init__(self, process: trio.Process, stderr: Path) -> None:
        self.process = process
        self.stderr = stderr

    async def kill(self) -> None:
        """SIGKILL it and reap it (even in a cancelled scope: the campaign's end)."""
        if self.process.returncode is None:
            self.process.kill()
        with trio.CancelScope(shield=True), trio.fail_after(10):
            await self.process.wait()


async def spawn(directory: Path, env: dict[str, str], name: str) -> ExecutorRun:
    """Start an executor on the campaign's socket and database (presigning and the shadow
    worker off: no child processes to outlive a SIGKILL, and faster start-ups)."""
    stderr = directory / f"{name}.stderr"
    command = [
        *(sys.executable, "-m", "executor", "serve"),
        *("--socket", str(directory / "x.sock"), "--telemetry-db", str(directory / "t.db")),
        *("--presign-max-age-ms", "0", "--shadow-signing", "loop", "--log-format", "json"),
    ]
    with stderr.open("wb") as file:
        process = await trio.lowlevel.open_process(
            command, env=env, stdin=subprocess.DEVNULL, stdout=file, stderr=file
        )
    return ExecutorRun(process, stderr)


async def wait_accepting(run: ExecutorRun, socket_path: Path) -> None:
    """Wait until the executor's socket accepts (fail with its stderr if it dies first)."""
    with trio.fail_after(START_S):
        while True:
            if run.process.returncode is not None:
                pytest.fail(f"executor exited {run.process.returncode}:\n{run.stderr.read_text()}")
            try:
                stream = await trio.open_unix_socket(os.fspath(socket_path))
            except OSError:
                await trio.sleep(0.02)
                continue
            await stream.aclose()
            return


TIMES_IN_FORCE = ("fill_or_kill", "good_till_canceled", "fill_or_kill", "immediate_or_cancel")
"""Each cycle's executor's time in force, in turn: good_till_canceled orders rest on the book
until the campaign fills or cancels them (``move_resting_orders``)."""


def move_resting_orders(exchange: FakeExchange, rng: random.Random) -> None:
    """Fill or cancel some of the orders resting on the book, as the market would."""
    for client_order_id, order in sorted(exchange.book.items()):
        if order.status == "resting":
            choice = rng.choice(("fill", "cancel", "leave"))
            if choice == "fill":
                exchange.fill_resting(client_order_id)
            elif choice == "cancel":
                exchange.cancel_resting(client_order_id)


def stream_chaos(exchange: FakeExchange, rng: random.Random) -> None:
    """This cycle's stream faults: late messages, and per channel the next message lost, sent
    twice or swapped with the one after it."""
    hub = exchange.stream
    hub.delay_s = rng.choice(STREAM_DELAYS_S)
    for channel in ("fill", "user_orders"):
        fault = rng.choice(("none", "lose", "duplicate", "swap"))
        if fault == "lose":
            hub.lose_next(channel, rng.randint(1, 2))
        elif fault == "duplicate":
            hub.duplicate_next(channel, rng.randint(1, 2))
        elif fault == "swap":
            hub.swap_next(channel)


async def market_while_running(
    exchange: FakeExchange, rng: random.Random, *, task_status: trio.TaskStatus[None]
) -> None:
    """While an executor runs: the market moves resting orders (fills and cancels the stream
    reports) and, now and then, the stream connection is cut."""
    task_status.started()
    while True:
        await trio.sleep(rng.uniform(0.05, 0.6))
        if rng.random() < 0.5:
            move_resting_orders(exchange, rng)
        if rng.random() < 0.25:
            exchange.stream.drop_connections()


def place_decoy(exchange: FakeExchange, rng: random.Random, campaign: Campaign) -> None:
    """Another client's order on one of the campaign's tickers."""
    client_order_id = uuid.uuid4().hex
    exchange.place_order(order_body(spec(client_order_id, ticker=rng.choice(TICKERS), count=1)))
    campaign.decoys.add(client_order_id)


async def one_cycle(
    rng: random.Random,
    campaign: Campaign,
    exchange: FakeExchange,
    placed: list[BookEvent],
    directory: Path,
    env: dict[str, str],
    stream_rng: random.Random,
) -> None:
    """Move the book's resting orders on, start an executor, give it some orders while the
    stream misbehaves and the market moves, kill it at the chosen moment."""
    index = campaign.cycles
    stream_chaos(exchange, stream_rng)
    move_resting_orders(exchange, rng)
    exchange.listing_lag_s = LISTING_LAGS_S[index % len(LISTING_LAGS_S)]
    time_in_force = TIMES_IN_FORCE[index % len(TIMES_IN_FORCE)]
    run = await spawn(
        directory, {**env, "KALSHI_ORDER_TIME_IN_FORCE": time_in_force}, f"run{index}"
    )
    campaign.logs.append(run.stderr)
    mode = MODES[index % len(MODES)]
    campaign.kills[mode] += 1
    try:
        async with trio.open_nursery() as market:
            await market.start(market_while_running, exchange, stream_rng)
            await _drive(run, rng, campaign, exchange, placed, directory, mode, index)
            market.cancel_scope.cancel()
    finally:
        await run.kill()


async def _drive(
    run: ExecutorRun,
    rng: random.Random,
    campaign: Campaign,
    exchange: FakeExchange,
    placed: list[BookEvent],
    directory: Path,
    mode: str,
    index: int,
) -> None:
    """One cycle's wakes and the wait for its kill moment."""
    if mode == "start-up":
        await trio.sleep(rng.uniform(0.0, 1.5))
        return
    await wait_accepting(run, directory / "x.sock")
    wakes = rng.randint(1, 3)
    faults = [rng.choice(FAULTS) or Fault("latency") for _ in range(wakes)]
    if mode == "lookup":
        faults[0] = LOOKUP_FAULT
    exchange.inject(*faults)
    for _ in range(rng.randint(0, 2)):
        place_decoy(exchange, rng, campaign)
    aim = rng.randint(1, wakes)
    before = len(placed)
    async with connect(directory / "x.sock") as client:
        for number in range(wakes):
            correlation_id = f"c{index}-{number}"
            campaign.wakes.append(correlation_id)
            ack = await client.request(
                make_wake(
                    correlation_id,
                    exchange_index=0,
                    market_ticker=rng.choice(TICKERS),
                    direction=rng.choice(("yes", "no")),
                )
            )
            assert ack.status == "accepted", ack
        if mode == "lookup":
            with trio.move_on_after(LOOKUP_WAIT_S):
                while UNKNOWN_LINE not in run.stderr.read_text(errors="replace"):  # noqa: ASYNC110 - its log file
                    await trio.sleep(0.05)
            await trio.sleep(rng.uniform(0.0, 0.5))
        elif mode == "aimed":
            with trio.move_on_after(ORDER_WAIT_S):
                while len(placed) - before < aim:  # noqa: ASYNC110 - the fake's watcher
                    await trio.sleep(0.0005)
            # Mostly within the 6 ms (the row was lost 9 times of 9 there).
            await trio.sleep(rng.uniform(0.0, KILL_WINDOW_S) * rng.choice((0.5, 0.5, 1.0)))
        else:
            await trio.sleep(rng.uniform(0.0, 2.5))


def read_table(db_path: Path) -> list[dict[str, Any]]:
    """Every ``orders_fired`` row as a dict."""
    with contextlib.closing(sqlite3.connect(db_path)) as db, db:
        db.row_factory = sqlite3.Row
        rows = [dict(row) for row in db.execute("SELECT * FROM orders_fired ORDER BY id")]
    return rows


def installation_ids(db_path: Path) -> ClientOrderIds:
    """This installation's ids, as the database keeps them."""
    with contextlib.closing(sqlite3.connect(db_path)) as db, db:
        (prefix,) = db.execute(
            "SELECT client_order_id_prefix FROM executor_installation"
        ).fetchone()
    return ClientOrderIds(str(prefix))


def expected_status(order: BookOrder) -> str:
    """The row status the exchange's record of an order stands for."""
    if order.status == "resting":
        return "accepted"
    return "filled" if order.filled > 0 else "canceled"


def still_open(row: dict[str, Any]) -> bool:
    """A row whose outcome is still to be learned."""
    message = row["error_message"] or ""
    unknown = message.startswith(OUTCOME_UNKNOWN_PREFIX) or message == CANCELLED_AT_SHUTDOWN
    return row["status"] in ("pending", "submitted") or (
        row["status"] == "error" and row["kalshi_order_id"] is None and unknown
    )


def compare(
    book: dict[str, BookOrder], rows: list[dict[str, Any]], decoys: set[str]
) -> dict[str, list[Any]]:
    """Every way the book and the table disagree, by kind (all empty when they agree)."""
    by_id = {row["client_order_id"]: row for row in rows}
    ours = {key: order for key, order in book.items() if key not in decoys}
    problems: dict[str, list[Any]] = {
        "orphans": sorted(set(ours) - set(by_id)),
        "claims_without_order": [],
        "disagreements": [],
        "duplicates": [],
        "open": [row["client_order_id"] for row in rows if still_open(row)],
        "foreign_rows": sorted(set(by_id) & (set(book) - set(ours))),
    }
    for row in rows:
        order = ours.get(row["client_order_id"])
        if order is None:
            if row["kalshi_order_id"] is not None or row["status"] not in ("error", "rejected"):
                problems["claims_without_order"].append(row)
            continue
        seen = (row["status"], row["fill_count"], row["kalshi_order_id"])
        wanted = (expected_status(order), f"{Decimal(order.filled):.2f}", order.order_id)
        if seen != wanted:
            problems["disagreements"].append((row["client_order_id"], seen, wanted))
    sent = Counter(row["correlation_id"] for row in rows if row["status"] != "rejected")
    problems["duplicates"] = [key for key, count in sent.items() if count > 1]
    return problems


@pytest.mark.timeout(BOUND_S)
async def test_sigkills_at_any_moment_leave_the_book_and_the_table_in_agreement(
    fake_exchange: FakeExchange, environment: dict[str, str], short_dir: Path
) -> None:
    """After a seeded campaign of SIGKILLs (most within milliseconds of an order reaching the
    exchange) and restarts on one database, then a SIGTERM: every order of this installation on
    the book has exactly one row that agrees with it, no row claims an order the book lacks,
    none is left open, other clients' orders have no row, and the journal was needed."""
    rng = random.Random(SEED)
    fake_exchange.fill_rule = lambda order: int(order["client_order_id"][-1], 16) % 4 != 0
    placed: list[BookEvent] = []
    fake_exchange.watchers.append(
        lambda event: placed.append(event) if event.kind == "placed" else None
    )
    campaign = Campaign()
    stream_rng = random.Random(STREAM_SEED)
    started = trio.current_time()
    with trio.move_on_after(CAMPAIGN_S):
        while campaign.cycles < MAX_CYCLES:
            await one_cycle(
                rng, campaign, fake_exchange, placed, short_dir, environment, stream_rng
            )
            campaign.cycles += 1
            campaign.ended_s.append(round(trio.current_time() - started, 1))

    # The last start-up may conclude "absent" only once the exchange's data covers every send
    # (ABSENCE_MARGIN_MS after it): move the fake's clock on that far instead of sleeping, and
    # list without lag, as an exchange does once it has caught up.
    fake_exchange.listing_lag_s = 0.0
    fake_exchange.stream.delay_s = 0.0
    exchange_now = fake_exchange.clock
    fake_exchange.clock = lambda: exchange_now() + ABSENCE_MARGIN_MS + 1_000
    last = await spawn(short_dir, environment, "final")
    campaign.logs.append(last.stderr)
    try:
        with trio.fail_after(FINAL_S):
            await wait_accepting(last, short_dir / "x.sock")
            last.process.terminate()
            assert await last.process.wait() == 0, campaign.stderr()
    finally:
        await last.kill()
        campaign.ended_s.append(round(trio.current_time() - started, 1))

    db_path = short_dir / "t.db"
    problems = compare(fake_exchange.book, read_table(db_path), campaign.decoys)
    assert {kind: found for kind, found in problems.items() if found} == {}, campaign
    assert campaign.decoys and campaign.decoys <= set(fake_exchange.book)
    ids = installation_ids(db_path)  # every order the executors sent carries the prefix
    assert all(ids.is_ours(key) for key in set(fake_exchange.book) - campaign.decoys)
    replayed = unknown = stream_downs = stream_news = 0
    for log in campaign.logs:
        for line in log.read_text(errors="replace").splitlines():
            if '"intent journal replayed"' in line:
                replayed += json.loads(line)["replayed"]
            unknown += UNKNOWN_LINE in line
            stream_downs += '"exchange stream down' in line
            stream_news += '"resting order filled (stream)"' in line or "stream_order" in line
    assert campaign.kills["aimed"] >= 3
    assert replayed >= 1, "no kill landed in the window the journal exists for"
    assert unknown >= 1, "no lookup met the listing lag: the three answers were not exercised"
    # The last executor's risk gate holds as filled what the exchange filled of our orders.
    warm = [
        json.loads(line)
        for line in campaign.logs[-1].read_text(errors="replace").splitlines()
        if '"risk gate warm"' in line
    ]
    ours_filled = sum(
        order.filled for key, order in fake_exchange.book.items() if key not in campaign.decoys
    )
    assert [entry["fills"] for entry in warm] == [float(ours_filled)], campaign
    assert fake_exchange.stream.lost, "the stream lost nothing"
    assert stream_downs >= 1 and stream_news >= 1, (stream_downs, stream_news)
