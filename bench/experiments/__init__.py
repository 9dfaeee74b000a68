"""Experiments: one-off measurements, never part of a scenario's own run.

``variants`` (``python -m bench.experiments.variants VARIANT serve ARGS``) patches the named
changes into the executor and runs the real ``executor`` command; ``transport_variants`` holds the
order transport's. The rest each answer one question: ``components`` (the parts of a fire, alone),
``shadow_lane``, ``order_wire`` (the order's transport against a TLS stream), ``stats_scale``
(``executor stats`` on a large file), and the stream's ``stream_client``, ``stream_lag`` and
``stream_server``. They may import any part of the executor and the benchmark's harness and
clients.
"""
