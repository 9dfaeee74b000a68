"""Experiments: code that patches the executor's internals to measure a variant; never part of
a scenario's own run."""
