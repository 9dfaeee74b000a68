"""What the executor reports: ``counter_list`` (every counter once: name, help, kind, owner, exit
line), ``counters`` (their snapshots and the two exit lines) and ``metrics`` (the ``--metrics``
Prometheus endpoint), each derived from the one list.

Part of ``executor.recording``: may import the rest of it and what it may import.
"""
