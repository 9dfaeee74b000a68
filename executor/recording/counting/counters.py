"""The counters the executor reports: snapshots for the exit lines and the metrics endpoint.

Plain values, no I/O. Which counters exist is ``executor.recording.counting.counter_list``'s alone:
a snapshot here holds one value per entry of its list, and the exit lines and the metrics are read
off the list. The server fills a :class:`ServerStatistics` from its own counters, the fire path's
and the order path's (gathered by ``executor.trading``); the telemetry consumer keeps a
:class:`TelemetryCounters` that ``Telemetry.statistics()`` turns into a
:class:`TelemetryStatistics`. The command line prints both at exit (their ``exit_line``), and
``executor.recording.counting.metrics`` serves the same values to Prometheus. They live in this low
layer so the metrics endpoint can read them without importing the server or the telemetry channel
that produce them.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import ClassVar

from executor.recording.counting.counter_list import (
    SERVER_COUNTERS,
    TELEMETRY_COUNTERS,
    CounterSpec,
)


class CounterValues:
    """One value per counter of a list (:attr:`counters`), read as an attribute or by name;
    read-only.

    Built from keyword arguments: a name not in the list is a TypeError (a typo must not pass),
    a name left out is 0 (its owner is absent, e.g. the stream without ``--stream``).
    """

    __slots__ = ("_values",)
    _values: dict[str, int]
    counters: ClassVar[tuple[CounterSpec, ...]] = ()

    def __init__(self, **values: int) -> None:
        unknown = values.keys() - {spec.name for spec in self.counters}
        if unknown:
            raise TypeError(f"{type(self).__name__} has no counter {', '.join(sorted(unknown))}")
        values_now = {spec.name: int(values.get(spec.name, 0)) for spec in self.counters}
        object.__setattr__(self, "_values", values_now)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is a read-only snapshot (cannot set {name})")

    def __getattr__(self, name: str) -> int:
        try:
            return self._values[name]
        except (KeyError, AttributeError):  # AttributeError: ``_values`` not set yet (copying)
            raise AttributeError(f"{type(self).__name__} has no counter {name!r}") from None

    def __getitem__(self, name: str) -> int:
        return self._values[name]

    def __iter__(self) -> Iterator[tuple[CounterSpec, int]]:
        """Each counter of the list with its value, in the list's order."""
        return ((spec, self._values[spec.name]) for spec in self.counters)

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        assert isinstance(other, CounterValues)
        return self._values == other._values

    def __hash__(self) -> int:
        return hash(tuple(self._values.items()))

    def __repr__(self) -> str:
        values = ", ".join(f"{name}={value}" for name, value in self._values.items() if value)
        return f"{type(self).__name__}({values})"

    def as_dict(self) -> dict[str, int]:
        """Every counter by name, in the list's order."""
        return dict(self._values)

    def key_values(self) -> str:
        """The exit line's ``key=value`` pairs: the list's exit-line counters, in its order."""
        return " ".join(f"{spec.name}={value}" for spec, value in self if spec.on_exit_line)


class ServerStatistics(CounterValues):
    """Counters of frames, fires and the order path since start (``SERVER_COUNTERS``)."""

    __slots__ = ()
    counters = SERVER_COUNTERS

    def exit_line(self) -> str:
        """The first exit line: the C++ port's key=value format plus this executor's keys."""
        return self.key_values()


class TelemetryStatistics(CounterValues):
    """A snapshot of the telemetry counters (``TELEMETRY_COUNTERS``).

    The first four count ``latency_events`` rows only. ``batches_committed`` counts batches
    committed as one transaction (a batch retried row by row does not count); ``queued`` is the
    rows in the channel at the time of the snapshot (every kind). ``order_rows_written`` and
    ``order_rows_dropped`` count ``orders_fired`` rows (dropped: a pending row that found the
    channel full, an undroppable row that found no room in time, a row the database refused).
    """

    __slots__ = ()
    counters = TELEMETRY_COUNTERS

    def exit_line(self) -> str:
        """The second exit line: where every latency row and every order row went."""
        return f"telemetry {self.key_values()}"


@dataclass(slots=True)
class TelemetryCounters:
    """The live telemetry counters, mutated only from the Trio thread.

    Every latency row handed to ``Telemetry.record`` ends up in exactly one of ``rows_written``,
    ``dropped_ring_full``, ``dropped_oversized_id`` or ``dropped_write_failed``.
    """

    rows_written: int = 0
    dropped_ring_full: int = 0
    dropped_oversized_id: int = 0
    dropped_write_failed: int = 0
    batches_committed: int = 0
    order_rows_written: int = 0
    order_rows_dropped: int = 0
    audit_outages: int = 0
    audit_available: bool = True
    """False from a failed audit write (order or heartbeat row) until one succeeds again."""
    order_rows_kept: int = 0
    journal_replayed: int = 0
    journal_torn: int = 0
    intents_unrecorded: int = 0

    def snapshot(self, queued: int, owed: int = 0) -> TelemetryStatistics:
        """The counters now, with ``queued`` rows waiting in the channel and ``owed`` rows
        waiting for the audit trail."""
        return TelemetryStatistics(
            rows_written=self.rows_written,
            dropped_ring_full=self.dropped_ring_full,
            dropped_oversized_id=self.dropped_oversized_id,
            dropped_write_failed=self.dropped_write_failed,
            queued=queued,
            batches_committed=self.batches_committed,
            order_rows_written=self.order_rows_written,
            order_rows_dropped=self.order_rows_dropped,
            audit_outages=self.audit_outages,
            audit_unavailable=int(not self.audit_available),
            order_rows_kept=self.order_rows_kept,
            journal_replayed=self.journal_replayed,
            journal_torn=self.journal_torn,
            intents_unrecorded=self.intents_unrecorded,
            order_rows_owed=owed,
        )


__all__ = [
    "CounterValues",
    "ServerStatistics",
    "TelemetryCounters",
    "TelemetryStatistics",
]
