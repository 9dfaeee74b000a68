"""The decision: whether an accepted wake becomes an order, and which one.

Price checks and the snap to the market's tick grid, sizing, the kill switch, the risk gate and the
order request the exchange layer is handed. Pure and synchronous where it can be (the kill switch
reads one file, cached); no sockets, no telemetry. May import the foundation and
``executor.wire.protocol`` (the wake it decides on); nothing from the exchange, recording or
service layers.
"""
