"""The fire-path client: ``python -m bench.clients.fire --socket S [plan flags]``, its own process.

Every wake carries ``recv_ns``, this client's ``time.perf_counter_ns()`` taken at the moment it
"received the market event", just before it builds the wake, and this host's ``clock_domain``, so
the executor can measure ``detect_fire`` (its ``sent`` stamp minus ``recv_ns``) on one clock.

Phases, on one connection (docs/performance/plan/, addendum 2026-11-30):

- quiet: warm-up shadow and real wakes, then kept shadow and real wakes interleaved; each waits for
  its ack, then a pause long enough for its fire to be over (``SHADOW_GAP_S``, ``REAL_GAP_S``);
- shadow burst: ``bursts`` times, ``burst_shadows`` shadow wakes written back to back with one real
  wake in the middle, then every ack read, then ``BURST_GAP_S`` of quiet. With
  ``burst_real_apart`` the real wake goes on a second connection instead, written once every
  shadow of the burst is acked (the first connection is then starting the shadows it held).

The correlation id names the phase (``fire-<phase>-<index>``), which is how the harness tells the
executor's rows apart. Pure planning (``FirePlan``, ``phase_of``) has no I/O and no heavy import.
"""

from __future__ import annotations

import argparse
import dataclasses
import socket
import sys
import time
from collections.abc import Iterator
from typing import Final

from bench.clients.frames import body_length, wake_message
from executor.clock import clock_domain
from executor.wire.protocol import decode_wake_ack, encode_frame

SHADOW_GAP_S: Final = 0.005
"""Pause after a quiet shadow wake's ack (s): its fire (about one 0.5 ms signature) is over."""
REAL_GAP_S: Final = 0.15
"""Pause after a quiet real wake's ack (s): the order is answered in a few ms, and one order's 10
tokens refill in 0.1 s at 100/s, so the §5 rate limiter never delays a measured real fire."""
BURST_GAP_S: Final = 1.5
"""Quiet after a burst (s): the baseline signs 200 shadows FIFO, 0.2-0.6 s under load; margin."""

FIRE_EXCHANGE_INDEX: Final = 0
"""The fake exchange's funded shard (``KALSHI_ALLOWED_EXCHANGE_INDEXES=0``)."""

PHASES: Final = ("warmshadow", "warmreal", "shadow", "real", "burstshadow", "burstreal")
"""Correlation-id phases, in the order they are sent."""
REAL_PHASES: Final = frozenset({"warmreal", "real", "burstreal"})
KIND_OF_PHASE: Final = {
    "shadow": "fire:shadow",
    "real": "fire:real",
    "burstshadow": "burst:shadow",
    "burstreal": "burst:real",
}
"""The ``client`` column's value for each kept phase (warm-up phases are not kept)."""


@dataclasses.dataclass(frozen=True)
class FirePlan:
    """How many wakes of each phase one configuration sends."""

    warmup: int = 20
    shadow: int = 500
    real: int = 100
    bursts: int = 10
    burst_shadows: int = 200
    burst_real_apart: bool = False

    def expected(self) -> dict[str, int]:
        """Wakes sent per phase."""
        return {
            "warmshadow": self.warmup,
            "warmreal": self.warmup,
            "shadow": self.shadow,
            "real": self.real,
            "burstshadow": self.bursts * self.burst_shadows,
            "burstreal": self.bursts,
        }

    def argv(self) -> list[str]:
        """The flags that make ``python -m bench.clients.fire`` follow this plan."""
        return [
            "--warmup", str(self.warmup),
            "--shadow", str(self.shadow),
            "--real", str(self.real),
            "--bursts", str(self.bursts),
            "--burst-shadows", str(self.burst_shadows),
            *(["--burst-real-apart"] if self.burst_real_apart else []),
        ]  # fmt: skip


def fire_cid(phase: str, index: int) -> str:
    """The correlation id of wake ``index`` of ``phase``."""
    return f"fire-{phase}-{index:06d}"


def phase_of(correlation_id: str) -> str | None:
    """The phase a correlation id names, or None for a row that is not the fire client's."""
    parts = correlation_id.split("-")
    if len(parts) == 3 and parts[0] == "fire" and parts[1] in PHASES:
        return parts[1]
    return None


