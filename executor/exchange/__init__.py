"""The exchange: executing a decided order and keeping the account in view.

Order bodies and response parsing (sans-I/O), the order rate limit, the signing worker, the HTTPS
transport, the dispatcher (``OrderDispatcher.execute`` places a decided real order and keeps the
risk gate's books through the decision's ticket; its ``orders_fired`` rows), the shadow lane, the
fire's stamps and stage rows, the account poll, and reconciliation (``order_lookup`` asks
``GET /portfolio/orders``; ``reconcile`` corrects the rows of orders whose outcome was unknown
and follows resting ones). May import the foundation, ``executor.signer``,
``executor.recording`` (row types), ``executor.wire.protocol`` and ``executor.decide``; never the
fire path, telemetry or the service above it (what it writes to is a small Protocol, such as the
dispatcher's ``OrderSink``). The transport itself knows nothing of telemetry or the risk gate: it
hands its stamps back in a plain object.
"""
