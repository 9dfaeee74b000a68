"""The baselines: executors this project is measured against, built here for the comparison.

``executor`` is the reference's loop shape on asyncio streams (default loop or uvloop), ``fire``
its aiohttp order path, ``rowwriter`` its telemetry thread, ``floor`` this executor's per-frame
code without Trio (the interpreter's floor). They borrow the executor's pure parts (the wake
protocol, order bodies, the signer, the stage rows) so the comparison is of loops, not of
encodings; nothing of the harness's other rooms.
"""
