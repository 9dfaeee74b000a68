"""``python -m executor.fake`` as its own process: the fake exchange a real-mode executor (or a
recipe's shell commands) trades against, outliving any executor a test starts and kills."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

FAKE_STOP_S = 10.0
"""Bound on the fake's orderly stop after SIGTERM (seconds)."""


@contextlib.contextmanager
def running_fake(command: list[str], **popen: Any) -> Iterator[dict[str, str]]:
    """Run ``command`` (the fake, however started) and yield the JSON line it prints once
    serving; SIGTERM it at the end. ``popen`` adds ``subprocess.Popen`` options (cwd, env)."""
    process = subprocess.Popen(
        command,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        **popen,
    )
    try:
        assert process.stdout is not None
        yield json.loads(process.stdout.readline())
    finally:
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=FAKE_STOP_S)


def standalone_fake(
    directory: Path, *flags: str
) -> contextlib.AbstractContextManager[dict[str, str]]:
    """``python -m executor.fake`` on any free port, its credentials in ``directory``, with
    ``flags``; the JSON line it prints (``running_fake``)."""
    return running_fake(
        [sys.executable, "-m", "executor.fake", "--port", "0", "--dir", str(directory), *flags]
    )


def world_variables(world: dict[str, str], **extra: str) -> dict[str, str]:
    """The ``KALSHI_*`` variables of a demo-environment executor trading against the stand-alone
    fake ``world`` (its REST URL, key and CA), shard 0, one contract an order, ``extra`` added."""
    return {
        "KALSHI_ENVIRONMENT": "demo",
        "KALSHI_DEMO_BASE_URL": world["base_url"],
        "KALSHI_API_KEY_ID": world["key_id"],
        "KALSHI_PRIVATE_KEY_PATH": world["private_key_path"],
        "KALSHI_CA_FILE": world["ca_file"],
        "KALSHI_ALLOWED_EXCHANGE_INDEXES": "0",
        "KALSHI_KELLY_FRACTION": "0",
        "KALSHI_FIXED_ORDER_CONTRACT_COUNT": "1",
        **extra,
    }


def trade_against(world: dict[str, str], monkeypatch: pytest.MonkeyPatch, **extra: str) -> None:
    """Children this test starts trade against ``world`` (:func:`world_variables`): every other
    ``KALSHI_*`` variable of the environment is removed for the test."""
    for name in list(os.environ):
        if name.startswith("KALSHI_"):
            monkeypatch.delenv(name)
    for name, value in world_variables(world, **extra).items():
        monkeypatch.setenv(name, value)


def demo_env_file(path: Path, world: dict[str, str], **extra: str) -> Path:
    """An ``--env-file`` pointing a demo-environment executor at the stand-alone fake ``world``
    (:func:`world_variables`, its stream URL too), ``extra`` variables added."""
    variables = world_variables(world, KALSHI_DEMO_WS_URL=world["stream_url"], **extra)
    path.write_text("".join(f"{name}={value}\n" for name, value in variables.items()))
    return path
