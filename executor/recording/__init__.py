"""Recording: the telemetry file and everything written to or read from it, below every layer
that produces rows.

The file (``schema``, ``database``, ``database_lock``), its rows (``rows``) and their writer
(``sqlite_writer``, fed by the batching ``consumer``); what keeps the audit trail whole
(``audit_trail``, ``heartbeat``). Two rooms below: ``orders`` (an order's durable record: the
intent journal, its replay, the order-state words, and what start-up reads back) and
``counting`` (every counter once, their exit lines, the ``--metrics`` endpoint). May import the
foundation (``executor``, ``executor.clock``, ``executor.logs``, ``executor.signer``),
``executor.config`` and ``executor.runtime``; every layer above may import it.
"""
