"""The fire path: an accepted wake, decided once and executed once.

``path`` asks ``executor.decide`` for a decision and hands it to ``executor.exchange``, counting
every outcome; ``assembly`` builds the order path at start-up (key, warm start, pre-warmed client,
the fake when asked) and takes it down in order. May import every layer below the service
(``executor.decide``, ``executor.exchange``, ``executor.recording``, ``executor.telemetry``,
``executor.config``, ``executor.fake``); never ``executor.server`` or the command line.
"""
