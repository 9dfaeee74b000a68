"""The scenarios: what one run of the harness (or one experiment) does with executors and clients.

Latency runs live in ``bench.harness.runner``; here are the burst, fire-path, saturation, throughput
and soak scenarios, and the one-off experiments (``components``, ``shadow_lane``, ``order_wire``,
``stats_scale``; the variants that patch the executor are ``bench.experiments``). They use the
clients and the processes; the reports read what they return.
"""
