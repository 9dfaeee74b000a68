"""The baselines: executors this project is measured against, built here for the comparison.

``executor`` is the reference's loop shape on asyncio streams (default loop or uvloop), ``fire``
its aiohttp order path, ``rowwriter`` its telemetry thread. They may import the executor's
protocol module and ``bench.reports.stats``; nothing in the harness's other rooms.
"""
