"""The fire path: an accepted wake, decided once and executed once.

``path`` asks ``executor.decide`` for a decision and hands it to ``executor.exchange``, counting
every outcome (``outcomes``); ``keep_warm`` rehearses the path while it is idle. May import every
layer below it (``executor.decide``, ``executor.exchange``, ``executor.recording``,
``executor.wire.protocol``, ``executor.config``); never the composition root
(``executor.trading``), ``executor.server`` or the command line.
"""
