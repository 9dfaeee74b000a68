"""A soak of the real executor process: load, fuzz, vanishing peers, restarts and one crash.

Run ``python -m bench.soak --minutes M [--connections K] [--seed S]``. Until the time is up it
repeats one cycle against a fresh ``python -m executor serve`` on the same socket and database:

- **load**: K connections pipeline valid frames, each with a reader thread recording its acks;
- **fuzz**: mutated frames with correct length prefixes, each of which must get exactly one ack;
- **vanishing peers**: connections that send nothing, part of a frame, or whole frames, and close
  without reading;
- **held connections**: idle connections kept open through the cycle and the shutdown;
- **SIGTERM** during load, then: exit status 0, both counter identities, the database's new
  ``wake_recv`` rows equal ``rows_written``, and every acked load frame has its row.

Once per soak (the second cycle) the executor is SIGKILLed under load instead; the next start must
succeed on the same paths, the database must pass ``PRAGMA integrity_check``, and the acked frames
whose rows never reached the file are counted (``rows lost``). Exit status is 1 on any failure.

The pieces (:class:`ExecutorProcess`, :class:`PipelinedClient`, :func:`fuzz_round`,
:func:`vanishing_peer`, :func:`identity_problems`) are used by the reliability tests too.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import random
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Final

import orjson

from bench.frames import wake_message
from bench.processes import parse_counters
from executor.wire.protocol import PREFIX_BYTES, decode_wake_ack, encode_frame

READY_TIMEOUT_S: Final = 20.0
"""How long a fresh executor may take to accept a connection (s); interpreter start dominates."""

EXIT_SLACK_S: Final = 15.0
"""How long past its grace period an executor may take to exit after SIGTERM (s): the telemetry
drain of a full channel plus the database close. Generous: a bound on a hang, not a measurement."""

CLIENT_TIMEOUT_S: Final = 30.0
"""A client socket operation blocked this long means the executor hung (s)."""

FRAMES_PER_SEND: Final = 32
"""Frames a load client writes per ``sendall`` (frames): pipelining without a huge buffer."""

CHANNEL_CAPACITY_ROWS: Final = 8192
BATCH_ROWS: Final = 500
LOSS_BOUND_ROWS: Final = CHANNEL_CAPACITY_ROWS + BATCH_ROWS
"""Most acked rows a SIGKILL can lose: a full telemetry channel plus one uncommitted batch. Rows
already dropped because the channel was full add to that, and a SIGKILL loses their count, so the
crash cycles pace their load below what the writer sustains (``PACED_FRAMES_PER_S``)."""

PACED_FRAMES_PER_S: Final = 1000.0
"""Per-connection rate of the load in a SIGKILL cycle (frames/s): four connections stay well under
the writer's throughput measured by the soak (about 7,000 rows/s on a loaded 2-core machine)."""

TEMPLATE: Final = wake_message("template", sent_at_ns=412737100845213)
"""The soak's valid wake: the benchmark's message shape (a full v4 shadow fire)."""


def wake_frame(correlation_id: str) -> bytes:
    """One valid shadow-fire frame (prefix included) carrying ``correlation_id``."""
    return encode_frame(dataclasses.replace(TEMPLATE, correlation_id=correlation_id))


# --- the executor process ---------------------------------------------------------------------


