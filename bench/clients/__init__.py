"""The clients: processes that drive an executor over its socket, as a poller would.

``latency`` (blocking, asyncio and Trio pollers), ``fire`` (the fire-path client), ``soak``
(pipelined load, fuzz, vanishing peers) and ``frames`` (the one wake shape they send). They import
only the executor's wire protocol and each other's ``frames``.
"""
