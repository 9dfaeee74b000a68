"""Helpers the tests share: in-process and subprocess executors, order-path fakes, counters."""