class ExecutorProcess:
    """One ``python -m executor serve`` process; stderr goes to a file, never a pipe."""

    def __init__(
        self,
        socket_path: Path,
        db_path: Path,
        *,
        grace_s: float = 5.0,
        extra_args: Iterable[str] = (),
        log_level: str = "warning",
    ) -> None:
        self.socket_path = socket_path
        self.db_path = db_path
        self.grace_s = grace_s
        self.stderr_path = Path(f"{db_path}.{time.monotonic_ns()}.stderr")
        command = [
            sys.executable,
            "-m",
            "executor",
            "serve",
            "--socket",
            str(socket_path),
            "--telemetry-db",
            str(db_path),
            "--grace",
            str(grace_s),
            "--log-format",
            "json",
            "--log-level",
            log_level,
            *extra_args,
        ]
        with open(self.stderr_path, "wb") as stderr_file:
            self.process = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr_file
            )

    @property
    def pid(self) -> int:
        return self.process.pid

    def wait_ready(self, timeout_s: float = READY_TIMEOUT_S) -> None:
        """Return once the socket accepts a connection.

        Raises:
            RuntimeError: the process exited first, or the deadline passed.
        """
        deadline = time.monotonic() + timeout_s
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"executor exited with {self.process.returncode} before listening: "
                    + self.stderr_text()[-2000:]
                )
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
                try:
                    probe.connect(str(self.socket_path))
                    return
                except OSError:
                    pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"executor did not listen on {self.socket_path}")
            time.sleep(0.02)

    def send_signal(self, signum: int) -> None:
        self.process.send_signal(signum)

    def wait(self, timeout_s: float) -> int | None:
        """The exit status, or None if the process is still running after ``timeout_s``."""
        try:
            return self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return None

    def kill(self) -> None:
        """SIGKILL and reap (a no-op once the process has exited)."""
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()

    def stop(self, signum: int = signal.SIGTERM) -> int | None:
        """Signal, then wait up to grace + slack; None (and a SIGKILL) if it did not exit."""
        if self.process.poll() is None:
            self.process.send_signal(signum)
        status = self.wait(self.grace_s + EXIT_SLACK_S)
        if status is None:
            self.kill()
        return status

    def peak_rss_kib(self) -> int:
        """The process's peak resident set (VmHWM, KiB) while it runs; 0 once it has gone."""
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
        return 0

    def stderr_text(self) -> str:
        return self.stderr_path.read_text(encoding="utf-8", errors="replace")

    def counters(self) -> dict[str, int]:
        """The two counter lines printed at exit, as one dict.

        Raises:
            ValueError: either line is missing.
        """
        return parse_exit_counters(self.stderr_text())


def parse_exit_counters(stderr_text: str) -> dict[str, int]:
    """Parse ``frames=... accepted=...`` and ``telemetry rows_written=...`` (both required).

    Raises:
        ValueError: either line is missing.
    """
    lines = stderr_text.splitlines()
    frames_lines = [line for line in lines if line.startswith("frames=")]
    telemetry_lines = [line for line in lines if line.startswith("telemetry ")]
    if len(frames_lines) != 1 or len(telemetry_lines) != 1:
        raise ValueError(f"expected one of each counter line, stderr ends: {stderr_text[-500:]!r}")
    return parse_counters(frames_lines[0] + "\n" + telemetry_lines[0])


def identity_problems(counters: dict[str, int]) -> list[str]:
    """What breaks SERVICE.md's accounting; empty when every frame is accounted for.

    ``fires_cancelled`` and ``fire_errors`` are subsets of ``fired`` in this executor (a fire is
    counted before its dispatcher is awaited), so they do not appear in the fire identity.
    """
    c = counters
    delivered = c["accepted"] - c["unacked"]
    problems = []
    if c["frames"] != c["accepted"] + c["rejected"]:
        problems.append(f"frames {c['frames']} != accepted + rejected")
    # The order path's refusals (DISPATCH.md §1); absent from older and C++ exit lines.
    refused = ("refused_volume", "refused_risk", "refused_permission")
    fires = c["fired"] + c["refused_price"] + c["refused_kill_switch"]
    fires += sum(c.get(key, 0) for key in refused)
    if delivered != fires:
        problems.append(f"accepted - unacked = {delivered} but fire outcomes = {fires}")
    rows = (
        c["rows_written"]
        + c["dropped_ring_full"]
        + c["dropped_oversized_id"]
        + c["dropped_write_failed"]
    )
    if delivered != rows:
        problems.append(f"accepted - unacked = {delivered} but telemetry outcomes = {rows}")
    return problems


# --- the database -----------------------------------------------------------------------------


def wake_recv_count(db_path: Path) -> int:
    """``wake_recv`` rows in the file (0 when it or the table does not exist)."""
    if not db_path.exists():
        return 0
    with contextlib.closing(sqlite3.connect(db_path, timeout=10.0)) as db:
        try:
            (count,) = db.execute(
                "SELECT count(*) FROM latency_events WHERE stage = 'wake_recv'"
            ).fetchone()
        except sqlite3.OperationalError:
            return 0
    return int(count)


def ids_with_prefix(db_path: Path, prefix: str) -> set[str]:
    """The correlation ids of ``wake_recv`` rows starting with ``prefix`` (an index range scan)."""
    upper = prefix[:-1] + chr(ord(prefix[-1]) + 1)
    with contextlib.closing(sqlite3.connect(db_path, timeout=10.0)) as db:
        rows = db.execute(
            "SELECT correlation_id FROM latency_events"
            " WHERE correlation_id >= ? AND correlation_id < ? AND stage = 'wake_recv'",
            (prefix, upper),
        ).fetchall()
    return {row[0] for row in rows}


