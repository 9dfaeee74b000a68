"""The scenarios: what one run of the harness (or one experiment) does with executors and clients.

Latency runs live in ``bench.harness.runner``; here are the burst, fire-path, saturation, throughput
and soak scenarios (``soak_process``: the executor as the soak's subprocess), and the one-off
experiments (``components``, ``shadow_lane``, ``order_wire``, ``stats_scale``, the stream's
``stream_client``, ``stream_lag`` and ``stream_server``; the variants that patch the executor are
``bench.experiments``). They use the clients, the harness's processes and the executor's own
parts; the reports read what they return.
"""
