"""Recording: the telemetry file and everything written to or read from it, below every layer
that produces rows.

The file (``schema``, ``database``, ``database_lock``), its rows (``rows``) and their writer
(``sqlite_writer``, fed by the batching ``consumer``); what keeps the audit trail whole
(``audit_trail``, ``intent_journal``, ``journal_replay``, ``heartbeat``); the order state the
table holds (``order_terms``: which rows are open, the ``error_message`` words, and how far an
order has gone, the order ledger's and the journal replay's one forward-only rank;
``open_orders``, ``recent_orders``, ``order_groups``, ``installation``: what start-up reads
back); and what the executor reports (``counter_list``: every counter once; ``counters``: their
snapshots and exit lines; ``metrics``: the ``--metrics`` endpoint). May import the foundation
(``executor``, ``executor.clock``, ``executor.logs``, ``executor.signer``), ``executor.config``
and ``executor.runtime``; every layer above may import it.
"""