def integrity_check(db_path: Path) -> str:
    """``PRAGMA integrity_check``'s answer (``ok`` when the file is sound)."""
    with contextlib.closing(sqlite3.connect(db_path, timeout=10.0)) as db:
        return "; ".join(str(row[0]) for row in db.execute("PRAGMA integrity_check").fetchall())


# --- clients ----------------------------------------------------------------------------------


def _connect(socket_path: Path) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(CLIENT_TIMEOUT_S)
    sock.connect(str(socket_path))
    return sock


def _receive_exactly(sock: socket.socket, buffer: bytearray, size: int) -> bytes | None:
    """``size`` bytes from ``buffer`` topped up from ``sock``; None on EOF or reset."""
    while len(buffer) < size:
        try:
            chunk = sock.recv(65536)
        except (ConnectionResetError, BrokenPipeError):
            return None
        if not chunk:
            return None
        buffer += chunk
    data = bytes(buffer[:size])
    del buffer[:size]
    return data


def read_ack_id(sock: socket.socket, buffer: bytearray) -> tuple[str, str] | None:
    """The next ack's ``(status, correlation_id)``; None when the executor closed the connection."""
    prefix = _receive_exactly(sock, buffer, PREFIX_BYTES)
    if prefix is None:
        return None
    body = _receive_exactly(sock, buffer, int.from_bytes(prefix, "big"))
    if body is None:
        return None
    ack = decode_wake_ack(body)
    return ack.status, ack.correlation_id


class PipelinedClient:
    """One connection: a sender thread pipelining frames, a reader thread recording acks.

    Ids are ``{prefix}{n:08d}``, sent in order. The sender stops on :meth:`stop_sending` or when
    the executor goes away; the reader stops at EOF (or a reset), i.e. when the executor closes.
    """

    def __init__(
        self,
        socket_path: Path,
        prefix: str,
        *,
        max_frames: int | None = None,
        frames_per_s: float | None = None,
    ) -> None:
        self.prefix = prefix
        self.max_frames = max_frames
        self.frames_per_s = frames_per_s
        self.sock = _connect(socket_path)
        self.frames_sent = 0
        self.acked_ids: list[str] = []
        self.rejected = 0
        self.error: str | None = None
        self._stop = threading.Event()
        self._sender = threading.Thread(target=self._send_loop, daemon=True)
        self._reader = threading.Thread(target=self._read_loop, daemon=True)

    def start(self) -> PipelinedClient:
        self._sender.start()
        self._reader.start()
        return self

    def stop_sending(self) -> None:
        self._stop.set()

    def close_after_acks(self, timeout_s: float = CLIENT_TIMEOUT_S) -> None:
        """Stop sending, wait until every sent frame is acked, then close (a clean disconnect)."""
        self.stop_sending()
        self._sender.join(timeout_s)
        deadline = time.monotonic() + timeout_s
        while len(self.acked_ids) + self.rejected < self.frames_sent and self._reader.is_alive():
            if time.monotonic() > deadline:
                self.error = f"{self.frames_sent - len(self.acked_ids)} acks never arrived"
                break
            time.sleep(0.01)
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.join(timeout_s)

    def join(self, timeout_s: float = CLIENT_TIMEOUT_S) -> None:
        """Wait for both threads (the reader ends when the executor closes), then close."""
        self._sender.join(timeout_s)
        self._reader.join(timeout_s)
        if self._reader.is_alive() and self.error is None:
            self.error = "ack reader still blocked"
        self.sock.close()

    def _send_loop(self) -> None:
        started = time.monotonic()
        try:
            while not self._stop.is_set():
                if self.frames_per_s is not None:
                    # Paced: sleep until this chunk is due (load the writer can keep up with).
                    due = started + self.frames_sent / self.frames_per_s
                    time.sleep(max(0.0, due - time.monotonic()))
                if self.max_frames is not None and self.frames_sent >= self.max_frames:
                    return
                start = self.frames_sent
                count = FRAMES_PER_SEND
                if self.max_frames is not None:
                    count = min(count, self.max_frames - start)
                chunk = b"".join(
                    wake_frame(f"{self.prefix}{n:08d}") for n in range(start, start + count)
                )
                self.sock.sendall(chunk)
                self.frames_sent += count
        except (BrokenPipeError, ConnectionResetError):
            pass  # the executor closed the connection: shutdown or crash
        except OSError as error:
            self.error = f"send failed: {error!r}"

    def _read_loop(self) -> None:
        buffer = bytearray()
        try:
            while True:
                ack = read_ack_id(self.sock, buffer)
                if ack is None:
                    return
                status, correlation_id = ack
                if status == "accepted":
                    self.acked_ids.append(correlation_id)
                else:
                    self.rejected += 1
        except OSError as error:
            if not self._stop.is_set() or not isinstance(error, socket.timeout):
                self.error = f"read failed: {error!r}"


