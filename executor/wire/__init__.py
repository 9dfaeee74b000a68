"""The wire: the wake protocol's bytes, the Unix socket (owner-only unless a group is given it)
and its lock, one connection's life (``session``) and its frame loop (``connection``: read, stamp,
decode, ack, record, fire), its batches of acks (``batch``), the hand-off to the fires
(``handoff``), and a small Trio client.

Owns everything that touches the poller's frames. May import the foundation (``executor.clock``,
``executor.logs``), ``executor.runtime`` (the socket's lock file), ``executor.recording`` and
``executor.telemetry`` (the connection loop records each wake's row); nothing that decides or
places an order (a fire is handed over as a callable). ``protocol`` itself is sans-I/O.
"""
