"""Private by default: a private key others can read is refused (unless explicitly allowed), and
the files that hold every order are created for their owner alone, or shared with the socket's
group."""

from __future__ import annotations

import argparse
import functools
import os
import signal
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from executor.config.settings import ALLOW_READABLE_KEY_ENV, load_settings
from executor.config.variables import ConfigError
from executor.fake.exchange import FakeCredentials
from executor.telemetry import Telemetry, serve_telemetry
from tests.service.test_startup_leftovers import clean_environment, listing, serve
from tests.support.inprocess import make_wake
from tests.support.processes import (
    Spawner,
    assert_one_line_failure,
    request_all,
    wait_until_accepting,
)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _real_env(key: Path, **extra: str) -> dict[str, str]:
    return {
        "KALSHI_API_KEY_ID": "key-123",
        "KALSHI_PRIVATE_KEY_PATH": str(key),
        "KALSHI_ALLOWED_EXCHANGE_INDEXES": "0",
        **extra,
    }


def _settings_args() -> argparse.Namespace:
    return argparse.Namespace(exchange="auto", env_file=None)


@pytest.fixture
def key(tmp_path: Path) -> Path:
    """A key file (its content is the signer's business, not the settings')."""
    path = tmp_path / "key.pem"
    path.write_text("a key\n")
    return path


@pytest.mark.parametrize(
    "mode", [0o644, 0o640, 0o604, 0o660, 0o620], ids=lambda mode: f"{mode:04o}"
)
def test_a_key_others_can_reach_is_refused_with_the_fix(key: Path, mode: int) -> None:
    """Any permission bit for group or others refuses the key in one line that says how to fix
    it (``chmod 600 PATH``) and names the override."""
    key.chmod(mode)
    with pytest.raises(ConfigError) as refused:
        load_settings(_settings_args(), _real_env(key))
    message = str(refused.value)
    assert message == (
        f"KALSHI_PRIVATE_KEY_PATH {key}: readable by group or others (mode {mode:04o}); run "
        f"chmod 600 {key} (or set {ALLOW_READABLE_KEY_ENV}=1 to use it as it is)"
    )


@pytest.mark.parametrize("mode", [0o600, 0o400], ids=lambda mode: f"{mode:04o}")
def test_a_key_for_its_owner_alone_is_accepted(key: Path, mode: int) -> None:
    """The twin: a key only its owner can reach is used."""
    key.chmod(mode)
    settings = load_settings(_settings_args(), _real_env(key))
    assert settings.exchange.private_key_path == key


def test_the_override_accepts_a_readable_key(key: Path) -> None:
    """``KALSHI_ALLOW_READABLE_PRIVATE_KEY=1`` uses a group-readable key as it is."""
    key.chmod(0o644)
    settings = load_settings(_settings_args(), _real_env(key, **{ALLOW_READABLE_KEY_ENV: "1"}))
    assert settings.exchange.private_key_path == key
    assert _mode(key) == 0o644  # nothing changed behind the operator's back


@pytest.mark.parametrize("value", ["0", "", "no"])
def test_the_override_off_or_empty_still_refuses(key: Path, value: str) -> None:
    """The override's negative twin: false, or empty, keeps the refusal."""
    key.chmod(0o644)
    with pytest.raises(ConfigError, match="chmod 600"):
        load_settings(_settings_args(), _real_env(key, **{ALLOW_READABLE_KEY_ENV: value}))


def test_serve_refuses_a_readable_key_before_creating_anything(
    short_dir: Path, fake_credentials: FakeCredentials
) -> None:
    """``executor serve`` with a 0644 key: exit 2, one line with the fix, and no database."""
    key = short_dir / "key.pem"
    key.write_bytes(fake_credentials.private_key_path.read_bytes())
    key.chmod(0o644)
    run = serve(short_dir, clean_environment(**_real_env(key)))
    assert run.returncode == 2
    assert_one_line_failure(run, f"chmod 600 {key}", ALLOW_READABLE_KEY_ENV)
    assert listing(short_dir) == ["key.pem"]


@pytest.fixture
def open_umask() -> Iterator[None]:
    """The common umask 022 (files 0644 unless the code says otherwise), restored after."""
    previous = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(previous)


def test_the_database_and_its_side_files_are_the_owners_alone(
    spawner: Spawner, short_dir: Path, open_umask: None
) -> None:
    """Under umask 022, an executor with an exchange creates its database, ``-wal``, ``-shm``
    and intent journal ``-intents`` mode 0600."""
    socket_path, db_path = short_dir / "x.sock", short_dir / "t.db"
    executor = spawner.serve(socket_path, db_path, "--exchange", "fake")
    wait_until_accepting(executor, socket_path)
    assert request_all(socket_path, [make_wake("private", exchange_index=0)])[0].status == (
        "accepted"
    )
    files = {suffix: db_path.with_name(db_path.name + suffix) for suffix in ("", "-wal", "-shm")}
    files["-intents"] = db_path.with_name(db_path.name + "-intents")
    assert {suffix: _mode(path) for suffix, path in files.items()} == dict.fromkeys(files, 0o600)
    executor.signal(signal.SIGTERM)
    assert executor.wait() == 0
    assert _mode(db_path) == 0o600


def _a_group_to_share_with() -> int:
    """A group other than this process's own that it may give files to (root: any)."""
    if os.geteuid() == 0:
        return 47_004  # no account's group (a guess that holds on a CI image); root may use any
    others = [gid for gid in os.getgroups() if gid != os.getegid()]
    if not others:
        pytest.skip("this user is in no second group to share the database with")
    return others[0]


async def test_a_shared_database_goes_to_the_sockets_group(
    short_dir: Path, open_umask: None
) -> None:
    """With ``--socket-group`` (``share_group``) the database is created 0660 for that group,
    and its ``-wal`` and ``-shm`` are given to the group too."""
    group = _a_group_to_share_with()
    db_path = short_dir / "t.db"
    async with trio.open_nursery() as nursery:
        telemetry: Telemetry = await nursery.start(
            functools.partial(serve_telemetry, db_path, share_group=group)
        )
        files = [db_path.with_name(db_path.name + suffix) for suffix in ("", "-wal", "-shm")]
        assert [(path.stat().st_gid, _mode(path)) for path in files] == [(group, 0o660)] * 3
        telemetry.close()
