"""Recording: what ``executor.telemetry`` drives.

The row types and the stage vocabulary (``latency_events``, ``orders_fired``, ``heartbeats``), the
SQLite schema and the work the writer thread does, and the ``--metrics`` Prometheus endpoint. May
import only the foundation (``executor.clock``, ``executor.logs``); every layer above may import
it.
"""
