"""The fake exchange: a local TLS server that speaks the part of Kalshi's API the executor uses,
verifies every signature, and keeps an account in memory, with its own command
(``python -m executor.fake``).

A test and benchmark fixture, built with the product's care. May import only the foundation; the
executor reaches it over HTTPS, never by calling into it (``executor.trading.assembly`` only starts
it in-process for ``--exchange fake``).
"""
