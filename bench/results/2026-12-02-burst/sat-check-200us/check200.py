"""The experiment of this folder (run from the repository root as ``cmd:.venv/bin/python
bench/results/2026-12-02-burst/sat-check-200us/check200.py serve``): the executor as shipped at
fca42ac, with held shadows looking for a waiting frame every 200 µs of starts instead of 50.
Not adopted (RESULTS.md 2026-12-02, "looking for a waiting frame")."""

import sys

from executor.wire.handoff import FireHandoff

if __name__ == "__main__":
    kwdefaults = FireHandoff.__init__.__kwdefaults__
    assert kwdefaults is not None
    kwdefaults["check_ns"] = 200_000
    from executor.cli import main

    sys.exit(main(sys.argv[1:]))
