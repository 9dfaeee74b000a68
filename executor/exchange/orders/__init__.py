"""The order path: a decided order made into bytes, signed, sent over a pre-warmed connection, and
answered.

``template`` and ``presign`` build and sign the body ahead; ``connection``, ``pool``, ``response``
and ``transport`` send it and parse the answer; ``sign_worker`` keeps signing off the hot path
(``executor.runtime.idle_loop`` tells when the loop is idle); ``dispatcher`` (with
``dispatch_terms``, ``rows``, ``stages``) turns a decision into an order and its rows;
``shadow_lane`` runs the measurement fires. May import the exchange's face,
``executor.exchange.follow`` (an order of unknown outcome is handed to the reconciler), the
decision, recording and the foundation.
"""
