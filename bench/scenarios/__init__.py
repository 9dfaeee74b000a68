"""The scenarios: what one run of the harness does with executors and clients.

Latency runs live in ``bench.harness.runner``; here are the burst, fire, fire-path, saturation,
throughput and soak scenarios (``soak_process``: the executor as the soak's subprocess). One-off
experiments live in ``bench.experiments``. They use the clients, the harness's processes and the
executor's own parts; the reports read what they return.
"""
