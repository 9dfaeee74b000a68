"""The decision: whether an accepted wake becomes an order, and which one.

``decision`` is the layer's one entry point: ``Decider.decide`` takes a wake and returns one value,
a refusal (its kind, its reason, the request its ``rejected`` row describes) or an order to place,
real or shadow, with the risk gate's ticket for the side that sends it. Below it: ``prices`` (the
price checks, the snap to the tick grid, the request and its cached template), ``sizing``,
``risk`` (the gate's rules and windows) and ``order_request`` (the request type the exchange layer
is handed).

Pure and synchronous: no file, SQLite, environment or socket of its own, no telemetry, no
logging (``tests/test_layers.py`` checks its imports). What it consults is handed to it: the kill
switch as a view (``decision.KillSwitchState``; the file is ``executor.runtime.kill_switch``), the
balance, the audit trail's state, the risk limits (``executor.config``) and the warm start's rows
(read by ``executor.recording.orders.recent_orders``). May import the foundation,
``executor.config``, ``executor.recording`` (row types) and ``executor.wire.protocol`` (the wake it
decides on); nothing from the exchange or service layers.
"""
