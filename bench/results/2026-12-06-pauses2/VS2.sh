#!/bin/bash
# --saturation, 5 runs: main, the branch (d83c2d4), the branch with --writer-priority normal (bounded reads only), main with the writer at nice 5 only (scratch knob).
set -e
OUT=$1
PY=/work/wt/pauses2/.venv/bin/python
mkdir -p $OUT
cd /tmp/p2/bench
E="trio"
E="$E,cmd:env PYTHONPATH=/tmp/p2/new2 $PY -P -m executor serve"
E="$E,cmd:env PYTHONPATH=/tmp/p2/new2 $PY -P -m executor serve --writer-priority normal"
E="$E,cmd:env P2_NICE=5 PYTHONPATH=/tmp/p2/var $PY -P -m executor serve"
bash /tmp/p2/run.sh $OUT 0 -- $PY -m bench --saturation --executors "$E" --runs 5 --no-history --out $OUT/out
