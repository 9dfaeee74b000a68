"""The clients: processes that drive an executor over its socket, as a poller would.

``latency`` (blocking, asyncio and Trio pollers), ``fire`` (the fire-path client), ``soak``
(pipelined load, fuzz, vanishing peers), ``reference_burst`` (the reference poller's burst and its
drop policy) and ``frames`` (the one wake shape they send). They import only the executor's wire
protocol and clock, and each other's ``frames``.
"""
