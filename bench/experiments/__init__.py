"""Experiments: code that patches the executor's internals to measure a variant; never part of
a scenario's own run.

``variants`` (``python -m bench.experiments.variants VARIANT serve ARGS``) patches the named
changes in and runs the real ``executor`` command; ``transport_variants`` holds the order
transport's. They may import any part of the executor (that is what they patch) and nothing of
the harness.
"""