def interleaved(shadow: int, real: int) -> list[bool]:
    """The quiet order: ``real`` True entries spread evenly among ``shadow`` False ones."""
    order: list[bool] = []
    placed = 0
    for index in range(shadow):
        order.append(False)
        while placed < real and (placed + 1) * shadow <= (index + 1) * real:
            order.append(True)
            placed += 1
    return order + [True] * (real - placed)


def fire_frame(cid: str, *, dry_run: bool, recv_ns: int, domain: str) -> bytes:
    """One fire wake, encoded: the benchmark's wake shape with ``recv_ns`` and the clock domain."""
    message = dataclasses.replace(
        wake_message(cid, time.perf_counter_ns()),
        recv_ns=recv_ns,
        clock_domain=domain,
        dry_run=dry_run,
        exchange_index=FIRE_EXCHANGE_INDEX,
    )
    return encode_frame(message)


class _Acks:
    """Reads acks off a blocking socket and checks each against the id it answers."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._buffer = bytearray()

    def _exactly(self, count: int) -> bytes:
        while len(self._buffer) < count:
            chunk = self._sock.recv(65536)
            if not chunk:
                raise ConnectionError("executor closed the connection mid-ack")
            self._buffer += chunk
        data = bytes(self._buffer[:count])
        del self._buffer[:count]
        return data

    def expect(self, cid: str) -> None:
        ack = decode_wake_ack(self._exactly(body_length(self._exactly(4))))
        if ack.status != "accepted" or ack.correlation_id != cid:
            raise RuntimeError(f"unexpected ack {ack!r} for {cid}")


ClientStamps = dict[str, tuple[int, int, int]]
"""Per correlation id, this client's ``(recv_ns, built_ns, written_ns)``: the market event, the
frame's bytes made, and ``sendall`` returned (the path breakdown's client rows)."""


def _send_wake(
    sock: socket.socket, cid: str, *, dry_run: bool, domain: str, stamps: ClientStamps
) -> None:
    recv_ns = time.perf_counter_ns()
    frame = fire_frame(cid, dry_run=dry_run, recv_ns=recv_ns, domain=domain)
    built_ns = time.perf_counter_ns()
    sock.sendall(frame)
    stamps[cid] = (recv_ns, built_ns, time.perf_counter_ns())


def write_client_stamps(path: str, stamps: ClientStamps) -> None:
    """``correlation_id,built_us,written_us`` per wake, in µs after its ``recv_ns``."""
    with open(path, "w", encoding="ascii") as out:
        out.write("correlation_id,built_us,written_us\n")
        for cid, (recv_ns, built_ns, written_ns) in stamps.items():
            out.write(
                f"{cid},{(built_ns - recv_ns) / 1000:.1f},{(written_ns - recv_ns) / 1000:.1f}\n"
            )


def read_client_stamps(path: str) -> dict[str, tuple[float, float]]:
    """What :func:`write_client_stamps` wrote: per correlation id, ``(built_us, written_us)``."""
    found: dict[str, tuple[float, float]] = {}
    with open(path, encoding="ascii") as lines:
        next(lines, None)
        for line in lines:
            cid, built, written = line.rstrip("\n").split(",")
            found[cid] = (float(built), float(written))
    return found


def _quiet(
    sock: socket.socket, acks: _Acks, plan: FirePlan, domain: str, stamps: ClientStamps
) -> None:
    sequence: Iterator[tuple[str, int, bool]] = iter(
        [("warmshadow", i, False) for i in range(plan.warmup)]
        + [("warmreal", i, True) for i in range(plan.warmup)]
    )
    counters = {"shadow": 0, "real": 0}
    kept = []
    for is_real in interleaved(plan.shadow, plan.real):
        phase = "real" if is_real else "shadow"
        kept.append((phase, counters[phase], is_real))
        counters[phase] += 1
    for phase, index, is_real in [*sequence, *kept]:
        cid = fire_cid(phase, index)
        _send_wake(sock, cid, dry_run=not is_real, domain=domain, stamps=stamps)
        acks.expect(cid)
        time.sleep(REAL_GAP_S if is_real else SHADOW_GAP_S)


def _bursts_apart(
    sock: socket.socket,
    acks: _Acks,
    apart: tuple[socket.socket, _Acks],
    plan: FirePlan,
    domain: str,
    stamps: ClientStamps,
) -> None:
    """Each burst's shadows on ``sock``, all acked, then its real wake on the other connection."""
    shadow_index = 0
    for burst in range(plan.bursts):
        sent: list[str] = []
        for _ in range(plan.burst_shadows):
            cid = fire_cid("burstshadow", shadow_index)
            shadow_index += 1
            _send_wake(sock, cid, dry_run=True, domain=domain, stamps=stamps)
            sent.append(cid)
        for cid in sent:
            acks.expect(cid)
        real_sock, real_acks = apart
        cid = fire_cid("burstreal", burst)
        _send_wake(real_sock, cid, dry_run=False, domain=domain, stamps=stamps)
        real_acks.expect(cid)
        time.sleep(BURST_GAP_S)


