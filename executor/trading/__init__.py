"""The composition root: the one place that knows every layer.

``exchange_side`` opens the exchange end at start-up (key, pre-warmed client, signing workers, the
in-process fake when asked); ``assembly`` builds the rest of the order path over it (reconciliation,
the stream, the book guard, warm start, pollers, the heartbeat) and takes it down in order;
``factory`` hands the server the two stages in the order it enters them; ``counters`` gathers the
order path's counters from the objects that keep them; ``kill_command`` is ``executor killswitch``
(the switch file, and the kill carried to the exchange); ``group_command`` is ``executor group
reset`` (resuming after the exchange triggered the order group). May import every layer below the
service; never ``executor.server`` or the command line.
"""
