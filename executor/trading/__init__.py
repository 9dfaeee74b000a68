"""The composition root: the one place that knows every layer.

``exchange_side`` opens the exchange end at start-up (key, pre-warmed client, signing workers,
the in-process fake when asked); ``assembly`` builds the rest of the order path over it
(reconciliation, the stream, the book guard, warm start, pollers) and takes it down in order;
``kill_command`` wires ``executor killswitch`` to the exchange. May import every layer below the
service; never ``executor.server`` or the command line.
"""