def _bursts(
    sock: socket.socket, acks: _Acks, plan: FirePlan, domain: str, stamps: ClientStamps
) -> None:
    middle = plan.burst_shadows // 2
    shadow_index = 0
    for burst in range(plan.bursts):
        sent: list[str] = []
        for position in range(plan.burst_shadows + 1):
            is_real = position == middle
            if is_real:
                cid = fire_cid("burstreal", burst)
            else:
                cid = fire_cid("burstshadow", shadow_index)
                shadow_index += 1
            _send_wake(sock, cid, dry_run=not is_real, domain=domain, stamps=stamps)
            sent.append(cid)
        for cid in sent:
            acks.expect(cid)
        time.sleep(BURST_GAP_S)


def run_plan(socket_path: str, plan: FirePlan, domain: str) -> ClientStamps:
    """Send every phase of ``plan`` on one connection; every ack read and checked; the stamps."""
    stamps: ClientStamps = {}
    with (
        socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock,
        socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as second,
    ):
        sock.connect(socket_path)
        acks = _Acks(sock)
        _quiet(sock, acks, plan, domain, stamps)
        if plan.burst_real_apart:
            second.connect(socket_path)
            _bursts_apart(sock, acks, (second, _Acks(second)), plan, domain, stamps)
        else:
            _bursts(sock, acks, plan, domain, stamps)
    return stamps


def main(argv: list[str] | None = None) -> int:
    """Run the plan the flags describe; 0 when every ack came back accepted and in order."""
    parser = argparse.ArgumentParser(prog="python -m bench.clients.fire", description=__doc__)
    parser.add_argument("--socket", required=True, help="executor's Unix socket")
    parser.add_argument("--warmup", type=int, default=FirePlan.warmup)
    parser.add_argument("--shadow", type=int, default=FirePlan.shadow)
    parser.add_argument("--real", type=int, default=FirePlan.real)
    parser.add_argument("--bursts", type=int, default=FirePlan.bursts)
    parser.add_argument("--burst-shadows", type=int, default=FirePlan.burst_shadows)
    parser.add_argument(
        "--burst-real-apart",
        action="store_true",
        help="each burst's real wake on a second connection, once the burst is acked",
    )
    parser.add_argument(
        "--clock-domain",
        default=None,
        help="override the clock domain stamped on wakes (tests: a foreign clock)",
    )
    parser.add_argument(
        "--stamps", default=None, help="write each wake's client stamps (CSV) to this file"
    )
    args = parser.parse_args(argv)
    plan = FirePlan(
        args.warmup,
        args.shadow,
        args.real,
        args.bursts,
        args.burst_shadows,
        burst_real_apart=args.burst_real_apart,
    )
    domain = clock_domain() if args.clock_domain is None else args.clock_domain
    try:
        stamps = run_plan(args.socket, plan, domain)
        if args.stamps is not None:
            write_client_stamps(args.stamps, stamps)
    except (OSError, RuntimeError) as error:
        print(f"bench.clients.fire: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
