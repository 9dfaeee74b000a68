"""An order's durable record: the intent journal that survives a SIGKILL (``intent_journal``) and
its replay at start-up (``journal_replay``); the order state the table holds (``terms``: which rows
are open, the ``error_message`` words, and how far an order has gone, the order ledger's and the
journal replay's one forward-only rank); and what start-up reads back (``open_orders``,
``recent_orders`` for the risk gate's warm start, ``groups`` for the order group, ``installation``
for this installation's order-id prefix).

Part of ``executor.recording``: may import the rest of it and what it may import.
"""
