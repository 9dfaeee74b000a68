"""Following orders to their end: the order ledger, the one owner of every order's row and of the
fills told to the risk gate (``ledger``, pure, over what the sources tell it: ``observation``;
``ledger_keeper``, its Trio side), lookups (``lookup``, ``lookup_try``), reconciliation
(``reconcile``, ``reconcile_terms``), follow-up of resting orders (``follow_up``), adoption of
orders this installation placed but has no row for (``adoption``), and the account poll
(``account``).

May import the exchange's face (messages, protocols, the REST reader), the decision (the risk
gate it tells of fills), recording and the foundation; never the order path, the stream or the
book.
"""
