"""Shadow signatures made in a worker process: valid, and used only for shadow orders."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import trio
import trio_parallel  # type: ignore[import-untyped]

from executor.exchange.sign_worker import ProcessSigner, open_process_signer
from executor.exchange.transport import OrderStamps, open_exchange
from executor.fake.exchange import FakeCredentials, FakeExchange
from executor.signer import KalshiSigner, SignerKeyError, signing_message
from tests.support.inprocess import fake_endpoint
from tests.support.signatures import verifies

WAIT_S = 60.0
"""Bound on any wait here (seconds): a worker process start is ~0.1 s idle, much more loaded."""

BODY = (
    b'{"ticker":"KXTEST","client_order_id":"0123456789abcdef0123456789abcdef","side":"bid",'
    b'"count":"1.00","price":"0.4200","time_in_force":"fill_or_kill",'
    b'"self_trade_prevention_type":"taker_at_cross","post_only":false,"exchange_index":0}'
)


def _signer_pid(key_path: str, key_id: str, timestamp: str, method: str, path: str) -> int:
    return os.getpid()


async def test_worker_signature_verifies_and_is_made_elsewhere(
    fake_credentials: FakeCredentials,
) -> None:
    """The worker's signature verifies with the public key, and the worker is another process."""
    public_key = KalshiSigner(fake_credentials.private_key_path).public_key()
    with trio.fail_after(WAIT_S):
        async with open_process_signer(
            fake_credentials.private_key_path, fake_credentials.key_id
        ) as signer:
            signature = await signer.sign("1703123456789", "POST", "/trade-api/v2/x")
        async with trio_parallel.open_worker_context() as context:
            worker_pid = await context.run_sync(_signer_pid, "", "", "", "", "")
    assert verifies(
        public_key, signature, signing_message("1703123456789", "POST", "/trade-api/v2/x")
    )
    assert not verifies(
        public_key, signature, signing_message("1703123456789", "GET", "/trade-api/v2/x")
    )
    assert worker_pid != os.getpid()


async def test_bad_key_in_the_worker_is_a_signer_error(tmp_path: Path) -> None:
    """A key the worker cannot load raises SignerKeyError naming the path, at warm-up."""
    missing = tmp_path / "absent.pem"
    with trio.fail_after(WAIT_S), pytest.raises(SignerKeyError, match=r"absent\.pem"):
        async with open_process_signer(missing, "k"):
            pass


async def test_shadow_orders_use_the_process_signer_and_real_ones_do_not(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials
) -> None:
    """With a shadow signer set, a shadow order is signed by it and a real order is not."""
    endpoint = fake_endpoint(fake_exchange, fake_credentials)
    calls: list[str] = []
    with trio.fail_after(WAIT_S):
        async with (
            trio_parallel.open_worker_context() as context,
            open_exchange(endpoint) as client,
        ):
            worker = ProcessSigner(context, fake_credentials.private_key_path, endpoint.key_id)

            async def counting_sign(timestamp: str, method: str, path: str) -> str:
                calls.append(method)
                return await worker.sign(timestamp, method, path)

            client.shadow_signer = counting_sign
            shadow = OrderStamps()
            assert await client.place_order(BODY, shadow, dry_run=True) == {}
            assert calls == ["POST"]
            assert shadow.sign_start_ns is not None and shadow.sign_end_ns is not None
            assert shadow.sign_start_ns <= shadow.sign_end_ns <= (shadow.sent_ns or 0)
            await client.place_order(BODY, OrderStamps(), dry_run=False)
            assert calls == ["POST"]
    orders = [r for r in fake_exchange.received if r.method == "POST"]
    assert len(orders) == 1 and orders[0].verified  # the real order, signed on the loop
