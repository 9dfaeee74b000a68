"""The fire path: an accepted wake, decided once and executed once.

``path`` asks ``executor.decide`` for a decision and hands it to ``executor.exchange``, counting
every outcome; ``exchange_side`` opens the exchange end at start-up (key, pre-warmed client,
signing workers, the fake when asked) and ``assembly`` builds the rest of the order path over it
(reconciliation, warm start, pollers) and takes it down in order. May import every layer below the
service (``executor.decide``, ``executor.exchange``, ``executor.recording``, ``executor.telemetry``,
``executor.config``, ``executor.settings``, ``executor.fake``); never ``executor.server`` or the
command line.
"""
