#!/bin/bash
# --saturation, 5 runs: main, the final commit with --writer-priority low.
set -e
OUT=$1
PY=/work/wt/pauses2/.venv/bin/python
mkdir -p $OUT
cd /tmp/p2/bench
E="trio"
E="$E,cmd:env PYTHONPATH=/tmp/p2/final $PY -P -m executor serve --writer-priority low"
bash /tmp/p2/run.sh $OUT 0 -- $PY -m bench --saturation --executors "$E" --runs 5 --no-history --out $OUT/out
