"""The decision: whether an accepted wake becomes an order, and which one.

``decision`` is the layer's one entry point: ``Decider.decide`` takes a wake and returns one value,
a refusal (its kind, its reason, the request its ``rejected`` row describes) or an order to place,
real or shadow, with the risk gate's ticket for the side that sends it. Below it: ``prices`` (the
price checks, the snap to the tick grid, the request and its cached template), ``sizing``,
``killswitch``, ``risk`` (the gate's rules and windows), ``risk_limits`` (its limits and their
environment variables), ``recent_orders`` (the warm start's one read of the audit table, at
start-up) and ``order_request`` (the request type the exchange layer is handed).

Pure and synchronous at fire time (the kill switch reads one file, cached; the risk gate reads the
wall clock); no sockets, no telemetry, no logging. May import the foundation (``executor.clock``,
``executor.logs``), ``executor.wire.protocol`` (the wake it decides on) and, for the warm start's
read only, ``executor.recording.database``; nothing from the exchange or service layers.
"""
