"""The benchmark's harness: the command line, the runner, starting and placing processes, the
background load and the fake exchange's process.

The top of the benchmark: ``cli`` (``python -m bench``) runs the scenarios with the clients and
hands their results to the reports; ``runner``, ``processes``, ``placement``, ``background`` and
``fake_process`` start, place and stop what a run needs. May import every other room of
``bench``; the executor only as a process it starts.
"""