def mutated_body(rng: random.Random) -> bytes:
    """A body made by one random mutation of a valid wake (bytes, JSON values, or structure)."""
    valid = orjson.loads(orjson.dumps(dataclasses.replace(TEMPLATE, correlation_id="fz")))
    raw = orjson.dumps(valid)
    choice = rng.randrange(8)
    if choice == 0:  # flip a few bytes
        data = bytearray(raw)
        for _ in range(rng.randint(1, 4)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        return bytes(data)
    if choice == 1:  # truncate
        return raw[: rng.randrange(len(raw))]
    if choice == 2:  # random bytes
        return rng.randbytes(rng.randrange(0, 512))
    if choice == 3:  # drop a field
        del valid[rng.choice(sorted(valid))]
    elif choice == 4:  # a field of the wrong type
        valid[rng.choice(sorted(valid))] = rng.choice([None, "x", -1, 1.5e308, [], {}, True])
    elif choice == 5:  # an unknown field
        valid[f"extra{rng.randrange(100)}"] = rng.randrange(1000)
    elif choice == 6:  # a long or odd correlation id
        valid["correlation_id"] = rng.choice(["", "é" * rng.randrange(200), "x" * 129, "\u2028"])
    else:  # a schema version or price out of range
        valid[rng.choice(["schema_version", "wire_price_yes_dollars"])] = rng.choice(
            [0, 5, -1, 2.0, float("1e10")]
        )
    return orjson.dumps(valid)


@dataclasses.dataclass
class FuzzResult:
    frames: int = 0
    accepted: int = 0
    rejected: int = 0
    failure: str | None = None


def fuzz_round(socket_path: Path, rng: random.Random, frames: int) -> FuzzResult:
    """Send ``frames`` mutated frames on one connection; each must be answered by exactly one ack.

    A valid sentinel frame closes the round: its ack must be the very next one, which proves no
    fuzzed frame was answered twice or left the connection out of step.
    """
    result = FuzzResult()
    buffer = bytearray()
    with contextlib.closing(_connect(socket_path)) as sock:
        for _ in range(frames):
            body = mutated_body(rng)
            sock.sendall(len(body).to_bytes(PREFIX_BYTES, "big") + body)
            result.frames += 1
            ack = read_ack_id(sock, buffer)
            if ack is None:
                result.failure = f"executor closed the connection on fuzz body {body[:80]!r}"
                return result
            if ack[0] == "accepted":
                result.accepted += 1
            else:
                result.rejected += 1
        sentinel = f"fuzz-sentinel-{rng.randrange(1 << 30)}"
        sock.sendall(wake_frame(sentinel))
        ack = read_ack_id(sock, buffer)
        if ack == ("accepted", sentinel):
            result.accepted += 1
        else:
            result.failure = f"sentinel answered by {ack!r}: a fuzz frame got more than one ack"
    return result


def vanishing_peer(socket_path: Path, rng: random.Random, prefix: str) -> str:
    """Connect, do one rude thing, close without reading; return what it did."""
    frame = wake_frame(f"{prefix}{rng.randrange(1 << 30)}")
    with contextlib.closing(_connect(socket_path)) as sock:
        kind = rng.choice(["nothing", "half prefix", "half body", "frames", "frames unread"])
        if kind == "half prefix":
            sock.sendall(frame[:2])
        elif kind == "half body":
            sock.sendall(frame[: rng.randrange(PREFIX_BYTES + 1, len(frame))])
        elif kind == "frames":
            sock.sendall(frame * rng.randint(1, 20))
        elif kind == "frames unread":
            sock.sendall(frame * 200)
    return kind


# --- the soak ---------------------------------------------------------------------------------


@dataclasses.dataclass
class SoakFigures:
    frames_sent: int = 0
    acked: int = 0
    fuzzed: int = 0
    peers_killed: int = 0
    connections_held: int = 0
    restarts: int = 0
    cycles: int = 0
    rows_lost: int = 0
    killed_acked: int = 0
    unacked: int = 0
    dropped_ring_full: int = 0
    dropped_oversized_id: int = 0
    dropped_write_failed: int = 0
    max_rss_kib: int = 0
    failures: list[str] = dataclasses.field(default_factory=list)

    def lines(self) -> list[str]:
        return [
            f"frames sent: {self.frames_sent}",
            f"acked: {self.acked}",
            f"fuzzed: {self.fuzzed}",
            f"peers killed: {self.peers_killed}",
            f"connections held: {self.connections_held}",
            f"restarts: {self.restarts} ({self.cycles} cycles, one SIGKILL)",
            f"rows lost (acked, missing after SIGKILL): {self.rows_lost}"
            f" of {self.killed_acked} acked in the killed life",
            f"orderly exits: unacked {self.unacked}, dropped_ring_full {self.dropped_ring_full},"
            f" dropped_oversized_id {self.dropped_oversized_id},"
            f" dropped_write_failed {self.dropped_write_failed}",
            f"max executor RSS: {self.max_rss_kib} KiB",
            f"failures: {len(self.failures)}",
            *(f"  FAILURE: {failure}" for failure in self.failures),
        ]


class Soak:
    """The cycle loop; figures accumulate in :attr:`figures`."""

    def __init__(
        self, directory: Path, *, connections: int, seed: int, load_s: float, held: int
    ) -> None:
        self.socket_path = directory / "soak.sock"
        self.db_path = directory / "soak.db"
        self.connections = connections
        self.rng = random.Random(seed)
        self.load_s = load_s
        self.held = held
        self.figures = SoakFigures()

    def fail(self, message: str) -> None:
        self.figures.failures.append(message)
        print(f"FAILURE: {message}", flush=True)

    def run(self, deadline: float) -> SoakFigures:
        killed_ids: list[str] | None = None
        while True:
            cycle = self.figures.cycles
            # The second cycle ends in SIGKILL; the soak always runs the cycle after it.
            crash = cycle == 1
            if cycle >= 3 and time.monotonic() > deadline:
                break
            self.figures.cycles += 1
            acked = self.cycle(cycle, crash=crash)
            if acked is None:
                break
            if crash:
                killed_ids = acked
            elif killed_ids is not None:
                self.check_crash_losses(killed_ids)
                killed_ids = None
        return self.figures

    def check_crash_losses(self, killed_ids: list[str]) -> None:
        verdict = integrity_check(self.db_path)
        if verdict != "ok":
            self.fail(f"integrity_check after SIGKILL: {verdict}")
        present = ids_with_prefix(self.db_path, "c0001-")
        lost = sum(1 for cid in killed_ids if cid not in present)
        self.figures.rows_lost = lost
        self.figures.killed_acked = len(killed_ids)
        print(f"SIGKILL cycle: {len(killed_ids)} acked, {lost} rows missing", flush=True)
        if lost > LOSS_BOUND_ROWS:
            self.fail(f"{lost} acked rows lost to SIGKILL, more than {LOSS_BOUND_ROWS}")

    def cycle(self, cycle: int, *, crash: bool) -> list[str] | None:
        """One executor life; the acked load ids (None when it could not start)."""
        rows_before = wake_recv_count(self.db_path)
        executor = ExecutorProcess(self.socket_path, self.db_path, grace_s=5.0)
        try:
            executor.wait_ready()
        except RuntimeError as error:
            self.fail(f"cycle {cycle}: start failed: {error}")
            executor.kill()
            return None
        if cycle:
            self.figures.restarts += 1
        prefix = f"c{cycle:04d}-"
        held = [_connect(self.socket_path) for _ in range(self.held)]
        self.figures.connections_held += len(held)
        pace = PACED_FRAMES_PER_S if crash else None
        clients = [
            PipelinedClient(self.socket_path, f"{prefix}{k:02d}-", frames_per_s=pace).start()
            for k in range(self.connections)
        ]
        fuzz = FuzzResult()
        load_end = time.monotonic() + self.load_s
        try:
            while time.monotonic() < load_end:
                part = fuzz_round(self.socket_path, self.rng, 50)
                fuzz.frames += part.frames
                fuzz.accepted += part.accepted
                if part.failure:
                    self.fail(f"cycle {cycle}: fuzz: {part.failure}")
                for _ in range(5):
                    vanishing_peer(self.socket_path, self.rng, f"v{cycle:04d}-")
                    self.figures.peers_killed += 1
            self.figures.max_rss_kib = max(self.figures.max_rss_kib, executor.peak_rss_kib())
        except OSError as error:
            self.fail(f"cycle {cycle}: client error {error!r}")
        self.figures.fuzzed += fuzz.frames
        # The signal lands while every load client is still pipelining.
        if crash:
            executor.kill()
            status: int | None = -signal.SIGKILL
        else:
            status = executor.stop(signal.SIGTERM)
        for client in clients:
            client.join()
        for sock in held:
            sock.close()
        acked = [cid for client in clients for cid in client.acked_ids]
        self.figures.frames_sent += sum(client.frames_sent for client in clients) + fuzz.frames
        self.figures.acked += len(acked) + fuzz.frames
        for client in clients:
            if client.error:
                self.fail(f"cycle {cycle}: client {client.prefix}: {client.error}")
        if crash:
            print(f"cycle {cycle}: SIGKILL with {len(acked)} load frames acked", flush=True)
            return acked
        self.check_orderly_exit(cycle, executor, status, acked, fuzz, rows_before)
        return acked

    def check_orderly_exit(
        self,
        cycle: int,
        executor: ExecutorProcess,
        status: int | None,
        acked: list[str],
        fuzz: FuzzResult,
        rows_before: int,
    ) -> None:
        if status != 0:
            self.fail(f"cycle {cycle}: exit status {status} after SIGTERM")
            return
        try:
            counters = executor.counters()
        except ValueError as error:
            self.fail(f"cycle {cycle}: {error}")
            return
        self.figures.unacked += counters["unacked"]
        self.figures.dropped_ring_full += counters["dropped_ring_full"]
        self.figures.dropped_oversized_id += counters["dropped_oversized_id"]
        self.figures.dropped_write_failed += counters["dropped_write_failed"]
        for problem in identity_problems(counters):
            self.fail(f"cycle {cycle}: {problem}")
        new_rows = wake_recv_count(self.db_path) - rows_before
        if new_rows != counters["rows_written"]:
            self.fail(
                f"cycle {cycle}: {new_rows} new rows, rows_written {counters['rows_written']}"
            )
        delivered = counters["accepted"] - counters["unacked"]
        # Vanishing peers' acks may be delivered to nobody, so the clients can only see fewer.
        if len(acked) + fuzz.accepted > delivered:
            self.fail(f"cycle {cycle}: clients saw {len(acked)} acks, executor {delivered}")
        if counters["dropped_ring_full"] + counters["dropped_write_failed"] == 0:
            present = ids_with_prefix(self.db_path, f"c{cycle:04d}-")
            missing = sum(1 for cid in acked if cid not in present)
            if missing:
                self.fail(f"cycle {cycle}: {missing} acked frames have no row")
        print(
            f"cycle {cycle}: exit 0, {len(acked)} load acks, {fuzz.frames} fuzzed, "
            f"counters {counters}",
            flush=True,
        )


@contextlib.contextmanager
def _soak_directory() -> Iterator[Path]:
    directory = Path(tempfile.mkdtemp(prefix="soak-"))
    try:
        yield directory
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.soak", description=__doc__)
    parser.add_argument("--minutes", type=float, required=True, help="how long to keep cycling")
    parser.add_argument("--connections", type=int, default=4, help="load connections (default 4)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the fuzz and the peers")
    parser.add_argument("--load-seconds", type=float, default=5.0, help="load per cycle (s)")
    parser.add_argument("--held", type=int, default=20, help="idle connections per cycle")
    args = parser.parse_args(argv)
    deadline = time.monotonic() + args.minutes * 60
    started = time.monotonic()
    with _soak_directory() as directory:
        soak = Soak(
            directory,
            connections=args.connections,
            seed=args.seed,
            load_s=args.load_seconds,
            held=args.held,
        )
        try:
            figures = soak.run(deadline)
        except Exception as error:  # a crash of the soak itself is a failure, reported as one
            soak.fail(f"soak aborted: {error!r}")
            figures = soak.figures
    print(f"soak: {(time.monotonic() - started) / 60:.1f} minutes, seed {args.seed}")
    for line in figures.lines():
        print(line)
    return 1 if figures.failures else 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    raise SystemExit(main())
