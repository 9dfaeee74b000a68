"""The book: cancelling resting orders (``cancels``), the exchange-side order group
(``order_group``), the guard that acts on the kill switch (``guard``), and the offline kill
(``offline_kill``, behind ``executor killswitch engage``).

May import every room of the exchange below it, the decision (the kill switch's view),
configuration, recording, runtime and the foundation.
"""
