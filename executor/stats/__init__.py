"""``executor stats`` and ``executor orders``: the commands, their read-only queries over a
telemetry database (``queries``, ``audit_queries``), their output and PNG, and the project's one
percentile definition (which the benchmark uses too).

Reads files the executor wrote and never runs beside the event loop. May import the foundation,
``executor.runtime`` (exit statuses) and ``executor.recording`` (the file's default path, schema,
row types and order-state words); nothing that serves or trades.
"""
