"""The fake lists orders late, as Kalshi may, and its user data timestamp says how late.

Most tests drive a bare :class:`FakeAccount` whose clock they set (no I/O, no waiting); one runs
the command with ``--listing-lag-s`` and asks it over TLS through the transport.
"""

from __future__ import annotations

import datetime as dt
import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
import trio

from executor.clock import wall_ms
from executor.exchange.orders.transport import (
    ExchangeEndpoint,
    OrderStamps,
    open_exchange,
    order_body,
)
from executor.fake.book.account import (
    ONE_ORDER_PATH,
    ORDER_PATH,
    ORDERS_PATH,
    USER_DATA_TIMESTAMP_PATH,
    FakeAccount,
)
from executor.fake.cli import main as fake_main
from executor.signer import KalshiSigner
from tests.fake.test_published_api import order
from tests.support.openapi import validate_response
from tests.support.orders import TICKER, spec

START_MS = 1_800_000_000_000
"""The exchange's clock when each test begins (any fixed moment)."""


class Clock:
    """A settable exchange clock (ms)."""

    def __init__(self) -> None:
        self.now_ms = START_MS

    def __call__(self) -> int:
        return self.now_ms


def lagging_account(lag_s: float) -> tuple[FakeAccount, Clock]:
    """An account listing ``lag_s`` late, on a clock the test moves."""
    account = FakeAccount(listing_lag_s=lag_s)
    clock = Clock()
    account.clock = clock
    return account, clock


def listed_ids(account: FakeAccount) -> list[str]:
    """The client_order_ids ``GET /portfolio/orders`` shows now (one page is enough here)."""
    status, payload = account.answer("GET", ORDERS_PATH, "", b"")
    assert status == 200
    return [entry["client_order_id"] for entry in orjson.loads(payload)["orders"]]


def get(account: FakeAccount, path: str) -> tuple[int, dict[str, Any]]:
    """(status, decoded body) of one GET."""
    status, payload = account.answer("GET", path, "", b"")
    return status, orjson.loads(payload)


def as_of_ms(account: FakeAccount) -> int:
    """The user data timestamp's ``as_of_time`` in epoch ms (validated against the file)."""
    status, body = get(account, USER_DATA_TIMESTAMP_PATH)
    validate_response(USER_DATA_TIMESTAMP_PATH, "GET", status, body)
    moment = dt.datetime.fromisoformat(body["as_of_time"])
    return round(moment.timestamp() * 1000)


def test_an_order_is_listed_only_once_the_lag_has_passed() -> None:
    """With a 2 s lag an order is absent from the list and from GET by id until 2 s after it
    was placed, then present in both."""
    account, clock = lagging_account(2.0)
    account.answer("POST", ORDER_PATH, "", order("1" * 32))
    one_path = ONE_ORDER_PATH.replace("{order_id}", account.orders["1" * 32]["order_id"])
    clock.now_ms += 1_999
    assert listed_ids(account) == []
    assert get(account, one_path)[0] == 404
    clock.now_ms += 1
    assert listed_ids(account) == ["1" * 32]
    status, body = get(account, one_path)
    assert status == 200 and body["order"]["client_order_id"] == "1" * 32


def test_without_a_lag_an_order_is_listed_at_once() -> None:
    """The default (no lag) lists an order the moment it is placed: the twin of the test above,
    so the absence there is the lag's doing."""
    account, _ = lagging_account(0.0)
    account.answer("POST", ORDER_PATH, "", order("1" * 32))
    assert listed_ids(account) == ["1" * 32]


def test_the_user_data_timestamp_lags_like_the_listing() -> None:
    """as_of_time is the exchange's now less the lag: exactly the moment the listing shows."""
    account, clock = lagging_account(7.5)
    assert as_of_ms(account) == START_MS - 7_500
    clock.now_ms += 10_000
    assert as_of_ms(account) == START_MS + 2_500
    assert as_of_ms(account) == account.listed_as_of_ms()
    account.listing_lag_s = 0.0
    assert as_of_ms(account) == START_MS + 10_000


def test_a_later_fill_is_listed_late_too() -> None:
    """A resting order filled after it was listed still shows as resting, unfilled, until the
    fill is older than the lag; the book itself moved at once."""
    account, clock = lagging_account(1.0)
    account.answer("POST", ORDER_PATH, "", order("2" * 32, time_in_force="good_till_canceled"))
    clock.now_ms += 5_000
    account.fill_resting("2" * 32)
    assert account.book["2" * 32].status == "executed"
    _, page = get(account, ORDERS_PATH)
    (entry,) = page["orders"]
    assert (entry["status"], entry["fill_count_fp"]) == ("resting", "0.00")
    clock.now_ms += 1_000
    _, page = get(account, ORDERS_PATH)
    (entry,) = page["orders"]
    assert (entry["status"], entry["fill_count_fp"]) == ("executed", "3.00")


def test_an_archived_order_leaves_the_listing_but_its_id_stays_used() -> None:
    """Archiving (what the historical cutoff does) takes the order out of the list and of GET
    by id; placing its client_order_id again is still a 409."""
    account, _ = lagging_account(0.0)
    account.answer("POST", ORDER_PATH, "", order("3" * 32))
    order_id = account.orders["3" * 32]["order_id"]
    account.archive("3" * 32)
    assert listed_ids(account) == []
    assert get(account, ONE_ORDER_PATH.replace("{order_id}", order_id))[0] == 404
    assert account.answer("POST", ORDER_PATH, "", order("3" * 32))[0] == 409


@pytest.mark.parametrize("lag", ["-1", "soon", "7200"])
def test_the_command_refuses_a_bad_listing_lag(
    lag: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """--listing-lag-s must be seconds from 0 to an hour: else a usage error, exit 2."""
    with pytest.raises(SystemExit) as caught:
        fake_main(["--port", "0", "--listing-lag-s", lag])
    assert caught.value.code == 2
    assert "--listing-lag-s" in capsys.readouterr().err


def test_the_command_lists_late_with_listing_lag(tmp_path: Path) -> None:
    """``--listing-lag-s 30``: an order just placed is not listed, and the user data timestamp
    is at least 30 s old."""
    process = subprocess.Popen(
        [
            *(sys.executable, "-m", "executor.fake", "--port", "0", "--dir", str(tmp_path)),
            *("--listing-lag-s", "30"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        world = json.loads(process.stdout.readline())
        listed, as_of_time = trio.run(_place_then_look, world)
        asked_ms = wall_ms()
    finally:
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=10)
    assert listed == []
    assert dt.datetime.fromisoformat(as_of_time).timestamp() * 1000 <= asked_ms - 30_000
    assert process.returncode == 0


async def _place_then_look(world: dict[str, str]) -> tuple[list[Any], str]:
    signer = KalshiSigner(Path(world["private_key_path"]), world["key_id"])
    endpoint = ExchangeEndpoint(world["base_url"], world["key_id"], signer, Path(world["ca_file"]))
    with trio.fail_after(20):
        async with open_exchange(endpoint) as client:
            await client.place_order(order_body(spec("6" * 32)), OrderStamps(), dry_run=False)
            page = await client.get_json(ORDERS_PATH, {"ticker": TICKER})
            stamp = await client.get_json(USER_DATA_TIMESTAMP_PATH)
    return page["orders"], stamp["as_of_time"]
