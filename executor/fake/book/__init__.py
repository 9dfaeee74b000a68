"""The fake exchange's book: the account (``account``), its orders (``orders``) and how one is
placed and filled (``placing``), balance and positions (``portfolio``), order groups (``groups``)
and the controls a test or a shell uses (``control``: faults, listing lag, pauses).

Part of ``executor.fake``: may import the foundation only.
"""
