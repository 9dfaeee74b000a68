"""Recording: what ``executor.telemetry`` drives.

The row types and the stage vocabulary (``rows``: ``latency_events``, ``orders_fired``,
``heartbeats``), the counters the exit lines and the metrics report (``counters``), the file's
default path and schema (``schema``), the file's life (``database``: open, prove writable,
close), the batches the writer thread commits (``sqlite_writer``), the
batching consumer that feeds it (``consumer``), and the ``--metrics`` Prometheus endpoint
(``metrics``). May import only the foundation (``executor``, ``executor.clock``, ``executor.logs``,
``executor.signer``); every layer above may import it.
"""
