"""Shadow signatures made in a worker process: valid, and used only for shadow orders."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
import trio
import trio_parallel  # type: ignore[import-untyped]
from structlog.testing import capture_logs

from executor.exchange.orders.sign_worker import ProcessSigner, open_process_signer
from executor.exchange.orders.transport import OrderStamps, open_exchange
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


# --- signals and dead workers -----------------------------------------------------------------


MESSAGE = ("1703123456789", "POST", "/trade-api/v2/portfolio/events/orders")


def _gone(pid: int) -> bool:
    """Whether process ``pid`` has exited (reaped, or a zombie nobody has reaped yet)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.split(") ", 1)[1].startswith("Z")


async def _until_dead(pid: int) -> None:
    """Wait until process ``pid`` has exited."""
    while not _gone(pid):  # noqa: ASYNC110 - another process's death sets no trio.Event
        await trio.sleep(0.01)


async def test_the_worker_ignores_the_operators_signals(fake_credentials: FakeCredentials) -> None:
    """SIGTERM, SIGINT and SIGUSR1 (``executor group reset``'s) sent to the worker (as a signal to
    the whole process group does) leave it running: the next signature comes from the same
    process, no failure counted."""
    loop_signer = KalshiSigner(fake_credentials.private_key_path)
    with trio.fail_after(WAIT_S):
        async with open_process_signer(
            fake_credentials.private_key_path, "k", fallback=loop_signer.sign
        ) as signer:
            await signer.sign(*MESSAGE)
            worker_pid = signer.worker_pid
            assert worker_pid is not None and worker_pid != os.getpid()
            os.kill(worker_pid, signal.SIGTERM)
            os.kill(worker_pid, signal.SIGINT)
            os.kill(worker_pid, signal.SIGUSR1)
            await trio.sleep(0.3)  # time for a default disposition to have killed it
            await signer.sign(*MESSAGE)
            assert (signer.worker_pid, signer.worker_failures) == (worker_pid, 0)


async def test_a_worker_killed_between_signatures_is_replaced_counted_and_logged_once(
    fake_credentials: FakeCredentials,
) -> None:
    """A SIGKILLed idle worker: the next signature comes from a new worker and verifies, the
    death is one warning and one count, and closing the context raises nothing."""
    public_key = KalshiSigner(fake_credentials.private_key_path).public_key()
    with trio.fail_after(WAIT_S), capture_logs() as logs:
        async with open_process_signer(fake_credentials.private_key_path, "k") as signer:
            await signer.sign(*MESSAGE)
            first_pid = signer.worker_pid
            assert first_pid is not None
            os.kill(first_pid, signal.SIGKILL)
            await _until_dead(first_pid)
            signature = await signer.sign(*MESSAGE)
            await signer.sign(*MESSAGE)
            assert signer.worker_pid not in (None, first_pid)
            assert signer.worker_failures == 1
    assert verifies(public_key, signature, signing_message(*MESSAGE))
    deaths = [entry for entry in logs if "died" in entry["event"]]
    assert [(entry["log_level"], entry["worker_pid"]) for entry in deaths] == [
        ("warning", first_pid)
    ]


async def test_a_worker_found_dead_at_shutdown_is_a_warning_not_an_error(
    fake_credentials: FakeCredentials,
) -> None:
    """Closing the context over a worker that died idle (trio-parallel calls it an unclean
    exit) logs one warning and raises nothing."""
    with trio.fail_after(WAIT_S), capture_logs() as logs:
        async with open_process_signer(fake_credentials.private_key_path, "k") as signer:
            assert signer.worker_pid is None  # the warm-up's pid is not kept...
            await signer.sign(*MESSAGE)
            pid = signer.worker_pid
            assert pid is not None
            os.kill(pid, signal.SIGKILL)
            await _until_dead(pid)
    assert [entry["event"] for entry in logs] == [
        "shadow signing worker had already exited at shutdown"
    ]


async def test_a_body_error_is_not_hidden_by_a_dead_worker(
    fake_credentials: FakeCredentials,
) -> None:
    """An error inside the block still propagates when the worker was found dead at close."""
    with trio.fail_after(WAIT_S), pytest.raises(LookupError, match="from the body"):
        async with open_process_signer(fake_credentials.private_key_path, "k") as signer:
            await signer.sign(*MESSAGE)
            assert signer.worker_pid is not None
            os.kill(signer.worker_pid, signal.SIGKILL)
            await _until_dead(signer.worker_pid)
            raise LookupError("from the body")


class _BrokenContext:
    """A worker context whose every job fails as a dead worker's does."""

    def __init__(self) -> None:
        self.jobs = 0

    async def run_sync(self, *args: object, **kwargs: object) -> object:
        self.jobs += 1
        raise trio_parallel.BrokenWorkerError("Worker died unexpectedly:")


async def test_a_worker_dying_during_a_signature_falls_back_to_the_loop(
    fake_credentials: FakeCredentials,
) -> None:
    """A job whose worker dies is signed by the fallback instead (the signature verifies),
    counted and logged once per death, one line each."""
    loop_signer = KalshiSigner(fake_credentials.private_key_path)
    context = _BrokenContext()
    signer = ProcessSigner(context, fake_credentials.private_key_path, "k", loop_signer.sign)
    with capture_logs() as logs:
        signature = await signer.sign(*MESSAGE)
    assert verifies(loop_signer.public_key(), signature, signing_message(*MESSAGE))
    assert (signer.worker_failures, signer.loop_signatures, context.jobs) == (1, 1, 1)
    assert [entry["event"] for entry in logs] == ["shadow signing worker died during a signature"]
    assert "\n" not in logs[0]["error"]


async def test_a_worker_that_cannot_start_is_one_line_and_signing_moves_to_the_loop(
    fake_credentials: FakeCredentials,
) -> None:
    """A warm-up whose worker dies is one warning; later signatures are the fallback's and
    never try the worker again."""
    loop_signer = KalshiSigner(fake_credentials.private_key_path)
    context = _BrokenContext()
    signer = ProcessSigner(context, fake_credentials.private_key_path, "k", loop_signer.sign)
    with capture_logs() as logs:
        await signer.warm_up()
        signature = await signer.sign(*MESSAGE)
    assert verifies(loop_signer.public_key(), signature, signing_message(*MESSAGE))
    assert (signer.on_loop, signer.worker_failures, context.jobs) == (True, 1, 1)
    assert [(entry["log_level"], entry["event"]) for entry in logs] == [
        ("warning", "shadow signing worker could not start: shadow fires sign on the loop")
    ]


async def test_without_a_fallback_a_dead_worker_raises(fake_credentials: FakeCredentials) -> None:
    """No fallback given: the worker's BrokenWorkerError reaches the caller (the shadow lane
    logs it as a failed shadow signature)."""
    signer = ProcessSigner(_BrokenContext(), fake_credentials.private_key_path, "k")
    with pytest.raises(trio_parallel.BrokenWorkerError):
        await signer.sign(*MESSAGE)
