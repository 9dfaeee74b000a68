"""Configuration: what the executor is told, as plain typed data, at the bottom of the house.

``variables`` (the ``KALSHI_*`` variables, the ``--env-file``, checked reads and the start-up
errors), ``settings`` (the command line and environment turned into :class:`Settings`), ``book``
(the book's settings: order groups, cancels on engage), ``risk_limits`` and ``sizing`` (the risk
gate's limits and the sizing knobs), ``coherence`` (whether the two agree, said at start-up).
Imports nothing of the executor above ``executor.clock``; every layer may import it.
"""
