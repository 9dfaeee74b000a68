"""``executor stats``: the command, its read-only queries over a telemetry database, its PNG, and
the project's one percentile definition (which the benchmark uses too).

Reads files the executor wrote and never runs beside the event loop. May import the foundation and
``executor.recording`` (the file's default path and schema); nothing that serves or trades.
"""
