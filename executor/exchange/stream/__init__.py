"""The exchange's WebSocket stream: the connection and its keep-alive (``client``), its life in
numbers (``state``), the messages it carries (``messages``), and applying them to the orders being
followed (``orders``).

May import the exchange's face, ``executor.exchange.follow``, recording and the foundation.
"""
