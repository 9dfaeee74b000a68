"""The exchange: executing a decided order and keeping the account in view.

Order bodies and response parsing (sans-I/O), the order rate limit, the signing worker, the HTTPS
transport, the dispatcher and its ``orders_fired`` rows, the shadow lane, the fire's stamps and
stage rows, and the account poll. May import the foundation, ``executor.signer``,
``executor.recording`` (row types), ``executor.wire.protocol`` and ``executor.decide``; never the
fire path or the service above it. The transport itself knows nothing of telemetry or the risk
gate: it hands its stamps back in a plain object.
"""
