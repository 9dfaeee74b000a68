"""The reports: what an invocation prints and leaves behind (CSVs, history, machine facts, PNGs).

``stats`` is the one percentile definition (the reference harness's type-7), ``output`` the files
and printed lines of every run, ``fire`` the fire path's comparisons. Reports read results; they
start nothing.
"""
