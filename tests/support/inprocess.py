"""In-process executors for tests: a sample wake, a server in a test's nursery, an endpoint."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import trio

from executor.exchange.orders.transport import ExchangeEndpoint
from executor.fake.exchange import FakeCredentials, FakeExchange
from executor.fire.path import FirePath
from executor.server import ExecutorServer, ServerConfig
from executor.signer import KalshiSigner
from executor.wire.protocol import WakeMessage


def make_wake(correlation_id: str = "corr-1", **overrides: Any) -> WakeMessage:
    """A valid, tradeable v4 wake (real fire unless ``dry_run=True`` is given)."""
    base = WakeMessage(
        schema_version=4,
        correlation_id=correlation_id,
        market_ticker="KXBTCD-26AUG2917-T112750",
        asset="BTC",
        direction="yes",
        kalshi_price=0.56,
        model_probability=0.62,
        fee=0.02,
        edge=0.06,
        decision_ts_ms=1787289600123,
        sent_at_ms=1787289600124,
        sent_at_ns=412737100845213,
        wire_price_yes_dollars=0.56,
    )
    return replace(base, **overrides)


class RunningServer:
    """An in-process executor plus what a test needs to reach it."""

    def __init__(self, server: ExecutorServer, cancel_scope: trio.CancelScope) -> None:
        self.server = server
        self.socket_path = server.config.socket_path
        self.db_path = server.config.telemetry_db
        self._scope = cancel_scope
        self.finished = trio.Event()

    async def shutdown(self) -> None:
        """Request an orderly shutdown and wait until ``run`` has returned."""
        self.server.request_shutdown()
        await self.finished.wait()


async def start_server(
    nursery: trio.Nursery, directory: Path, *, fire_path: FirePath | None = None, **config: Any
) -> RunningServer:
    """Start an executor in ``nursery`` on ``directory/x.sock`` and wait until it accepts."""
    server = ExecutorServer(
        ServerConfig(
            socket_path=directory / "x.sock",
            telemetry_db=directory / "t.db",
            fire_path=fire_path or FirePath(),
            handle_signals=False,
            **config,
        )
    )
    scope = trio.CancelScope()
    running = RunningServer(server, scope)

    async def run(task_status: trio.TaskStatus[None]) -> None:
        with scope:
            try:
                await server.run(task_status=task_status)
            finally:
                running.finished.set()

    await nursery.start(run)
    return running


def fake_endpoint(exchange: FakeExchange, credentials: FakeCredentials) -> ExchangeEndpoint:
    """The endpoint an executor uses to trade against ``exchange``."""
    signer = KalshiSigner(credentials.private_key_path, credentials.key_id)
    return ExchangeEndpoint(exchange.base_url, credentials.key_id, signer, credentials.ca_file)
