"""The trio-executor benchmark: executors and clients compared in one run (BENCH.md)."""
