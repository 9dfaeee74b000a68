"""The scenarios: what one run of the harness (or one experiment) does with executors and clients.

Latency runs live in ``bench.runner``; here are the burst, fire-path, saturation, throughput and
soak scenarios, and the one-off experiments (``components``, ``shadow_lane``, ``order_wire``,
``variants``, ``stats_scale``). They use the clients and the processes; the reports read what
they return.
"""
