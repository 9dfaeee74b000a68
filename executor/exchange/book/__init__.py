"""The book: cancelling resting orders (``cancels``), the exchange-side order group
(``order_group``) and its lifecycle (``run_group``: one per installation, found again at each
start), the guard that acts on the kill switch (``guard``), the offline kill (``offline_kill``,
behind ``executor killswitch engage``) and the offline reset (``offline_reset``, behind
``executor group reset``).

May import every room of the exchange below it, the decision (the kill switch's view),
configuration, recording, runtime and the foundation.
"""
