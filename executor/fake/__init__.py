"""The fake exchange: a local TLS server that speaks the part of Kalshi's API the executor uses,
verifies every signature, and keeps an account in memory, with its own command
(``python -m executor.fake``).

The server (``exchange``, ``routes``, ``credentials``, ``limits``, ``scratch``, ``cli``) and its
stream (``stream``, ``stream_messages``) over ``book`` (the account, its orders and order groups,
how an order is placed, and the controls a test or a shell uses). A test and benchmark fixture,
built with the product's care. May import only the foundation; the executor reaches it over
HTTPS, never by calling into it (``executor.trading.assembly`` only starts it in-process for
``--exchange fake``).
"""
