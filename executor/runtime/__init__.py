"""The process's plumbing: signals, readiness notification (``notify``), CPU placement, the
collector's settings (``gc_settings``), the writer thread's priority (``thread_priority``), file
locks, the loop's idleness (``idle_loop``), the kill switch file (``kill_switch``), the
commands' exit statuses (``exit_codes``) and their usage errors (``usage``).

Each module talks to the operating system for the service and knows nothing of orders (the kill
switch is a file whose reading the decision is handed). May import the foundation and
``executor.config``; every layer above may import it.
"""
