"""The process's plumbing: signals, readiness notification (``notify``), CPU placement, the
collector's settings (``gc_settings``) and file locks.

Each module talks to the operating system for the service and knows nothing of orders. May import
the foundation and ``executor.config``; every layer above may import it.
"""
