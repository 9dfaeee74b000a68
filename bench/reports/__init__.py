"""The reports: what an invocation prints and leaves behind (CSVs, history, machine facts, PNGs).

``stats`` is the one percentile definition (the reference harness's type-7), ``output`` the files
and printed lines of every run, ``fire`` and ``fire_path`` the fire path's comparisons and its
breakdown table. Reports read results; they start nothing. They may import the result types of
the runner and the fire scenarios, and ``executor.stats``.
"""
