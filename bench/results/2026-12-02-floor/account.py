"""Scratch accounting variants (not product, not committed as variants): run executor serve with
one piece of the per-frame work taken out, to see its share of the loop thread's CPU a frame.

  python account.py no-shadow-fires|no-rows serve ARGS
"""
import sys

from bench.experiments import variants


def no_shadow_fires() -> None:
    from executor import server

    start_fire = server.ExecutorServer._start_fire

    def patched(self, message, read_ns, acked_ns):  # type: ignore[no-untyped-def]
        if message.dry_run:
            return
        start_fire(self, message, read_ns, acked_ns)

    server.ExecutorServer._start_fire = patched


def no_rows() -> None:
    from executor import telemetry

    telemetry.Telemetry.record = lambda self, row: None


def queue_rows() -> None:
    """Rows go to a SimpleQueue and a thread of their own (as bench.baselines.floor), not
    through the memory channel and the consumer task: the channel then stays empty."""
    import queue
    import threading
    from pathlib import Path

    from executor import telemetry
    from executor.recording.database import close_database, open_database
    from executor.recording.sqlite_writer import write_batch

    state: dict[str, object] = {}

    def writer(q, counters, path):  # type: ignore[no-untyped-def]
        connection, _ = open_database(path)
        done = False
        while not done:
            first = q.get()
            if first is None:
                break
            rows = [first]
            while len(rows) < 500:
                try:
                    row = q.get_nowait()
                except queue.Empty:
                    break
                if row is None:
                    done = True
                    break
                rows.append(row)
            outcome = write_batch(connection, rows)
            counters.rows_written += outcome.rows_written
        close_database(connection, path)

    def record(self, row):  # type: ignore[no-untyped-def]
        q = state.get("q")
        if q is None:
            q = state["q"] = queue.SimpleQueue()
            path = Path(self.audit_trail._path)
            thread = threading.Thread(target=writer, args=(q, self._counters, path))
            thread.start()
            state["thread"] = thread
        if q.qsize() >= 8192:
            self._counters.dropped_ring_full += 1
        else:
            q.put(row)

    original_close = telemetry.Telemetry.close

    def close(self):  # type: ignore[no-untyped-def]
        q = state.get("q")
        if q is not None:
            q.put(None)
            state["thread"].join()
        original_close(self)

    telemetry.Telemetry.record = record
    telemetry.Telemetry.close = close


def batch_64() -> None:
    from executor.wire import batch

    batch.MAX_BATCH_FRAMES = 64


def checkpoint_every_4() -> None:
    import trio

    from executor.wire import connection

    state = {"n": 0}

    async def patched(conn):  # type: ignore[no-untyped-def]
        if not conn.waited:
            state["n"] += 1
            if state["n"] % 4 == 0:
                await trio.lowlevel.checkpoint()

    connection._checkpoint_unless_waited = patched


def direct_decide() -> None:
    """A shadow wake without an exchange goes straight to the decision: no _start_fire, no
    FirePath.start / fire_now layers (what the floor calls)."""
    from executor import server
    from executor.decide.decision import Decider

    start_fire = server.ExecutorServer._start_fire
    decider = Decider()

    def patched(self, message, read_ns, acked_ns):  # type: ignore[no-untyped-def]
        if message.dry_run:
            decider.decide(message)
            return
        start_fire(self, message, read_ns, acked_ns)

    server.ExecutorServer._start_fire = patched


def hold_64() -> None:
    from executor.wire import handoff

    handoff.MAX_DEFERRED_SHADOWS = 64


def gc_off() -> None:
    import gc

    gc.disable()


def hold_8() -> None:
    from executor.wire import handoff

    handoff.MAX_DEFERRED_SHADOWS = 8


variants.VARIANTS["hold-8"] = hold_8
variants.VARIANTS["hold-64"] = hold_64
variants.VARIANTS["gc-off"] = gc_off
variants.VARIANTS["direct-decide"] = direct_decide
variants.VARIANTS["batch-64"] = batch_64
variants.VARIANTS["checkpoint-every-4"] = checkpoint_every_4
variants.VARIANTS["queue-rows"] = queue_rows
variants.VARIANTS["no-shadow-fires"] = no_shadow_fires
variants.VARIANTS["no-rows"] = no_rows
sys.exit(variants.main())
