"""The exchange: Kalshi's API as the executor uses it, a face over four rooms.

The face: ``messages`` (paths, bodies, errors, sans-I/O), ``protocols`` (every small interface the
rooms share, defined once), ``rest`` (the signed REST reader), ``rate_limits``,
``token_bucket``, ``halts`` (what the exchange itself halts: its trigger of the order group, a
pause; plain state the decision reads) and ``status`` (``GET /exchange/status``, polled). The
rooms: ``orders`` (the order path, from a decided order to its answer and
rows), ``follow`` (lookups, reconciliation, adoption, the account poll), ``stream`` (the
WebSocket stream) and ``book`` (cancels, the order group, the guard, the offline kill). May
import the foundation, ``executor.config``, ``executor.recording`` (row types),
``executor.wire.protocol`` and ``executor.decide``; never the fire path, telemetry or the service
above it (what it writes to is a small Protocol, such as ``protocols.OrderSink``). The transport
knows nothing of telemetry or the risk gate: it hands its stamps back in a plain object.
"""
